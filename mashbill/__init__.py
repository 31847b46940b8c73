"""Mashbill: a dataset factory for distilling an LLM orchestrator's routing and planning decisions."""

__version__ = "0.1.0"
