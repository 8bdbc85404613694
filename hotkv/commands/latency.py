"""latency commands (being written)."""
