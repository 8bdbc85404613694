"""hotkv.inprocess: in-process connections behave as TCP ones, byte for byte.

Every test runs on both routes: an ``EmbeddedServer(inprocess=True)`` (the
caller runs its loop turn under the loop's lock) and a plain one (uvloop;
the request hops to the loop's thread).  The byte-exact tests send the same
few hundred generated commands (strings, lists, hashes, sets, sorted sets,
errors of every kind, MULTI/EXEC, scripts; RESP2 and RESP3) over TCP and
in-process to the same server, emptied between the two runs, and compare
every reply's bytes.  The behaviours: BLPOP served by another client (and
timing out), pub/sub, WATCH, CLIENT KILL / CLIENT LIST, the clock and the
journal, many threads, long requests (past the parser's per-turn budget),
the client's close and the server's stop.

No timed assertion: waits are on replies, ``wait_until`` or a generous
socket timeout that only bounds a failure.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading

import hiredis
import pytest
import redis
import valkey

from hotkv import AsyncEmbeddedServer, EmbeddedServer
from hotkv.inprocess import InProcessSocket, async_client, client
from hotkv.testing import LoopThreadCallError


@pytest.fixture(scope="module", params=["lock", "hop"])
def server(request):
    with EmbeddedServer(inprocess=request.param == "lock") as s:
        yield s


@pytest.fixture
def srv(server):
    r = client(server)
    r.flushall()
    yield server
    r.close()


@pytest.fixture
def frozen(srv):
    """The server's clock frozen (XADD * IDs, TTLs: the same in both runs)."""
    srv.clock.freeze(1_800_000_000)
    yield srv.clock
    srv.clock.reset()


# ----------------------------------------------------------------------
# Raw connections: the bytes of each reply
# ----------------------------------------------------------------------

def _pack(argv) -> bytes:
    out = [b"*%d\r\n" % len(argv)]
    for a in argv:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class _Raw:
    """A raw connection (TCP socket or InProcessSocket): send requests, read
    exactly ``n`` replies' bytes (hiredis tells where a reply ends)."""

    def __init__(self, sock):
        self.sock = sock
        sock.settimeout(10)
        self.resp3 = False

    def request(self, data: bytes, n: int = 1) -> bytes:
        self.sock.sendall(data)
        return self.read(n)

    def read(self, n: int) -> bytes:
        reader = hiredis.Reader(notEnoughData=False)
        got = bytearray()
        replies = 0
        while replies < n:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed after %d of %d replies" % (replies, n)
            got += chunk
            reader.feed(chunk)
            while replies < n:
                r = reader.gets()
                if r is False:
                    break
                replies += 1
        return bytes(got)

    def close(self):
        self.sock.close()


def _tcp(server) -> _Raw:
    return _Raw(socket.create_connection((server.host, server.port)))


def _inproc(server) -> _Raw:
    return _Raw(InProcessSocket(server))


def _commands(seed: int, n: int) -> list:
    """n generated commands on a few keys of every type, errors included."""
    rnd = random.Random(seed)
    keys = [b"s%d" % i for i in range(3)] + [b"l1", b"h1", b"t1", b"z1", b"x1"]

    def k():
        return rnd.choice(keys)

    def v():
        return rnd.choice([b"1", b"-7", b"3.5", b"abc", b"", b"x" * 70, b"\x00\xff",
                           b"12345678901234567890"])
    gens = [
        lambda: [b"SET", k(), v()], lambda: [b"GET", k()], lambda: [b"INCR", k()],
        lambda: [b"INCRBYFLOAT", k(), v()], lambda: [b"APPEND", k(), v()],
        lambda: [b"GETRANGE", k(), b"0", b"-2"], lambda: [b"MGET", k(), k(), k()],
        lambda: [b"SET", k(), v(), b"NX", b"GET"], lambda: [b"SETRANGE", k(), b"3", v()],
        lambda: [b"LPUSH", k(), v(), v()], lambda: [b"RPOP", k()],
        lambda: [b"LRANGE", k(), b"0", b"-1"], lambda: [b"LPOS", k(), v()],
        lambda: [b"HSET", k(), v(), v()], lambda: [b"HGETALL", k()],
        lambda: [b"HINCRBY", k(), v(), b"2"], lambda: [b"HRANDFIELD", k(), b"0"],
        lambda: [b"SADD", k(), v(), v()], lambda: [b"SMEMBERS", k()],
        lambda: [b"SISMEMBER", k(), v()], lambda: [b"SINTERCARD", b"2", k(), k()],
        lambda: [b"ZADD", k(), v(), v()], lambda: [b"ZRANGE", k(), b"0", b"-1", b"WITHSCORES"],
        lambda: [b"ZSCORE", k(), v()], lambda: [b"ZINCRBY", k(), b"1.5", v()],
        lambda: [b"ZRANDMEMBER", k(), b"0"], lambda: [b"XADD", k(), b"*", b"f", v()],
        lambda: [b"XLEN", k()], lambda: [b"TYPE", k()], lambda: [b"EXISTS", k(), k()],
        lambda: [b"DEL", k()], lambda: [b"OBJECT", b"ENCODING", k()],
        lambda: [b"EXPIRE", k(), b"100"], lambda: [b"TTL", k()], lambda: [b"PERSIST", k()],
        lambda: [b"DBSIZE"], lambda: [b"ECHO", v()], lambda: [b"PING"],
        lambda: [b"GET"], lambda: [b"NOSUCHCOMMAND", k()], lambda: [b"SET", k(), v(), b"EX"],
        lambda: [b"LPUSH"], lambda: [b"INCRBY", k(), b"notanumber"],
        lambda: [b"ZADD", k(), b"nan", b"m"], lambda: [b"OBJECT", b"NOPE"],
        lambda: [b"EVAL", b"return {1, 'a', {2}, redis.call('EXISTS', KEYS[1])}", b"1", k()],
        lambda: [b"EVAL", b"return redis.call('INCR', KEYS[1])", b"1", k()],
        lambda: [b"EVAL", b"return redis.error_reply('MY err')", b"0"],
        lambda: [b"EVAL", b"return 3.99", b"0"], lambda: [b"COMMAND", b"COUNT"],
        lambda: [b"SELECT", b"1"], lambda: [b"SELECT", b"0"], lambda: [b"SELECT", b"99"],
    ]
    out = []
    while len(out) < n:
        if rnd.random() < 0.05:
            body = [rnd.choice(gens)() for _ in range(rnd.randint(1, 4))]
            out.append([b"MULTI"])
            out.extend(body)
            out.append([b"EXEC"] if rnd.random() < 0.8 else [b"DISCARD"])
        else:
            out.append(rnd.choice(gens)())
    return out


def _replies(conn: _Raw, commands, resp3: bool) -> list:
    if resp3:
        conn.request(_pack([b"HELLO", b"3"]))       # (its reply holds the client id)
    return [conn.request(_pack(argv)) for argv in commands]


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_replies_are_tcps_byte_for_byte(srv, frozen, resp3):
    commands = _commands(7 + resp3, 400)
    tcp = _tcp(srv)
    over_tcp = _replies(tcp, commands, resp3)
    tcp.request(_pack([b"FLUSHALL"]))
    tcp.close()
    inproc = _inproc(srv)
    in_process = _replies(inproc, commands, resp3)
    inproc.close()
    assert len(over_tcp) == len(commands)
    errors = sum(r.startswith(b"-") for r in in_process)
    assert errors > 20      # the mix has errors of many kinds
    for argv, a, b in zip(commands, over_tcp, in_process):
        assert b == a, argv


def test_pipelined_and_inline_bytes(srv, frozen):
    """One write holding many commands (and inline ones): the same reply stream."""
    commands = _commands(3, 300)
    blob = b"".join(_pack(argv) for argv in commands) + b"PING\r\nECHO inline\r\n"
    n = len(commands) + 2
    tcp = _tcp(srv)
    a = tcp.request(blob, n)
    tcp.request(_pack([b"FLUSHALL"]))
    tcp.close()
    inproc = _inproc(srv)
    b = inproc.request(blob, n)
    inproc.close()
    assert a == b


def test_long_requests_past_the_parse_budget(srv):
    """A request of more arguments than the parser takes per loop turn (its
    rest is parsed on later turns, on the loop) and a pipeline of 3,000."""
    r = client(srv)
    assert r.rpush("big", *range(5000)) == 5000
    assert r.llen("big") == 5000
    p = r.pipeline(transaction=False)
    for i in range(3000):
        p.incr("n")
    assert p.execute()[-1] == 3000
    tcp = _tcp(srv)
    inproc = _inproc(srv)
    request = _pack([b"MSET"] + [b"k%d" % (i // 2) for i in range(6000)])
    assert tcp.request(request) == inproc.request(request) == b"+OK\r\n"
    tcp.close()
    inproc.close()


def test_journal_sees_the_bytes_the_client_got(srv):
    r = client(srv, protocol=3)
    r.client_setname("inproc")
    with srv.journal.start(replies=True) as j:
        raw = _inproc(srv)
        raw.request(_pack([b"CLIENT", b"SETNAME", b"raw"]))
        got = [raw.request(_pack(argv)) for argv in
               ([b"SET", b"a", b"1"], [b"GET", b"a"], [b"LPUSH", b"a", b"x"], [b"HGETALL", b"h"])]
        r.set("b", 2)
    entries = j.for_client("raw")
    assert [e.reply for e in entries] == got
    j.assert_called("SET", "b", "2", client="inproc")
    raw.close()


# ----------------------------------------------------------------------
# Behaviours
# ----------------------------------------------------------------------

def test_blpop_served_by_another_client(srv):
    waiter = client(srv)
    waiter_id = waiter.client_id()
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.blpop("q", timeout=30)))
    t.start()
    srv.wait_until(lambda s: s.server.clients[waiter_id].blocked is not None)
    client(srv).rpush("q", "from-inprocess")
    t.join()
    assert got == [(b"q", b"from-inprocess")]
    # served by a TCP client
    got.clear()
    t = threading.Thread(target=lambda: got.append(waiter.blpop("q", timeout=30)))
    t.start()
    srv.wait_until(lambda s: s.server.clients[waiter_id].blocked is not None)
    redis.Redis(host=srv.host, port=srv.port).rpush("q", "from-tcp")
    t.join()
    assert got == [(b"q", b"from-tcp")]


def test_blpop_times_out(srv):
    r = client(srv)
    assert r.blpop("nothing", timeout=0.1) is None
    assert r.ping()


def test_blpop_timeout_follows_the_server_clock(srv):
    r = client(srv)
    rid = r.client_id()
    srv.clock.freeze()
    try:
        got = []
        t = threading.Thread(target=lambda: got.append(r.blpop("nothing", timeout=100)))
        t.start()
        srv.wait_until(lambda s: s.server.clients[rid].blocked is not None)
        srv.clock.advance(101)
        t.join(30)
        assert got == [None]
    finally:
        srv.clock.reset()


def test_pubsub(srv):
    sub = client(srv).pubsub()
    sub.subscribe("ch")
    assert sub.get_message(timeout=10)["type"] == "subscribe"
    assert client(srv).publish("ch", "one") == 1
    assert sub.get_message(timeout=10)["data"] == b"one"
    assert redis.Redis(host=srv.host, port=srv.port).publish("ch", "two") == 1
    assert sub.get_message(timeout=10)["data"] == b"two"
    got = []
    t = threading.Thread(target=lambda: got.append(sub.get_message(timeout=30)))
    t.start()
    srv.wait_until(lambda s: True)
    client(srv).publish("ch", "three")
    t.join()
    assert got[0]["data"] == b"three"
    assert sub.get_message(timeout=0) is None
    sub.close()


def test_resp3_push_messages(srv):
    r = client(srv, protocol=3)
    sub = r.pubsub()
    sub.psubscribe("p*")
    assert sub.get_message(timeout=10)["type"] == "psubscribe"
    r.publish("px", "hi")
    msg = sub.get_message(timeout=10)
    assert (msg["type"], msg["channel"], msg["data"]) == ("pmessage", b"px", b"hi")
    sub.close()


def test_watch_multi_exec(srv):
    a, b = client(srv), client(srv)
    a.set("w", 1)
    with a.pipeline() as p:
        p.watch("w")
        b.set("w", 2)
        p.multi()
        p.set("w", 3)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert a.get("w") == b"2"
    with a.pipeline() as p:
        p.watch("w")
        p.multi()
        p.incr("w")
        assert p.execute() == [3]


def test_client_list_and_kill(srv):
    admin = client(srv)
    raw = _inproc(srv)
    victim_id = int(raw.request(_pack([b"CLIENT", b"ID"]))[1:-2])
    line = [c for c in admin.client_list() if int(c["id"]) == victim_id]
    assert line and line[0]["addr"] == "/inprocess/%d:0" % victim_id
    assert line[0]["laddr"] == "/inprocess:0" and line[0]["fd"] == "-1"
    assert admin.client_kill_filter(_id=victim_id) == 1
    assert victim_id not in [int(c["id"]) for c in admin.client_list()]
    assert raw.sock.recv(100) == b""          # end of stream, as a closed socket
    raw.close()
    # redis-py reconnects after a kill, as over TCP
    r = client(srv)
    rid = r.client_id()
    admin.client_kill_filter(_id=rid)
    assert r.ping() and r.client_id() != rid


def test_client_kill_by_addr(srv):
    r = client(srv)
    info = r.client_info()
    assert client(srv).client_kill(info["addr"])
    assert int(info["id"]) not in srv.server.clients


def test_clock_and_expiry(srv):
    r = client(srv)
    srv.clock.freeze()
    try:
        r.set("e", 1, px=1500)
        srv.clock.advance(2)
        assert r.get("e") is None
        t = int(r.time()[0])
        srv.clock.advance(100)
        assert int(r.time()[0]) >= t + 100
    finally:
        srv.clock.reset()


def test_many_threads_each_with_a_connection(srv):
    r = client(srv)
    errors = []

    def work(i):
        try:
            c = client(srv, decode_responses=True)
            for _ in range(200):
                c.incr("counter")
                c.rpush("t%d" % i, "x")
            assert c.llen("t%d" % i) == 200
        except Exception as e:   # reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert r.get("counter") == b"1600"


def test_shared_client_across_threads(srv):
    """One redis.Redis used by many threads: its pool opens a connection per thread."""
    r = client(srv)
    threads = [threading.Thread(target=lambda: [r.incr("shared") for _ in range(100)])
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.get("shared") == b"600"


def test_client_close_is_seen_by_the_server(srv):
    r = client(srv)
    rid = r.client_id()
    r.close()
    srv.wait_until(lambda s: rid not in s.server.clients)


def test_a_lazy_flush_does_not_wake_the_loop_after_every_command():
    """Under the loop lock, a turn wakes the loop thread only for work it
    queued itself.  A FLUSHALL frees the old keys lazily; when that was a
    callback left on the loop, each following command of the test wrote
    the self-pipe again until the loop thread ran (12 us a command, and a
    lock hand-over)."""
    with EmbeddedServer(inprocess=True) as s:
        r = client(s)
        r.mset({"k%d" % i: "v" for i in range(200)})
        loop = s.loop_lock.loop
        wakes = []
        real = loop._write_to_self
        loop._write_to_self = lambda: (wakes.append(1), real())
        try:
            r.flushall()
            for i in range(20):
                r.set("a%d" % i, i)
            assert r.info("memory")["lazyfree_pending_objects"] == 0
            assert r.dbsize() == 20
        finally:
            del loop._write_to_self
        assert len(wakes) <= 1, len(wakes)


def test_valkey_py_client(srv):
    v = client(srv, "valkey", decode_responses=True)
    v.hset("vh", mapping={"a": "1"})
    assert v.hgetall("vh") == {"a": "1"}
    assert client(srv, "valkey", protocol=3).hgetall("vh") == {b"a": b"1"}
    assert isinstance(v, valkey.Valkey)


def test_db(srv):
    r = client(srv, db=3)
    r.set("in3", 1)
    assert client(srv).get("in3") is None
    assert int(r.client_info()["db"]) == 3


def test_server_stop_gives_connection_errors():
    for inprocess in (True, False):
        s = EmbeddedServer(inprocess=inprocess).start()
        r = client(s, retry=None)
        r.set("a", 1)
        s.stop()
        with pytest.raises(redis.ConnectionError):
            r.get("a")
        with pytest.raises(redis.ConnectionError):
            client(s, retry=None).ping()


def test_shutdown_from_an_in_process_client():
    for inprocess in (True, False):
        s = EmbeddedServer(inprocess=inprocess).start()
        r = client(s, retry=None)
        r.shutdown(nosave=True)    # (redis-py takes the end of stream as the answer)
        s._thread.join(30)
        assert not s._thread.is_alive()
        s.stop()


# ----------------------------------------------------------------------
# asyncio clients
# ----------------------------------------------------------------------

async def _async_behaviours(embedded, label):
    r = async_client(embedded)
    await r.flushall()
    assert await r.set("a", 1) and await r.get("a") == b"1"
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        await r.lpush("a", "x")
    rid = await r.client_id()
    assert any(int(c["id"]) == rid and c["addr"] == "/inprocess/%d:0" % rid
               for c in await r.client_list()), label
    # BLPOP served by another client, and timing out
    waiter = async_client(embedded, "valkey", protocol=3, decode_responses=True)
    task = asyncio.ensure_future(waiter.blpop("q", timeout=30))
    while not any(c.get("flags") == "b" for c in await r.client_list()):
        await asyncio.sleep(0.005)
    await r.rpush("q", "x")
    assert await task == ["q", "x"]
    assert await r.blpop("none", timeout=0.05) is None
    # pub/sub
    p = r.pubsub()
    await p.subscribe("c")
    assert (await p.get_message(timeout=10))["type"] == "subscribe"
    assert await async_client(embedded).publish("c", "m") == 1
    assert (await p.get_message(timeout=10))["data"] == b"m"
    await p.aclose()
    assert await r.hset("h", mapping={"f": "1", "g": "2"}) == 2
    assert await r.hgetall("h") == {b"f": b"1", b"g": b"2"}
    await r.aclose()
    await waiter.aclose()


def test_asyncio_client_threaded_server(server):
    asyncio.run(_async_behaviours(server, "threaded"))


def test_asyncio_client_same_loop():
    async def run():
        async with AsyncEmbeddedServer() as s:
            await _async_behaviours(s, "same loop")
    asyncio.run(run())


def test_a_sync_client_on_the_servers_own_loop_raises_at_once():
    # A synchronous in-process client inside the AsyncEmbeddedServer's loop
    # waits for a reply only that loop can give: it was a socket timeout
    # (here 2 s), or a hang without one.
    async def run():
        async with AsyncEmbeddedServer() as s:
            r = client(s, socket_timeout=2, retry=None)
            began = asyncio.get_running_loop().time()
            with pytest.raises(LoopThreadCallError, match="read state instead"):
                r.ping()
            assert asyncio.get_running_loop().time() - began < 1.0
            assert await async_client(s).ping()    # the async one, in place, works
    asyncio.run(run())


# ----------------------------------------------------------------------
# Client-side caching, dropped connections, several event loops (issue 30)
# ----------------------------------------------------------------------

def _tracked_push(conn: _Raw, writer, key: bytes) -> bytes:
    """HELLO 3, CLIENT TRACKING ON, GET key on ``conn``; ``writer`` sets the
    key; the bytes ``conn`` then gets (the invalidation push)."""
    conn.request(_pack([b"HELLO", b"3"]))
    assert conn.request(_pack([b"CLIENT", b"TRACKING", b"ON"])) == b"+OK\r\n"
    conn.request(_pack([b"GET", key]))
    writer.set(key, "2")
    return conn.read(1)


def test_client_tracking_invalidation_push_as_over_tcp(srv):
    writer = client(srv)
    writer.set("ck", "1")
    pushes = [_tracked_push(make(srv), writer, b"ck") for make in (_inproc, _tcp)]
    assert pushes[0] == pushes[1] == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nck\r\n"
    # A redis-py RESP3 connection (single_connection_client: it connected to
    # localhost:6379 before the pool was made in-process) with CLIENT TRACKING
    # ON: another client's write sends the push, redis-py's parser hands it
    # to the invalidation handler, as over TCP.  (redis-py's own client-side
    # cache, cache_config=, refuses a server that calls itself valkey.)
    seen = {}
    for kind in ("inprocess", "tcp"):
        r = client(srv, protocol=3, single_connection_client=True) if kind == "inprocess" \
            else redis.Redis(host=srv.host, port=srv.port, protocol=3,
                             single_connection_client=True)
        r.execute_command("CLIENT", "TRACKING", "ON")
        assert r.get("ck") == b"2"
        got: list = []
        r.connection._parser.set_invalidation_push_handler(got.append)
        writer.set("ck", "3")
        assert r.connection.can_read(timeout=5)
        r.connection.read_response(push_request=True)
        seen[kind] = (type(r.connection).__name__, got, r.get("ck"))
        writer.set("ck", "2")
        r.close()
    assert seen["inprocess"][0] == "InProcessRedisConnection"
    assert seen["inprocess"][1:] == seen["tcp"][1:] == ([[b"invalidate", [b"ck"]]], b"3")
    writer.close()


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_drop_fault_reads_as_over_tcp_and_the_client_reconnects(srv, when):
    seen = {}
    for kind in ("inprocess", "tcp"):
        r = client(srv, retry=None) if kind == "inprocess" else \
            redis.Redis(host=srv.host, port=srv.port, retry=None)
        r.set("d", 0)
        first = r.client_id()
        with srv.faults.drop("INCRBY", when=when, times=1) as fault:
            with pytest.raises(redis.ConnectionError) as e:
                r.incr("d")
            assert fault.fired == 1
        # the next command reconnects: a new connection, the INCR applied or not
        seen[kind] = (type(e.value), str(e.value).rsplit(".", 2)[-2].strip(),
                      int(r.get("d")), r.client_id() != first)
        r.close()
    assert seen["inprocess"] == seen["tcp"], seen
    assert seen["tcp"][1:] == ("Connection closed by server", int(when == "after"), True)
    # redis-py's default retries make the drop invisible, on both
    for r in (client(srv), redis.Redis(host=srv.host, port=srv.port)):
        r.set("d", 0)
        with srv.faults.drop("INCRBY", times=1) as fault:
            assert r.incr("d") == 1 and fault.fired == 1
        r.close()


def test_drop_connections_reaches_in_process_clients(srv):
    # Over TCP redis-py finds its idle connection closed when it takes it
    # from the pool and reconnects: a command after drop_connections works,
    # on a new connection.  The same in-process.
    clients = [client(srv), client(srv, "valkey"),
               redis.Redis(host=srv.host, port=srv.port)]
    before = [r.client_id() for r in clients]
    assert srv.faults.drop_connections() >= 3
    assert [r.ping() for r in clients] == [True] * 3
    after = [r.client_id() for r in clients]
    assert all(a != b for a, b in zip(after, before)), (before, after)
    for r in clients:
        r.close()


def test_four_event_loops_at_once(srv):
    # Four threads, each its own asyncio.run and in-process async client,
    # 200 INCRs each on one key: every one counted, none twice.
    errors = []

    async def incr():
        r = async_client(srv)
        for _ in range(200):
            await r.incr("loops")
        await r.aclose()

    def run():
        try:
            asyncio.run(incr())
        except BaseException as e:   # reported below
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert srv.inspect.get("loops") == b"800"
