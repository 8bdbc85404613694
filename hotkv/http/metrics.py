"""``/metrics``: the Prometheus text format (version 0.0.4) of one snapshot,
under the metric names and labels of oliver006/redis_exporter, so the
Grafana dashboards made for it work unchanged (redis_up, redis_instance_info,
redis_connected_clients, redis_commands_processed_total,
redis_commands_total{cmd}, redis_commands_duration_seconds_total{cmd},
redis_db_keys{db="db0"}, redis_db_keys_expiring, redis_memory_used_bytes,
redis_errors_total{err}, ...), then hotkv's own queue metrics:
hotkv_queue_depth{db,key}, hotkv_queue_oldest_age_seconds{db,key},
hotkv_queue_blocked_clients{db,key}, hotkv_queue_enqueued_total{db,key} and
hotkv_queue_dequeued_total{db,key} (elements the list commands pushed and
removed since http-port went on, hotkv.http.counts: rate() of them is the
enqueue/dequeue rate), hotkv_queue_counted_keys and
hotkv_queue_uncounted_total (the counter table's bound at work),
hotkv_stream_length{db,key},
hotkv_stream_entries_added_total{db,key},
hotkv_stream_group_entries_read_total{db,key,group},
hotkv_stream_group_lag{db,key,group}, hotkv_stream_group_pending{db,key,group},
hotkv_stream_group_oldest_pending_idle_seconds, hotkv_library_queue_jobs{library,db,
queue,state}.

Invariants: INFO field -> metric name as redis_exporter maps it (its
``metricMapGauges``/``metricMapCounters``; a field it does not map is not
exported); "ok"/"err" status fields are 1/0 as it does; the number of
series is bounded: per-key series only for the ``http-metrics-top-keys``
deepest lists and streams of the snapshot (hotkv.http.state).
"""

from __future__ import annotations

from .state import kv_fields

# redis_exporter's INFO field -> metric (without the "redis_" namespace).
GAUGES = {
    "uptime_in_seconds": "uptime_in_seconds", "process_id": "process_id",
    "connected_clients": "connected_clients", "blocked_clients": "blocked_clients",
    "tracking_clients": "tracking_clients",
    "client_recent_max_output_buffer": "client_recent_max_output_buffer_bytes",
    "client_recent_max_input_buffer": "client_recent_max_input_buffer_bytes",
    "allocator_active": "allocator_active_bytes",
    "allocator_allocated": "allocator_allocated_bytes",
    "allocator_resident": "allocator_resident_bytes",
    "used_memory": "memory_used_bytes", "used_memory_rss": "memory_used_rss_bytes",
    "used_memory_peak": "memory_used_peak_bytes", "used_memory_lua": "memory_used_lua_bytes",
    "used_memory_overhead": "memory_used_overhead_bytes",
    "used_memory_startup": "memory_used_startup_bytes",
    "used_memory_dataset": "memory_used_dataset_bytes",
    "used_memory_scripts": "memory_used_scripts_bytes", "maxmemory": "memory_max_bytes",
    "mem_fragmentation_ratio": "mem_fragmentation_ratio",
    "mem_fragmentation_bytes": "mem_fragmentation_bytes",
    "mem_clients_slaves": "mem_clients_slaves", "mem_clients_normal": "mem_clients_normal",
    "expired_stale_perc": "expired_stale_percentage",
    "mem_not_counted_for_evict": "mem_not_counted_for_eviction_bytes",
    "lazyfree_pending_objects": "lazyfree_pending_objects",
    "active_defrag_running": "active_defrag_running",
    "expired_time_cap_reached_count": "expired_time_cap_reached_total",
    "loading": "loading_dump_file",
    "rdb_changes_since_last_save": "rdb_changes_since_last_save",
    "rdb_bgsave_in_progress": "rdb_bgsave_in_progress",
    "rdb_last_save_time": "rdb_last_save_timestamp_seconds",
    "rdb_last_bgsave_status": "rdb_last_bgsave_status",
    "rdb_last_bgsave_time_sec": "rdb_last_bgsave_duration_sec",
    "rdb_current_bgsave_time_sec": "rdb_current_bgsave_duration_sec",
    "rdb_last_cow_size": "rdb_last_cow_size_bytes",
    "aof_enabled": "aof_enabled", "aof_rewrite_in_progress": "aof_rewrite_in_progress",
    "aof_rewrite_scheduled": "aof_rewrite_scheduled",
    "aof_last_rewrite_time_sec": "aof_last_rewrite_duration_sec",
    "aof_current_rewrite_time_sec": "aof_current_rewrite_duration_sec",
    "aof_last_cow_size": "aof_last_cow_size_bytes",
    "aof_current_size": "aof_current_size_bytes", "aof_base_size": "aof_base_size_bytes",
    "aof_pending_rewrite": "aof_pending_rewrite", "aof_buffer_length": "aof_buffer_length",
    "aof_pending_bio_fsync": "aof_pending_bio_fsync", "aof_delayed_fsync": "aof_delayed_fsync",
    "aof_last_bgrewrite_status": "aof_last_bgrewrite_status",
    "aof_last_write_status": "aof_last_write_status",
    "pubsub_channels": "pubsub_channels", "pubsub_patterns": "pubsub_patterns",
    "latest_fork_usec": "latest_fork_usec",
    "connected_slaves": "connected_slaves", "repl_backlog_size": "replication_backlog_bytes",
    "repl_backlog_active": "repl_backlog_is_active",
    "repl_backlog_first_byte_offset": "repl_backlog_first_byte_offset",
    "repl_backlog_histlen": "repl_backlog_history_bytes",
    "master_repl_offset": "master_repl_offset", "second_repl_offset": "second_repl_offset",
    "sync_full": "replica_resyncs_full", "sync_partial_ok": "replica_partial_resync_accepted",
    "sync_partial_err": "replica_partial_resync_denied",
}
COUNTERS = {
    "total_connections_received": "connections_received_total",
    "total_commands_processed": "commands_processed_total",
    "rejected_connections": "rejected_connections_total",
    "total_net_input_bytes": "net_input_bytes_total",
    "total_net_output_bytes": "net_output_bytes_total",
    "expired_keys": "expired_keys_total", "evicted_keys": "evicted_keys_total",
    "keyspace_hits": "keyspace_hits_total", "keyspace_misses": "keyspace_misses_total",
    "used_cpu_sys": "cpu_sys_seconds_total", "used_cpu_user": "cpu_user_seconds_total",
    "used_cpu_sys_children": "cpu_sys_children_seconds_total",
    "used_cpu_user_children": "cpu_user_children_seconds_total",
}


def _value(text: str):
    t = text.strip()
    if t in ("ok", "up"):
        return 1
    if t in ("err", "fail", "down"):
        return 0
    try:
        return float(t)
    except ValueError:
        return None


def _esc(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(v) -> str:
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return "%d" % v
        return repr(v)
    return str(v)


class _Out:
    def __init__(self):
        self.lines: list = []
        self.declared: set = set()

    def add(self, name, kind, help_, value, labels=None):
        if value is None:
            return
        if name not in self.declared:
            self.declared.add(name)
            self.lines.append("# HELP %s %s" % (name, help_))
            self.lines.append("# TYPE %s %s" % (name, kind))
        lab = ""
        if labels:
            lab = "{" + ",".join('%s="%s"' % (k, _esc(v)) for k, v in labels.items()) + "}"
        self.lines.append("%s%s %s" % (name, lab, _fmt(value)))


def render(snap: dict) -> str:
    """The /metrics body for one snapshot (hotkv.http.state.snapshot)."""
    out = _Out()
    info = snap["info"]
    out.add("redis_up", "gauge", "Information about the Redis instance", 1)
    srv = info.get("server", {})
    labels = {"role": info.get("replication", {}).get("role", ""),
              "redis_version": srv.get("redis_version", ""),
              "redis_build_id": srv.get("redis_build_id", ""),
              "redis_mode": srv.get("redis_mode", srv.get("server_mode", "")),
              "os": srv.get("os", ""),
              "maxmemory_policy": info.get("memory", {}).get("maxmemory_policy", ""),
              "tcp_port": srv.get("tcp_port", ""), "run_id": srv.get("run_id", ""),
              "process_id": srv.get("process_id", "")}
    out.add("redis_instance_info", "gauge", "Information about the Redis instance", 1, labels)
    for section in ("server", "clients", "memory", "persistence", "stats", "replication",
                    "cpu"):
        for field, text in info.get(section, {}).items():
            if field in GAUGES:
                out.add("redis_" + GAUGES[field], "gauge", field, _value(text))
            elif field in COUNTERS:
                out.add("redis_" + COUNTERS[field], "counter", field, _value(text))
    for field, text in info.get("keyspace", {}).items():
        f = kv_fields(text)
        db = {"db": field}
        out.add("redis_db_keys", "gauge", "Total number of keys by DB", _value(f.get("keys", "")),
                db)
        out.add("redis_db_keys_expiring", "gauge", "Total number of expiring keys by DB",
                _value(f.get("expires", "")), db)
        if "avg_ttl" in f:
            out.add("redis_db_avg_ttl_seconds", "gauge", "Avg TTL in seconds",
                    (_value(f["avg_ttl"]) or 0) / 1000, db)
    stats = info.get("commandstats", {})
    for field, text in sorted(stats.items()):
        f = kv_fields(text)
        cmd = {"cmd": field[len("cmdstat_"):]}
        out.add("redis_commands_total", "counter", "Total number of calls per command",
                _value(f.get("calls", "")), cmd)
    for field, text in sorted(stats.items()):
        f = kv_fields(text)
        cmd = {"cmd": field[len("cmdstat_"):]}
        usec = _value(f.get("usec", ""))
        out.add("redis_commands_duration_seconds_total", "counter",
                "Total amount of time in seconds spent per command",
                None if usec is None else usec / 1e6, cmd)
    for name, field_name, help_ in (
            ("redis_commands_rejected_calls_total", "rejected_calls",
             "Total number of errors prior command execution per command"),
            ("redis_commands_failed_calls_total", "failed_calls",
             "Total number of errors within command execution per command")):
        for field, text in sorted(stats.items()):   # one metric's series together
            out.add(name, "counter", help_, _value(kv_fields(text).get(field_name, "")),
                    {"cmd": field[len("cmdstat_"):]})
    for field, text in sorted(info.get("errorstats", {}).items()):
        out.add("redis_errors_total", "counter", "Total number of errors per error type",
                _value(kv_fields(text).get("count", "")),
                {"err": field[len("errorstat_"):]})
    _queue_metrics(out, snap)
    return "\n".join(out.lines) + "\n"


def _queue_metrics(out, snap):
    for q in snap["lists"]:
        lab = {"db": "db%d" % q["db"], "key": q["key"]}
        out.add("hotkv_queue_depth", "gauge", "Items in a list (a queue)", q["depth"], lab)
    for q in snap["lists"]:
        lab = {"db": "db%d" % q["db"], "key": q["key"]}
        out.add("hotkv_queue_oldest_age_seconds", "gauge",
                "Age of the oldest item of a list, when its items carry a timestamp",
                q["oldest_age_s"], lab)
    for q in snap["lists"]:
        lab = {"db": "db%d" % q["db"], "key": q["key"]}
        out.add("hotkv_queue_blocked_clients", "gauge", "Clients blocked on a list",
                q["blocked"], lab)
    for name, field, help_ in (
            ("hotkv_queue_enqueued_total", "enqueued",
             "Elements pushed to a list (LPUSH, RPUSH, LINSERT, the push of LMOVE...)"),
            ("hotkv_queue_dequeued_total", "dequeued",
             "Elements removed from a list (pops, the pop of LMOVE..., LREM, LTRIM)")):
        for q in snap["lists"]:
            out.add(name, "counter", help_, q[field],
                    {"db": "db%d" % q["db"], "key": q["key"]})
    qc = snap.get("queue_counters")
    if qc is not None:
        out.add("hotkv_queue_counted_keys", "gauge",
                "List keys whose enqueues and dequeues are counted (bounded)", qc["keys"])
        out.add("hotkv_queue_uncounted_total", "counter",
                "Elements not counted: their key came while the counter table was full",
                qc["refused"])
    for st in snap["streams"]:
        lab = {"db": "db%d" % st["db"], "key": st["key"]}
        out.add("hotkv_stream_length", "gauge", "Entries in a stream", st["length"], lab)
    for st in snap["streams"]:
        out.add("hotkv_stream_entries_added_total", "counter",
                "Entries ever added to a stream (XINFO STREAM entries-added)",
                st["entries_added"], {"db": "db%d" % st["db"], "key": st["key"]})
    for st in snap["streams"]:
        for g in st["groups"]:
            out.add("hotkv_stream_group_entries_read_total", "counter",
                    "Entries delivered to a stream group (XINFO GROUPS entries-read)",
                    g["entries_read"],
                    {"db": "db%d" % st["db"], "key": st["key"], "group": g["name"]})
    for name, field, help_ in (
            ("hotkv_stream_group_lag", "lag", "Entries a stream group has not delivered yet"),
            ("hotkv_stream_group_pending", "pending",
             "Entries delivered to a stream group and not acknowledged")):
        for st in snap["streams"]:
            for g in st["groups"]:
                out.add(name, "gauge", help_, g[field],
                        {"db": "db%d" % st["db"], "key": st["key"], "group": g["name"]})
    for st in snap["streams"]:
        for g in st["groups"]:
            op = g["oldest_pending"]
            out.add("hotkv_stream_group_oldest_pending_idle_seconds", "gauge",
                    "Idle time of a stream group's oldest pending entry",
                    None if op is None else op["idle_ms"] / 1000,
                    {"db": "db%d" % st["db"], "key": st["key"], "group": g["name"]})
    for lq in snap["libraries"]:
        for state, n in lq["states"].items():
            out.add("hotkv_library_queue_jobs", "gauge",
                    "Jobs of a queue library's queue by state (the library's own names)", n,
                    {"library": lq["library"], "db": "db%d" % lq["db"], "queue": lq["name"],
                     "state": state})
    for lq in snap["libraries"]:
        out.add("hotkv_library_queue_oldest_age_seconds", "gauge",
                "Age of the oldest queued job of a library queue", lq["oldest_age_s"],
                {"library": lq["library"], "db": "db%d" % lq["db"], "queue": lq["name"]})


__all__ = ["render", "GAUGES", "COUNTERS"]
