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

Besides INFO's fields, what redis_exporter reads with other commands, from
the snapshot's "metrics" (hotkv.http.state): redis_start_time_seconds,
redis_slowlog_length, redis_slowlog_last_id,
redis_last_slow_execution_duration_seconds, redis_config_maxmemory,
redis_config_maxclients, redis_config_io_threads, redis_config_repl_backlog_size,
redis_config_client_output_buffer_limit_bytes{class,limit} and
..._overcome_seconds, redis_latency_spike_last / _duration_seconds{event_name}
(LATENCY LATEST), redis_latency_percentiles_usec{cmd,quantile} (a summary of
INFO latencystats) and redis_commands_latencies_usec{cmd,le} (a histogram of
LATENCY HISTOGRAM).  tests/test_metrics_names.py checks the names against a
list derived from redis_exporter's source.

Invariants: INFO field -> metric name and type as redis_exporter maps it
(its ``metricMapGauges``/``metricMapCounters``; a field it does not map is
not exported, but cluster_* fields are, under their own name, as it does);
values as it computes them: "ok"/"err" status fields are 1/0, latest_fork_usec
is redis_latest_fork_seconds, durations in seconds where the name says so;
redis_connected_clients counts the scrape itself, as the exporter's own
connection is counted in the INFO it reads (0 clients on the Redis port
shows 1); one family's series are together; the number of series is
bounded: per-command series by the command table, per-key series only for
the ``http-metrics-top-keys`` deepest lists and streams of the snapshot
(hotkv.http.state).
"""

from __future__ import annotations

from .state import kv_fields

# redis_exporter's INFO field -> metric (without the "redis_" namespace), for
# every field of its maps a Redis/Valkey instance can show (not its tile38,
# search or module fields).  Typed gauge or counter as it types them, even
# where a name does not say (total_error_replies is a counter).
GAUGES = {
    # Server
    "uptime_in_seconds": "uptime_in_seconds", "process_id": "process_id",
    "io_threads_active": "io_threads_active",
    # Clients
    "connected_clients": "connected_clients", "blocked_clients": "blocked_clients",
    "maxclients": "max_clients", "tracking_clients": "tracking_clients",
    "clients_in_timeout_table": "clients_in_timeout_table",
    "pubsub_clients": "pubsub_clients", "watching_clients": "watching_clients",
    "total_watched_keys": "total_watched_keys", "total_blocking_keys": "total_blocking_keys",
    "total_blocking_keys_on_nokey": "total_blocking_keys_on_nokey",
    "client_longest_output_list": "client_longest_output_list",
    "client_biggest_input_buf": "client_biggest_input_buf",
    "client_recent_max_output_buffer": "client_recent_max_output_buffer_bytes",
    "client_recent_max_input_buffer": "client_recent_max_input_buffer_bytes",
    # Memory
    "allocator_active": "allocator_active_bytes",
    "allocator_allocated": "allocator_allocated_bytes",
    "allocator_resident": "allocator_resident_bytes",
    "allocator_frag_ratio": "allocator_frag_ratio", "allocator_frag_bytes": "allocator_frag_bytes",
    "allocator_muzzy": "allocator_muzzy_bytes", "allocator_rss_ratio": "allocator_rss_ratio",
    "allocator_rss_bytes": "allocator_rss_bytes",
    "used_memory": "memory_used_bytes", "used_memory_rss": "memory_used_rss_bytes",
    "used_memory_peak": "memory_used_peak_bytes", "used_memory_lua": "memory_used_lua_bytes",
    "used_memory_vm_eval": "memory_used_vm_eval_bytes",
    "used_memory_scripts_eval": "memory_used_scripts_eval_bytes",
    "used_memory_overhead": "memory_used_overhead_bytes",
    "used_memory_startup": "memory_used_startup_bytes",
    "used_memory_dataset": "memory_used_dataset_bytes",
    "number_of_cached_scripts": "number_of_cached_scripts",
    "number_of_functions": "number_of_functions", "number_of_libraries": "number_of_libraries",
    "used_memory_vm_functions": "memory_used_vm_functions_bytes",
    "used_memory_scripts": "memory_used_scripts_bytes",
    "used_memory_functions": "memory_used_functions_bytes",
    "used_memory_vm_total": "memory_used_vm_total",
    "maxmemory": "memory_max_bytes",
    "maxmemory_reservation": "memory_max_reservation_bytes",
    "maxmemory_desired_reservation": "memory_max_reservation_desired_bytes",
    "maxfragmentationmemory_reservation": "memory_max_fragmentation_reservation_bytes",
    "maxfragmentationmemory_desired_reservation":
        "memory_max_fragmentation_reservation_desired_bytes",
    "mem_fragmentation_ratio": "mem_fragmentation_ratio",
    "mem_fragmentation_bytes": "mem_fragmentation_bytes",
    "mem_clients_slaves": "mem_clients_slaves", "mem_clients_normal": "mem_clients_normal",
    "mem_cluster_links": "mem_cluster_links_bytes", "mem_aof_buffer": "mem_aof_buffer_bytes",
    "mem_replication_backlog": "mem_replication_backlog_bytes",
    "expired_stale_perc": "expired_stale_percentage",
    "mem_not_counted_for_evict": "mem_not_counted_for_eviction_bytes",
    "mem_total_replication_buffers": "mem_total_replication_buffers_bytes",
    "mem_overhead_db_hashtable_rehashing": "mem_overhead_db_hashtable_rehashing_bytes",
    "lazyfree_pending_objects": "lazyfree_pending_objects",
    "lazyfreed_objects": "lazyfreed_objects", "active_defrag_running": "active_defrag_running",
    "migrate_cached_sockets": "migrate_cached_sockets_total",
    "active_defrag_hits": "defrag_hits", "active_defrag_misses": "defrag_misses",
    "active_defrag_key_hits": "defrag_key_hits", "active_defrag_key_misses": "defrag_key_misses",
    "total_system_memory": "total_system_memory_bytes",
    # Persistence
    "loading": "loading_dump_file", "async_loading": "async_loading",
    "rdb_changes_since_last_save": "rdb_changes_since_last_save",
    "rdb_bgsave_in_progress": "rdb_bgsave_in_progress",
    "rdb_last_save_time": "rdb_last_save_timestamp_seconds",
    "rdb_last_bgsave_status": "rdb_last_bgsave_status",
    "rdb_last_bgsave_time_sec": "rdb_last_bgsave_duration_sec",
    "rdb_current_bgsave_time_sec": "rdb_current_bgsave_duration_sec",
    "rdb_saves": "rdb_saves_total", "rdb_last_cow_size": "rdb_last_cow_size_bytes",
    "rdb_last_load_keys_expired": "rdb_last_load_expired_keys",
    "rdb_last_load_keys_loaded": "rdb_last_load_loaded_keys",
    "aof_enabled": "aof_enabled", "aof_rewrite_in_progress": "aof_rewrite_in_progress",
    "aof_rewrite_scheduled": "aof_rewrite_scheduled",
    "aof_last_rewrite_time_sec": "aof_last_rewrite_duration_sec",
    "aof_current_rewrite_time_sec": "aof_current_rewrite_duration_sec",
    "aof_last_cow_size": "aof_last_cow_size_bytes",
    "aof_current_size": "aof_current_size_bytes", "aof_base_size": "aof_base_size_bytes",
    "aof_pending_rewrite": "aof_pending_rewrite", "aof_buffer_length": "aof_buffer_length",
    "aof_rewrite_buffer_length": "aof_rewrite_buffer_length",
    "aof_pending_bio_fsync": "aof_pending_bio_fsync", "aof_delayed_fsync": "aof_delayed_fsync",
    "aof_last_bgrewrite_status": "aof_last_bgrewrite_status",
    "aof_last_write_status": "aof_last_write_status",
    "module_fork_in_progress": "module_fork_in_progress",
    "module_fork_last_cow_size": "module_fork_last_cow_size",
    # Stats
    "current_eviction_exceeded_time": "current_eviction_exceeded_time_ms",
    "pubsub_channels": "pubsub_channels", "pubsub_patterns": "pubsub_patterns",
    "pubsubshard_channels": "pubsubshard_channels",
    "latest_fork_usec": "latest_fork_seconds",      # in seconds: USEC_TO_SECONDS
    "tracking_total_keys": "tracking_total_keys", "tracking_total_items": "tracking_total_items",
    "tracking_total_prefixes": "tracking_total_prefixes",
    "instantaneous_eventloop_cycles_per_sec": "instantaneous_eventloop_cycles_per_sec",
    "instantaneous_eventloop_duration_usec": "instantaneous_eventloop_duration_usec",
    # Replication
    "connected_slaves": "connected_slaves", "repl_backlog_size": "replication_backlog_bytes",
    "repl_backlog_active": "repl_backlog_is_active",
    "repl_backlog_first_byte_offset": "repl_backlog_first_byte_offset",
    "repl_backlog_histlen": "repl_backlog_history_bytes",
    "master_repl_offset": "master_repl_offset", "second_repl_offset": "second_repl_offset",
    "slave_expires_tracked_keys": "slave_expires_tracked_keys",
    "slave_priority": "slave_priority",
    "sync_full": "replica_resyncs_full", "sync_partial_ok": "replica_partial_resync_accepted",
    "sync_partial_err": "replica_partial_resync_denied",
    # KeyDB
    "server_threads": "server_threads_total", "long_lock_waits": "long_lock_waits_total",
    "current_client_thread": "current_client_thread",
}
COUNTERS = {
    "total_connections_received": "connections_received_total",
    "total_commands_processed": "commands_processed_total",
    "rejected_connections": "rejected_connections_total",
    "total_net_input_bytes": "net_input_bytes_total",
    "total_net_output_bytes": "net_output_bytes_total",
    "total_net_repl_input_bytes": "net_repl_input_bytes_total",
    "total_net_repl_output_bytes": "net_repl_output_bytes_total",
    "expired_subkeys": "expired_subkeys_total",
    "expired_keys": "expired_keys_total",
    "expired_time_cap_reached_count": "expired_time_cap_reached_total",
    "expire_cycle_cpu_milliseconds": "expire_cycle_cpu_time_ms_total",
    "evicted_keys": "evicted_keys_total", "evicted_clients": "evicted_clients_total",
    "evicted_scripts": "evicted_scripts_total",
    "total_eviction_exceeded_time": "eviction_exceeded_time_ms_total",
    "keyspace_hits": "keyspace_hits_total", "keyspace_misses": "keyspace_misses_total",
    "eventloop_cycles": "eventloop_cycles_total",
    "eventloop_duration_sum": "eventloop_duration_sum_usec_total",
    "eventloop_duration_cmd_sum": "eventloop_duration_cmd_sum_usec_total",
    "used_cpu_sys": "cpu_sys_seconds_total", "used_cpu_user": "cpu_user_seconds_total",
    "used_cpu_sys_children": "cpu_sys_children_seconds_total",
    "used_cpu_user_children": "cpu_user_children_seconds_total",
    "used_cpu_sys_main_thread": "cpu_sys_main_thread_seconds_total",
    "used_cpu_user_main_thread": "cpu_user_main_thread_seconds_total",
    "unexpected_error_replies": "unexpected_error_replies",
    "total_error_replies": "total_error_replies",
    "dump_payload_sanitizations": "dump_payload_sanitizations",
    "total_reads_processed": "total_reads_processed",
    "total_writes_processed": "total_writes_processed",
    "io_threaded_reads_processed": "io_threaded_reads_processed",
    "io_threaded_writes_processed": "io_threaded_writes_processed",
    "client_query_buffer_limit_disconnections": "client_query_buffer_limit_disconnections_total",
    "client_output_buffer_limit_disconnections":
        "client_output_buffer_limit_disconnections_total",
    "reply_buffer_shrinks": "reply_buffer_shrinks_total",
    "reply_buffer_expands": "reply_buffer_expands_total",
    "acl_access_denied_auth": "acl_access_denied_auth_total",
    "acl_access_denied_cmd": "acl_access_denied_cmd_total",
    "acl_access_denied_key": "acl_access_denied_key_total",
    "acl_access_denied_channel": "acl_access_denied_channel_total",
    "cached_keys": "cached_keys_total",
    "storage_provider_read_hits": "storage_provider_read_hits",
    "storage_provider_read_misses": "storage_provider_read_misses",
    "used_active_time_main_thread": "active_time_main_thread_seconds_total",
}
# INFO fields in microseconds exported in seconds.
USEC_TO_SECONDS = {"latest_fork_usec"}


def _value(text: str):
    """An INFO value as redis_exporter reads it: ok/true 1, err/fail/false
    0 (and a link's up/down 1/0), a number, else None (not exported)."""
    t = text.strip()
    if t in ("ok", "true", "up"):
        return 1
    if t in ("err", "fail", "false", "down"):
        return 0
    try:
        return float(t)
    except ValueError:
        return None


def _esc(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(v) -> str:
    if isinstance(v, float):
        if v == float("inf"):
            return "+Inf"
        if v.is_integer() and abs(v) < 1e15:
            return "%d" % v
        return repr(v)
    return str(v)


def _labels(labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join('%s="%s"' % (k, _esc(v)) for k, v in labels.items()) + "}"


class _Out:
    """The families in the order first added, each family's series together
    (the text format wants one family's lines in one block)."""

    def __init__(self):
        self.families: dict = {}

    def _family(self, name, kind, help_):
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = ["# HELP %s %s" % (name, help_),
                                         "# TYPE %s %s" % (name, kind)]
        return fam

    def add(self, name, kind, help_, value, labels=None):
        if value is None:
            return
        self._family(name, kind, help_).append("%s%s %s" % (name, _labels(labels),
                                                             _fmt(value)))

    def add_summary(self, name, help_, labels, quantiles, count, total):
        fam = self._family(name, "summary", help_)
        for q, v in quantiles:
            fam.append("%s%s %s" % (name, _labels({**labels, "quantile": _fmt(q)}), _fmt(v)))
        fam.append("%s_sum%s %s" % (name, _labels(labels), _fmt(total)))
        fam.append("%s_count%s %s" % (name, _labels(labels), _fmt(count)))

    def add_histogram(self, name, help_, labels, buckets, count, total):
        fam = self._family(name, "histogram", help_)
        for le, n in buckets:
            fam.append("%s_bucket%s %s" % (name, _labels({**labels, "le": _fmt(float(le))}),
                                           _fmt(n)))
        fam.append("%s_bucket%s %s" % (name, _labels({**labels, "le": "+Inf"}), _fmt(count)))
        fam.append("%s_sum%s %s" % (name, _labels(labels), _fmt(total)))
        fam.append("%s_count%s %s" % (name, _labels(labels), _fmt(count)))

    def text(self) -> str:
        return "".join(line + "\n" for fam in self.families.values() for line in fam)


# INFO sections read field by field elsewhere in render().
_OWN_SECTIONS = ("", "commandstats", "errorstats", "latencystats", "keyspace")


def render(snap: dict) -> str:
    """The /metrics body for one snapshot (hotkv.http.state.snapshot)."""
    out = _Out()
    info = snap["info"]
    out.add("redis_up", "gauge", "Information about the Redis instance", 1)
    _instance_info(out, info)
    for section, fields in info.items():
        if section in _OWN_SECTIONS:
            continue
        for field, text in fields.items():
            if section == "replication" and _replication(out, info["replication"], field, text):
                continue
            _info_field(out, field, text)
    extra = snap.get("metrics") or {}
    _server(out, info.get("server", {}), extra, snap)
    _keyspace(out, info.get("keyspace", {}))
    _commandstats(out, info)
    _latency(out, info, snap, extra)
    _slowlog_and_config(out, extra)
    _queue_metrics(out, snap)
    return out.text()


def _instance_info(out, info):
    srv, repl = info.get("server", {}), info.get("replication", {})
    labels = {"role": repl.get("role", ""),
              "redis_version": srv.get("redis_version", ""),
              "redis_build_id": srv.get("redis_build_id", ""),
              "redis_mode": srv.get("redis_mode", srv.get("server_mode", "")),
              "os": srv.get("os", ""),
              "maxmemory_policy": info.get("memory", {}).get("maxmemory_policy", ""),
              "tcp_port": srv.get("tcp_port", ""), "run_id": srv.get("run_id", ""),
              "process_id": srv.get("process_id", ""),
              "master_replid": repl.get("master_replid", "")}
    for name in ("valkey_version", "valkey_release_stage"):
        if name in srv:
            labels[name] = srv[name]
    out.add("redis_instance_info", "gauge", "Information about the Redis instance", 1, labels)
    if repl.get("role") == "slave":
        out.add("redis_slave_info", "gauge", "1, labelled with the primary this replica follows", 1,
                {"master_host": repl.get("master_host", ""),
                 "master_port": repl.get("master_port", ""),
                 "read_only": repl.get("slave_read_only", "")})


def _info_field(out, field, text):
    """One INFO field under its redis_exporter name: its maps, and the
    cluster_* fields (cluster_enabled, cluster_connections) by their own
    name, as it includes them."""
    value = _value(text)
    if field in COUNTERS:
        out.add("redis_" + COUNTERS[field], "counter", field + " metric", value)
        return
    if field in GAUGES:
        name = GAUGES[field]
        if field in USEC_TO_SECONDS and value is not None:
            value = value / 1e6
    elif field.startswith("cluster_"):
        name = field
    else:
        return
    if field == "connected_clients" and value is not None:
        # redis_exporter reads INFO on its own connection, which INFO
        # counts; the scrape is that connection here.
        value += 1
    out.add("redis_" + name, "gauge", field + " metric", value)


def _replication(out, repl, field, text) -> bool:
    """A replica's link to its primary and a primary's replicas
    (labelled series); True when ``field`` was one of them."""
    link = {"master_host": repl.get("master_host", ""),
            "master_port": repl.get("master_port", "")}
    if field == "master_link_status":
        out.add("redis_master_link_up", "gauge",
                "1 while this replica's link to its primary is up, else 0",
                1 if text.strip() == "up" else 0, link)
        return True
    if field in ("master_last_io_seconds_ago", "master_sync_in_progress", "slave_repl_offset"):
        v = _value(text)
        out.add("redis_" + field, "gauge", field, None if v is None else int(v), link)
        return True
    if field.startswith("slave") and field[5:].isdigit():
        f = kv_fields(text)
        lab = {"slave_ip": f.get("ip", ""), "slave_port": f.get("port", ""),
               "slave_state": f.get("state", "")}
        out.add("redis_connected_slave_offset_bytes", "gauge",
                "Replication offset a replica acknowledged",
                _value(f.get("offset", "")), lab)
        if "lag" in f:
            out.add("redis_connected_slave_lag_seconds", "gauge",
                    "Seconds since a replica's last acknowledgement",
                    _value(f["lag"]), lab)
        return True
    return False


def _server(out, srv, extra, snap):
    start = extra.get("start_time")
    if start is None and "uptime_in_seconds" in srv:
        start = snap["time"] - float(srv["uptime_in_seconds"])
    if start is not None:
        out.add("redis_start_time_seconds", "gauge",
                "When the server started (unix time, seconds)", int(start))
    for field in ("hz", "configured_hz"):
        if field in srv:
            out.add("redis_" + field, "gauge", field + " metric", _value(srv[field]))


def _keyspace(out, keyspace):
    for field, text in keyspace.items():
        f = kv_fields(text)
        db = {"db": field}
        out.add("redis_db_keys", "gauge", "Total number of keys by DB", _value(f.get("keys", "")),
                db)
        out.add("redis_db_keys_expiring", "gauge", "Total number of expiring keys by DB",
                _value(f.get("expires", "")), db)
        if "avg_ttl" in f:
            out.add("redis_db_avg_ttl_seconds", "gauge", "Avg TTL in seconds",
                    (_value(f["avg_ttl"]) or 0) / 1000, db)


def _commandstats(out, info):
    for field, text in sorted(info.get("commandstats", {}).items()):
        f = kv_fields(text)
        cmd = {"cmd": field[len("cmdstat_"):]}
        out.add("redis_commands_total", "counter", "Total number of calls per command",
                _value(f.get("calls", "")), cmd)
        usec = _value(f.get("usec", ""))
        out.add("redis_commands_duration_seconds_total", "counter",
                "Total amount of time in seconds spent per command",
                None if usec is None else usec / 1e6, cmd)
        out.add("redis_commands_rejected_calls_total", "counter",
                "Total number of errors prior command execution per command",
                _value(f.get("rejected_calls", "")), cmd)
        out.add("redis_commands_failed_calls_total", "counter",
                "Total number of errors within command execution per command",
                _value(f.get("failed_calls", "")), cmd)
    for field, text in sorted(info.get("errorstats", {}).items()):
        out.add("redis_errors_total", "counter", "Total number of errors per error type",
                _value(kv_fields(text).get("count", "")),
                {"err": field[len("errorstat_"):]})


def _usec_of(stats, cmd) -> float:
    """The usec of cmd and of its subcommands (cmd|sub) in commandstats."""
    total = 0.0
    for field, text in stats.items():
        name = field[len("cmdstat_"):]
        if name == cmd or name.startswith(cmd + "|"):
            total += _value(kv_fields(text).get("usec", "")) or 0
    return total


def _latency(out, info, snap, extra):
    """INFO latencystats as a summary per command (quantile labels 50, 99,
    99.9; count the calls, sum the usec of commandstats), LATENCY HISTOGRAM
    as a histogram per command (buckets in usec), LATENCY LATEST's
    events."""
    stats = info.get("commandstats", {})
    for field, text in sorted(info.get("latencystats", {}).items()):
        cmd = field[len("latency_percentiles_usec_"):]
        cs = stats.get("cmdstat_" + cmd)
        if cs is None:
            continue
        f = kv_fields(cs)
        qs = [(float(k[1:]), _value(v)) for k, v in kv_fields(text).items()]
        out.add_summary("redis_latency_percentiles_usec",
                        "Per-command latency percentiles (INFO latencystats), usec",
                        {"cmd": cmd}, qs, _value(f.get("calls", "")) or 0,
                        _value(f.get("usec", "")) or 0)
    for cmd, (calls, points) in sorted(extra.get("latency_histograms", {}).items()):
        buckets = [(points[i], points[i + 1]) for i in range(0, len(points), 2)]
        out.add_histogram("redis_commands_latencies_usec",
                          "Per-command latency distribution (LATENCY HISTOGRAM), usec",
                          {"cmd": cmd}, buckets, calls, _usec_of(stats, cmd))
    for ev in snap.get("latency", ()):
        out.add("redis_latency_spike_last", "gauge",
                "Unix time of the latest sample of a latency event",
                ev["time"], {"event_name": ev["event"]})
    for ev in snap.get("latency", ()):
        out.add("redis_latency_spike_duration_seconds", "gauge",
                "Duration of the latest sample of a latency event, seconds", ev["latest_ms"] / 1e3,
                {"event_name": ev["event"]})


def _slowlog_and_config(out, extra):
    if "slowlog_len" in extra:
        last = extra.get("slowlog_last") or {"id": 0, "usec": 0}
        out.add("redis_slowlog_length", "gauge", "Entries in the slow log (SLOWLOG LEN)",
                extra["slowlog_len"])
        out.add("redis_slowlog_last_id", "gauge", "Id of the newest slow log entry (0 when empty)",
                last["id"])
        out.add("redis_last_slow_execution_duration_seconds", "gauge",
                "Duration of the newest slow log entry, seconds",
                last["usec"] / 1e6)
    config = extra.get("config", {})
    for key in ("io-threads", "maxclients", "maxmemory", "repl-backlog-size"):
        if key in config:
            out.add("redis_config_" + key.replace("-", "_"), "gauge", "config " + key,
                    _value(config[key]))
    words = config.get("client-output-buffer-limit", "").split()
    for i in range(0, len(words) - 3, 4):
        cls = words[i]
        for limit, v in (("hard", words[i + 1]), ("soft", words[i + 2])):
            out.add("redis_config_client_output_buffer_limit_bytes", "gauge",
                    "client-output-buffer-limit hard and soft limits per class, bytes", _value(v),
                    {"class": cls, "limit": limit})
    for i in range(0, len(words) - 3, 4):
        out.add("redis_config_client_output_buffer_limit_overcome_seconds", "gauge",
                "client-output-buffer-limit soft limit seconds per class", _value(words[i + 3]),
                {"class": words[i], "limit": "soft"})


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
