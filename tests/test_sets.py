"""The set commands (hotkv/commands/sets.py): every command, option and error
through valkey-py (``r``), redis-py RESP3 (``r3``) and byte for byte against
the reference Valkey (``diff``).  Replies Redis sends in no defined order
(SMEMBERS, SINTER...) are compared as multisets of their elements; random
ones (SPOP, SRANDMEMBER) are checked for their properties.

Also holds ``parse`` / ``unordered``, the raw-reply helpers the hash and
sorted-set tests share, and ``random_walk`` (seeded random commands vs Valkey)."""

from __future__ import annotations

import pytest
import valkey

from support import RawClient, run_script, scenario_tests

run = run_script   # test_sort.py imports it from here

# ----------------------------------------------------------------------
# Raw reply helpers
# ----------------------------------------------------------------------


def parse(data: bytes, pos: int = 0):
    """A raw RESP2/RESP3 reply -> (kind, value), value a list of parsed
    children for aggregates and the raw line/bulk otherwise; returns
    (parsed, next position)."""
    nl = data.index(b"\r\n", pos)
    kind = data[pos:pos + 1]
    head = data[pos + 1:nl]
    pos = nl + 2
    if kind in (b"$", b"=", b"!"):
        n = int(head)
        if n < 0:
            return (kind, None), pos
        return (kind, data[pos:pos + n]), pos + n + 2
    if kind in (b"*", b"~", b">", b"%"):
        n = int(head)
        if n < 0:
            return (kind, None), pos
        items = []
        for _ in range(n * (2 if kind == b"%" else 1)):
            item, pos = parse(data, pos)
            items.append(item)
        return (kind, items), pos
    return (kind, head), pos


def canon(node, unordered_depth: int = 1):
    """A hashable, order-insensitive form of a parsed reply down to depth."""
    kind, value = node
    if isinstance(value, list):
        kids = [canon(k, unordered_depth - 1) for k in value]
        if unordered_depth > 0:
            kids = sorted(kids, key=repr)
        return (kind, tuple(kids))
    return (kind, value)


def unordered(diff, *args, depth: int = 1):
    """Send to both servers; the replies must be equal as multisets."""
    a = diff.ours.call(*args)
    b = diff.theirs.call(*args)
    ca, cb = canon(parse(a)[0], depth), canon(parse(b)[0], depth)
    assert ca == cb, f"{args!r}:\n hotkv:  {a!r}\n valkey: {b!r}"
    return a


# ----------------------------------------------------------------------
# Byte-for-byte scenarios
# ----------------------------------------------------------------------

SCENARIOS = {
    "sadd_srem": [
        ("SADD", "s", "a", "b", "c"), ("SADD", "s", "a", "d", "d"), ("SCARD", "s"),
        ("SREM", "s", "x"), ("SREM", "s", "a", "b", "x"), ("SREM", "nos", "a"),
        ("SCARD", "nos"), ("SREM", "s", "c", "d"), ("SCARD", "s"), ("SISMEMBER", "s", "c"),
        ("SADD", "s"), ("SREM", "s"), ("SADD", "bin", b"\x00\xff\r\n", b""),
        ("SISMEMBER", "bin", b"\x00\xff\r\n"), ("SISMEMBER", "bin", b""),
        ("SADD", "n", "1", "01", "1.0", "-0", "0"), ("SCARD", "n"),
    ],
    "membership": [
        ("SADD", "s", "a", "b"), ("SISMEMBER", "s", "a"), ("SISMEMBER", "s", "z"),
        ("SISMEMBER", "nos", "a"), ("SMISMEMBER", "s", "a", "z", "b"),
        ("SMISMEMBER", "nos", "a", "b"), ("SMISMEMBER", "s"), ("SISMEMBER", "s"),
        ("SCARD", "s", "x"),
    ],
    "wrongtype": [
        ("HSET", "h", "f", "v"), ("SADD", "h", "a"), ("SREM", "h", "a"), ("SCARD", "h"),
        ("SISMEMBER", "h", "a"), ("SMISMEMBER", "h", "a"), ("SMEMBERS", "h"), ("SPOP", "h"),
        ("SPOP", "h", "2"), ("SRANDMEMBER", "h"), ("SRANDMEMBER", "h", "2"),
        ("SINTER", "h"), ("SUNION", "h"), ("SDIFF", "h"), ("SINTERCARD", "1", "h"),
        ("SADD", "s", "a"), ("SINTER", "nos", "h"), ("SINTER", "s", "h"),
        ("SUNION", "s", "nos", "h"), ("SDIFF", "nos", "h"), ("SDIFF", "s", "h"),
        ("SINTERSTORE", "d", "s", "h"), ("SUNIONSTORE", "d", "h"), ("SDIFFSTORE", "d", "h"),
        ("SMOVE", "h", "s", "a"), ("SMOVE", "s", "h", "a"), ("SMOVE", "nos", "h", "a"),
        ("SMOVE", "h", "nos", "a"), ("SSCAN", "h", "0"), ("SSCAN", "h", "x"),
        ("SRANDMEMBER", "h", "x"), ("SPOP", "h", "-1"), ("SCARD", "s"),
    ],
    "smove": [
        ("SADD", "a", "1", "2"), ("SADD", "b", "3"), ("SMOVE", "a", "b", "1"),
        ("SMOVE", "a", "b", "9"), ("SMOVE", "nos", "b", "1"), ("SMOVE", "a", "a", "2"),
        ("SMOVE", "a", "a", "9"), ("SMOVE", "b", "a", "3"), ("SMOVE", "a", "c", "2"),
        ("SCARD", "a"), ("SCARD", "c"), ("SMOVE", "b", "a", "1"), ("SCARD", "b"),
        ("SISMEMBER", "a", "1"), ("SMOVE", "a", "b"),
    ],
    "spop_srandmember_errors": [
        ("SPOP", "nos"), ("SPOP", "nos", "0"), ("SPOP", "nos", "5"), ("SPOP", "nos", "-1"),
        ("SPOP", "nos", "x"), ("SADD", "s", "a"), ("SPOP", "s", "-1"), ("SPOP", "s", "x"),
        ("SPOP", "s", "0"), ("SPOP", "s", "1", "2"), ("SPOP", "s", "9223372036854775808"),
        ("SRANDMEMBER", "nos"), ("SRANDMEMBER", "nos", "0"), ("SRANDMEMBER", "nos", "-3"),
        ("SRANDMEMBER", "s", "x"), ("SRANDMEMBER", "s", "1", "2"),
        ("SRANDMEMBER", "s", "-9223372036854775808"), ("SRANDMEMBER", "s", "0"),
        ("SRANDMEMBER", "s"), ("SRANDMEMBER", "s", "1"), ("SRANDMEMBER", "s", "5"),
        ("SRANDMEMBER", "s", "-3"), ("SPOP", "s"), ("SCARD", "s"), ("SPOP", "s"),
        ("SADD", "t", "x"), ("SPOP", "t", "1"), ("SCARD", "t"),
    ],
    "algebra_errors_and_empty": [
        ("SINTER", "nos"), ("SUNION", "nos"), ("SDIFF", "nos"), ("SADD", "a", "1", "2"),
        ("SINTER", "a", "nos"), ("SDIFF", "nos", "a"), ("SDIFF", "a", "a"),
        ("SINTERSTORE", "d", "a", "nos"), ("SCARD", "d"), ("SADD", "d", "x"),
        ("SINTERSTORE", "d", "a", "nos"), ("SCARD", "d"), ("SUNIONSTORE", "d", "nos"),
        ("SDIFFSTORE", "d", "a", "a"), ("SCARD", "d"), ("SINTERSTORE", "d", "a"),
        ("SCARD", "d"), ("SDIFFSTORE", "d", "a", "nos"), ("SUNIONSTORE", "d", "a", "a"),
        ("SINTER",), ("SINTERSTORE", "d"), ("SUNIONSTORE", "d"),
    ],
    "sintercard": [
        ("SADD", "a", "1", "2", "3", "4"), ("SADD", "b", "2", "3", "4", "5"),
        ("SINTERCARD", "2", "a", "b"), ("SINTERCARD", "2", "a", "b", "LIMIT", "0"),
        ("SINTERCARD", "2", "a", "b", "LIMIT", "2"), ("SINTERCARD", "2", "a", "b", "limit", "10"),
        ("SINTERCARD", "1", "a", "LIMIT", "1"), ("SINTERCARD", "2", "a", "nos"),
        ("SINTERCARD", "0", "a"), ("SINTERCARD", "-1", "a"), ("SINTERCARD", "x", "a"),
        ("SINTERCARD", "3", "a", "b"), ("SINTERCARD", "2", "a", "b", "LIMIT"),
        ("SINTERCARD", "2", "a", "b", "LIMIT", "-1"), ("SINTERCARD", "2", "a", "b", "LIMIT", "x"),
        ("SINTERCARD", "2", "a", "b", "FOO", "1"), ("SINTERCARD", "1"),
    ],
    "sscan": [
        ("SSCAN", "nos", "0"), ("SSCAN", "nos", "x"), ("SSCAN", "nos", "0", "COUNT", "0"),
        ("SADD", "s", "1", "2", "3"), ("SSCAN", "s", "0", "MATCH", "1"),
        ("SSCAN", "s", "0", "COUNT", "0"), ("SSCAN", "s", "0", "COUNT", "x"),
        ("SSCAN", "s", "0", "COUNT", "-1"), ("SSCAN", "s", "0", "NOVALUES"),
        ("SSCAN", "s", "0", "NOSCORES"), ("SSCAN", "s", "0", "TYPE", "set"),
        ("SSCAN", "s", "0", "FOO"), ("SSCAN", "s", "-1"), ("SSCAN", "s", "1.5"),
        ("SSCAN", "s", "18446744073709551616"), ("SSCAN", "s", "0", "MATCH"),
        ("SSCAN", "s"),
    ],
    "arity": [
        ("SADD", "s"), ("SREM",), ("SCARD",), ("SMEMBERS",), ("SISMEMBER", "s"),
        ("SMOVE", "a", "b"), ("SPOP",), ("SRANDMEMBER",), ("SINTERCARD",), ("SDIFFSTORE", "d"),
    ],
}


test_scenario, test_scenario_resp3 = scenario_tests(SCENARIOS)


@pytest.mark.parametrize("resp3", [False, True])
def test_unordered_replies(diff, resp3):
    if resp3:
        diff.resp3()
    run_script(diff, [("SADD", "a", *"abcdef", "1", "2"), ("SADD", "b", *"defgh", "2"),
               ("SADD", "c", "e", "x", "2"), ("SADD", "n", *[str(i) for i in range(20)])])
    for cmd in [("SMEMBERS", "a"), ("SMEMBERS", "n"), ("SMEMBERS", "nos"),
                ("SINTER", "a", "b"), ("SINTER", "a", "b", "c"), ("SINTER", "a", "a"),
                ("SUNION", "a", "b", "c", "nos"), ("SUNION", "nos"), ("SDIFF", "a", "b"),
                ("SDIFF", "a", "b", "c"), ("SDIFF", "a", "nos"), ("SSCAN", "a", "0"),
                ("SSCAN", "n", "0", "MATCH", "1*"), ("SSCAN", "n", "0", "COUNT", "3"),
                ("SRANDMEMBER", "a", "100"), ("SINTER", "n", "a")]:
        unordered(diff, *cmd, depth=2 if cmd[0] == "SSCAN" else 1)
    for cmd in [("SINTERSTORE", "d", "a", "b"), ("SMEMBERS", "d"),
                ("SUNIONSTORE", "d", "a", "b", "c"), ("SMEMBERS", "d"),
                ("SDIFFSTORE", "d", "a", "b"), ("SMEMBERS", "d"), ("SCARD", "d")]:
        unordered(diff, *cmd)
    # SPOP of the whole set, any order
    unordered(diff, "SPOP", "c", "10")
    diff("SCARD", "c")


def test_big_set_algebra_vs_reference(diff):
    a = [str(i) for i in range(0, 600)]
    b = [str(i) for i in range(300, 900)] + ["x%d" % i for i in range(100)]
    diff("SADD", "a", *a)
    diff("SADD", "b", *b)
    for cmd in [("SINTER", "a", "b"), ("SUNION", "a", "b"), ("SDIFF", "b", "a"),
                ("SINTERCARD", "2", "a", "b", "LIMIT", "17"), ("SINTERSTORE", "d", "a", "b"),
                ("SCARD", "d"), ("SMEMBERS", "d")]:
        unordered(diff, *cmd)


# ----------------------------------------------------------------------
# Through client libraries
# ----------------------------------------------------------------------

def test_basic_valkey_py(r):
    assert r.sadd("s", "a", "b", "c") == 3
    assert r.sadd("s", "a", "d") == 1
    assert set(r.smembers("s")) == {b"a", b"b", b"c", b"d"}
    assert r.scard("s") == 4
    assert r.sismember("s", "a") == 1
    assert r.smismember("s", ["a", "z"]) == [1, 0]
    assert r.srem("s", "a", "z") == 1
    assert r.smove("s", "t", "b") is True
    assert set(r.smembers("t")) == {b"b"}
    assert set(r.sinter("s", "t")) == set()
    assert set(r.sunion("s", "t")) == {b"b", b"c", b"d"}
    assert set(r.sdiff("s", "t")) == {b"c", b"d"}
    assert r.sintercard(2, ["s", "s"]) == 2
    assert r.sunionstore("u", ["s", "t"]) == 3
    assert r.srem("t", "b") == 1
    assert r.scard("t") == 0
    r.hset("h", "f", "v")
    with pytest.raises(valkey.ResponseError, match="WRONGTYPE"):
        r.sadd("h", "x")


def test_resp3_shapes(r3, raw):
    r3.sadd("s", "a", "b")
    assert r3.smembers("s") == {b"a", b"b"}
    assert isinstance(r3.execute_command("SMEMBERS", "s"), set)
    raw.call("HELLO", "3")
    assert raw.call("SRANDMEMBER", "s", "2").startswith(b"*2\r\n")
    assert raw.call("SINTER", "s").startswith(b"~2\r\n")
    assert raw.call("SPOP", "s", "5").startswith(b"~2\r\n")
    assert raw.call("SPOP", "s", "5") == b"~0\r\n"
    assert raw.call("SPOP", "s") == b"_\r\n"
    assert raw.call("SMEMBERS", "s") == b"~0\r\n"


def test_emptied_set_is_deleted(r):
    r.sadd("s", "a")
    r.srem("s", "a")
    assert r.scard("s") == 0
    assert r.sscan("s", 0) == (0, [])
    r.sadd("s", "a")
    assert r.spop("s") == b"a"
    assert list(r.smembers("s")) == []
    r.sadd("s", "a", "b")
    r.smove("s", "t", "a")
    r.smove("s", "t", "b")
    assert r.scard("s") == 0
    r.sadd("h", "x")
    # SADD then a wrong-type command on a deleted key acts on nothing
    r.srem("h", "x")
    assert r.hset("h", "f", "v") == 1   # key really gone: no WRONGTYPE


def test_spop_properties(r):
    members = {str(i).encode() for i in range(100)}
    r.sadd("s", *members)
    popped = r.spop("s", 10)
    assert len(popped) == 10 and set(popped) <= members
    left = set(r.smembers("s"))
    assert len(left) == 90 and left | set(popped) == members and not left & set(popped)
    many = r.spop("s", 85)        # the "keep the rest" strategy
    assert len(set(many)) == 85 and not set(many) & set(r.smembers("s"))
    assert r.scard("s") == 5
    one = r.spop("s")
    assert one in members and r.scard("s") == 4
    rest = r.spop("s", 100)
    assert len(rest) == 4 and r.scard("s") == 0


def test_srandmember_properties(r):
    members = {str(i).encode() for i in range(50)}
    r.sadd("s", *members)
    pos = r.srandmember("s", 20)
    assert len(pos) == 20 and len(set(pos)) == 20 and set(pos) <= members
    assert set(r.srandmember("s", 500)) == members and len(r.srandmember("s", 500)) == 50
    neg = r.srandmember("s", -200)
    assert len(neg) == 200 and set(neg) <= members
    assert len(set(neg)) < 200           # repetitions happen with 200 draws from 50
    assert r.srandmember("s") in members
    assert r.scard("s") == 50
    # a one-member set, negative count: the same member every time
    r.sadd("one", "x")
    assert r.srandmember("one", -5) == [b"x"] * 5


def test_spop_single_member_set_count(r):
    r.sadd("s", "only")
    assert r.spop("s", 1) == [b"only"]
    assert r.scard("s") == 0


def test_sscan_guarantee_under_churn(r):
    """A member present for the whole scan is returned at least once, while
    other members come and go between calls."""
    stable = {b"stable:%d" % i for i in range(800)}
    r.sadd("s", *stable, *[b"temp:%d" % i for i in range(400)])
    cursor = 0
    seen = set()
    step = 0
    while True:
        cursor, batch = r.sscan("s", cursor, count=25)
        seen.update(batch)
        step += 1
        # churn: remove some temporaries, add new ones
        r.srem("s", *[b"temp:%d" % i for i in range(step * 10, step * 10 + 10)])
        r.sadd("s", *[b"new:%d:%d" % (step, i) for i in range(10)])
        if cursor == 0:
            break
        assert step < 1000
    assert stable <= seen
    # a fresh full scan returns every member exactly as SMEMBERS has them
    all_members = set()
    for m in r.sscan_iter("s", count=100):
        all_members.add(m)
    assert all_members == set(r.smembers("s"))


def test_sscan_match_and_small(r):
    r.sadd("s", "a1", "a2", "b1")
    cursor, batch = r.sscan("s", 0, match="a*")
    assert cursor == 0 and sorted(batch) == [b"a1", b"a2"]
    r.sadd("big", *[str(i) for i in range(2000)])
    found = set()
    for m in r.sscan_iter("big", match="1*", count=50):
        found.add(m)
    assert found == {str(i).encode() for i in range(2000) if str(i).startswith("1")}


def test_spop_inside_multi_and_watch(r):
    r.sadd("s", "a", "b")
    p = r.pipeline(transaction=True)
    p.spop("s", 5)
    p.scard("s")
    res = p.execute()
    assert set(res[0]) == {b"a", b"b"} and res[1] == 0
    r.sadd("w", "x")
    p = r.pipeline(transaction=True)
    p.watch("w")
    other = valkey.Valkey(host=r.connection_pool.connection_kwargs["host"],
                          port=r.connection_pool.connection_kwargs["port"])
    other.sadd("w", "y")
    other.close()
    p.multi()
    p.scard("w")
    with pytest.raises(valkey.WatchError):
        p.execute()


# ----------------------------------------------------------------------
# Keyspace notifications, compared with Valkey event for event
# ----------------------------------------------------------------------

def events_match(server, ref_server, script):
    """Run script on both servers with every notification enabled; the
    keyevent/keyspace messages must be identical and in the same order."""
    pairs = []
    for srv in (server, ref_server):
        cmd = RawClient(srv.host, srv.port)
        sub = RawClient(srv.host, srv.port)
        cmd.call("FLUSHALL")
        old = cmd.call("CONFIG", "GET", "notify-keyspace-events")
        assert cmd.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == b"+OK\r\n"
        assert sub.call("PSUBSCRIBE", "__key*__:*").startswith(b"*3")
        pairs.append((cmd, sub, old))
    try:
        for args in script:
            a = pairs[0][0].call(*args)
            b = pairs[1][0].call(*args)
            assert a[:1] == b[:1], f"{args!r}: {a!r} vs {b!r}"
        ours = pairs[0][1].read_available(0.3)
        theirs = pairs[1][1].read_available(0.3)
        assert ours == theirs, f"\n hotkv:  {ours!r}\n valkey: {theirs!r}"
        assert theirs, "the script produced no events at all"
    finally:
        for cmd, sub, old in pairs:
            cmd.call("CONFIG", "SET", "notify-keyspace-events", "")
            cmd.close()
            sub.close()


EVENT_SCRIPT_SETS = [
    ("SADD", "s", "a", "b", "c"), ("SADD", "s", "a"), ("SREM", "s", "x"), ("SREM", "s", "a"),
    ("SMOVE", "s", "t", "b"), ("SMOVE", "s", "t", "c"), ("SPOP", "t", "1"), ("SADD", "u", "x", "y"),
    ("SPOP", "u", "5"), ("SADD", "u", "z"), ("SPOP", "u"), ("SADD", "a", "1", "2"),
    ("SADD", "b", "2", "3"), ("SINTERSTORE", "d", "a", "b"), ("SUNIONSTORE", "d", "a", "b"),
    ("SDIFFSTORE", "d", "a", "b"), ("SINTERSTORE", "d", "a", "nos"),
    ("SINTERSTORE", "d", "a", "nos"),
    ("SREM", "a", "1", "2"),
]


def test_set_events_match_valkey(server, ref_server):
    events_match(server, ref_server, EVENT_SCRIPT_SETS)


def _random_set_command(rnd):
    keys = ["s1", "s2", "s3"]
    members = [str(i) for i in range(20)] + ["a", "b", "c", "", "x" * 70]
    k = rnd.choice(keys)
    op = rnd.randrange(12)
    if op in (0, 1, 2):
        return ["SADD", k] + rnd.sample(members, rnd.randrange(1, 5))
    if op == 3:
        return ["SREM", k] + rnd.sample(members, rnd.randrange(1, 4))
    if op == 4:
        return ["SMOVE", k, rnd.choice(keys), rnd.choice(members)]
    if op == 5:
        return rnd.choice([["SISMEMBER", k, rnd.choice(members)], ["SCARD", k]])
    if op == 6:
        return ["SMISMEMBER", k] + rnd.sample(members, 3)
    if op == 7:
        return [rnd.choice(["SINTER", "SUNION", "SDIFF"])] + rnd.sample(keys, rnd.randrange(1, 4))
    if op == 8:
        return [rnd.choice(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
                rnd.choice(["d", "s3"])] + \
            rnd.sample(keys, rnd.randrange(1, 4))
    if op == 9:
        srcs = rnd.sample(keys, rnd.randrange(1, 4))
        return ["SINTERCARD", str(len(srcs))] + srcs + rnd.choice([[], ["LIMIT", "2"]])
    if op == 10:
        return ["SPOP", k, "100"]
    return ["SMEMBERS", k]


def random_walk(diff, seed, make_command, is_unordered, steps=600):
    """steps commands from make_command(random.Random(seed)) sent to hotkv
    and Valkey: replies Redis leaves in no defined order (is_unordered(cmd))
    compared as multisets with unordered(), all others byte for byte."""
    import random as _random
    rnd = _random.Random(seed)
    for _ in range(steps):
        cmd = make_command(rnd)
        if is_unordered(cmd):
            unordered(diff, *cmd)
        else:
            diff(*cmd)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_walk_vs_valkey(diff, seed):
    if seed == 2:
        diff.resp3()
    random_walk(diff, seed, _random_set_command,
                lambda cmd: cmd[0] in ("SMEMBERS", "SINTER", "SUNION", "SDIFF", "SPOP"))
    for k in ("s1", "s2", "s3", "d"):
        unordered(diff, "SMEMBERS", k)


def test_sscan_many_interleaved_scans(r):
    """More concurrent scans than cached snapshots: a cursor still resumes
    at the right place (the order is the members' hash, rebuilt at will)."""
    sets = {}
    for k in range(20):
        members = {b"k%d:%d" % (k, i) for i in range(300)}
        r.sadd("s%d" % k, *members)
        sets["s%d" % k] = members
    cursors = {k: 0 for k in sets}
    seen = {k: set() for k in sets}
    while cursors:
        for k in list(cursors):
            cur, batch = r.sscan(k, cursors[k], count=37)
            seen[k].update(batch)
            if cur == 0:
                del cursors[k]
            else:
                cursors[k] = cur
    for k, members in sets.items():
        assert seen[k] == members
