-- Query synthesis and the judge store their work as records (kinds `queries`, `judge`, `judge_pair`) through
-- the one generate loop; these views name what is inside them. A view reads the records, so it never drifts.

-- Every kept synthesized query, one row each, with its cell and lineage.
CREATE VIEW synth_queries AS
SELECT r.record_id, r.spec_name, r.spec_version, r.spec_hash, r.run_id,
       json_extract_string(q.item, '$.query') AS query,
       json_extract_string(q.item, '$.lang') AS lang,
       json_extract_string(q.item, '$.type') AS type,
       CAST(json_extract(q.item, '$.trap') AS BOOLEAN) AS trap,
       json_extract_string(q.item, '$.rule') AS rule,
       json_extract_string(q.item, '$.cell') AS cell
FROM records r, unnest(CAST(json_extract(r.output, '$.queries') AS JSON[])) AS q(item)
WHERE r.kind = 'queries' AND r.status = 'accepted';

-- The judge's scores (accepted judgments), with the judge model and the prompt hash.
CREATE VIEW judge_scores AS
SELECT json_extract_string(input, '$.record_id') AS judged_id, record_id AS judgment_id, spec_name, spec_hash,
       run_id, CAST(json_extract(output, '$.score') AS DOUBLE) AS score,
       json_extract_string(output, '$.rationale') AS rationale,
       json_extract_string(meta, '$.judge_model') AS judge_model,
       json_extract_string(meta, '$.prompt_hash') AS prompt_hash, created_at
FROM records WHERE kind = 'judge' AND status = 'accepted';

-- Pairwise judgments: `a` was shown first; every pair is judged in both orders.
CREATE VIEW judge_pairs AS
SELECT json_extract_string(input, '$.a') AS a, json_extract_string(input, '$.b') AS b, record_id AS judgment_id,
       spec_name, spec_hash, run_id, CAST(json_extract(output, '$.score_a') AS DOUBLE) AS score_a,
       CAST(json_extract(output, '$.score_b') AS DOUBLE) AS score_b,
       json_extract_string(output, '$.rationale') AS rationale,
       json_extract_string(meta, '$.judge_model') AS judge_model,
       json_extract_string(meta, '$.prompt_hash') AS prompt_hash, created_at
FROM records WHERE kind = 'judge_pair' AND status = 'accepted';
