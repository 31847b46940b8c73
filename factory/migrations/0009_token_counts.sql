-- Token counts kept by validation (issue 29): each record's training example rendered with the trainer's chat
-- template and counted with its tokenizer (the span check's total), so that a freeze under the same tokenizer and
-- template reads them instead of rendering and counting every example again.
ALTER TABLE validation_runs ADD COLUMN tokens_profile VARCHAR;  -- what the counts were made with (tokenizer.tokens_profile)
ALTER TABLE record_validations ADD COLUMN n_tokens INTEGER;     -- NULL: not counted (no trainer profile, a span error)
