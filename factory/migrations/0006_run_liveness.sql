-- Run liveness: the process that runs a run. A store opened for writing holds DuckDB's write lock, so a
-- run still 'running' then belongs to a process that is gone (kill -9, crash) and is marked 'interrupted'.
ALTER TABLE runs ADD COLUMN pid INTEGER;
