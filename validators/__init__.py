"""validators layer."""
