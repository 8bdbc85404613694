"""CLIENT: connection introspection and control.

Owns the CLIENT subcommands -- ID, SETNAME, GETNAME, SETINFO, INFO, LIST,
KILL, UNBLOCK, REPLY, NO-EVICT, NO-TOUCH, PAUSE, UNPAUSE, CAPA, HELP -- and
the CLIENT LIST line format, which follows Valkey 8's field for field so
tools that split it on spaces and ``=`` keep working.

Invariants:
* a killed client is gone from ``server.clients`` (and from every blocking
  queue) before the command that killed it returns, as Redis's freeClient;
  killing oneself closes the connection after this reply;
* CLIENT UNBLOCK only wakes a client blocked on keys, through
  ``hotkv.blocking.unblock`` (with its timeout reply, or the UNBLOCKED error);
* CLIENT REPLY sets ``client.reply_mode``; SKIP is turned into "drop the
  next command's reply" by the dispatcher when that command arrives;
* during CLIENT PAUSE a paused client's command is postponed, never
  refused nor reordered: it runs, then the ones sent after it, when the
  pause ends (timeout or UNPAUSE).  WRITE pauses writes (and EXEC of a
  transaction that writes), ALL pauses everything, UNPAUSE included.

Hooks: ``USER_EXISTS[0]`` is ``fn(server, name) -> bool`` for the USER
filters; the ACL module replaces it (without one, only "default" exists).
"""

from __future__ import annotations

import time

from .. import blocking, errors
from ..client import REPLY_OFF, REPLY_ON, REPLY_SKIP
from ..errors import CommandError
from ..registry import command, container
from ..replies import help_reply
from ..resp import OK, Verbatim
from ..util import string2ll
from .connection import validate_client_name

container("client", group="server")

USER_EXISTS = [lambda server, name: name == b"default"]

_TYPES = {b"normal": "normal", b"slave": "replica", b"replica": "replica",
          b"pubsub": "pubsub", b"master": "primary", b"primary": "primary"}


def _s(b) -> str:
    return b.decode("utf-8", "surrogateescape") if isinstance(b, (bytes, bytearray)) else str(b)


def client_type(cl) -> str:
    if cl.channels or cl.patterns or cl.shard_channels:
        return "pubsub"
    return "normal" if cl.kind in ("normal", "", None) else cl.kind


def user_name(cl) -> str:
    user = cl.user
    if user is None:
        return "default"
    name = getattr(user, "name", user)
    return _s(name)


def client_flags(cl) -> str:
    f = "O" if cl in cl.server.monitors else ""
    if cl.channels or cl.patterns or cl.shard_channels:
        f += "P"
    if cl.multi:
        f += "x"
    if cl.blocked is not None:
        f += "b"
    if cl.tracking:
        f += "t"
    if cl.dirty_cas:
        f += "d"
    if cl.closing:
        f += "c"
    if cl.addr == cl.laddr and cl.addr:   # a unix socket: both are <path>:0
        f += "U"
    if cl.no_evict:
        f += "e"
    if cl.no_touch:
        f += "T"
    return f or "N"


def client_info_line(cl, now: float | None = None) -> str:
    """One CLIENT LIST line (without the trailing newline)."""
    if now is None:
        now = time.time()
    cmd = cl.last_cmd
    current = cl.server.current_cmd
    if current is not None and cl.server.current_client is cl:
        cmd = current.name
    parser = getattr(cl, "parser", None)
    qbuf = parser.pending if parser is not None else 0
    try:
        omem = cl.output_size()
    except Exception:  # a transport already gone
        omem = 0
    transport = getattr(cl, "transport", None)
    events = "r" if transport is not None and not cl.closed else ""
    if events and omem:
        events += "w"
    multi_mem = sum(len(a) for _, argv in cl.multi_queue for a in argv) if cl.multi else 0
    return (
        "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s capa= db=%d "
        "sub=%d psub=%d ssub=%d multi=%d watch=%d qbuf=%d qbuf-free=%d argv-mem=0 "
        "multi-mem=%d rbs=16384 rbp=0 obl=0 oll=0 omem=%d tot-mem=%d events=%s cmd=%s "
        "user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s tot-net-in=%d tot-net-out=%d "
        "tot-cmds=%d" % (
            cl.id, cl.addr, cl.laddr, cl.fd, _s(cl.name), int(now - cl.created),
            int(now - cl.last_interaction), client_flags(cl), cl.db.index,
            len(cl.channels), len(cl.patterns), len(cl.shard_channels),
            len(cl.multi_queue) if cl.multi else -1, len(cl.watched), qbuf,
            0, multi_mem, omem, 16384 + qbuf + omem + multi_mem, events, cmd,
            user_name(cl), 3 if cl.resp3 else 2, _s(cl.lib_name), _s(cl.lib_ver),
            cl.net_in, cl.net_out, cl.ncmds))


class _Filter:
    __slots__ = ("ids", "type", "addr", "laddr", "user", "skipme", "maxage")

    def __init__(self, skipme):
        self.ids = None
        self.type = None
        self.addr = None
        self.laddr = None
        self.user = None
        self.skipme = skipme
        self.maxage = 0

    def matches(self, cl, me, now) -> bool:
        if self.addr is not None and cl.addr != self.addr:
            return False
        if self.laddr is not None and cl.laddr != self.laddr:
            return False
        if self.type is not None and client_type(cl) != self.type:
            return False
        if self.ids is not None and cl.id not in self.ids:
            return False
        if self.user is not None and user_name(cl) != self.user:
            return False
        if self.skipme and cl is me:
            return False
        if self.maxage and now - cl.created < self.maxage:
            return False
        return True


def _parse_filters(c, argv, start: int, skipme: bool) -> _Filter:
    """CLIENT LIST / CLIENT KILL options, with Valkey's error texts."""
    flt = _Filter(skipme)
    n = len(argv)
    i = start
    while i < n:
        opt = argv[i].lower()
        more = n > i + 1
        if opt == b"id" and more:
            ids = flt.ids if flt.ids is not None else set()
            j = i + 1
            while j < n:
                v = string2ll(argv[j])
                if v is None:
                    if j == i + 1:
                        raise CommandError(errors.SYNTAX)
                    break
                if v <= 0:
                    raise CommandError("ERR client-id should be greater than 0")
                ids.add(v)
                j += 1
            flt.ids = ids
            i = j
            continue
        if opt == b"maxage" and more:
            v = string2ll(argv[i + 1])
            if v is None:
                raise CommandError("ERR maxage is not an integer or out of range")
            if v <= 0:
                raise CommandError("ERR maxage should be greater than 0")
            flt.maxage = v
        elif opt == b"type" and more:
            t = _TYPES.get(argv[i + 1].lower())
            if t is None:
                raise CommandError("ERR Unknown client type '%s'" % _s(argv[i + 1]))
            flt.type = t
        elif opt == b"addr" and more:
            flt.addr = _s(argv[i + 1])
        elif opt == b"laddr" and more:
            flt.laddr = _s(argv[i + 1])
        elif opt == b"user" and more:
            if not USER_EXISTS[0](c.server, argv[i + 1]):
                raise CommandError("ERR No such user '%s'" % _s(argv[i + 1]))
            flt.user = _s(argv[i + 1])
        elif opt == b"skipme" and more:
            v = argv[i + 1].lower()
            if v == b"yes":
                flt.skipme = True
            elif v == b"no":
                flt.skipme = False
            else:
                raise CommandError(errors.SYNTAX)
        else:
            raise CommandError(errors.SYNTAX)
        i += 2
    return flt


@command("client|id", 2, "noscript loading stale", group="connection")
def client_id(c, argv):
    """Returns the unique client ID of the connection."""
    return c.id


@command("client|info", 2, "noscript loading stale", group="connection")
def client_info(c, argv):
    """Returns information about the connection."""
    return Verbatim((client_info_line(c) + "\n").encode("utf-8", "surrogateescape"))


@command("client|list", -2, "admin noscript loading stale", group="connection")
def client_list(c, argv):
    """Lists open connections."""
    flt = _parse_filters(c, argv, 2, False) if len(argv) > 2 else None
    now = time.time()
    lines = []
    for cl in list(c.server.clients.values()):
        if cl.closed:
            continue
        if flt is None or flt.matches(cl, c, now):
            lines.append(client_info_line(cl, now))
            lines.append("\n")
    return Verbatim("".join(lines).encode("utf-8", "surrogateescape"))


def kill_client(server, cl):
    """Disconnect cl at once, dropping its pending output (freeClient)."""
    server.clients.pop(cl.id, None)
    blocking.drop(cl)
    kill = getattr(cl, "kill", None)
    if kill is not None:
        kill()
    else:
        cl.close()


@command("client|kill", -3, "admin noscript loading stale", group="connection")
def client_kill(c, argv):
    """Terminates open connections."""
    server = c.server
    if len(argv) == 3:
        flt = _Filter(False)
        flt.addr = _s(argv[2])
    else:
        flt = _parse_filters(c, argv, 2, True)
    now = time.time()
    killed = 0
    for cl in list(server.clients.values()):
        if cl.closed or not flt.matches(cl, c, now):
            continue
        if cl is c:
            c.closing = True   # after this reply
        else:
            kill_client(server, cl)
        killed += 1
    if len(argv) == 3:
        if not killed:
            raise CommandError("ERR No such client")
        return OK
    return killed


@command("client|unblock", -3, "admin noscript loading stale", group="connection")
def client_unblock(c, argv):
    """Unblocks a client blocked by a blocking command from a different connection."""
    error = False
    if len(argv) >= 4:   # Valkey ignores anything after the reason
        mode = argv[3].lower()
        if mode == b"error":
            error = True
        elif mode != b"timeout":
            raise CommandError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    cid = string2ll(argv[2])
    if cid is None:
        raise CommandError(errors.NOT_INTEGER)
    target = c.server.clients.get(cid)
    if target is None or target.blocked is None or target.blocked.data is _PAUSED:
        return 0
    if error:
        blocking.unblock(target, error=errors.UNBLOCKED)
    else:
        blocking.unblock(target)
    return 1


@command("client|reply", 3, "noscript loading stale", group="connection")
def client_reply(c, argv):
    """Instructs the server whether to reply to commands."""
    mode = argv[2].lower()
    if mode == b"on":
        c.reply_mode = REPLY_ON
        c.skip_this = False
        return OK
    if mode == b"off":
        c.reply_mode = REPLY_OFF
        return None
    if mode == b"skip":
        if c.reply_mode != REPLY_OFF:
            c.reply_mode = REPLY_SKIP
        return None
    raise CommandError(errors.SYNTAX)


@command("client|setname", 3, "noscript loading stale", group="connection")
def client_setname(c, argv):
    """Sets the connection name."""
    validate_client_name(argv[2])
    c.name = argv[2]
    return OK


@command("client|getname", 2, "noscript loading stale", group="connection")
def client_getname(c, argv):
    """Returns the name of the connection."""
    return c.name or None


@command("client|setinfo", 4, "noscript loading stale", group="connection")
def client_setinfo(c, argv):
    """Sets information specific to the client or connection."""
    attr = argv[2].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        raise CommandError("ERR Unrecognized option '%s'" % _s(argv[2]))
    value = argv[3]
    for ch in value:
        if ch < 33 or ch > 126:
            raise CommandError("ERR %s cannot contain spaces, newlines or special characters."
                               % _s(argv[2]))
    if attr == b"lib-name":
        c.lib_name = value
    else:
        c.lib_ver = value
    return OK


def _on_off(arg: bytes) -> bool:
    a = arg.lower()
    if a == b"on":
        return True
    if a == b"off":
        return False
    raise CommandError(errors.SYNTAX)


@command("client|no-evict", 3, "admin noscript loading stale", group="connection")
def client_no_evict(c, argv):
    """Set client eviction mode for the current connection."""
    c.no_evict = _on_off(argv[2])
    return OK


@command("client|no-touch", 3, "noscript loading stale", group="connection")
def client_no_touch(c, argv):
    """Controls whether commands sent by the client affect the LRU/LFU of accessed keys."""
    c.no_touch = _on_off(argv[2])
    return OK


@command("client|capa", -3, "noscript loading stale", group="connection")
def client_capa(c, argv):
    """A client claims its capabilities (none changes hotkv's replies)."""
    return OK


# -- CLIENT PAUSE / UNPAUSE ------------------------------------------------------
#
# A paused client's command is postponed, not refused: it goes back to the
# head of the client's pending commands and the client is marked blocked (a
# key-less Waiter, so reading stops and CLIENT LIST shows "b"), exactly the
# state a blocking command leaves (counted in blocked_clients, as Valkey 8
# does); when the pause ends every postponed client is resumed in order and
# runs its commands.  ``server.pause_check`` is set
# only while a pause is on, so an unpaused server pays one attribute test.

_PAUSED = "client-pause"


class _Pause:
    __slots__ = ("end_ms", "all", "postponed", "timer")

    def __init__(self, end_ms, all_mode):
        self.end_ms = end_ms
        self.all = all_mode
        self.postponed = []
        self.timer = None


def _now_ms() -> int:
    return int(time.time() * 1000)


def pause_info(server) -> tuple:
    """(paused_reason, paused_actions, paused_timeout_milliseconds) for INFO."""
    p = getattr(server, "client_pause", None)
    if p is None:
        return "none", "none", 0
    return "client_pause", "all" if p.all else "write", max(0, p.end_ms - _now_ms())


def _pause_check(client, cmd, argv) -> bool:
    server = client.server
    p = server.client_pause
    if p is None or client.is_fake:
        return False
    if _now_ms() >= p.end_ms:
        _lift(server)
        return False
    if not p.all and not (cmd.write or "may_replicate" in cmd.flags or (
            cmd.name == "exec" and client.multi_flags & 2)):
        return False
    client.pending.appendleft(argv)
    waiter = blocking.Waiter(client, client.db, [], 0, cmd, argv, None, None, False, _PAUSED)
    client.blocked = waiter
    server.blocked_clients += 1
    p.postponed.append(waiter)
    return True


def _lift(server):
    p = getattr(server, "client_pause", None)
    server.client_pause = None
    server.pause_check = None
    if p is None:
        return
    if p.timer is not None:
        p.timer.cancel()
    for waiter in p.postponed:
        cl = waiter.client
        if cl.blocked is waiter:
            blocking.drop(cl)   # key-less: just clears the blocked state
            server.resume_client(cl)


def _arm(server):
    p = server.client_pause
    if server.loop is None or p is None:
        return
    if p.timer is not None:
        p.timer.cancel()
    p.timer = server.loop.call_later(max(0, p.end_ms - _now_ms()) / 1000.0, _on_timer, server)


def _on_timer(server):
    p = getattr(server, "client_pause", None)
    if p is None:
        return
    p.timer = None
    if _now_ms() >= p.end_ms:
        _lift(server)
        server.wake()
    else:
        _arm(server)


@command("client|pause", -3, "admin noscript loading stale", group="connection")
def client_pause(c, argv):
    """Suspends commands processing."""
    all_mode = True
    if len(argv) >= 4:   # Valkey ignores anything after the mode
        mode = argv[3].lower()
        if mode == b"write":
            all_mode = False
        elif mode != b"all":
            raise CommandError("ERR CLIENT PAUSE mode must be WRITE or ALL")
    ms = string2ll(argv[2])
    if ms is None:
        raise CommandError("ERR timeout is not an integer or out of range")
    if ms < 0:
        raise CommandError(errors.TIMEOUT_NEGATIVE)
    server = c.server
    end = c.server.cmd_time_ms + ms if ms > 0 else 0
    p = getattr(server, "client_pause", None)
    if p is None:
        server.client_pause = _Pause(end, all_mode)
        server.pause_check = _pause_check
    else:
        p.end_ms = max(p.end_ms, end)
        p.all = p.all or all_mode
    _arm(server)
    return OK


@command("client|unpause", 2, "admin noscript loading stale", group="connection")
def client_unpause(c, argv):
    """Resumes processing of clients that were paused."""
    _lift(c.server)
    return OK


@command("client|help", 2, "loading stale", group="connection")
def client_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply("CLIENT", [
        "CAPA <option> [options...]",
        "    The client claims its some capability options.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|PRIMARY|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "    * ID <client-id> [<client-id>...]",
        "      Kill connections by client ids.",
        "    * MAXAGE <maxage>",
        "      Kill connections older than the specified age.",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|PRIMARY|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "    * USER <username>",
        "      Return clients authenticated by <username>.",
        "    * ADDR <ip:port>",
        "      Return clients connected from the specified address.",
        "    * LADDR <ip:port>",
        "      Return clients connected to the specified local address.",
        "    * ID <client-id> [<client-id>...]",
        "      Return clients with the specified IDs.",
        "    * SKIPME (YES|NO)",
        "      Exclude the current client from the list (default: no).",
        "    * MAXAGE <maxage>",
        "      List connections older than the specified age.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.",
        "    * LIB-VER: the client lib version.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "NO-TOUCH (ON|OFF)",
        "    Will not touch LRU/LFU stats when this mode is on.",
    ])
