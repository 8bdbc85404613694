"""Connection guards and resource limits that are not part of one command.

Owns:
* protected mode (``protected_mode_refusal``, asked by the server for every
  new connection): while ``protected-mode`` is yes and the ``default`` user
  needs no password, connections from anywhere but the loopback interface
  or a unix socket are refused with Redis's DENIED text;
* ``rename-command OLD NEW`` (config file / startup option, repeatable):
  the server gets its own command table in which OLD is unknown and NEW
  (when not empty) runs the command.  ACL rules keep using original names,
  as in Redis;
* the ``normal`` class of ``client-output-buffer-limit``: the hard limit
  is checked by ``Connection.flush`` as replies are written (through
  ``server.obuf_hard_normal``, kept current here), the soft limit (over it
  for the given seconds) by ``cron``, which the server's cron calls; both
  count the pending output beyond the first 16 KB (``REPLY_BUF_BYTES``),
  as Valkey counts its reply list and not its fixed reply buffer.  The
  pub/sub class is the pub/sub module's;
* ``timeout`` in the same cron: idle clients are closed (blocked and
  subscribed clients are exempt, as in Redis); the cron also measures every
  client for ``maxmemory-clients`` (hotkv.clients.client_eviction) while it is set;
* ``oom-score-adj`` / ``oom-score-adj-values`` (Linux): the process's
  /proc/self/oom_score_adj, as valkey-server sets it (``set_oom_score_adj``):
  the first adjustment remembers the score the process had, ``yes``/``relative``
  add the class's value to it, ``absolute`` writes the value, ``no`` puts the
  remembered score back; a score the kernel refuses fails the CONFIG SET.
  The class is the role's (``oom_class``: a replica's while it follows a
  primary, set again by ``oom_role_changed`` on REPLICAOF); a forked child
  takes the background-child class (hotkv.persistence.forkchild).

The server calls ``init_server``, ``protected_mode_refusal``, ``cron`` and
``obuf_changed`` by name (``hotkv.server``); this module imports no other
part of the server.

Invariants: a check costs nothing when its setting is off (0 / empty); the
cron scans clients only when a limit is set; every limit closes the client
without touching any other client.
"""

from __future__ import annotations

import ipaddress
import logging
import shlex
import time

from ..core.config import PARAMS, ConfigError, param, parse_memory
from ..core.registry import TABLE

log = logging.getLogger("hotkv")
# What the limits leave out: Valkey counts a client's reply list, not the
# fixed 16 KB reply buffer in front of it (a reply that fits there never
# counts, so a 10-byte limit still lets INFO through).  An array reply is
# counted whole (Connection.flush): those built with a deferred length (KEYS,
# SCAN...) go to the reply list entirely in Valkey.
REPLY_BUF_BYTES = 16 * 1024

PROTECTED_MODE_DENIED = (
    "DENIED Running in protected mode because protected mode is enabled and no password is "
    "set for the default user. In this mode connections are only accepted from the loopback "
    "interface. If you want to connect from external computers, you may adopt one of the "
    "following solutions: 1) Just disable protected mode sending the command 'CONFIG SET "
    "protected-mode no' from the loopback interface by connecting from the same host the "
    "server is running, however MAKE SURE it's not publicly accessible from internet if you "
    "do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just "
    "disable the protected mode by editing the configuration file, and setting the protected "
    "mode option to 'no', and then restarting the server. 3) If you started the server "
    "manually just for testing, restart it with the '--protected-mode no' option. 4) Set up "
    "an authentication password for the default user. NOTE: You only need to do one of the "
    "above things in order for the server to start accepting connections from the outside.")


# ----------------------------------------------------------------------
# rename-command
# ----------------------------------------------------------------------

def _parse_renames(text: str):
    try:
        words = shlex.split(text)
    except ValueError:
        raise ConfigError("Invalid rename-command arguments") from None
    if len(words) == 1:
        words.append("")    # "rename-command FLUSHALL """ as a config line
    if len(words) % 2:
        raise ConfigError("wrong number of arguments")
    return tuple((words[i].lower(), words[i + 1]) for i in range(0, len(words), 2))


def _fmt_renames(pairs) -> str:
    return " ".join("%s %s" % (old, shlex.quote(new)) for old, new in pairs)


param("rename-command", "special", (), mutable=False, multi=True, parse_fn=_parse_renames,
      fmt=_fmt_renames)


def apply_renames(server):
    pairs = server.config.values.get("rename-command") or ()
    if not pairs:
        return
    table = dict(TABLE)
    for old, new in pairs:
        cmd = table.get(old.encode())
        if cmd is None or cmd.parent is not None:
            raise ConfigError("No such command in rename-command: %s" % old)
        for k in [k for k, v in table.items() if v is cmd]:
            del table[k]
        if new:
            nb = new.encode()
            table[nb.lower()] = cmd
            table[nb.upper()] = cmd
    server.command_table = table


# ----------------------------------------------------------------------
# protected mode
# ----------------------------------------------------------------------

def is_loopback(conn) -> bool:
    peer = conn.peer()
    if not isinstance(peer, tuple):
        return True            # unix socket
    try:
        ip = ipaddress.ip_address(peer[0].split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def protected_mode_refusal(conn):
    """The DENIED text when protected mode refuses conn (the server asks on
    every connection), else None."""
    server = conn.server
    if not server.config.values["protected-mode"]:
        return None
    if not server.acl.default.nopass:
        return None
    if is_loopback(conn):
        return None
    server.stat_rejected_conn += 1
    return PROTECTED_MODE_DENIED


# ----------------------------------------------------------------------
# timeout and the normal output-buffer class
# ----------------------------------------------------------------------

def parse_output_limits(text: str) -> dict:
    """'normal 0 0 0 replica ... pubsub ...' -> {class: (hard, soft, seconds)}."""
    words = text.split()
    out = {}
    for i in range(0, len(words) - 3, 4):
        cls = words[i].lower()
        if cls == "slave":
            cls = "replica"
        hard, soft = parse_memory(words[i + 1]), parse_memory(words[i + 2])
        try:
            secs = int(words[i + 3])
        except ValueError:
            continue
        if hard is None or soft is None:
            continue
        out[cls] = (hard, soft, secs)
    return out


class _CronState:
    __slots__ = ("limits_text", "normal", "last_timeout_scan")

    def __init__(self):
        self.limits_text = None
        self.normal = (0, 0, 0)
        self.last_timeout_scan = 0.0


def cron(server):
    """The server's cron: output-buffer soft limits and idle timeouts."""
    state = server.limits_state
    values = server.config.values
    text = values["client-output-buffer-limit"]
    if text is not state.limits_text:
        state.limits_text = text
        state.normal = normal_limits(text)
        server.obuf_hard_normal = state.normal[0]
    hard, soft, secs = state.normal
    now = time.time()
    if hard or soft:
        for c in list(server.clients.values()):
            if c.closed or c.kind != "normal" or c.subscribed:
                continue
            size = c.output_size() - REPLY_BUF_BYTES
            if hard and size >= hard:
                _close_for_output(server, c, size)
            elif soft and size >= soft:
                if not c.output_soft_since:
                    c.output_soft_since = now
                elif now - c.output_soft_since >= secs:
                    _close_for_output(server, c, size)
            else:
                c.output_soft_since = 0.0
    if server.pubsub.soft_clients:   # subscribers over the soft limit, no traffic since
        server.pubsub.cron()
    if server.clients_limit:     # maxmemory-clients: every client measured anew
        server.client_evictor.cron()
    idle = values["timeout"]
    if idle and now - state.last_timeout_scan >= 1.0:
        state.last_timeout_scan = now
        # hotkv.core.clock: idleness counts the clock's time, as CLIENT LIST's idle
        # (a test that advances past `timeout` sees idle clients closed).
        vnow = server.clock.time()
        for c in list(server.clients.values()):
            # Never the replication links (Valkey: no timeout for a replica
            # or the primary's client).
            if c.closed or c.blocked is not None or c.subscribed or \
                    c.kind in ("primary", "replica"):
                continue
            if vnow - c.last_interaction > idle:
                log.info("closing idle client id=%d addr=%s", c.id, c.addr)
                c.kill()


def normal_limits(value) -> tuple:
    """(hard, soft, seconds) of the normal class, from the setting's value."""
    if isinstance(value, str):
        return parse_output_limits(value).get("normal", (0, 0, 0))
    # hotkv.clients.pubsub keeps ((class, hard, soft, seconds), ...)
    return next((tuple(e[1:4]) for e in value if e[0] == "normal"), (0, 0, 0))


def output_limit_reached(server, c, size):
    """From Connection.flush: the reply about to be written takes c over the
    normal-class hard limit (checked where Redis checks, as replies queue)."""
    _close_for_output(server, c, size)


def _close_for_output(server, c, size):
    server.stat_client_outbuf_limit_disconnections += 1
    log.warning("closing client id=%d addr=%s for overcoming output buffer limits (%d bytes)",
                c.id, c.addr, size)
    c.kill()


def init_server(server) -> "_CronState":
    """Apply rename-command and read the normal output-buffer class; the
    cron's state (``server.limits_state``).  The server calls ``obuf_changed``
    when CONFIG SET changes the setting (after hotkv.clients.pubsub merged the
    new value over the old, as the setting may name only some classes)."""
    apply_renames(server)
    obuf_changed(server)
    _oom_init(server)
    return _CronState()


# ----------------------------------------------------------------------
# oom-score-adj (Linux)
# ----------------------------------------------------------------------

OOM_SCORE_PATH = "/proc/self/oom_score_adj"
OOM_PRIMARY, OOM_REPLICA, OOM_BGCHILD = 0, 1, 2   # the classes of oom-score-adj-values
for _name in ("oom-score-adj", "oom-score-adj-values"):
    PARAMS[_name].inert = False


class _OomState:
    """Per process, as the score is: whether a server adjusted it, and the
    score the process had before (put back by ``oom-score-adj no``)."""
    adjusted = False
    base = 0


def set_oom_score_adj(values, process_class: int = OOM_PRIMARY) -> bool:
    """Write the score ``oom-score-adj`` asks for; False (logged) when the
    file cannot be read or written (no /proc, or a score the kernel refuses)."""
    mode = values["oom-score-adj"]
    if mode != "no":
        if not _OomState.adjusted:
            try:
                with open(OOM_SCORE_PATH) as f:
                    _OomState.base = int(f.read().strip() or 0)
            except (OSError, ValueError) as e:
                log.warning("Unable to read oom_score_adj: %s", getattr(e, "strerror", e) or e)
                return False
            _OomState.adjusted = True
        score = int(values["oom-score-adj-values"].split()[process_class])
        if mode != "absolute":   # yes and relative add to the score the process had
            score += _OomState.base
        score = max(-1000, min(1000, score))
    elif _OomState.adjusted:
        _OomState.adjusted = False
        score = _OomState.base
    else:
        return True
    try:
        with open(OOM_SCORE_PATH, "w") as f:
            f.write("%d\n" % score)
    except OSError as e:
        log.warning("Unable to write oom_score_adj: %s", e.strerror or e)
        return False
    return True


def oom_class(server) -> int:
    """The class of oom-score-adj-values this server's role takes: a replica's
    while it follows a primary (Valkey's setOOMScoreAdj(-1))."""
    return OOM_REPLICA if server.replica_link is not None else OOM_PRIMARY


def oom_role_changed(server):
    """REPLICAOF host port / NO ONE: the score follows the new role."""
    values = server.config.values
    if values["oom-score-adj"] != "no":
        set_oom_score_adj(values, oom_class(server))


def _oom_init(server):
    values = server.config.values

    def changed(_value):   # both settings' apply step, with Valkey 8.1's one message
        if not set_oom_score_adj(values, oom_class(server)):
            raise ConfigError("Failed to set current oom_score_adj. Check server logs.")

    server.config.listeners["oom-score-adj"] = changed
    server.config.listeners["oom-score-adj-values"] = changed
    if values["oom-score-adj"] != "no":
        set_oom_score_adj(values, oom_class(server))


def obuf_changed(server):
    """Keep ``server.obuf_hard_normal`` (read by Connection.flush) current."""
    value = server.config.values["client-output-buffer-limit"]
    server.obuf_hard_normal = normal_limits(value)[0]
