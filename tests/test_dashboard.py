"""The HTTP port (hotkv.http): /api/state and /metrics against a server with
real queue libraries producing and consuming (RQ, BullMQ when node and npm
are there, a stream consumer group), /metrics read with Prometheus's own
text parser under redis_exporter's names, basic auth against requirepass
and ACL users, the protected-mode refusal, CONFIG SET http-port, and hostile
HTTP (malformed requests, huge heads, a slowloris client) while the Redis
port keeps answering; the per-list enqueue/dequeue counters (every list
command, real producers and consumers, a drained queue's rates, AOF replays
not counted, a seeded model of random list commands).  CI-sized: ~15 s.
The random run scales up:
    HOTKV_COUNTER_FUZZ_CMDS=100000 python -m pytest tests/test_dashboard.py -k model
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import subprocess
import threading
import time

import pytest
import valkey

from support import free_port, wait_for

pytest.importorskip("h11", reason="h11 (pip install 'hotkv[dashboard]') is not installed")


def get(port, path, auth=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


def state(port, auth=None) -> dict:
    """/api/state taken after this call began: ?fresh=1 gives a snapshot no
    older than 10x a snapshot's cost, so ask again (bounded) until it is."""
    since = time.time()
    for _ in range(200):
        status, _, body = get(port, "/api/state?fresh=1", auth)
        assert status == 200, body
        s = json.loads(body)
        if s["time"] >= since:
            return s
        time.sleep(0.01)
    raise AssertionError("no snapshot newer than the request in 200 tries")


def samples(text: str) -> dict:
    """/metrics parsed by prometheus_client: {(name, labels tuple): value}."""
    parser = pytest.importorskip("prometheus_client.parser",
                                 reason="prometheus-client is not installed")
    out = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def dash(hotkv_server_factory):
    port = free_port()
    server = hotkv_server_factory(http_port=port)
    server.http_port = port
    return server


def _ok(x):
    return x


def _boom():
    raise ValueError("boom")


def test_state_and_metrics_with_rq_and_a_stream_group(dash):
    import redis
    import rq
    conn = redis.Redis(host=dash.host, port=dash.port)
    q = rq.Queue("default", connection=conn)
    q.enqueue(_ok, 1)
    q.enqueue(_boom)
    rq.SimpleWorker([q], connection=conn).work(burst=True)
    waiting = [q.enqueue(_ok, i) for i in range(3)]
    assert q.job_ids == [j.id for j in waiting]
    r = valkey.Valkey(host=dash.host, port=dash.port)
    for i in range(5):
        r.xadd("events", {"n": i})
    r.xgroup_create("events", "workers", "0")
    r.xreadgroup("workers", "w1", {"events": ">"}, count=2)
    r.lpush("plain", json.dumps({"timestamp": int(time.time() * 1000) - 60_000}))

    before = r.dbsize()
    s = state(dash.http_port)
    after = r.dbsize()
    rqq = next(x for x in s["libraries"] if x["library"] == "rq" and x["name"] == "default")
    assert rqq["queued"] == 3 and rqq["failed"] == 1
    assert (rqq["enqueued"], rqq["dequeued"]) == (5, 2)   # rq:queue:default's counters
    assert rqq["states"]["finished"] == 1 and rqq["states"]["queued"] == 3
    assert rqq["oldest_age_s"] is not None and 0 <= rqq["oldest_age_s"] < 600
    lists = {x["key"]: x for x in s["lists"]}
    assert lists["rq:queue:default"]["depth"] == 3
    assert 59 <= lists["plain"]["oldest_age_s"] < 600
    st = next(x for x in s["streams"] if x["key"] == "events")
    g = st["groups"][0]
    assert (st["length"], g["name"], g["lag"], g["pending"]) == (5, "workers", 3, 2)
    assert g["consumers"][0]["name"] == "w1" and g["consumers"][0]["pending"] == 2
    assert g["oldest_pending"]["consumer"] == "w1" and g["oldest_pending"]["deliveries"] == 1
    # (RQ's worker left keys with a TTL: one may expire between the reads)
    assert after <= s["keyspace"][0]["keys"] <= before
    assert s["server"]["clients"] == r.info("clients")["connected_clients"]

    status, headers, body = get(dash.http_port, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    m = samples(body.decode())
    names = {name for name, _ in m}
    for name in ("redis_up", "redis_instance_info", "redis_connected_clients",
                 "redis_blocked_clients", "redis_commands_processed_total",
                 "redis_commands_total", "redis_commands_duration_seconds_total",
                 "redis_db_keys", "redis_db_keys_expiring", "redis_memory_used_bytes",
                 "redis_uptime_in_seconds", "redis_connected_slaves", "redis_evicted_keys_total",
                 "redis_expired_keys_total", "redis_keyspace_hits_total",
                 "redis_keyspace_misses_total", "redis_net_input_bytes_total",
                 "hotkv_queue_depth", "hotkv_queue_oldest_age_seconds",
                 "hotkv_stream_group_lag", "hotkv_stream_group_pending",
                 "hotkv_library_queue_jobs", "hotkv_queue_enqueued_total",
                 "hotkv_queue_dequeued_total", "hotkv_stream_entries_added_total",
                 "hotkv_stream_group_entries_read_total"):
        assert name in names, name
    assert m[("redis_up", ())] == 1
    assert m[("redis_db_keys", (("db", "db0"),))] == r.dbsize()
    calls = r.info("commandstats")["cmdstat_xadd"]["calls"]   # ours and RQ's result streams
    assert m[("redis_commands_total", (("cmd", "xadd"),))] == calls >= 5
    assert m[("hotkv_queue_depth", (("db", "db0"), ("key", "rq:queue:default")))] == 3
    grp = (("db", "db0"), ("group", "workers"), ("key", "events"))
    assert m[("hotkv_stream_group_lag", grp)] == 3
    assert m[("hotkv_stream_group_pending", grp)] == 2
    assert m[("hotkv_stream_group_entries_read_total", grp)] == 2
    assert m[("hotkv_stream_entries_added_total", (("db", "db0"), ("key", "events")))] == 5
    rqk = (("db", "db0"), ("key", "rq:queue:default"))
    assert (m[("hotkv_queue_enqueued_total", rqk)], m[("hotkv_queue_dequeued_total", rqk)]) \
        == (5, 2)
    lib = (("db", "db0"), ("library", "rq"), ("queue", "default"), ("state", "failed"))
    assert m[("hotkv_library_queue_jobs", lib)] == 1
    conn.close()


def test_metrics_series_are_bounded_by_top_keys(hotkv_server_factory):
    port = free_port()
    server = hotkv_server_factory(http_port=port, http_metrics_top_keys=3)
    r = valkey.Valkey(host=server.host, port=server.port)
    for i in range(10):
        r.rpush("q%d" % i, *range(i + 1))
    state(port)   # a snapshot after the pushes (the timer's may be older): /metrics reads it
    m = samples(get(port, "/metrics")[2].decode())
    depth = {dict(k[1])["key"]: v for k, v in m.items() if k[0] == "hotkv_queue_depth"}
    # The 3 deepest, then the 3 counted keys most active since the previous
    # sample (q4..q6 whatever the sampler's timing: by activity, then total).
    assert depth == {"q9": 10, "q8": 9, "q7": 8, "q6": 7, "q5": 6, "q4": 5}
    s = state(port)
    assert [x["key"] for x in s["lists"]] == ["q9", "q8", "q7", "q6", "q5", "q4"]
    assert s["lists_total"] == 10
    # A queue drained as fast as it fills: reported by its activity (its
    # 200 elements in and out outrank any other key's count, sampled or not).
    r.delete("q0")
    for i in range(100):
        r.lpush("q0", "job")
        r.rpop("q0")
    s = state(port)
    assert [x["key"] for x in s["lists"]] == ["q9", "q8", "q7", "q0", "q6", "q5"]
    assert s["lists"][3]["depth"] == 0 and not r.exists("q0")
    assert (s["lists"][3]["enqueued"], s["lists"][3]["dequeued"]) == (101, 100)
    m = samples(get(port, "/metrics")[2].decode())
    q0 = (("db", "db0"), ("key", "q0"))
    assert m[("hotkv_queue_enqueued_total", q0)] == 101
    assert m[("hotkv_queue_dequeued_total", q0)] == 100


BULLMQ_SCRIPT = r"""
import { Queue } from 'bullmq';
import IORedis from 'ioredis';
const connection = new IORedis({
  host: process.env.HOST, port: Number(process.env.PORT), maxRetriesPerRequest: null,
});
const queue = new Queue('mail', { connection });
await queue.add('send', { to: 'a' });
await queue.add('send', { to: 'b' });
await queue.add('send', { to: 'c' }, { delay: 600000 });
await queue.close(); await connection.quit();
console.log('done');
"""


def test_bullmq_queue_by_its_own_name(dash):
    from support import npm_packages_dir
    node_dir = npm_packages_dir("bullmq@6", "ioredis@5")
    script = os.path.join(node_dir, "bullmq_dashboard_%d.mjs" % os.getpid())
    with open(script, "w") as f:
        f.write(BULLMQ_SCRIPT)
    try:
        proc = subprocess.run(["node", script], cwd=node_dir, capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, HOST=dash.host,
                                                   PORT=str(dash.port)))
    finally:
        os.unlink(script)
    assert proc.returncode == 0, proc.stderr
    s = state(dash.http_port)
    mail = next(x for x in s["libraries"] if x["library"] == "bullmq" and x["name"] == "mail")
    assert (mail["queued"], mail["delayed"], mail["states"]["wait"]) == (2, 1, 2)
    assert mail["oldest_age_s"] is not None and 0 <= mail["oldest_age_s"] < 600


def test_pages_methods_and_unknown_paths(dash):
    status, headers, body = get(dash.http_port, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"<script>" in body and b"api/state" in body and b"http://" not in body
    assert get(dash.http_port, "/nope")[0] == 404
    status, headers, body = get(dash.http_port, "/", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 1000
    status, headers, _ = get(dash.http_port, "/metrics", method="POST")
    assert status == 405 and headers["allow"] == "GET, HEAD"


def test_requirepass_and_acl_users_guard_every_page(hotkv_server_factory):
    port = free_port()
    server = hotkv_server_factory(http_port=port, requirepass="s3cret")
    for path in ("/", "/metrics", "/api/state"):
        status, headers, _ = get(port, path)
        assert status == 401 and headers["www-authenticate"].startswith("Basic")
        assert get(port, path, auth="default:wrong")[0] == 401
        assert get(port, path, auth="s3cret")[0] == 401   # no "user:" part
        assert get(port, path, auth=":s3cret")[0] == 200
        assert get(port, path, auth="default:s3cret")[0] == 200
    r = valkey.Valkey(host=server.host, port=server.port, password="s3cret")
    r.execute_command("ACL", "SETUSER", "alice", "on", ">pw", "~*", "+@all")
    assert get(port, "/metrics", auth="alice:pw")[0] == 200
    r.execute_command("ACL", "SETUSER", "alice", "off")
    assert get(port, "/metrics", auth="alice:pw")[0] == 401
    r.config_set("requirepass", "")   # no password any more: open again
    assert get(port, "/metrics")[0] == 200


def test_protected_mode_refuses_a_public_bind_without_a_password(hotkv_server_factory):
    port = free_port()
    with pytest.raises(Exception, match="protected mode"):
        hotkv_server_factory(bind="0.0.0.0", http_port=port)
    with socket.socket() as s:   # nothing was left listening
        assert s.connect_ex(("127.0.0.1", port)) != 0
    server = hotkv_server_factory(bind="0.0.0.0")
    r = valkey.Valkey(host="127.0.0.1", port=server.port)
    with pytest.raises(valkey.ResponseError, match="protected mode"):
        r.config_set("http-port", port)
    assert r.config_get("http-port") == {"http-port": "0"}
    r.config_set("requirepass", "pw")
    r = valkey.Valkey(host="127.0.0.1", port=server.port, password="pw")
    r.config_set("http-port", port)
    assert get(port, "/metrics")[0] == 401 and get(port, "/metrics", auth=":pw")[0] == 200


def test_config_set_http_port_turns_it_on_and_off(hotkv_server_factory):
    server = hotkv_server_factory()
    r = valkey.Valkey(host=server.host, port=server.port)
    assert "http-port" not in r.config_get("*")   # Valkey's list stays Valkey's
    assert r.config_get("http-port") == {"http-port": "0"}
    port = free_port()
    r.config_set("http-port", port)
    assert get(port, "/metrics")[0] == 200
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        with pytest.raises(valkey.ResponseError, match="http-port"):
            r.config_set("http-port", busy.getsockname()[1])
    finally:
        busy.close()
    assert get(port, "/metrics")[0] == 200   # the failed change kept the old port
    r.config_set("http-port", 0)
    assert wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) != 0, 5)


def _exchange(port, data: bytes, timeout=5.0) -> bytes:
    """Send data on a fresh connection, read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    raise AssertionError("the server did not close the connection: %r" % out[:200])


def test_bad_http_gets_400_and_a_close(dash):
    r = valkey.Valkey(host=dash.host, port=dash.port)
    for bad in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n",   # no Host: h11 refuses
                b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\0" * 64 + b"\r\n\r\n"):
        reply = _exchange(dash.http_port, bad)
        assert reply.startswith(b"HTTP/1.1 400 "), (bad, reply[:80])
        assert r.ping()
    huge = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n"
    reply = _exchange(dash.http_port, huge)
    assert reply.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 431 ")), reply[:80]
    body = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100_000
    assert _exchange(dash.http_port, body).startswith(b"HTTP/1.1 413 ")
    # A well-formed keep-alive pair on one connection still works after all that.
    assert get(dash.http_port, "/metrics")[0] == 200 and r.ping()


def test_a_slowloris_client_is_cut_and_blocks_nothing(dash):
    svc = dash.server.http
    svc.request_timeout = 1.0   # a float read at each new connection (test knob)
    r = valkey.Valkey(host=dash.host, port=dash.port)
    slow = socket.create_connection(("127.0.0.1", dash.http_port), timeout=5)
    try:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        answered = 0
        deadline = time.monotonic() + 10
        closed = False
        while time.monotonic() < deadline and not closed:
            try:
                slow.sendall(b"X-Drip: 1\r\n")
            except OSError:
                closed = True
                break
            # Meanwhile both ports answer.
            assert r.ping()
            assert get(dash.http_port, "/api/state")[0] == 200
            answered += 1
            slow.settimeout(0.2)
            try:
                data = slow.recv(65536)
                closed = data == b"" or data.startswith(b"HTTP/1.1 408")
            except socket.timeout:
                pass
            except OSError:
                closed = True
        assert closed, "the slow client was never cut"
        assert answered >= 1
    finally:
        slow.close()


def test_hotkv_serve_http_port(tmp_path):
    """``hotkv serve --http-port N`` as a user starts it; ``--bind 0.0.0.0``
    without a password refuses to start, saying why."""
    import sys
    port, http_port = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "hotkv", "serve", "--port", str(port),
                             "--http-port", str(http_port), "--save", "", "--dir",
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert b"listening" in proc.stdout.readline()
        status, _, body = get(http_port, "/metrics")
        assert status == 200 and b'redis_instance_info{role="master"' in body
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
    refused = subprocess.run([sys.executable, "-m", "hotkv", "serve", "--port", str(port),
                              "--bind", "0.0.0.0", "--http-port", str(http_port), "--save", "",
                              "--dir", str(tmp_path)], capture_output=True, timeout=30)
    assert refused.returncode == 1 and b"protected mode" in refused.stderr
    assert b"Traceback" not in refused.stderr


def test_history_and_rates_follow_the_queues(dash):
    """Each fresh snapshot is a sample of the plots' history: the depth of
    every reported queue, the server's rates; a list that grew between two
    samples has a positive enqueue rate, a stream its added entries' rate."""
    r = valkey.Valkey(host=dash.host, port=dash.port)
    r.rpush("grow", "a")
    r.xadd("st", {"n": 0})
    first = state(dash.http_port)
    r.rpush("grow", *"bcdef")
    for i in range(4):
        r.xadd("st", {"n": i + 1})
    time.sleep(0.01)   # the rates divide by the time between the two samples
    s = state(dash.http_port)
    h = s["history"]
    assert len(h["t"]) >= 2 and len(h["ops"]) == len(h["t"]) == len(h["enqueue"])
    assert h["depths"]["0:grow"][-1] == 6 and h["depths"]["0:st"][-1] == 5
    # The sampler's timer may have sampled between the two requests: the
    # samples after first's hold the change, whichever took it.
    i0 = h["t"].index(round(first["time"], 3))
    assert h["depths"]["0:grow"][i0] == first["lists"][0]["depth"] == 1
    assert max(h["flows"]["0:grow"]["in"][i0 + 1:]) > 0
    assert max(h["flows"]["0:st"]["in"][i0 + 1:]) > 0      # entries added
    assert max(h["enqueue"][i0 + 1:]) > 0    # server-wide: list elements and stream entries


def _counted(s) -> dict:
    """{(db, key): (enqueued, dequeued, depth)} of a snapshot's lists."""
    return {(q["db"], q["key"]): (q["enqueued"], q["dequeued"], q["depth"]) for q in s["lists"]}


def _blocked(r, n: int) -> bool:
    return wait_for(lambda: r.info("clients")["blocked_clients"] >= n, timeout=10)


def test_list_counters_count_what_every_list_command_moves(dash):
    """Each list command's elements in and out, as hotkv.http.counts
    documents them: pushes, LINSERT, the moves' push half in; pops (blocking
    ones served at once or after blocking), the moves' pop half, LREM and
    LTRIM out; LSET, a failed LINSERT, LPUSHX on no key and DEL not at all;
    inside MULTI and a script too; per database.  Counters outlive the key
    (a drained queue keeps them), and depth = in - out for a list only list
    commands touched.  Turning http-port off and on restarts them."""
    r = valkey.Valkey(host=dash.host, port=dash.port, decode_responses=True)
    r.lpush("a", "x", "y", "z")
    r.rpush("a", "w")
    assert r.lpushx("missing", "m") == 0
    r.rpushx("a", "v")
    assert r.linsert("a", "BEFORE", "x", "ins") == 6
    assert r.linsert("a", "BEFORE", "nosuch", "q") == -1
    r.lset("a", 0, "new")
    r.lpop("a")
    r.rpop("a", 2)
    assert r.execute_command("LMPOP", 2, "nosuch", "a", "LEFT", "COUNT", 2)[0] == "a"
    r.lmove("a", "b", "RIGHT", "LEFT")        # a's last element: a is gone
    r.rpush("a", "last")
    r.rpoplpush("a", "b")
    assert not r.exists("a") and r.llen("b") == 2
    r.lrem("b", 1, r.lindex("b", 0))
    r.ltrim("b", 1, 0)                        # trims the last one away
    r.rpush("c", 1, 2, 3)
    r.blpop(["c"], 1)
    r.brpop(["c"], 1)
    r.execute_command("BLMPOP", 1, 1, "c", "RIGHT", "COUNT", 5)
    r.rpush("h", 1, 2)
    r.lmove("h", "h", "LEFT", "RIGHT")       # a rotation: one in, one out
    r.rpush("k", 1, 2)
    r.delete("k")
    with r.pipeline(transaction=True) as p:
        p.lpush("f", 1, 2).rpop("f").execute()
    r.eval("redis.call('rpush', KEYS[1], 'a', 'b'); redis.call('lpop', KEYS[1])", 1, "g")
    r1 = valkey.Valkey(host=dash.host, port=dash.port, db=1)
    r1.lpush("a", 1)
    # A consumer blocked on an empty queue, served by the push.
    out = {}
    waiter = valkey.Valkey(host=dash.host, port=dash.port, decode_responses=True)
    t = threading.Thread(target=lambda: out.update(v=waiter.blmove("d", "e", 10, "LEFT",
                                                                   "RIGHT")))
    t.start()
    assert _blocked(r, 1)
    r.lpush("d", "job")
    t.join(15)
    assert out == {"v": "job"} and not r.exists("d")

    got = _counted(state(dash.http_port))
    want = {(0, "a"): (7, 7, 0), (0, "b"): (2, 2, 0), (0, "c"): (3, 3, 0),
            (0, "h"): (3, 1, 2), (0, "k"): (2, 0, 0), (0, "f"): (2, 1, 1),
            (0, "g"): (2, 1, 1), (1, "a"): (1, 0, 1), (0, "d"): (1, 1, 0),
            (0, "e"): (1, 0, 1)}
    assert got == want
    for (db, key), (enq, deq, depth) in got.items():
        if key != "k":   # DEL is not a list command
            assert enq - deq == depth, key
    m = samples(get(dash.http_port, "/metrics")[2].decode())
    assert m[("hotkv_queue_enqueued_total", (("db", "db0"), ("key", "a")))] == 7
    assert m[("hotkv_queue_dequeued_total", (("db", "db0"), ("key", "a")))] == 7

    r.config_set("http-port", 0)
    r.lpush("z", 1)
    r.config_set("http-port", dash.http_port)
    r.rpush("z", 2)
    r.rpop("h")
    got = _counted(state(dash.http_port))
    assert got[(0, "z")] == (1, 0, 2) and got[(0, "h")] == (0, 1, 1)
    assert (0, "a") not in got     # forgotten with the port: no list there now
    for c in (waiter, r1, r):
        c.close()


def test_real_producers_and_consumers_give_exact_counters_and_rates(dash):
    """Two producers push N jobs, two BRPOP consumers and one reliable
    consumer (BLMOVE to a processing list, LREM to acknowledge) take M of
    them: the counters are exactly N in and M out (the processing list:
    its moves in, its acks out).  Then a queue whose consumer keeps up --
    every job taken as it comes, the key absent at every sample, its net
    depth change 0 -- shows non-zero enqueue and dequeue rates."""
    n, m = 400, 300
    host, port = dash.host, dash.port

    def produce(start):
        c = valkey.Valkey(host=host, port=port)
        for i in range(start, n, 2):
            c.lpush("jobs", json.dumps({"id": i, "enqueued_at": time.time()}))
        c.close()

    taken = []

    def consume(reliable, count):
        c = valkey.Valkey(host=host, port=port)
        for _ in range(count):
            if reliable:
                job = c.blmove("jobs", "jobs:processing", 10, "RIGHT", "LEFT")
                if job is None or c.lrem("jobs:processing", 1, job) != 1:
                    break
            elif c.brpop(["jobs"], 10) is None:
                break
            taken.append(reliable)
        c.close()

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
    threads += [threading.Thread(target=consume, args=(rel, m // 3))
                for rel in (False, False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and len(taken) == m
    r = valkey.Valkey(host=host, port=port)
    s = state(dash.http_port)
    got = _counted(s)
    assert got[(0, "jobs")] == (n, m, n - m) == (n, m, r.llen("jobs"))
    assert got[(0, "jobs:processing")] == (m // 3, m // 3, 0) == (taken.count(True),) * 2 + (0,)
    m_ = samples(get(dash.http_port, "/metrics")[2].decode())
    assert m_[("hotkv_queue_enqueued_total", (("db", "db0"), ("key", "jobs")))] == n
    assert m_[("hotkv_queue_dequeued_total", (("db", "db0"), ("key", "jobs")))] == m

    # Equal in and out: a consumer blocked in BRPOP takes each job pushed.
    k = 200
    done = []
    consumer = valkey.Valkey(host=host, port=port)

    def drain():
        for _ in range(k):
            if consumer.brpop(["live"], 10) is None:
                return
            done.append(1)

    t = threading.Thread(target=drain)
    t.start()
    first = state(dash.http_port)
    assert _blocked(r, 1)
    for i in range(k):
        r.lpush("live", i)
    t.join(30)
    assert len(done) == k and not r.exists("live")
    s = state(dash.http_port)
    live = next(q for q in s["lists"] if q["key"] == "live")
    assert (live["enqueued"], live["dequeued"], live["depth"]) == (k, k, 0)
    assert live["net_rate"] == 0          # what the depth alone would say
    # Every element counted lands in the delta of exactly one sample taken
    # after first: so some sample's rate is > 0, in and out.
    since = [i for i, t_ in enumerate(s["history"]["t"]) if t_ > first["time"]]
    flow = s["history"]["flows"]["0:live"]
    assert since and max(flow["in"][i] or 0 for i in since) > 0
    assert max(flow["out"][i] or 0 for i in since) > 0
    assert s["dequeue_rate"] >= 0 and max(s["history"]["enqueue"]) > 0
    consumer.close()
    r.close()


def test_an_aof_replay_is_not_counted(hotkv_server_factory, tmp_path):
    """The commands an AOF load replays are history, not traffic: neither
    DEBUG LOADAOF nor the load at a restart (the port is on before the data
    is loaded) moves the counters; what clients do afterwards does."""
    http_port = free_port()
    server = hotkv_server_factory(http_port=http_port, appendonly="yes", dir=str(tmp_path),
                                  enable_debug_command="yes")
    r = valkey.Valkey(host=server.host, port=server.port)
    r.rpush("q", *range(5))
    r.lpop("q")
    assert _counted(state(http_port))[(0, "q")] == (5, 1, 4)
    assert r.execute_command("DEBUG", "LOADAOF") == b"OK"
    assert _counted(state(http_port))[(0, "q")] == (5, 1, 4)
    r.close()
    server.stop()
    again = hotkv_server_factory(http_port=http_port, appendonly="yes", dir=str(tmp_path))
    r = valkey.Valkey(host=again.host, port=again.port)
    assert r.llen("q") == 4
    assert _counted(state(http_port))[(0, "q")] == (None, None, 4)   # not counted
    r.rpush("q", "new")
    assert _counted(state(http_port))[(0, "q")] == (1, 0, 5)
    r.close()


def test_counters_match_a_model_over_random_list_commands(dash):
    """Seeded random list commands (every counted one, LSET and DEL too) on
    a few keys: the counters equal a model that takes each command's
    elements in and out from its reply (pushes: the elements; pops and
    moves: what came back; LINSERT: 1 when it inserted; LREM: the reply;
    LTRIM: LLEN before - after), and for a key only list commands touched,
    depth = in - out.  HOTKV_COUNTER_FUZZ_CMDS scales the run (default 1,000
    commands a seed, 2 seeds)."""
    import random
    n_cmds = int(os.environ.get("HOTKV_COUNTER_FUZZ_CMDS", "1000"))
    r = valkey.Valkey(host=dash.host, port=dash.port, decode_responses=True)
    keys = ["k%d" % i for i in range(4)]
    model = {k: [0, 0] for k in keys}
    deleted = set()
    for seed in (1, 2):
        rnd = random.Random(seed)
        for _ in range(n_cmds):
            k, k2 = rnd.choice(keys), rnd.choice(keys)
            elems = [str(rnd.randrange(5)) for _ in range(rnd.randint(1, 3))]
            op = rnd.randrange(14)
            if op in (0, 1, 2, 3):
                cmd = ("LPUSH", "RPUSH", "LPUSHX", "RPUSHX")[op]
                if r.execute_command(cmd, k, *elems):
                    model[k][0] += len(elems)
            elif op == 4:
                if r.linsert(k, rnd.choice(("BEFORE", "AFTER")), elems[0], "ins") > 0:
                    model[k][0] += 1
            elif op in (5, 6):
                got = (r.lpop if op == 5 else r.rpop)(k, rnd.randint(1, 3))
                model[k][1] += len(got or ())
            elif op == 7:
                got = r.execute_command("LMPOP", 2, k, k2, rnd.choice(("LEFT", "RIGHT")),
                                        "COUNT", rnd.randint(1, 3))
                if got:
                    model[got[0]][1] += len(got[1])
            elif op == 8:
                if r.exists(k, k2):  # served at once: never waits out a timeout
                    got = (r.blpop if rnd.random() < 0.5 else r.brpop)([k, k2], 1)
                    model[got[0]][1] += 1
            elif op in (9, 10):
                got = r.lmove(k, k2, rnd.choice(("LEFT", "RIGHT")), rnd.choice(("LEFT", "RIGHT"))) \
                    if op == 9 else r.rpoplpush(k, k2)
                if got is not None:
                    model[k][1] += 1
                    model[k2][0] += 1
            elif op == 11:
                model[k][1] += r.lrem(k, rnd.randint(-2, 2), elems[0])
            elif op == 12:
                before = r.llen(k)
                r.ltrim(k, rnd.randint(-3, 2), rnd.randint(-3, 3))
                model[k][1] += before - r.llen(k)
            elif rnd.random() < 0.1:
                deleted.add(k)
                r.delete(k)          # not a list command: not counted
            elif r.exists(k):
                r.lset(k, 0, "set")  # counted neither way
    got = {key: (enq, deq) for (db, key), (enq, deq, _) in _counted(state(dash.http_port)).items()}
    assert got == {k: tuple(v) for k, v in model.items()}
    for k in keys:
        if k not in deleted:
            assert model[k][0] - model[k][1] == r.llen(k), k
    r.close()


def test_the_counter_table_is_bounded_and_forgets_vanished_keys(dash, monkeypatch):
    """At most MAX_KEYS keys are counted (here 3): a fourth key's elements
    are not, and say so (refused, hotkv_queue_uncounted_total); a key that
    holds no list and has been idle FORGET_AFTER seconds (here 0: two
    samples) is forgotten, which makes room again."""
    from hotkv.http import counts
    monkeypatch.setattr(counts, "MAX_KEYS", 3)
    monkeypatch.setattr(counts, "FORGET_AFTER", 0.0)
    r = valkey.Valkey(host=dash.host, port=dash.port)
    for k in ("a", "b", "c"):
        r.rpush(k, 1, 2)
    r.rpush("d", 1, 2, 3)
    s = state(dash.http_port)
    got = _counted(s)
    assert got[(0, "d")] == (None, None, 3)
    assert s["queue_counters"] == {"keys": 3, "max_keys": 3, "refused": 3}
    m = samples(get(dash.http_port, "/metrics")[2].decode())
    assert m[("hotkv_queue_counted_keys", ())] == 3
    assert m[("hotkv_queue_uncounted_total", ())] == 3
    r.delete("a")                       # no list now: forgotten once idle
    state(dash.http_port)
    s = state(dash.http_port)
    assert s["queue_counters"]["keys"] == 2 and (0, "a") not in _counted(s)
    r.rpush("d", 4)                     # room again: counted from here
    s = state(dash.http_port)
    assert _counted(s)[(0, "d")] == (1, 0, 4) and _counted(s)[(0, "b")] == (2, 0, 2)
    r.close()
