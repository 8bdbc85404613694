"""geo commands (being written)."""
