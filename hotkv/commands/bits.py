"""bits commands (being written)."""
