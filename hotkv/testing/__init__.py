"""Test-control helpers for hotkv servers (issue 16): inspection, snapshots and seeding,
faults, the command journal and waiting. Each module attaches to an EmbeddedServer and
reads or changes its state on the server loop thread, so a test sees a consistent view.
"""
