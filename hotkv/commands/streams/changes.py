"""How a stream command finds its stream and announces what it changed.

Owns ``lookup`` (the stream at a key, WRONGTYPE otherwise), the two ways a
change is announced, the group's consumer seen by a command
(``seen_consumer``) and the node limits XADD passes to the type.

Who a change wakes follows Valkey: ``touched`` (dirty, WATCH, keyspace
event) for a change to the stream's entries or IDs; ``changed`` (dirty and
the event only) for group bookkeeping, which wakes no one.
"""

from __future__ import annotations

from ...types.stream import Stream


def lookup(c, key):
    """The stream at key in the client's db; None when missing."""
    return c.db.lookup_typed(key, Stream)


# ----------------------------------------------------------------------
# Change announcements (see the module docstring for who wakes whom)
# ----------------------------------------------------------------------

def touched(c, key, event: str, n: int = 1):
    """dirty += n, WATCHers of key fail, keyspace event."""
    server = c.server
    db = c.db
    server.dirty += n
    if key in db.watched:
        db.touch_watched(key)
    if server.tracking_on:   # client-side caching (hotkv.clients.tracking)
        server.tracking.invalidate(key)
    if event:
        server.event(db, key, "t", event)


def changed(c, key, event: str = "", n: int = 1):
    """Group bookkeeping changed: dirty += n and the event, nothing else."""
    c.server.dirty += n
    if event:
        c.server.event(c.db, key, "t", event)


def seen_consumer(c, g, key, cname: bytes, now: int):
    """The group's consumer cname, created (with its event) if new; seen now."""
    consumer = g.consumers.get(cname)
    if consumer is None:
        consumer = g.create_consumer(cname, now)
        changed(c, key, "xgroup-createconsumer")
    consumer.seen_time = now
    return consumer


def node_limits(c):
    values = c.server.config.values
    return values["stream-node-max-bytes"], values["stream-node-max-entries"]
