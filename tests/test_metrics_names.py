"""/metrics (hotkv.http.metrics) against redis_exporter's metric names: every
name of tests/redis_exporter_metrics.txt (derived from its source, the
commit is in the file) that hotkv can compute is exported -- checked on a
primary (with AOF on, a replica, a slow log entry and a latency event) and,
for what only a replica shows, on its replica; a name hotkv cannot compute
is in ``EXCLUDED`` with the reason, and an exclusion for a missing INFO
field fails once INFO has the field.  Then the values as redis_exporter
computes them: connected_clients counting the scrape's own connection,
seconds not microseconds, counters that only go up, the slow log, latency
events, config values and start time.  /metrics is read with
prometheus_client's text parser.
"""

from __future__ import annotations

import http.client
import json
import os
import time

import pytest
import redis

from support import free_port, wait_for

pytest.importorskip("h11", reason="h11 (pip install 'hotkv[dashboard]') is not installed")
parser = pytest.importorskip("prometheus_client.parser",
                             reason="prometheus-client is not installed")

NAMES_FILE = os.path.join(os.path.dirname(__file__), "redis_exporter_metrics.txt")

_NO_FIELD = "hotkv's INFO has no %s field"
EXCLUDED = {
    # INFO fields hotkv does not have (the exporter exports them only when present).
    "redis_client_longest_output_list": _NO_FIELD % "client_longest_output_list (Redis < 5)",
    "redis_client_biggest_input_buf": _NO_FIELD % "client_biggest_input_buf (Redis < 5)",
    **{"redis_allocator_%s" % n: _NO_FIELD % "allocator_* (jemalloc's; hotkv runs on pymalloc)"
       for n in ("active_bytes", "allocated_bytes", "resident_bytes", "frag_ratio",
                 "frag_bytes", "muzzy_bytes", "rss_ratio", "rss_bytes")},
    **{"redis_memory_max_%s" % n: _NO_FIELD % "*reservation* (a cloud fork's)"
       for n in ("reservation_bytes", "reservation_desired_bytes",
                 "fragmentation_reservation_bytes", "fragmentation_reservation_desired_bytes")},
    "redis_mem_cluster_links_bytes": _NO_FIELD % "mem_cluster_links (cluster bus memory)",
    "redis_mem_replication_backlog_bytes": _NO_FIELD % "mem_replication_backlog",
    "redis_mem_total_replication_buffers_bytes": _NO_FIELD % "mem_total_replication_buffers",
    "redis_mem_overhead_db_hashtable_rehashing_bytes":
        _NO_FIELD % "mem_overhead_db_hashtable_rehashing (Python dicts rehash in one step)",
    "redis_active_defrag_running": _NO_FIELD % "active_defrag_running (no active defrag)",
    "redis_aof_rewrite_buffer_length": _NO_FIELD % "aof_rewrite_buffer_length (Redis < 7)",
    "redis_server_threads_total": _NO_FIELD % "server_threads (KeyDB's)",
    "redis_long_lock_waits_total": _NO_FIELD % "long_lock_waits (KeyDB's)",
    "redis_current_client_thread": _NO_FIELD % "current_client_thread (KeyDB's)",
    "redis_expired_subkeys_total": _NO_FIELD % "expired_subkeys (hash field expiry, Redis 8)",
    "redis_cached_keys_total": _NO_FIELD % "cached_keys (KeyDB FLASH)",
    "redis_storage_provider_read_hits": _NO_FIELD % "storage_provider_read_hits (KeyDB FLASH)",
    "redis_storage_provider_read_misses": _NO_FIELD % "storage_provider_read_misses (KeyDB)",
    "redis_active_time_main_thread_seconds_total": _NO_FIELD % "used_active_time_main_thread",
    "redis_active_time_io_thread_seconds_total": _NO_FIELD % "used_active_time_io_thread_N",
    "redis_db_keys_cached": "hotkv's INFO keyspace has no cached= (KeyDB FLASH)",
    # Commands hotkv does not have.
    **{"redis_commandlog_%s" % n: "no COMMANDLOG command (the exporter asks COMMAND INFO "
       "COMMANDLOG first and exports these only when the server has it)"
       for n in ("execution_slower_than", "large_reply_length", "large_reply_max_len",
                 "large_request_length", "large_request_max_len", "reply_larger_than",
                 "request_larger_than", "slow_execution_max_len", "slow_length")},
    # The exporter process's own series, not the instance's.
    **{"redis_" + n: "about the exporter process and its scrapes, not the instance"
       for n in ("exporter_scrapes_total", "exporter_scrape_duration_seconds",
                 "target_scrape_request_errors_total", "exporter_last_scrape_error",
                 "exporter_last_scrape_duration_seconds",
                 "exporter_last_scrape_connect_time_seconds",
                 "exporter_last_scrape_ping_time_seconds", "exporter_build_info")},
}
# Shown by a replica only (its link to its primary).
REPLICA_ONLY = {"redis_slave_info", "redis_master_link_up", "redis_master_last_io_seconds_ago",
                "redis_master_sync_in_progress", "redis_slave_repl_offset",
                "redis_slave_priority"}


def listed() -> list:
    """[(name, INFO field or None)] of the data file."""
    out = []
    with open(NAMES_FILE) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                parts = line.split()
                out.append((parts[0], parts[1] if len(parts) > 1 else None))
    return out


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, body
    return body


def fresh_metrics(port) -> str:
    """/metrics from a snapshot taken after this call began (/api/state
    ?fresh=1 takes one; /metrics within the second reads it)."""
    since = time.time()
    for _ in range(200):
        if json.loads(get(port, "/api/state?fresh=1"))["time"] >= since:
            return get(port, "/metrics").decode()
        time.sleep(0.01)
    raise AssertionError("no snapshot newer than the request in 200 tries")


def families(text: str) -> dict:
    """{family name: family} as prometheus_client parses the text."""
    return {fam.name: fam for fam in parser.text_string_to_metric_families(text)}


def names(fams: dict) -> set:
    """Every family and sample name (a counter family drops _total)."""
    return set(fams) | {s.name for fam in fams.values() for s in fam.samples}


def value(fams: dict, sample: str, **labels):
    found = [s.value for fam in fams.values() for s in fam.samples
             if s.name == sample and s.labels == labels]
    assert len(found) == 1, (sample, labels, found)
    return found[0]


def _http(factory, **settings):
    port = free_port()
    server = factory(http_port=port, **settings)
    server.http_port = port
    return server


@pytest.fixture
def pair(hotkv_server_factory):
    """A primary with AOF, a slow log entry and a latency event, and its replica."""
    prim = _http(hotkv_server_factory, appendonly="yes", enable_debug_command="yes",
                 repl_diskless_sync_delay=0)      # (its default 5 s only waits)
    r = redis.Redis(host=prim.host, port=prim.port, decode_responses=True)
    rep = _http(hotkv_server_factory, replicaof="%s %d" % (prim.host, prim.port))
    rr = redis.Redis(host=rep.host, port=rep.port, decode_responses=True)
    wait_for(lambda: rr.info("replication").get("master_link_status") == "up")
    r.config_set("latency-monitor-threshold", 1)
    r.execute_command("DEBUG", "SLEEP", "0.01")
    r.config_set("latency-monitor-threshold", 0)
    r.config_set("slowlog-log-slower-than", 0)
    r.set("k", "v")
    r.config_set("slowlog-log-slower-than", -1)
    r.expire("k", 1000)
    r.get("k")
    yield prim, r, rep, rr
    r.close()
    rr.close()


def test_every_listed_name_is_exported_or_excluded_with_a_reason(pair):
    prim, r, rep, rr = pair
    rows = listed()
    assert len(rows) > 150
    unknown = set(EXCLUDED) - {n for n, _ in rows}
    assert not unknown, "excluded but not on the list: %s" % sorted(unknown)
    fields = set(r.info("everything")) | set(rr.info("everything"))
    stale = [n for n, f in rows if n in EXCLUDED and f is not None and f in fields]
    assert not stale, "excluded for a missing INFO field that INFO now has: %s" % stale
    primary = names(families(fresh_metrics(prim.http_port)))
    replica = names(families(fresh_metrics(rep.http_port)))
    missing = [n for n, _ in rows if n not in EXCLUDED
               and n not in (replica if n in REPLICA_ONLY else primary)]
    assert not missing, "redis_exporter names /metrics does not export: %s" % missing
    assert "redis_latest_fork_usec" not in primary   # the exporter exports it in seconds


def test_connected_clients_counts_the_scrape_as_redis_exporter_counts_itself(
        hotkv_server_factory):
    server = _http(hotkv_server_factory)
    # No client on the Redis port: redis_exporter would see its own connection.
    assert value(families(fresh_metrics(server.http_port)), "redis_connected_clients") == 1
    r = redis.Redis(host=server.host, port=server.port)
    seen = r.info("clients")["connected_clients"]     # counts r
    assert seen == 1
    assert value(families(fresh_metrics(server.http_port)), "redis_connected_clients") == 2
    r.close()


def test_values_as_redis_exporter_computes_them(pair):
    prim, r, rep, rr = pair
    before = time.time()
    r.config_set("maxmemory", 100 * 1024 * 1024)
    r.config_set("maxclients", 321)
    r.bgsave()
    wait_for(lambda: r.info("persistence")["rdb_bgsave_in_progress"] == 0)
    slow_len, slow_last = r.slowlog_len(), r.slowlog_get(1)[0]
    (event, when, latest_ms, _max), = r.execute_command("LATENCY", "LATEST")
    hist = r.execute_command("LATENCY", "HISTOGRAM", "set")
    m1 = families(fresh_metrics(prim.http_port))
    info = r.info("everything")
    cs = r.info("commandstats")

    assert value(m1, "redis_config_maxmemory") == 100 * 1024 * 1024
    assert value(m1, "redis_config_maxclients") == 321 == value(m1, "redis_max_clients")
    assert value(m1, "redis_config_client_output_buffer_limit_bytes",
                 **{"class": "pubsub", "limit": "hard"}) == 33554432
    assert value(m1, "redis_config_client_output_buffer_limit_overcome_seconds",
                 **{"class": "pubsub", "limit": "soft"}) == 60
    start = value(m1, "redis_start_time_seconds")
    assert start <= before and start == int(start)
    assert start == pytest.approx(time.time() - info["uptime_in_seconds"], abs=2)
    # Seconds, not microseconds.
    assert info["latest_fork_usec"] > 0
    assert value(m1, "redis_latest_fork_seconds") == info["latest_fork_usec"] / 1e6
    assert value(m1, "redis_commands_duration_seconds_total", cmd="set") \
        == cs["cmdstat_set"]["usec"] / 1e6
    # The slow log and LATENCY LATEST.
    assert value(m1, "redis_slowlog_length") == slow_len >= 1
    assert value(m1, "redis_slowlog_last_id") == slow_last["id"]
    assert value(m1, "redis_last_slow_execution_duration_seconds") \
        == slow_last["duration"] / 1e6
    assert event == "command"
    assert value(m1, "redis_latency_spike_last", event_name="command") == when
    assert value(m1, "redis_latency_spike_duration_seconds", event_name="command") \
        == latest_ms / 1e3
    # Latency percentiles (a summary) and LATENCY HISTOGRAM (a histogram), in usec.
    assert m1["redis_latency_percentiles_usec"].type == "summary"
    assert value(m1, "redis_latency_percentiles_usec_count", cmd="set") \
        == cs["cmdstat_set"]["calls"]
    assert value(m1, "redis_latency_percentiles_usec", cmd="set", quantile="50") \
        == info["latency_percentiles_usec_set"]["p50"]
    assert m1["redis_commands_latencies_usec"].type == "histogram"
    assert value(m1, "redis_commands_latencies_usec_count", cmd="set") == hist["set"]["calls"]
    top = max(hist["set"]["histogram_usec"])
    assert value(m1, "redis_commands_latencies_usec_bucket", cmd="set", le=str(top)) \
        == hist["set"]["histogram_usec"][top]
    # A primary's replica and a replica's primary.
    link = {"master_host": prim.host, "master_port": str(prim.port)}
    m_rep = families(fresh_metrics(rep.http_port))
    assert value(m_rep, "redis_master_link_up", **link) == 1
    assert value(m_rep, "redis_slave_info", read_only="1", **link) == 1
    slave0 = info["slave0"]
    assert value(m1, "redis_connected_slave_offset_bytes", slave_ip=slave0["ip"],
                 slave_port=str(slave0["port"]), slave_state="online") == slave0["offset"]
    labels = {s.labels.get("role") for s in m_rep["redis_instance_info"].samples}
    assert labels == {"slave"}

    # Counters only go up.
    for i in range(50):
        r.set("n%d" % i, i)
        r.get("missing%d" % i)
    try:
        r.execute_command("NOSUCHCOMMAND")
    except redis.ResponseError:
        pass
    m2 = families(fresh_metrics(prim.http_port))
    counters = 0
    for name, fam in m1.items():
        if fam.type != "counter":
            continue
        after = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in m2[name].samples}
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert after[key] >= s.value, key
            counters += 1
    assert counters > 50
    assert value(m2, "redis_commands_total", cmd="set") \
        == value(m1, "redis_commands_total", cmd="set") + 50
    assert value(m2, "redis_keyspace_misses_total") >= value(m1, "redis_keyspace_misses_total") \
        + 50


def test_counter_families_are_typed_as_the_exporter_types_them(pair):
    prim, r, rep, rr = pair
    fams = families(fresh_metrics(prim.http_port))
    for name in ("redis_commands_processed", "redis_total_error_replies",
                 "redis_cpu_user_seconds", "redis_errors", "redis_commands"):
        assert fams[name].type == "counter", name
    for name in ("redis_connected_clients", "redis_db_keys", "redis_slowlog_length",
                 "redis_uptime_in_seconds", "redis_config_maxmemory"):
        assert fams[name].type == "gauge", name

