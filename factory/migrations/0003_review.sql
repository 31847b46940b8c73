-- Human review decisions pulled from Argilla (or any review tool). One row per reviewer response;
-- a re-pull replaces a reviewer's earlier row for the same record.
CREATE TABLE review_decisions (
    record_id         VARCHAR NOT NULL,
    reviewer          VARCHAR NOT NULL,
    status            VARCHAR NOT NULL,     -- submitted | discarded | draft
    decision          VARCHAR,              -- accept | reject | NULL (no decision given)
    corrected_output  JSON,                 -- the reviewer's corrected output, when given
    correction_valid  BOOLEAN,              -- the correction re-validated through the same rules
    correction_issues JSON,                 -- codes found on an invalid correction
    response_values   JSON NOT NULL,        -- every answered question, as given
    responded_at      TIMESTAMP,
    pulled_at         TIMESTAMP NOT NULL,
    dataset           VARCHAR               -- the review dataset it came from
);
CREATE INDEX review_decisions_record ON review_decisions (record_id);
