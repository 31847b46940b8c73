-- Near-duplicate groups kept by validation (issue 29): each record's cluster (the record id its cluster keeps) as
-- validation's duplicate check found it, so that a freeze whose groups would be made the same way reads them
-- instead of finding every cluster again (the largest part of a freeze's time at 176K records).
ALTER TABLE validation_runs ADD COLUMN near_groups_profile VARCHAR;  -- how the clusters were found (dedup.groups_profile)
ALTER TABLE record_validations ADD COLUMN near_group VARCHAR;        -- NULL: the record was not in the duplicate check
