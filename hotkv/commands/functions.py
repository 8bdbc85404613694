"""functions commands (being written)."""
