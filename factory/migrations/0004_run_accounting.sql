-- Run accounting beyond the counts: teacher calls (retries and probes included), retries, prefix-cached
-- prompt tokens, and the full accounting snapshot (latency percentiles, accept rate, rate, ETA, cost).
ALTER TABLE runs ADD COLUMN calls BIGINT DEFAULT 0;
ALTER TABLE runs ADD COLUMN retries BIGINT DEFAULT 0;
ALTER TABLE runs ADD COLUMN tokens_cached BIGINT DEFAULT 0;
ALTER TABLE runs ADD COLUMN stats JSON;
