"""Files that run inside the argilla-server virtual environment (never imported by mashbill itself).

- ``launcher``: Start argilla-server on SQLite with the SQL search engine and an in-process fake Redis.
- ``sqlsearch``: A search engine for argilla-server that answers from the server's own SQL database.
"""
