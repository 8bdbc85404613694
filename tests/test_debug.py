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
    assert both(pair, "DEBUG", "STRINGMATCH-TEST").startswith(b"+Apparently")
    both(pair, "DEBUG", "SET-ACTIVE-EXPIRE")
    both(pair, "DEBUG", "JMAP")           # not a DEBUG subcommand in Valkey 8.1
