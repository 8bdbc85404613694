"""The list commands (hotkv/commands/lists.py): every command, option and
error, through valkey-py (``r``), redis-py RESP3 (``r3``) and byte for byte
against the reference Valkey (``diff``).  Blocking behaviour across
connections is in test_blocking.py; here only the non-blocking paths of the
blocking commands (served at once, timeouts, errors, inside MULTI)."""

from __future__ import annotations

import pytest
import valkey

from support import KeyEvents, exec_after_watch, scenario_tests

# Each scenario is a list of commands sent in order to hotkv and to Valkey;
# every reply must be identical bytes.
SCENARIOS = {
    "push": [
        ("LPUSH", "l", "a", "b", "c"), ("RPUSH", "l", "d", "e"), ("LRANGE", "l", "0", "-1"),
        ("LPUSHX", "nol", "x"), ("RPUSHX", "nol", "x", "y"), ("EXISTS", "nol"),
        ("LPUSHX", "l", "x", "y"), ("RPUSHX", "l", "z"), ("LRANGE", "l", "0", "-1"),
        ("SET", "s", "v"), ("LPUSH", "s", "a"), ("RPUSH", "s", "a"), ("LPUSHX", "s", "a"),
        ("RPUSHX", "s", "a"), ("LPUSH", "l"), ("RPUSHX", "l"),
        ("RPUSH", "bin", b"\x00\xff\r\n", b""), ("LRANGE", "bin", "0", "-1"),
    ],
    "llen_lindex": [
        ("LLEN", "nol"), ("RPUSH", "l", "a", "b", "c", "1", "01"), ("LLEN", "l"),
        ("LINDEX", "l", "0"), ("LINDEX", "l", "-1"), ("LINDEX", "l", "-5"), ("LINDEX", "l", "-6"),
        ("LINDEX", "l", "5"), ("LINDEX", "l", "9223372036854775807"),
        ("LINDEX", "l", "-9223372036854775808"), ("LINDEX", "l", "4294967296"),
        ("LINDEX", "l", "abc"), ("LINDEX", "l", "1.0"), ("LINDEX", "nol", "abc"),
        ("SET", "s", "v"), ("LLEN", "s"), ("LINDEX", "s", "0"), ("LINDEX", "s", "abc"),
        ("LLEN", "l", "x"),
    ],
    "lrange": [
        ("RPUSH", "l", *"abcdefghij"),
        ("LRANGE", "l", "0", "-1"), ("LRANGE", "l", "1", "-2"), ("LRANGE", "l", "-3", "-1"),
        ("LRANGE", "l", "7", "8"), ("LRANGE", "l", "2", "1"), ("LRANGE", "l", "-100", "100"),
        ("LRANGE", "l", "5", "100"), ("LRANGE", "l", "10", "20"), ("LRANGE", "l", "0", "-11"),
        ("LRANGE", "l", "-1", "-2"), ("LRANGE", "l", "0", "0"), ("LRANGE", "l", "9", "9"),
        ("LRANGE", "l", "8", "-1"), ("LRANGE", "l", "-9223372036854775808", "9223372036854775807"),
        ("LRANGE", "nol", "0", "-1"), ("LRANGE", "nol", "a", "1"), ("LRANGE", "l", "0", "b"),
        ("SET", "s", "v"), ("LRANGE", "s", "0", "-1"), ("LRANGE", "s", "x", "-1"),
    ],
    "lset": [
        ("LSET", "nol", "0", "x"), ("LSET", "nol", "abc", "x"), ("RPUSH", "l", "a", "b", "c"),
        ("LSET", "l", "0", "A"), ("LSET", "l", "-1", "C"), ("LSET", "l", "3", "x"),
        ("LSET", "l", "-4", "x"), ("LSET", "l", "abc", "x"), ("LRANGE", "l", "0", "-1"),
        ("LSET", "l", "4294967296", "w0"), ("LSET", "l", "4294967298", "w2"),
        ("LSET", "l", "-4294967297", "wm1"), ("LSET", "l", "9223372036854775807", "x"),
        ("LRANGE", "l", "0", "-1"), ("SET", "s", "v"), ("LSET", "s", "0", "x"),
        ("LSET", "s", "abc", "x"),
    ],
    "linsert": [
        ("LINSERT", "nol", "BEFORE", "a", "x"), ("LINSERT", "nol", "middle", "a", "x"),
        ("RPUSH", "l", "a", "b", "c", "b"), ("LINSERT", "l", "before", "b", "X"),
        ("LINSERT", "l", "AFTER", "b", "Y"), ("LINSERT", "l", "after", "c", "Z"),
        ("LINSERT", "l", "before", "a", "0"), ("LINSERT", "l", "before", "zz", "x"),
        ("LINSERT", "l", "sideways", "a", "x"), ("LRANGE", "l", "0", "-1"),
        ("SET", "s", "v"), ("LINSERT", "s", "before", "a", "x"),
        ("LINSERT", "s", "middle", "a", "x"),
    ],
    "lrem": [
        ("RPUSH", "l", "a", "b", "a", "c", "a", "b", "a"), ("LREM", "l", "2", "a"),
        ("LRANGE", "l", "0", "-1"), ("LREM", "l", "-1", "a"), ("LRANGE", "l", "0", "-1"),
        ("LREM", "l", "0", "b"), ("LRANGE", "l", "0", "-1"), ("LREM", "l", "1", "zz"),
        ("LREM", "l", "-9223372036854775808", "a"), ("LREM", "l", "x", "a"),
        ("LREM", "l", "-9223372036854775807", "c"), ("LRANGE", "l", "0", "-1"),
        ("LREM", "l", "0", "a"), ("EXISTS", "l"), ("LREM", "nol", "0", "a"),
        ("RPUSH", "m", "x", "y", "x", "x"), ("LREM", "m", "-2", "x"), ("LRANGE", "m", "0", "-1"),
        ("LREM", "m", "1", "x"), ("LREM", "m", "-1", "y"), ("EXISTS", "m"),
        ("SET", "s", "v"), ("LREM", "s", "0", "a"), ("LREM", "s", "x", "a"),
    ],
    "ltrim": [
        ("RPUSH", "l", *"abcdefghij"), ("LTRIM", "l", "1", "-2"), ("LRANGE", "l", "0", "-1"),
        ("LTRIM", "l", "0", "100"), ("LRANGE", "l", "0", "-1"), ("LTRIM", "l", "-3", "-1"),
        ("LRANGE", "l", "0", "-1"), ("LTRIM", "l", "0", "-10"), ("EXISTS", "l"),
        ("RPUSH", "l", "a", "b"), ("LTRIM", "l", "2", "1"), ("EXISTS", "l"),
        ("RPUSH", "l", "a", "b", "c"), ("LTRIM", "l", "5", "10"), ("EXISTS", "l"),
        ("LTRIM", "nol", "0", "1"), ("LTRIM", "nol", "x", "1"), ("RPUSH", "l", "a"),
        ("LTRIM", "l", "0", "y"), ("SET", "s", "v"), ("LTRIM", "s", "0", "1"),
    ],
    "lpos": [
        ("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c"),
        ("LPOS", "l", "c"), ("LPOS", "l", "c", "RANK", "2"), ("LPOS", "l", "c", "RANK", "-1"),
        ("LPOS", "l", "c", "RANK", "-3"), ("LPOS", "l", "c", "RANK", "4"),
        ("LPOS", "l", "c", "COUNT", "0"), ("LPOS", "l", "c", "COUNT", "2"),
        ("LPOS", "l", "c", "COUNT", "2", "RANK", "-1"),
        ("LPOS", "l", "c", "RANK", "2", "COUNT", "5"),
        ("LPOS", "l", "c", "MAXLEN", "3"), ("LPOS", "l", "c", "MAXLEN", "2"),
        ("LPOS", "l", "c", "COUNT", "0", "MAXLEN", "7"),
        ("LPOS", "l", "c", "RANK", "-1", "MAXLEN", "1"),
        ("LPOS", "l", "c", "RANK", "-2", "MAXLEN", "1"), ("LPOS", "l", "zz"),
        ("LPOS", "l", "zz", "COUNT", "0"), ("LPOS", "l", "c", "RANK", "0"),
        ("LPOS", "l", "c", "RANK", "-9223372036854775808"), ("LPOS", "l", "c", "RANK", "x"),
        ("LPOS", "l", "c", "COUNT", "-1"), ("LPOS", "l", "c", "COUNT", "x"),
        ("LPOS", "l", "c", "MAXLEN", "-1"), ("LPOS", "l", "c", "MAXLEN", "x"),
        ("LPOS", "l", "c", "RANK"), ("LPOS", "l", "c", "FOO", "1"), ("LPOS", "l", "c", "COUNT"),
        ("LPOS", "l", "c", "rank", "1", "count", "1", "maxlen", "0", "rank", "-1"),
        ("LPOS", "nol", "c"), ("LPOS", "nol", "c", "COUNT", "1"), ("LPOS", "nol", "c", "RANK", "0"),
        ("SET", "s", "v"), ("LPOS", "s", "c"), ("LPOS", "s", "c", "RANK", "0"),
    ],
    "pop": [
        ("RPUSH", "l", "a", "b", "c", "d", "e"), ("LPOP", "l"), ("RPOP", "l"),
        ("LPOP", "l", "2"), ("RPOP", "l", "0"), ("RPOP", "l", "10"), ("EXISTS", "l"),
        ("LPOP", "l"), ("LPOP", "l", "0"), ("LPOP", "l", "1"), ("RPOP", "nol", "3"),
        ("LPOP", "l", "-1"), ("RPOP", "l", "x"), ("LPOP", "l", "1.5"), ("LPOP", "l", "1", "2"),
        ("RPOP", "l", "1", "2"), ("RPUSH", "l", "a"), ("LPOP", "l", "-1"), ("RPOP", "l", "x"),
        ("SET", "s", "v"), ("LPOP", "s"), ("RPOP", "s", "0"), ("LPOP", "s", "-1"),
        ("LPOP",),
    ],
    "lmpop": [
        ("RPUSH", "l1", "a", "b", "c"), ("RPUSH", "l2", "d", "e"),
        ("LMPOP", "2", "nol", "l1", "LEFT"), ("LMPOP", "2", "l1", "l2", "right", "COUNT", "5"),
        ("LMPOP", "2", "l1", "l2", "left", "count", "1"), ("LMPOP", "1", "l1", "LEFT"),
        ("LMPOP", "2", "nol", "l2", "RIGHT", "COUNT", "9223372036854775807"),
        ("LMPOP", "1", "nol", "LEFT"), ("LMPOP", "0", "l1", "LEFT"), ("LMPOP", "-1", "l1", "LEFT"),
        ("LMPOP", "x", "l1", "LEFT"), ("LMPOP", "3", "l1", "LEFT"), ("LMPOP", "2", "l1", "LEFT"),
        ("LMPOP", "1", "l1", "MIDDLE"), ("LMPOP", "1", "l1", "LEFT", "COUNT", "0"),
        ("LMPOP", "1", "l1", "LEFT", "COUNT", "-1"), ("LMPOP", "1", "l1", "LEFT", "COUNT", "x"),
        ("LMPOP", "1", "l1", "LEFT", "COUNT"),
        ("LMPOP", "1", "l1", "LEFT", "COUNT", "1", "COUNT", "1"),
        ("LMPOP", "1", "l1", "LEFT", "FOO"), ("LMPOP", "1", "l1"),
        ("SET", "s", "v"), ("RPUSH", "l3", "z"), ("LMPOP", "2", "s", "l3", "LEFT"),
        ("LMPOP", "2", "l3", "s", "LEFT"), ("LMPOP", "2", "nol", "s", "LEFT"),
        ("LMPOP", "9223372036854775807", "l1", "LEFT"),
    ],
    "lmove": [
        ("RPUSH", "src", "a", "b", "c"), ("LMOVE", "src", "dst", "LEFT", "RIGHT"),
        ("LMOVE", "src", "dst", "right", "left"), ("LRANGE", "dst", "0", "-1"),
        ("LMOVE", "src", "src", "LEFT", "RIGHT"), ("LMOVE", "src", "dst", "LEFT", "LEFT"),
        ("EXISTS", "src"), ("LRANGE", "dst", "0", "-1"), ("LMOVE", "nol", "dst", "LEFT", "LEFT"),
        ("LMOVE", "dst", "dst", "RIGHT", "LEFT"), ("LRANGE", "dst", "0", "-1"),
        ("LMOVE", "dst", "x", "UP", "LEFT"), ("LMOVE", "dst", "x", "LEFT", "DOWN"),
        ("LMOVE", "nol", "x", "UP", "LEFT"), ("SET", "s", "v"),
        ("LMOVE", "nol", "s", "LEFT", "LEFT"), ("LMOVE", "dst", "s", "LEFT", "LEFT"),
        ("LRANGE", "dst", "0", "-1"), ("LMOVE", "s", "dst", "LEFT", "LEFT"),
        ("RPOPLPUSH", "dst", "d2"), ("RPOPLPUSH", "dst", "s"), ("RPOPLPUSH", "nol", "s"),
        ("RPOPLPUSH", "s", "d2"), ("RPOPLPUSH", "d2", "d2"), ("LRANGE", "d2", "0", "-1"),
        ("RPUSH", "one", "x"), ("RPOPLPUSH", "one", "one"), ("LRANGE", "one", "0", "-1"),
    ],
    "blocking_served_at_once": [
        ("RPUSH", "l1", "a", "b"), ("RPUSH", "l2", "c", "d", "e"),
        ("BLPOP", "nol", "l1", "l2", "0"), ("BRPOP", "nol", "l2", "l1", "0.5"),
        ("BLPOP", "l1", "l1", "1"), ("BLPOP", "l1", "l2", "0"),
        ("BLMPOP", "0", "2", "l1", "l2", "RIGHT", "COUNT", "10"),
        ("RPUSH", "l1", "a", "b", "c"), ("BLMPOP", "0", "1", "l1", "LEFT"),
        ("BLMOVE", "l1", "d", "LEFT", "RIGHT", "0"), ("BRPOPLPUSH", "l1", "d", "0"),
        ("LRANGE", "d", "0", "-1"), ("EXISTS", "l1"),
    ],
    "blocking_errors": [
        ("BLPOP", "l", "-1"), ("BLPOP", "l", "abc"), ("BLPOP", "l", ""), ("BLPOP", "l", " 1"),
        ("BLPOP", "l", "1 "), ("BLPOP", "l", "inf"), ("BLPOP", "l", "-inf"), ("BLPOP", "l", "nan"),
        ("BLPOP", "l", "1e400"), ("BLPOP", "l", "9223372036854775807"), ("BLPOP", "l", "1_0"),
        ("BLPOP", "l", "-0.5"), ("BRPOP", "l", "-1"), ("BRPOP", "l"),
        ("BLMOVE", "a", "b", "LEFT", "RIGHT", "-1"), ("BLMOVE", "a", "b", "UP", "RIGHT", "-1"),
        ("BLMOVE", "a", "b", "LEFT", "UP", "x"), ("BLMOVE", "a", "b", "LEFT", "RIGHT", "x"),
        ("BRPOPLPUSH", "a", "b", "-1"), ("BRPOPLPUSH", "a", "b", "x"),
        ("BLMPOP", "-1", "1", "l", "LEFT"), ("BLMPOP", "x", "1", "l", "LEFT"),
        ("BLMPOP", "0", "0", "l", "LEFT"), ("BLMPOP", "0", "1", "l", "MIDDLE"),
        ("BLMPOP", "0", "2", "l", "LEFT"), ("BLMPOP", "-1", "1", "l", "LEFT", "COUNT", "0"),
        ("BLMPOP", "0", "1", "l", "LEFT", "COUNT", "1", "x"), ("BLMPOP", "0", "1", "l"),
        ("SET", "s", "v"), ("BLPOP", "nol", "s", "0"), ("BRPOP", "s", "1"),
        ("BLMOVE", "s", "d", "LEFT", "LEFT", "0"), ("BRPOPLPUSH", "s", "d", "0"),
        ("BLMPOP", "0", "2", "nol", "s", "LEFT"), ("RPUSH", "l", "x"),
        ("BLMOVE", "l", "s", "LEFT", "LEFT", "0"), ("BRPOPLPUSH", "l", "s", "0"),
        ("LRANGE", "l", "0", "-1"), ("BLPOP", "l", "s", "0"),
    ],
    "blocking_timeouts": [
        ("BLPOP", "nol", "0.01"), ("BRPOP", "nol", "nol2", "0.01"),
        ("BLMOVE", "nol", "d", "LEFT", "RIGHT", "0.01"), ("BRPOPLPUSH", "nol", "d", "0.01"),
        ("BLMPOP", "0.01", "1", "nol", "LEFT"), ("BLPOP", "nol", "0x0.1p-5"),
        ("BLMOVE", "nol", "d", "LEFT", "RIGHT", "0.001"),
    ],
    "blocking_in_multi": [
        ("MULTI",), ("BLPOP", "nol", "0"), ("BRPOP", "nol", "0"),
        ("BLMOVE", "nol", "d", "LEFT", "RIGHT", "0"), ("BRPOPLPUSH", "nol", "d", "0"),
        ("BLMPOP", "0", "1", "nol", "LEFT"), ("RPUSH", "l", "a", "b", "c"), ("BLPOP", "l", "0"),
        ("BLMOVE", "l", "d", "LEFT", "RIGHT", "0"),
        ("BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "5"),
        ("BLPOP", "l", "0"), ("EXEC",),
    ],
}


test_matches_valkey_resp2, test_matches_valkey_resp3 = scenario_tests(SCENARIOS)


def test_arity_errors(diff):
    for cmd in [("LPUSH", "l"), ("RPUSH",), ("LPUSHX", "l"), ("RPUSHX", "l"), ("LLEN",),
                ("LRANGE", "l", "0"), ("LINDEX", "l"), ("LSET", "l", "0"),
                ("LINSERT", "l", "before", "a"), ("LREM", "l", "0"), ("LTRIM", "l", "0"),
                ("LPOS", "l"), ("LMOVE", "a", "b", "LEFT"), ("RPOPLPUSH", "a"),
                ("LMPOP", "1", "l"), ("BLPOP", "l"), ("BRPOP", "l"),
                ("BLMOVE", "a", "b", "LEFT", "RIGHT"), ("BRPOPLPUSH", "a", "b"),
                ("BLMPOP", "0", "1", "l"), ("LPOP",), ("RPOP",)]:
        diff(*cmd)


def test_push_pop_with_valkey_py(r):
    assert r.lpush("q", "a", "b") == 2
    assert r.rpush("q", "c") == 3
    assert r.lrange("q", 0, -1) == [b"b", b"a", b"c"]
    assert r.lpop("q") == b"b"
    assert r.rpop("q") == b"c"
    assert r.lpop("q", 5) == [b"a"]
    assert r.exists("q") == 0
    assert r.lpop("q") is None
    assert r.lpop("q", 2) is None
    assert r.lpushx("q", "x") == 0 and r.exists("q") == 0
    r.set("s", "v")
    with pytest.raises(valkey.ResponseError, match="WRONGTYPE"):
        r.lpush("s", "x")


def test_count_zero_and_missing_resp3(r3):
    r3.rpush("l", "a")
    assert r3.lpop("l", 0) == []
    assert r3.lpop("nol", 0) is None
    assert r3.rpop("nol") is None
    assert r3.lmpop(1, "nol", direction="LEFT") is None
    assert r3.blpop(["nol"], timeout=0.01) is None
    assert r3.execute_command("LPOS", "l", "a", "COUNT", "0") == [0]
    assert r3.lpos("nol", "a") is None


def test_reliable_queue_with_valkey_py(r):
    r.lpush("jobs", "j1", "j2", "j3")
    job = r.lmove("jobs", "processing", "RIGHT", "LEFT")
    assert job == b"j1"
    assert r.lrange("processing", 0, -1) == [b"j1"]
    assert r.lrem("processing", 1, job) == 1
    assert r.exists("processing") == 0
    # A dead worker's job goes back to the queue's consuming end.
    r.lmove("jobs", "processing", "RIGHT", "LEFT")
    assert r.lmove("processing", "jobs", "LEFT", "RIGHT") == b"j2"
    assert r.lrange("jobs", 0, -1) == [b"j3", b"j2"]


def test_big_list_ranges_from_both_ends(r):
    n = 5000
    r.rpush("big", *range(n))
    assert r.lrange("big", 10, 12) == [b"10", b"11", b"12"]
    assert r.lrange("big", -3, -1) == [b"4997", b"4998", b"4999"]
    assert r.lrange("big", n - 5, n + 5) == [str(i).encode() for i in range(n - 5, n)]
    assert r.lindex("big", n - 1) == b"4999"
    assert r.lindex("big", -n) == b"0"
    assert r.lpos("big", "4990", rank=-1) == 4990
    assert r.lpos("big", "4990", maxlen=100) is None
    r.ltrim("big", 100, -101)
    assert r.llen("big") == n - 200
    assert r.lindex("big", 0) == b"100"
    r.ltrim("big", 1, 2)
    assert r.lrange("big", 0, -1) == [b"101", b"102"]


def test_emptied_list_is_deleted_by_every_command(r):
    for cmd in [("LPOP", "k"), ("RPOP", "k", "3"), ("LREM", "k", "0", "x"),
                ("LTRIM", "k", "1", "0"), ("LMPOP", "1", "k", "LEFT"),
                ("LMOVE", "k", "other", "LEFT", "LEFT"), ("BLPOP", "k", "0"),
                ("BLMPOP", "0", "1", "k", "RIGHT", "COUNT", "2")]:
        r.delete("k", "other")
        r.rpush("k", "x")
        r.execute_command(*cmd)
        assert r.exists("k") == 0, cmd
        assert r.type("k") == b"none"


def test_keyspace_events(r, server):
    with KeyEvents(r, server) as ev:
        r.rpush("a", "1", "2")
        r.lmove("a", "b", "LEFT", "RIGHT")
        r.lmove("a", "b", "RIGHT", "LEFT")
        r.lset("b", 0, "x")
        r.linsert("b", "BEFORE", "x", "y")
        r.lrem("b", 1, "y")
        r.ltrim("b", 0, 0)
        r.lpop("b")
        assert ev.collect(12) == [
            ("rpush", b"a"), ("rpush", b"b"), ("lpop", b"a"), ("lpush", b"b"), ("rpop", b"a"),
            ("del", b"a"), ("lset", b"b"), ("linsert", b"b"), ("lrem", b"b"), ("ltrim", b"b"),
            ("lpop", b"b"), ("del", b"b")]


def test_watch_is_touched_by_list_writes(r):
    for cmd in [("RPUSH", "w", "x"), ("LTRIM", "w", "1", "-1"), ("LSET", "w", "0", "y"),
                ("LMOVE", "w", "w", "LEFT", "RIGHT")]:
        r.delete("w")
        r.rpush("w", "a")
        with pytest.raises(valkey.WatchError):
            exec_after_watch(r, "w", cmd, read="unrelated")
    # A failed LINSERT / LREM that finds nothing does not touch the key, nor
    # an LTRIM that trims nothing (valkey-server 8.1.8: the ltrim event only;
    # fakeredis's test_watch_when_ltrim_does_not_change_value).
    for cmd in [("LREM", "w", "0", "zz"), ("LTRIM", "w", "0", "-1")]:
        r.delete("w")
        r.rpush("w", "a")
        assert exec_after_watch(r, "w", cmd, read="unrelated") == [None]


def test_pushes_count_every_element_as_a_change(r):
    def dirty():
        return r.info("persistence")["rdb_changes_since_last_save"]
    before = dirty()
    r.rpush("d", "a", "b", "c")
    r.lmove("d", "e", "LEFT", "LEFT")
    r.ltrim("d", 0, -1)          # trims nothing: no change counted
    r.lpop("d", 2)
    assert dirty() - before == 3 + 1 + 0 + 2


def test_random_list_operations_match_valkey(diff):
    """A seeded random walk over every non-blocking list command on three
    keys (one sometimes a string): each reply must match Valkey's bytes."""
    import random
    rnd = random.Random(20240601)
    keys = ["a", "b", "c"]
    vals = ["x", "y", "z", "1", "01", "", "x" * 70]
    idx = ["0", "1", "-1", "2", "-2", "3", "-5", "7", "100", "-100"]

    def k():
        return rnd.choice(keys)

    def v():
        return rnd.choice(vals)

    def i():
        return rnd.choice(idx)

    def side():
        return rnd.choice(["LEFT", "RIGHT", "left", "Right"])

    makers = [
        lambda: ("LPUSH", k(), *[v() for _ in range(rnd.randint(1, 4))]),
        lambda: ("RPUSH", k(), *[v() for _ in range(rnd.randint(1, 4))]),
        lambda: ("LPUSHX", k(), v()), lambda: ("RPUSHX", k(), v(), v()),
        lambda: ("LPOP", k()), lambda: ("RPOP", k(), rnd.choice(["0", "1", "2", "5"])),
        lambda: ("LLEN", k()), lambda: ("LRANGE", k(), i(), i()), lambda: ("LINDEX", k(), i()),
        lambda: ("LSET", k(), i(), v()),
        lambda: ("LINSERT", k(), rnd.choice(["BEFORE", "AFTER"]), v(), v()),
        lambda: ("LREM", k(), rnd.choice(["0", "1", "-1", "2", "-2"]), v()),
        lambda: ("LTRIM", k(), i(), i()),
        lambda: ("LPOS", k(), v(), "RANK", rnd.choice(["1", "-1", "2", "-2"]),
                 "COUNT", rnd.choice(["0", "1", "2"]), "MAXLEN", rnd.choice(["0", "2", "5"])),
        lambda: ("LPOS", k(), v()),
        lambda: ("LMOVE", k(), k(), side(), side()), lambda: ("RPOPLPUSH", k(), k()),
        lambda: ("LMPOP", "2", k(), k(), side(), "COUNT", rnd.choice(["1", "3"])),
        lambda: ("BLMOVE", k(), k(), side(), side(), "0.01"),
        lambda: ("BLMPOP", "0.01", "3", "a", "b", "c", side()),
        lambda: ("SET", k(), "str"), lambda: ("DEL", k()),
    ]
    weights = [6, 6, 2, 2, 3, 3, 1, 4, 3, 2, 2, 3, 2, 2, 1, 3, 1, 2, 1, 1, 1, 1]
    for _ in range(600):
        cmd = rnd.choices(makers, weights)[0]()
        diff(*cmd)
    for key in keys:
        if diff("TYPE", key) == b"+list\r\n":
            diff("LRANGE", key, "0", "-1")
