"""The `mashbill` command line."""
import click

@click.group()
def main():
    """Mashbill."""
