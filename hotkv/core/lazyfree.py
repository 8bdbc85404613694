"""Lazy freeing: big values deleted by UNLINK / DEL / FLUSH ASYNC are freed
after the reply, not before it.

Owns ``server.lazyfree_pending`` and ``server.lazyfreed_objects`` (INFO's
lazyfree_pending_objects / lazyfreed_objects), Valkey's free-effort rule
(``free_effort``: a value costing more than LAZYFREE_THRESHOLD allocations
to free goes to the queue; a small one is freed at once) and the queue
itself: ``free_later`` keeps the last references to the values and a
callback of the event loop (``call_soon``, so after the replies of the
current read are written out) drops them.  Python frees on the last
reference, in the thread that drops it: the queue moves the cost of freeing
behind the reply, which is what Valkey's background thread buys its clients.

Invariants: ``lazyfree_pending`` counts the objects queued and not yet
dropped; every queued batch is dropped by the next loop turn (or at once
when the server has no loop); CONFIG RESETSTAT zeroes lazyfreed_objects.
"""

from __future__ import annotations

from itertools import islice

from ..types.encodings import object_encoding
from ..types.lists import ListValue
from ..types.sets import SetValue
from ..types.stream import Stream

LAZYFREE_THRESHOLD = 64


def init_server(server):
    server.lazyfree_pending = 0
    server.lazyfreed_objects = 0
    server.lazyfree_queue = []


def _list_nodes(value, fill: int) -> int:
    """Quicklist nodes of a list, estimated from the first elements (Valkey
    counts its nodes; hotkv's list is one deque)."""
    n = len(value)
    if n <= LAZYFREE_THRESHOLD:
        return 1      # a node holds at least one element: below the threshold
    if fill >= 0:
        return -(-n // max(fill, 1))
    limit = 4096 << min(-fill - 1, 4)
    sample = list(islice(value, 256))
    avg = sum(len(e) for e in sample) / len(sample) + 2
    return max(1, int(n * avg // limit) + 1)


class _Ctx:
    """What encodings.object_encoding reads: the server (and a db, unused
    for the containers asked about here)."""
    __slots__ = ("server", "db")

    def __init__(self, server):
        self.server = server
        self.db = server.dbs[0]


def free_effort(server, value) -> int:
    """Valkey's lazyfreeGetFreeEffort: allocations freeing value takes."""
    t = type(value)
    if t is bytes or t is bytearray:
        return 1
    if t is ListValue:
        return _list_nodes(value, server.config.values.get("list-max-listpack-size", -2))
    if t is Stream:
        effort = len(value.nodes) + 1     # rax nodes, at least one per listpack
        groups = value.groups
        if groups:
            first = next(iter(groups.values()))
            effort += len(groups) * (1 + len(first.pel))
        return effort
    enc = object_encoding(_Ctx(server), b"", value)
    if (t is SetValue and enc == b"hashtable") or enc == b"skiplist":
        return len(value)
    # Valkey 8.1's hashes ('hashtable') are one allocation to its lazy free rule.
    return 1


def free_later(server, obj, count: int = 1):
    """Keep obj (a value, or a flushed database's dicts counted as ``count``
    objects) until the next loop turn, then drop it."""
    server.lazyfree_queue.append((obj, count))
    server.lazyfree_pending += count
    if len(server.lazyfree_queue) == 1:
        loop = server.loop
        if loop is None:
            drain(server)
        else:
            loop.call_soon(drain, server)


def drain(server):
    queue = server.lazyfree_queue
    server.lazyfree_queue = []
    for _, count in queue:
        server.lazyfree_pending -= count
        server.lazyfreed_objects += count
    queue.clear()    # the last references: the values are freed here


def maybe_free_later(server, value) -> None:
    """A deleted value: queued if freeing it is big enough (else freed by the caller)."""
    if type(value) is not bytes and free_effort(server, value) > LAZYFREE_THRESHOLD:
        free_later(server, value)
