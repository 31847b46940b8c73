-- Each record's own checks (its rules, token spans and personal data), kept by `validate --per-record` in the store
-- that made the record (a shard store on an array task's node), so that the validation of a store it was merged into
-- reads them instead of checking that record again (issue 29): only the checks that need every record then run
-- there. Read back only under the same checks_profile; a later --per-record run replaces a record's row.
CREATE TABLE record_checks (
    record_id      VARCHAR NOT NULL,
    spec_hash      VARCHAR NOT NULL,
    checks_profile VARCHAR NOT NULL,     -- what the checks depend on besides the record (run_store.checks_profile)
    checked        JSON NOT NULL,        -- the record's checks as validators.run_store keeps them
    checked_at     TIMESTAMP NOT NULL
);
