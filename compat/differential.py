"""The differential runner: one command stream, two servers, compared replies.

``Pair`` holds a hotkv connection and a Valkey connection speaking the same
protocol version.  ``run(argv)`` sends the command to both and returns both
raw replies after normalising what Redis leaves unordered (SMEMBERS, KEYS,
HKEYS of big hashes ...): the order of a set is not part of the contract.
``first_divergence(script)`` runs a whole script and reports the first
command whose replies differ -- what a failing hypothesis example shrinks to.
"""

from __future__ import annotations

from support import RawClient

# Commands whose array replies are unordered sets of elements.
UNORDERED = {b"SMEMBERS", b"KEYS", b"SINTER", b"SUNION", b"SDIFF", b"HKEYS", b"HVALS"}


def _split_array(raw: bytes):
    """Top-level elements of a flat array/set reply of bulk strings (or None)."""
    if raw[:1] not in (b"*", b"~"):
        return None
    head, _, rest = raw.partition(b"\r\n")
    n = int(head[1:])
    items = []
    for _ in range(max(n, 0)):
        if rest[:1] != b"$":
            return None
        h, _, rest = rest.partition(b"\r\n")
        size = int(h[1:])
        items.append(h + b"\r\n" + rest[:size + 2])
        rest = rest[size + 2:]
    return head, items


def normalise(argv, raw: bytes) -> bytes:
    if argv and argv[0].upper() in UNORDERED:
        parts = _split_array(raw)
        if parts is not None:
            head, items = parts
            return head + b"\r\n" + b"".join(sorted(items))
    return raw


class Pair:
    def __init__(self, ours: tuple, theirs: tuple, resp3: bool = False):
        self.ours = RawClient(*ours)
        self.theirs = RawClient(*theirs)
        if resp3:
            self.ours.call("HELLO", "3")
            self.theirs.call("HELLO", "3")

    def run(self, argv):
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in argv]
        a = normalise(argv, self.ours.call(*argv))
        b = normalise(argv, self.theirs.call(*argv))
        return a, b

    def first_divergence(self, script):
        for i, argv in enumerate(script):
            a, b = self.run(argv)
            if a != b:
                return i, argv, a, b
        return None

    def close(self):
        self.ours.close()
        self.theirs.close()
