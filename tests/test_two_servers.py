"""Two servers in one process share nothing (issue 29, "the server owns its state").

``hotkv_server_factory``, ``EmbeddedCluster`` and any test suite with two
fixtures make several ``EmbeddedServer``s in one process.  Each test here
starts two fresh ones, A and B, drives one kind of state on A and reads it
on B: B must show nothing of A (and, where a reset is the subject, A must
keep what B reset).  The kinds: command stats, rejected calls and error
stats, CONFIG RESETSTAT, REPLCONF values, scripts, functions, ACL users,
CONFIG SET values, the keyspace, client-side caching, pub/sub, the slow log,
the latency monitor, the latency histograms and latency-tracking.

Before the fix (commit 3f0e72b) these failed: command stats, rejected calls
(``cmdstat_get:...rejected_calls=1`` on B), CONFIG RESETSTAT, REPLCONF (B's
replica showed A's ``ip-address``: both first clients have id 1), the
latency histograms and latency-tracking (the counters lived on the
process-wide ``hotkv.core.registry.Command`` objects).  The others passed
already: their state was the server's; they stay here as the guard.

Raw connections only: a client library's handshake (HELLO, CLIENT SETINFO,
an unknown subcommand it tries) would add counters of its own.
"""

from __future__ import annotations

import pytest

from hotkv.embedded import EmbeddedServer
from support import RawClient, wait_for


@pytest.fixture
def pair(tmp_path):
    # Each in a directory of its own: in the working directory they would
    # both load a dump.rdb left there (one with 18 RQ keys was found in a
    # checkout, and B's DBSIZE was 17 after A's SET).
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = EmbeddedServer(enable_debug_command="yes", dir=str(tmp_path / "a")).start()
    b = EmbeddedServer(enable_debug_command="yes", dir=str(tmp_path / "b")).start()
    clients = []

    def connect(server):
        c = RawClient(server.host, server.port)
        clients.append(c)
        return c
    try:
        yield a, b, connect
    finally:
        for c in clients:
            c.close()
        a.stop()
        b.stop()


def _info(c, section: str) -> dict:
    """INFO section as {field: value text}."""
    body = c.call("INFO", section).split(b"\r\n", 1)[1]
    out = {}
    for line in body.decode().splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def test_command_stats(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    for i in range(7):
        assert ca.call("SET", "k", i) == b"+OK\r\n"
    assert ca.call("LPUSH", "l", "x") == b":1\r\n"
    stats_b = _info(cb, "commandstats")
    assert "cmdstat_set" not in stats_b and "cmdstat_lpush" not in stats_b, stats_b
    stats_a = _info(ca, "commandstats")
    assert stats_a["cmdstat_set"].startswith("calls=7,")
    assert stats_a["cmdstat_lpush"].startswith("calls=1,")


def test_rejected_calls_and_error_stats(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    assert ca.call("GET").startswith(b"-ERR wrong number of arguments")
    assert ca.call("NOSUCHCOMMAND").startswith(b"-ERR unknown command")
    assert "cmdstat_get" not in _info(cb, "commandstats")
    assert _info(cb, "errorstats") == {}
    assert _info(cb, "stats")["total_error_replies"] == "0"
    assert _info(ca, "commandstats")["cmdstat_get"].endswith("rejected_calls=1,failed_calls=0")
    assert _info(ca, "errorstats") == {"errorstat_ERR": "count=2"}
    assert _info(ca, "stats")["total_error_replies"] == "2"


def test_config_resetstat_resets_its_own_server(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    ca.call("SET", "k", "v")
    ca.call("GET")                          # an error
    assert cb.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    assert _info(ca, "commandstats")["cmdstat_set"].startswith("calls=1,")
    assert _info(ca, "errorstats") == {"errorstat_ERR": "count=1"}
    assert _info(ca, "stats")["total_error_replies"] == "1"


def test_replconf_values(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    # The two connections get the same client id (the servers' first
    # ones do): REPLCONF values once lived in one dict by client id.
    ia, ib = (int(c.call("CLIENT", "ID")[1:-2]) for c in (ca, cb))
    while ia != ib:
        if ia < ib:
            ca = connect(a)
            ia = int(ca.call("CLIENT", "ID")[1:-2])
        else:
            cb = connect(b)
            ib = int(cb.call("CLIENT", "ID")[1:-2])
    assert ca.call("REPLCONF", "ip-address", "10.9.8.7") == b"+OK\r\n"
    cb.send("PSYNC", "?", "-1")
    assert cb.sock.recv(1).startswith(b"+")     # FULLRESYNC: B made it a replica
    reader = connect(b)
    assert wait_for(lambda: "slave0" in _info(reader, "replication"))
    assert "10.9.8.7" not in _info(reader, "replication")["slave0"]


def test_scripts(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    sha = ca.call("SCRIPT", "LOAD", "return 1")[5:-2]
    assert ca.call("SCRIPT", "EXISTS", sha) == b"*1\r\n:1\r\n"
    assert cb.call("SCRIPT", "EXISTS", sha) == b"*1\r\n:0\r\n"


def test_functions(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    code = "#!lua name=twolib\nserver.register_function('twofn', function() return 1 end)"
    assert ca.call("FUNCTION", "LOAD", code) == b"$6\r\ntwolib\r\n"
    assert b"twolib" in ca.call("FUNCTION", "LIST")
    assert cb.call("FUNCTION", "LIST") == b"*0\r\n"


def test_acl_users(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    assert ca.call("ACL", "SETUSER", "alice", "on", ">pw", "+@all", "~*") == b"+OK\r\n"
    assert cb.call("ACL", "USERS") == b"*1\r\n$7\r\ndefault\r\n"


def test_config_set(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    before = cb.call("CONFIG", "GET", "maxmemory-samples")
    assert ca.call("CONFIG", "SET", "maxmemory-samples", "9") == b"+OK\r\n"
    assert cb.call("CONFIG", "GET", "maxmemory-samples") == before
    assert b"$1\r\n9\r\n" not in before


def test_keyspace(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    ca.call("SET", "k", "v")
    assert cb.call("DBSIZE") == b":0\r\n"
    assert cb.call("GET", "k") == b"$-1\r\n"


def test_client_tracking(pair):
    a, b, connect = pair
    ta, tb = connect(a), connect(b)
    for t in (ta, tb):
        assert t.call("HELLO", "3").startswith(b"%")
        assert t.call("CLIENT", "TRACKING", "on") == b"+OK\r\n"
        assert t.call("GET", "k") == b"_\r\n"
    connect(a).call("SET", "k", "v")          # invalidates A's tracker only
    assert tb.call("PING") == b"+PONG\r\n"      # no push before B's reply
    assert ta.call("PING").startswith(b">2\r\n$10\r\ninvalidate\r\n")


def test_pubsub(pair):
    a, b, connect = pair
    sub = connect(b)
    assert sub.call("SUBSCRIBE", "ch").startswith(b"*3\r\n$9\r\nsubscribe\r\n")
    assert connect(a).call("PUBLISH", "ch", "hello") == b":0\r\n"
    assert connect(b).call("PUBLISH", "ch", "own") == b":1\r\n"
    # The next message B's subscriber gets is B's own.
    assert sub.read_reply() == b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nown\r\n"


def test_slowlog(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    for c in (ca, cb):
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        c.call("SLOWLOG", "RESET")
    ca.call("SET", "marker-of-a", "v")
    assert b"marker-of-a" in ca.call("SLOWLOG", "GET", "128")
    assert b"marker-of-a" not in cb.call("SLOWLOG", "GET", "128")


def test_latency_monitor(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    for c in (ca, cb):
        c.call("CONFIG", "SET", "latency-monitor-threshold", "1")
    assert ca.call("DEBUG", "SLEEP", "0.01") == b"+OK\r\n"
    assert ca.call("LATENCY", "LATEST").startswith(b"*1\r\n")
    assert cb.call("LATENCY", "LATEST") == b"*0\r\n"


def test_latency_histograms(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    ca.call("SET", "k", "v")
    assert ca.call("LATENCY", "HISTOGRAM", "set").startswith(b"*2\r\n$3\r\nset\r\n")
    assert cb.call("LATENCY", "HISTOGRAM", "set") == b"*0\r\n"
    assert "latency_percentiles_usec_set" not in _info(cb, "latencystats")


def test_latency_tracking_setting(pair):
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    assert ca.call("CONFIG", "SET", "latency-tracking", "no") == b"+OK\r\n"
    cb.call("SET", "k", "v")
    assert cb.call("LATENCY", "HISTOGRAM", "set").startswith(b"*2\r\n$3\r\nset\r\n")
    ca.call("SET", "k", "v")
    assert ca.call("LATENCY", "HISTOGRAM", "set") == b"*0\r\n"


def test_clock(pair):
    """A's virtual clock moved a day: B's keys and TIME stay on real time."""
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    for c in (ca, cb):
        assert c.call("SET", "k", "v", "EX", "3600") == b"+OK\r\n"
    a.clock.advance(86400)
    assert ca.call("EXISTS", "k") == b":0\r\n"
    assert cb.call("EXISTS", "k") == b":1\r\n"
    ta = int(ca.call("TIME").split(b"\r\n")[2])
    tb = int(cb.call("TIME").split(b"\r\n")[2])
    assert ta - tb >= 86400 - 5


def test_a_save_with_compression_leaves_the_other_servers_dump_alone(pair):
    """rdbcompression applies to the save that runs with it, in its own thread:
    B's DUMP of a compressible value while A saves (here: A's save thread
    inside its compressed section, held there) is the plain payload, as
    valkey-server's DUMP always is.  The switch was module state: B's DUMP
    came out LZF-compressed (0xC3)."""
    import threading

    from hotkv.types.codec import lzf_compression
    a, b, connect = pair
    value = b"job:" + b"x" * 200
    cb = connect(b)
    assert cb.call("SET", "k", value) == b"+OK\r\n"
    inside, release = threading.Event(), threading.Event()

    def saving():
        with lzf_compression(True):
            inside.set()
            release.wait(10)
    t = threading.Thread(target=saving)
    t.start()
    try:
        assert inside.wait(10)
        dump = cb.call("DUMP", "k")
    finally:
        release.set()
        t.join(10)
    assert value in dump and b"\xc3" not in dump[:8], dump[:40]


def test_pfdebug_simd(pair):
    """PFDEBUG SIMD OFF on A leaves B's switch on (it was a module global)."""
    a, b, connect = pair
    ca, cb = connect(a), connect(b)
    assert ca.call("PFDEBUG", "SIMD", "OFF") == b"+disabled\r\n"
    # A bad argument changes nothing and says the switch after its error
    # (Valkey's two replies): B's is still on.
    assert cb.call("PFDEBUG", "SIMD", "BAD").startswith(b"-ERR Argument must be ON or OFF")
    assert cb.read_reply() == b"+enabled\r\n"
