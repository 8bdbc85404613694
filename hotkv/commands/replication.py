"""Replication's commands on the primary's side: SYNC, PSYNC, REPLCONF,
WAIT, WAITAOF and ROLE (INFO's replication section is
hotkv.commands.info's, from the same two modules' fields).

The machinery is ``hotkv.replication.primary`` (``server.repl.primary``,
made by the first SYNC/PSYNC); this module parses arguments and replies
as valkey-server 8.1.8 does, byte for byte.  When hotkv itself follows a
primary (``server.repl.role == "slave"``), ROLE and INFO replication are
the replica side's (``hotkv.replication.replica.role_reply`` /
``info_fields``).

Invariants: a REPLCONF option's value is kept per connection (in the
server's ``server.replconf``, by client id) until its SYNC/PSYNC or its end; REPLCONF ACK and GETACK
never reply, as Valkey's; after SYNC/PSYNC the connection gets nothing but
the replication stream.
"""

from __future__ import annotations

import logging

from ..core.blocking import parse_timeout
from ..core.registry import command
from ..protocol.errors import CommandError
from ..protocol.resp import OK
from ..protocol.util import parse_int, string2ll
from ..replication import primary as _primary, replica

log = logging.getLogger("hotkv")

_FLAGS_SYNC = "no_async_loading admin no_multi noscript"
NOT_INT = "ERR value is not an integer or out of range"


def _conf_for(c) -> dict:
    """The REPLCONF values c sent so far: the server's, by client id, until
    its SYNC/PSYNC or its end (``Server.client_gone``)."""
    conf = c.server.replconf.get(c.id)
    if conf is None:
        conf = c.server.replconf[c.id] = {}
    return conf


@command("sync", 1, _FLAGS_SYNC, group="server")
def sync_cmd(c, argv):
    """An internal command used in replication."""
    return _sync(c, argv)


@command("psync", -3, _FLAGS_SYNC, group="server", since="2.8.0", args="replicationid offset:i")
def psync_cmd(c, argv):
    """An internal command used in replication."""
    return _sync(c, argv)


def _sync(c, argv):
    server = c.server
    if c.kind == "replica":
        return None          # already a replica: ignored (Valkey's syncCommand)
    repl = server.repl
    if repl.role == "slave":
        message = replica.sync_refusal(server)
        if message:
            raise CommandError(message)
    if c.out:
        raise CommandError("ERR SYNC and PSYNC are invalid with pending output")
    if argv[0].lower() == b"psync":
        parse_int(argv[2], NOT_INT)
    conf = server.replconf.get(c.id, {})
    if conf.get("rdb_filter") is not None and not conf.get("eof"):
        # (a filtered RDB is always sent over the socket, as Valkey's)
        raise CommandError("ERR Filtered replica requires EOF capability")
    conf = server.replconf.pop(c.id, {})
    repl.get_primary().sync(c, argv, conf)
    return None


@command("replconf", -1, "admin noscript loading stale allow_busy", group="server",
         since="3.0.0", doc_flags="syscmd", complexity="O(1)")
def replconf(c, argv):
    """An internal command for configuring the replication stream."""
    if len(argv) % 2 == 0:
        raise CommandError("ERR syntax error")
    server = c.server
    for j in range(1, len(argv), 2):
        opt = argv[j].lower()
        val = argv[j + 1]
        if opt == b"listening-port":
            _conf_for(c)["port"] = parse_int(val, NOT_INT)
        elif opt == b"ip-address":
            if len(val) >= 256:      # NET_HOST_STR_LEN
                raise CommandError("ERR REPLCONF ip-address provided by replica instance is "
                                   "too long: %d bytes" % len(val))
            _conf_for(c)["ip"] = val.decode("latin-1")
        elif opt == b"capa":
            v = val.lower()
            if v == b"eof":
                _conf_for(c)["eof"] = True
            elif v == b"psync2":
                _conf_for(c)["psync2"] = True
        elif opt == b"ack":
            if c.kind != "replica":
                return None
            off = _ll(val)
            if off is None:
                return None
            aof = None
            if len(argv) > j + 3 and argv[j + 2].lower() == b"fack":
                aof = _ll(argv[j + 3])
                if aof is None:
                    return None
            server.repl.get_primary().ack(c, off, aof)
            return None
        elif opt == b"getack":
            # Valkey's replica sends an ACK to its primary at once; hotkv's
            # replica acks on its own schedule (hotkv.replication.replica),
            # so a client's GETACK is accepted and does nothing more.
            return None
        elif opt == b"rdb-only":
            v = parse_int(val, NOT_INT)
            if not 0 <= v <= 1:
                raise CommandError("ERR value is out of range, value must between 0 and 1")
        elif opt == b"rdb-filter-only":
            # Include filters for the full sync's RDB: never the keys; the
            # function libraries if "functions" is named (valkey-cli
            # --functions-rdb), nothing at all for "" (valkey-cli --replica).
            rdb_filter = ""
            for f in val.split():
                if f.lower() != b"functions":
                    raise CommandError("ERR Unsupported rdb-filter-only option: %s"
                                       % f.decode("utf-8", "replace"))
                rdb_filter = "functions"
            _conf_for(c)["rdb_filter"] = rdb_filter
        elif opt == b"version":
            if not _version_ok(val):
                raise CommandError("ERR Unrecognized version format: %s"
                                   % val.decode("utf-8", "replace"))
        else:
            raise CommandError("ERR Unrecognized REPLCONF option: %s"
                               % argv[j].decode("utf-8", "replace"))
    return OK


def _ll(b: bytes):
    return string2ll(b)


def _version_ok(val: bytes) -> bool:
    parts = val.split(b".")
    return len(parts) == 3 and all(p.isdigit() and int(p) <= 255 for p in parts)


def _settled(server):
    """The stream's offset is read within a read whose commands the primary
    side holds (its verbatim path): they are encoded first."""
    primary = server.repl.primary
    if primary is not None and primary.raw_cmds is not None:
        primary.settle()


def _write_offset(c) -> int:
    """The offset WAIT waits for: the client's last write's; in a script,
    its caller's (the script's own writes are not propagated yet, as Valkey)."""
    _settled(c.server)
    if c.is_fake:
        caller = c.server.current_client
        return caller.woff if caller is not None else c.server.repl.master_repl_offset
    return c.woff


@command("wait", 3, "blocking", group="generic", since="3.0.0", acl=("connection",),
         group_acl=False,
         args="numreplicas:i timeout:i",
         summary="Blocks until the asynchronous replication of all preceding write commands sent "
                 "by the connection is completed.", complexity="O(1)")
def wait_cmd(c, argv):
    """Blocks until the asynchronous replication of all preceding write commands sent by
    the connection is completed."""
    server = c.server
    if server.repl.role == "slave":
        raise CommandError(
            "ERR WAIT cannot be used with replica instances. Please also note that if a "
            "replica is configured to be writable (which is not the default) writes to "
            "replicas are just local and are not propagated.")
    numreplicas = parse_int(argv[1], NOT_INT)
    deadline = parse_timeout(server, argv[2], seconds=False)
    primary = server.repl.get_primary()
    offset = _write_offset(c)
    acked = primary.count_acks(offset)
    if acked >= numreplicas:
        return acked
    return primary.wait(c, offset, numreplicas, -1, deadline, acked)


@command("waitaof", 4, "blocking", group="generic", since="7.2.0", acl=("connection",),
         group_acl=False,
         args="numlocal:i numreplicas:i timeout:i",
         summary="Blocks until all of the preceding write commands sent by the connection are "
                 "written to the append-only file of the primary and/or replicas.",
         complexity="O(1)")
def waitaof_cmd(c, argv):
    """Blocks until all of the preceding write commands sent by the connection are written
    to the append-only file of the primary and/or replicas."""
    server = c.server
    numlocal = parse_int(argv[1], NOT_INT)
    if not 0 <= numlocal <= 1:
        raise CommandError("ERR value is out of range, value must between 0 and 1")
    numreplicas = parse_int(argv[2], NOT_INT)
    if numreplicas < 0:
        raise CommandError("ERR value is out of range, must be positive")
    deadline = parse_timeout(server, argv[3], seconds=False)
    if server.repl.role == "slave":
        raise CommandError("ERR WAITAOF cannot be used with replica instances. Please also "
                           "note that writes to replicas are just local and are not "
                           "propagated.")
    if numlocal and not server.config.values["appendonly"]:
        raise CommandError("ERR WAITAOF cannot be used when numlocal is set but appendonly "
                           "is disabled.")
    primary = server.repl.get_primary()
    offset = _write_offset(c)
    acked = primary.count_acks(offset, aof=True)
    local = 1 if primary.local_synced() else 0
    if acked >= numreplicas and local >= numlocal:
        return [local, acked]
    return primary.wait(c, offset, numreplicas, numlocal, deadline, [local, acked])


@command("role", 1, "noscript loading stale fast", group="server", since="2.8.12",
         acl=("admin", "dangerous"), complexity="O(1)")
def role_cmd(c, argv):
    """Returns the replication role."""
    server = c.server
    repl = server.repl
    if repl.role == "slave":
        return replica.role_reply(server)
    _settled(server)
    rows = []
    for lk in repl.replicas:
        if lk.state != _primary.ONLINE:
            continue
        ip = lk.ip or lk.client.addr.rsplit(":", 1)[0].strip("[]")
        rows.append([ip.encode(), b"%d" % lk.port, b"%d" % lk.ack_off])
    return [b"master", repl.master_repl_offset, rows]
