"""DEBUG's subcommands that Valkey's Tcl units use, against valkey-server 8.1.8.

OBJECT (the line's fields, with the object address and the clock-derived
lru fields masked), SET-ACTIVE-EXPIRE (the cron really stops and restarts
expiring), QUICKLIST-PACKED-THRESHOLD's bounds, CHANGE-REPL-ID (a new
master_replid), STRINGMATCH-TEST, and the argument-count errors.  DIGEST
and DIGEST-VALUE are tests/test_debug_digest.py's.
"""

from __future__ import annotations

import re
import time

import pytest

from hotkv import EmbeddedServer
from support import RawClient, wait_for


@pytest.fixture(scope="module")
def debug_server():
    srv = EmbeddedServer(port=0, enable_debug_command="yes").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def pair(debug_server, ref_server):
    ours = RawClient(debug_server.host, debug_server.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    for c in (ours, theirs):
        assert c.call("FLUSHALL") == b"+OK\r\n"
    yield ours, theirs
    for c in (ours, theirs):
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        c.call("CONFIG", "SET", "list-max-listpack-size", "-2")
        c.call("FLUSHALL")
        c.close()


def both(pair, *cmd) -> bytes:
    a, b = (c.call(*cmd) for c in pair)
    assert a == b, (cmd, a, b)
    return a


_MASK = re.compile(rb"Value at:0x[0-9a-f]+|lru:\d+|lfu_access_time_minutes:\d+")


def test_debug_object_line(pair):
    both(pair, "CONFIG", "SET", "list-max-listpack-size", "4")
    for cmd in (("SET", "s", "hello"), ("SET", "n", "12345"), ("RPUSH", "l", "a", "b"),
                ("RPUSH", "ql", *[str(i) for i in range(50)]), ("HSET", "h", "a", "1"),
                ("ZADD", "z", "1", "a", "2.5", "b"), ("SADD", "st", "1", "2"),
                ("SADD", "ls", "a", "b"), ("XADD", "x", "1-1", "a", "b")):
        both(pair, *cmd)
    for key in ("s", "n", "l", "ql", "h", "z", "st", "ls", "x"):
        for extra in ((), ("fast",), ("other",)):
            a, b = (c.call("DEBUG", "OBJECT", key, *extra) for c in pair)
            assert a.startswith(b"+Value at:0x"), a
            assert _MASK.sub(b"", a) == _MASK.sub(b"", b), (key, extra, a, b)
    assert b"ql_nodes:13 " in pair[0].call("DEBUG", "OBJECT", "ql")
    for cmd in (("DEBUG", "OBJECT", "nokey"), ("DEBUG", "OBJECT"),
                ("DEBUG", "OBJECT", "s", "fast", "x")):
        both(pair, *cmd)


def test_set_active_expire(pair):
    ours, theirs = pair
    # On (the default), the cron removes an expired key nobody reads.
    both(pair, "SET", "a", "v", "PX", "1")
    started = time.monotonic()
    assert wait_for(lambda: ours.call("DBSIZE") == b":0\r\n", timeout=10)
    assert wait_for(lambda: theirs.call("DBSIZE") == b":0\r\n", timeout=10)
    took = time.monotonic() - started
    # Off: the expired key stays (for longer than removing one took).
    both(pair, "DEBUG", "SET-ACTIVE-EXPIRE", "0")
    both(pair, "SET", "b", "v", "PX", "1")
    time.sleep(max(0.5, 3 * took))
    assert both(pair, "DBSIZE") == b":1\r\n"
    # "abc" is atoi's 0: still off; then on again and the key goes.
    both(pair, "DEBUG", "SET-ACTIVE-EXPIRE", "abc")
    assert both(pair, "DBSIZE") == b":1\r\n"
    both(pair, "DEBUG", "SET-ACTIVE-EXPIRE", "1")
    assert wait_for(lambda: ours.call("DBSIZE") == b":0\r\n", timeout=10)
    assert wait_for(lambda: theirs.call("DBSIZE") == b":0\r\n", timeout=10)


def test_quicklist_packed_threshold_bounds(pair):
    for arg in ("0", "1", "1k", "1gb", "4293918720", "4293918721", "4294967296", "5gb",
                "-1", "abc", ""):
        both(pair, "DEBUG", "QUICKLIST-PACKED-THRESHOLD", arg)
    both(pair, "DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0")
    both(pair, "DEBUG", "QUICKLIST-PACKED-THRESHOLD")


def _replid(c) -> bytes:
    return re.search(rb"master_replid:([0-9a-f]{40})", c.call("INFO", "replication")).group(1)


def test_change_repl_id_and_stringmatch_test(pair):
    ours = pair[0]
    before = _replid(ours)
    assert both(pair, "DEBUG", "CHANGE-REPL-ID") == b"+OK\r\n"
    assert _replid(ours) != before
    both(pair, "DEBUG", "CHANGE-REPL-ID", "x")
    # valkey-server's fuzzer runs for seconds (12 s on a loaded machine):
    # a longer read timeout than RawClient's 5 s.
    for c in pair:
        c.sock.settimeout(120)
    assert both(pair, "DEBUG", "STRINGMATCH-TEST").startswith(b"+Apparently")
    for c in pair:
        c.sock.settimeout(5)
    both(pair, "DEBUG", "SET-ACTIVE-EXPIRE")
    both(pair, "DEBUG", "JMAP")           # not a DEBUG subcommand in Valkey 8.1


# --------------------------------------------------------------------------
# POPULATE, HTSTATS, HTSTATS-KEY, PROTOCOL, SET-DISABLE-DENY-SCRIPTS,
# REPLYBUFFER, CLIENT-EVICTION, DICT-RESIZING
# --------------------------------------------------------------------------

def test_debug_populate(pair):
    both(pair, "DEBUG", "POPULATE", "1000")
    both(pair, "DEBUG", "POPULATE", "5", "p", "12")      # padded with zero bytes
    both(pair, "DEBUG", "POPULATE", "5", "q", "3")       # cut
    both(pair, "DEBUG", "POPULATE", "3", "x" * 200)      # the name cut at 127 bytes
    both(pair, "SET", "key:7", "mine")
    both(pair, "DEBUG", "POPULATE", "10")                # present keys are left alone
    both(pair, "DEBUG", "POPULATE", "0")
    assert both(pair, "DBSIZE") == b":1011\r\n"      # the 3 long names cut to one
    for key in ("key:0", "key:7", "key:999", "p:1", "q:4", "x" * 127):
        both(pair, "GET", key)
    assert both(pair, "GET", "p:1") == b"$12\r\nvalue:1\x00\x00\x00\x00\x00\r\n"
    assert both(pair, "SCAN", "0", "MATCH", "x*", "COUNT", "100000")[-10:]
    both(pair, "DEBUG", "DIGEST")
    for bad in (("-1",), ("x",), ("2", "q", "-1"), ("2", "q", "z"), ("1", "a", "1", "extra")):
        both(pair, "DEBUG", "POPULATE", *bad)


def test_debug_htstats(pair):
    assert both(pair, "DEBUG", "HTSTATS", "0") == b"$29\r\n[Dictionary HT]\n[Expires HT]\n\r\n"
    for bad in (("99",), ("-1",), ("x",)):
        both(pair, "DEBUG", "HTSTATS", *bad)
    both(pair, "DEBUG", "POPULATE", "1000")
    both(pair, "EXPIRE", "key:1", "100")
    pattern = re.compile(rb"\[Dictionary HT\]\nHash table 0 stats \(main hash table\):\n"
                         rb" table size: (\d+)\n number of entries: 1000\n\[Expires HT\]\n"
                         rb"Hash table 0 stats \(main hash table\):\n table size: \d+\n"
                         rb" number of entries: 1\n")
    for c in pair:
        text = c.call("DEBUG", "HTSTATS", "0")
        m = pattern.match(text[text.index(b"\r\n") + 2:].removeprefix(b"txt:"))
        assert m is not None and int(m.group(1)) >= 1000, text
        text = c.call("DEBUG", "HTSTATS", "0", "full")
        assert text.count(b"chain length distribution:") == 2, text
    both(pair, "SADD", "s", *["m%d" % i for i in range(300)])
    both(pair, "ZADD", "z", *[x for i in range(200) for x in (str(i), "m%d" % i)])
    for c in pair:
        for key, n in (("s", 300), ("z", 200)):
            text = c.call("DEBUG", "HTSTATS-KEY", key)
            assert b" number of entries: %d\n" % n in text, text
    both(pair, "HSET", "h", *[str(i) for i in range(400)])
    both(pair, "SET", "str", "x")
    both(pair, "SADD", "small", "a")
    for key in ("h", "str", "small", "nokey"):
        both(pair, "DEBUG", "HTSTATS-KEY", key)
    both(pair, "DEBUG", "HTSTATS-KEY")


@pytest.mark.parametrize("proto", [2, 3])
def test_debug_protocol(pair, proto):
    for c in pair:      # (HELLO's own reply names the server: not compared)
        c.call("HELLO", str(proto))
    for kind in ("string", "integer", "double", "bignum", "null", "array", "set", "map",
                 "attrib", "verbatim", "true", "false", "nope"):
        both(pair, "DEBUG", "PROTOCOL", kind)
    first = both(pair, "DEBUG", "PROTOCOL", "push")
    if proto == 3:         # a real reply, then the push (sent after the command's reply)
        assert first == b"$40\r\nSome real reply following the push reply\r\n"
        a, b = (c.read_reply() for c in pair)
        assert a == b and a.startswith(b">2\r\n")
    for c in pair:
        c.call("HELLO", "2")


def test_debug_set_disable_deny_scripts(pair):
    """Scripts may call noscript commands while it is on (the scripting
    unit's DEBUG PROTOCOL and CLIENT LIST from Lua)."""
    script = "redis.setresp(3); return redis.call('debug', 'protocol', 'bignum')"
    both(pair, "EVAL", script, "0")                        # refused
    both(pair, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")
    try:
        assert both(pair, "EVAL", script, "0") == \
            b"$37\r\n1234567999999999999999999999999999999\r\n"
        for proto in ("3", "2"):
            for c in pair:
                c.call("HELLO", proto)
            # (not map and set: Lua's table order decides theirs)
            for kind in ("bignum", "double", "null", "true", "verbatim", "attrib", "array"):
                both(pair, "EVAL", "redis.setresp(3); return redis.call('debug', 'protocol', "
                     "'%s')" % kind, "0")
        for c in pair:
            assert c.call("EVAL", "return redis.call('client', 'list')", "0").startswith(b"$")
    finally:
        both(pair, "DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
    both(pair, "EVAL", "return redis.call('client', 'list')", "0")     # refused again
    both(pair, "DEBUG", "SET-DISABLE-DENY-SCRIPTS")


def test_debug_replybuffer_client_eviction_dict_resizing(pair):
    for args in (("PEAK-RESET-TIME", "100"), ("PEAK-RESET-TIME", "never"),
                 ("PEAK-RESET-TIME", "RESET"), ("PEAK-RESET-TIME", "x"), ("RESIZING", "0"),
                 ("RESIZING", "1"), ("X", "1"), ("RESIZING",)):
        both(pair, "DEBUG", "REPLYBUFFER", *args)
    both(pair, "DEBUG", "CLIENT-EVICTION")             # maxmemory-clients is disabled
    both(pair, "DEBUG", "CLIENT-EVICTION", "x")
    both(pair, "CONFIG", "SET", "maxmemory-clients", "10mb")
    try:
        for c in pair:
            text = c.call("DEBUG", "CLIENT-EVICTION")
            assert text.count(b"\n") == 1 + 19 + 1, text    # header, 19 buckets, CRLF
            assert b"bucket          0 -      32767: " in text, text
            assert re.search(rb"clients: [1-9]", text), text
    finally:
        both(pair, "CONFIG", "SET", "maxmemory-clients", "0")
    for args in (("0",), ("1",), ()):
        both(pair, "DEBUG", "DICT-RESIZING", *args)
