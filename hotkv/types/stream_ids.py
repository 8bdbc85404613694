"""Stream entry IDs: one int, ``ms << 64 | seq``.

Owns the ID's representation shared by hotkv/types/stream.py,
stream_groups.py, stream_persist.py and the stream commands: the 64-bit
mask, the greatest ID, ``make_id`` / ``id_bytes`` (the ``<ms>-<seq>``
text), and ``int64_delta`` (a difference as the int64 Valkey stores).

Invariant: an ID is an int in [0, MAX_ID]; both halves are unsigned 64-bit.
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
MAX_ID = (1 << 128) - 1
INVALID_ENTRIES_READ = -1     # a group's entries-read counter when unknown


def make_id(ms: int, seq: int) -> int:
    return (ms << 64) | seq


def id_bytes(i: int) -> bytes:
    return b"%d-%d" % (i >> 64, i & MASK64)


def int64_delta(a: int, b: int) -> int:
    """a - b as the int64 Valkey stores (uint64 wrap-around)."""
    d = (a - b) & MASK64
    return d - (1 << 64) if d >= 1 << 63 else d
