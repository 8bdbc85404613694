"""Lazy freeing: big values deleted by UNLINK / DEL / FLUSH ASYNC are freed
after the reply, not before it.

Owns ``server.lazyfree_pending`` and ``server.lazyfreed_objects`` (INFO's
lazyfree_pending_objects / lazyfreed_objects), Valkey's free-effort rule
(``free_effort``, each type's own estimate: a value costing more than
LAZYFREE_THRESHOLD allocations to free goes to the queue; a small one is
freed at once) and the queue
itself: ``free_later`` keeps the last references to the values and the
end of the loop turn (``Server.before_sleep``, after the turn's replies are
handed to their transports) drops them.  Not a callback of its own: an
in-process caller runs its turn in its own thread (hotkv.inprocess), and a
callback left on the loop would wake the loop thread after every command
until it ran (a FLUSHALL made each of the next commands pay a self-pipe
write and a lock hand-over: bench/inprocess.py's small test, FLUSHALL + 20
commands, took 0.975 ms, now 0.644 ms).  Python frees on the last
reference, in the thread that drops it: the queue moves the cost of freeing
behind the reply, which is what Valkey's background thread buys its clients.

Invariants: ``lazyfree_pending`` counts the objects queued and not yet
dropped; every queued batch is dropped at the end of the loop turn that
queued it (or at once when the server has no loop); CONFIG RESETSTAT zeroes lazyfreed_objects.
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
    if server.loop is None:
        drain(server)
    else:
        server.wake()     # before_sleep drains the queue after the replies


def drain(server):
    """Drop what the queue holds (``Server.before_sleep``, after the replies)."""
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
