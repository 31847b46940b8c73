-- Repair with the verdict, best-of-n and votes (issue 27, factory.chains): every answer the teacher gave for a
-- record, in order. The record row holds the one that counts (the last attempt, or the vote's majority); earlier
-- attempts are never overwritten.
CREATE TABLE record_attempts (
    record_id      VARCHAR NOT NULL,         -- the record whose chain this is
    attempt        INTEGER NOT NULL,         -- 1: the first answer; 2, 3, ...: more samples or repairs
    sample         INTEGER NOT NULL,         -- the best-of-n / vote sample it belongs to (seed + sample)
    repairs        INTEGER,                  -- the attempt this one repairs (attempt - 1); NULL for the first
    run_id         VARCHAR NOT NULL,
    status         VARCHAR NOT NULL,         -- accepted | rejected
    output         JSON,
    raw            VARCHAR,
    verdicts       JSON NOT NULL,            -- [{code, severity, detail, stage}] of this attempt
    feedback       VARCHAR,                  -- the user turn that asked for this attempt (NULL for the first)
    tokens_in      INTEGER,
    tokens_cached  INTEGER,
    tokens_out     INTEGER,
    teacher_s      DOUBLE,
    calls          INTEGER,
    created_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (record_id, attempt)
);
-- the turn of a record's conversation a teacher call answered (1: the first answer, 2...: repairs)
ALTER TABLE teacher_calls ADD COLUMN turn INTEGER DEFAULT 1;
