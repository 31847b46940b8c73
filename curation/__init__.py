"""Curation: validated records -> immutable snapshots, preference pairs, router datasets, reports and human review.
Modules import their heavy dependencies lazily.

- ``examples_bank``: Make an example bank (specs.examples) from a spec's stored records: `mashbill spec ...
- ``label_issues``: Label issues with cleanlab: which stored labels a small model, trained on the others, finds
  suspect.
- ``pipeline``: The end of the quick start: freeze each spec's validated records into a snapshot and write the ...
- ``preference/``: Preference (DPO) pairs, rule-derived edits and the judge's scores.
- ``reports/``: `mashbill report`: the numbers and the one self-contained HTML page.
- ``review/``: Human review in Argilla: push records, pull corrections, run a local server.
- ``router/``: Router datasets: outcome snapshots, replayed logs, transitions and triplets.
- ``selection/``: Which records go into a snapshot and where: selection, labels, quotas, groups, splits.
- ``snapshots/``: Immutable, verifiable snapshot folders: build, write, find, diff, card and pull.
"""
