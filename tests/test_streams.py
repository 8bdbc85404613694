"""Streams without consumer groups (hotkv/types/stream.py, hotkv/commands/streams.py):
XADD, XLEN, XRANGE, XREVRANGE, XREAD (blocking too), XDEL, XTRIM, XSETID,
XINFO STREAM, TYPE -- byte for byte against the reference Valkey where IDs
are explicit, through valkey-py and redis-py RESP3, and the AOF forms.
Consumer groups are in test_stream_groups.py."""

from __future__ import annotations

import os
import random
import re
import time

import pytest
import valkey

from support import aof_bytes, scenario_tests

# Each scenario runs in order on hotkv and on Valkey; replies must be equal bytes.
SCENARIOS = {
    "xadd_ids": [
        ("XADD", "s", "1-1", "a", "1"), ("XADD", "s", "1-*", "a", "2", "b", "3"),
        ("XADD", "s", "1-1", "a", "1"), ("XADD", "s", "1-2", "a", "1"),
        ("XADD", "s", "0-0", "a", "1"), ("XADD", "s", "0-*", "a", "1"),
        ("XADD", "t", "0-*", "a", "1"), ("XADD", "t", "0-0", "a", "1"),
        ("XADD", "u", "5", "a", "1"), ("XADD", "u", "5-*", "a", "1"),
        ("XADD", "u", "4-*", "a", "1"),
        ("XADD", "v", "1-18446744073709551615", "a", "b"), ("XADD", "v", "1-*", "c", "d"),
        ("XADD", "v", "2-*", "c", "d"),
        ("XADD", "w", "18446744073709551615-18446744073709551615", "a", "b"),
        ("XADD", "w", "*", "c", "d"), ("XADD", "w", "18446744073709551615-*", "c", "d"),
        ("XADD", "x", "18446744073709551616-0", "a", "b"),
        ("XADD", "x", "1-18446744073709551616", "a", "b"),
        ("XADD", "x", "-1", "a", "b"), ("XADD", "x", "+", "a", "b"), ("XADD", "x", "-", "a", "b"),
        ("XADD", "x", "1-a", "a", "b"), ("XADD", "x", "a-1", "a", "b"),
        ("XADD", "x", "1-1-1", "a", "b"),
        ("XADD", "x", "+5", "a", "b"), ("XADD", "x", " 6", "a", "b"),
        ("XADD", "x", "007-01", "a", "b"),
        ("XADD", "x", "", "a", "b"), ("XADD", "x", "1" * 130, "a", "b"),
        ("XRANGE", "x", "-", "+"), ("EXISTS", "x"),
        ("XADD", "y", "1-0", "f", "v"), ("XADD", "y", "2-0", "f", "v", "g"),
        ("XADD", "y", "3-0"), ("XADD", "y", "3-0", "f"), ("XLEN", "y"),
        ("XADD", "bin", "1-0", b"\x00\xff", b"\r\n", b"", b""), ("XRANGE", "bin", "-", "+"),
    ],
    "xadd_options": [
        ("XADD", "s", "NOMKSTREAM", "1-0", "a", "1"), ("EXISTS", "s"),
        ("XADD", "s", "1-0", "a", "1"), ("XADD", "s", "nomkstream", "2-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "1", "3-0", "a", "1"), ("XRANGE", "s", "-", "+"),
        ("XADD", "s", "MAXLEN", "=", "1", "4-0", "a", "1"),
        ("XADD", "s", "maxlen", "~", "1", "5-0", "a", "1"),
        ("XLEN", "s"), ("XADD", "s", "MINID", "5-0", "6-0", "a", "1"), ("XRANGE", "s", "-", "+"),
        ("XADD", "s", "MINID", "=", "7", "7-0", "a", "1"),
        ("XADD", "s", "MINID", "~", "7", "8-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "-1", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "x", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "1", "MINID", "1", "9-0", "a", "1"),
        ("XADD", "s", "MINID", "1", "MAXLEN", "1", "9-0", "a", "1"),
        ("XADD", "s", "MINID", "-", "9-0", "a", "1"), ("XADD", "s", "MINID", "+", "9-0", "a", "1"),
        ("XADD", "s", "LIMIT", "10", "9-0", "a", "1"), ("XADD", "s", "LIMIT", "0", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "1", "LIMIT", "10", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "~", "1", "LIMIT", "-1", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "~", "1", "LIMIT", "x", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "~", "0", "LIMIT", "1", "9-0", "a", "1"),
        ("XADD", "s", "MAXLEN", "0", "10-0", "a", "1"), ("XLEN", "s"), ("EXISTS", "s"),
        ("XINFO", "STREAM", "s"), ("XADD", "s", "MAXLEN"), ("XADD", "s", "MAXLEN", "1"),
        ("XADD", "s", "MAXLEN", "~"), ("XADD", "s", "MAXLEN", "~", "1", "*"),
        ("XADD", "s", "FOO", "a", "b"),
    ],
    "xrange": [
        *[("XADD", "s", f"{i}-{j}", "f", f"v{i}{j}") for i in (1, 2, 3) for j in (0, 1, 2)],
        ("XADD", "s", "3-18446744073709551615", "f", "max"),
        ("XRANGE", "s", "-", "+"), ("XRANGE", "s", "2", "2"),
        ("XRANGE", "s", "2-1", "+", "COUNT", "2"),
        ("XRANGE", "s", "(2-1", "(3-1"), ("XRANGE", "s", "(2", "+"), ("XRANGE", "s", "-", "(2"),
        ("XRANGE", "s", "(-", "+"), ("XRANGE", "s", "-", "(+"), ("XRANGE", "s", "(", "+"),
        ("XRANGE", "s", "(18446744073709551615-18446744073709551615", "+"),
        ("XRANGE", "s", "-", "(0-0"), ("XRANGE", "s", "3", "1"),
        ("XRANGE", "s", "-", "+", "COUNT", "0"),
        ("XRANGE", "s", "-", "+", "COUNT", "-5"), ("XRANGE", "s", "-", "+", "COUNT", "x"),
        ("XRANGE", "s", "-", "+", "COUNT"), ("XRANGE", "s", "-", "+", "LIMIT", "1"),
        ("XRANGE", "s", "-", "+", "COUNT", "1", "COUNT", "3"), ("XRANGE", "s", "x", "+"),
        ("XRANGE", "nokey", "-", "+"), ("XRANGE", "nokey", "-", "+", "COUNT", "0"),
        ("XREVRANGE", "s", "+", "-"), ("XREVRANGE", "s", "3", "2", "COUNT", "2"),
        ("XREVRANGE", "s", "(3-2", "(1"), ("XREVRANGE", "s", "-", "+"),
        ("XREVRANGE", "s", "+", "-", "COUNT", "0"),
        ("XREVRANGE", "nokey", "+", "-"), ("XDEL", "s", "2-1", "3-0"), ("XRANGE", "s", "-", "+"),
        ("XREVRANGE", "s", "+", "-"), ("XRANGE", "s", "2-1", "2-1"),
        ("SET", "str", "v"), ("XRANGE", "str", "-", "+"), ("XRANGE", "str", "x", "+"),
        ("XREVRANGE", "str", "+", "-"),
    ],
    "xdel_xtrim_xsetid": [
        *[("XADD", "s", f"{i}-0", "f", "v") for i in range(1, 11)],
        ("XDEL", "s", "1-0", "5-0", "99-0", "5-0"), ("XDEL", "s", "bad"),
        ("XDEL", "s", "2-0", "bad"),
        ("XDEL", "nokey", "1-0"), ("XLEN", "s"), ("XINFO", "STREAM", "s"),
        ("XTRIM", "s", "MAXLEN", "6"), ("XTRIM", "s", "MINID", "=", "7"), ("XRANGE", "s", "-", "+"),
        ("XTRIM", "s"), ("XTRIM", "s", "MAXLEN"), ("XTRIM", "s", "FOO", "1"),
        ("XTRIM", "s", "MAXLEN", "1", "FOO"),
        ("XTRIM", "s", "MAXLEN", "1", "LIMIT", "5"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "5"),
        ("XTRIM", "s", "MINID", "~", "99"), ("XTRIM", "nokey", "MAXLEN", "0"),
        ("XTRIM", "nokey", "FOO", "0"),
        ("XTRIM", "s", "MAXLEN", "0"), ("XLEN", "s"), ("EXISTS", "s"), ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "5-0"), ("XSETID", "s", "20-0"), ("XSETID", "s", "+"), ("XSETID", "s", "x"),
        ("XSETID", "nokey", "1-0"), ("XSETID", "s", "21-0", "ENTRIESADDED"),
        ("XSETID", "s", "21-0", "ENTRIESADDED", "-1"),
        ("XSETID", "s", "21-0", "MAXDELETEDID", "22-0"),
        ("XSETID", "s", "21-0", "ENTRIESADDED", "50", "MAXDELETEDID", "15-0"),
        ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "14-0"), ("XADD", "s", "21-0", "f", "v"), ("XADD", "s", "21-*", "f", "v"),
        ("XSETID", "s", "21-1", "ENTRIESADDED", "0"), ("XSETID", "s", "0", "FOO", "1"),
        ("SET", "str", "v"), ("XDEL", "str", "1"), ("XTRIM", "str", "MAXLEN", "1"),
        ("XSETID", "str", "1"),
        ("XLEN", "str"), ("TYPE", "s"),
    ],
    "xread": [
        ("XADD", "s", "1-0", "a", "1"), ("XADD", "s", "2-0", "b", "2"),
        ("XADD", "t", "5-0", "c", "3"),
        ("XREAD", "STREAMS", "s", "0"), ("XREAD", "COUNT", "1", "STREAMS", "s", "t", "0", "0"),
        ("XREAD", "STREAMS", "s", "t", "nokey", "1", "4", "0"), ("XREAD", "STREAMS", "s", "$"),
        ("XREAD", "STREAMS", "s", "+"), ("XREAD", "STREAMS", "s", "t", "nokey", "+", "+", "+"),
        ("XREAD", "COUNT", "5", "STREAMS", "s", "+"), ("XREAD", "STREAMS", "s", "s", "0", "1"),
        ("XREAD", "STREAMS", "s", "2"), ("XREAD", "STREAMS", "s", "(1"),
        ("XREAD", "STREAMS", "s", "-"),
        ("XREAD", "STREAMS", "s", ">"), ("XREAD", "STREAMS", "s"),
        ("XREAD", "STREAMS", "s", "t", "0"),
        ("XREAD", "COUNT", "x", "STREAMS", "s", "0"), ("XREAD", "COUNT", "-1", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "-1", "STREAMS", "s", "0"), ("XREAD", "BLOCK", "x", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "1.5", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "0", "STREAMS", "s", "0"),
        ("XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"), ("XREAD", "NOACK", "STREAMS", "s", "0"),
        ("XREAD", "FOO", "STREAMS", "s", "0"), ("XREAD", "COUNT", "1", "s", "0"),
        ("XDEL", "s", "2-0"), ("XREAD", "STREAMS", "s", "+"), ("XREAD", "STREAMS", "s", "1"),
        ("MULTI",), ("XREAD", "BLOCK", "0", "STREAMS", "s", "$"), ("EXEC",),
        ("SET", "str", "v"), ("XREAD", "STREAMS", "s", "str", "0", "0"),
        ("XREAD", "STREAMS", "str", "x"),
    ],
    "xinfo_stream": [
        ("XINFO", "STREAM", "nokey"), ("XADD", "s", "1-0", "a", "1", "b", "2"),
        *[("XADD", "s", f"{i}-0", "f", f"v{i}") for i in range(2, 15)],
        ("XINFO", "STREAM", "s"), ("XINFO", "STREAM", "s", "FULL"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "2"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "0"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "-3"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "x"), ("XINFO", "STREAM", "s", "FULL", "COUNT"),
        ("XINFO", "STREAM", "s", "PARTIAL"), ("XINFO", "STREAM", "s", "FULL", "LIMIT", "2"),
        ("XDEL", "s", "1-0", "14-0"), ("XINFO", "STREAM", "s", "FULL", "COUNT", "1"),
        ("XTRIM", "s", "MAXLEN", "0"), ("XINFO", "STREAM", "s", "FULL"),
        ("XINFO", "HELP"), ("XINFO", "help", "x"), ("XINFO", "FOO", "s"), ("XINFO",),
        ("XINFO", "STREAM"), ("SET", "str", "v"), ("XINFO", "STREAM", "str"),
    ],
}


test_matches_valkey_resp2, test_matches_valkey_resp3 = scenario_tests(SCENARIOS)


def test_arity_errors(diff):
    for cmd in [("XADD", "s"), ("XADD", "s", "*"), ("XADD", "s", "*", "f"), ("XLEN",),
                ("XLEN", "a", "b"),
                ("XRANGE", "s", "-"), ("XREVRANGE", "s"), ("XDEL", "s"), ("XTRIM", "s", "MAXLEN"),
                ("XSETID", "s"), ("XREAD", "STREAMS", "s"), ("XINFO", "STREAM"),
                ("XGROUP", "HELP", "x")]:
        diff(*cmd)


# ----------------------------------------------------------------------
# Node granularity: MAXLEN ~ / MINID ~ / LIMIT leave what Valkey leaves
# ----------------------------------------------------------------------

def _value(rnd):
    k = rnd.random()
    if k < 0.3:
        return str(rnd.randint(-10 ** 12, 10 ** 12))
    if k < 0.5:
        return "x" * rnd.choice([1, 62, 63, 64, 65, 1000, 4094, 4095, 4096, 5000])
    if k < 0.6:
        return rnd.choice(["0", "-0", "01", "9223372036854775807", "9223372036854775808", "127",
                           "128"])
    return "v%d" % rnd.randint(0, 10 ** 6)


@pytest.mark.parametrize("entries,nbytes",
                         [("100", "4096"), ("7", "4096"), ("0", "300"), ("1", "0")])
def test_approximate_trimming_matches_valkey_node_layout(diff, entries, nbytes):
    rnd = random.Random(int(entries) * 31 + int(nbytes))
    try:
        diff("CONFIG", "SET", "stream-node-max-entries", entries)
        diff("CONFIG", "SET", "stream-node-max-bytes", nbytes)
        ms = 1
        for j in range(600):
            fields = []
            for _ in range(rnd.choice([1, 1, 2, 3])):
                fields += [rnd.choice(["a", "item", "12", "x" * 70]), _value(rnd)]
            ms += rnd.choice([0, 1, 1000, 2 ** 33])
            op = rnd.random()
            if op < 0.1:
                diff("XADD", "s", "MAXLEN", "~", str(rnd.randint(0, 200)), f"{ms}-*", *fields)
            elif op < 0.15:
                diff("XDEL", "s", f"{ms - 1000}-0", f"{ms}-0")
                diff("XADD", "s", f"{ms}-*", *fields)
            elif op < 0.2:
                diff("XTRIM", "s", "MINID", "~", str(ms - rnd.randint(0, 5000)))
                diff("XADD", "s", f"{ms}-*", *fields)
            elif op < 0.22:
                diff("XTRIM", "s", "MAXLEN", "~", str(rnd.randint(0, 300)), "LIMIT",
                     str(rnd.randint(0, 50)))
            else:
                diff("XADD", "s", f"{ms}-*", *fields)
            if j % 100 == 0:
                diff("XINFO", "STREAM", "s")     # radix-tree-keys / -nodes included
        diff("XLEN", "s")
        diff("XRANGE", "s", "-", "+")
    finally:
        diff("CONFIG", "SET", "stream-node-max-entries", "100")
        diff("CONFIG", "SET", "stream-node-max-bytes", "4096")


def test_approximate_maxlen_never_leaves_fewer(r):
    for i in range(1000):
        r.xadd("s", {"f": i}, maxlen=555, approximate=True)
        assert r.xlen("s") >= min(i + 1, 555)
    assert r.xlen("s") == 600       # whole 100-entry nodes, as Valkey


# ----------------------------------------------------------------------
# IDs
# ----------------------------------------------------------------------

def test_auto_ids_increase_and_never_go_backwards(r):
    ids = [r.xadd("s", {"i": i}) for i in range(200)]
    parsed = [tuple(map(int, i.split(b"-"))) for i in ids]
    assert parsed == sorted(parsed) and len(set(parsed)) == 200
    now_ms = int(time.time() * 1000)
    assert abs(parsed[-1][0] - now_ms) < 60_000
    future = now_ms + 10 ** 9
    r.xadd("s", {"f": "v"}, id=f"{future}-5")
    assert r.xadd("s", {"f": "v"}) == f"{future}-6".encode()
    r.xadd("m", {"f": "v"}, id=f"{future}-18446744073709551615")
    assert r.xadd("m", {"f": "v"}) == f"{future + 1}-0".encode()
    with pytest.raises(valkey.ResponseError, match="equal or smaller"):
        r.xadd("s", {"f": "v"}, id="1-0")


def test_multi_gives_distinct_increasing_ids(r):
    p = r.pipeline(transaction=True)
    for i in range(5):
        p.xadd("s", {"i": i})
    ids = p.execute()
    assert len(set(ids)) == 5 and ids == sorted(ids, key=lambda i: tuple(map(int, i.split(b"-"))))


# ----------------------------------------------------------------------
# Clients
# ----------------------------------------------------------------------

def test_valkey_py_reads(r):
    assert r.xadd("s", {"a": "1", "b": "2"}, id="1-0") == b"1-0"
    r.xadd("s", {"a": "3"}, id="2-0")
    assert r.xrange("s") == [(b"1-0", {b"a": b"1", b"b": b"2"}), (b"2-0", {b"a": b"3"})]
    assert r.xrevrange("s", count=1) == [(b"2-0", {b"a": b"3"})]
    assert r.xread({"s": "1-0"}) == [[b"s", [(b"2-0", {b"a": b"3"})]]]
    assert r.xread({"s": "$"}) == []
    assert r.xlen("s") == 2 and r.type("s") == b"stream"
    assert r.xtrim("s", maxlen=1, approximate=True) == 0    # one node: ~ keeps it
    assert r.xtrim("s", maxlen=1, approximate=False) == 1
    assert r.xdel("s", "2-0") == 1 and r.xlen("s") == 0
    info = r.xinfo_stream("s")
    assert info["length"] == 0 and info["entries-added"] == 2
    assert info["last-generated-id"] == b"2-0" and info["max-deleted-entry-id"] == b"2-0"


def test_redis_py_resp3_reads(r3):
    r3.xadd("s", {"a": "1"}, id="1-0")
    r3.xadd("t", {"b": "2"}, id="2-0")
    assert r3.xread({"s": 0, "t": 0}) == {b"s": [[(b"1-0", {b"a": b"1"})]],
                                         b"t": [[(b"2-0", {b"b": b"2"})]]}
    assert r3.xrange("s") == [(b"1-0", {b"a": b"1"})]
    info = r3.xinfo_stream("s", full=True)
    assert info["length"] == 1 and info["groups"] == []
    assert r3.xread({"nokey": 0}) in (None, {})    # a RESP3 null; redis-py maps it to {}


def test_resp3_repeated_stream_keeps_both_map_entries(raw):
    raw.call("HELLO", "3")
    raw.call("XADD", "s", "1-0", "f", "v")
    reply = raw.call("XREAD", "STREAMS", "s", "s", "0", "0")
    assert reply.startswith(b"%2\r\n") and reply.count(b"$1\r\ns\r\n") == 2


# ----------------------------------------------------------------------
# Blocking XREAD (run against hotkv and the reference Valkey alike)
# ----------------------------------------------------------------------

def test_xadd_wakes_blocked_xread(target):
    a, w = target.admin, target.client()
    a.call("XADD", "s2", "1-0", "old", "x")
    w.send("XREAD", "BLOCK", "0", "STREAMS", "s1", "s2", "s3", "$", "$", "$")
    target.wait_blocked(a, 1)
    assert w.read_available(0.05) == b""
    a.call("XADD", "s2", "2-0", "new", "y")
    assert w.read_reply() == (b"*1\r\n*2\r\n$2\r\ns2\r\n*1\r\n*2\r\n$3\r\n2-0\r\n"
                              b"*2\r\n$3\r\nnew\r\n$1\r\ny\r\n")
    target.wait_blocked(a, 0)


def test_dollar_means_last_id_when_blocked(target):
    """$ is resolved when the client blocks: every entry added by a
    transaction is delivered, and writes that add nothing keep it blocked."""
    a, w = target.admin, target.client()
    a.call("XADD", "s", "1-0", "f", "old")
    w.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    target.wait_blocked(a, 1)
    a.call("XGROUP", "CREATE", "s", "g", "$")     # a write to the key, no entry
    a.call("XTRIM", "s", "MAXLEN", "5")
    assert w.read_available(0.05) == b""
    a.call("MULTI")
    a.call("XADD", "s", "2-0", "f", "one")
    a.call("XADD", "s", "3-0", "f", "two")
    a.call("EXEC")
    reply = w.read_reply()
    assert b"2-0" in reply and b"3-0" in reply and b"old" not in reply


def test_xread_plus_blocks_then_gets_first_entry(target):
    a, w = target.admin, target.client()
    w.send("XREAD", "BLOCK", "0", "STREAMS", "s", "+")
    target.wait_blocked(a, 1)
    a.call("XADD", "s", "1-0", "k", "v")
    assert w.read_reply() == (b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n"
                              b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n")


def test_xadd_then_del_in_multi_does_not_wake(target):
    a, w = target.admin, target.client()
    w.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    target.wait_blocked(a, 1)
    a.call("MULTI")
    a.call("XADD", "s", "1-0", "f", "old")
    a.call("DEL", "s")
    a.call("LPUSH", "s", "x")
    a.call("EXEC")
    assert w.read_available(0.05) == b""
    a.call("DEL", "s")
    a.call("XADD", "s", "2-0", "f", "new")
    assert b"new" in w.read_reply()


def test_xread_timeout_and_multi(target):
    a, w = target.admin, target.client()
    assert w.call("XREAD", "BLOCK", "20", "STREAMS", "s", "$") == b"*-1\r\n"
    w.call("HELLO", "3")
    assert w.call("XREAD", "BLOCK", "20", "STREAMS", "s", "$") == b"_\r\n"
    a.call("MULTI")
    a.call("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    assert a.call("EXEC") == b"*1\r\n*-1\r\n"


def test_blocked_readers_all_get_the_entry(target):
    a = target.admin
    readers = [target.client() for _ in range(3)]
    for w in readers:
        w.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    target.wait_blocked(a, 3)
    a.call("XADD", "s", "7-0", "f", "v")
    for w in readers:
        assert b"7-0" in w.read_reply()


# ----------------------------------------------------------------------
# Propagation and the AOF
# ----------------------------------------------------------------------

def _aof_text(server) -> bytes:
    return aof_bytes(server.server.config.values["dir"])


def test_aof_logs_assigned_ids_and_exact_trims(hotkv_server_factory, tmp_path):
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always")
    r = valkey.Valkey(host=srv.host, port=srv.port)
    try:
        r.config_set("stream-node-max-entries", "10")
        ids = [r.xadd("s", {"f": i}) for i in range(35)]
        r.xadd("s", {"f": "last"}, id=b"99999999999999-*", maxlen=12, approximate=True)
        r.xtrim("s", minid=ids[25], approximate=True)
        text = _aof_text(srv)
        assert b"$1\r\n*\r\n" not in text and b"$1\r\n~\r\n" not in text
        assert ids[0] in text and b"99999999999999-0" in text
        assert b"MAXLEN\r\n$1\r\n=\r\n$2\r\n16\r\n" in text   # 36 entries: two whole nodes of 10 go
        before = (r.xlen("s"), r.xrange("s"))
    finally:
        r.close()
    srv.stop()
    srv2 = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    r2 = valkey.Valkey(host=srv2.host, port=srv2.port)
    try:
        assert (r2.xlen("s"), r2.xrange("s")) == before
    finally:
        r2.close()


def test_copy_is_independent(r):
    r.xadd("s", {"f": "1"}, id="1-0")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    assert r.copy("s", "t") == 1
    r.xadd("t", {"f": "2"}, id="2-0")
    r.xack("t", "g", "1-0")
    assert r.xlen("s") == 1 and r.xlen("t") == 2
    assert r.xpending("s", "g")["pending"] == 1 and r.xpending("t", "g")["pending"] == 0


# ----------------------------------------------------------------------
# Memory
# ----------------------------------------------------------------------

def test_entries_cost_little_more_than_their_payload():
    """100k entries of one 100-byte field: the entry is its value object
    itself (the field name lives once per node), IDs take 16 bytes, so what
    the structure adds stays under a quarter of the payload's bytes."""
    import sys

    from hotkv.types.stream import Stream
    payloads = [os.urandom(50).hex().encode() for _ in range(100_000)]
    payload_bytes = sum(sys.getsizeof(p) for p in payloads)
    s = Stream()
    for i, p in enumerate(payloads):
        s.append((i + 1) << 64, [b"XADD", b"k", b"*", bytes(bytearray(b"data")), p], 3, 4096, 100)
    overhead = 0
    stored = []
    for node in s.nodes:
        overhead += sys.getsizeof(node) + node.ids.nbytes() + sys.getsizeof(node.items)
        overhead += sum(sys.getsizeof(t) for t in node.items if type(t) is not bytes)
        stored += node.items
    assert s.length == 100_000
    assert all(a is b for a, b in zip(stored, payloads))
    assert overhead < payload_bytes / 4, (overhead, payload_bytes)
    assert s.range(5 << 64, 5 << 64) == [(5 << 64, (b"data", payloads[4]))]


# ----------------------------------------------------------------------
# RDB payloads (hotkv.types.stream_persist.rdb_save / rdb_load), checked against Valkey
# ----------------------------------------------------------------------

def _crc64(data: bytes) -> int:
    """Redis's CRC-64/Jones (reflected), which frames DUMP payloads."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


RDB_OPS = [
    ("XADD", "s", "1-0", "a", "1", "b", "2"), ("XADD", "s", "2-0", "a", "3", "b", "4"),
    ("XADD", "s", "3-0", "c", "x" * 100), ("XADD", "s", "4-5", "a", "-7", "b", "99999999999"),
    ("XDEL", "s", "2-0"), ("XGROUP", "CREATE", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "bob"),
    *[("XADD", "s", f"{10 + i}-{i % 3}", "a", str(i), "b", "y" * (i % 70)) for i in range(250)],
    ("XTRIM", "s", "MAXLEN", "200"), ("XGROUP", "CREATE", "s", "h", "$", "ENTRIESREAD", "5"),
    ("XREADGROUP", "GROUP", "g", "carol", "NOACK", "COUNT", "3", "STREAMS", "s", ">"),
    ("XGROUP", "CREATE", "s", "i", "0", "ENTRIESREAD", "-1"),
]


def _layout(s):
    from hotkv.types.stream_ids import MAX_ID
    return dict(
        keys=s.node_keys, nodes=[(n.live, n.deleted, n.nbytes, n.ids) for n in s.nodes],
        meta=(s.length, s.last_id, s.first_id, s.max_deleted_id, s.entries_added),
        entries=s.range(0, MAX_ID),
        groups=[(g.name, g.last_id, g.entries_read,
                 [(i, n.consumer.name, n.delivery_count) for i, n in g.pel.items()],
                 [(c.name, list(c.pel)) for c in g.sorted_consumers()]) for g in s.sorted_groups()])


def test_rdb_load_reads_valkey_dump_exactly(diff, server):
    """A payload DUMPed by Valkey loads into the same nodes (byte sizes
    included), entries, counters, groups and PELs that hotkv built."""
    from hotkv.types.stream_persist import rdb_load
    for cmd in RDB_OPS:
        diff(*cmd)
    ref = valkey.Valkey(host=diff.theirs.sock.getpeername()[0],
                        port=diff.theirs.sock.getpeername()[1])
    dump = ref.dump("s")
    ref.close()
    payload = dump[:-10]
    loaded, end = rdb_load(payload[0], payload, 1)
    assert end == len(payload)
    mine = server.server.dbs[0].data[b"s"]
    assert _layout(loaded) == _layout(mine)


def test_rdb_save_restores_in_valkey(diff, server):
    """hotkv's payload, framed as DUMP frames it, RESTOREs in Valkey into
    the stream Valkey itself holds (clock fields aside)."""
    from hotkv.types.stream_persist import rdb_save
    for cmd in RDB_OPS:
        diff(*cmd)
    host, port = diff.theirs.sock.getpeername()[:2]
    ref = valkey.Valkey(host=host, port=port)
    version = ref.dump("s")[-10:-8]
    rdb_type, body = rdb_save(server.server.dbs[0].data[b"s"])
    framed = bytes([rdb_type]) + body + version
    framed += _crc64(framed).to_bytes(8, "little")
    assert ref.restore("copy", 0, framed) == b"OK"
    clock = re.compile(rb":1\d{12}\r\n")
    a = diff.theirs.call("XINFO", "STREAM", "s", "FULL", "COUNT", "0")
    b = diff.theirs.call("XINFO", "STREAM", "copy", "FULL", "COUNT", "0")
    assert clock.sub(b":T\r\n", a) == clock.sub(b":T\r\n", b)
    assert diff.theirs.call("XRANGE", "s", "-", "+") == diff.theirs.call("XRANGE", "copy", "-", "+")
    ref.close()


def _tcl_payloads():
    import glob
    paths = glob.glob("/work/shared/conformance/tcl/tests/unit/type/stream-cgroups.tcl")
    paths += glob.glob(
        os.path.join(os.path.dirname(__file__), "..", "..", "shared", "conformance", "tcl", "tests",
                     "unit", "type", "stream-cgroups.tcl"))
    if not paths:
        pytest.skip("the conformance bundle (shared/conformance) is not present")
    text = open(paths[0]).read()
    out = []
    for m in re.finditer(r'r RESTORE x 0 "((?:\\x[0-9A-Fa-f]{2})+)"', text):
        out.append(bytes(int(h, 16) for h in re.findall(r"\\x([0-9A-Fa-f]{2})", m.group(1))))
    assert len(out) == 2
    return out


def test_rdb_load_reads_legacy_redis_payloads():
    """Payloads DUMPed by Redis 5 (type 15) and Redis 7.0 (type 19), as
    Valkey's own suite restores them: read counters and times migrate."""
    from hotkv.types.stream_persist import rdb_load
    v5, v7 = _tcl_payloads()
    s, _ = rdb_load(v5[0], v5, 1)
    assert (s.max_deleted_id, s.entries_added, s.length) == (0, 2, 2)
    g1, g2 = s.sorted_groups()
    assert (g1.entries_read, s.group_lag(g1)) == (1, 1)
    assert (g2.entries_read, s.group_lag(g2)) == (0, 2)
    assert [(i >> 64, n.consumer.name) for i, n in g1.pel.items()] == [
        (1, b"c11"), (2, b"c11"), (4, b"c11"), (5, b"c11")]
    s, _ = rdb_load(v7[0], v7, 1)
    (g,) = s.sorted_groups()
    (c,) = g.sorted_consumers()
    assert c.name == b"Alice" and c.seen_time == c.active_time > 0


def test_rdb_load_rejects_garbage():
    from hotkv.types.codec import RDBError
    from hotkv.types.stream import Stream
    from hotkv.types.stream_persist import rdb_load, rdb_save
    s = Stream()
    s.append(1 << 64, [b"f", b"v"], 0, 4096, 100)
    rdb_type, body = rdb_save(s)
    assert rdb_load(rdb_type, body)[0].range(0, (1 << 128) - 1) == [(1 << 64, (b"f", b"v"))]
    for bad in (body[:-1], body[:5], b"\x01\x10" + b"\x00" * 16 + b"\x03abc", b"\xff" * 40):
        with pytest.raises(RDBError):
            rdb_load(rdb_type, bad)
    with pytest.raises(RDBError):
        rdb_load(3, body)
