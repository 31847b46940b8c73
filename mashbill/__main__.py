from mashbill.cli import main

main()
