"""The keyspace commands (hotkv/commands/keyspace.py): DEL/UNLINK/EXISTS/
TOUCH/TYPE/KEYS/SCAN/RANDOMKEY, RENAME/RENAMENX, COPY, MOVE and OBJECT,
byte for byte against the reference Valkey (``diff``) and through
valkey-py (``r``) and redis-py RESP3 (``r3``).  SCAN's guarantee (a key
present for the whole iteration is returned at least once, whatever is
written meanwhile) and its bounded per-call work are checked on a live
server.  Expiry commands are in test_expire.py."""

from __future__ import annotations

import random
import time

import pytest
import valkey

from support import KeyEvents, RawClient, exec_after_watch, scenario_tests

SCENARIOS = {
    "del_exists_touch": [
        ("MSET", "a", "1", "b", "2", "c", "3"), ("EXISTS", "a", "a", "nok", "b"),
        ("TOUCH", "a", "nok", "c", "c"), ("DEL", "a", "a", "nok"), ("EXISTS", "a"),
        ("UNLINK", "b", "c", "nok"), ("EXISTS", "b", "c"), ("DEL", "nok"), ("UNLINK", "nok"),
        ("RPUSH", "l", "x"), ("SADD", "s", "x"), ("HSET", "h", "f", "v"), ("ZADD", "z", "1", "m"),
        ("DEL", "l", "s", "h", "z"), ("EXISTS", "l", "s", "h", "z"),
    ],
    "type": [
        ("TYPE", "nok"), ("SET", "s", "v"), ("TYPE", "s"), ("RPUSH", "l", "x"), ("TYPE", "l"),
        ("SADD", "st", "x"), ("TYPE", "st"), ("HSET", "h", "f", "v"), ("TYPE", "h"),
        ("ZADD", "z", "1", "m"), ("TYPE", "z"), ("XADD", "x", "1-1", "f", "v"), ("TYPE", "x"),
    ],
    "keys": [
        ("KEYS", "*"), ("SET", "foo", "1"), ("KEYS", "*"), ("KEYS", "f*"), ("KEYS", "f?o"),
        ("KEYS", "f[a-z]o"), ("KEYS", "f[^o]o"), ("KEYS", "bar*"), ("KEYS", "foo"),
        ("KEYS", "fo\\o"),
        ("KEYS", "FOO"), ("KEYS", "[f]oo"), ("KEYS", "*o"), ("KEYS", "f*x"),
        ("SET", "a*b", "1"), ("KEYS", "a\\*b"), ("KEYS", "a\\*c"), ("DEL", "foo"), ("KEYS", "*b"),
    ],
    "scan_errors": [
        ("SCAN", "0"), ("SET", "k", "v"), ("SCAN", "0"), ("SCAN", "0", "COUNT", "100"),
        ("SCAN", "0", "MATCH", "k*"), ("SCAN", "0", "MATCH", "x*"), ("SCAN", "0", "TYPE", "string"),
        ("SCAN", "0", "TYPE", "STRING"), ("SCAN", "0", "TYPE", "list"),
        ("SCAN", "0", "TYPE", "zset"),
        ("SCAN", "0", "TYPE", "stream"), ("SCAN", "0", "TYPE", "hash"),
        ("SCAN", "0", "TYPE", "set"),
        ("SCAN", "00"), ("SCAN", "+0"), ("SCAN", " 0"), ("SCAN", "-0"),
        ("SCAN", "x"), ("SCAN", "-1"), ("SCAN", "1.5"), ("SCAN", ""),
        ("SCAN", "18446744073709551616"),
        ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "-1"), ("SCAN", "0", "COUNT", "x"),
        ("SCAN", "0", "TYPE", "foo"), ("SCAN", "0", "NOVALUES"), ("SCAN", "0", "NOSCORES"),
        ("SCAN", "0", "MATCH"), ("SCAN", "0", "COUNT"), ("SCAN", "0", "TYPE"), ("SCAN", "0", "FOO"),
        ("SCAN", "0", "match", "*", "count", "5", "type", "string"),
    ],
    "rename": [
        ("RENAME", "nok", "x"), ("RENAME", "nok", "nok"), ("RENAMENX", "nok", "x"),
        ("SET", "a", "1"), ("RENAME", "a", "a"), ("RENAMENX", "a", "a"), ("RENAME", "a", "b"),
        ("EXISTS", "a"), ("GET", "b"), ("SET", "c", "3"), ("RENAMENX", "b", "c"), ("GET", "b"),
        ("RENAME", "b", "c"), ("GET", "c"), ("EXISTS", "b"), ("RPUSH", "l", "x", "y"),
        ("RENAME", "l", "c"), ("TYPE", "c"), ("LRANGE", "c", "0", "-1"), ("RENAMENX", "c", "d"),
        ("TYPE", "d"), ("EXPIRE", "d", "100"), ("RENAME", "d", "e"), ("TTL", "e"),
        ("SET", "f", "v"),
        ("EXPIRE", "f", "200"), ("RENAME", "e", "f"), ("TTL", "f"),
    ],
    "move": [
        ("SET", "k", "v"), ("MOVE", "k", "0"), ("MOVE", "k", "16"), ("MOVE", "k", "-1"),
        ("MOVE", "k", "x"), ("MOVE", "k", "4294967296"), ("MOVE", "k", "2147483648"),
        ("MOVE", "nok", "1"), ("EXPIRE", "k", "100"), ("MOVE", "k", "1"), ("EXISTS", "k"),
        ("SELECT", "1"), ("GET", "k"), ("TTL", "k"), ("SET", "k2", "other"), ("SELECT", "0"),
        ("SET", "k2", "mine"), ("MOVE", "k2", "1"), ("GET", "k2"), ("SELECT", "1"), ("GET", "k2"),
        ("FLUSHDB",), ("SELECT", "0"),
    ],
    "copy": [
        ("SET", "k", "v"), ("COPY", "k", "k"), ("COPY", "k", "k", "DB", "0"),
        ("COPY", "k", "k2", "DB", "16"),
        ("COPY", "k", "k2", "DB", "x"), ("COPY", "k", "k2", "DB", "-1"),
        ("COPY", "k", "k2", "DB", "4294967296"),
        ("COPY", "k", "k2", "FOO"), ("COPY", "k", "k2", "DB"), ("COPY", "nok", "k2"),
        ("COPY", "k", "k2"),
        ("GET", "k2"), ("SET", "k", "w"), ("COPY", "k", "k2"), ("GET", "k2"),
        ("COPY", "k", "k2", "REPLACE"),
        ("GET", "k2"), ("EXPIRE", "k", "100"), ("COPY", "k", "k3"), ("TTL", "k3"),
        ("COPY", "k", "k", "DB", "1"), ("SELECT", "1"), ("GET", "k"), ("TTL", "k"), ("FLUSHDB",),
        ("SELECT", "0"), ("COPY", "k", "k4", "replace", "db", "0", "REPLACE"),
        ("RPUSH", "l", "a", "b"), ("COPY", "l", "l2"), ("LRANGE", "l2", "0", "-1"),
        ("RPUSH", "l2", "c"),
        ("LLEN", "l"), ("HSET", "h", "f", "v"), ("COPY", "h", "h2"), ("HSET", "h2", "g", "w"),
        ("HGETALL", "h"), ("HLEN", "h2"), ("SADD", "s", "1", "2"), ("COPY", "s", "s2"),
        ("SADD", "s2", "3"),
        ("SCARD", "s"), ("ZADD", "z", "1", "a"), ("COPY", "z", "z2"), ("ZADD", "z2", "2", "b"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZCARD", "z2"), ("XADD", "x", "1-1", "f", "v"),
        ("COPY", "x", "x2"), ("XADD", "x2", "2-1", "g", "w"), ("XLEN", "x"), ("XLEN", "x2"),
        ("COPY", "l", "h", "REPLACE"), ("TYPE", "h"),
    ],
    "randomkey": [
        ("RANDOMKEY",), ("SET", "only", "1"), ("RANDOMKEY",), ("RANDOMKEY",), ("DEL", "only"),
        ("RANDOMKEY",),
    ],
    "object": [
        ("OBJECT", "ENCODING", "nok"), ("OBJECT", "REFCOUNT", "nok"), ("OBJECT", "IDLETIME", "nok"),
        ("OBJECT", "FREQ", "nok"), ("OBJECT", "HELP"), ("OBJECT", "help"), ("OBJECT", "FOO"),
        ("OBJECT", "FOO", "k"), ("OBJECT", "ENCODING"), ("OBJECT", "ENCODING", "a", "b"),
        ("OBJECT", "HELP", "x"), ("SET", "n", "12345"), ("OBJECT", "ENCODING", "n"),
        ("SET", "n", "-9223372036854775808"), ("OBJECT", "ENCODING", "n"),
        ("SET", "n", "01"), ("OBJECT", "ENCODING", "n"), ("SET", "e", "short"),
        ("OBJECT", "ENCODING", "e"), ("SET", "r", "x" * 50), ("OBJECT", "ENCODING", "r"),
        ("OBJECT", "REFCOUNT", "n"), ("OBJECT", "REFCOUNT", "e"), ("OBJECT", "IDLETIME", "e"),
        ("OBJECT", "FREQ", "e"), ("RPUSH", "l", "a", "b"), ("OBJECT", "ENCODING", "l"),
        ("RPUSH", "bigl", *(["x" * 100] * 100)), ("OBJECT", "ENCODING", "bigl"),
        ("HSET", "h", "f", "v"), ("OBJECT", "ENCODING", "h"), ("HSET", "bigh", "f", "v" * 100),
        ("OBJECT", "ENCODING", "bigh"), ("SADD", "si", "1", "2"), ("OBJECT", "ENCODING", "si"),
        ("SADD", "sl", "a", "b"), ("OBJECT", "ENCODING", "sl"),
        ("SADD", "sh", *map(str, range(200)), "a"),
        ("OBJECT", "ENCODING", "sh"), ("ZADD", "z", "1", "a"), ("OBJECT", "ENCODING", "z"),
        ("ZADD", "bigz", "1", "m" * 100), ("OBJECT", "ENCODING", "bigz"),
        ("XADD", "x", "1-1", "f", "v"), ("OBJECT", "ENCODING", "x"), ("OBJECT", "REFCOUNT", "x"),
    ],
}


test_matches_valkey_resp2, test_matches_valkey_resp3 = scenario_tests(SCENARIOS)


def test_arity_errors(diff):
    for cmd in [("DEL",), ("UNLINK",), ("EXISTS",), ("TOUCH",), ("TYPE",), ("TYPE", "a", "b"),
                ("KEYS",), ("KEYS", "a", "b"), ("SCAN",), ("RENAME", "a"), ("RENAMENX", "a"),
                ("COPY", "a"), ("MOVE", "a"), ("RANDOMKEY", "x"), ("OBJECT",),
                ("OBJECT", "REFCOUNT"), ("OBJECT", "FREQ"), ("OBJECT", "IDLETIME", "a", "b")]:
        diff(*cmd)


def test_keys_lists_every_live_key(r):
    r.mset({f"user:{i}": i for i in range(50)})
    r.mset({f"item:{i}": i for i in range(30)})
    r.set("user:gone", "x", px=1)
    time.sleep(0.01)
    assert sorted(r.keys("user:*")) == sorted(f"user:{i}".encode() for i in range(50))
    assert len(r.keys("*")) == 80
    assert sorted(r.keys("item:1?")) == [f"item:1{i}".encode() for i in range(10)]
    assert sorted(r.keys("item:[12]")) == [b"item:1", b"item:2"]


# ----------------------------------------------------------------------
# SCAN
# ----------------------------------------------------------------------

def _full_scan(r, **kw):
    seen = []
    cursor = 0
    calls = 0
    while True:
        cursor, keys = r.scan(cursor, **kw)
        seen.extend(keys)
        calls += 1
        if cursor == 0:
            return seen, calls


def test_scan_returns_every_key(r):
    r.mset({f"k{i}": i for i in range(2000)})
    seen, calls = _full_scan(r, count=100)
    assert set(seen) == {f"k{i}".encode() for i in range(2000)}
    assert calls > 5          # it really is incremental
    seen, _ = _full_scan(r, match="k1*", count=50)
    assert set(seen) == {f"k{i}".encode() for i in range(2000) if str(i).startswith("1")}


def test_scan_type_filter_and_options(r3):
    r3.mset({f"s{i}": i for i in range(30)})
    for i in range(20):
        r3.rpush(f"l{i}", "x")
        r3.hset(f"h{i}", "f", "v")
    assert set(r3.scan_iter(_type="list", count=7)) == {f"l{i}".encode() for i in range(20)}
    assert set(r3.scan_iter(_type="HASH")) == {f"h{i}".encode() for i in range(20)}
    assert set(r3.scan_iter(match="s1*", _type="string")) == {
        f"s{i}".encode() for i in range(30) if str(i).startswith("1")}
    assert set(r3.scan_iter(_type="zset")) == set()


def test_scan_call_work_is_bounded(r):
    """COUNT bounds each call's work: a call never walks the whole keyspace."""
    n = 20000
    pipe = r.pipeline(transaction=False)
    for i in range(0, n, 1000):
        pipe.mset({f"key:{j}": "v" for j in range(i, i + 1000)})
    pipe.execute()
    cursor, keys = r.scan(0, count=10)
    assert 1 <= len(keys) < 200 and cursor != 0
    # A MATCH that filters everything out still only samples ~COUNT keys
    # (10*COUNT buckets at most) per call.
    calls = 0
    cursor = 0
    while True:
        cursor, keys = r.scan(cursor, match="nothing*", count=10)
        assert keys == []
        calls += 1
        if cursor == 0:
            break
    assert calls > 100


def test_scan_guarantee_under_concurrent_writes(r):
    """Keys present for the whole scan are all returned while other keys are
    added and removed between calls -- enough to grow and shrink the index
    several times."""
    rng = random.Random(1)
    stable = {f"stable:{i}".encode() for i in range(3000)}
    r.mset({k: "v" for k in stable})
    transient = []
    seen = set()
    cursor = 0
    step = 0
    while True:
        cursor, keys = r.scan(cursor, count=rng.choice([5, 20, 100]))
        seen.update(keys)
        step += 1
        phase = (step // 15) % 2
        if phase == 0:      # grow: add many
            batch = [f"t:{step}:{i}" for i in range(400)]
            r.mset({k: "v" for k in batch})
            transient.extend(batch)
        elif transient:     # shrink: remove many
            cut = transient[:600]
            del transient[:600]
            r.delete(*cut)
        if cursor == 0:
            break
    assert stable <= seen, len(stable - seen)
    # A second scan after everything settled is exact too.
    seen2, _ = _full_scan(r, match="stable:*", count=1000)
    assert set(seen2) == stable


def test_scan_survives_deleting_almost_everything(r):
    r.mset({f"a{i}": 1 for i in range(5000)})
    r.mset({f"keep{i}": 1 for i in range(10)})
    cursor, first = r.scan(0, count=50)
    r.delete(*[f"a{i}" for i in range(5000)])
    seen = set(first)
    while cursor != 0:
        cursor, keys = r.scan(cursor, count=50)
        seen.update(keys)
    assert {f"keep{i}".encode() for i in range(10)} <= seen


def test_scan_skips_and_deletes_expired_keys(r):
    r.set("live", 1)
    r.set("dead", 1, px=1)
    time.sleep(0.01)
    seen, _ = _full_scan(r)
    assert seen == [b"live"]
    assert r.dbsize() == 1


def test_scan_after_swapdb_and_flush(r):
    r.mset({f"zero{i}": 1 for i in range(100)})
    r.execute_command("SELECT", 1)   # the pool has one connection in use
    try:
        r.mset({f"one{i}": 1 for i in range(50)})
        r.swapdb(0, 1)
        seen, _ = _full_scan(r)
        assert set(seen) == {f"zero{i}".encode() for i in range(100)}
        r.flushdb()
        assert _full_scan(r)[0] == []
    finally:
        r.execute_command("SELECT", 0)
    seen, _ = _full_scan(r)
    assert set(seen) == {f"one{i}".encode() for i in range(50)}


# ----------------------------------------------------------------------
# RANDOMKEY / RENAME / MOVE / COPY
# ----------------------------------------------------------------------

def test_randomkey_is_random_and_live(r):
    assert r.randomkey() is None
    r.mset({f"k{i}": i for i in range(200)})
    got = {r.randomkey() for _ in range(300)}
    assert got <= {f"k{i}".encode() for i in range(200)}
    assert len(got) > 50
    # Expired keys are never returned (and get deleted on the way).
    r.flushall()
    for i in range(20):
        r.set(f"dead{i}", 1, px=1)
    r.set("alive", 1)
    time.sleep(0.01)
    assert {r.randomkey() for _ in range(20)} == {b"alive"}


def test_rename_move_copy_with_valkey_py(r):
    r.set("a", "1", ex=100)
    assert r.rename("a", "b") is True
    assert r.get("b") == b"1" and 99 <= r.ttl("b") <= 100
    assert r.renamenx("b", "b") is False
    r.set("c", "x")
    assert r.renamenx("b", "c") is False
    with pytest.raises(valkey.ResponseError, match="no such key"):
        r.rename("nope", "x")
    assert r.copy("b", "c") is False
    assert r.copy("b", "c", replace=True) is True and r.get("c") == b"1"
    assert r.copy("b", "b", destination_db=2) is True
    assert r.move("b", 3) is True and r.exists("b") == 0
    r2 = valkey.Valkey(host=r.connection_pool.connection_kwargs["host"],
                       port=r.connection_pool.connection_kwargs["port"], db=3)
    assert r2.get("b") == b"1" and 0 < r2.ttl("b") <= 100
    r2.flushdb()
    r2.close()
    with pytest.raises(valkey.ResponseError, match="source and destination objects are the same"):
        r.move("c", 0)


def test_copy_is_deep_for_every_type(r3):
    r3.rpush("l", "a", "b")
    r3.hset("h", mapping={"f": "1"})
    r3.sadd("s", "x")
    r3.zadd("z", {"m": 1})
    r3.xadd("x", {"f": "v"}, id="1-1")
    r3.xgroup_create("x", "g", id="0")
    for key in ["l", "h", "s", "z", "x"]:
        assert r3.copy(key, key + "2") == 1
    r3.rpush("l2", "c")
    r3.hset("h2", "f", "2")
    r3.sadd("s2", "y")
    r3.zadd("z2", {"m": 5})
    r3.xadd("x2", {"g": "w"}, id="2-1")
    r3.xreadgroup("g", "c1", {"x2": ">"})
    assert r3.lrange("l", 0, -1) == [b"a", b"b"]
    assert r3.hgetall("h") == {b"f": b"1"}
    assert r3.smembers("s") == {b"x"}
    assert r3.zscore("z", "m") == 1
    assert r3.xlen("x") == 1
    assert r3.xpending("x", "g")["pending"] == 0
    assert r3.xpending("x2", "g")["pending"] == 2


def test_rename_onto_a_blocked_key_serves_the_waiter(server, r):
    w = RawClient(server.host, server.port)
    try:
        w.send("BLPOP", "dst", "5")
        deadline = time.time() + 5
        while r.info("clients")["blocked_clients"] != 1 and time.time() < deadline:
            time.sleep(0.005)
        r.rpush("src", "job")
        r.rename("src", "dst")
        assert w.read_reply() == b"*2\r\n$3\r\ndst\r\n$3\r\njob\r\n"
    finally:
        w.close()


def test_writes_touch_watched_keys(r):
    for setup, cmd in [(("SET", "w", "1"), ("DEL", "w")),
                       (("SET", "w", "1"), ("RENAME", "w", "other")),
                       (("SET", "other", "1"), ("RENAME", "other", "w")),
                       (("SET", "other", "1"), ("COPY", "other", "w")),
                       (("SET", "w", "1"), ("MOVE", "w", "1"))]:
        r.flushall()
        r.execute_command(*setup)
        with pytest.raises(valkey.WatchError):
            exec_after_watch(r, "w", cmd)
    # Commands that change nothing do not touch.
    r.flushall()
    r.set("w", "1")
    assert exec_after_watch(r, "w", ("DEL", "nokey"), ("COPY", "nokey", "w"),
                            ("RENAMENX", "w", "w")) == [b"1"]


def test_keyspace_events(r, server):
    try:
        with KeyEvents(r, server, "__keyevent@*__:*") as ev:
            r.set("a", "1")
            r.rename("a", "b")
            r.copy("b", "c")
            r.move("c", 1)
            r.delete("b", "nokey")
            assert ev.collect(7, with_db=True) == [
                ("0", "set", b"a"), ("0", "rename_from", b"a"), ("0", "rename_to", b"b"),
                ("0", "copy_to", b"c"), ("0", "move_from", b"c"), ("1", "move_to", b"c"),
                ("0", "del", b"b")]
    finally:
        r.execute_command("SELECT", 1)
        r.flushdb()
        r.execute_command("SELECT", 0)


def test_object_with_clients(r, r3):
    r.set("n", 42)
    r.set("s", "hello")
    r.rpush("l", "a")
    assert r.object("encoding", "n") == b"int"
    assert r.object("encoding", "s") == b"embstr"
    assert r3.object("encoding", "l") == b"listpack"
    assert r.object("refcount", "s") == 1
    assert r.object("idletime", "s") == 0
    assert r.object("encoding", "nope") is None
    with pytest.raises(valkey.ResponseError, match="LFU maxmemory policy is not selected"):
        r.object("freq", "s")
    assert r.execute_command("OBJECT", "HELP")[0].startswith(b"OBJECT <subcommand>")


def test_keyspace_hits_and_misses_match_valkey(diff):
    """Reads count a keyspace hit or miss (INFO stats); writes do not."""
    def stats(client):
        text = client.call("INFO", "stats").decode()
        fields = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
        return int(fields["keyspace_hits"]), int(fields["keyspace_misses"])
    before = stats(diff.ours), stats(diff.theirs)
    for cmd in [("GET", "k"), ("SET", "k", "v"), ("GET", "k"), ("EXISTS", "k", "nok"),
                ("TYPE", "k"),
                ("TTL", "k"), ("PTTL", "nok"), ("STRLEN", "k"), ("MGET", "k", "a", "b"),
                ("SET", "k", "w", "GET"), ("GETEX", "k"), ("GETRANGE", "nok", "0", "1"),
                ("OBJECT", "ENCODING", "k"), ("COPY", "k", "k2"), ("LCS", "k", "nok"),
                ("GETBIT", "k", "0"), ("BITCOUNT", "nok"), ("TOUCH", "k", "nok"),
                ("GETSET", "k", "x"),
                ("GETDEL", "k2"), ("INCR", "n"), ("APPEND", "k", "y"), ("EXPIRE", "k", "100"),
                ("DEL", "k", "nok"), ("RENAME", "n", "m"), ("KEYS", "*"), ("SCAN", "0"),
                ("RANDOMKEY",)]:
        diff(*cmd)
    after = stats(diff.ours), stats(diff.theirs)
    ours = (after[0][0] - before[0][0], after[0][1] - before[0][1])
    theirs = (after[1][0] - before[1][0], after[1][1] - before[1][1])
    assert ours == theirs
