"""Files that run inside the argilla-server virtual environment (never imported by mashbill itself):
`launcher.py` starts the server, `sqlsearch.py` is its SQL search engine."""
