"""The hash commands (hotkv/commands/hashes.py): every command, option and
error through valkey-py (``r``), redis-py RESP3 (``r3``) and byte for byte
against the reference Valkey (``diff``), plus the long-double arithmetic of
HINCRBYFLOAT and the HSCAN cursor guarantee."""

from __future__ import annotations

import pytest
import valkey

from support import scenario_tests
from test_sets import random_walk, unordered

SCENARIOS = {
    "hset_hget": [
        ("HSET", "h", "a", "1"), ("HSET", "h", "a", "2", "b", "3"), ("HGET", "h", "a"),
        ("HGET", "h", "z"), ("HGET", "noh", "a"), ("HSET", "h", "a"), ("HSET", "h", "a", "1", "b"),
        ("HMSET", "h", "c", "4", "d", "5"), ("HMSET", "h", "c"), ("HMSET", "h", "c", "4", "d"),
        ("HGETALL", "h"), ("HKEYS", "h"), ("HVALS", "h"), ("HLEN", "h"), ("HLEN", "noh"),
        ("HGETALL", "noh"), ("HKEYS", "noh"), ("HVALS", "noh"),
        ("HSET", "bin", b"\x00\r\n", b"\xff" * 3, b"", b""), ("HGETALL", "bin"),
        ("HGET", "bin", b""),
    ],
    "order_after_update_and_delete": [
        ("HSET", "h", "a", "1", "b", "2", "c", "3"), ("HSET", "h", "a", "9"), ("HDEL", "h", "b"),
        ("HSET", "h", "b", "7"), ("HGETALL", "h"), ("HSETNX", "h", "d", "1"), ("HKEYS", "h"),
    ],
    "hsetnx": [
        ("HSETNX", "h", "a", "1"), ("HSETNX", "h", "a", "2"), ("HGET", "h", "a"),
        ("HSETNX", "h", "a"), ("HSETNX", "h", "a", "1", "2"),
    ],
    "hmget_hexists_hstrlen": [
        ("HSET", "h", "a", "hello", "n", "-12345"), ("HMGET", "h", "a", "z", "n"),
        ("HMGET", "noh", "a", "b"), ("HEXISTS", "h", "a"), ("HEXISTS", "h", "z"),
        ("HEXISTS", "noh", "a"), ("HSTRLEN", "h", "a"), ("HSTRLEN", "h", "n"),
        ("HSTRLEN", "h", "z"), ("HSTRLEN", "noh", "a"), ("HMGET", "h"),
    ],
    "hdel": [
        ("HSET", "h", "a", "1", "b", "2", "c", "3"), ("HDEL", "h", "z"),
        ("HDEL", "h", "a", "a", "z"),
        ("HDEL", "noh", "a"), ("HLEN", "h"), ("HDEL", "h", "b", "c", "d"), ("HLEN", "h"),
        ("HGETALL", "h"), ("HSETNX", "h", "x", "1"), ("HGETALL", "h"), ("HDEL", "h"),
    ],
    "hincrby": [
        ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "-10"), ("HGET", "h", "n"),
        ("HINCRBY", "h", "n", "x"), ("HINCRBY", "h", "n", "1.5"), ("HINCRBY", "h", "n", " 1"),
        ("HINCRBY", "h", "n", "9223372036854775808"), ("HSET", "h", "big", "9223372036854775807"),
        ("HINCRBY", "h", "big", "1"), ("HINCRBY", "h", "big", "0"), ("HINCRBY", "h", "big", "-1"),
        ("HSET", "h", "small", "-9223372036854775808"), ("HINCRBY", "h", "small", "-1"),
        ("HSET", "h", "s", "abc", "f", "1.5", "sp", " 1", "z", "01"), ("HINCRBY", "h", "s", "1"),
        ("HINCRBY", "h", "f", "1"), ("HINCRBY", "h", "sp", "1"), ("HINCRBY", "h", "z", "1"),
        ("HINCRBY", "noh2", "x", "abc"), ("HLEN", "noh2"), ("HGETALL", "h"),
    ],
    "hincrbyfloat": [
        ("HINCRBYFLOAT", "h", "f", "10.5"), ("HINCRBYFLOAT", "h", "f", "0.1"),
        ("HINCRBYFLOAT", "h", "f", "-5"), ("HINCRBYFLOAT", "h", "f", "3.0e3"),
        ("HINCRBYFLOAT", "h", "f", "1e-20"), ("HINCRBYFLOAT", "h", "g", "1.23456789012345678"),
        ("HINCRBYFLOAT", "h", "g", "-1.23456789012345678"), ("HINCRBYFLOAT", "h", "h", "0x10"),
        ("HINCRBYFLOAT", "h", "i", "1e400"), ("HINCRBYFLOAT", "h", "j", "1e-4940"),
        ("HINCRBYFLOAT", "h", "x", "1e-5000"), ("HINCRBYFLOAT", "h", "x", "1e5000"),
        ("HINCRBYFLOAT", "h", "x", "inf"), ("HINCRBYFLOAT", "h", "x", "-infinity"),
        ("HINCRBYFLOAT", "h", "x", "nan"), ("HINCRBYFLOAT", "h", "x", "abc"),
        ("HINCRBYFLOAT", "h", "x", " 1"), ("HINCRBYFLOAT", "h", "x", "1 "),
        ("HINCRBYFLOAT", "h", "x", ""), ("HINCRBYFLOAT", "h", "x", ".5"),
        ("HINCRBYFLOAT", "h", "y", "5."), ("HINCRBYFLOAT", "h", "y", "+1"),
        ("HSET", "h", "s", "abc", "big", "1e4932", "in", "inf"), ("HINCRBYFLOAT", "h", "s", "1"),
        ("HINCRBYFLOAT", "h", "big", "1e4932"), ("HINCRBYFLOAT", "h", "in", "1"),
        ("HINCRBYFLOAT", "h", "m", "-0.0"), ("HINCRBYFLOAT", "h", "m2", "-1"),
        ("HINCRBYFLOAT", "h", "m2", "1"), ("HINCRBYFLOAT", "h", "k", "12345678901234567890"),
        ("HINCRBYFLOAT", "h", "k2", "0.00000000000000001"),
        ("HINCRBYFLOAT", "h", "k3", "0.000000000000000005"),
        ("HINCRBYFLOAT", "h", "k4", "0.000000000000000015"),
        ("HINCRBYFLOAT", "h", "k5", "1.5e-8"),
        ("HINCRBYFLOAT", "noh2", "x", "abc"), ("HLEN", "noh2"),
        ("HMGET", "h", "f", "g", "h", "i", "j", "x", "y", "s", "big", "in", "m", "m2", "k", "k2",
         "k3", "k4", "k5"),
    ],
    "hrandfield_errors": [
        ("HRANDFIELD", "noh"), ("HRANDFIELD", "noh", "3"),
        ("HRANDFIELD", "noh", "-3", "WITHVALUES"),
        ("HRANDFIELD", "noh", "x"), ("HSET", "h", "a", "1"), ("HRANDFIELD", "h"),
        ("HRANDFIELD", "h", "1"), ("HRANDFIELD", "h", "-2"),
        ("HRANDFIELD", "h", "-2", "WITHVALUES"),
        ("HRANDFIELD", "h", "0"), ("HRANDFIELD", "h", "0", "withvalues"), ("HRANDFIELD", "h", "x"),
        ("HRANDFIELD", "h", "1", "WITHSCORES"), ("HRANDFIELD", "h", "1", "WITHVALUES", "x"),
        ("HRANDFIELD", "h", "-9223372036854775808"),
        ("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"),
        ("HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"),
        ("HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"),
        ("HRANDFIELD", "h", "4611686018427387903", "WITHVALUES"),
        ("HRANDFIELD", "h", "x", "WITHVALUES"), ("HRANDFIELD", "noh", "1", "foo"),
    ],
    "hscan": [
        ("HSCAN", "noh", "0"), ("HSCAN", "noh", "x"), ("HSCAN", "noh", "0", "FOO"),
        ("HSET", "h", "a1", "1", "a2", "2", "b1", "3"), ("HSCAN", "h", "0"),
        ("HSCAN", "h", "0", "MATCH", "a*"), ("HSCAN", "h", "0", "NOVALUES"),
        ("HSCAN", "h", "0", "novalues", "MATCH", "*1"), ("HSCAN", "h", "0", "COUNT", "1"),
        ("HSCAN", "h", "0", "COUNT", "0"), ("HSCAN", "h", "0", "COUNT", "x"),
        ("HSCAN", "h", "0", "NOSCORES"), ("HSCAN", "h", "0", "TYPE", "hash"),
        ("HSCAN", "h", "0", "MATCH"), ("HSCAN", "h", "-1"), ("HSCAN", "h", "01"),
        ("HSCAN", "h", "+5"), ("HSCAN", "h", " 7"), ("HSCAN", "h", "18446744073709551615"),
        ("HSCAN", "h", "18446744073709551616"), ("HSCAN", "h", "-05"), ("HSCAN", "h", ""),
    ],
    "wrongtype": [
        ("SADD", "s", "x"), ("HSET", "s", "a", "1"), ("HSETNX", "s", "a", "1"),
        ("HMSET", "s", "a", "1"), ("HGET", "s", "a"), ("HMGET", "s", "a"), ("HDEL", "s", "a"),
        ("HLEN", "s"), ("HSTRLEN", "s", "a"), ("HEXISTS", "s", "a"), ("HKEYS", "s"),
        ("HVALS", "s"), ("HGETALL", "s"), ("HINCRBY", "s", "a", "1"),
        ("HINCRBYFLOAT", "s", "a", "1"), ("HRANDFIELD", "s"), ("HRANDFIELD", "s", "1"),
        ("HSCAN", "s", "0"), ("HINCRBY", "s", "a", "x"), ("HINCRBYFLOAT", "s", "a", "x"),
        ("HSCAN", "s", "x"), ("HSET", "s", "a"),
    ],
    "arity": [
        ("HSET", "h"), ("HSET", "h", "f"), ("HGET", "h"), ("HGETALL",), ("HDEL", "h"),
        ("HINCRBY", "h", "f"), ("HSCAN", "h"), ("HRANDFIELD",), ("HMGET", "h"), ("HLEN", "a", "b"),
    ],
}


test_scenario, test_scenario_resp3 = scenario_tests(SCENARIOS)


@pytest.mark.parametrize("resp3", [False, True])
def test_big_hash_unordered(diff, resp3):
    """Past the listpack limits Redis's order is its hash table's: compare as
    multisets (HGETALL pairs kept together through the RESP3 map / the
    HSCAN pairs checked through the client tests)."""
    if resp3:
        diff.resp3()
    fields = []
    for i in range(300):
        fields += ["f%d" % i, "v%d" % i]
    diff("HSET", "h", *fields)
    diff("HSET", "long", "f", "x" * 100, "g", "y")
    for cmd in [("HKEYS", "h"), ("HVALS", "h"), ("HKEYS", "long"), ("HRANDFIELD", "h", "400")]:
        unordered(diff, *cmd)
    diff("HLEN", "h")
    diff("HGET", "h", "f299")


def test_valkey_py(r):
    assert r.hset("h", mapping={"a": 1, "b": 2}) == 2
    assert r.hset("h", "a", 3) == 0
    assert r.hget("h", "a") == b"3"
    assert r.hgetall("h") == {b"a": b"3", b"b": b"2"}
    assert r.hmget("h", ["a", "z"]) == [b"3", None]
    assert r.hsetnx("h", "a", 9) == 0 and r.hsetnx("h", "c", 9) == 1
    assert r.hlen("h") == 3
    assert r.hexists("h", "c")
    assert r.hstrlen("h", "c") == 1
    assert r.hincrby("h", "a", 10) == 13
    assert r.hincrbyfloat("h", "f", 1.5) == 1.5
    assert r.hincrbyfloat("h", "f", "0.1") == pytest.approx(1.6)
    assert r.hget("h", "f") == b"1.6"
    assert r.hdel("h", "a", "b", "c", "f") == 4
    assert r.hlen("h") == 0
    assert r.hgetall("h") == {}
    r.sadd("s", "x")
    with pytest.raises(valkey.ResponseError, match="WRONGTYPE"):
        r.hget("s", "a")
    with pytest.raises(valkey.ResponseError, match="hash value is not an integer"):
        r.hset("h2", "x", "abc")
        r.hincrby("h2", "x", 1)


def test_resp3_shapes(r3, raw):
    r3.hset("h", mapping={"a": "1", "b": "2"})
    assert r3.hgetall("h") == {b"a": b"1", b"b": b"2"}
    raw.call("HELLO", "3")
    assert raw.call("HGETALL", "h") == b"%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    assert raw.call("HGETALL", "nokey") == b"%0\r\n"
    assert raw.call("HKEYS", "h") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert raw.call("HGET", "h", "z") == b"_\r\n"
    pairs = raw.call("HRANDFIELD", "h", "-3", "WITHVALUES")
    assert pairs.startswith(b"*3\r\n*2\r\n")
    # HSCAN stays a flat array in RESP3
    assert raw.call("HSCAN", "h",
                    "0") == b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"


def test_hrandfield_properties(r):
    fields = {("f%d" % i).encode(): ("v%d" % i).encode() for i in range(40)}
    r.hset("h", mapping=fields)
    pos = r.hrandfield("h", 15)
    assert len(pos) == 15 and len(set(pos)) == 15 and set(pos) <= set(fields)
    assert sorted(r.hrandfield("h", 100)) == sorted(fields)
    neg = r.hrandfield("h", -100)
    assert len(neg) == 100 and set(neg) <= set(fields) and len(set(neg)) < 100
    wv = r.hrandfield("h", -20, withvalues=True)
    assert len(wv) == 40
    for k, v in zip(wv[::2], wv[1::2]):
        assert fields[k] == v
    assert r.hrandfield("h") in fields


def test_hincrbyfloat_matches_long_double(diff):
    """A chain of increments accumulates in 80-bit long double, as in Redis."""
    for incr in ["0.1"] * 12 + ["1e15", "0.3", "-1e15", "3.14159265358979323846", "1e-3"]:
        diff("HINCRBYFLOAT", "h", "f", incr)
    for incr in ["1.7976931348623157e308", "1.7976931348623157e308", "1e4000", "-1e4000"]:
        diff("HINCRBYFLOAT", "h", "g", incr)


def test_hincrbyfloat_propagates_as_hset(r):
    """Logged as HSET with the final value: observable through MULTI/EXEC
    replies staying deterministic and the stored value being the reply."""
    v = r.hincrbyfloat("h", "f", "10.5")
    assert r.hget("h", "f") == b"10.5" and v == 10.5


def test_hscan_guarantee_under_churn(r):
    stable = {b"s%d" % i: b"v" for i in range(700)}
    r.hset("h", mapping=stable)
    r.hset("h", mapping={b"t%d" % i: b"v" for i in range(300)})
    cursor, seen, step = 0, {}, 0
    while True:
        cursor, batch = r.hscan("h", cursor, count=20)
        seen.update(batch)
        step += 1
        r.hdel("h", *[b"t%d" % i for i in range(step * 8, step * 8 + 8)])
        r.hset("h", mapping={b"n%d_%d" % (step, i): b"v" for i in range(8)})
        if cursor == 0:
            break
        assert step < 1000
    assert set(stable) <= set(seen)
    keys = []
    cursor = 0
    while True:
        cursor, batch = r.hscan("h", cursor, count=50, no_values=True)
        keys += batch
        if cursor == 0:
            break
    assert sorted(keys) == sorted(r.hkeys("h"))


def test_hscan_big_values_not_small(r):
    """A hash with a long value is past the listpack encoding: HSCAN pages."""
    r.hset("h", mapping={b"f%d" % i: b"x" * 100 for i in range(50)})
    cursor, batch = r.hscan("h", 0, count=5)
    assert cursor != 0 and 0 < len(batch) < 50
    allf = dict(r.hscan_iter("h", count=7))
    assert len(allf) == 50


def test_hash_in_multi(r):
    p = r.pipeline(transaction=True)
    p.hset("h", "a", "1")
    p.hincrby("h", "a", 2)
    p.hincrbyfloat("h", "a", "0.5")
    p.hgetall("h")
    assert p.execute() == [1, 3, 3.5, {b"a": b"3.5"}]


def test_hash_events_match_valkey(server, ref_server):
    from test_sets import events_match
    events_match(server, ref_server, [
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "1"), ("HSETNX", "h", "a", "1"),
        ("HSETNX", "h", "c", "1"), ("HMSET", "h", "d", "1"), ("HINCRBY", "h", "n", "1"),
        ("HINCRBYFLOAT", "h", "f", "1.5"), ("HDEL", "h", "zz"), ("HDEL", "h", "a", "b"),
        ("HDEL", "h", "c", "d", "n", "f"), ("HINCRBY", "h", "x", "abc"),
    ])


def _random_hash_command(rnd):
    keys = ["h1", "h2"]
    fields = ["f%d" % i for i in range(25)] + ["", "n", "x"]
    values = ["1", "-7", "abc", "", "3.5", "10", "9223372036854775806", "1e3", " 2", "0"]
    k = rnd.choice(keys)
    op = rnd.randrange(12)
    if op in (0, 1):
        n = rnd.randrange(1, 4)
        return ["HSET", k] + [x for f in rnd.sample(fields, n) for x in (f, rnd.choice(values))]
    if op == 2:
        return ["HSETNX", k, rnd.choice(fields), rnd.choice(values)]
    if op == 3:
        return ["HDEL", k] + rnd.sample(fields, rnd.randrange(1, 4))
    if op == 4:
        return ["HINCRBY", k, rnd.choice(fields), rnd.choice(["1", "-1", "100", "x", "1.5"])]
    if op == 5:
        return ["HINCRBYFLOAT", k, rnd.choice(fields),
                rnd.choice(["0.1", "-1.5", "1e2", "x", "3", "0.000001", "-0.1"])]
    if op == 6:
        return ["HMGET", k] + rnd.sample(fields, 3)
    if op == 7:
        return [rnd.choice(["HGET", "HEXISTS", "HSTRLEN"]), k, rnd.choice(fields)]
    if op == 8:
        return [rnd.choice(["HLEN", "HKEYS", "HVALS", "HGETALL"]), k]
    if op == 9:
        return ["HSCAN", k, "0"] + rnd.choice([[], ["MATCH", "f1*"], ["NOVALUES"], ["COUNT", "2"]])
    if op == 10:
        return ["HRANDFIELD", k, rnd.choice(["0", "100", "-0"])]
    return ["HGETALL", k]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_walk_vs_valkey(diff, seed):
    if seed == 2:
        diff.resp3()
    # HRANDFIELD 100 returns the whole hash, in Redis's dict order
    random_walk(diff, seed, _random_hash_command,
                lambda cmd: cmd[0] == "HRANDFIELD" and cmd[2] == "100")
