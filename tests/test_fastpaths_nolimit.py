"""The "0 (or -1, or None) means no limit" audit: every option where a zero
or negative count, limit or length means "all", checked against
valkey-server 8.1.8 at sizes past a node or batch boundary (stream nodes of
1, 2, 3 and 100 entries; list-max-listpack-size -2, 1, 2, 4, 128; zsets,
sets and hashes past their listpack limits), byte for byte.

The bug class: a "stop when len(out) == count" test that fires at count 0
before anything was added (4a32dcf, Stream.range_entries).  Options covered:
XRANGE/XREVRANGE/XREAD/XREADGROUP COUNT, XPENDING count, XINFO STREAM FULL
COUNT, XAUTOCLAIM COUNT, XTRIM/XADD LIMIT, XADD MAXLEN 0; LPOP/RPOP/LMPOP
count, LPOS COUNT/MAXLEN/RANK, LRANGE, LREM count; ZRANGE/ZRANGEBYSCORE/
ZRANGEBYLEX/ZRANGESTORE LIMIT offset -1, ZPOPMIN/ZMPOP count, SORT LIMIT,
SINTERCARD/ZINTERCARD LIMIT 0, SPOP/SRANDMEMBER/ZRANDMEMBER/HRANDFIELD
count 0 and past the size (random members: lengths and errors only),
SCAN-family COUNT (order differs by design: the union of a full iteration).

Bounded: a few thousand commands; a few seconds.
"""

from __future__ import annotations

import re

import pytest

from support import RawClient

COUNTS = ["0", "1", "2", "-1", "99", "100", "101", "299", "300", "301", "100000"]


_TIMES = re.compile(rb":\d{13}\r\n")                       # ms timestamps (XINFO FULL)
_IDLE = re.compile(rb"(\*4\r\n\$\d+\r\n[\d-]+\r\n\$\d+\r\n\w+\r\n):\d+\r\n")   # XPENDING


def _diff_timeless(diff, *cmd):
    """diff(), less delivery times and idle times (the two servers' clocks)."""
    a = diff.ours.call(*cmd)
    b = diff.theirs.call(*cmd)
    norm = [_IDLE.sub(rb"\1:I\r\n", _TIMES.sub(b":T\r\n", x)) for x in (a, b)]
    assert norm[0] == norm[1], (cmd, a, b)
    return a


def _restore(diff, pairs):
    for name, value in pairs:
        diff("CONFIG", "SET", name, value)


@pytest.mark.parametrize("max_entries", ["1", "2", "3", "100"])
def test_stream_counts_past_node_boundaries(diff, max_entries):
    diff("CONFIG", "SET", "stream-node-max-entries", max_entries)
    try:
        for k in range(1, 301):
            diff("XADD", "s", "%d-%d" % (k // 7 + 1, k), "f", "v%d" % k)
        for k in range(3, 301, 4):                 # tombstones in every node
            diff("XDEL", "s", "%d-%d" % (k // 7 + 1, k))
        diff("XGROUP", "CREATE", "s", "g", "0")
        for count in COUNTS:
            for start, end in [("-", "+"), ("5-0", "+"), ("1-3", "30-200"), ("(1-1", "+")]:
                diff("XRANGE", "s", start, end, "COUNT", count)
                diff("XREVRANGE", "s", end, start, "COUNT", count)
            for after in ("0", "1-2", "10-70", "43-300"):
                diff("XREAD", "COUNT", count, "STREAMS", "s", after)
        diff("XRANGE", "s", "-", "+")
        diff("XREVRANGE", "s", "+", "-")
        # XREADGROUP: no COUNT, COUNT 0, small counts; then history
        diff("XREADGROUP", "GROUP", "g", "a", "COUNT", "7", "STREAMS", "s", ">")
        diff("XREADGROUP", "GROUP", "g", "a", "COUNT", "0", "STREAMS", "s", ">")
        diff("XGROUP", "SETID", "s", "g", "20-0")
        diff("XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
        for count in COUNTS:
            diff("XREADGROUP", "GROUP", "g", "a", "COUNT", count, "STREAMS", "s", "0")
            diff("XREADGROUP", "GROUP", "g", "b", "COUNT", count, "STREAMS", "s", "30-0")
            _diff_timeless(diff, "XPENDING", "s", "g", "-", "+", count)
            _diff_timeless(diff, "XPENDING", "s", "g", "-", "+", count, "b")
            _diff_timeless(diff, "XINFO", "STREAM", "s", "FULL", "COUNT", count)
            diff("XAUTOCLAIM", "s", "g", "c", "0", "0-0", "COUNT", count, "JUSTID")
        _diff_timeless(diff, "XINFO", "STREAM", "s", "FULL")
        diff("XPENDING", "s", "g")
        for k in range(301, 700):
            diff("XADD", "t", "%d-0" % k, "f", "v")
        for limit in ("0", "1", "99", "100", "250"):
            diff("XTRIM", "t", "MAXLEN", "~", "10", "LIMIT", limit)
            diff("XLEN", "t")
            diff("XADD", "t", "MAXLEN", "~", "5", "LIMIT", limit, "900-%s" % limit, "f", "v")
            diff("XLEN", "t")
        diff("XTRIM", "t", "MAXLEN", "=", "0")
        diff("XADD", "t", "MAXLEN", "0", "901-0", "f", "v")
        diff("XLEN", "t")
    finally:
        _restore(diff, [("stream-node-max-entries", "100")])


@pytest.mark.parametrize("size", ["-2", "1", "2", "4", "128"])
def test_list_counts_past_node_boundaries(diff, size):
    diff("CONFIG", "SET", "list-max-listpack-size", size)
    try:
        for count in COUNTS + ["-5", "x"]:
            diff("DEL", "l")
            diff("RPUSH", "l", *["e%d" % (k % 3) for k in range(300)])
            diff("LPOS", "l", "e1", "COUNT", count)
            diff("LPOS", "l", "e1", "MAXLEN", count)
            diff("LPOS", "l", "e2", "COUNT", count, "MAXLEN", "0", "RANK", "-1")
            diff("LPOS", "l", "e0", "RANK", count, "COUNT", "0")
            diff("LRANGE", "l", "0", count)
            diff("LRANGE", "l", count, "-1")
            diff("LPOP", "l", count)
            diff("RPOP", "l", count)
            diff("LMPOP", "1", "l", "LEFT", "COUNT", count)
            diff("LREM", "l", count, "e1")
            diff("LLEN", "l")
        diff("RPUSH", "l", *["e%d" % (k % 3) for k in range(300)])
        diff("LREM", "l", "0", "e0")
        diff("LRANGE", "l", "0", "-1")
    finally:
        _restore(diff, [("list-max-listpack-size", "-2")])


def test_zset_and_sort_limits(diff):
    diff("ZADD", "z", *[x for k in range(300) for x in (str(k // 2), "m%03d" % k)])
    diff("ZADD", "lex", *[x for k in range(300) for x in ("0", "m%03d" % k)])
    diff("RPUSH", "l", *[str((k * 37) % 300) for k in range(300)])
    diff("SADD", "a", *[str(k) for k in range(300)])
    diff("SADD", "b", *[str(k) for k in range(0, 600, 2)])
    diff("ZADD", "za", *[x for k in range(300) for x in ("1", str(k))])
    diff("ZADD", "zb", *[x for k in range(0, 600, 2) for x in ("1", str(k))])
    for offset in ("0", "1", "5", "299", "300", "-1"):
        for count in ("-1", "-5", "0", "1", "100", "300", "1000"):
            diff("ZRANGE", "z", "0", "+inf", "BYSCORE", "LIMIT", offset, count)
            diff("ZRANGE", "z", "+inf", "0", "BYSCORE", "REV", "LIMIT", offset, count)
            diff("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", offset, count)
            diff("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", offset, count)
            diff("ZRANGEBYLEX", "lex", "-", "+", "LIMIT", offset, count)
            diff("ZREVRANGEBYLEX", "lex", "+", "[m100", "LIMIT", offset, count)
            diff("ZRANGESTORE", "dst", "z", "(1", "100", "BYSCORE", "LIMIT", offset, count)
            diff("ZCARD", "dst")
            diff("SORT", "l", "LIMIT", offset, count)
            diff("SORT_RO", "l", "DESC", "LIMIT", offset, count)
            diff("SORT", "l", "ALPHA", "LIMIT", offset, count, "STORE", "sorted")
            diff("LRANGE", "sorted", "0", "-1")
    for limit in ("0", "1", "149", "150", "151", "1000", "-1"):
        diff("SINTERCARD", "2", "a", "b", "LIMIT", limit)
        diff("ZINTERCARD", "2", "za", "zb", "LIMIT", limit)
    for count in ("0", "1", "150", "-1"):
        diff("ZPOPMIN", "z", count)
        diff("ZPOPMAX", "z", count)
        diff("ZMPOP", "1", "z", "MIN", "COUNT", count)
    diff("ZRANGE", "z", "0", "-1", "WITHSCORES")


def _length_of(reply: bytes):
    head = reply.split(b"\r\n", 1)[0]
    return head[:1], int(head[1:]) if head[1:].lstrip(b"-").isdigit() else head


@pytest.mark.parametrize("n", [3, 200])
def test_random_members_counts(server, ref_server, n):
    """Random picks differ by design: the reply kind and length must not."""
    clients = [RawClient(server.host, server.port), RawClient(ref_server.host, ref_server.port)]
    try:
        for c in clients:
            c.call("FLUSHALL")
            c.call("SADD", "s", *[str(k) for k in range(n)])
            c.call("ZADD", "z", *[x for k in range(n) for x in (str(k), "m%d" % k)])
            c.call("HSET", "h", *[x for k in range(n) for x in ("f%d" % k, "v")])
        for count in ("0", "1", "-1", str(n - 1), str(n), str(n + 1), str(-n - 5), "x"):
            for cmd in (("SRANDMEMBER", "s", count), ("ZRANDMEMBER", "z", count),
                        ("ZRANDMEMBER", "z", count, "WITHSCORES"),
                        ("HRANDFIELD", "h", count), ("HRANDFIELD", "h", count, "WITHVALUES"),
                        ("SPOP", "s", count), ("SCARD", "s")):
                a, b = [_length_of(c.call(*cmd)) for c in clients]
                assert a == b, (cmd, a, b)
    finally:
        for c in clients:
            c.close()


def _scan_all(client, *cmd):
    """Every element a full SCAN-family iteration returns (bounded)."""
    seen = []
    cursor = "0"
    for _ in range(10000):
        reply = client.execute_command(*cmd[:2], cursor, *cmd[2:]) if cmd[0] != "SCAN" else \
            client.execute_command("SCAN", cursor, *cmd[1:])
        cursor, items = reply
        seen += items
        if cursor in (0, b"0"):
            return sorted(seen)
    raise AssertionError("SCAN did not finish in 10000 calls")


def test_scan_counts(server, ref_server):
    import valkey
    out = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        c = valkey.Valkey(host=host, port=port)
        try:
            c.flushall()
            c.mset({"k%d" % k: "v" for k in range(300)})
            c.sadd("set", *range(300))
            c.hset("hash", mapping={"f%d" % k: "v" for k in range(300)})
            c.zadd("zs", {"m%d" % k: k for k in range(300)})
            got = []
            for count in ("1", "10", "100", "1000"):
                got.append(_scan_all(c, "SCAN", "COUNT", count))
                got.append(_scan_all(c, "SSCAN", "set", "COUNT", count))
                got.append(_scan_all(c, "HSCAN", "hash", "COUNT", count))
                got.append(_scan_all(c, "ZSCAN", "zs", "COUNT", count))
            for bad in ("0", "-1", "x"):
                for cmd in (("SCAN", "0", "COUNT", bad), ("SSCAN", "set", "0", "COUNT", bad)):
                    try:
                        got.append(c.execute_command(*cmd))
                    except valkey.ResponseError as e:
                        got.append(str(e))
            out.append(got)
        finally:
            c.close()
    assert out[0] == out[1]
    assert len(out[0][0]) == 303 and len(out[0][1]) == 300      # keys, set members
