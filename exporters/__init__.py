"""exporters layer."""
