"""Preference (DPO) pairs, rule-derived edits and the judge's scores.

- ``judging``: The judge's calibration figures and its scores in snapshots (pairs: `preference.judge_pairs`).
- ``preference``: Preference (DPO) pairs for plans, from three sources; every pair records its source and is
  checked.
- ``preference_edits``: Rule-derived preference edits: a validated plan (`chosen`) and a minimal edit of it ...
- ``rules``: Scoring the verdicts of plans that curation builds itself (edited plans, teacher samples ...
"""
