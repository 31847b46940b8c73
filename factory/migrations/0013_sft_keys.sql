-- Each record's example key as a snapshot gives it (factory.records.sft_key: the sha256 of ["sft", messages, the
-- output's canonical JSON]), computed once when the record is written, so that a freeze reads 64 characters instead
-- of minifying and hashing every record's ~2 KB prompt (issue 29: most of what a freeze read from the store). NULL
-- for records written before this migration: a freeze computes theirs from the stored prompt, as it did.
ALTER TABLE records ADD COLUMN sft_key VARCHAR;
