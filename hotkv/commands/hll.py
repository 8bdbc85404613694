"""hll commands (being written)."""
