"""Lazy freeing: big values deleted by UNLINK / DEL / FLUSH ASYNC are freed
after the reply, not before it.

Owns ``server.lazyfree_pending`` and ``server.lazyfreed_objects`` (INFO's
lazyfree_pending_objects / lazyfreed_objects), Valkey's free-effort rule
(``free_effort``, each type's own estimate: a value costing more than
LAZYFREE_THRESHOLD allocations to free goes to the queue; a small one is
freed at once) and the queue
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

from ..types.table import BY_CLASS

LAZYFREE_THRESHOLD = 64


def init_server(server):
    server.lazyfree_pending = 0
    server.lazyfreed_objects = 0
    server.lazyfree_queue = []


def free_effort(server, value) -> int:
    """Valkey's lazyfreeGetFreeEffort: allocations freeing value takes (its
    type's ``free_effort``, hotkv/types/table.py)."""
    t = BY_CLASS.get(type(value))
    return 1 if t is None else t.free_effort(value, server.config.values)


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
