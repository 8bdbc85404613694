"""CLIENT: connection introspection and control.

Owns the CLIENT subcommands -- ID, SETNAME, GETNAME, SETINFO, INFO, LIST,
KILL, UNBLOCK, REPLY, NO-EVICT, NO-TOUCH, PAUSE, UNPAUSE, CAPA, HELP, and
client-side caching's TRACKING, CACHING, GETREDIR, TRACKINGINFO -- and
the CLIENT LIST line format, which follows Valkey 8's field for field so
tools that split it on spaces and ``=`` keep working.

Invariants:
* a killed client is gone from ``server.clients`` (and from every blocking
  queue) before the command that killed it returns, as Redis's freeClient;
  killing oneself closes the connection after this reply;
* CLIENT UNBLOCK only wakes a client blocked on keys, through
  ``hotkv.core.blocking.unblock`` (with its timeout reply, or the UNBLOCKED error);
* CLIENT REPLY sets ``client.reply_mode``; SKIP is turned into "drop the
  next command's reply" by the dispatcher when that command arrives;
* during CLIENT PAUSE a paused client's command is postponed, never
  refused nor reordered: it runs, then the ones sent after it, when the
  pause ends (timeout or UNPAUSE).  WRITE pauses writes (and EXEC of a
  transaction that writes), ALL pauses everything, UNPAUSE included.

The CLIENT LIST line itself is ``hotkv.clients.clientinfo``'s (the ACL LOG shows it
too), the pause state ``hotkv.core.pause``'s (the dispatcher consults it) and the
tracking state ``hotkv.clients.tracking``'s (these commands check options in
Valkey's order, with its texts, and hand the result to it).
"""

from __future__ import annotations

from ..clients.client import REPLY_OFF, REPLY_ON, REPLY_SKIP
from ..clients.clientinfo import (
    as_str as _s,
    client_info_line,
    client_type,
    user_name,
    validate_client_name,
)
from ..core import blocking
from ..core.access import notouch_used
from ..core.pause import PAUSED, pause_clients, unpause_clients
from ..core.registry import command, container
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.replies import help_reply
from ..protocol.resp import OK, SetReply, Verbatim
from ..protocol.util import string2ll

# Valkey lists the CLIENT container itself under @slow only (its group,
# connection, would add @connection).
container("client", group="connection", summary="A container for client connection commands.",
          since="2.4.0", complexity="Depends on subcommand.").acl_categories = frozenset({"slow"})

_TYPES = {b"normal": "normal", b"slave": "replica", b"replica": "replica",
          b"pubsub": "pubsub", b"master": "primary", b"primary": "primary"}


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
            if argv[i + 1] not in c.server.acl.users:
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


@command("client|id", 2, "noscript loading stale", group="connection", since="5.0.0",
         complexity="O(1)")
def client_id(c, argv):
    """Returns the unique client ID of the connection."""
    return c.id


@command("client|info", 2, "noscript loading stale", group="connection", since="6.2.0",
         complexity="O(1)")
def client_info(c, argv):
    """Returns information about the connection."""
    return Verbatim((client_info_line(c) + "\n").encode("utf-8", "surrogateescape"))


@command("client|list", -2, "admin noscript loading stale", group="connection",
         args="client-type[TYPE (NORMAL | MASTER | REPLICA | PUBSUB)]@5.0.0 [ID "
              "client-id:i...]@6.2.0 [USER username]@8.1.0 [ADDR addr'ip:port']@8.1.0 [LADDR "
              "laddr'ip:port']@8.1.0 [SKIPME (YES | NO)]@8.1.0 [MAXAGE maxage:i]@8.1.0",
         since="2.4.0", complexity="O(N) where N is the number of client connections",
         history=(("2.8.12", "Added unique client `id` field."),
                  ("5.0.0", "Added optional `TYPE` filter."),
                  ("6.0.0", "Added `user` field."),
                  ("6.2.0",
                   "Added `argv-mem`, `tot-mem`, `laddr` and `redir` fields and the optional `ID` "
                   "filter."),
                  ("7.0.0", "Added `resp`, `multi-mem`, `rbs` and `rbp` fields."),
                  ("7.0.3", "Added `ssub` field."),
                  ("8.0.0",
                   "Replaced `master` `TYPE` with `primary`. `master` still supported for "
                   "backward compatibility."),
                  ("8.1.0", "Added filters USER, ADDR, LADDR, SKIPME, and MAXAGE")))
def client_list(c, argv):
    """Lists open connections."""
    flt = _parse_filters(c, argv, 2, False) if len(argv) > 2 else None
    now = c.server.clock.time()
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


@command("client|kill", -3, "admin noscript loading stale", group="connection",
         args="filter(old-format'ip:port'!2.8.12 | new-format([ID client-id:i...]@2.8.12 | "
              "client-type[TYPE (NORMAL | MASTER@3.2.0 | PRIMARY@8.0.0 | SLAVE | REPLICA@5.0.0 | "
              "PUBSUB)]@2.8.12 | [USER username] | [ADDR addr'ip:port'] | [LADDR "
              "laddr'ip:port']@6.2.0 | [SKIPME (YES | NO)] | [MAXAGE maxage:i]@8.0.0)...)",
         since="2.4.0", complexity="O(N) where N is the number of client connections",
         history=(("2.8.12", "Added new filter format."),
                  ("2.8.12", "`ID` option."),
                  ("3.2.0", "Added `master` type in for `TYPE` option."),
                  ("5.0.0",
                   "Replaced `slave` `TYPE` with `replica`. `slave` still supported for backward "
                   "compatibility."),
                  ("6.2.0", "`LADDR` option."),
                  ("8.0.0", "`MAXAGE` option."),
                  ("8.0.0",
                   "Replaced `master` `TYPE` with `primary`. `master` still supported for "
                   "backward compatibility."),
                  ("8.1.0", "`ID` option accepts multiple IDs.")))
def client_kill(c, argv):
    """Terminates open connections."""
    server = c.server
    if len(argv) == 3:
        flt = _Filter(False)
        flt.addr = _s(argv[2])
    else:
        flt = _parse_filters(c, argv, 2, True)
    now = server.clock.time()
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


@command("client|unblock", -3, "admin noscript loading stale", group="connection",
         args="client-id:i unblock-type[TIMEOUT | ERROR]", since="5.0.0",
         complexity="O(log N) where N is the number of client connections")
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
    if target is None or target.blocked is None or target.blocked.data is PAUSED:
        return 0
    if error:
        blocking.unblock(target, error=errors.UNBLOCKED)
    else:
        blocking.unblock(target)
    return 1


@command("client|reply", 3, "noscript loading stale", group="connection",
         args="action(ON | OFF | SKIP)", since="3.2.0", complexity="O(1)")
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


@command("client|setname", 3, "noscript loading stale", group="connection", args="connection-name",
         since="2.6.9", complexity="O(1)")
def client_setname(c, argv):
    """Sets the connection name."""
    validate_client_name(argv[2])
    c.name = argv[2]
    return OK


@command("client|getname", 2, "noscript loading stale", group="connection", since="2.6.9",
         complexity="O(1)")
def client_getname(c, argv):
    """Returns the name of the connection."""
    return c.name or None


@command("client|setinfo", 4, "noscript loading stale", group="connection",
         args="attr(LIB-NAME libname | LIB-VER libver)", since="7.2.0", complexity="O(1)")
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


@command("client|no-evict", 3, "admin noscript loading stale", group="connection",
         args="enabled(ON | OFF)", summary="Sets the client eviction mode of the connection.",
         since="7.0.0", complexity="O(1)")
def client_no_evict(c, argv):
    """Set client eviction mode for the current connection."""
    c.no_evict = _on_off(argv[2])
    return OK


@command("client|no-touch", 3, "noscript loading stale", group="connection",
         args="enabled(ON | OFF)", since="7.2.0", complexity="O(1)")
def client_no_touch(c, argv):
    """Controls whether commands sent by the client affect the LRU/LFU of accessed keys."""
    c.no_touch = _on_off(argv[2])
    if c.no_touch:
        notouch_used(c.server)   # the keyspace's stores start checking (hotkv.core.access)
    return OK


@command("client|capa", -3, "noscript loading stale", group="connection", args="capability...",
         summary="A client claims its capability.", since="8.0.0", complexity="O(1)")
def client_capa(c, argv):
    """A client claims its capabilities (none changes hotkv's replies)."""
    return OK


# -- client-side caching (the tracking state and its messages: hotkv.clients.tracking) -------

@command("client|tracking", -3, "noscript loading stale", group="connection", since="6.0.0",
         args="status(ON | OFF) [REDIRECT client-id:i] [PREFIX prefix]... [BCAST] [OPTIN] "
              "[OPTOUT] [NOLOOP]",
         complexity="O(1). Some options may introduce additional complexity.")
def client_tracking(c, argv):
    """Controls server-assisted client-side caching for the connection."""
    redirect = 0
    bcast = optin = optout = noloop = False
    prefixes = []
    n = len(argv)
    j = 3
    while j < n:
        opt = argv[j].lower()
        more = j < n - 1
        if opt == b"redirect" and more:
            j += 1
            if redirect:
                raise CommandError("ERR A client can only redirect to a single other client")
            v = string2ll(argv[j])
            if v is None:
                raise CommandError(errors.NOT_INTEGER)
            redirect = v
            if v not in c.server.clients:
                raise CommandError("ERR The client ID you want redirect to does not exist")
        elif opt == b"bcast":
            bcast = True
        elif opt == b"optin":
            optin = True
        elif opt == b"optout":
            optout = True
        elif opt == b"noloop":
            noloop = True
        elif opt == b"prefix" and more:
            j += 1
            prefixes.append(argv[j])
        else:
            raise CommandError(errors.SYNTAX)
        j += 1
    mode = argv[2].lower()
    tracking = c.server.tracking
    if mode == b"off":
        tracking.disable(c)
        return OK
    if mode != b"on":
        raise CommandError(errors.SYNTAX)
    st = c.tracking
    if prefixes and not bcast:
        raise CommandError("ERR PREFIX option requires BCAST mode to be enabled")
    if st and st.bcast != bcast:
        raise CommandError("ERR You can't switch BCAST mode on/off before disabling tracking "
                           "for this client, and then re-enabling it with a different mode.")
    if bcast and (optin or optout):
        raise CommandError("ERR OPTIN and OPTOUT are not compatible with BCAST")
    if optin and optout:
        raise CommandError("ERR You can't specify both OPTIN mode and OPTOUT mode")
    if st and ((optin and st.optout) or (optout and st.optin)):
        raise CommandError("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking "
                           "for this client, and then re-enabling it with a different mode.")
    if bcast:
        collision = tracking.prefix_collision(c, prefixes)
        if collision is not None:
            message, stop = collision
            if stop:
                raise CommandError(message)
            # Valkey replies the error and still enables tracking (+OK): see
            # hotkv.clients.tracking's docstring.
            c.server.count_error(message)
            c.add_error(message)
    tracking.enable(c, redirect, bcast, optin, optout, noloop, prefixes)
    return OK


@command("client|caching", 3, "noscript loading stale", group="connection", since="6.0.0",
         args="mode(YES | NO)", complexity="O(1)")
def client_caching(c, argv):
    """Instructs the server whether to track the keys in the next request."""
    st = c.tracking
    if not st:
        raise CommandError("ERR CLIENT CACHING can be called only when the client is in "
                           "tracking mode with OPTIN or OPTOUT mode enabled")
    opt = argv[2].lower()
    if opt == b"yes":
        if not st.optin:
            raise CommandError("ERR CLIENT CACHING YES is only valid when tracking is enabled "
                               "in OPTIN mode.")
    elif opt == b"no":
        if not st.optout:
            raise CommandError("ERR CLIENT CACHING NO is only valid when tracking is enabled "
                               "in OPTOUT mode.")
    else:
        raise CommandError(errors.SYNTAX)
    st.caching = True
    return OK


@command("client|getredir", 2, "noscript loading stale", group="connection", since="6.0.0",
         complexity="O(1)")
def client_getredir(c, argv):
    """Returns the client ID to which the connection's tracking notifications are redirected."""
    return c.tracking.redirect if c.tracking else -1


@command("client|trackinginfo", 2, "noscript loading stale", group="connection",
         since="6.2.0", complexity="O(1)")
def client_trackinginfo(c, argv):
    """Returns information about server-assisted client-side caching for the connection."""
    st = c.tracking
    if not st:
        return {b"flags": SetReply([b"off"]), b"redirect": -1, b"prefixes": []}
    flags = [b"on"]
    if st.bcast:
        flags.append(b"bcast")
    if st.optin:
        flags.append(b"optin")
        if st.caching:
            flags.append(b"caching-yes")
    if st.optout:
        flags.append(b"optout")
        if st.caching:
            flags.append(b"caching-no")
    if st.noloop:
        flags.append(b"noloop")
    if st.broken:
        flags.append(b"broken_redirect")
    return {b"flags": SetReply(flags), b"redirect": st.redirect,
            b"prefixes": sorted(st.prefixes)}


# -- CLIENT PAUSE / UNPAUSE (the state and its effect: hotkv.core.pause) -------------

@command("client|pause", -3, "admin noscript loading stale", group="connection",
         args="timeout:i mode[WRITE | ALL]@6.2.0", since="3.0.0", complexity="O(1)",
         history=(("6.2.0", "`CLIENT PAUSE WRITE` mode added along with the `mode` option."),))
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
    pause_clients(c.server, c.server.cmd_time_ms + ms if ms > 0 else 0, all_mode)
    return OK


@command("client|unpause", 2, "admin noscript loading stale", group="connection",
         summary="Resumes processing commands from paused clients.", since="6.2.0",
         complexity="O(N) Where N is the number of paused clients")
def client_unpause(c, argv):
    """Resumes processing of clients that were paused."""
    unpause_clients(c.server)
    return OK


@command("client|help", 2, "loading stale", group="connection", since="5.0.0", complexity="O(1)")
def client_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply("CLIENT", [
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "CAPA <option> [options...]",
        "    The client claims its some capability options.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
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
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "NO-TOUCH (ON|OFF)",
        "    Will not touch LRU/LFU stats when this mode is on.",
    ])
