-- Runs: one row per `mashbill generate` invocation (a resume is a new run over the same spec hash).
CREATE TABLE runs (
    run_id        VARCHAR PRIMARY KEY,
    spec_name     VARCHAR NOT NULL,
    spec_version  INTEGER NOT NULL,
    spec_hash     VARCHAR NOT NULL,
    kind          VARCHAR NOT NULL,
    backend       VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    model_sha256  VARCHAR,
    model_info    JSON,
    sampling      JSON NOT NULL,
    shard         VARCHAR,
    status        VARCHAR NOT NULL,          -- running | completed | interrupted | aborted | failed
    started_at    TIMESTAMP NOT NULL,
    finished_at   TIMESTAMP,
    requested     INTEGER DEFAULT 0,
    skipped       INTEGER DEFAULT 0,
    accepted      INTEGER DEFAULT 0,
    rejected      INTEGER DEFAULT 0,
    failed        INTEGER DEFAULT 0,
    tokens_in     BIGINT DEFAULT 0,
    tokens_out    BIGINT DEFAULT 0,
    teacher_s     DOUBLE DEFAULT 0,
    wall_s        DOUBLE DEFAULT 0,
    cost          DOUBLE,
    tool_version  VARCHAR NOT NULL,
    hostname      VARCHAR,
    args          JSON
);

-- Records: every record the teacher was asked for, accepted or not. id = sha256(spec hash, canonical input).
CREATE TABLE records (
    record_id     VARCHAR PRIMARY KEY,
    run_id        VARCHAR NOT NULL,
    spec_name     VARCHAR NOT NULL,
    spec_version  INTEGER NOT NULL,
    spec_hash     VARCHAR NOT NULL,
    kind          VARCHAR NOT NULL,
    status        VARCHAR NOT NULL,          -- accepted | rejected | failed
    input         JSON NOT NULL,
    output        JSON,                      -- parsed teacher output; NULL only when it did not parse
    raw           VARCHAR,                   -- the teacher's text, always kept
    messages      JSON NOT NULL,             -- the training example's prompt (system, user)
    meta          JSON NOT NULL,             -- taxonomy shown, prompt variant, language...
    created_at    TIMESTAMP NOT NULL
);
CREATE INDEX records_spec ON records (spec_hash);

-- Verdicts: one row per finding on a record; a rejected record has at least one with severity 'reject'.
CREATE TABLE verdicts (
    record_id     VARCHAR NOT NULL,
    run_id        VARCHAR NOT NULL,
    stage         VARCHAR NOT NULL,          -- generate | validate | review
    code          VARCHAR NOT NULL,          -- stable reason code, e.g. PARSE001
    severity      VARCHAR NOT NULL,          -- reject | penalty | flag
    detail        VARCHAR,
    created_at    TIMESTAMP NOT NULL
);
CREATE INDEX verdicts_record ON verdicts (record_id);

-- Teacher calls: one row per request to the teacher, retries included.
CREATE TABLE teacher_calls (
    call_id           VARCHAR PRIMARY KEY,
    record_id         VARCHAR NOT NULL,
    run_id            VARCHAR NOT NULL,
    payload_hash      VARCHAR NOT NULL,
    attempt           INTEGER NOT NULL,
    backend           VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    latency_s         DOUBLE NOT NULL,
    prompt_tokens     INTEGER,
    cached_tokens     INTEGER,
    completion_tokens INTEGER,
    finish_reason     VARCHAR,
    error             VARCHAR,
    created_at        TIMESTAMP NOT NULL
);
CREATE INDEX teacher_calls_record ON teacher_calls (record_id);

-- Events: guard trips, preflight results, interruptions.
CREATE TABLE events (
    run_id   VARCHAR NOT NULL,
    ts       TIMESTAMP NOT NULL,
    kind     VARCHAR NOT NULL,
    detail   JSON
);
