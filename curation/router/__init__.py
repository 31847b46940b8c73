"""Router datasets: outcome snapshots, replayed logs, transitions and triplets.

- ``router_data``: Outcome snapshots for a model router: query x model outcome rows, one embedding per query,
  labels.
- ``router_logs``: Orchestrator logs replayed from an outcome table: a cheapest-first cascade over the recipe's ...
- ``router_pull``: Load router snapshots as `datasets.DatasetDict`s a PyTorch or TRL user reads without glue.
- ``router_snapshot``: Writing router snapshots (outcomes, transitions, triplets) in the same verifiable folder
  format.
- ``transitions``: Offline-RL transitions for a routing policy, replayed from orchestrator logs.
- ``triplets``: (query, positive category description, hard negative) triplets for a bi-encoder semantic router.
"""
