"""AOF commands: BGREWRITEAOF.

The append-only file itself is ``hotkv.persistence.aof``'s, and the server creates,
loads, feeds and stops it by name (``hotkv.server``).  The command only asks
``server.aof_manager`` for a rewrite; all the state lives there.
"""

from __future__ import annotations

from ..core.registry import command
from ..protocol.errors import CommandError
from ..protocol.resp import Simple


@command("bgrewriteaof", 1, "no_async_loading admin noscript", group="server", complexity="O(1)")
def bgrewriteaof(c, argv):
    """Asynchronously rewrites the append-only file to disk."""
    server = c.server
    aof = server.aof_manager
    if aof.rewriting:
        raise CommandError("ERR Background append only file rewriting already in progress")
    if c.in_exec or server.prop_pending or server.snapshots.in_progress:
        # No fork in the middle of a transaction (Redis's rule), nor while a
        # BGSAVE child runs (one child at a time): cron starts it.
        aof.rw_scheduled = True
        aof.rw_failures = 0      # Valkey: a requested rewrite is not held back by the limit
        return Simple(b"Background append only file rewriting scheduled")
    if aof.start_rewrite():
        if aof.rw_scheduled:
            return Simple(b"Background append only file rewriting scheduled")
        return Simple(b"Background append only file rewriting started")
    raise CommandError("ERR Can't execute an AOF background rewriting. "
                       "Please check the server logs for more information.")
