"""server.snapshot() / restore() / seed() / load_rdb() (hotkv/testing/snapshot.py).

Through real clients on a real server: a restore brings back every type
with its TTL and a stream's consumer groups and PELs; snapshot and server
share no mutable state (mutations on either side after a snapshot or a
restore do not leak); WATCHed transactions fail; blocked clients are served
only when the restored data can serve them; the AOF replays to the
restored data; a dump.rdb written by valkey-server 8.1.8 loads.
The speed figures are bench/snapshot.py's (bench/RESULTS.md).
"""

import threading

import pytest
import valkey

from support import wait_for


def _fill(r):
    r.set("s", "v")
    r.set("n", 10)
    r.set("ttl", "v", px=600_000)
    r.rpush("l", *[f"e{i}" for i in range(300)])
    r.hset("h", mapping={"f": "1", "g": "2"})
    r.sadd("set", "x", "y", 1, 2)
    r.zadd("z", {"m": 2.5, "n": -1})
    r.setrange("ba", 0, "abc")           # a string changed in place (bytearray)
    r.setrange("ba", 5, "z")
    r.pfadd("hll", "a", "b")
    for i in range(5):
        r.xadd("st", {"n": str(i)}, id=f"{i + 1}-0")
    r.xgroup_create("st", "g", "0")
    r.xreadgroup("g", "alice", {"st": ">"}, count=3)
    r.xack("st", "g", "1-0")
    r.select(3)
    r.set("db3", "x")
    r.select(0)


def _state(r, exact=True):
    """Everything a client can read of the data (values, TTLs, groups,
    encodings).  Not ``exact``: a string's raw/embstr is left out (a reload
    from the AOF or an RDB makes a short string embstr, in Valkey too)."""
    out = {}
    for db in (0, 3):
        r.select(db)
        for k in sorted(r.keys()):
            t = r.type(k)
            v = {b"string": lambda: r.get(k), b"list": lambda: r.lrange(k, 0, -1),
                 b"hash": lambda: r.hgetall(k), b"set": lambda: sorted(r.smembers(k)),
                 b"zset": lambda: r.zrange(k, 0, -1, withscores=True),
                 b"stream": lambda: (r.xrange(k), r.xinfo_groups(k),
                                     [(p["message_id"], p["consumer"], p["times_delivered"])
                                      for p in r.xpending_range(k, "g", "-", "+", 100)])
                   }[t]()
            enc = r.object("encoding", k)
            if not exact and enc in (b"raw", b"embstr"):
                enc = b"str"
            out[(db, k)] = (t, v, r.pttl(k) > 0, enc)
    r.select(0)
    return out


def test_restore_brings_back_every_type_ttl_and_groups(server, r):
    _fill(r)
    before = _state(r)
    snap = server.snapshot()
    assert snap.keys == 11
    r.flushall()
    r.set("other", "1")
    r.select(3)
    r.set("other3", "1")
    r.select(0)
    server.restore(snap)
    assert _state(r) == before
    assert 599_000 < r.pttl("ttl") <= 600_000
    assert r.exists("other") == 0


def test_no_shared_state_between_snapshot_and_server(server, r):
    _fill(r)
    before = _state(r)
    snap = server.snapshot()
    # Mutate every type in place after the snapshot...
    r.rpush("l", "more")
    r.hset("h", "f", "changed")
    r.sadd("set", "new")
    r.zadd("z", {"m": 99})
    r.setrange("ba", 0, "X")
    r.xack("st", "g", "2-0")
    r.xreadgroup("g", "bob", {"st": ">"})
    r.xadd("st", {"n": "late"}, id="9-0")
    server.restore(snap)
    assert _state(r) == before
    # ...and after the restore: the snapshot stays as taken.
    r.rpush("l", "again")
    r.hdel("h", "g")
    r.xclaim("st", "g", "carol", 0, ["2-0"])
    r.setrange("ba", 1, "Y")
    server.restore(snap)
    assert _state(r) == before


def test_watch_fails_on_restored_keys_only(server, r):
    r.set("k", "1")
    snap = server.snapshot()
    a = valkey.Valkey(host=server.host, port=server.port)
    b = valkey.Valkey(host=server.host, port=server.port)
    try:
        pa = a.pipeline()
        pa.watch("k")
        pb = b.pipeline()
        pb.watch("nowhere")          # in neither the old nor the restored data
        server.restore(snap)
        pa.multi()
        pa.set("k", "2")
        with pytest.raises(valkey.WatchError):
            pa.execute()
        pb.multi()
        pb.set("x", "1")
        assert pb.execute() == [True]
    finally:
        a.close()
        b.close()
    assert r.get("k") == b"1"


def test_blocked_clients_served_only_by_restored_data(server, r):
    r.rpush("q", "from-snapshot")
    full = server.snapshot()
    r.delete("q")
    empty = server.snapshot()
    got = {}
    clients = {name: valkey.Valkey(host=server.host, port=server.port) for name in ("q", "z")}

    def waiter(name):
        got[name] = clients[name].blpop([name], 30)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in clients]
    for t in threads:
        t.start()
    try:
        assert wait_for(lambda: not server.inspect.exists("q") and
                        r.info("clients")["blocked_clients"] == 2)
        server.restore(empty)       # nothing for them: both stay blocked
        assert r.info("clients")["blocked_clients"] == 2
        server.restore(full)        # q's waiter takes the restored element
        threads[0].join(10)
        assert got["q"] == (b"q", b"from-snapshot")
        assert r.exists("q") == 0
        assert r.info("clients")["blocked_clients"] == 1 and "z" not in got
    finally:
        r.lpush("z", "bye")
        for t in threads:
            t.join(10)
        for c in clients.values():
            c.close()
    assert got["z"] == (b"z", b"bye")


def test_tracking_clients_are_told_to_drop_everything(server, r):
    from support import RawClient
    r.set("k", "1")
    snap = server.snapshot()
    c = RawClient(server.host, server.port)
    try:
        assert c.call("HELLO", "3").startswith(b"%")
        assert c.call("CLIENT", "TRACKING", "on") == b"+OK\r\n"
        assert c.call("GET", "k") == b"$1\r\n1\r\n"
        server.restore(snap)
        # RESP3's "everything is gone" invalidation, as after FLUSHALL
        assert c.read_reply() == b">2\r\n$10\r\ninvalidate\r\n_\r\n"
    finally:
        c.close()


def test_seed_from_python_objects(server, r):
    from hotkv.testing.snapshot import Hash, SeedError, ZSet
    r.set("q", "old string")
    n = server.seed({"k": "v", "b": b"\x00\xff", "i": 7, "q": ["a", "b"],
                     "h": {"f": "1", "n": 2}, "s": {"x", "y"}, "z": {"m": 1.0, "n": 2.5},
                     "z2": ZSet({"a": 1}), "h2": Hash({"x": 1.5}),
                     "st": [("1-1", {"f": "v"}), ("*", {"g": "w"})]},
                    ttl={"k": 100})
    assert n == 10
    assert r.get("k") == b"v" and 99_000 < r.pttl("k") <= 100_000
    assert r.get("b") == b"\x00\xff" and r.get("i") == b"7"
    assert r.lrange("q", 0, -1) == [b"a", b"b"]
    assert r.hgetall("h") == {b"f": b"1", b"n": b"2"}
    assert set(r.smembers("s")) == {b"x", b"y"}
    assert r.zrange("z", 0, -1, withscores=True) == [(b"m", 1.0), (b"n", 2.5)]
    assert r.type("z2") == b"zset" and r.type("h2") == b"hash"
    entries = r.xrange("st")
    assert entries[0] == (b"1-1", {b"f": b"v"}) and entries[1][1] == {b"g": b"w"}
    server.seed({"d1": "x"}, db=1)
    r.select(1)
    assert r.get("d1") == b"x"
    r.flushdb()
    r.select(0)
    with pytest.raises(ValueError):
        server.seed({"empty": []})
    with pytest.raises(SeedError, match="ERR The ID specified in XADD"):
        server.seed({"st": [("0-0", {"f": "v"})]})
    with pytest.raises(TypeError):
        server.seed({"x": object()})


def test_restore_with_the_aof_on_replays_to_the_restored_data(hotkv_server_factory):
    server = hotkv_server_factory(appendonly="yes", enable_debug_command="yes")
    r = valkey.Valkey(host=server.host, port=server.port)
    try:
        _fill(r)
        snap = server.snapshot()
        before = _state(r, exact=False)
        r.flushall()
        r.set("after-flush", "1")
        server.restore(snap)
        r.set("after-restore", "1")
        server.seed({"seeded": ["a", "b"], "z-seeded": {"m": 1.5}}, ttl={"seeded": 600})
        state = _state(r, exact=False)
        assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
        assert _state(r, exact=False) == state
        later = {(0, b"after-restore"), (0, b"seeded"), (0, b"z-seeded")}
        assert {k: v for k, v in state.items() if k not in later} == before
        assert state[(0, b"seeded")][2]           # its TTL came back from the AOF too
    finally:
        r.close()


def test_load_rdb_written_by_valkey(server, r, ref_server, tmp_path):
    import os
    ref = valkey.Valkey(host=ref_server.host, port=ref_server.port)
    ref.flushall()      # the reference is the session's: other tests leave keys in it
    _fill(ref)
    want = _state(ref, exact=False)
    ref.save()
    ref.close()
    r.set("gone", "1")
    n = server.load_rdb(os.path.join(ref_server.dir, "dump.rdb"))
    assert n == 11
    assert _state(r, exact=False) == want
    with pytest.raises(Exception, match="(?i)signature|short|corrupt"):
        bad = tmp_path / "bad.rdb"
        bad.write_bytes(b"NOTANRDB")
        server.load_rdb(bad)


def _blocked_xreadgroup_outcome(host, port, r, unblock):
    """What a client blocked in XREADGROUP on a stream gets when unblock()
    removes the stream."""
    r.xgroup_create("st", "g", "$", mkstream=True)
    c = valkey.Valkey(host=host, port=port)
    out = []

    def read():
        try:
            out.append(c.xreadgroup("g", "c", {"st": ">"}, block=20_000))
        except valkey.ResponseError as e:
            out.append(str(e))

    t = threading.Thread(target=read)
    t.start()
    try:
        assert wait_for(lambda: r.info("clients")["blocked_clients"] == 1)
        unblock()
        t.join(10)
    finally:
        c.close()
    return out


def test_xreadgroup_on_a_stream_the_restore_removes_gets_what_flushall_gives(
        server, r, ref_server):
    """Restore keeps blocked clients as Valkey's FLUSHALL does: a reader
    whose stream is gone gets valkey-server 8.1.8's reply to FLUSHALL."""
    empty = server.snapshot()
    ref = valkey.Valkey(host=ref_server.host, port=ref_server.port)
    ref.flushall()
    try:
        want = _blocked_xreadgroup_outcome(ref_server.host, ref_server.port, ref, ref.flushall)
    finally:
        ref.close()
    got = _blocked_xreadgroup_outcome(server.host, server.port, r,
                                      lambda: server.restore(empty))
    assert got == want and len(got) == 1


def _double(x):
    return 2 * x


def test_queue_libraries_find_their_jobs_again_after_a_restore(server, r):
    """A seeded RQ queue and taskiq-redis stream, snapshotted; workers
    consume everything; after the restore each library's own client sees
    its jobs waiting again, and a worker runs them again."""
    import asyncio

    import redis
    import rq
    from taskiq_redis import RedisStreamBroker
    conn = redis.Redis(host=server.host, port=server.port)
    q = rq.Queue("default", connection=conn)
    jobs = [q.enqueue(_double, i) for i in range(3)]
    url = "redis://%s:%d/0" % (server.host, server.port)

    def broker():
        b = RedisStreamBroker(url, queue_name="tq", consumer_name="w", xread_block=100)

        @b.task(task_name="noop")
        async def noop(x):
            return x
        return b, noop

    async def kick():
        b, noop = broker()
        await b.startup()
        ids = [(await noop.kiq(i)).task_id for i in range(2)]
        await b.shutdown()
        return ids

    async def consume(n):
        b, _ = broker()
        await b.startup()
        listen = b.listen()
        got = []
        for _ in range(n):
            m = await listen.__anext__()
            got.append(m)
            await m.ack()
        await listen.aclose()
        await b.shutdown()
        return len(got)

    kicked = asyncio.run(asyncio.wait_for(kick(), 20))
    snap = server.snapshot()
    rq.SimpleWorker([q], connection=conn).work(burst=True)
    assert q.count == 0 and all(j.get_status(refresh=True) == "finished" for j in jobs)
    assert asyncio.run(asyncio.wait_for(consume(2), 20)) == 2
    assert server.inspect.taskiq("tq").queued == []
    server.restore(snap)
    assert q.job_ids == [j.id for j in jobs]
    assert all(j.get_status(refresh=True) == "queued" for j in jobs)
    tq = server.inspect.taskiq("tq")
    assert [tq.jobs[e].id for e in tq.queued] == kicked and tq.in_flight == []
    rq.SimpleWorker([q], connection=conn).work(burst=True)
    assert [j.return_value(refresh=True) for j in jobs] == [0, 2, 4]
    assert asyncio.run(asyncio.wait_for(consume(2), 20)) == 2
    conn.close()
