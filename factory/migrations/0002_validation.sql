-- Validation runs: a record counts as validated once a validation run covered it, findings or not.
CREATE TABLE validation_runs (
    validation_id VARCHAR PRIMARY KEY,
    spec_hash     VARCHAR,
    source        VARCHAR NOT NULL,          -- 'store' or the path of an external file
    started_at    TIMESTAMP NOT NULL,
    finished_at   TIMESTAMP,
    records       INTEGER,
    counts        JSON,                      -- verdict code -> count
    report        JSON
);

CREATE TABLE record_validations (
    record_id     VARCHAR NOT NULL,
    validation_id VARCHAR NOT NULL,
    validated_at  TIMESTAMP NOT NULL,
    passed        BOOLEAN NOT NULL           -- no reject-severity verdict from this validation
);
CREATE INDEX record_validations_record ON record_validations (record_id);
