"""Server commands: FLUSHALL, FLUSHDB, DBSIZE (more to come: INFO, CONFIG...)."""

from __future__ import annotations

from ..errors import CommandError
from ..registry import command
from ..resp import OK


def _flush_mode(argv):
    if len(argv) > 2:
        raise CommandError("ERR syntax error")
    if len(argv) == 2 and argv[1].upper() not in (b"ASYNC", b"SYNC"):
        raise CommandError("ERR syntax error")


def flush_db(server, db):
    db.touch_all()
    removed = db.clear()
    server.dirty += max(removed, 1)


@command("flushall", -1, "write", group="server")
def flushall(c, argv):
    """Remove all keys from all databases."""
    _flush_mode(argv)
    for db in c.server.dbs:
        flush_db(c.server, db)
    return OK


@command("flushdb", -1, "write", group="server")
def flushdb(c, argv):
    """Remove all keys from the current database."""
    _flush_mode(argv)
    flush_db(c.server, c.db)
    return OK


@command("dbsize", 1, "readonly fast", group="server")
def dbsize(c, argv):
    """Return the number of keys in the selected database."""
    return len(c.db.data)
