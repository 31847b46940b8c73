"""The factory: drives a teacher and stores every record, accepted or not."""
