"""MIGRATE (Valkey's cluster.c migrateCommand): the keys go to the target as
RESTORE commands over one blocking connection (the command blocks the server
as Valkey's does); the ones the target acknowledged are deleted here (unless
COPY) and the command is propagated as DEL of those.  To a node of the same
in-process cluster (hotkv.embedded_cluster) it goes without a socket.

Owns the connection cache, as Valkey's (migrateGetSocket): one connection per
``host:port``, kept ``CACHE_TTL`` seconds after its last use (closed by a
timer on the event loop, Valkey's migrateCloseTimedoutSockets), at most
``CACHE_MAX`` (a random one closed to make room), with the database last
SELECTed on it so a SELECT is sent only when it changes.  ``valkey-cli
--cluster import`` sends one MIGRATE per batch of keys: without the cache a
dataset of a million keys opened a hundred thousand connections, each left
in TIME_WAIT.

Invariants: a connection that failed (I/O error, timeout, an error reply to
SELECT or AUTH) leaves the cache; after an I/O error that was not a timeout
and before any key was deleted here, the command is tried once more on a new
connection (the cached one may have been closed by the target meanwhile).
"""

from __future__ import annotations

import random
import socket
import time

from ..cluster.local import connect as local_node
from ..core.registry import command, spec
from ..persistence import rdb
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import OK, Simple
from ..protocol.util import string2ll
from ..types.encodings import object_encoding

CACHE_TTL = 10          # seconds (MIGRATE_SOCKET_CACHE_TTL)
CACHE_MAX = 64          # MIGRATE_SOCKET_CACHE_ITEMS


class _Cached:
    __slots__ = ("sock", "last_dbid", "last_use")

    def __init__(self, sock):
        self.sock = sock
        self.last_dbid = -1
        self.last_use = time.monotonic()


def _cache(server) -> dict:
    return server.migrate_sockets


def _close(server, name):
    entry = _cache(server).pop(name, None)
    if entry is not None:
        try:
            entry.sock.close()
        except OSError:
            pass


def _expire(server):
    """Close the connections idle for CACHE_TTL; again in a second while any
    is left."""
    cache = _cache(server)
    now = time.monotonic()
    for name in [n for n, e in cache.items() if now - e.last_use > CACHE_TTL]:
        _close(server, name)
    if cache:
        _schedule(server)
    else:
        server.migrate_timer = None


def _schedule(server):
    loop = server.loop
    if loop is None:
        return False
    server.migrate_timer = loop.call_later(1.0, _expire, server)
    return True


def _get_socket(server, host: str, port: int, timeout_ms: int):
    """The cached connection to host:port, or a new one (cached when the
    server runs an event loop to close it later)."""
    name = "%s:%d" % (host, port)
    cache = _cache(server)
    entry = cache.get(name)
    if entry is not None:
        entry.last_use = time.monotonic()
        return name, entry
    try:
        source = server.config.values.get("bind-source-addr") or None
        sock = socket.create_connection((host, port), timeout=timeout_ms / 1000,
                                        source_address=(source, 0) if source else None)
    except ConnectionRefusedError:
        # Valkey's non-blocking connect "succeeds" and its first write fails.
        raise _MigrateError("writing") from None
    except (OSError, ValueError, OverflowError):
        raise CommandError("IOERR error or timeout connecting to the client") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    entry = _Cached(sock)
    if server.migrate_timer is None and not _schedule(server):
        return None, entry        # not cached: closed after this command
    if len(cache) >= CACHE_MAX:
        _close(server, random.choice(list(cache)))
    cache[name] = entry
    return name, entry


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


def _commands_to_send(c, keys, values, dbid, username, password, replace) -> list:
    """AUTH (with a password), SELECT dbid, then one RESTORE per key with its
    remaining TTL and its DUMP payload."""
    db, server = c.db, c.server
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
    return out


def _read_replies(sock, entry, nhead: int, select: bool, dbid: int, keys, copy: bool,
                  acked: list):
    """The target's replies: to AUTH/SELECT, then one per RESTORE.  Keys
    restored are appended to ``acked`` (unless COPY) as their replies come, so
    a read failing midway still deletes those.  Returns the first error
    reply's text (without its '-') or None, and the OSError that ended the
    reading or None."""
    buf = bytearray()
    error = None
    try:
        replies = [_read_line(sock, buf) for _ in range(nhead)]
        failed = [h for h in replies if h[:1] == b"-"]
        if select:
            entry.last_dbid = dbid if replies[-1][:1] != b"-" else -1
        for key in keys:
            line = _read_line(sock, buf)
            if failed or line[:1] == b"-":
                if error is None:
                    error = (failed or [line])[0][1:]
            elif not copy:
                acked.append(key)
    except OSError as e:
        return error, e
    return error, None


@command("migrate", -6, "write", group="generic", since="2.6.0", acl=("dangerous",),
         keys_fn=_migrate_keys,
         key_specs=(spec("RW access delete", "index 3", "range 0 1 0"),
                    spec("RW access delete incomplete", "keyword KEYS -2", "range -1 1 0")),
         args="host port:i key-selector(key:k | empty-string=) destination-db:i timeout:i "
              "[COPY]@3.0.0 [REPLACE]@3.0.0 authentication[auth(AUTH password)@4.0.7 | (AUTH2 "
              "username password)@6.0.0] keys[KEYS key:k1...]@3.0.6",
         complexity="This command actually executes a DUMP+DEL in the source instance, and a "
                    "RESTORE in the target instance. See the pages of these commands for time "
                    "complexity. Also an O(N) data transfer between the two instances is "
                    "performed.",
         history=(("3.0.0", "Added the `COPY` and `REPLACE` options."),
                  ("3.0.6", "Added the `KEYS` option."),
                  ("4.0.7", "Added the `AUTH` option."),
                  ("6.0.0", "Added the `AUTH2` option.")))
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
    out = _commands_to_send(c, keys, values, dbid, username, password, replace)
    host = argv[1].decode("utf-8", "replace")
    port = int(argv[2]) if argv[2].isdigit() else -1
    # A node of this process's cluster is reached in process (hotkv.cluster.local).
    local = server.cluster is not None and local_node(server, host, port)
    may_retry = not local
    while True:
        acked = []
        error = io_error = None
        name = entry = None
        try:
            if local:
                entry = _Cached(local)
            else:
                name, entry = _get_socket(server, host, port, timeout)
            sock = entry.sock
            select = entry.last_dbid != dbid
            # AUTH, then SELECT unless the connection has that database already.
            head = out[:len(out) - len(keys) - (0 if select else 1)]
            data = b"".join(_resp_array(args) for args in head + out[len(out) - len(keys):])
            if not local:
                sock.settimeout(timeout / 1000)
            try:
                sock.sendall(data)
            except OSError as e:
                io_error = e
                raise _MigrateError("writing") from None
            error, failure = _read_replies(sock, entry, len(head), select, dbid, keys, copy,
                                           acked)
            if failure is not None and error is None and not acked:
                io_error = failure
                raise _MigrateError("reading")
        except _MigrateError as e:
            if name is not None:
                _close(server, name)
            if may_retry and io_error is not None and not isinstance(io_error, socket.timeout):
                may_retry = False
                continue          # the cached connection may have been closed meanwhile
            raise CommandError("IOERR error or timeout %s to target instance" % e) from None
        finally:
            if entry is not None and name is None:
                try:
                    entry.sock.close()    # not cached
                except OSError:
                    pass
            for key in acked:
                if db.delete(key):
                    server.written(db, key, "g", "del")
            if acked:
                server.propagate_as([b"DEL", *acked])   # what the AOF logs, as Valkey
        break
    if error is not None:
        raise CommandError("ERR Target instance replied with error: %s"
                           % error.decode("utf-8", "replace"))
    return OK


# GETKEYSANDFLAGS: every key RW access delete, as Valkey's migrateGetKeys.
migrate.key_flags_fn = lambda argv: [b"RW", b"access", b"delete"]
