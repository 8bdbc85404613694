"""LATENCY, the latency monitor and the per-command latency histograms
(hotkv.core.latency, hotkv.commands.latency) against valkey-server 8.1.8.

Replies that do not depend on timing are compared byte for byte in RESP2
and RESP3 (help, errors, empty states, DOCTOR with monitoring off, RESET
counts, INFO latencystats with tracking off).  Replies that carry measured
times are compared by shape: the same events, sample counts and fields on
both servers after the same slow commands (DEBUG SLEEP, the expiry of a big
set), never a timed assertion.  The HDR arithmetic behind LATENCY HISTOGRAM
and INFO latencystats is checked against values valkey-server reports.

Every wait is bounded (support.wait_for); the module runs in a few seconds.
"""

from __future__ import annotations

import re

import pytest
import valkey

from hotkv.core import latency
from support import RawClient, wait_for

SETTINGS = ("latency-monitor-threshold", "latency-tracking",
            "latency-tracking-info-percentiles", "slowlog-log-slower-than",
            "lazyfree-lazy-expire")


@pytest.fixture
def clean(diff):
    """Both servers with no latency events; their settings restored afterwards."""
    saved = []
    for client in (diff.ours, diff.theirs):
        values = {}
        for name in SETTINGS:
            reply = client.call("CONFIG", "GET", name).split(b"\r\n")
            values[name] = reply[4] if len(reply) > 4 else b""
        saved.append((client, values))
        client.call("LATENCY", "RESET")
    yield diff
    for client, values in saved:
        for name, value in values.items():
            client.call("CONFIG", "SET", name, value)
        client.call("LATENCY", "RESET")


@pytest.mark.parametrize("resp3", [False, True])
def test_replies_without_timing_match_valkey(clean, resp3):
    d = clean
    if resp3:
        d.resp3()
    d("CONFIG", "SET", "latency-monitor-threshold", "0")
    for args in [
        ("LATENCY", "HELP"), ("LATENCY", "help", "x"), ("LATENCY",), ("LATENCY", "FOO"),
        ("LATENCY", "DOCTOR"), ("LATENCY", "DOCTOR", "x"), ("LATENCY", "LATEST"),
        ("LATENCY", "LATEST", "x"), ("LATENCY", "HISTORY"), ("LATENCY", "HISTORY", "command"),
        ("LATENCY", "HISTORY", "a", "b"), ("LATENCY", "GRAPH", "command"),
        ("LATENCY", "GRAPH"), ("LATENCY", "RESET"), ("LATENCY", "RESET", "command", "x"),
        ("LATENCY", "HISTOGRAM", "nosuchcommand", "get|x|y", "client|nosuch"),
        # One by one: Valkey lists a container's subcommands in a per-process order.
        *[("COMMAND", "INFO", "latency|" + sub) for sub in (
            "doctor", "graph", "help", "histogram", "history", "latest", "reset")],
    ]:
        d(*args)
    # With a threshold set and no event yet, DOCTOR says there was none.
    d("CONFIG", "SET", "latency-monitor-threshold", "1000")
    d("LATENCY", "DOCTOR")


def test_latency_tracking_off_empties_latencystats(clean):
    d = clean
    d("CONFIG", "SET", "latency-tracking", "no")
    d("SET", "k", "v")
    d("INFO", "latencystats")
    d("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99.9 100")
    d("CONFIG", "GET", "latency-tracking-info-percentiles")
    d("CONFIG", "SET", "latency-tracking-info-percentiles", "")
    d("CONFIG", "GET", "latency-tracking-info-percentiles")


@pytest.fixture
def both(hotkv_server_factory, ref_server):
    """valkey-py clients (RESP2) of a fresh hotkv with DEBUG on and of the
    reference, for the replies compared by shape; the reference's settings
    are restored afterwards."""
    ours = hotkv_server_factory(enable_debug_command="yes")
    clients = [valkey.Valkey(host=s.host, port=s.port) for s in (ours, ref_server)]
    ref = clients[1]
    saved = {name: ref.config_get(name)[name] for name in SETTINGS}
    for c in clients:
        c.execute_command("LATENCY", "RESET")
        c.flushall()
    yield clients
    for name, value in saved.items():
        ref.config_set(name, value)
    ref.execute_command("LATENCY", "RESET")
    for c in clients:
        c.close()


def _latest(client) -> list:
    return [(e[0].decode(), e[1], e[2], e[3])
            for e in client.execute_command("LATENCY", "LATEST")]


def test_slow_command_is_a_command_event_on_both(both):
    for client in both:
        client.config_set("latency-monitor-threshold", 20)
        assert client.execute_command("DEBUG", "SLEEP", "0.05")
        events = _latest(client)
        assert [e[0] for e in events] == ["command"], events
        _, when, ms, worst = events[0]
        assert ms >= 50 and worst == ms and when > 0
        assert client.execute_command("LATENCY", "HISTORY", "command") == [[when, ms]]
        graph = client.execute_command("LATENCY", "GRAPH", "command").decode()
        assert graph.startswith("command - high %d ms, low %d ms (all time high %d ms)\n%s\n"
                                % (ms, ms, ms, "-" * 80)), graph
        doctor = client.execute_command("LATENCY", "DOCTOR").decode()
        assert "1. command: 1 latency spikes (average %dms, mean deviation 0ms" % ms in doctor
        assert "- Check your Slow Log to understand" in doctor
        assert client.execute_command("LATENCY", "RESET", "COMMAND") == 1
        assert client.execute_command("LATENCY", "LATEST") == []


def test_graph_and_doctor_text_match_valkey_for_equal_samples():
    """The same samples give the same GRAPH and DOCTOR text (the only
    difference between two servers is the measured time, fixed here)."""
    ts = latency._Series()
    ts.samples = [[100, 300], [101, 400], [103, 500]]
    ts.max = 500
    lines = latency.graph("command", ts).split("\n")
    assert lines[0] == "command - high 500 ms, low 300 ms (all time high 500 ms)"
    assert lines[1] == "-" * 80
    # Valkey's sparkline: 4 rows of "_o#|", a blank line, then the labels downwards.
    assert lines[2:6] == ["  #", " _|", " ||", "_||"]
    assert lines[6] == "   "


def test_expire_of_a_big_set_is_an_expire_cycle_and_del_event(both):
    for client in both:
        client.config_set("lazyfree-lazy-expire", "no")
        client.config_set("latency-monitor-threshold", 1)
        for start in range(0, 200_000, 20_000):
            client.sadd("big", *range(start, start + 20_000))
        client.pexpire("big", 1)
        assert wait_for(lambda: client.dbsize() == 0, timeout=10)
        assert wait_for(lambda: {"expire-cycle", "expire-del"} <= {e[0] for e in _latest(client)},
                        timeout=5), _latest(client)
        assert b"expire-cycle - high" in client.execute_command("LATENCY", "GRAPH",
                                                                "expire-cycle")


def _histogram(client, *names) -> dict:
    """LATENCY HISTOGRAM as {command: (calls, [(usec, cumulative)])}."""
    reply = client.execute_command("LATENCY", "HISTOGRAM", *names)
    out = {}
    for name, body in zip(reply[::2], reply[1::2]):
        fields = dict(zip(body[::2], body[1::2]))
        points = fields[b"histogram_usec"]
        out[name.decode()] = (fields[b"calls"], list(zip(points[::2], points[1::2])))
    return out


# Every bucket LATENCY HISTOGRAM can report: the highest value (us) HDR
# counts with 1024 ns << k, k = 0..20 (Valkey's log walk, 2 significant digits).
BUCKETS = {1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908, 33816,
           67633, 135266, 270532, 541065, 1082130}


def test_histogram_counts_calls_as_valkey(both):
    for client in both:
        client.config_resetstat()
        hist = _histogram(client)
        assert list(hist) == ["config|resetstat"]
        for _ in range(3):
            client.set("a", "b")
        client.client_id()
        hist = _histogram(client, "set", "client", "nosuch")
        assert sorted(hist) == ["client|id", "set"]
        assert hist["set"][0] == 3 and hist["client|id"][0] == 1
        for calls, buckets in hist.values():
            assert all(b in BUCKETS for b, _ in buckets), buckets
            counts = [n for _, n in buckets]
            assert counts == sorted(counts) and counts[-1] == calls
        pool = client.connection_pool.connection_kwargs
        raw = RawClient(pool["host"], pool["port"])
        latencystats = raw.call("INFO", "latencystats").decode()
        raw.close()
        assert re.search(r"\r\nlatency_percentiles_usec_set:p50=\d+\.\d{3},p99=\d+\.\d{3},"
                         r"p99\.9=\d+\.\d{3}\r\n", latencystats), latencystats


@pytest.mark.parametrize("usec, bucket, p50", [
    (0, 1, 0.001), (1, 1, 1.003), (12, 16, 12.031), (33, 33, 33.023), (34, 66, 34.047),
    (69, 132, 69.119), (312, 528, 313.343), (1000, 1056, 1003.519),
    (2_000_000, 1082130, 1002438.655),
])
def test_hdr_arithmetic(usec, bucket, p50):
    """Values worked out from Valkey's HDR histogram (1 ns .. 1 s, 2 digits):
    12 us is counted as 11968..12031 ns, 69 us as 68608..69119, 312 us as
    311296..313343 (valkey-server 8.1.8 reported exactly p0/p50 = 11.968/
    12.031, 68.608/69.119 and 311.296/313.343 in INFO latencystats), a
    duration over 1 s as 1 s."""
    calls, points = latency.cdf({usec: 1})
    assert calls == 1 and points == [bucket, 1]
    assert latency.percentile({usec: 1}, 50.0) == pytest.approx(p50)


def test_percentiles_over_several_values():
    hist = {10: 50, 20: 49, 500: 1}
    assert latency.percentile(hist, 50.0) == pytest.approx(10.047)
    assert latency.percentile(hist, 99.0) == pytest.approx(20.095)
    assert latency.percentile(hist, 99.9) == pytest.approx(501.759)
    assert latency.percentile(hist, 0.0) == pytest.approx(9.984)
    calls, points = latency.cdf(hist)
    assert calls == 100 and points == [16, 50, 33, 99, 528, 100]


def test_timed_out_blocking_command_is_in_its_histogram(both):
    for client in both:
        client.config_resetstat()
        client.blpop("nolist", 0.05)
        calls, _ = _histogram(client, "blpop")["blpop"]
        assert calls == client.info("commandstats")["cmdstat_blpop"]["calls"] == 1
