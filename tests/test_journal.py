"""The command journal (hotkv.testing.journal) and waiting (hotkv.testing.waiting).

Through real clients on real sockets: what is recorded (client id and name,
db, argv, time, origin: client / exec / script, the fault that fired, the
exact reply bytes in RESP2 and RESP3 -- a blocked command's once it is
served), the queries (commands, for_client, keys), the assertion helpers
and the exact text of their failure messages (a readable diff of what was
seen), that it is off by default and leaves the dispatcher's path when
stopped; then wait_until (re-checked after every batch, its timeout text,
its predicate's exception) and wait_idle (after a raw pipeline of 10k
commands, with a blocked worker, and what it names when busy).

Runs in a few seconds: ``python -m pytest -q tests/test_journal.py``.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from hotkv.testing import on_loop
from support import RawClient


@pytest.fixture(autouse=True)
def _clean(server):
    server.journal.stop()
    server.journal.clear()
    redis.Redis(host=server.host, port=server.port).flushall()
    yield
    server.journal.stop()
    server.journal.clear()
    server.faults.clear()
    assert server.server.test_hooks is None


def test_off_by_default_and_off_after_stop(server, raw):
    raw.call("SET", "a", "1")
    assert server.journal.entries() == []
    assert server.server.test_hooks is None
    server.journal.start()
    assert server.server.test_hooks is not None
    raw.call("SET", "b", "2")
    server.journal.stop()
    raw.call("SET", "c", "3")
    assert [e.argv for e in server.journal.entries()] == [(b"SET", b"b", b"2")]
    assert server.server.test_hooks is None


def test_entry_fields(server):
    c = redis.Redis(host=server.host, port=server.port, db=2, client_name="worker-7")
    c.ping()
    cid = c.client_id()
    t0 = time.time()
    with server.journal as j:
        c.lpush("jobs", "a", "b")
        c.hset("job:1", mapping={"state": "done"})
    t1 = time.time()
    lpush, hset = j.entries()
    assert lpush.argv == (b"LPUSH", b"jobs", b"a", b"b") and lpush.args == (b"jobs", b"a", b"b")
    assert (lpush.client_id, lpush.client_name, lpush.db) == (cid, "worker-7", 2)
    assert (lpush.name, lpush.origin, lpush.fault, lpush.reply) == ("lpush", "client", None, None)
    assert hset.seq == lpush.seq + 1 and hset.name == "hset"
    # The server's command time (ms), not a clock read of its own.
    assert t0 - 1 <= lpush.time <= hset.time <= t1 + 1
    assert repr(lpush) == "#0 client %d 'worker-7': LPUSH jobs a b" % cid
    c.close()


def test_entry_time_is_the_servers_clock(server, raw):
    with server.clock.freeze(1_700_000_000.5):
        with server.journal as j:
            raw.call("SET", "a", "1")
            server.clock.advance(60)
            raw.call("SET", "b", "1")
    assert [e.time for e in j.entries()] == [1_700_000_000.5, 1_700_000_060.5]


def test_replies_exact_bytes_resp2_resp3_errors_exec(server, raw):
    r3 = redis.Redis(host=server.host, port=server.port, protocol=3)
    r3.ping()
    server.journal.start(replies=True)
    raw.call("HSET", "h", "f", "v")
    raw.call("INCR", "h")
    raw.call("MULTI")
    raw.call("SET", "k", "1")
    raw.call("INCR", "k")
    raw.call("EXEC")
    r3.hgetall("h")
    server.journal.stop()
    got = [(e.argv[0], e.origin, e.reply) for e in server.journal.entries()]
    assert got == [
        (b"HSET", "client", b":1\r\n"),
        (b"INCR", "client", b"-WRONGTYPE Operation against a key holding the wrong kind "
                            b"of value\r\n"),
        (b"MULTI", "client", b"+OK\r\n"),
        (b"EXEC", "client", b"*2\r\n+OK\r\n:2\r\n"),
        (b"SET", "exec", b"+OK\r\n"),
        (b"INCR", "exec", b":2\r\n"),
        (b"HGETALL", "client", b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"),
    ]
    r3.close()


def test_blocked_command_recorded_once_with_its_served_reply(server, raw_factory):
    w, p = raw_factory(), raw_factory()
    server.journal.start(replies=True)
    w.send("BLPOP", "q", "0")
    server.wait_until(lambda s: s.server.blocked_clients >= 1, timeout=5)
    assert [e.reply for e in server.journal.commands("blpop")] == [None]
    p.call("RPUSH", "q", "job")
    assert w.read_reply() == b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n"
    blpop = server.journal.commands("BLPOP")
    assert len(blpop) == 1 and blpop[0].reply == b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n"


def test_script_origin_and_caller(server, raw):
    raw.call("CLIENT", "SETNAME", "scripter")
    with server.journal as j:
        raw.call("EVAL", "redis.call('SET', KEYS[1], 'x'); return redis.call('GET', KEYS[1])",
                 "1", "sk")
    assert [(e.argv[0].upper(), e.origin, e.client_name) for e in j.entries()] == [
        (b"EVAL", "client", "scripter"), (b"SET", "script", "scripter"),
        (b"GET", "script", "scripter")]


def test_faults_show_in_the_journal(server, raw_factory):
    c = raw_factory()
    server.journal.start(replies=True)
    with server.faults.error("GET", message="LOADING Redis is loading the dataset in memory"):
        c.call("GET", "x")
    with server.faults.delay(60, "SET", at="command") as slow:
        c.send("SET", "x", "1")
        server.wait_until(lambda s: slow.fired == 1, timeout=5)
    assert c.read_reply() == b"+OK\r\n"
    with server.faults.delay(60, "EXEC") as late:
        c.call("MULTI")
        c.call("INCR", "n")
        c.send("EXEC")
        server.wait_until(lambda s: late.fired == 1, timeout=5)
    assert c.read_reply() == b"*1\r\n:1\r\n"
    got = [(e.argv[0], e.fault, e.reply) for e in server.journal.entries()]
    assert got == [(b"GET", "error", b"-LOADING Redis is loading the dataset in memory\r\n"),
                   (b"SET", None, b"+OK\r\n"),    # the held SET, recorded once, when it ran
                   (b"MULTI", None, b"+OK\r\n"),
                   (b"EXEC", "delay", b"*1\r\n:1\r\n"),   # the reply it held back
                   (b"INCR", None, b":1\r\n")]


def test_queries(server):
    a = redis.Redis(host=server.host, port=server.port, client_name="worker-a")
    b = redis.Redis(host=server.host, port=server.port, client_name="web")
    a.ping()
    b.ping()
    with server.journal as j:
        b.xadd("stream", {"f": "v"}, id="1-0")
        b.xgroup_create("stream", "grp", id="0")
        a.xreadgroup("grp", "c1", {"stream": ">"})
        a.xack("stream", "grp", "1-0")
        a.set("done:1", "yes")
        b.mset({"x": 1, "y": 2})
    assert [e.name for e in j.commands("XACK")] == ["xack"]
    assert [e.name for e in j.commands("xgroup")] == ["xgroup|create"]
    assert [e.name for e in j.commands("xack", "set")] == ["xack", "set"]
    assert [e.name for e in j.for_client("worker-*")] == ["xreadgroup", "xack", "set"]
    assert [e.name for e in j.for_client(b.client_id())] == ["xadd", "xgroup|create", "mset"]
    assert j.keys() == [b"stream", b"done:1", b"x", b"y"]
    assert j.keys(client="web") == [b"stream", b"x", b"y"]
    assert len(j) == 6
    a.close()
    b.close()


def test_assert_called_and_its_messages(server, raw):
    cid = int(raw.call("CLIENT", "ID")[1:-2])
    with server.journal as j:
        raw.call("XADD", "s", "1-0", "f", "v")
        raw.call("XGROUP", "CREATE", "s", "g", "0")
        raw.call("XACK", "s", "g", "1-1")
    assert len(j.assert_called("XACK", "s", "g", "1-1")) == 1
    j.assert_called("xack", "s", ...)
    j.assert_called("XACK", count=1)
    j.assert_not_called("XACK", "s", "g", "1-0")
    with pytest.raises(AssertionError) as e:
        j.assert_called("XACK", "s", "g", "1-0")
    assert str(e.value) == (
        "expected a call: XACK s g 1-0\n"
        "calls to XACK seen (1):\n"
        "  #2 client %d: XACK s g 1-1\n"
        "closest, as a diff (- expected, + seen):\n"
        "  - XACK s g 1-0\n"
        "  ?            ^\n"
        "  + XACK s g 1-1\n"
        "  ?            ^" % cid)
    with pytest.raises(AssertionError) as e:
        j.assert_called("DEL", "s")
    assert str(e.value) == (
        "expected a call: DEL s\n"
        "no call to DEL at all; the journal holds 3 command(s):\n"
        "  #0 client %d: XADD s 1-0 f v\n"
        "  #1 client %d: XGROUP CREATE s g 0\n"
        "  #2 client %d: XACK s g 1-1" % (cid, cid, cid))
    with pytest.raises(AssertionError) as e:
        j.assert_called("XACK", count=2)
    assert str(e.value) == "expected a call: XACK 2 time(s)\nseen 1 time(s):\n" \
        "  #2 client %d: XACK s g 1-1" % cid
    with pytest.raises(AssertionError) as e:
        j.assert_not_called("XADD", ...)
    assert str(e.value) == "expected no call: XADD\nfound 1:\n  #0 client %d: XADD s 1-0 f v" \
        % cid


def test_assert_order_and_its_diff(server, raw):
    with server.journal as j:
        raw.call("LPUSH", "q", "job")
        raw.call("BRPOPLPUSH", "q", "processing", "1")
        raw.call("SET", "result", "42")
        raw.call("LREM", "processing", "1", "job")
    found = j.assert_order(["LPUSH", ["BRPOPLPUSH", "q", ...], "LREM processing 1 job"])
    assert [e.name for e in found] == ["lpush", "brpoplpush", "lrem"]
    with pytest.raises(AssertionError) as e:
        j.assert_order(["LREM", "BRPOPLPUSH"])
    assert str(e.value) == (
        "calls not in the expected order: 1 of 2 matched, the first missing: BRPOPLPUSH\n"
        "--- expected order\n"
        "+++ seen\n"
        "@@ -1,2 +1,2 @@\n"
        "+BRPOPLPUSH\n"
        " LREM\n"
        "-BRPOPLPUSH")
    with pytest.raises(AssertionError) as e:
        j.assert_order(["LPUSH q job", "SET result 41"])
    assert str(e.value) == (
        "calls not in the expected order: 1 of 2 matched, the first missing: SET result 41\n"
        "--- expected order\n"
        "+++ seen\n"
        "@@ -1,2 +1,2 @@\n"
        " LPUSH q job\n"
        "-SET result 41\n"
        "+SET result 42")


def test_show_quotes_odd_arguments(server, raw):
    with server.journal as j:
        raw.call("SET", "a key", "")
    assert repr(j.entries()[0]).endswith(': SET "a key" ""')


def test_context_manager_starts_empty(server, raw):
    server.journal.start()
    raw.call("SET", "old", "1")
    server.journal.stop()
    with server.journal as j:
        raw.call("SET", "new", "1")
    assert [e.argv[1] for e in j.entries()] == [b"new"]


def test_the_dispatchers_records_and_the_hooks_in_one_log(server, raw_factory):
    """Without replies dispatch.call records a command a client sent itself
    (``server.test_hooks`` is then the log); EXEC's, a script's, one a fault
    fired on, and every command once replies are on go through the journal's
    hook.  Records of each kind, in one log, read back in order and whole."""
    a, b = raw_factory(), raw_factory()
    a.call("CLIENT", "SETNAME", "alpha")
    aid, bid = (int(c.call("CLIENT", "ID")[1:-2]) for c in (a, b))
    j = server.journal
    j.start()
    assert type(server.server.test_hooks).__name__ == "JournalLog"
    a.call("SELECT", "3")
    a.call("RPUSH", "q", "x", "y")
    a.call("MULTI")
    a.call("LPOP", "q")
    assert a.call("EXEC") == b"*1\r\n$1\r\nx\r\n"
    b.send("BLPOP", "w", "0")
    server.wait_until(lambda s: s.server.blocked_clients >= 1, timeout=5)
    a.call("EVAL", "return redis.call('INCR', KEYS[1])", "1", "n")
    with server.faults.error("GET", message="ERR injected"):
        assert server.server.test_hooks is not j._log     # both hooks: the journal's called
        assert a.call("GET", "n") == b"-ERR injected\r\n"
    assert server.server.test_hooks is j._log
    a.call("SELECT", "0")
    j.start(replies=True)       # what was recorded stays
    a.call("RPUSH", "w", "job")
    assert b.read_reply() == b"*2\r\n$1\r\nw\r\n$3\r\njob\r\n"   # served: not recorded again
    j.stop()
    got = [(e.seq, e.client_id, e.client_name, e.db, e.argv, e.name, e.origin, e.fault,
            e.reply) for e in j.entries()]
    script = b"return redis.call('INCR', KEYS[1])"
    assert got == [
        (0, aid, "alpha", 0, (b"SELECT", b"3"), "select", "client", None, None),
        (1, aid, "alpha", 3, (b"RPUSH", b"q", b"x", b"y"), "rpush", "client", None, None),
        (2, aid, "alpha", 3, (b"MULTI",), "multi", "client", None, None),
        (3, aid, "alpha", 3, (b"EXEC",), "exec", "client", None, None),
        (4, aid, "alpha", 3, (b"LPOP", b"q"), "lpop", "exec", None, None),
        (5, bid, "", 0, (b"BLPOP", b"w", b"0"), "blpop", "client", None, None),
        (6, aid, "alpha", 3, (b"EVAL", script, b"1", b"n"), "eval", "client", None, None),
        (7, aid, "alpha", 3, (b"INCR", b"n"), "incr", "script", None, None),
        (8, aid, "alpha", 3, (b"GET", b"n"), "get", "client", "error", None),
        (9, aid, "alpha", 3, (b"SELECT", b"0"), "select", "client", None, None),
        (10, aid, "alpha", 0, (b"RPUSH", b"w", b"job"), "rpush", "client", None, b":1\r\n"),
    ]
    assert len(j) == 11
    times = [e.time for e in j.entries()]
    assert times == sorted(times)
    assert j.keys() == [b"q", b"w", b"n"]


# -- waiting -------------------------------------------------------------------

def _list_len(server, key: bytes) -> int:
    def length():
        value = server.server.dbs[0].data.get(key)
        return 0 if value is None else len(value)
    return on_loop(server.server, length)


def test_a_loopback_senders_queued_bytes_are_seen():
    """wait_idle's view of bytes still in a loopback client's socket: a
    receiver that reads nothing while the sender pushes 4 MB; the sender's
    queue is seen (its kernel socket table entry), then nothing once all is
    read.  Real sockets, no server: the helper alone."""
    import socket as socketlib

    from hotkv.testing.waiting import peer_unsent
    lst = socketlib.create_server(("127.0.0.1", 0))
    snd = socketlib.create_connection(lst.getsockname())
    rcv, _ = lst.accept()
    payload = b"x" * (4 << 20)
    sender = threading.Thread(target=snd.sendall, args=(payload,), daemon=True)
    sender.start()
    try:
        peer, local = rcv.getpeername(), rcv.getsockname()
        deadline = time.time() + 10
        seen = 0
        while not seen and time.time() < deadline:
            seen = peer_unsent(peer, local)
        assert seen > 0
        got = 0
        while got < len(payload):
            got += len(rcv.recv(1 << 20))
        sender.join(10)
        while peer_unsent(peer, local) and time.time() < deadline:
            time.sleep(0.01)    # (the last ACK may be a delayed one)
        assert peer_unsent(peer, local) == 0
        assert peer_unsent(("10.1.2.3", 1), local) == 0      # not a loopback peer: not asked
    finally:
        for s in (snd, rcv, lst):
            s.close()


def test_wait_idle_after_a_pipeline_of_10k_commands(server):
    c = RawClient(server.host, server.port)
    try:
        n = 10_000
        c.send_raw(b"".join(b"*3\r\n$5\r\nRPUSH\r\n$2\r\npq\r\n$%d\r\n%d\r\n" % (len(str(i)), i)
                            for i in range(n)))
        server.wait_idle(timeout=30)
        # Every command ran and every reply was written, without reading any.
        assert _list_len(server, b"pq") == n
        replies = b"".join(b":%d\r\n" % (i + 1) for i in range(n))
        got = b""
        for _ in range(n):       # bounded: each recv returns something or raises
            if len(got) >= len(replies):
                break
            chunk = c.sock.recv(1 << 20)
            assert chunk
            got += chunk
        assert got == replies
    finally:
        c.close()


def test_wait_idle_with_a_blocked_worker_and_what_it_names(server, raw_factory):
    worker, partial = raw_factory(), raw_factory()
    worker.send("BLPOP", "empty", "0")
    server.wait_until(lambda s: s.server.blocked_clients >= 1, timeout=5)
    server.wait_idle(timeout=5)      # waiting for data is idle
    partial.call("CLIENT", "SETNAME", "half")
    partial.send_raw(b"*2\r\n$3\r\nGET\r\n$1")
    with pytest.raises(TimeoutError) as e:
        server.wait_idle(timeout=0.2)
    assert "(half): " in str(e.value) and "bytes of a partial command" in str(e.value)
    partial.send_raw(b"\r\nk\r\n")
    assert partial.read_reply() == b"$-1\r\n"
    server.wait_idle(timeout=5)


def test_wait_until_rechecks_after_commands(server):
    c = redis.Redis(host=server.host, port=server.port)
    c.rpush("work", *range(50))
    done = []

    def worker():
        w = redis.Redis(host=server.host, port=server.port)
        for _ in range(50):
            w.lpop("work")
        done.append(True)
        w.close()
    t = threading.Thread(target=worker)
    t.start()
    try:
        server.wait_until(lambda s: _direct_len(s, b"work") == 0, timeout=10)
    finally:
        t.join(10)
    assert c.llen("work") == 0
    c.close()


def _direct_len(s, key):
    value = s.server.dbs[0].data.get(key)
    return 0 if value is None else len(value)


def test_wait_until_timeout_and_errors(server):
    def never(s):
        return False
    with pytest.raises(TimeoutError) as e:
        server.wait_until(never, timeout=0.2)
    assert str(e.value).startswith(
        "wait_until: test_wait_until_timeout_and_errors.<locals>.never still false after 0.2 s "
        "(checked ")

    def broken(s):
        raise KeyError("nope")
    with pytest.raises(KeyError):
        server.wait_until(broken, timeout=5)
    assert server.server.sleep_hooks == []     # no check outlives its wait


def test_async_server_waits_faults_and_journal():
    """AsyncEmbeddedServer: the waits are coroutines on the server's own loop
    (a blocking wait there would stop the server it waits for)."""
    import asyncio

    import redis.asyncio as aredis

    from hotkv import AsyncEmbeddedServer

    async def main():
        async with AsyncEmbeddedServer() as server:
            c = aredis.Redis(host=server.host, port=server.port)
            server.journal.start()
            with server.faults.error("GET", nth=1, message="ERR async fault") as f:
                with pytest.raises(redis.ResponseError, match="async fault"):
                    await c.get("k")
            assert f.fired == 1

            async def producer():
                for i in range(20):
                    await c.rpush("aq", i)
            task = asyncio.ensure_future(producer())
            await server.wait_until(lambda s: _direct_len(s, b"aq") == 20, timeout=10)
            await task
            await server.wait_idle(timeout=5)
            with pytest.raises(TimeoutError, match="wait_until: .* still false after 0.1 s"):
                await server.wait_until(lambda s: False, timeout=0.1)
            server.journal.assert_called("RPUSH", "aq", "19")
            server.journal.stop()
            assert server.server.sleep_hooks == []
            await c.aclose()
    asyncio.run(main())
