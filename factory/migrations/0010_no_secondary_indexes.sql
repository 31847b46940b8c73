-- The secondary ART indexes go (issue 29). Every query the store runs joins or scans these columns in bulk (hash
-- joins, zone maps); DuckDB uses an ART index for point lookups and filters that keep under 0.1% of a table, which
-- no store query is. The indexes were only paid for: a re-validation of 175,880 records spent 13.6 s of its
-- commit deleting the old verdicts from verdicts_record (0.2 s without it), and each index is held in memory.
-- The primary keys stay: they are what keeps a resumed run from storing a record twice.
DROP INDEX IF EXISTS records_spec;
DROP INDEX IF EXISTS verdicts_record;
DROP INDEX IF EXISTS teacher_calls_record;
DROP INDEX IF EXISTS record_validations_record;
DROP INDEX IF EXISTS review_decisions_record;
