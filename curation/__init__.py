"""curation layer."""
