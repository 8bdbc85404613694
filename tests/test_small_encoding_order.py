"""Small hashes and sorted sets list their contents in Valkey's order (issue 32.5).

valkey-server keeps a small hash in a listpack: fields in insertion order,
an update staying in place, a deleted field's place closed up and a re-added
field going to the end.  Past hash-max-listpack-entries / -value the hash
becomes a hashtable and never converts back (its order is then Valkey's hash
order: compared as a set).  A small sorted set is a listpack in score order,
ties by member bytes, and also never converts back from a skiplist.

The differential runs thousands of random HSET / HMSET / HSETNX / HDEL /
HINCRBY / HINCRBYFLOAT and ZADD (with its flags) / ZINCRBY / ZREM / ZPOP* /
ZREMRANGEBYRANK / Z*STORE commands on a few dozen keys with fields, members,
values and scores of several kinds (short, long past the -value limit,
integers, floats, tied scores), under the default limits and small ones set
with CONFIG SET, on hotkv and valkey-server with the same seed.  After each
command, for the keys it touched: OBJECT ENCODING, HGETALL, HKEYS, HVALS,
HSCAN, HRANDFIELD with a count past the size, ZRANGE WITHSCORES, ZSCAN and
ZRANDMEMBER with a count past the size must be identical where Valkey's order
is determined (a set's comparison otherwise).  Random replies (HRANDFIELD /
ZRANDMEMBER / SRANDMEMBER with a count below the size or negative) are
compared by shape, and a listpack's unique sample must come in its order.
"""

from __future__ import annotations

import collections
import os
import random

import pytest

from support import RawClient

LIMITS = ["hash-max-listpack-entries", "hash-max-listpack-value",
          "zset-max-listpack-entries", "zset-max-listpack-value"]
CONFIGS = [(128, 64, 128, 64), (4, 6, 5, 5), (10, 3, 3, 8), (2, 20, 20, 3), (6, 64, 6, 64)]
HKEYS = ["h:%d" % i for i in range(10)]
ZKEYS = ["z:%d" % i for i in range(10)]
READS = {"OBJECT", "HGETALL", "HKEYS", "HVALS", "HSCAN", "HRANDFIELD", "ZRANGE", "ZSCAN",
         "ZRANDMEMBER", "EVAL", "SORT"}
HASHTABLE = (b"$9\r\nhashtable\r\n", b"$8\r\nskiplist\r\n")


def _array(reply: bytes) -> list:
    """A flat RESP2 array of bulk strings -> list of bytes."""
    assert reply[:1] == b"*", reply[:80]
    parts = reply.split(b"\r\n")
    n = int(parts[0][1:])
    out = []
    i = 1
    for _ in range(n):
        assert parts[i][:1] == b"$", reply[:80]
        out.append(parts[i + 1])
        i += 2
    return out


def _pairs(flat: list) -> list:
    return sorted(zip(flat[::2], flat[1::2]))


def _word(rng, kind: str) -> str:
    if kind == "int":
        return str(rng.randint(-5, 30))
    if kind == "short":
        return rng.choice("abcdefgh") + rng.choice(["", "x", "yz", "1"])
    if kind == "float":
        return rng.choice(["1.5", "-0", "0", "3.0", "1e3", "007", "-2.25"])
    return rng.choice("pq") * rng.randint(2, 70)    # crosses the -value limits


def _kinds(rng):
    return rng.choice([["short"], ["int"], ["short", "int"], ["short", "long"],
                       ["short", "int", "float", "long"]])


def _score(rng) -> str:
    return rng.choice([str(rng.randint(-3, 3)), str(rng.randint(-3, 3)), "1.5", "-0", "0",
                       "inf", "-inf", "+inf", "2.5e1", str(rng.random() * 10)])


class _Pair:
    def __init__(self, ours: RawClient, theirs: RawClient):
        self.ours = ours
        self.theirs = theirs
        self.calls = 0
        self.log = collections.deque(maxlen=12)   # the writes before a failure

    def both(self, *args):
        self.calls += 1
        if args[0] not in READS:
            self.log.append(args)
        return self.ours.call(*args), self.theirs.call(*args)

    def same(self, *args) -> bytes:
        a, b = self.both(*args)
        assert a == b, f"{args!r}:\n hotkv:  {a[:300]!r}\n valkey: {b[:300]!r}\n" \
                       f" after: {list(self.log)}"
        return a

    def as_sets(self, *args, pairs=False):
        a, b = self.both(*args)
        if args[0] in ("HSCAN", "ZSCAN"):
            assert a[:8] == b[:8] == b"*2\r\n$1\r\n", (args, a[:80], b[:80])
            a, b = a[a.index(b"*", 1):], b[b.index(b"*", 1):]
        if pairs:
            assert _pairs(_array(a)) == _pairs(_array(b)), args
        else:
            assert sorted(_array(a)) == sorted(_array(b)), args

    def check_hash(self, key):
        enc = self.same("OBJECT", "ENCODING", key)
        if enc == b"$-1\r\n":
            return
        exact = enc not in HASHTABLE
        for cmd, pairs in ((("HGETALL", key), True), (("HKEYS", key), False),
                           (("HVALS", key), False),
                           (("HSCAN", key, "0", "COUNT", "1000"), True),
                           (("HRANDFIELD", key, "1000", "WITHVALUES"), True),
                           (("EVAL", "return redis.call('hgetall', KEYS[1])", "1", key), True)):
            if exact:
                self.same(*cmd)
            else:
                self.as_sets(*cmd, pairs=pairs)
        self.random_shapes("HRANDFIELD", key, exact, _array(self.ours.call("HKEYS", key)))

    def check_zset(self, key):
        enc = self.same("OBJECT", "ENCODING", key)
        if enc == b"$-1\r\n":
            return
        exact = enc not in HASHTABLE
        self.same("ZRANGE", key, "0", "-1", "WITHSCORES")
        self.same("ZRANDMEMBER", key, "1000", "WITHSCORES")
        self.same("EVAL", "return redis.call('zrange', KEYS[1], 0, -1)", "1", key)
        if exact:
            self.same("ZSCAN", key, "0", "COUNT", "1000")
        else:
            self.as_sets("ZSCAN", key, "0", "COUNT", "1000", pairs=True)
        self.random_shapes("ZRANDMEMBER", key, exact,
                           _array(self.ours.call("ZRANGE", key, "0", "-1")))

    def random_shapes(self, cmd, key, exact, whole):
        """Random replies: the same length; a listpack's unique sample in its
        order (``whole``)."""
        for count in ("1", "2", "-1", "-5", str(len(whole) - 1)):
            a, b = self.both(cmd, key, count)
            got, want = _array(a), _array(b)
            assert len(got) == len(want), (cmd, key, count)
            assert set(got) <= set(whole), (cmd, key, count)
            if int(count) > 0:
                assert len(set(got)) == len(got), (cmd, key, count)
                if exact and int(count) < len(whole):
                    assert got == [m for m in whole if m in set(got)], (cmd, key, count)


def _hash_op(pair, rng):
    key = rng.choice(HKEYS)
    kinds = _kinds(rng)
    op = rng.choices(["HSET", "HMSET", "HSETNX", "HDEL", "HINCRBY", "HINCRBYFLOAT"],
                     [10, 3, 3, 5, 2, 2])[0]
    if op in ("HSET", "HMSET"):
        args = []
        for _ in range(rng.choice([1, 1, 2, 3, 5, 8])):
            args += [_word(rng, rng.choice(kinds)), _word(rng, rng.choice(kinds))]
        pair.same(op, key, *args)
    elif op == "HSETNX":
        pair.same(op, key, _word(rng, rng.choice(kinds)), _word(rng, rng.choice(kinds)))
    elif op == "HDEL":
        fields = _array(pair.ours.call("HKEYS", key))
        picks = [rng.choice(fields).decode() for _ in range(rng.randint(1, 2))] if fields else []
        pair.same(op, key, *picks, _word(rng, rng.choice(kinds)))
    elif op == "HINCRBY":
        pair.same(op, key, _word(rng, rng.choice(kinds)), str(rng.randint(-9, 9)))
    else:
        pair.same(op, key, _word(rng, rng.choice(kinds)), rng.choice(["1.5", "-2", "0.1", "3"]))
    pair.check_hash(key)


def _zset_op(pair, rng):
    key = rng.choice(ZKEYS)
    kinds = _kinds(rng)
    op = rng.choices(["ZADD", "ZINCRBY", "ZREM", "ZPOP", "ZREMRANGEBYRANK", "STORE"],
                     [10, 3, 4, 2, 1, 2])[0]
    touched = [key]
    if op == "ZADD":
        flags = rng.choice([[], [], [], ["NX"], ["XX"], ["GT"], ["LT"], ["CH"], ["XX", "CH"]])
        n = 1 if rng.random() < 0.1 else rng.choice([1, 2, 3, 6])
        if n == 1 and rng.random() < 0.2:
            flags = flags + ["INCR"]
        args = []
        for _ in range(n):
            args += [_score(rng), _word(rng, rng.choice(kinds))]
        pair.same("ZADD", key, *flags, *args)
    elif op == "ZINCRBY":
        pair.same(op, key, rng.choice(["1", "-1", "0.5", "0"]), _word(rng, rng.choice(kinds)))
    elif op == "ZREM":
        members = _array(pair.ours.call("ZRANGE", key, "0", "-1"))
        picks = [rng.choice(members).decode()] if members else []
        pair.same(op, key, *picks, _word(rng, rng.choice(kinds)))
    elif op == "ZPOP":
        pair.same(rng.choice(["ZPOPMIN", "ZPOPMAX"]), key, str(rng.randint(1, 3)))
    elif op == "ZREMRANGEBYRANK":
        pair.same(op, key, "0", str(rng.randint(0, 1)))
    else:
        srcs = rng.sample(ZKEYS, rng.randint(1, 3))
        cmd = rng.choice(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE", "ZRANGESTORE"])
        if cmd == "ZRANGESTORE":
            pair.same(cmd, key, srcs[0], "0", str(rng.randint(0, 9)))
        else:
            pair.same(cmd, key, str(len(srcs)), *srcs)
    for k in touched:
        pair.check_zset(k)


@pytest.fixture
def pair(server, ref_server):
    ours = RawClient(server.host, server.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    saved = [(ours.call("CONFIG", "GET", n), theirs.call("CONFIG", "GET", n)) for n in LIMITS]
    ours.call("FLUSHALL")
    theirs.call("FLUSHALL")
    yield _Pair(ours, theirs)
    for name, (a, b) in zip(LIMITS, saved):
        ours.call("CONFIG", "SET", name, _array(a)[1])
        theirs.call("CONFIG", "SET", name, _array(b)[1])
    ours.call("FLUSHALL")
    theirs.call("FLUSHALL")
    ours.close()
    theirs.close()


# Random writes per configuration: 500 in the suite (about 2.5 s each);
# HOTKV_ORDER_OPS=5000 for a long run.
OPS = int(os.environ.get("HOTKV_ORDER_OPS", "500"))


@pytest.mark.parametrize("limits", CONFIGS, ids=["-".join(map(str, c)) for c in CONFIGS])
def test_random_hash_commands_keep_valkeys_order(pair, limits):
    for name, value in zip(LIMITS, limits):
        pair.same("CONFIG", "SET", name, str(value))
    rng = random.Random(325 + sum(limits))
    for _ in range(OPS):
        _hash_op(pair, rng)
    assert pair.calls > 8 * OPS


@pytest.mark.parametrize("limits", CONFIGS, ids=["-".join(map(str, c)) for c in CONFIGS])
def test_random_zset_commands_keep_valkeys_order(pair, limits):
    for name, value in zip(LIMITS, limits):
        pair.same("CONFIG", "SET", name, str(value))
    rng = random.Random(3250 + sum(limits))
    for _ in range(OPS):
        _zset_op(pair, rng)
    assert pair.calls > 8 * OPS


def test_hash_order_examples(pair):
    pair.same("HSET", "h", "c", "1", "b", "2", "a", "3", "7", "4")
    pair.same("HSET", "h", "b", "22")                    # an update stays in place
    pair.same("HDEL", "h", "c")                          # a delete closes up
    pair.same("HSET", "h", "c", "5", "0", "6")           # a re-add goes to the end
    assert _array(pair.same("HKEYS", "h")) == [b"b", b"a", b"7", b"c", b"0"]
    pair.same("HSETNX", "h", "a", "x")
    pair.same("HINCRBY", "h", "n", "3")
    pair.same("HINCRBYFLOAT", "h", "b", "0.5")
    for cmd in (("HGETALL", "h"), ("HVALS", "h"), ("HSCAN", "h", "0"),
                ("HSCAN", "h", "0", "MATCH", "[a-c]", "NOVALUES"),
                ("HRANDFIELD", "h", "6", "WITHVALUES"), ("HRANDFIELD", "h", "60"),
                ("OBJECT", "ENCODING", "h")):
        pair.same(*cmd)
    pair.same("CONFIG", "SET", "hash-max-listpack-entries", "3")
    pair.same("OBJECT", "ENCODING", "h")     # a listpack until the next write
    pair.same("HGETALL", "h")
    pair.same("HSET", "h", "a", "1")         # hashTypeSet's check: now a hashtable
    pair.same("OBJECT", "ENCODING", "h")
    pair.same("HDEL", "h", "a", "b", "7", "c")
    pair.same("OBJECT", "ENCODING", "h")     # and stays one
    pair.same("HSET", "d", "x", "1", "x", "2", "x", "3", "x", "4")   # pairs counted, not fields
    pair.same("OBJECT", "ENCODING", "d")
    pair.same("CONFIG", "SET", "hash-max-listpack-entries", "128")
    pair.same("HSET", "v", "f", "1", "g", "2")
    pair.same("HSETNX", "v", "f", "x" * 100)     # an existing field: no conversion
    pair.same("OBJECT", "ENCODING", "v")
    pair.same("HINCRBYFLOAT", "v", "g", "0.1")
    pair.same("HINCRBY", "v", "y" * 65, "1")      # a long field converts
    pair.same("OBJECT", "ENCODING", "v")
    pair.same("HSET", "w", "f", "1", "g", "2", "h", "3")
    for key in ("h", "w"):          # DUMP / RESTORE / COPY keep the encoding and order
        a, b = pair.both("DUMP", key)   # a hashtable's in each server's hash order
        if key == "w":
            assert a == b
        assert pair.ours.call("RESTORE", key + ":r", "0", _array(b"*1\r\n" + a)[0]) == \
            pair.theirs.call("RESTORE", key + ":r", "0", _array(b"*1\r\n" + b)[0])
        pair.same("OBJECT", "ENCODING", key + ":r")
        pair.same("COPY", key, key + ":c")
        pair.same("OBJECT", "ENCODING", key + ":c")
    pair.same("HGETALL", "w:r")
    pair.same("HGETALL", "w:c")
    pair.same("HDEL", "w:r", "f")
    pair.same("HSET", "w:r", "f", "9")
    pair.same("HGETALL", "w:r")
    pair.same("OBJECT", "ENCODING", "w:r")
    pair.same("CONFIG", "SET", "hash-max-listpack-entries", "2")
    pair.same("HSET", "h:r", "q", "1")     # restored a listpack (by its contents): now 3
    pair.same("OBJECT", "ENCODING", "h:r")
    pair.same("CONFIG", "SET", "hash-max-listpack-entries", "128")
    pair.both("HELLO", "3")
    pair.same("HGETALL", "w:c")
    pair.same("HRANDFIELD", "w:c", "5", "WITHVALUES")


def test_zset_ties_and_sort(pair):
    pair.same("ZADD", "z", "1", "b", "1", "a", "1", "c", "0", "-0", "-0", "x", "2", "B")
    for cmd in (("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZSCAN", "z", "0"),
                ("ZRANDMEMBER", "z", "10", "WITHSCORES"), ("ZREVRANGE", "z", "0", "-1"),
                ("SORT", "z", "BY", "nosort"), ("SORT", "z", "BY", "nosort", "DESC"),
                ("SORT", "z", "BY", "nosort", "LIMIT", "1", "2")):
        pair.same(*cmd)
    pair.same("SORT", "z", "ALPHA")
    pair.same("OBJECT", "ENCODING", "z")         # SORT converted it
    pair.same("ZADD", "z", "-0", "y")
    pair.same("ZRANGE", "z", "0", "-1", "WITHSCORES")
    pair.same("ZADD", "r", "1", "a")
    pair.same("SORT_RO", "r", "BY", "nosort")
    pair.same("OBJECT", "ENCODING", "r")
    pair.same("ZADD", "big", *[x for i in range(200) for x in ("-0" if i % 7 else "1", "m%d" % i)])
    pair.same("ZRANGESTORE", "rs", "big", "0", "150")
    pair.same("ZRANGE", "rs", "0", "-1", "WITHSCORES")
    pair.same("ZRANGESTORE", "rs", "big", "0", "10")
    pair.same("ZRANGE", "rs", "0", "-1", "WITHSCORES")
    pair.same("ZSCAN", "rs", "0")


def test_sort_nosort_follows_the_encoding(pair):
    pair.same("SADD", "i", "30", "-2", "7", "5")         # an intset: ascending
    pair.same("SADD", "l", "c", "b", "a", "x1")          # a listpack: insertion order
    pair.same("SREM", "l", "b")
    pair.same("SADD", "l", "b", "z")
    pair.same("SADD", "m", "30", "-2", "7", "hello", "5")    # intset -> listpack
    pair.same("RPUSH", "li", "c", "a", "b")
    for key in ("i", "l", "m", "li"):
        for extra in ((), ("DESC",), ("LIMIT", "1", "2"), ("DESC", "LIMIT", "0", "2"),
                      ("GET", "#")):
            pair.same("SORT", key, "BY", "nosort", *extra)
            pair.same("SORT_RO", key, "BY", "nokey", *extra)
        pair.same("SORT", key, "BY", "nosort", "STORE", key + ":s")
        pair.same("LRANGE", key + ":s", "0", "-1")
        pair.same("EVAL", "return redis.call('sort', KEYS[1], 'by', 'nosort')", "1", key)
        pair.same("SORT", key, "ALPHA")
    pair.same("MSET", "w_c", "1", "w_a", "1", "w_x1", "1", "w_b", "2", "w_z", "0")
    pair.same("SORT", "l", "BY", "w_*")


def test_random_reply_shapes(pair):
    pair.same("SADD", "s", "a", "b", "c", "1")
    pair.same("HSET", "h", "a", "1", "b", "2", "c", "3")
    pair.same("ZADD", "z", "1", "a", "2", "b", "3", "c")
    for cmd, key in (("SRANDMEMBER", "s"), ("HRANDFIELD", "h"), ("ZRANDMEMBER", "z")):
        for count in ("-1", "-3", "-10", "2", "3", "10"):
            a, b = pair.both(cmd, key, count)
            assert len(_array(a)) == len(_array(b)), (cmd, count)
        for count in ("-4", "2", "10"):
            if cmd != "SRANDMEMBER":
                a, b = pair.both(cmd, key, count, "WITHSCORES" if cmd[0] == "Z" else "WITHVALUES")
                assert len(_array(a)) == len(_array(b)), (cmd, count)
