"""Server administration commands: INFO, CONFIG, COMMAND, DBSIZE, FLUSHALL,
FLUSHDB, TIME, LASTSAVE, SAVE, BGSAVE, SHUTDOWN, MONITOR, SLOWLOG, DEBUG,
MEMORY, MODULE LIST, FUNCTION FLUSH/LIST.

Owns what INFO reports and how, the CONFIG command (the parameters
themselves live in ``hotkv.config``), and the introspection of the command
table (COMMAND, generated from ``hotkv.registry`` -- nothing is declared twice).

Extension points (for other modules, at import time):

* INFO fields.  ``add_info_fields(section, fn)`` appends ``fn(server)``'s
  ``(name, value)`` pairs to an existing section (``"persistence"``,
  ``"stats"``...); ``add_info_section(name, fn, title=..., default=True,
  before=None)`` adds a whole section.  ``INFO_SECTIONS`` is the ordered
  table (section name -> ``InfoSection``).  The persistence section also
  asks ``server.aof.info_fields()`` (when the AOF object has it) for its
  ``aof_*`` fields, which replace the defaults shown when there is no AOF.
* ``SAVE_HOOKS``: ``fn(server)`` run by SAVE, BGSAVE and SHUTDOWN SAVE.
  hotkv keeps no RDB snapshot: what can be made durable is the AOF, which
  already writes every change before its reply leaves; this is where a
  persistence module hooks an explicit flush+fsync.  SAVE then reports
  success and resets ``rdb_changes_since_last_save`` and LASTSAVE, as Redis
  does, so tools that SAVE and poll LASTSAVE keep working.
* ``RESETSTAT_HOOKS``: ``fn(server)`` run by CONFIG RESETSTAT.
* ``DEBUG_SUBCOMMANDS``: ``name -> (fn(c, argv), argc)`` (argc as Redis
  checks it: exact count, or negative for "at least"); DEBUG itself is
  gated by ``enable-debug-command`` in the dispatcher.

MONITOR: ``server.monitors`` lists the monitoring clients; the dispatcher
calls ``server.feed_monitors`` after each command only while that list is
non-empty, so MONITOR costs nothing when nobody watches.  SLOWLOG: the
dispatcher compares each command's duration with
``server.slowlog_threshold`` (seconds, infinite when disabled; kept in sync
with slowlog-log-slower-than by a config listener) and calls
``server.slowlog_push`` for the slow ones.

Invariants: INFO sections come out in Redis's order, separated by one blank
line; a failed CONFIG SET leaves every parameter as it was (all values are
parsed before any is applied, and a listener's refusal rolls back).
"""

from __future__ import annotations

import logging
import os
import itertools
import platform
import re
import resource
import sys
import time

from .. import REDIS_COMPAT_VERSION, __version__, errors
from ..blocking import BLOCKED
from ..config import PARAMS, ConfigError
from ..errors import CommandError
from ..registry import COMMANDS, all_commands, command, container, lookup
from ..resp import OK, Simple, Verbatim, SetReply
from ..server import CRON_HOOKS, SERVER_INIT_HOOKS, used_memory, peak_rss
from ..util import stringmatch, string2ll

log = logging.getLogger("hotkv")

SAVE_HOOKS: list = []
RESETSTAT_HOOKS: list = []


def help_reply(name: str, lines) -> list:
    """Redis's addReplyHelp: a header, the lines, and HELP last."""
    out = [Simple(b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
                  % name.encode())]
    out.extend(Simple(line.encode()) for line in lines)
    out.append(Simple(b"HELP"))
    out.append(Simple(b"    Print this help."))
    return out


# ==========================================================================
# Keyspace-wide commands
# ==========================================================================

def _flush_mode(argv):
    if len(argv) > 2:
        raise CommandError(errors.SYNTAX)
    if len(argv) == 2 and argv[1].upper() not in (b"ASYNC", b"SYNC"):
        raise CommandError(errors.SYNTAX)


def flush_db(server, db) -> int:
    """Empty db; returns how many keys it held (added to the dirty counter)."""
    db.touch_all()
    removed = db.clear()
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
    _flush_mode(argv)
    removed = 0
    for db in c.server.dbs:
        removed += flush_db(c.server, db)
    _force_propagation(c, argv, removed)
    return OK


@command("flushdb", -1, "write", group="server", acl=("keyspace", "dangerous"))
def flushdb(c, argv):
    """Remove all keys from the current database."""
    _flush_mode(argv)
    _force_propagation(c, argv, flush_db(c.server, c.db))
    return OK


@command("dbsize", 1, "readonly fast", group="server", acl=("keyspace",))
def dbsize(c, argv):
    """Return the number of keys in the selected database."""
    return len(c.db.data)


@command("time", 1, "loading stale fast", group="server")
def time_(c, argv):
    """Return the current server time."""
    ns = time.time_ns()
    return [b"%d" % (ns // 1_000_000_000), b"%d" % ((ns // 1000) % 1_000_000)]


@command("lastsave", 1, "loading stale fast", group="server", acl=("admin", "dangerous"))
def lastsave(c, argv):
    """Return the Unix timestamp of the last successful save to disk."""
    return c.server.lastsave


def do_save(server):
    for hook in SAVE_HOOKS:
        hook(server)
    server.dirty_at_save = server.dirty
    server.lastsave = int(time.time())


@command("save", 1, "admin noscript no_async_loading no_multi", group="server")
def save(c, argv):
    """Synchronously save the dataset to disk."""
    do_save(c.server)
    return OK


@command("bgsave", -1, "admin noscript no_async_loading", group="server")
def bgsave(c, argv):
    """Asynchronously save the dataset to disk."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() != b"schedule"):
        raise CommandError(errors.SYNTAX)
    # Nothing to fork: the "background" save is over before the reply.
    do_save(c.server)
    return Simple(b"Background saving started")


@command("shutdown", -1, "admin noscript loading stale no_multi allow_busy", group="server")
def shutdown(c, argv):
    """Synchronously save the dataset to disk and then shut down the server."""
    nosave = save_ = abort = False
    for arg in argv[1:]:
        a = arg.lower()
        if a == b"nosave":
            nosave = True
        elif a == b"save":
            save_ = True
        elif a in (b"now", b"force"):
            pass
        elif a == b"abort":
            abort = True
        else:
            raise CommandError(errors.SYNTAX)
    if (abort and len(argv) > 2) or (nosave and save_):
        raise CommandError(errors.SYNTAX)
    if abort:
        raise CommandError("ERR No shutdown in progress.")
    server = c.server
    if server.shutdown_cb is None:
        raise CommandError("ERR Errors trying to SHUTDOWN. Check logs.")
    if save_ or (not nosave and server.config.values["save"]):
        for hook in SAVE_HOOKS:
            hook(server)
    log.warning("User requested shutdown...")
    server.shutdown_cb()
    # No reply: the connection closes, as with Redis.
    c.closing = True
    return BLOCKED


# ==========================================================================
# MONITOR
# ==========================================================================

def _repr_table():
    table = []
    for ch in range(256):
        if ch == 0x5C:
            table.append(b"\\\\")
        elif ch == 0x22:
            table.append(b'\\"')
        elif ch in (10, 13, 9, 7, 8):
            table.append(b"\\" + {10: b"n", 13: b"r", 9: b"t", 7: b"a", 8: b"b"}[ch])
        elif 32 <= ch < 127:
            table.append(bytes([ch]))
        else:
            table.append(b"\\x%02x" % ch)
    return table


_REPR = _repr_table()


def quoted(arg: bytes) -> bytes:
    """Redis's sdscatrepr: a double-quoted, escaped copy of arg."""
    return b'"' + b"".join([_REPR[ch] for ch in arg]) + b'"'


def _redacted(cmd, argv):
    """AUTH and HELLO's AUTH credentials never reach a monitor."""
    name = cmd.name
    if name == "auth":
        return argv[:1] + [b"(redacted)"] * (len(argv) - 1)
    if name == "hello":
        out = list(argv)
        for i in range(2, len(out) - 2):
            if out[i].lower() == b"auth":
                out[i + 1] = out[i + 2] = b"(redacted)"
        return out
    return argv


def feed_monitors(client, cmd, argv):
    """Called by the dispatcher after each command while a MONITOR exists:
    Redis's replicationFeedMonitors (admin commands are not shown, a blocked
    command is shown once, when it first runs)."""
    server = client.server
    if cmd.admin or client.reprocessing or server.loading or client.is_fake:
        return
    if "skip_monitor" in cmd.flags:
        return
    now = time.time()
    if client.addr == client.laddr:   # a unix socket (<path>:0 both ways)
        origin = b"unix:%s" % server.config.values["unixsocket"].encode()
    else:
        origin = client.addr.encode()
    line = b"+%.6f [%d %s] %s\r\n" % (now, client.db.index, origin,
                                        b" ".join([quoted(a) for a in _redacted(cmd, argv)]))
    for mon in list(server.monitors):
        if mon.closed:
            continue
        mon.add_raw(line)
        mon.schedule_flush()


def _stop_monitoring(c):
    try:
        c.server.monitors.remove(c)
    except ValueError:
        pass


@command("monitor", 1, "admin noscript loading stale", group="server")
def monitor(c, argv):
    """Listen for all requests received by the server in real-time."""
    server = c.server
    if c not in server.monitors:
        server.monitors.append(c)
        server.feed_monitors = feed_monitors
    return OK


def _install_monitor_hooks():
    from .. import net
    from .connection import RESET_HOOKS
    RESET_HOOKS.append(_stop_monitoring)
    net.DISCONNECT_HOOKS.append(_stop_monitoring)


_install_monitor_hooks()


# ==========================================================================
# SLOWLOG
# ==========================================================================

SLOWLOG_MAX_ARGC = 32
SLOWLOG_MAX_ARGLEN = 128


class SlowlogEntry:
    __slots__ = ("id", "time", "usec", "argv", "peer", "name")


def slowlog_push(client, cmd, argv, duration: float):
    """Called by the dispatcher for a command that ran at least
    slowlog-log-slower-than microseconds (Redis's slowlogPushEntryIfNeeded)."""
    if "skip_slowlog" in cmd.flags or client.is_fake:
        return
    server = client.server
    args = _redacted(cmd, argv)
    if len(args) > SLOWLOG_MAX_ARGC:
        args = args[:SLOWLOG_MAX_ARGC - 1] + [
            b"... (%d more arguments)" % (len(args) - SLOWLOG_MAX_ARGC + 1)]
    out = []
    for a in args:
        if len(a) > SLOWLOG_MAX_ARGLEN:
            a = a[:SLOWLOG_MAX_ARGLEN] + b"... (%d more bytes)" % (len(a) - SLOWLOG_MAX_ARGLEN)
        out.append(a)
    e = SlowlogEntry()
    e.id = server.slowlog_next_id
    server.slowlog_next_id += 1
    e.time = int(time.time())
    e.usec = int(duration * 1_000_000)
    e.argv = out
    e.peer = client.addr.encode()
    e.name = client.name
    log_ = server.slowlog
    log_.appendleft(e)
    limit = server.config.values["slowlog-max-len"]
    while len(log_) > limit:
        log_.pop()


def _slowlog_init(server):
    from collections import deque
    server.slowlog = deque()
    server.slowlog_next_id = 0
    server.slowlog_push = slowlog_push

    def set_threshold(us):
        server.slowlog_threshold = float("inf") if us < 0 else us / 1_000_000
    set_threshold(server.config.values["slowlog-log-slower-than"])
    server.config.listeners["slowlog-log-slower-than"] = set_threshold

    def set_max_len(n):
        while len(server.slowlog) > max(n, 0):
            server.slowlog.pop()
    server.config.listeners["slowlog-max-len"] = set_max_len


SERVER_INIT_HOOKS.append(_slowlog_init)
container("slowlog", group="server")


@command("slowlog|get", -2, "admin loading stale", group="server")
def slowlog_get(c, argv):
    """Returns the slow log's entries."""
    if len(argv) > 3:
        raise CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                           "Try SLOWLOG HELP." % _cstr(argv[1]))
    count = 10
    if len(argv) == 3:
        count = string2ll(argv[2])
        if count is None or count < -1:
            raise CommandError("ERR count should be greater than or equal to -1")
    entries = list(c.server.slowlog)
    if count != -1:
        entries = entries[:count]
    return [[e.id, e.time, e.usec, list(e.argv), e.peer, e.name] for e in entries]


@command("slowlog|len", 2, "admin loading stale", group="server")
def slowlog_len(c, argv):
    """Returns the number of entries in the slow log."""
    return len(c.server.slowlog)


@command("slowlog|reset", 2, "admin loading stale", group="server")
def slowlog_reset(c, argv):
    """Clears all entries from the slow log."""
    c.server.slowlog.clear()
    return OK


@command("slowlog|help", 2, "loading stale", group="server")
def slowlog_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("SLOWLOG", [
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
    ])


# ==========================================================================
# INFO
# ==========================================================================

class InfoSection:
    __slots__ = ("name", "title", "fn", "default", "extra")

    def __init__(self, name, title, fn, default):
        self.name = name
        self.title = title
        self.fn = fn
        self.default = default
        self.extra = []


INFO_SECTIONS: dict[str, InfoSection] = {}
_SECTION_ALIASES = {"modules": "module_list"}


def add_info_section(name: str, fn, title: str | None = None, default: bool = True,
                     before: str | None = None) -> InfoSection:
    """Add a section: ``fn(server)`` yields ``(field, value)`` pairs."""
    sec = InfoSection(name.lower(), title or name.capitalize(), fn, default)
    if before is None or before not in INFO_SECTIONS:
        INFO_SECTIONS[sec.name] = sec
    else:
        items = list(INFO_SECTIONS.items())
        idx = [k for k, _ in items].index(before)
        items.insert(idx, (sec.name, sec))
        INFO_SECTIONS.clear()
        INFO_SECTIONS.update(items)
    return sec


def add_info_fields(section: str, fn):
    """Append ``fn(server)``'s ``(field, value)`` pairs to an existing section."""
    INFO_SECTIONS[section.lower()].extra.append(fn)


def bytes_to_human(n: int) -> str:
    if n < 1024:
        return "%dB" % n
    for unit, scale in (("K", 1024), ("M", 1024**2), ("G", 1024**3), ("T", 1024**4),
                        ("P", 1024**5)):
        if n < scale * 1024:
            return "%.2f%s" % (n / scale, unit)
    return "%.2fE" % (n / 1024**6)


def _total_system_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 0


_EXECUTABLE = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else sys.executable
_OS = "%s %s %s" % (platform.system(), platform.release(), platform.machine())


def _info_server(server):
    values = server.config.values
    now = time.time()
    uptime = int(now - server.start_time)
    loop_name = type(server.loop).__module__.split(".")[0] if server.loop else "asyncio"
    out = [
        ("redis_version", REDIS_COMPAT_VERSION),
        ("server_name", "hotkv"),
        ("hotkv_version", __version__),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", 0),
        ("redis_build_id", "0"),
        ("redis_mode", "standalone"),
        ("server_mode", "standalone"),
        ("os", _OS),
        ("arch_bits", 64 if sys.maxsize > 2**32 else 32),
        ("monotonic_clock", "POSIX clock_gettime"),
        ("multiplexing_api", loop_name),
        ("python_version", platform.python_version()),
        ("process_id", os.getpid()),
        ("process_supervised", "no"),
        ("run_id", server.run_id),
        ("tcp_port", values["port"]),
        ("server_time_usec", int(now * 1_000_000)),
        ("uptime_in_seconds", uptime),
        ("uptime_in_days", uptime // 86400),
        ("hz", values["hz"]),
        ("configured_hz", values["hz"]),
        ("lru_clock", int(now) & ((1 << 24) - 1)),
        ("executable", _EXECUTABLE),
        ("config_file", getattr(server, "config_file", None) or ""),
        ("io_threads_active", 0),
    ]
    n = 0
    if values["port"] or not values["unixsocket"]:
        for host in values["bind"].split() or ["127.0.0.1"]:
            out.append(("listener%d" % n, "name=tcp,bind=%s,port=%d" % (host, values["port"])))
            n += 1
    if values["unixsocket"]:
        out.append(("listener%d" % n, "name=unix,bind=%s" % values["unixsocket"]))
    return out


def _pubsub_fields(server) -> dict:
    fn = getattr(server.pubsub, "info_fields", None)
    return fn() if fn is not None else {}


def _info_clients(server):
    clients = server.clients.values()
    pubsub = watching = tracking = 0
    max_in = max_out = 0
    for cl in clients:
        if cl.channels or cl.patterns or cl.shard_channels:
            pubsub += 1
        if cl.watched:
            watching += 1
        if cl.tracking:
            tracking += 1
        parser = getattr(cl, "parser", None)
        if parser is not None and parser.pending > max_in:
            max_in = parser.pending
    blocking = nokey_dummy = watched_keys = 0
    for db in server.dbs:
        blocking += len(db.blocking)
        watched_keys += len(db.watched)
    del nokey_dummy
    timeouts = sum(1 for cl in clients if cl.blocked is not None and cl.blocked.deadline)
    from .client_cmds import pause_info
    reason, actions, remaining = pause_info(server)
    return [
        ("connected_clients", len(server.clients)),
        ("cluster_connections", 0),
        ("maxclients", server.config.values["maxclients"]),
        ("client_recent_max_input_buffer", max_in),
        ("client_recent_max_output_buffer", max_out),
        ("blocked_clients", server.blocked_clients),
        ("tracking_clients", tracking),
        ("pubsub_clients", _pubsub_fields(server).get("pubsub_clients", pubsub)),
        ("watching_clients", watching),
        ("clients_in_timeout_table", timeouts),
        ("total_watched_keys", watched_keys),
        ("total_blocking_keys", blocking),
        ("total_blocking_keys_on_nokey", server.blocking_keys_nokey),
        ("paused_reason", reason),
        ("paused_actions", actions),
        ("paused_timeout_milliseconds", remaining),
    ]


def _info_memory(server):
    used = used_memory()
    peak = max(peak_rss(), used)
    startup = getattr(server, "startup_memory", used)
    total = _total_system_memory()
    maxmemory = server.config.values["maxmemory"]
    return [
        ("used_memory", used),
        ("used_memory_human", bytes_to_human(used)),
        ("used_memory_rss", used),
        ("used_memory_rss_human", bytes_to_human(used)),
        ("used_memory_peak", peak),
        ("used_memory_peak_human", bytes_to_human(peak)),
        ("used_memory_peak_perc", "%.2f%%" % (used * 100.0 / peak if peak else 100.0)),
        ("used_memory_overhead", startup),
        ("used_memory_startup", startup),
        ("used_memory_dataset", max(0, used - startup)),
        ("total_system_memory", total),
        ("total_system_memory_human", bytes_to_human(total)),
        ("used_memory_lua", 0),
        ("used_memory_scripts", 0),
        ("number_of_cached_scripts", len(getattr(getattr(server, "scripting", None), "scripts", ()))),
        ("number_of_functions", 0),
        ("number_of_libraries", 0),
        ("maxmemory", maxmemory),
        ("maxmemory_human", bytes_to_human(maxmemory)),
        ("maxmemory_policy", server.config.values["maxmemory-policy"]),
        ("mem_fragmentation_ratio", "1.00"),
        ("mem_not_counted_for_evict", 0),
        ("mem_clients_normal", 0),
        ("mem_aof_buffer", 0),
        ("mem_allocator", "pymalloc"),
        ("lazyfree_pending_objects", 0),
        ("lazyfreed_objects", 0),
    ]


_AOF_DEFAULTS = [
    ("aof_enabled", 0),
    ("aof_rewrite_in_progress", 0),
    ("aof_rewrite_scheduled", 0),
    ("aof_last_rewrite_time_sec", -1),
    ("aof_current_rewrite_time_sec", -1),
    ("aof_last_bgrewrite_status", "ok"),
    ("aof_rewrites", 0),
    ("aof_rewrites_consecutive_failures", 0),
    ("aof_last_write_status", "ok"),
    ("aof_last_cow_size", 0),
]


def _info_persistence(server):
    out = [
        ("loading", 1 if server.loading else 0),
        ("async_loading", 0),
        ("current_cow_peak", 0),
        ("current_cow_size", 0),
        ("current_fork_perc", "0.00"),
        ("current_save_keys_processed", 0),
        ("current_save_keys_total", 0),
        ("rdb_changes_since_last_save", server.dirty - server.dirty_at_save),
        ("rdb_bgsave_in_progress", 0),
        ("rdb_last_save_time", server.lastsave),
        ("rdb_last_bgsave_status", "ok"),
        ("rdb_last_bgsave_time_sec", -1),
        ("rdb_current_bgsave_time_sec", -1),
        ("rdb_saves", 0),
        ("rdb_last_cow_size", 0),
    ]
    # aof_manager exists even while the AOF is off (server.aof is then None).
    aof_fields = getattr(getattr(server, "aof_manager", None) or server.aof, "info_fields", None)
    if aof_fields is not None:
        fields = aof_fields()
        fields = list(fields.items()) if isinstance(fields, dict) else list(fields)
        names = {k for k, _ in fields}
        out.extend(kv for kv in _AOF_DEFAULTS if kv[0] not in names)
        out.extend(fields)
    else:
        out.extend(_AOF_DEFAULTS)
        names = ()
    for name in ("module_fork_in_progress", "module_fork_last_cow_size"):
        if name not in names:
            out.append((name, 0))
    return out


def _info_stats(server):
    ps = _pubsub_fields(server)
    channels = ps.get("pubsub_channels", 0)
    patterns = ps.get("pubsub_patterns", 0)
    shard = ps.get("pubsubshard_channels", 0)
    denied = getattr(getattr(server, "acl", None), "denied", None) or {}
    ops, kin, kout = _instantaneous(server)
    return [
        ("total_connections_received", server.stat_numconnections),
        ("total_commands_processed", server.stat_numcommands),
        ("instantaneous_ops_per_sec", ops),
        ("total_net_input_bytes", server.stat_net_input_bytes),
        ("total_net_output_bytes", server.stat_net_output_bytes),
        ("total_net_repl_input_bytes", 0),
        ("total_net_repl_output_bytes", 0),
        ("instantaneous_input_kbps", "%.2f" % kin),
        ("instantaneous_output_kbps", "%.2f" % kout),
        ("instantaneous_input_repl_kbps", "0.00"),
        ("instantaneous_output_repl_kbps", "0.00"),
        ("rejected_connections", server.stat_rejected_conn),
        ("sync_full", 0),
        ("sync_partial_ok", 0),
        ("sync_partial_err", 0),
        ("expired_keys", server.stat_expiredkeys),
        ("expired_stale_perc", "0.00"),
        ("expired_time_cap_reached_count", 0),
        ("expire_cycle_cpu_milliseconds", 0),
        ("evicted_keys", getattr(server, "stat_evictedkeys", 0)),
        ("evicted_clients", 0),
        ("evicted_scripts", getattr(getattr(server, "scripting", None), "evicted", 0)),
        ("total_eviction_exceeded_time", 0),
        ("current_eviction_exceeded_time", 0),
        ("keyspace_hits", server.stat_keyspace_hits),
        ("keyspace_misses", server.stat_keyspace_misses),
        ("pubsub_channels", channels),
        ("pubsub_patterns", patterns),
        ("pubsubshard_channels", shard),
        ("latest_fork_usec", 0),
        ("total_forks", 0),
        ("migrate_cached_sockets", 0),
        ("slave_expires_tracked_keys", 0),
        ("active_defrag_hits", 0),
        ("active_defrag_misses", 0),
        ("active_defrag_key_hits", 0),
        ("active_defrag_key_misses", 0),
        ("total_active_defrag_time", 0),
        ("current_active_defrag_time", 0),
        ("tracking_total_keys", 0),
        ("tracking_total_items", 0),
        ("tracking_total_prefixes", 0),
        ("unexpected_error_replies", server.stat_unexpected_error_replies),
        ("total_error_replies", server.stat_total_error_replies),
        ("dump_payload_sanitizations", 0),
        ("total_reads_processed", 0),
        ("total_writes_processed", 0),
        ("io_threaded_reads_processed", 0),
        ("io_threaded_writes_processed", 0),
        ("client_query_buffer_limit_disconnections",
         server.stat_client_qbuf_limit_disconnections),
        ("client_output_buffer_limit_disconnections",
         server.stat_client_outbuf_limit_disconnections),
        ("reply_buffer_shrinks", 0),
        ("reply_buffer_expands", 0),
        ("acl_access_denied_auth", denied.get("auth", 0)),
        ("acl_access_denied_cmd", denied.get("cmd", 0)),
        ("acl_access_denied_key", denied.get("key", 0)),
        ("acl_access_denied_channel", denied.get("channel", 0)),
    ]


def _info_replication(server):
    replid = getattr(server, "replid", None)
    if replid is None:
        replid = server.replid = os.urandom(20).hex()
    return [
        ("role", "master"),
        ("connected_slaves", 0),
        ("master_failover_state", "no-failover"),
        ("master_replid", replid),
        ("master_replid2", "0" * 40),
        ("master_repl_offset", 0),
        ("second_repl_offset", -1),
        ("repl_backlog_active", 0),
        ("repl_backlog_size", server.config.values.get("repl-backlog-size", 1048576)),
        ("repl_backlog_first_byte_offset", 0),
        ("repl_backlog_histlen", 0),
    ]


def _info_cpu(server):
    self_ = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        thread = resource.getrusage(resource.RUSAGE_THREAD)
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not Linux
        thread = self_
    return [
        ("used_cpu_sys", "%.6f" % self_.ru_stime),
        ("used_cpu_user", "%.6f" % self_.ru_utime),
        ("used_cpu_sys_children", "%.6f" % kids.ru_stime),
        ("used_cpu_user_children", "%.6f" % kids.ru_utime),
        ("used_cpu_sys_main_thread", "%.6f" % thread.ru_stime),
        ("used_cpu_user_main_thread", "%.6f" % thread.ru_utime),
    ]


def _info_modules(server):
    return []


def _info_commandstats(server):
    out = []
    for cmd in all_commands():
        if not (cmd.calls or cmd.failed_calls or cmd.rejected_calls):
            continue
        usec = int(cmd.seconds * 1_000_000)
        per_call = usec / cmd.calls if cmd.calls else 0.0
        out.append(("cmdstat_" + cmd.name,
                    "calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d"
                    % (cmd.calls, usec, per_call, cmd.rejected_calls, cmd.failed_calls)))
    return out


def _info_errorstats(server):
    return [("errorstat_" + name, "count=%d" % n) for name, n in sorted(server.errorstats.items())]


def _info_latencystats(server):
    return []


def _info_cluster(server):
    return [("cluster_enabled", 0)]


def _avg_ttl(db, now_ms: int, samples: int = 64) -> int:
    """Average remaining TTL (ms) over a sample of the keys with one -- an
    estimate, as Redis's avg_ttl (which its expiry cycle samples)."""
    if db.avg_ttl or not db.expires:
        return db.avg_ttl
    total = n = 0
    for when in itertools.islice(db.expires.values(), samples):
        if when > now_ms:
            total += when - now_ms
            n += 1
    return total // n if n else 0


def _info_keyspace(server):
    now = int(time.time() * 1000)
    return [("db%d" % db.index, "keys=%d,expires=%d,avg_ttl=%d"
             % (len(db.data), len(db.expires), _avg_ttl(db, now)))
            for db in server.dbs if db.data or db.expires]


add_info_section("server", _info_server)
add_info_section("clients", _info_clients)
add_info_section("memory", _info_memory)
add_info_section("persistence", _info_persistence)
add_info_section("stats", _info_stats)
add_info_section("replication", _info_replication)
add_info_section("cpu", _info_cpu, title="CPU")
add_info_section("module_list", _info_modules, title="Modules")
add_info_section("commandstats", _info_commandstats, default=False)
add_info_section("errorstats", _info_errorstats)
add_info_section("latencystats", _info_latencystats, default=False)
add_info_section("cluster", _info_cluster)
add_info_section("keyspace", _info_keyspace)


def info_text(server, args=()) -> bytes:
    """The INFO report for these section arguments (Redis's rules: none means
    the default sections, ``all`` every section, ``everything`` all plus
    module sections; names are case-insensitive; unknown names are ignored)."""
    wanted = set()
    everything = False
    if not args:
        wanted = {name for name, sec in INFO_SECTIONS.items() if sec.default}
    for arg in args:
        if isinstance(arg, bytes):
            arg = arg.decode("utf-8", "surrogateescape")
        a = arg.lower()
        if a == "default":
            wanted.update(name for name, sec in INFO_SECTIONS.items() if sec.default)
        elif a in ("all", "everything"):
            everything = True
        else:
            wanted.add(_SECTION_ALIASES.get(a, a))
    parts = []
    for name, sec in INFO_SECTIONS.items():
        if not everything and name not in wanted:
            continue
        lines = ["# %s\r\n" % sec.title]
        for fields in [sec.fn(server)] + [fn(server) for fn in sec.extra]:
            for k, v in fields:
                lines.append("%s:%s\r\n" % (k, v))
        parts.append("".join(lines))
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


@command("info", -1, "loading stale", group="server", acl=("dangerous",))
def info(c, argv):
    """Returns information and statistics about the server."""
    return Verbatim(info_text(c.server, argv[1:]))


# -- instantaneous metrics: sampled by the cron, as Redis's trackInstantaneousMetric
_SAMPLES = 16


def _track(server):
    now = time.monotonic()
    state = getattr(server, "_inst_samples", None)
    if state is None:
        state = server._inst_samples = {"last": None, "ops": [], "in": [], "out": []}
    cur = (now, server.stat_numcommands, server.stat_net_input_bytes,
           server.stat_net_output_bytes)
    last = state["last"]
    if last is not None and now - last[0] >= 0.1:
        dt = now - last[0]
        for key, i in (("ops", 1), ("in", 2), ("out", 3)):
            samples = state[key]
            samples.append((cur[i] - last[i]) / dt)
            if len(samples) > _SAMPLES:
                del samples[0]
        state["last"] = cur
    elif last is None:
        state["last"] = cur


def _instantaneous(server):
    state = getattr(server, "_inst_samples", None)
    if not state or not state["ops"]:
        return 0, 0.0, 0.0

    def avg(xs):
        return sum(xs) / len(xs)
    return int(avg(state["ops"])), avg(state["in"]) / 1024, avg(state["out"]) / 1024


CRON_HOOKS.append(_track)


def _note_startup_memory(server):
    server.startup_memory = used_memory()


SERVER_INIT_HOOKS.append(_note_startup_memory)


# ==========================================================================
# CONFIG
# ==========================================================================

container("config", group="server")


def _cstr(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


@command("config|get", -3, "admin noscript loading stale", group="server")
def config_get(c, argv):
    """Get the values of configuration parameters."""
    values = c.server.config.values
    config = c.server.config
    matches: dict = {}
    for arg in argv[2:]:
        if not any(ch in arg for ch in b"[*?"):
            name = _cstr(arg)
            if name in matches:
                continue
            canon = config.canonical(name)
            if canon is not None:
                matches[name] = PARAMS[canon].format(values[canon])
            continue
        for canon, p in PARAMS.items():
            for n in (canon,) + p.aliases:
                if n in matches:
                    continue
                if stringmatch(arg, n.encode(), nocase=True):
                    matches[n] = p.format(values[canon])
    return {k.encode("utf-8", "surrogateescape"): v.encode("utf-8", "surrogateescape")
            for k, v in matches.items()}


def _protected_allowed(c) -> bool:
    mode = c.server.config.values["enable-protected-configs"]
    if mode == "yes":
        return True
    if mode == "local":
        addr = c.addr
        return addr.startswith(("127.", "[::1]", "::1", "/")) or addr == ""
    return False


# Parameters CONFIG SET may only change when enable-protected-configs allows.
PROTECTED = {"dir", "dbfilename"}


@command("config|set", -4, "admin noscript loading stale", group="server")
def config_set(c, argv):
    """Set configuration parameters to the given values."""
    if len(argv) % 2:
        raise CommandError(errors.SYNTAX)
    config = c.server.config
    invalid_name = None
    errstr = err_name = None
    failed = False
    todo = []   # (canonical, name as spelled, text)
    for i in range(2, len(argv), 2):
        typed = _cstr(argv[i])
        canon = config.canonical(typed)
        if canon is None:
            if not failed:
                invalid_name = typed
                failed = True
            continue
        if failed:
            continue
        p = PARAMS[canon]
        if not p.mutable or (canon in PROTECTED and not _protected_allowed(c)):
            errstr = "can't set immutable config" if not p.mutable else \
                "can't set protected config"
            err_name = typed
            failed = True
            continue
        if any(t[0] == canon for t in todo):
            errstr = "duplicate parameter"
            err_name = typed
            failed = True
            continue
        todo.append((canon, typed.lower(), _cstr(argv[i + 1])))
    if not failed:
        parsed = []
        for canon, name, text in todo:
            try:
                parsed.append((canon, name, PARAMS[canon].parse(text)))
            except ConfigError as e:
                errstr, err_name, failed = str(e), name, True
                break
    if not failed:
        values = config.values
        old = [(canon, values[canon]) for canon, _, _ in parsed]
        applied = []
        try:
            for canon, name, value in parsed:
                values[canon] = value
                applied.append(canon)
                cb = config.listeners.get(canon)
                if cb is not None:
                    err_name = name
                    cb(value)
        except Exception as e:  # a listener refused the value: undo everything
            if not isinstance(e, ConfigError):
                log.warning("CONFIG SET %s: %s", err_name, e)
            errstr, failed = str(e) or type(e).__name__, True
            for canon, value in old:
                values[canon] = value
            for canon in applied:
                cb = config.listeners.get(canon)
                if cb is not None:
                    try:
                        cb(values[canon])
                    except Exception:  # pragma: no cover - restoring a known-good value
                        log.warning("could not restore %s after a failed CONFIG SET", canon)
        else:
            return OK
    if invalid_name is not None:
        raise CommandError("ERR Unknown option or number of arguments for CONFIG SET - '%s'"
                           % invalid_name)
    if errstr:
        raise CommandError("ERR CONFIG SET failed (possibly related to argument '%s') - %s"
                           % (err_name, errstr))
    raise CommandError("ERR CONFIG SET failed (possibly related to argument '%s')" % err_name)


def reset_stats(server):
    server.stat_numcommands = 0
    server.stat_numconnections = 0
    server.stat_rejected_conn = 0
    server.stat_expiredkeys = 0
    server.stat_keyspace_hits = 0
    server.stat_keyspace_misses = 0
    server.stat_net_input_bytes = 0
    server.stat_net_output_bytes = 0
    server.stat_total_error_replies = 0
    server.stat_unexpected_error_replies = 0
    server.stat_client_qbuf_limit_disconnections = 0
    server.stat_client_outbuf_limit_disconnections = 0
    if hasattr(server, "stat_evictedkeys"):
        server.stat_evictedkeys = 0
    denied = getattr(getattr(server, "acl", None), "denied", None)
    if denied:
        for k in denied:
            denied[k] = 0
    server.errorstats.clear()
    for cmd in all_commands():
        cmd.reset_stats()
    server._inst_samples = None
    for hook in RESETSTAT_HOOKS:
        hook(server)


@command("config|resetstat", 2, "admin noscript loading stale", group="server")
def config_resetstat(c, argv):
    """Reset the server's statistics."""
    reset_stats(c.server)
    return OK


def rewrite_config_file(server, path: str):
    """Rewrite ``path`` as Redis's CONFIG REWRITE: keep comments and the
    order of the lines, update the lines of parameters with their current
    values, drop later duplicates, and append changed parameters that were
    not in the file."""
    from ..config import ALIASES, parse_config_file
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    values = server.config.values
    done = set()
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            out.append(line)
            continue
        try:
            pairs = parse_config_file(stripped)
        except ConfigError:
            out.append(line)
            continue
        name = pairs[0][0] if pairs else ""
        canon = name if name in PARAMS else ALIASES.get(name)
        if canon is None or (PARAMS[canon].multi and not PARAMS[canon].mutable):
            # A directive we do not know, or a repeatable one that cannot have
            # changed (rename-command): keep it verbatim.
            out.append(line)
            continue
        if canon in done:
            continue
        done.add(canon)
        out.append(_conf_line(canon, values[canon]))
    added = [canon for canon, p in PARAMS.items()
             if canon not in done and values[canon] != p.default
             and not (p.multi and not p.mutable)]
    if added:
        if out and out[-1].strip():
            out.append("")
        out.append("# Generated by CONFIG REWRITE")
        out.extend(_conf_line(canon, values[canon]) for canon in added)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


_MULTI_ARG = {"save", "client-output-buffer-limit", "bind"}


def _conf_line(canon, value) -> str:
    p = PARAMS[canon]
    text = p.format(value)
    if text == "" or (any(ch in text for ch in " \t\"'\\#")
                      and canon not in _MULTI_ARG and not p.multi):
        text = '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')
    return "%s %s" % (canon, text)


@command("config|rewrite", 2, "admin noscript loading stale", group="server")
def config_rewrite(c, argv):
    """Rewrite the configuration file with the in-memory configuration."""
    path = getattr(c.server, "config_file", None)
    if not path:
        raise CommandError("ERR The server is running without a config file")
    try:
        rewrite_config_file(c.server, path)
    except OSError as e:
        log.warning("CONFIG REWRITE failed: %s", e)
        raise CommandError("ERR Rewriting config file: %s" % (e.strerror or e)) from None
    return OK


@command("config|help", 2, "loading stale", group="server")
def config_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("CONFIG", [
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
    ])


# ==========================================================================
# DEBUG
# ==========================================================================

DEBUG_SUBCOMMANDS: dict = {}


def debug_subcommand(name: str, argc: int):
    """Register ``fn(c, argv)`` as DEBUG <name>; argc counts the whole
    command (DEBUG LOG msg is 3), negative for "at least"."""
    def deco(fn):
        DEBUG_SUBCOMMANDS[name.lower().encode()] = (fn, argc)
        return fn
    return deco


@command("debug", -2, "admin noscript loading stale protected", group="server")
def debug(c, argv):
    """A container for debugging commands."""
    sub = argv[1].lower()
    entry = DEBUG_SUBCOMMANDS.get(sub)
    if entry is not None:
        fn, argc = entry
        if (argc >= 0 and len(argv) == argc) or (argc < 0 and len(argv) >= -argc):
            return fn(c, argv)
    raise CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                       "Try DEBUG HELP." % _cstr(argv[1]))


@debug_subcommand("help", 2)
def debug_help(c, argv):
    return help_reply("DEBUG", [
        "ERROR <string>",
        "    Return a Redis protocol error with <string> as message.",
        "LOG <message>",
        "    Write <message> to the server log.",
        "SLEEP <seconds>",
        "    Stop the server for <seconds>. Decimals allowed.",
    ] + sorted(_extra_debug_help()))


def _extra_debug_help():
    own = {b"help", b"log", b"sleep", b"error"}
    return [n.decode().upper() for n in DEBUG_SUBCOMMANDS if n not in own]


@debug_subcommand("log", 3)
def debug_log(c, argv):
    log.warning("DEBUG LOG: %s", _cstr(argv[2]))
    return OK


_ATOF = re.compile(rb"\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?)", re.IGNORECASE)


def _atof(data: bytes) -> float:
    """C's atof: the longest numeric prefix, 0 when there is none."""
    m = _ATOF.match(data)
    return float(m.group(0)) if m else 0.0


@debug_subcommand("sleep", 3)
def debug_sleep(c, argv):
    # Blocks the whole server on purpose, as Redis's does.
    seconds = _atof(argv[2])
    if seconds > 0:
        time.sleep(seconds)
    return OK


@debug_subcommand("error", 3)
def debug_error(c, argv):
    raise CommandError(_cstr(argv[2]))


# ==========================================================================
# MEMORY
# ==========================================================================

container("memory", group="server")


def _sizeof(v) -> int:
    return sys.getsizeof(v)


def memory_usage_estimate(key: bytes, value, expires: bool, samples: int) -> int:
    """Bytes a key is estimated to take: the key, the value object and, for
    containers, the average of up to ``samples`` elements (all when 0) times
    their number -- the way Redis's objectComputeSize samples."""
    size = _sizeof(key) + _sizeof(value) + 16
    if expires:
        size += 40
    if isinstance(value, (bytes, bytearray)):
        return size
    n = len(value) if hasattr(value, "__len__") else 0
    if not n:
        return size
    total = 0
    count = 0
    if isinstance(value, dict):
        for k, v in value.items():
            total += _sizeof(k) + _sizeof(v)
            count += 1
            if samples and count >= samples:
                break
    else:
        try:
            it = iter(value)
        except TypeError:
            return size
        for item in it:
            if isinstance(item, (bytes, int, float, str, tuple)):
                total += _sizeof(item)
            count += 1
            if samples and count >= samples:
                break
    if count:
        size += int(total / count * n)
    return size


@command("memory|usage", -3, "readonly", keys=(2, 2, 1), group="server", key_flags="RO")
def memory_usage(c, argv):
    """Estimate the memory usage of a key."""
    samples = 5
    i = 3
    while i < len(argv):
        if argv[i].lower() == b"samples" and i + 1 < len(argv):
            samples = string2ll(argv[i + 1])
            if samples is None:
                raise CommandError(errors.NOT_INTEGER)
            if samples < 0:
                raise CommandError(errors.SYNTAX)
            i += 2
        else:
            raise CommandError(errors.SYNTAX)
    db = c.db
    value = db.lookup(argv[2])
    if value is None:
        return None
    return memory_usage_estimate(argv[2], value, argv[2] in db.expires, samples)


@command("memory|stats", 2, "", group="server")
def memory_stats(c, argv):
    """Show memory usage details."""
    server = c.server
    used = used_memory()
    startup = getattr(server, "startup_memory", used)
    out = {
        b"peak.allocated": max(peak_rss(), used),
        b"total.allocated": used,
        b"startup.allocated": startup,
        b"replication.backlog": 0,
        b"clients.slaves": 0,
        b"clients.normal": 0,
        b"aof.buffer": 0,
    }
    keys = 0
    for db in server.dbs:
        if db.data or db.expires:
            out[b"db.%d" % db.index] = {b"overhead.hashtable.main": 0,
                                        b"overhead.hashtable.expires": 0}
        keys += len(db.data)
    out[b"overhead.total"] = startup
    out[b"keys.count"] = keys
    out[b"keys.bytes-per-key"] = (max(0, used - startup) // keys) if keys else 0
    out[b"dataset.bytes"] = max(0, used - startup)
    return out


@command("memory|doctor", 2, "", group="server")
def memory_doctor(c, argv):
    """Outputs a memory problems report."""
    return Verbatim(b"Hi Sam, I can't find any memory issue in your instance. "
                    b"I can only account for what occurs on this base.\n")


@command("memory|malloc-stats", 2, "loading", group="server")
def memory_malloc_stats(c, argv):
    """Show allocator internal stats."""
    return Verbatim(b"Stats not supported for the current allocator")


@command("memory|purge", 2, "loading", group="server")
def memory_purge(c, argv):
    """Ask the allocator to release memory."""
    import gc
    gc.collect()
    return OK


@command("memory|help", 2, "loading stale", group="server")
def memory_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("MEMORY", [
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
    ])


# ==========================================================================
# FUNCTION (hotkv has no functions; the harness and tools flush them)
# ==========================================================================

if "function" not in COMMANDS:
    container("function", group="scripting")

    @command("function|flush", -2, "write noscript", group="scripting")
    def function_flush(c, argv):
        """Delete all libraries and functions."""
        if len(argv) == 3:
            if argv[2].lower() not in (b"async", b"sync"):
                raise CommandError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
        elif len(argv) > 3:
            raise CommandError("ERR unknown subcommand or wrong number of arguments for "
                               "'%s'. Try FUNCTION HELP." % _cstr(argv[1]))
        c.server.dirty += 1
        return OK

    @command("function|list", -2, "noscript", group="scripting")
    def function_list(c, argv):
        """List information about all the functions."""
        i = 2
        while i < len(argv):
            opt = argv[i].lower()
            if opt == b"withcode":
                i += 1
            elif opt == b"libraryname" and i + 1 < len(argv):
                i += 2
            else:
                raise CommandError("ERR Unknown argument %s" % _cstr(argv[i]))
        return []

    @command("function|help", 2, "loading stale", group="scripting")
    def function_help(c, argv):
        """Show helpful text about the different subcommands."""
        return help_reply("FUNCTION", [
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries (hotkv has none).",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
        ])


# ==========================================================================
# MODULE (hotkv loads no modules; clients and tools ask which are there)
# ==========================================================================

if "module" not in COMMANDS:
    container("module", group="server")

    @command("module|list", 2, "admin noscript", group="server")
    def module_list(c, argv):
        """Returns all loaded modules."""
        return []

    @command("module|help", 2, "loading stale", group="server")
    def module_help(c, argv):
        """Show helpful text about the different subcommands."""
        return help_reply("MODULE", [
            "LIST",
            "    Return a list of loaded modules.",
        ])


# ==========================================================================
# COMMAND (generated from the registry)
# ==========================================================================

_FLAG_ORDER = ("write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
               "blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking",
               "fast", "no_auth", "no_mandatory_keys", "no_async_loading", "no_multi",
               "movablekeys", "allow_busy")
_CAT_ORDER = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
              "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
              "blocking", "dangerous", "connection", "transaction", "scripting")
_CAT_RANK = {name: i for i, name in enumerate(_CAT_ORDER)}


# Command tips as Redis publishes them (COMMAND INFO element 8): they tell
# cluster-aware clients how to route a command.  Data, keyed by full name.
_NDO, _NDOO = "nondeterministic_output", "nondeterministic_output_order"
_ALL_NODES = ("request_policy:all_nodes", "response_policy:all_succeeded")
_ALL_SHARDS = ("request_policy:all_shards", "response_policy:all_succeeded")
_SPECIAL = (_NDO, "request_policy:all_shards", "response_policy:special")
_MULTI_SUM = ("request_policy:multi_shard", "response_policy:agg_sum")
COMMAND_TIPS = {
    "acl|deluser": _ALL_NODES, "acl|save": _ALL_NODES, "acl|setuser": _ALL_NODES,
    "client|info": (_NDO,), "client|list": (_NDO,), "client|setinfo": _ALL_NODES,
    "client|setname": _ALL_NODES, "command": (_NDOO,), "command|docs": (_NDOO,),
    "command|info": (_NDOO,), "command|list": (_NDOO,), "config|resetstat": _ALL_NODES,
    "config|rewrite": _ALL_NODES, "config|set": _ALL_NODES,
    "dbsize": ("request_policy:all_shards", "response_policy:agg_sum"),
    "del": _MULTI_SUM, "dump": (_NDO,), "exists": _MULTI_SUM, "flushall": _ALL_SHARDS,
    "flushdb": _ALL_SHARDS, "function|delete": _ALL_SHARDS, "function|flush": _ALL_SHARDS,
    "function|kill": ("request_policy:all_shards", "response_policy:one_succeeded"),
    "function|list": (_NDOO,), "function|load": _ALL_SHARDS, "function|restore": _ALL_SHARDS,
    "function|stats": _SPECIAL, "hgetall": (_NDOO,), "hkeys": (_NDOO,),
    "hrandfield": (_NDO,), "hscan": (_NDO,), "hvals": (_NDOO,), "info": _SPECIAL,
    "keys": ("request_policy:all_shards", _NDOO), "lastsave": (_NDO,),
    "memory|doctor": _SPECIAL, "memory|malloc-stats": _SPECIAL,
    "memory|purge": _ALL_SHARDS, "memory|stats": _SPECIAL,
    "mget": ("request_policy:multi_shard",),
    "mset": ("request_policy:multi_shard", "response_policy:all_succeeded"),
    "module|list": (_NDOO,),
    "object|encoding": (_NDO,), "object|freq": (_NDO,), "object|idletime": (_NDO,),
    "object|refcount": (_NDO,), "ping": _ALL_SHARDS, "pttl": (_NDO,),
    "randomkey": ("request_policy:all_shards", "response_policy:special", _NDO),
    "scan": (_NDO, "request_policy:special", "response_policy:special"),
    "script|exists": ("request_policy:all_shards", "response_policy:agg_logical_and"),
    "script|flush": _ALL_NODES,
    "script|kill": ("request_policy:all_shards", "response_policy:one_succeeded"),
    "script|load": _ALL_NODES, "sdiff": (_NDOO,), "sinter": (_NDOO,),
    "slowlog|get": ("request_policy:all_nodes", _NDO),
    "slowlog|len": ("request_policy:all_nodes", "response_policy:agg_sum", _NDO),
    "slowlog|reset": _ALL_NODES, "smembers": (_NDOO,), "spop": (_NDO,),
    "srandmember": (_NDO,), "sscan": (_NDO,), "sunion": (_NDOO,), "time": (_NDO,),
    "touch": _MULTI_SUM, "ttl": (_NDO,), "unlink": _MULTI_SUM,
    "wait": ("request_policy:all_shards", "response_policy:agg_min"),
    "xadd": (_NDO,), "xautoclaim": (_NDO,), "xclaim": (_NDO,), "xinfo|consumers": (_NDO,),
    "xpending": (_NDO,), "xtrim": (_NDO,), "zrandmember": (_NDO,), "zscan": (_NDO,),
}


def _movable(cmd) -> bool:
    return cmd.keys_fn is not None or cmd.spec_movable or "movablekeys" in cmd.flags


# Valkey 8.1 reports skip_slowlog under its new name.
_FLAG_NAMES = {"skip_slowlog": b"skip_commandlog"}


def _command_flags(cmd):
    flags = set(cmd.flags)
    if _movable(cmd):
        flags.add("movablekeys")
    return SetReply(Simple(_FLAG_NAMES.get(f) or f.encode()) for f in _FLAG_ORDER if f in flags)


def _is_container(cmd) -> bool:
    return cmd.subcommands is not None and cmd.parent is None and not cmd.flags \
        and cmd.arity == -2


def _command_categories(cmd):
    # A container (CONFIG, XINFO...) is never run itself: Redis lists it as
    # @slow only, whatever its subcommands' categories.
    cats = ["slow"] if _is_container(cmd) else \
        sorted(cmd.acl_categories, key=lambda n: (_CAT_RANK.get(n, 99), n))
    return SetReply(Simple(b"@" + n.encode()) for n in cats)


def _declared_spec(s):
    if s.begin == "index":
        begin = {b"type": b"index", b"spec": {b"index": s.begin_args[0]}}
    elif s.begin == "keyword":
        begin = {b"type": b"keyword", b"spec": {b"keyword": s.begin_args[0].encode(),
                                                b"startfrom": s.begin_args[1]}}
    else:
        begin = {b"type": b"unknown", b"spec": {}}
    if s.find == "range":
        find = {b"type": b"range", b"spec": dict(zip((b"lastkey", b"keystep", b"limit"),
                                                     s.find_args))}
    elif s.find == "keynum":
        find = {b"type": b"keynum", b"spec": dict(zip((b"keynumidx", b"firstkey", b"keystep"),
                                                      s.find_args))}
    else:
        find = {b"type": b"unknown", b"spec": {}}
    out = {b"notes": s.notes.encode()} if s.notes else {}
    out[b"flags"] = SetReply(Simple(f.encode()) for f in s.flags)
    out[b"begin_search"] = begin
    out[b"find_keys"] = find
    return out


def _key_specs(cmd):
    if cmd.key_specs is not None:
        return SetReply(_declared_spec(s) for s in cmd.key_specs)
    if cmd.first_key <= 0 and not _movable(cmd):
        return SetReply()
    flags = _key_flags(cmd)
    if cmd.first_key <= 0:
        begin = {b"type": b"unknown", b"spec": {}}
        find = {b"type": b"unknown", b"spec": {}}
    else:
        last = cmd.last_key - cmd.first_key if cmd.last_key >= 0 else cmd.last_key
        begin = {b"type": b"index", b"spec": {b"index": cmd.first_key}}
        find = {b"type": b"range",
                b"spec": {b"lastkey": last, b"keystep": cmd.key_step, b"limit": 0}}
    return SetReply([{b"flags": SetReply(flags), b"begin_search": begin, b"find_keys": find}])


def _subcommands(cmd):
    seen = []
    if cmd.subcommands:
        for sub in cmd.subcommands.values():
            if sub not in seen:
                seen.append(sub)
    return seen


def command_info(cmd):
    """One COMMAND INFO entry, in Redis's 10-element shape."""
    if cmd is None:
        return None
    first = last = step = 0
    if cmd.legacy_keys[0] > 0:
        first, last, step = cmd.legacy_keys
    subs = _subcommands(cmd)
    return [
        cmd.name.encode(),
        cmd.arity,
        _command_flags(cmd),
        first, last, step,
        _command_categories(cmd),
        SetReply(t.encode() for t in COMMAND_TIPS.get(cmd.name, ())),
        _key_specs(cmd),
        [command_info(s) for s in subs] if subs else SetReply(),
    ]


def command_docs(cmd) -> dict:
    out = {}
    if cmd.summary:
        out[b"summary"] = cmd.summary.encode()
    if cmd.since:
        out[b"since"] = cmd.since.encode()
    out[b"group"] = cmd.group.encode()
    subs = _subcommands(cmd)
    if subs:
        out[b"subcommands"] = {s.name.encode(): command_docs(s) for s in subs}
    return out


def _lookup_full(name: bytes):
    """'get' or 'config|get' -> Command."""
    if b"|" in name:
        parent, _, sub = name.partition(b"|")
        cmd = lookup(parent)
        if cmd is None or not cmd.subcommands:
            return None
        return cmd.subcommands.get(sub) or cmd.subcommands.get(sub.lower())
    return lookup(name)


@command("command", -1, "loading stale", group="server", acl=("connection",))
def command_(c, argv):
    """Get array of command details."""
    return [command_info(cmd) for cmd in COMMANDS.values()]



@command("command|count", 2, "loading stale", group="server", acl=("connection",))
def command_count(c, argv):
    """Get total number of commands."""
    return len(COMMANDS)


@command("command|info", -2, "loading stale", group="server", acl=("connection",))
def command_info_cmd(c, argv):
    """Get array of specific command details."""
    if len(argv) == 2:
        return [command_info(cmd) for cmd in COMMANDS.values()]
    return [command_info(_lookup_full(name)) for name in argv[2:]]


@command("command|docs", -2, "loading stale", group="server", acl=("connection",))
def command_docs_cmd(c, argv):
    """Get array of specific command documentation."""
    if len(argv) == 2:
        return {cmd.name.encode(): command_docs(cmd) for cmd in COMMANDS.values()}
    out = {}
    for name in argv[2:]:
        cmd = _lookup_full(name)
        if cmd is not None:
            out[cmd.name.encode()] = command_docs(cmd)
    return out


@command("command|list", -2, "loading stale", group="server", acl=("connection",))
def command_list(c, argv):
    """Get an array of command names."""
    kind = arg = None
    i = 2
    while i < len(argv):
        if argv[i].lower() == b"filterby" and len(argv) - 1 - i == 2:
            kind = argv[i + 1].lower()
            if kind not in (b"module", b"aclcat", b"pattern"):
                raise CommandError(errors.SYNTAX)
            arg = argv[i + 2]
            i += 3
        else:
            raise CommandError(errors.SYNTAX)
    out = []
    for cmd in all_commands():
        if kind == b"module":
            continue
        if kind == b"aclcat" and arg.lower().decode("latin-1") not in cmd.acl_categories:
            continue
        if kind == b"pattern" and not stringmatch(arg, cmd.name.encode(), nocase=True):
            continue
        out.append(cmd.name.encode())
    return out


def command_keys(cmd, args) -> list:
    """Positions (in args, args[0] the command name) of its keys."""
    return cmd.key_indexes(args)


@command("command|getkeys", -3, "loading stale", group="server", acl=("connection",))
def command_getkeys(c, argv):
    """Extract keys given a full command."""
    return [key for key, _ in _getkeys(argv[2:])]


@command("command|getkeysandflags", -3, "loading stale", group="server", acl=("connection",))
def command_getkeysandflags(c, argv):
    """Extract keys and access flags given a full command."""
    args = argv[2:]
    return [[args[p], SetReply(_key_flags(cmd, args, i, p))]
            for i, (p, cmd) in enumerate(_getkeys(args, True))]


# The stream commands' key-spec flags, until hotkv/commands/streams.py
# declares them with ``key_flags=`` on its @command lines as every other
# command module does (hotkv.registry); kept here only because that module
# was being edited elsewhere when the table was split up.  Data, by full name.
STREAM_KEY_FLAGS: dict = {}
for _flags, _names in (
        (("RW", "insert"), "xgroup|create xgroup|createconsumer"),
        (("RO",), "xlen"),
        (("RW", "update"), "xack xclaim xgroup|setid xsetid"),
        (("RW", "delete"), "xautoclaim xdel xgroup|delconsumer xgroup|destroy xtrim")):
    for _name in _names.split():
        STREAM_KEY_FLAGS[_name] = (_flags,)


def _key_flags(cmd, argv=None, nth: int = 0, pos: int = -1) -> list:
    if cmd.name == "set" and argv is not None:
        # SET's flags depend on its arguments: with GET it reads the old value.
        get = any(a.lower() == b"get" for a in argv[3:])
        return [Simple(f) for f in ((b"RW", b"access", b"update") if get else (b"OW", b"update"))]
    if cmd.key_specs is not None and argv is not None:
        # The flags of the spec that finds this key (as Redis reports them).
        for s in cmd.key_specs:
            if "not_key" not in s.flags and pos in s.positions(argv):
                return [Simple(f.encode()) for f in s.flags]
    # Declared flags (``key_flags`` on the @command): one entry per key
    # role, the last covering the rest (SORT's STORE destination, which no
    # key spec locates, is its second role).
    roles = cmd.key_flags or STREAM_KEY_FLAGS.get(cmd.name)
    if roles is not None:
        return [Simple(f.encode()) for f in roles[min(nth, len(roles) - 1)]]
    if "write" in cmd.flags:
        return [Simple(b"RW"), Simple(b"access"), Simple(b"update")]
    return [Simple(b"RO"), Simple(b"access")]


def _getkeys(args, positions_only=False):
    """(key, command) pairs of a full command (with ``positions_only``,
    (position, command)), or the GETKEYS error."""
    cmd = lookup(args[0])
    if cmd is not None and cmd.subcommands and len(args) > 1:
        cmd = cmd.subcommands.get(args[1]) or cmd.subcommands.get(args[1].lower())
    if cmd is None:
        raise CommandError("ERR Invalid command specified")
    if cmd.first_key <= 0 and not _movable(cmd):
        raise CommandError("ERR The command has no key arguments")
    n = len(args)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        raise CommandError("ERR Invalid number of arguments specified for command")
    try:
        positions = command_keys(cmd, args)
    except Exception:  # a keys_fn refusing malformed arguments (bad numkeys...)
        positions = []
    if positions and cmd.key_specs is not None and any(
            s.find == "keynum" and not s.positions(args) for s in cmd.key_specs):
        # A key count that overruns the arguments: Redis finds no keys.
        positions = []
    if not positions:
        if "no_mandatory_keys" in cmd.flags:
            return []
        raise CommandError("ERR Invalid arguments specified for command")
    return [(p if positions_only else args[p], cmd) for p in positions if 0 <= p < n]


@command("command|help", 2, "loading stale", group="server", acl=("connection",))
def command_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("COMMAND", [
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands in this server.",
        "LIST",
        "    Return a list of all commands in this server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full command.",
    ])
