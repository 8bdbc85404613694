"""Expiry (hotkv/commands/keyspace.py, the TTL parts of strings.py, and the
lazy/active expiry of hotkv/core/db.py): EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with
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
    ReferenceValkey,
    aof_commands,
    exec_after_watch,
    raw_sync,
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
        pipe.set(f"vol:{i}", "x", px=1500)   # (100 ms: gone before the DBSIZE on a
    for i in range(200):                     # loaded machine, 792 of 800 once)
        pipe.set(f"keep:{i}", "x")
    pipe.execute()
    assert r.dbsize() == 800
    assert wait_for(lambda: r.dbsize() == 200, timeout=15), r.dbsize()
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
        c.call("EXPIRE", "k", "-1")                 # in the past: UNLINK (lazyfree-lazy-expire)
        c.call("SET", "lazy", "v", "PX", "1")
        time.sleep(0.01)
        c.call("GET", "lazy")                       # lazily expired: UNLINK
        c.call("SET", "sentinel", "1")
    finally:
        c.close()
    cmds = aof_commands(tmp_path)
    assert cmds[0] == [b"SET", b"k", b"v"]
    for i, extra, ttl in [(1, [], 100000), (2, [b"GT"], 200000)]:
        assert cmds[i][0] == b"PEXPIREAT" and cmds[i][1] == b"k" and cmds[i][3:] == extra
        assert t0 - 1000 < int(cmds[i][2]) - ttl < t0 + 5000
    assert cmds[3:7] == [[b"PEXPIREAT", b"k", FAR_MS.encode()],
                         [b"PEXPIREAT", b"k", b"4102444800123"], [b"PERSIST", b"k"],
                         [b"UNLINK", b"k"]]
    assert cmds[7][:4] == [b"SET", b"lazy", b"v", b"PXAT"]
    assert cmds[8:] == [[b"UNLINK", b"lazy"], [b"SET", b"sentinel", b"1"]]


def test_expiry_is_logged_as_del_with_lazyfree_off(hotkv_server_factory, tmp_path):
    """lazyfree-lazy-expire no: the deletions are logged as DEL."""
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    try:
        assert c.call("CONFIG", "SET", "lazyfree-lazy-expire", "no") == b"+OK\r\n"
        c.call("SET", "k", "v")
        c.call("EXPIRE", "k", "-1")
        c.call("SET", "a", "v", "PX", "50")
        assert wait_for(lambda: c.call("DBSIZE") == b":0\r\n")
        c.call("SET", "sentinel", "1")
    finally:
        c.close()
    cmds = aof_commands(tmp_path)
    assert cmds[:2] == [[b"SET", b"k", b"v"], [b"DEL", b"k"]]
    assert cmds[3:] == [[b"DEL", b"a"], [b"SET", b"sentinel", b"1"]]


def test_active_expiry_is_logged_as_unlink(hotkv_server_factory, tmp_path):
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
    assert cmds[1:] == [[b"UNLINK", b"a"], [b"SET", b"sentinel", b"1"]]


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


# ----------------------------------------------------------------------
# The replication stream of expiries, against valkey-server 8.1.8
# ----------------------------------------------------------------------

def _stream_of(host: str, port: int, run) -> list:
    """The commands a SYNC replica receives while ``run(client)`` runs,
    PINGs left out, up to the final ``SET end 1``."""
    import hiredis

    s, tail = raw_sync(host, port)
    deadline = time.time() + 15
    c = RawClient(host, port)
    try:
        run(c)
        c.call("SELECT", "0")
        c.call("SET", "end", "1")
    finally:
        c.close()
    end = b"*3\r\n$3\r\nSET\r\n$3\r\nend\r\n$1\r\n1\r\n"
    while end not in tail and time.time() < deadline:
        tail += s.recv(65536)
    s.close()
    reader = hiredis.Reader()
    reader.feed(tail.lstrip(b"\n"))
    out = []
    while (argv := reader.gets()) is not False:
        if not (len(argv) == 1 and argv[0].upper() == b"PING"):   # (valkey sends "ping")
            out.append(argv)
    return out


def _runs_sorted(cmds: list) -> list:
    """Consecutive UNLINK/DEL of one key each sorted by key: which of two
    expired keys a scan meets first is the hash table's order."""
    out, run = [], []
    for argv in cmds + [None]:
        if argv is not None and argv[0].upper() in (b"UNLINK", b"DEL") and len(argv) == 2:
            run.append(argv)
            continue
        out.extend(sorted(run, key=lambda a: a[1]))
        run = []
        if argv is not None:
            # absolute times differ between the servers: keep their place only
            out.append([b"<ms>" if a.isdigit() and len(a) >= 12 else a for a in argv])
    return out


def _expiry_scenario(c):
    def two_expired(*names):
        for name in names:
            c.call("SET", name, "bar", "PX", "1")
        c.call("DEBUG", "SLEEP", "0.01")

    assert c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"+OK\r\n"
    try:
        c.call("FLUSHALL")
        two_expired("foo1", "foo2")
        c.call("SCAN", "0")                  # two UNLINKs, no MULTI
        two_expired("foo1", "foo2")
        c.call("RANDOMKEY")                  # the same
        two_expired("foo1", "foo2")
        c.call("MULTI")
        c.call("SCAN", "0")
        c.call("EXEC")                       # inside EXEC: one MULTI/EXEC unit
        two_expired("foo")
        c.call("GET", "foo")                 # the read is not propagated
        c.call("SET", "x", "1")
        for write in (("MSET", "k", "1", "j", "2"), ("INCR", "k"), ("RENAME", "k", "n")):
            two_expired("k")
            c.call(*write)                   # UNLINK first: with the write, a MULTI unit
        c.call("SET", "g", "bar", "PX", "100000")
        c.call("GETEX", "g", "PERSIST")
        c.call("GETEX", "g", "PXAT", "1")    # in the past: UNLINK
        c.call("SET", "e", "1")
        c.call("EXPIRE", "e", "-1")          # in the past: UNLINK (lazyfree-lazy-expire)
        c.call("SADD", "s", "a", "b")
        c.call("SPOP", "s", "5")             # the whole set: UNLINK (lazyfree-lazy-server-del)
        c.call("SET", "d", "v")
        payload = c.call("DUMP", "d")
        data = payload.split(b"\r\n", 1)[1][:-2]
        c.call("RESTORE", "r", "1", data, "ABSTTL")   # expired already: UNLINK? no key: nothing
        c.call("RESTORE", "d", "1", data, "ABSTTL", "REPLACE")   # replaced, expired: UNLINK
    finally:
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_expiry_stream_as_valkey(hotkv_server_factory, ref_server):
    """Lazy expiries met by SCAN and RANDOMKEY go out as single UNLINKs (in
    EXEC as one MULTI/EXEC unit), a read that met an expired key is not
    propagated, GETEX/EXPIRE in the past, SPOP of a whole set and RESTORE of
    an expired key propagate UNLINK: the lazyfree-lazy-* defaults (all yes)
    and the stream equal to valkey-server 8.1.8's."""
    srv = hotkv_server_factory(**{"repl-diskless-sync-delay": 0, "enable-debug-command": "yes"})
    ours = _stream_of(srv.host, srv.port, _expiry_scenario)
    theirs = _stream_of(ref_server.host, ref_server.port, _expiry_scenario)
    assert _runs_sorted(ours) == _runs_sorted(theirs)
    assert [b"MULTI"] not in ours[:8]        # the canonical form kept MULTI where it was


def test_active_expiry_stream_as_valkey(hotkv_server_factory, ref_server):
    """Several keys deleted by one active-expiry cycle: one UNLINK each, no
    MULTI around them, as valkey-server 8.1.8 sends them."""
    def run(c):
        c.call("FLUSHALL")
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        for i in range(5):
            c.call("SET", "k%d" % i, "v", "PX", "1")
        c.call("DEBUG", "SLEEP", "0.01")
        c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        assert wait_for(lambda: c.call("DBSIZE") == b":0\r\n")

    srv = hotkv_server_factory(**{"repl-diskless-sync-delay": 0, "enable-debug-command": "yes"})
    ours = _stream_of(srv.host, srv.port, run)
    theirs = _stream_of(ref_server.host, ref_server.port, run)
    assert _runs_sorted(ours) == _runs_sorted(theirs)
    assert sum(1 for a in ours if a[0] == b"UNLINK") == 5


@pytest.mark.parametrize("kind", ["hotkv", "valkey"])
def test_writable_replica_expires_its_own_keys(kind, hotkv_server_factory, tmp_path):
    """A key a writable replica's own client set with a TTL is expired by
    the replica's cron (no primary will send its UNLINK), counted in
    expired_keys, with the replica's AOF off and on; the primary's keys
    keep waiting for the primary.  Same on valkey-server 8.1.8."""
    refs = []
    if kind == "hotkv":
        prim = hotkv_server_factory(**{"enable-debug-command": "yes",
                                       "repl-diskless-sync-delay": 0})
        rep = hotkv_server_factory(dir=str(tmp_path))
    else:
        prim = ReferenceValkey("--repl-diskless-sync-delay", "0").start()
        rep = ReferenceValkey().start()
        refs = [prim, rep]
    try:
        p = valkey.Valkey(host=prim.host, port=prim.port)
        r = valkey.Valkey(host=rep.host, port=rep.port)
        r.execute_command("REPLICAOF", "127.0.0.1", prim.port)
        assert wait_for(lambda: r.info("replication")["master_link_status"] == "up", 20)
        p.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")   # the primary's keys stay
        p.set("theirs", "v", px=1)
        assert wait_for(lambda: r.exists("theirs") == 0 and r.dbsize() == 1)
        r.config_set("replica-read-only", "no")
        for aof in ("yes", "no"):
            r.config_set("appendonly", aof)
            assert wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0)
            before = r.info("stats")["expired_keys"]
            r.set("foo", "bar", px=1)
            assert wait_for(lambda: r.info("stats")["expired_keys"] == before + 1), aof
            assert r.get("foo") is None
            assert r.dbsize() == 1          # "theirs": not the replica's to delete
            assert r.info("stats")["slave_expires_tracked_keys"] == 0
        r.set("later", "v", ex=1000)
        assert r.info("stats")["slave_expires_tracked_keys"] == 1
    finally:
        for s in refs:
            s.stop()


@pytest.mark.parametrize("lazy", ["yes", "no"])
def test_expired_big_value_is_freed_lazily(target, lazy):
    """lazyfree-lazy-expire yes (the default): a big value whose key expires
    is freed in the background, counted in lazyfreed_objects; a small one,
    or any with the setting off, is freed at once.  Same on both servers."""
    c = target.admin
    assert c.call("CONFIG", "SET", "lazyfree-lazy-expire", lazy) == b"+OK\r\n"
    try:
        def freed() -> int:
            text = c.call("INFO", "memory").decode()
            return int(text.split("lazyfreed_objects:")[1].split("\r\n")[0])

        def pending() -> int:
            text = c.call("INFO", "memory").decode()
            return int(text.split("lazyfree_pending_objects:")[1].split("\r\n")[0])

        # What an earlier test left to free in the background (the fixture's
        # FLUSHALL of the session server, asynchronous when a test set
        # lazyfree-lazy-user-flush) is counted before the baseline is read.
        assert wait_for(lambda: pending() == 0)
        before = freed()
        c.call("SADD", "big", *["m%d" % i for i in range(1000)])
        c.call("SET", "small", "v")
        for key in ("big", "small"):
            c.call("PEXPIRE", key, "1")
        time.sleep(0.01)
        assert c.call("EXISTS", "big", "small") == b":0\r\n"     # lazily expired
        want = 1 if lazy == "yes" else 0
        assert wait_for(lambda: freed() - before == want)
        assert freed() - before == want
    finally:
        c.call("CONFIG", "SET", "lazyfree-lazy-expire", "yes")
