-- Router datasets (issue 14). Queries have a stable id (sha256 of the normalised text, or the source's own id)
-- and are stored once; outcome rows refer to them by id, one row per (query, model, source).
CREATE TABLE router_queries (
    query_id    VARCHAR PRIMARY KEY,
    text        VARCHAR NOT NULL,
    source      VARCHAR NOT NULL,           -- the file or spec that first brought the query
    meta        JSON,                       -- e.g. {"subject": "anatomy"}
    added_at    TIMESTAMP NOT NULL
);

CREATE TABLE router_outcomes (
    query_id    VARCHAR NOT NULL,
    model       VARCHAR NOT NULL,
    source      VARCHAR NOT NULL,           -- 'import:<file name>' or 'spec:<name@version>'
    record_id   VARCHAR,                    -- the generated record (spec outcomes), NULL for imports
    correct     BOOLEAN,                    -- reference check, or judge score >= the pass mark
    score       DOUBLE,                     -- judge score scaled to 0..1, when a judge scored it
    judge       VARCHAR,                    -- 'reference:<check>' or the judge's name
    cost        DOUBLE,
    latency_s   DOUBLE,
    tokens_in   INTEGER,
    tokens_out  INTEGER,
    added_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (query_id, model, source)
);

-- One row per import or materialisation: what was read, kept and left out (with file:row and code).
CREATE TABLE router_imports (
    import_id   VARCHAR PRIMARY KEY,
    source      VARCHAR NOT NULL,
    started_at  TIMESTAMP NOT NULL,
    rows_read   INTEGER NOT NULL,
    rows_kept   INTEGER NOT NULL,
    problems    JSON                        -- [{"where": "file:row", "code": "OUT002", "detail": ...}]
);
