"""Outcome tables for a model router: which model answered which query, at what cost.

- ``outcome_import``: Import existing outcome tables (RouteLLM-style) into the store's `router_outcomes` form.
- ``outcomes``: Outcome tables: which model answered which query correctly, at what cost, latency and token count.
"""
