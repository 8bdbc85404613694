"""server.inspect (hotkv/testing/inspect.py) against real clients and real
queue libraries.

Every view is checked against what a real client reads over the socket
(LRANGE, HGETALL, XINFO, XPENDING...) or against the state a real library
(RQ, Celery/kombu, dramatiq, taskiq-redis, BullMQ) leaves after enqueueing
real jobs; that inspection changes nothing (keyspace hits, access times)
and reads a consistent state while another thread runs transactions.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest
import valkey

from support import wait_for


def test_values_of_every_type_match_what_a_client_reads(server, r):
    r.set("s", "v")
    r.rpush("l", "a", "b", "c")
    r.hset("h", mapping={"f": "1", "g": "2"})
    r.sadd("set", "x", "y")
    r.zadd("z", {"m": 2.5, "n": -1, "o": 2.5})
    first = r.xadd("st", {"f": "v"})
    second = r.xadd("st", {"a": "1", "b": "2"})
    r.set("ttl", "v", px=50_000)
    i = server.inspect
    assert i.keys() == sorted(r.keys())
    assert i.keys("s*") == [b"s", b"set", b"st"]
    assert i.get("s") == r.get("s")
    assert i.get("l") == r.lrange("l", 0, -1)
    assert i.get("h") == r.hgetall("h")
    assert i.get("set") == set(r.smembers("set"))
    assert i.get("z") == r.zrange("z", 0, -1, withscores=True)
    assert i.get("st") == [(e.decode(), f) for e, f in r.xrange("st")]
    assert [e for e, _ in i.get("st")] == [first.decode(), second.decode()]
    for key in (b"s", b"l", b"h", b"set", b"z", b"st"):
        assert i.type(key) == r.type(key).decode()
    assert i.type("missing") is None and i.get("missing") is None
    assert not i.exists("missing") and i.exists("s")
    pttl = r.pttl("ttl")
    assert 0 < i.ttl("ttl") * 1000 <= pttl
    assert i.ttl("s") is None and i.ttl("missing") is None
    assert i.dbsize() == r.dbsize()
    r.select(2)
    r.set("other-db", "1")
    assert server.inspect.keys(db=2) == [b"other-db"] and b"other-db" not in i.keys()
    r.flushdb()


def test_views_are_copies(server, r):
    r.rpush("l", "a")
    r.hset("h", "f", "1")
    got = server.inspect.get("l")
    got.append(b"mine")
    server.inspect.get("h")[b"f"] = b"changed"
    assert r.lrange("l", 0, -1) == [b"a"] and r.hget("h", "f") == b"1"


def test_inspection_changes_nothing(server, r):
    r.set("k", "v")
    r.rpush("q", "a")
    r.config_resetstat()
    before = r.info("stats")
    for _ in range(3):
        server.inspect.get("k")
        server.inspect.queue("q")
        server.inspect.get("missing")
        server.inspect.keys()
    after = r.info("stats")
    assert (after["keyspace_hits"], after["keyspace_misses"]) == \
        (before["keyspace_hits"], before["keyspace_misses"]) == (0, 0)
    assert r.object("idletime", "k") >= 0


def test_list_queue_with_processing_list_and_blocked_consumer(server, r):
    r.lpush("jobs", "j1", "j2", "j3")          # j1 is the oldest: at the tail
    assert r.blmove("jobs", "jobs:processing", 1, "RIGHT", "LEFT") == b"j1"
    q = server.inspect.queue("jobs", processing="jobs:processing")
    assert (q.depth, q.oldest, q.head, q.tail) == (2, b"j2", b"j3", b"j2")
    assert q.items == r.lrange("jobs", 0, -1)
    assert q.processing == [b"j1"] and q.waiting_consumers == 0
    r.rpush("rq", "first", "second")
    assert server.inspect.queue("rq", pushed="right").oldest == b"first"
    assert server.inspect.queue("missing") is None
    # A consumer blocked on an empty queue shows as waiting.
    other = valkey.Valkey(host=server.host, port=server.port)
    got = []
    t = threading.Thread(target=lambda: got.append(other.brpop("empty", 10)))
    t.start()
    try:
        assert wait_for(lambda: r.lpush("probe", 1) and server.inspect.queue("probe") and
                        _waiting(server, b"empty") == 1)
    finally:
        r.lpush("empty", "wake")
        t.join(10)
        other.close()
    assert got == [(b"empty", b"wake")]
    r.set("str", "x")
    with pytest.raises(TypeError):
        server.inspect.queue("str")


def _waiting(server, key):
    return len(server.server.dbs[0].blocking.get(key) or ())


def test_stream_groups_lag_pending_and_idle_match_xinfo(server, r):
    for i in range(5):
        r.xadd("events", {"n": str(i)})
    r.xgroup_create("events", "workers", "0")
    r.xgroup_create("events", "audit", "$")
    r.xreadgroup("workers", "alice", {"events": ">"}, count=2)
    r.xreadgroup("workers", "bob", {"events": ">"}, count=1)
    acked = r.xrange("events")[0][0]
    r.xack("events", "workers", acked)
    pending = {p["message_id"].decode(): p for p in
               r.xpending_range("events", "workers", "-", "+", 10)}
    info = server.inspect.stream("events")
    entries = r.xrange("events")
    assert info.length == r.xlen("events") == 5
    assert (info.first_id, info.last_id) == (entries[0][0].decode(), entries[-1][0].decode())
    xgroups = {g["name"]: g for g in r.xinfo_groups("events")}
    assert set(info.groups) == set(xgroups) == {b"workers", b"audit"}
    for name, g in info.groups.items():
        assert g.lag == xgroups[name]["lag"]
        assert g.pending == xgroups[name]["pending"]
        assert g.last_delivered_id == xgroups[name]["last-delivered-id"].decode()
        assert g.entries_read == xgroups[name]["entries-read"]
    w = info.groups[b"workers"]
    xcons = {c["name"]: c for c in r.xinfo_consumers("events", "workers")}
    assert {n: c.pending for n, c in w.consumers.items()} == \
        {n: c["pending"] for n, c in xcons.items()} == {b"alice": 1, b"bob": 1}
    for c in w.consumers.values():
        for p in c.pending_entries:
            # read after XPENDING: idle can only have grown
            assert p.idle_ms >= pending[p.id]["time_since_delivered"]
            assert p.deliveries == pending[p.id]["times_delivered"]
            assert p.consumer == c.name == pending[p.id]["consumer"]
    assert w.oldest_pending.id == min(pending, key=lambda x: tuple(map(int, x.split("-"))))
    assert info.groups[b"audit"].oldest_pending is None
    assert server.inspect.stream("missing") is None


def test_reads_are_consistent_with_transactions_in_flight(server, r):
    """Another thread pushes to two lists in one MULTI each time; every
    inspection sees both lists the same length (never half a transaction)."""
    stop = threading.Event()
    writer = valkey.Valkey(host=server.host, port=server.port)

    def write():
        for _ in range(2000):
            if stop.is_set():
                return
            p = writer.pipeline(transaction=True)
            p.lpush("a", "x").lpush("b", "x").execute()

    t = threading.Thread(target=write)
    t.start()
    seen = set()
    try:
        for _ in range(200):
            d = server.inspect.dump()
            assert len(d.get(b"a", [])) == len(d.get(b"b", []))
            seen.add(len(d.get(b"a", [])))
    finally:
        stop.set()
        t.join(30)
        writer.close()
    assert len(seen) > 1     # the reads did run while the writer wrote


# ----------------------------------------------------------------------
# Queue libraries, enqueueing real jobs
# ----------------------------------------------------------------------

def _run_scenario(server, module, scenario, specs, look, monkeypatch):
    """``module``.<scenario>(host, port) against ``server`` (a tests/_*_scenario.py):
    in this process with the installed libraries when ``specs`` is empty,
    else in a subprocess whose PYTHONPATH starts with those pinned releases
    (tests/_libcache.py).  The scenario's PEEK calls ``look``; returns what
    the scenario returns."""
    import importlib
    if not specs:
        mod = importlib.import_module(module)
        monkeypatch.setattr(mod, "PEEK", look)
        return getattr(mod, scenario)(server.host, server.port)
    from _libcache import pypi_target_dir
    site = pypi_target_dir(*specs)
    here = os.path.dirname(os.path.abspath(__file__))
    deadline = time.monotonic() + 60
    proc = subprocess.Popen(
        [sys.executable, "-c", "import %s as m; m.main()" % module,
         server.host, str(server.port), scenario],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([site, here])))
    out = None
    try:
        while out is None:
            line = _line(proc, deadline)
            if not line:
                break                              # it ended: its status says why
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if "_peek" in msg:
                look(msg["_peek"])
                proc.stdin.write("\n")
                proc.stdin.flush()
            else:
                out = msg
        assert proc.wait(max(1, deadline - time.monotonic())) == 0, proc.stderr.read()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        proc.stdin.close()
    assert out is not None
    return out


# RQ 3 is the installed one; the last RQ 2 release runs in a subprocess with
# its pinned copy first on PYTHONPATH (installed once per machine).  Both run
# tests/_rq_scenario.py's scenarios.
RQ_VERSIONS = ["installed", "2.12.0"]


def _rq_run(server, version, scenario, monkeypatch):
    """_rq_scenario.<scenario> against ``server``: (what it returns, a list
    of (job id, inspect.rq()'s in_flight) seen while a job ran)."""
    import _rq_scenario
    seen = []

    def look(job_id):
        seen.append((job_id, server.inspect.rq()["default"].in_flight))
    if version == "installed":
        _rq_scenario.short_pubsub_poll(monkeypatch.setattr)
        return _run_scenario(server, "_rq_scenario", scenario, (), look, monkeypatch), seen
    out = _run_scenario(server, "_rq_scenario", scenario, ("rq==" + version,), look,
                        monkeypatch)
    assert out["version"].split(".")[0] == version.split(".")[0], out["version"]
    return out, seen


@pytest.mark.parametrize("version", RQ_VERSIONS)
def test_rq_queued_scheduled_failed_finished(server, r, monkeypatch, version):
    ids, seen = _rq_run(server, version, "states", monkeypatch)
    assert seen == [(ids["peek"], [ids["peek"]])]        # in flight while it ran
    got = server.inspect.rq()
    assert set(got) == {"default", "emails"}
    d = got["default"]
    assert d.queued == ids["waiting"] == ids["job_ids"]
    assert d.delayed == [ids["later"]]
    assert ids["later"] in d.when and d.when[ids["later"]] > 0
    assert d.failed == [ids["bad"]]
    assert sorted(d.other["finished"]) == sorted([ids["done"], ids["peek"]])
    assert d.in_flight == []
    assert d.states["scheduled"] == [ids["later"]] and d.states["started"] == []
    assert d.jobs[ids["waiting"][0]].name == ids["description"]
    assert got["emails"].queued == [ids["other"]]


@pytest.mark.parametrize("version", RQ_VERSIONS)
def test_rq_intermediate_list_is_a_state_not_a_queue(server, r, monkeypatch, version):
    """RQ 2 and 3 LMOVE a job into rq:queue:<q>:intermediate before they
    start it; a worker killed in between leaves it there, and RQ's
    maintenance marks it with a first_seen string.  inspect.rq() shows it as
    the queue's "intermediate" state (it crashed on the string and listed a
    queue named "default:intermediate" before)."""
    ids, _ = _rq_run(server, version, "intermediate", monkeypatch)
    stuck = ids["stuck"]
    assert ids["first_seen_key"] == "rq:queue:default:intermediate:first_seen:" + stuck
    assert r.exists(ids["first_seen_key"])
    state = server.inspect.rq()
    assert set(state) == {"default"}
    d = state["default"]
    assert d.queued == [ids["waiting"]] == ids["job_ids"]
    assert d.other["intermediate"] == d.states["intermediate"] == [stuck]
    assert d.in_flight == []
    assert abs(d.first_seen[stuck] - ids["before"] * 1000) < 60_000
    assert d.jobs[stuck].name == ids["description"]


# kombu 5.7 with Celery 5.7 is installed; kombu 5.5's last release runs with
# Celery 5.5's in a subprocess (tests/_celery_scenario.py).
CELERY_VERSIONS = {"installed": (), "kombu5.5": ("celery==5.5.3", "kombu==5.5.4")}


@pytest.mark.parametrize("version", list(CELERY_VERSIONS))
def test_celery_queued_delayed_in_flight_and_failed(server, r, monkeypatch, version):
    specs = CELERY_VERSIONS[version]
    seen = []

    def look(ids):
        seen.append((ids, server.inspect.celery()))
    ids = _run_scenario(server, "_celery_scenario", "queued", specs, look, monkeypatch)
    for spec in specs:
        lib, want = spec.split("==")
        assert ids[lib] == want
    (_, state), = seen
    now, later, taken = ids["now"], ids["later"], ids["taken"]
    # kombu takes from the tail: the first task sent is the one taken
    assert taken == now[0]
    c = state["celery"]
    assert c.queued == [now[1], now[2], ids["prio"]]
    assert c.delayed == [later]
    assert abs(c.when[later] - (time.time() + 600) * 1000) < 60_000
    assert c.in_flight == [taken]
    assert c.failed == [now[2]]
    assert c.states["unacked"] == [taken] and c.states["FAILURE"] == [now[2]]
    assert c.jobs[now[1]].name == "t.add"
    assert c.jobs[now[1]].args[0] == [1, 1]
    assert state["mail"].queued == [ids["mail"]]
    # queued is the order kombu serves them in (priority lists after the bare one)
    assert [t for t in ids["served"] if t != later] == c.queued
    assert server.inspect.celery()["celery"].in_flight == []


def test_dramatiq_queued_delayed_in_flight_and_dead_lettered(server, r):
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    broker = RedisBroker(host=server.host, port=server.port, namespace="insp")

    @dramatiq.actor(broker=broker, queue_name="work")
    def job(x):
        pass

    msgs = [job.send(i) for i in range(4)]
    delayed = job.send_with_options(args=(99,), delay=600_000)
    consumer = broker.consume("work", prefetch=2, timeout=1000)
    taken = [next(consumer) for _ in range(2)]
    consumer.nack(taken[1])                  # dead-lettered
    state = server.inspect.dramatiq("insp")
    w = state["work"]
    ids = [m.options["redis_message_id"] for m in msgs]
    assert w.queued == ids[2:]
    assert w.in_flight == [ids[0]]
    assert w.failed == [ids[1]]
    assert w.delayed == [delayed.options["redis_message_id"]]
    assert w.states["dead-lettered"] == [ids[1]] and w.states["unacked"] == [ids[0]]
    assert w.when[w.delayed[0]] == delayed.options["eta"]
    assert w.jobs[ids[2]].name == "job" and w.jobs[ids[2]].args == [2]
    consumer.ack(taken[0])
    consumer.close()
    assert server.inspect.dramatiq("insp")["work"].in_flight == []
    broker.close()


def test_taskiq_list_and_stream_brokers(server, r):
    import asyncio

    from taskiq_redis import ListQueueBroker, RedisStreamBroker
    url = "redis://%s:%d/0" % (server.host, server.port)

    async def scenario():
        lb = ListQueueBroker(url, queue_name="tq-list")
        sb = RedisStreamBroker(url, queue_name="tq-stream", consumer_name="w1",
                               xread_block=100, xread_count=1)

        @lb.task(task_name="ltask")
        async def ltask(x):
            return x

        @sb.task(task_name="stask")
        async def stask(x):
            return x

        for b in (lb, sb):
            await b.startup()
        lids = [(await ltask.kiq(i)).task_id for i in range(3)]
        sids = [(await stask.kiq(i)).task_id for i in range(3)]
        listen = sb.listen()
        taken = await listen.__anext__()      # delivered, never acked
        await listen.aclose()
        for b in (lb, sb):
            await b.shutdown()
        return lids, sids, taken

    lids, sids, taken = asyncio.run(asyncio.wait_for(scenario(), 20))
    lst = server.inspect.taskiq("tq-list")
    assert [lst.jobs[j].id for j in lst.queued] == lids       # oldest first
    assert lst.jobs[lst.queued[0]].name == "ltask" and lst.jobs[lst.queued[0]].args == [0]
    assert server.inspect.queue("tq-list").depth == 3
    st = server.inspect.taskiq("tq-stream")
    assert [st.jobs[e].id for e in st.in_flight] == sids[:1]
    assert [st.jobs[e].id for e in st.queued] == sids[1:]
    assert st.states["pending"] == st.in_flight
    assert json.loads(taken.data)["task_id"] == sids[0]
    assert server.inspect.taskiq("missing") is None


BULLMQ_SCRIPT = r"""
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';
import readline from 'node:readline';
const connection = new IORedis({
  host: process.env.HOST, port: Number(process.env.PORT), maxRetriesPerRequest: null,
});
const queue = new Queue('mail', { connection });
const bad = await queue.add('bad', { x: 0 }, { attempts: 1 });
let failed = 0;
const worker = new Worker('mail', async job => { throw new Error('boom'); },
                          { connection, concurrency: 1 });
worker.on('failed', () => failed++);
const t0 = Date.now();
while (failed < 1 && Date.now() - t0 < 20000) await new Promise(r => setTimeout(r, 20));
await worker.close();
const w1 = await queue.add('send', { to: 'a' });
const w2 = await queue.add('send', { to: 'b' });
const later = await queue.add('send', { to: 'c' }, { delay: 600000 });
// A job held active until the test has looked (it writes a line to stdin).
const lines = readline.createInterface({ input: process.stdin });
const go = new Promise(r => lines.once('line', r));
const hold = new Queue('hold', { connection });
const held = await hold.add('hold', {});
const holder = new Worker('hold', async job => {
  console.log(JSON.stringify({ active: job.id }));
  await go;
}, { connection, concurrency: 1 });
await new Promise(r => holder.once('completed', r));
await holder.close(); lines.close();
console.log(JSON.stringify({ bad: bad.id, w1: w1.id, w2: w2.id, later: later.id,
                             due: later.timestamp + 600000, held: held.id }));
await queue.close(); await hold.close(); await connection.quit();
"""


def _line(proc, deadline) -> str:
    import select
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            return proc.stdout.readline()
    raise AssertionError("the node script said nothing in time")


@pytest.mark.parametrize("major", ["5", "6"])
def test_bullmq_waiting_delayed_active_failed(server, r, major):
    """BullMQ 5 (its last 5.x) and 6, each installed once per machine in its
    own npm directory."""
    from support import npm_packages_dir
    node_dir = npm_packages_dir("bullmq@" + major, "ioredis@5")
    with open(os.path.join(node_dir, "node_modules", "bullmq", "package.json")) as f:
        version = json.load(f)["version"]
    assert version.split(".")[0] == major, version
    script = os.path.join(node_dir, "bullmq_inspect_%d.mjs" % os.getpid())
    with open(script, "w") as f:
        f.write(BULLMQ_SCRIPT)
    deadline = time.monotonic() + 60
    proc = subprocess.Popen(["node", script], cwd=node_dir, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, HOST=server.host, PORT=str(server.port)))
    try:
        active = json.loads(_line(proc, deadline))["active"]
        assert server.inspect.bullmq()["hold"].in_flight == [active]
        proc.stdin.write("go\n")
        proc.stdin.flush()
        ids = json.loads(_line(proc, deadline))
        assert proc.wait(max(1, deadline - time.monotonic())) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        proc.stdin.close()
        os.unlink(script)
    state = server.inspect.bullmq()
    q = state["mail"]
    assert q.queued == [ids["w1"], ids["w2"]]
    assert q.delayed == [ids["later"]]
    assert q.when[ids["later"]] == ids["due"]
    assert q.failed == [ids["bad"]] and q.in_flight == []
    assert q.states["wait"] == q.queued and q.states["completed"] == []
    assert q.jobs[ids["w1"]].name == "send" and q.jobs[ids["w1"]].args == {"to": "a"}
    assert state["hold"].in_flight == [] and state["hold"].other["completed"] == [ids["held"]]
    assert server.inspect.bullmq(prefix="other") == {}


def test_reads_follow_the_servers_clock(hotkv_server_factory):
    """TTLs and idle times are read on the server's clock (the virtual one
    when a test moves it); a key whose time has come is absent to inspect
    and still there for the server to expire (inspection deletes nothing)."""
    server = hotkv_server_factory(enable_debug_command="yes")
    r = valkey.Valkey(host=server.host, port=server.port)
    try:
        server.clock.freeze()
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")   # expiry only on access
        r.set("k", "v", ex=100)
        r.xadd("s", {"f": "v"}, id="1-0")
        r.xgroup_create("s", "g", "0")
        r.xreadgroup("g", "c", {"s": ">"})
        assert server.inspect.ttl("k") == 100.0
        server.clock.advance(60)
        assert server.inspect.ttl("k") == 40.0
        p = server.inspect.stream("s").groups[b"g"].oldest_pending
        assert p.idle_ms == 60_000 == r.xpending_range("s", "g", "-", "+", 1)[0][
            "time_since_delivered"]
        assert server.inspect.stream("s").groups[b"g"].consumers[b"c"].idle_ms == 60_000
        server.clock.advance(40)
        assert server.inspect.get("k") is None and server.inspect.keys() == [b"s"]
        assert b"k" in server.server.dbs[0].data          # not deleted by reading
        assert r.get("k") is None and b"k" not in server.server.dbs[0].data
    finally:
        r.close()
