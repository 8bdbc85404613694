"""INFO: what the server reports about itself, section by section.

Owns the INFO command, its sections (Redis's order: server, clients,
memory, persistence, stats, replication, cpu, modules, commandstats,
errorstats, latencystats, cluster, keyspace) and the instantaneous metrics
(ops/sec, input and output kbps) that the cron samples as Redis's
trackInstantaneousMetric does.

Extension points (for other modules, at import time):

* ``add_info_fields(section, fn)`` appends ``fn(server)``'s ``(name,
  value)`` pairs to an existing section (``"persistence"``, ``"stats"``...);
  ``add_info_section(name, fn, title=..., default=True, before=None)`` adds
  a whole section.  ``INFO_SECTIONS`` is the ordered table (section name ->
  ``InfoSection``).
* The persistence section asks ``server.aof_manager`` (or ``server.aof``)
  for ``info_fields()``; its ``aof_*`` fields replace the defaults shown
  when there is no AOF.

Invariants: sections come out in the table's order, separated by one blank
line, each line ``field:value`` ended by CRLF; unknown section names are
ignored, as Redis ignores them.  The instantaneous metrics are sampled by
``hotkv.core.stats`` (the server's cron calls it).
"""

from __future__ import annotations

import itertools
import os
import platform
import resource
import sys
import time

from ..core import latency, replica_keys
from ..core.eviction import STARTUP_USED
from ..core.pause import pause_info
from ..core.registry import all_commands, command
from ..core.stats import instantaneous, rss
from ..lua.functions import memory_info
from ..observe import loopstats
from ..protocol.resp import Verbatim
from ..replication import primary, replica
from ..version import (
    REDIS_COMPAT_VERSION,
    SERVER_NAME,
    VALKEY_COMPAT_VERSION,
    VALKEY_RELEASE_STAGE,
    __version__,
)


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
    uptime = int(time.time() - server.start_time)   # real: the process's age
    now = server.clock.time()     # hotkv.core.clock: server_time_usec, lru_clock
    loop_name = type(server.loop).__module__.split(".")[0] if server.loop else "asyncio"
    # Valkey's identity (hotkv reproduces valkey-server 8.1.8), hotkv's own
    # version beside it; extended-redis-compatibility names the mode field
    # redis_mode, as Valkey 8 does.
    mode_field = "redis_mode" if values["extended-redis-compatibility"] else "server_mode"
    out = [
        ("redis_version", REDIS_COMPAT_VERSION),
        ("server_name", SERVER_NAME),
        ("valkey_version", VALKEY_COMPAT_VERSION),
        ("valkey_release_stage", VALKEY_RELEASE_STAGE),
        ("hotkv_version", __version__),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", 0),
        ("redis_build_id", "0"),
        (mode_field, "standalone" if server.cluster is None else "cluster"),
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
        ("config_file", server.config_file or ""),
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
    pubsub = watching = 0
    max_in = max_out = 0
    for cl in clients:
        if cl.channels or cl.patterns or cl.shard_channels:
            pubsub += 1
        if cl.watched:
            watching += 1
        parser = getattr(cl, "parser", None)
        if parser is not None and parser.pending > max_in:
            max_in = parser.pending
    blocking = nokey_dummy = watched_keys = 0
    for db in server.dbs:
        blocking += len(db.blocking)
        watched_keys += len(db.watched)
    del nokey_dummy
    timeouts = sum(1 for cl in clients if cl.blocked is not None and cl.blocked.deadline)
    reason, actions, remaining = pause_info(server)
    return [
        ("connected_clients", len(server.clients)),
        ("cluster_connections", 0),
        ("maxclients", server.config.values["maxclients"]),
        ("client_recent_max_input_buffer", max_in),
        ("client_recent_max_output_buffer", max_out),
        ("blocked_clients", server.blocked_clients),
        ("tracking_clients", server.tracking.clients),
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
    # What the allocators hold in use since the server started, plus a
    # nominal startup figure (hotkv.core.eviction, the figure maxmemory reads),
    # and the process's RSS: their ratio is the fragmentation.
    used = server.eviction.used_memory(0.1)     # pymalloc's block size <= 0.1 s old
    resident = rss()
    peak = server.eviction.peak
    startup = STARTUP_USED
    total = _total_system_memory()
    maxmemory = server.config.values["maxmemory"]
    lua = memory_info(server)
    clients_mem = server.eviction.clients_memory()
    return [
        ("used_memory", used),
        ("used_memory_human", bytes_to_human(used)),
        ("used_memory_rss", resident),
        ("used_memory_rss_human", bytes_to_human(resident)),
        ("used_memory_peak", peak),
        ("used_memory_peak_human", bytes_to_human(peak)),
        ("used_memory_peak_perc", "%.2f%%" % (used * 100.0 / peak if peak else 100.0)),
        ("used_memory_overhead", startup),
        ("used_memory_startup", startup),
        ("used_memory_dataset", max(0, used - startup)),
        ("total_system_memory", total),
        ("total_system_memory_human", bytes_to_human(total)),
        ("used_memory_lua", lua["vm_eval"]),
        ("used_memory_vm_eval", lua["vm_eval"]),
        ("used_memory_lua_human", bytes_to_human(lua["vm_eval"])),
        ("used_memory_scripts_eval", lua["scripts_eval"]),
        ("number_of_cached_scripts", lua["cached_scripts"]),
        ("number_of_functions", lua["function_count"]),
        ("number_of_libraries", lua["libraries"]),
        ("used_memory_vm_functions", lua["vm_functions"]),
        ("used_memory_vm_total", lua["vm_eval"] + lua["vm_functions"]),
        ("used_memory_vm_total_human", bytes_to_human(lua["vm_eval"] + lua["vm_functions"])),
        ("used_memory_functions", lua["functions"]),
        ("used_memory_scripts", lua["scripts_eval"] + lua["functions"]),
        ("used_memory_scripts_human", bytes_to_human(lua["scripts_eval"] + lua["functions"])),
        ("maxmemory", maxmemory),
        ("maxmemory_human", bytes_to_human(maxmemory)),
        ("maxmemory_policy", server.config.values["maxmemory-policy"]),
        ("mem_fragmentation_ratio", "%.2f" % (resident / used if used else 1.0)),
        ("mem_fragmentation_bytes", resident - used),
        ("mem_not_counted_for_evict", server.eviction.not_counted()),
        ("mem_clients_slaves", clients_mem["replica"]),
        ("mem_clients_normal", clients_mem["normal"]),
        ("mem_aof_buffer", len(getattr(server.aof_manager, "buf", b""))),
        ("mem_allocator", "pymalloc"),
        ("lazyfree_pending_objects", server.lazyfree_pending),    # hotkv.core.lazyfree
        ("lazyfreed_objects", server.lazyfreed_objects),
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
        ("current_cow_size_age", 0),
        ("current_fork_perc", "0.00"),
        ("current_save_keys_processed", 0),
        ("current_save_keys_total", 0),
    ]
    # The rdb_* fields are the snapshot state's (hotkv.persistence.snapshots).
    out.extend(server.snapshots.info_fields())
    # aof_manager exists even while the AOF is off (server.aof is then None).
    fields = list(server.aof_manager.info_fields().items())
    names = {k for k, _ in fields}
    out.extend(kv for kv in _AOF_DEFAULTS if kv[0] not in names)
    out.extend(fields)
    for name in ("module_fork_in_progress", "module_fork_last_cow_size"):
        if name not in names:
            out.append((name, 0))
    progress = server.loading_progress    # an RDB start-up load (rdbfile)
    if server.loading and progress is not None:
        out.extend(progress.info_fields())
    return out


def _info_stats(server):
    ps = _pubsub_fields(server)
    channels = ps.get("pubsub_channels", 0)
    patterns = ps.get("pubsub_patterns", 0)
    shard = ps.get("pubsubshard_channels", 0)
    denied = server.acl.denied
    ops, kin, kout = instantaneous(server)
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
        ("sync_full", getattr(server.repl.primary, "sync_full", 0)),
        ("sync_partial_ok", getattr(server.repl.primary, "sync_partial_ok", 0)),
        ("sync_partial_err", getattr(server.repl.primary, "sync_partial_err", 0)),
        ("expired_keys", server.stat_expiredkeys),
        ("expired_stale_perc", "0.00"),
        ("expired_time_cap_reached_count", 0),
        ("expire_cycle_cpu_milliseconds", 0),
        ("evicted_keys", server.stat_evictedkeys),
        ("evicted_clients", server.stat_evictedclients),
        ("evicted_scripts", 0 if server.scripting is None else server.scripting.evicted),
        # ms over maxmemory, in total and now (hotkv.core.eviction)
        ("total_eviction_exceeded_time", server.eviction.info_fields()[0]),
        ("current_eviction_exceeded_time", server.eviction.info_fields()[1]),
        ("keyspace_hits", server.stat_keyspace_hits),
        ("keyspace_misses", server.stat_keyspace_misses),
        ("pubsub_channels", channels),
        ("pubsub_patterns", patterns),
        ("pubsubshard_channels", shard),
        # hotkv.persistence.forkchild
        ("latest_fork_usec", server.latest_fork_usec),
        ("total_forks", server.total_forks),
        ("migrate_cached_sockets", len(server.migrate_sockets)),   # hotkv.commands.migrate
        ("slave_expires_tracked_keys", replica_keys.count(server)),   # hotkv.core.replica_keys
        ("active_defrag_hits", 0),
        ("active_defrag_misses", 0),
        ("active_defrag_key_hits", 0),
        ("active_defrag_key_misses", 0),
        ("total_active_defrag_time", 0),
        ("current_active_defrag_time", 0),
        ("tracking_total_keys", len(server.tracking.table)),
        ("tracking_total_items", server.tracking.total_items),
        ("tracking_total_prefixes", len(server.tracking.prefixes)),
        ("unexpected_error_replies", server.stat_unexpected_error_replies),
        ("total_error_replies", server.stat_total_error_replies),
        ("dump_payload_sanitizations", 0),
        ("total_reads_processed", 0),
        ("total_writes_processed", 0),
        ("io_threaded_reads_processed", 0),
        ("io_threaded_writes_processed", 0),
        ("io_threaded_freed_objects", 0),
        ("io_threaded_accept_processed", 0),
        ("io_threaded_poll_processed", 0),
        ("io_threaded_total_prefetch_batches", 0),
        ("io_threaded_total_prefetch_entries", 0),
        ("client_query_buffer_limit_disconnections",
         server.stat_client_qbuf_limit_disconnections),
        ("client_output_buffer_limit_disconnections",
         server.stat_client_outbuf_limit_disconnections),
        ("reply_buffer_shrinks", 0),
        ("reply_buffer_expands", 0),
        *loopstats.stats_fields(server),       # eventloop_* (hotkv.observe.loopstats)
        ("acl_access_denied_auth", denied.get("auth", 0)),
        ("acl_access_denied_cmd", denied.get("cmd", 0)),
        ("acl_access_denied_key", denied.get("key", 0)),
        ("acl_access_denied_channel", denied.get("channel", 0)),
    ]


def _info_replication(server):
    """INFO replication: a replica's fields are its link's
    (hotkv.replication.replica), a primary's its replicas' lines and its
    backlog's (hotkv.replication.primary)."""
    repl = server.repl
    if repl.role == "slave":
        return replica.info_fields(server)
    if repl.primary is not None:
        repl.primary.flush()       # the backlog's figures include this turn's writes
    return [("role", "master")] + primary.info_fields(server, time.time())


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
    cmdstats = server.cmdstats      # this server's (hotkv.core.stats)
    for cmd in all_commands():
        st = cmdstats.get(cmd)
        if st is None or not (st.calls or st.failed_calls or st.rejected_calls):
            continue
        usec = int(st.seconds * 1_000_000)
        per_call = usec / st.calls if st.calls else 0.0
        out.append(("cmdstat_" + cmd.name,
                    "calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d"
                    % (st.calls, usec, per_call, st.rejected_calls, st.failed_calls)))
    return out


def _info_errorstats(server):
    return [("errorstat_" + name, "count=%d" % n) for name, n in sorted(server.errorstats.items())]


def _info_latencystats(server):
    return latency.info_lines(server)    # per-command percentiles (hotkv.core.latency)


def _info_cluster(server):
    return [("cluster_enabled", 0 if server.cluster is None else 1)]


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
    now = server.clock.ms()
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
# Valkey's INFO DEBUG: only when named (not in all / everything), last.
add_info_section("debug", loopstats.debug_fields, default=False)
_NAMED_ONLY = frozenset(("debug",))


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
        if name not in wanted and (not everything or name in _NAMED_ONLY):
            continue
        lines = ["# %s\r\n" % sec.title]
        for fields in [sec.fn(server)] + [fn(server) for fn in sec.extra]:
            for k, v in fields:
                lines.append("%s:%s\r\n" % (k, v))
        parts.append("".join(lines))
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


@command("info", -1, "loading stale", group="server", acl=("dangerous",), args="[section]...",
         complexity="O(1)",
         history=(("7.0.0", "Added support for taking multiple section arguments."),))
def info(c, argv):
    """Returns information and statistics about the server."""
    return Verbatim(info_text(c.server, argv[1:]))
