"""Curation: immutable snapshots (snapshot.py), pulls in trainer formats (pull.py), preference pairs
(preference.py), balancing (balance.py), group-aware splits (split.py, groups.py) and the HTML report
(report.py). Modules import their heavy dependencies lazily; nothing is imported here."""
