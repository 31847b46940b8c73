"""Which records go into a snapshot and where: selection, labels, quotas, groups, splits.

- ``balance``: Balancing quotas per label cell: cut what is over, report what is short, oversample only on request.
- ``groups``: Near-duplicate clusters of queries, for group-aware splits.
- ``labels``: Labels of a record and the balancing cell it falls in.
- ``select``: Which stored records may go into a snapshot, and why each of the others may not.
- ``split``: Group-aware, stratified train/eval/test splits.
"""
