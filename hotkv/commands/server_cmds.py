"""Server commands that act on the whole dataset or the process: FLUSHALL,
FLUSHDB, DBSIZE, TIME, LASTSAVE, SAVE, BGSAVE, SHUTDOWN.  CLUSTER is
``commands/cluster.py``, MIGRATE ``commands/migrate.py``.

The other server commands have their own modules, by concept as Valkey's
source files: INFO (``info``), CONFIG (``config_cmds``), DEBUG and MEMORY
(``debug``), COMMAND (``introspection``), SLOWLOG (``slowlog``), LATENCY
(``latency``), MONITOR (``monitor``), FUNCTION and MODULE (``placeholders``).

* FLUSHALL / FLUSHDB: ASYNC (or lazyfree-lazy-user-flush without SYNC)
  frees the old keys after the reply (hotkv/core/lazyfree.py).

* SAVE, BGSAVE, SHUTDOWN [SAVE|NOSAVE]: the RDB file of ``dir`` /
  ``dbfilename`` (hotkv/persistence/snapshots.py, format hotkv/persistence/rdbfile.py).  SAVE
  replies OK only once the file is renamed into place and fsynced; BGSAVE
  forks a child (scheduled when an AOF rewrite child runs and SCHEDULE is
  given or inside EXEC, as Valkey).  SHUTDOWN saves when save points are
  set (or SAVE is given) and refuses to stop when that save fails, unless
  FORCE.

Invariants: a flush adds the number of keys it removed to the dirty
counter and is propagated (AOF) even when it removed nothing; SHUTDOWN
sends no reply -- the connection closes, as with Redis.
"""

from __future__ import annotations

import logging

from ..core.blocking import BLOCKED
from ..core.config import SHUTDOWN_FORCE, SHUTDOWN_NOSAVE, SHUTDOWN_SAVE
from ..core.registry import command
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import OK, Simple

log = logging.getLogger("hotkv")

def _flush_mode(c, argv) -> bool:
    """True for an asynchronous flush: ASYNC, or no argument and
    lazyfree-lazy-user-flush yes (Valkey's getFlushCommandFlags)."""
    if len(argv) > 2:
        raise CommandError(errors.SYNTAX)
    if len(argv) == 2:
        mode = argv[1].upper()
        if mode not in (b"ASYNC", b"SYNC"):
            raise CommandError(errors.SYNTAX)
        return mode == b"ASYNC"
    return bool(c.server.config.values.get("lazyfree-lazy-user-flush"))


def _force_propagation(c, argv, removed: int):
    # Redis logs a flush even when there was nothing to remove (the dirty
    # counter, hence rdb_changes_since_last_save, stays as it was).
    if not removed:
        c.server.propagate(c.db.index, list(argv))


@command("flushall", -1, "write", group="server", acl=("keyspace", "dangerous"),
         args="flush-type[ASYNC@4.0.0 | SYNC@6.2.0]",
         summary="Removes all keys from all databases.",
         complexity="O(N) where N is the total number of keys in all databases",
         history=(("4.0.0", "Added the `ASYNC` flushing mode modifier."),
                  ("6.2.0", "Added the `SYNC` flushing mode modifier.")))
def flushall(c, argv):
    """Remove all keys from all databases."""
    removed = c.server.empty_data(lazy=_flush_mode(c, argv))
    c.server.dirty += removed
    _force_propagation(c, argv, removed)
    # As Valkey: a running BGSAVE would write the old data; with save points
    # the (now empty) dataset is saved at once.
    snaps = c.server.snapshots
    snaps.kill_child()
    if snaps.points:
        snaps.save()
    return OK


@command("flushdb", -1, "write", group="server", acl=("keyspace", "dangerous"),
         args="flush-type[ASYNC@4.0.0 | SYNC@6.2.0]",
         complexity="O(N) where N is the number of keys in the selected database",
         history=(("4.0.0", "Added the `ASYNC` flushing mode modifier."),
                  ("6.2.0", "Added the `SYNC` flushing mode modifier.")))
def flushdb(c, argv):
    """Remove all keys from the current database."""
    removed = c.server.empty_data(c.db, lazy=_flush_mode(c, argv))
    c.server.dirty += removed
    _force_propagation(c, argv, removed)
    return OK


@command("dbsize", 1, "readonly fast", group="server", acl=("keyspace",),
         summary="Returns the number of keys in the database.", complexity="O(1)")
def dbsize(c, argv):
    """Return the number of keys in the selected database."""
    return len(c.db.data)


@command("time", 1, "loading stale fast", group="server", summary="Returns the server time.",
         since="2.6.0", complexity="O(1)")
def time_(c, argv):
    """Return the current server time."""
    server = c.server
    if c.kind == "lua":
        # Time stands still in a script (Valkey answers its cached command
        # time): every TIME of one run gives the same instant.
        run = server.scripting.run if server.scripting is not None else None
        if run is None and server.functions is not None:
            run = server.functions.engine.run
        if run is not None:
            if not run.time_us:
                run.time_us = server.clock.us()
            us = run.time_us
            return [b"%d" % (us // 1_000_000), b"%d" % (us % 1_000_000)]
    us = server.clock.us()    # hotkv.core.clock
    return [b"%d" % (us // 1_000_000), b"%d" % (us % 1_000_000)]


@command("lastsave", 1, "loading stale fast", group="server", acl=("admin", "dangerous"),
         summary="Returns the Unix timestamp of the last successful save to disk.",
         complexity="O(1)")
def lastsave(c, argv):
    """Return the Unix timestamp of the last successful save to disk."""
    return c.server.lastsave


_IN_PROGRESS = "ERR Background save already in progress"


@command("save", 1, "admin noscript no_async_loading no_multi", group="server",
         summary="Synchronously saves the database(s) to disk.",
         complexity="O(N) where N is the total number of keys in all databases")
def save(c, argv):
    """Synchronously save the dataset to disk."""
    snaps = c.server.snapshots
    if snaps.in_progress:
        raise CommandError(_IN_PROGRESS)
    if not snaps.save():
        raise CommandError("ERR")
    return OK


@command("bgsave", -1, "admin noscript no_async_loading", group="server",
         args="operation[SCHEDULE@3.2.2 | CANCEL@8.1.0]",
         summary="Asynchronously saves the database(s) to disk.", complexity="O(1)",
         history=(("3.2.2", "Added the `SCHEDULE` option."),
                  ("8.1.0", "Added the `CANCEL` option.")))
def bgsave(c, argv):
    """Asynchronously save the dataset to disk."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() != b"schedule"):
        raise CommandError(errors.SYNTAX)
    snaps = c.server.snapshots
    if snaps.in_progress:
        raise CommandError(_IN_PROGRESS)
    if snaps.other_child() or c.in_exec:
        if len(argv) == 2 or c.in_exec:
            snaps.scheduled = True
            return Simple(b"Background saving scheduled")
        raise CommandError("ERR Another child process is active (AOF?): can't BGSAVE right now. "
                           "Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.")
    if not snaps.bgsave():
        raise CommandError("ERR")
    return Simple(b"Background saving started")


@command("shutdown", -1, "admin noscript loading stale no_multi allow_busy", group="server",
         args="abort-selector[save-selector-block(save-selector[NOSAVE | SAVE] [NOW]@7.0.0 "
              "[FORCE]@7.0.0) | ABORT@7.0.0]",
         summary="Synchronously saves the database(s) to disk and shuts down the server.",
         complexity="O(N) when saving, where N is the total number of keys in all databases when "
                    "saving data, otherwise O(1)",
         history=(("7.0.0", "Added the `NOW`, `FORCE` and `ABORT` modifiers."),))
def shutdown(c, argv):
    """Synchronously save the dataset to disk and then shut down the server."""
    nosave = save_ = abort = force = False
    for arg in argv[1:]:
        a = arg.lower()
        if a == b"nosave":
            nosave = True
        elif a == b"save":
            save_ = True
        elif a == b"now":
            pass
        elif a == b"force":
            force = True
        elif a == b"abort":
            abort = True
        else:
            raise CommandError(errors.SYNTAX)
    if (abort and len(argv) > 2) or (nosave and save_):
        raise CommandError(errors.SYNTAX)
    if abort:   # a signal shutdown not yet carried out (hotkv.tools.cli.SignalShutdown)
        cancel = c.server.abort_shutdown
        if cancel is not None and cancel():
            return OK
        raise CommandError("ERR No shutdown in progress.")
    server = c.server
    if server.shutdown_cb is None:
        raise CommandError("ERR Errors trying to SHUTDOWN. Check logs.")
    log.warning("User requested shutdown...")
    flags = ((SHUTDOWN_NOSAVE if nosave else 0) | (SHUTDOWN_SAVE if save_ else 0)
             | (SHUTDOWN_FORCE if force else 0))
    if not server.prepare_shutdown(flags):
        raise CommandError("ERR Errors trying to SHUTDOWN. Check logs.")
    server.shutdown_cb()
    # No reply: the connection closes, as with Redis.
    c.closing = True
    return BLOCKED
