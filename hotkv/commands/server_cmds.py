"""Server commands that act on the whole dataset or the process: FLUSHALL,
FLUSHDB, DBSIZE, TIME, LASTSAVE, SAVE, BGSAVE, SHUTDOWN; and cluster.c's
MIGRATE (real: RESTOREs on the target; to a node of the same in-process
cluster, hotkv.cluster.embedded, without a socket).  CLUSTER is
``commands/cluster.py``.

The other server commands have their own modules, by concept as Valkey's
source files: INFO (``info``), CONFIG (``config_cmds``), DEBUG and MEMORY
(``debug``), COMMAND (``introspection``), SLOWLOG (``slowlog``), LATENCY
(``latency``), MONITOR (``monitor``), FUNCTION and MODULE (``placeholders``).

* FLUSHALL / FLUSHDB: ASYNC (or lazyfree-lazy-user-flush without SYNC)
  frees the old keys after the reply (hotkv/lazyfree.py).

* SAVE, BGSAVE, SHUTDOWN [SAVE|NOSAVE]: the RDB file of ``dir`` /
  ``dbfilename`` (hotkv/snapshots.py, format hotkv/rdbfile.py).  SAVE
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
import socket

from .. import errors, rdb
from ..blocking import BLOCKED
from ..cluster.local import connect as local_node
from ..encodings import object_encoding
from ..errors import CommandError
from ..lazyfree import free_later
from ..registry import command, spec
from ..resp import OK, Simple
from ..util import string2ll

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


def flush_db(server, db, lazy: bool = False) -> int:
    """Empty db; returns how many keys it held (added to the dirty counter).
    A lazy flush frees the old keys after the reply (hotkv.lazyfree), each
    key counted as one lazily freed object as Valkey counts them."""
    db.touch_all()
    old = (db.data, db.expires)
    removed = db.clear()
    if lazy and removed:
        free_later(server, old, removed)
    del old
    server.dirty += removed
    return removed


def _force_propagation(c, argv, removed: int):
    # Redis logs a flush even when there was nothing to remove (the dirty
    # counter, hence rdb_changes_since_last_save, stays as it was).
    if not removed:
        c.server.propagate(c.db.index, list(argv))


@command("flushall", -1, "write", group="server", acl=("keyspace", "dangerous"))
def flushall(c, argv):
    """Remove all keys from all databases."""
    lazy = _flush_mode(c, argv)
    removed = 0
    for db in c.server.dbs:
        removed += flush_db(c.server, db, lazy)
    if c.server.tracking_on:   # one "all keys" invalidation (hotkv.tracking)
        c.server.tracking.flushed()
    _force_propagation(c, argv, removed)
    # As Valkey: a running BGSAVE would write the old data; with save points
    # the (now empty) dataset is saved at once.
    snaps = c.server.snapshots
    snaps.kill_child()
    if snaps.points:
        snaps.save()
    return OK


@command("flushdb", -1, "write", group="server", acl=("keyspace", "dangerous"))
def flushdb(c, argv):
    """Remove all keys from the current database."""
    removed = flush_db(c.server, c.db, _flush_mode(c, argv))
    if c.server.tracking_on:   # one "all keys" invalidation (hotkv.tracking)
        c.server.tracking.flushed()
    _force_propagation(c, argv, removed)
    return OK


@command("dbsize", 1, "readonly fast", group="server", acl=("keyspace",))
def dbsize(c, argv):
    """Return the number of keys in the selected database."""
    return len(c.db.data)


@command("time", 1, "loading stale fast", group="server")
def time_(c, argv):
    """Return the current server time."""
    server = c.server
    if c.kind == "lua":
        # Time stands still in a script (Valkey answers its cached command
        # time): every TIME of one run gives the same instant.
        run = getattr(getattr(server, "scripting", None), "run", None)
        if run is None:
            functions = getattr(server, "functions", None)
            run = functions.engine.run if functions is not None else None
        if run is not None:
            if not run.time_us:
                run.time_us = server.clock.us()
            us = run.time_us
            return [b"%d" % (us // 1_000_000), b"%d" % (us % 1_000_000)]
    us = server.clock.us()    # hotkv.clock
    return [b"%d" % (us // 1_000_000), b"%d" % (us % 1_000_000)]


@command("lastsave", 1, "loading stale fast", group="server", acl=("admin", "dangerous"))
def lastsave(c, argv):
    """Return the Unix timestamp of the last successful save to disk."""
    return c.server.lastsave


_IN_PROGRESS = "ERR Background save already in progress"


@command("save", 1, "admin noscript no_async_loading no_multi", group="server")
def save(c, argv):
    """Synchronously save the dataset to disk."""
    snaps = c.server.snapshots
    if snaps.in_progress:
        raise CommandError(_IN_PROGRESS)
    if not snaps.save():
        raise CommandError("ERR")
    return OK


@command("bgsave", -1, "admin noscript no_async_loading", group="server")
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


@command("shutdown", -1, "admin noscript loading stale no_multi allow_busy", group="server")
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
    if abort:   # a signal shutdown not yet carried out (hotkv.cli.SignalShutdown)
        cancel = getattr(c.server, "abort_shutdown", None)
        if cancel is not None and cancel():
            return OK
        raise CommandError("ERR No shutdown in progress.")
    server = c.server
    if server.shutdown_cb is None:
        raise CommandError("ERR Errors trying to SHUTDOWN. Check logs.")
    log.warning("User requested shutdown...")
    if server.loading:
        nosave, save_ = True, False
    snaps = server.snapshots
    if nosave:
        snaps.kill_child()
    elif not snaps.shutdown_save(save_) and not force:
        log.warning("Errors trying to shut down the server. Check the logs for more "
                    "information.")
        raise CommandError("ERR Errors trying to SHUTDOWN. Check logs.")
    server.shutdown_saved = True   # Server.shutdown must not save again
    server.shutdown_cb()
    # No reply: the connection closes, as with Redis.
    c.closing = True
    return BLOCKED


# -- CLUSTER: hotkv/commands/cluster.py (imported here: its place in the command
# table, and so COMMAND's order, stays the one CLUSTER always had) -------------
from . import cluster  # noqa: E402,F401

# -- MIGRATE ----------------------------------------------------------------------
# Valkey's migrateCommand: the keys go to the target as RESTORE commands over
# one blocking connection (the command blocks the server as Valkey's does),
# the ones the target acknowledged are deleted here (unless COPY) and the
# command is propagated as DEL of those.  hotkv keeps no connection cache:
# each MIGRATE connects, SELECTs and closes (Valkey's cache only saves the
# connect and the SELECT).

def _migrate_keys(argv):
    """The key positions of a MIGRATE (Valkey's migrateGetKeys)."""
    if len(argv) < 6:
        return []
    j = 6
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"auth":
            j += 1
        elif opt == b"auth2":
            j += 2
        elif opt == b"keys" and not argv[3]:
            return list(range(j + 1, len(argv)))
        j += 1
    return [3]


class _MigrateError(Exception):
    pass


def _resp_array(args) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _read_line(sock, buf: bytearray) -> bytes:
    while b"\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    end = buf.index(b"\r\n")
    line = bytes(buf[:end])
    del buf[:end + 2]
    return line


def _migrate_options(argv):
    """MIGRATE's options: (copy, replace, username, password, index of the
    first key, number of keys)."""
    copy = replace = False
    username = password = None
    first, num = 3, 1
    j = 6
    while j < len(argv):
        opt = argv[j].lower()
        more = len(argv) - j - 1
        if opt == b"copy":
            copy = True
        elif opt == b"replace":
            replace = True
        elif opt == b"auth":
            if not more:
                raise CommandError(errors.SYNTAX)
            j += 1
            password = argv[j]
        elif opt == b"auth2":
            if more < 2:
                raise CommandError(errors.SYNTAX)
            username, password = argv[j + 1], argv[j + 2]
            j += 2
        elif opt == b"keys":
            if argv[3]:
                raise CommandError("ERR When using MIGRATE KEYS option, the key argument must "
                                   "be set to the empty string")
            first, num = j + 1, len(argv) - j - 1
            break
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    return copy, replace, username, password, first, num


@command("migrate", -6, "write", group="generic", since="2.6.0", acl=("dangerous",),
         keys_fn=_migrate_keys,
         key_specs=(spec("RW access delete", "index 3", "range 0 1 0"),
                    spec("RW access delete incomplete", "keyword KEYS -2", "range -1 1 0")))
def migrate(c, argv):
    """Atomically transfers a key from one instance to another."""
    copy, replace, username, password, first, num = _migrate_options(argv)
    timeout = string2ll(argv[5])
    dbid = string2ll(argv[4]) if timeout is not None else None
    if timeout is None or dbid is None:
        raise CommandError(errors.NOT_INTEGER)
    if timeout <= 0:
        timeout = 1000
    db = c.db
    keys, values = [], []
    for key in argv[first:first + num]:
        value = db.lookup_read(key)
        if value is not None:
            keys.append(key)
            values.append(value)
    if not keys:
        return Simple(b"NOKEY")
    server = c.server
    fill = server.config.values.get("list-max-listpack-size", -2)
    out = []
    if password is not None:
        out.append([b"AUTH", username, password] if username is not None else [b"AUTH", password])
    out.append([b"SELECT", b"%d" % dbid])
    now = server.cmd_time_ms
    for key, value in zip(keys, values):
        ttl = 0
        when = db.expires.get(key)
        if when is not None:
            ttl = max(when - now, 1)
        payload = rdb.dump_payload(value, object_encoding(c, key, value), fill)
        out.append([b"RESTORE", key, b"%d" % ttl, payload] + ([b"REPLACE"] if replace else []))
    data = b"".join(_resp_array(args) for args in out)
    acked = []
    error = None
    sock = None
    try:
        try:
            # A node of this process's cluster is reached in process (hotkv.cluster.local).
            sock = (server.cluster is not None and local_node(
                server, argv[1].decode("utf-8", "replace"),
                int(argv[2]) if argv[2].isdigit() else -1)) or socket.create_connection(
                (argv[1].decode("utf-8", "replace"),
                 int(argv[2]) if argv[2].isdigit() else -1), timeout=timeout / 1000)
        except ConnectionRefusedError:
            # Valkey's non-blocking connect "succeeds" and its first write fails.
            raise _MigrateError("writing") from None
        except (OSError, ValueError, OverflowError):
            raise CommandError("IOERR error or timeout connecting to the client") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.sendall(data)
        except OSError:
            raise _MigrateError("writing") from None
        buf = bytearray()
        try:
            head = [_read_line(sock, buf) for _ in range(len(out) - len(keys))]
            for key in keys:
                line = _read_line(sock, buf)
                failed = [h for h in head if h[:1] == b"-"]
                if failed or line[:1] == b"-":
                    if error is None:
                        error = (failed or [line])[0][1:]
                elif not copy:
                    acked.append(key)
        except OSError:
            if error is None and not acked:
                raise _MigrateError("reading") from None
    except _MigrateError as e:
        raise CommandError("IOERR error or timeout %s to target instance" % e) from None
    finally:
        if sock is not None:
            sock.close()
        for key in acked:
            if db.delete(key):
                server.written(db, key, "g", "del")
        if acked:
            server.propagate_as([b"DEL", *acked])   # what the AOF logs, as Valkey
    if error is not None:
        raise CommandError("ERR Target instance replied with error: %s"
                           % error.decode("utf-8", "replace"))
    return OK


# GETKEYSANDFLAGS: every key RW access delete, as Valkey's migrateGetKeys.
migrate.key_flags_fn = lambda argv: [b"RW", b"access", b"delete"]
