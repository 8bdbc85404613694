"""Expiry (hotkv/commands/keyspace.py, the TTL parts of strings.py, and the
lazy/active expiry of hotkv/db.py): EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with
NX/XX/GT/LT, TTL/PTTL/EXPIRETIME/PEXPIRETIME, PERSIST, byte for byte
against Valkey (``diff``) and through valkey-py (``r``) / redis-py RESP3
(``r3``); keys disappearing by lazy and active expiry; the absolute forms
the AOF records; keyspace events."""

from __future__ import annotations

import time

import pytest
import valkey

from support import (
    KeyEvents,
    RawClient,
    aof_commands,
    exec_after_watch,
    scenario_tests,
    start_aof_server,
    wait_for,
)

LLMAX = "9223372036854775807"
LLMIN = "-9223372036854775808"
FAR = "4102444800"           # 2100-01-01, in seconds
FAR_MS = "4102444800000"

SCENARIOS = {
    "expire_errors": [
        ("SET", "k", "v"), ("EXPIRE", "k", "abc"), ("EXPIRE", "k", "1.5"), ("EXPIRE", "k", ""),
        ("EXPIRE", "k", "10", "FOO"), ("EXPIRE", "k", "abc", "FOO"), ("EXPIRE", "k", "abc", "NX"),
        ("EXPIRE", "k", "10", "NX", "XX"), ("EXPIRE", "k", "10", "NX", "GT"),
        ("EXPIRE", "k", "10", "LT", "NX"),
        ("EXPIRE", "k", "10", "GT", "LT"), ("EXPIRE", "k", "10", "XX", "GT", "LT"),
        ("EXPIRE", "k", "9223372036854775"), ("EXPIRE", "k", "9223372036854776"),
        ("EXPIRE", "k", "-9223372036854775"), ("EXPIRE", "k", "-9223372036854776"),
        ("PEXPIRE", "k", LLMAX), ("PEXPIRE", "k", LLMIN), ("EXPIREAT", "k", "9223372036854776"),
        ("PEXPIREAT", "k", LLMAX), ("TTL", "k"), ("EXPIRE", "nok", "abc"),
        ("EXPIRE", "nok", "10", "FOO"),
        ("EXPIRE", "nok", "9223372036854776"), ("PEXPIRE", "k", "1", "nx", "nx"), ("TTL", "k"),
    ],
    "expire_basics": [
        ("EXPIRE", "nok", "100"), ("SET", "k", "v"), ("TTL", "k"), ("PTTL", "k"),
        ("EXPIRETIME", "k"),
        ("PEXPIRETIME", "k"), ("TTL", "nok"), ("PTTL", "nok"), ("EXPIRETIME", "nok"),
        ("PEXPIRETIME", "nok"),
        ("EXPIRE", "k", "100"), ("TTL", "k"), ("PEXPIRE", "k", "200000"), ("TTL", "k"),
        ("EXPIREAT", "k", FAR), ("EXPIRETIME", "k"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800499"), ("EXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800500"),
        ("EXPIRETIME", "k"), ("PEXPIRETIME", "k"), ("PERSIST", "k"), ("PERSIST", "k"), ("TTL", "k"),
        ("PERSIST", "nok"), ("RPUSH", "l", "a"), ("EXPIRE", "l", "100"), ("TTL", "l"),
        ("PERSIST", "l"),
        ("TTL", "l"),
    ],
    "expire_in_the_past_deletes": [
        ("SET", "a", "1"), ("EXPIRE", "a", "-1"), ("EXISTS", "a"), ("SET", "a", "1"),
        ("EXPIRE", "a", "0"),
        ("EXISTS", "a"), ("SET", "a", "1"), ("PEXPIRE", "a", "-100"), ("EXISTS", "a"),
        ("SET", "a", "1"),
        ("EXPIREAT", "a", "1"), ("EXISTS", "a"), ("SET", "a", "1"), ("PEXPIREAT", "a", "0"),
        ("EXISTS", "a"), ("SET", "a", "1"), ("PEXPIREAT", "a", LLMIN), ("EXISTS", "a"),
        ("EXPIRE", "a", "-1"), ("RPUSH", "l", "x"), ("EXPIRE", "l", "-5"), ("EXISTS", "l"),
        ("SET", "a", "1"), ("EXPIRE", "a", "-1", "NX"), ("EXISTS", "a"),
        ("SET", "a", "1", "EX", "100"), ("EXPIRE", "a", "-1", "NX"), ("EXISTS", "a"),
        ("EXPIRE", "a", "-1", "GT"), ("EXISTS", "a"), ("EXPIRE", "a", "-1", "LT"), ("EXISTS", "a"),
    ],
    "expire_conditions": [
        ("SET", "k", "v"),
        ("PEXPIREAT", "k", "4102444800000", "XX"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800000", "GT"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800000", "LT"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444900000", "NX"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800000", "NX"), ("PEXPIREAT", "k", "4102444800000", "XX"),
        ("PEXPIRETIME", "k"), ("PEXPIREAT", "k", "4102444700000", "GT"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", "4102444800000", "GT"), ("PEXPIREAT", "k", "4102444900000", "GT"),
        ("PEXPIRETIME", "k"), ("PEXPIREAT", "k", "4102444900000", "LT"),
        ("PEXPIREAT", "k", "4102444950000", "LT"), ("PEXPIREAT", "k", "4102444850000", "lt"),
        ("PEXPIRETIME", "k"), ("PEXPIREAT", "k", "4102444860000", "XX", "GT"),
        ("PEXPIRETIME", "k"), ("PEXPIREAT", "k", "4102444870000", "XX", "LT"), ("PEXPIRETIME", "k"),
        ("EXPIREAT", "k", "4102444000", "gt", "xx"), ("EXPIRETIME", "k"),
        ("PERSIST", "k"), ("EXPIREAT", "k", FAR, "XX"), ("EXPIREAT", "k", FAR, "GT"), ("TTL", "k"),
        ("EXPIREAT", "k", FAR, "LT"), ("EXPIRETIME", "k"), ("EXPIRE", "nok", "10", "NX"),
        ("EXPIRE", "k", "100", "GT"), ("EXPIRE", "k", "100", "LT"), ("TTL", "k"),
    ],
    "ttl_rounding": [
        ("SET", "k", "v", "EX", "100"), ("TTL", "k"), ("SET", "k", "v", "PX", "100400"),
        ("TTL", "k"),
        ("SET", "k", "v", "PX", "1200"), ("TTL", "k"), ("SET", "k", "v", "PX", "10000"),
        ("TTL", "k"),
        ("SETEX", "k", "1", "v"), ("TTL", "k"), ("PSETEX", "k", "1900", "v"), ("TTL", "k"),
    ],
}


test_matches_valkey_resp2, test_matches_valkey_resp3 = scenario_tests(SCENARIOS)


def test_arity_errors(diff):
    for cmd in [("EXPIRE", "k"), ("PEXPIRE", "k"), ("EXPIREAT", "k"), ("PEXPIREAT", "k"), ("TTL",),
                ("PTTL", "a", "b"), ("EXPIRETIME",), ("PEXPIRETIME", "a", "b"), ("PERSIST",),
                ("PERSIST", "a", "b")]:
        diff(*cmd)


def test_expire_with_valkey_py(r):
    r.set("k", "v")
    assert r.expire("k", 100) is True and r.ttl("k") == 100
    assert 99000 < r.pttl("k") <= 100000
    assert r.expire("k", 50, nx=True) is False
    assert r.expire("k", 200, gt=True) is True and r.ttl("k") == 200
    assert r.expire("k", 300, lt=True) is False
    assert r.pexpire("k", 5000, lt=True) is True and r.ttl("k") == 5
    assert r.expireat("k", int(FAR)) is True and r.expiretime("k") == int(FAR)
    assert r.pexpiretime("k") == int(FAR_MS)
    assert r.persist("k") is True and r.ttl("k") == -1
    assert r.persist("k") is False
    assert r.expire("nope", 10) is False
    assert r.ttl("nope") == -2
    assert r.expire("k", -1) is True and r.exists("k") == 0
    r.set("k", "v")
    with pytest.raises(valkey.ResponseError, match="invalid expire time in 'expire' command"):
        r.expire("k", 9223372036854776)


def test_expire_with_redis_py_resp3(r3):
    r3.set("k", "v", px=100000)
    assert 99 <= r3.ttl("k") <= 100
    assert r3.pexpireat("k", int(FAR_MS), xx=True) == 1
    assert r3.pexpiretime("k") == int(FAR_MS)
    assert r3.getex("k", persist=True) == b"v"
    assert r3.ttl("k") == -1


def test_lazy_expiry(r):
    r.set("k", "v", px=30)
    r.rpush("l", "x")
    r.pexpire("l", 30)
    assert r.get("k") == b"v"
    time.sleep(0.06)
    assert r.get("k") is None
    assert r.exists("l") == 0
    assert r.ttl("k") == -2
    assert r.expire("k", 100) is False
    assert r.persist("l") is False


def test_active_expiry_removes_untouched_keys(r):
    """Keys nobody reads are deleted by the server's cron: a few hundred
    volatile keys among persistent ones (more than one sampling batch)."""
    pipe = r.pipeline(transaction=False)
    for i in range(600):
        pipe.set(f"vol:{i}", "x", px=100)
    for i in range(200):
        pipe.set(f"keep:{i}", "x")
    pipe.execute()
    assert r.dbsize() == 800
    assert wait_for(lambda: r.dbsize() == 200), r.dbsize()
    assert set(r.keys("*")) == {f"keep:{i}".encode() for i in range(200)}


def test_expired_keys_are_counted(r):
    before = r.info("stats")["expired_keys"]
    r.set("a", 1)
    r.expire("a", -1)            # deleted by an expiry in the past
    r.set("b", 1, px=1)
    time.sleep(0.01)
    r.get("b")                   # lazily expired
    assert r.info("stats")["expired_keys"] - before == 2


def test_expire_touches_watched_keys(r):
    for cmd in [("EXPIRE", "w", "100"), ("PERSIST", "w"), ("EXPIRE", "w", "-1"),
                ("SET", "w", "v", "KEEPTTL"), ("GETEX", "w", "PERSIST")]:
        r.flushall()
        r.set("w", "v", ex=50)
        with pytest.raises(valkey.WatchError):
            exec_after_watch(r, "w", cmd)
    # Conditions that do not hold change nothing and touch nothing.
    r.flushall()
    r.set("w", "v", ex=50)
    assert exec_after_watch(r, "w", ("EXPIRE", "w", "100", "NX"),
                            ("EXPIRE", "w", "10", "GT")) == [b"v"]


# ----------------------------------------------------------------------
# Propagation and events
# ----------------------------------------------------------------------

def test_expiry_is_logged_in_absolute_form(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    try:
        c.call("SET", "k", "v")
        t0 = time.time() * 1000
        c.call("EXPIRE", "k", "100")
        c.call("PEXPIRE", "k", "200000", "GT")
        c.call("EXPIREAT", "k", FAR)
        c.call("PEXPIREAT", "k", "4102444800123")
        c.call("EXPIRE", "k", "10", "NX")          # condition fails: not logged
        c.call("EXPIRE", "nokey", "10")            # no key: not logged
        c.call("PERSIST", "k")
        c.call("PERSIST", "k")                      # nothing to remove: not logged
        c.call("EXPIRE", "k", "-1")                 # in the past: DEL
        c.call("SET", "lazy", "v", "PX", "1")
        time.sleep(0.01)
        c.call("GET", "lazy")                       # lazily expired: DEL
        c.call("SET", "sentinel", "1")
    finally:
        c.close()
    cmds = aof_commands(tmp_path)
    assert cmds[0] == [b"SET", b"k", b"v"]
    for i, extra, ttl in [(1, [], 100000), (2, [b"GT"], 200000)]:
        assert cmds[i][0] == b"PEXPIREAT" and cmds[i][1] == b"k" and cmds[i][3:] == extra
        assert t0 - 1000 < int(cmds[i][2]) - ttl < t0 + 5000
    assert cmds[3:7] == [[b"PEXPIREAT", b"k", FAR_MS.encode()],
                         [b"PEXPIREAT", b"k", b"4102444800123"], [b"PERSIST", b"k"], [b"DEL", b"k"]]
    assert cmds[7][:4] == [b"SET", b"lazy", b"v", b"PXAT"]
    assert cmds[8:] == [[b"DEL", b"lazy"], [b"SET", b"sentinel", b"1"]]


def test_active_expiry_is_logged_as_del(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    try:
        c.call("SET", "a", "v", "PX", "50")
        assert wait_for(lambda: c.call("DBSIZE") == b":0\r\n")
        c.call("SET", "sentinel", "1")
    finally:
        c.close()
    cmds = aof_commands(tmp_path)
    assert cmds[0][:4] == [b"SET", b"a", b"v", b"PXAT"]
    assert cmds[1:] == [[b"DEL", b"a"], [b"SET", b"sentinel", b"1"]]


def test_expiry_keyspace_events(r, server):
    with KeyEvents(r, server) as ev:
        r.set("a", "1")
        r.expire("a", 100)
        r.expire("a", 10, nx=True)      # no change, no event
        r.persist("a")
        r.expire("a", -1)
        r.set("b", "1", px=1)
        time.sleep(0.01)
        r.get("b")
        # an expiry in the past is announced as "expired" (Valkey 8.1), not "del"
        assert ev.collect(7) == [("set", b"a"), ("expire", b"a"), ("persist", b"a"),
                                 ("expired", b"a"), ("set", b"b"), ("expire", b"b"),
                                 ("expired", b"b")]


def test_aof_reload_keeps_expired_keys_expired(hotkv_server_factory, tmp_path):
    """Replaying the AOF after a key's time passed: the commands logged
    after it (APPEND here) must meet the key as it was, not recreate it
    without its TTL."""
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    c.call("SET", "k", "v", "PX", "200")
    c.call("APPEND", "k", "x")
    c.call("SET", "k2", "v", "EX", "100")
    c.call("INCR", "n")
    c.close()
    srv.stop()
    time.sleep(0.25)
    srv2 = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = RawClient(srv2.host, srv2.port)
    try:
        assert c.call("GET", "k") == b"$-1\r\n"
        assert c.call("EXISTS", "k2", "n") == b":2\r\n"
        assert 0 < int(c.call("TTL", "k2")[1:-2]) <= 100
    finally:
        c.close()
