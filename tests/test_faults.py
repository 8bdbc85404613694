"""Faults on demand (hotkv.testing.faults) through real clients on real sockets.

Each kind (error, delay, drop) against each target (command, key glob,
client name, nth / times), in pipelines and MULTI/EXEC; the server-wide
switches (pause, refuse_connections, drop_connections, oom against
valkey-server 8.1.8's exact -OOM reply, restart with and without
persistence); scoping (nothing leaks into the next test: the autouse
fixture checks the dispatcher hook is off again); and two real queue
libraries: an RQ job retried after an error injected on the second fetch
of job input, a dramatiq worker and a Celery worker that survive a dropped
connection.

No test asserts on time: a delay is long (60 s) and the test observes that
the reply has not come while other clients are served, then ends the
fault, which hands the held reply over at once.  Every wait is bounded
(wait_until / wait_idle with a timeout, socket timeouts).  Runs in a few
seconds: ``python -m pytest -q tests/test_faults.py``.
"""

from __future__ import annotations

import select
import socket
import threading

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from support import RawClient

LONG = 60.0   # a delay no test waits for: it ends by removing the fault


@pytest.fixture(autouse=True)
def _no_leaks(server):
    server.faults.clear()
    redis.Redis(host=server.host, port=server.port).flushall()
    yield
    server.faults.clear()
    server.journal.stop()
    server.journal.clear()
    # Nothing of this test stays on the dispatcher's path.
    assert server.server.test_hooks is None
    assert server.faults.active == []


def client(server, name=None, **kw) -> redis.Redis:
    """redis-py without its retries (a retried command would hide the fault)."""
    return redis.Redis(host=server.host, port=server.port, client_name=name,
                       retry=Retry(NoBackoff(), 0), socket_timeout=10, **kw)


def readable(sock, wait: float = 0.0) -> bool:
    return bool(select.select([sock], [], [], wait)[0])


# -- errors ------------------------------------------------------------------

def test_error_by_command_exact_reply_and_errorstats(server, raw):
    before = redis.Redis(host=server.host, port=server.port).info("errorstats")
    with server.faults.error("GET", message="LOADING Redis is loading the dataset in memory"):
        assert raw.call("SET", "k", "v") == b"+OK\r\n"
        assert raw.call("GET", "k") == b"-LOADING Redis is loading the dataset in memory\r\n"
        assert raw.call("get", "k") == b"-LOADING Redis is loading the dataset in memory\r\n"
        stats = redis.Redis(host=server.host, port=server.port).info("commandstats")
    assert raw.call("GET", "k") == b"$1\r\nv\r\n"
    after = redis.Redis(host=server.host, port=server.port).info("errorstats")
    loading = after["errorstat_LOADING"]["count"] - \
        before.get("errorstat_LOADING", {"count": 0})["count"]
    assert loading == 2
    assert stats["cmdstat_get"]["failed_calls"] >= 2


def test_error_in_resp3_and_leading_dash(server, r3):
    with server.faults.error("HGETALL", message="-BUSY something is running"):
        with pytest.raises(redis.ResponseError, match="BUSY something is running"):
            r3.hgetall("h")
    assert r3.hgetall("h") == {}


def test_error_by_key_glob(server, raw):
    with server.faults.error(keys="rq:*", message="ERR no rq today") as f:
        assert raw.call("LPUSH", "other", "x") == b":1\r\n"
        assert raw.call("LPUSH", "rq:queue:default", "x") == b"-ERR no rq today\r\n"
        # Any key of the command: the second of MSET's.
        assert raw.call("MSET", "a", "1", "rq:job:1", "2") == b"-ERR no rq today\r\n"
        assert raw.call("EXISTS", "a") == b":0\r\n"
    assert f.fired == 2 and f.matched == 2


def test_error_by_client_name(server):
    worker, web = client(server, "worker-1"), client(server, "web")
    with server.faults.error(client="worker-*", message="ERR worker fault"):
        assert web.set("k", "1")
        with pytest.raises(redis.ResponseError, match="worker fault"):
            worker.get("k")
        web.client_setname("worker-9")     # the name counts when the command runs
        with pytest.raises(redis.ResponseError, match="worker fault"):
            web.get("k")
    assert worker.get("k") == b"1"


def test_error_nth_and_times(server, raw):
    with server.faults.error("INCR", nth=2, message="ERR second") as f:
        replies = [raw.call("INCR", "n") for _ in range(4)]
    assert replies == [b":1\r\n", b"-ERR second\r\n", b":2\r\n", b":3\r\n"]
    assert (f.matched, f.fired) == (4, 1)
    with server.faults.error("INCR", nth=2, times=2, message="ERR again") as f:
        replies = [raw.call("INCR", "n") for _ in range(4)]
    assert replies == [b":4\r\n", b"-ERR again\r\n", b"-ERR again\r\n", b":5\r\n"]
    with server.faults.error("INCR", times=1, message="ERR first") as f:
        replies = [raw.call("INCR", "n") for _ in range(2)]
    assert replies == [b"-ERR first\r\n", b":6\r\n"]
    assert not f.active


def test_error_nth_counts_only_matching_calls(server, raw):
    with server.faults.error("GET", keys="q:*", nth=2, message="ERR hit") as f:
        assert raw.call("GET", "x") == b"$-1\r\n"          # not a match: not counted
        assert raw.call("GET", "q:1") == b"$-1\r\n"
        assert raw.call("GET", "y") == b"$-1\r\n"
        assert raw.call("GET", "q:2") == b"-ERR hit\r\n"
    assert f.matched == 2


def test_error_in_a_pipeline(server):
    c = client(server)
    with server.faults.error("INCRBY", nth=3, message="ERR third"):   # redis-py's incr
        pipe = c.pipeline(transaction=False)
        for _ in range(5):
            pipe.incr("p")
        out = pipe.execute(raise_on_error=False)
    assert out[:2] == [1, 2] and out[3:] == [3, 4]
    assert isinstance(out[2], redis.ResponseError) and str(out[2]) == "third"


def test_error_inside_multi_exec_is_that_commands_entry(server, raw):
    with server.faults.error("INCR", keys="b", message="ERR in exec"):
        assert raw.call("MULTI") == b"+OK\r\n"
        assert raw.call("INCR", "a") == b"+QUEUED\r\n"
        assert raw.call("INCR", "b") == b"+QUEUED\r\n"     # matched when EXEC runs it
        assert raw.call("INCR", "c") == b"+QUEUED\r\n"
        assert raw.call("EXEC") == b"*3\r\n:1\r\n-ERR in exec\r\n:1\r\n"
    assert raw.call("MGET", "a", "b", "c") == b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n1\r\n"


def test_error_on_exec_discards_the_transaction(server, raw):
    with server.faults.error("EXEC", message="LOADING Redis is loading the dataset in memory"):
        raw.call("MULTI")
        raw.call("SET", "k", "v")
        assert raw.call("EXEC") == b"-LOADING Redis is loading the dataset in memory\r\n"
    # No longer in MULTI: the next command runs, the queued SET never did.
    assert raw.call("GET", "k") == b"$-1\r\n"
    assert raw.call("EXEC") == b"-ERR EXEC without MULTI\r\n"


def test_scripts_commands_are_not_targeted(server, raw):
    with server.faults.error("SET", message="ERR no"):
        assert raw.call("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k") == \
            b"+OK\r\n"
        assert raw.call("SET", "k", "y") == b"-ERR no\r\n"


def test_aof_replay_is_not_targeted(hotkv_server_factory):
    s = hotkv_server_factory(appendonly=True, enable_debug_command="yes")
    c = client(s)
    c.pipeline(transaction=True).set("k", "v").incr("n").execute()
    # The loader runs a MULTI block's commands through dispatch.call.
    with s.faults.error("SET", message="ERR no") as f, s.journal as j:
        assert c.execute_command("DEBUG", "LOADAOF")
        assert c.get("k") == b"v" and c.get("n") == b"1"
    assert f.fired == 0
    assert ("set", "internal") in [(e.name, e.origin) for e in j.entries()]


def test_blocked_command_matched_once_when_sent(server, raw_factory):
    waiter, pusher = raw_factory(), raw_factory()
    with server.faults.error("BLPOP", nth=2, message="ERR second blpop") as f:
        waiter.send("BLPOP", "bq", "0")
        server.wait_until(lambda s: s.server.blocked_clients >= 1, timeout=5)
        assert pusher.call("RPUSH", "bq", "job") == b":1\r\n"
        # Served by a re-run that is not a new call: still the first BLPOP.
        assert waiter.read_reply() == b"*2\r\n$2\r\nbq\r\n$3\r\njob\r\n"
        assert f.matched == 1
        assert waiter.call("BLPOP", "bq", "0") == b"-ERR second blpop\r\n"


def test_bad_arguments():
    from hotkv.testing.faults import Faults

    class _S:
        loop = None
    faults = Faults(_S())
    with pytest.raises(ValueError):
        faults.error("GET", message="two\r\nlines")
    with pytest.raises(ValueError):
        faults.delay(1, "GET", at="sometime")
    with pytest.raises(ValueError):
        faults.drop("GET", when="later")
    with pytest.raises(ValueError):
        faults.error("GET", nth=0)


# -- delays ------------------------------------------------------------------

def test_delay_holds_the_reply_and_serves_others(server, raw_factory):
    slow, other = raw_factory(), raw_factory()
    with server.faults.delay(LONG, "INCR") as f:
        slow.send("INCR", "n")
        slow.send("GET", "n")          # waits behind the held reply
        # The command ran: another client sees its effect, and is served.
        server.wait_until(lambda s: f.fired == 1, timeout=5)
        assert other.call("GET", "n") == b"$1\r\n1\r\n"
        assert not readable(slow.sock)
        with pytest.raises(TimeoutError, match=r"client \d+: held by a delay fault"):
            server.wait_idle(timeout=0.2)
    # Removing the fault hands the held reply over, then the GET runs.
    assert slow.read_reply() == b":1\r\n"
    assert slow.read_reply() == b"$1\r\n1\r\n"
    server.wait_idle(timeout=5)


def test_delay_at_command_holds_the_command(server, raw_factory):
    slow, other = raw_factory(), raw_factory()
    fault = server.faults.delay(LONG, "SET", at="command")
    slow.send("SET", "k", "v")
    server.wait_until(lambda s: fault.fired == 1, timeout=5)
    assert other.call("GET", "k") == b"$-1\r\n"      # not run yet
    assert not readable(slow.sock)
    fault.remove()
    assert slow.read_reply() == b"+OK\r\n"
    assert other.call("GET", "k") == b"$1\r\nv\r\n"
    assert fault.fired == 1          # the held command ran once, not matched again


def test_delay_by_key_client_and_nth(server, raw_factory):
    a, b = raw_factory(), raw_factory()
    a.call("CLIENT", "SETNAME", "slowpoke")
    with server.faults.delay(LONG, keys="slow:*", client="slow*", nth=2) as f:
        assert a.call("SET", "slow:1", "x") == b"+OK\r\n"     # the first match: not held
        assert b.call("SET", "slow:2", "x") == b"+OK\r\n"     # b is not slowpoke
        assert a.call("SET", "fast", "x") == b"+OK\r\n"       # not the key
        a.send("SET", "slow:3", "x")                          # the second match
        server.wait_until(lambda s: f.fired == 1, timeout=5)
        assert b.call("PING") == b"+PONG\r\n"
        assert not readable(a.sock)
    assert a.read_reply() == b"+OK\r\n"


def test_delay_of_a_blocking_command_that_blocks(server, raw_factory):
    w, p = raw_factory(), raw_factory()
    with server.faults.delay(LONG, "BLPOP"):
        w.send("BLPOP", "dq", "0")
        server.wait_until(lambda s: s.server.blocked_clients >= 1, timeout=5)
        p.call("RPUSH", "dq", "x")
        # It blocked: its reply comes when it is served, as without the fault.
        assert w.read_reply() == b"*2\r\n$2\r\ndq\r\n$1\r\nx\r\n"


# -- drops -------------------------------------------------------------------

def test_drop_before_the_command_runs(server, raw_factory):
    c, other = raw_factory(), raw_factory()
    with server.faults.drop("DEL") as f:
        c.send_raw(b"SET a 1\r\nDEL a\r\nSET b 2\r\n")
        assert c.read_reply() == b"+OK\r\n"       # the reply before it is delivered
        with pytest.raises(ConnectionError):
            c.read_reply()
    assert f.fired == 1
    assert other.call("MGET", "a", "b") == b"*2\r\n$1\r\n1\r\n$-1\r\n"


def test_drop_after_exec_applied_redis_py_sees_connection_error(server):
    c, other = client(server), client(server)
    with server.faults.drop("EXEC", when="after") as f:
        pipe = c.pipeline(transaction=True)
        pipe.incr("counter")
        pipe.lpush("done", "job-1")
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
    assert f.fired == 1
    # The transaction did apply, once; the client never heard.
    assert other.get("counter") == b"1"
    assert other.lrange("done", 0, -1) == [b"job-1"]
    assert c.incr("counter") == 2           # a new connection from the pool


def test_drop_after_exec_with_redis_pys_default_retry_runs_it_twice(server):
    """What a dropped EXEC reply does to a default redis-py client (6+ retries
    a ConnectionError three times): no error at all, and the transaction
    applied twice -- the at-least-once a queue's code must be ready for."""
    if int(redis.__version__.split(".")[0]) < 6:
        pytest.skip("redis-py %s does not retry by default" % redis.__version__)
    c = redis.Redis(host=server.host, port=server.port)
    with server.faults.drop("EXEC", when="after", nth=1) as f:
        pipe = c.pipeline(transaction=True)
        pipe.incr("counter")
        assert pipe.execute() == [2]
    assert f.fired == 1 and c.get("counter") == b"2"
    c.close()


def test_drop_by_key_client_and_nth(server):
    w = client(server, "worker")
    o = client(server, "other")
    with server.faults.drop(keys="jobs:*", client="worker", nth=2, when="after") as f:
        assert o.rpush("jobs:a", 1) == 1                  # another client
        assert w.rpush("jobs:a", 2) == 2                  # first match
        assert w.rpush("misc", 1) == 1                    # not the key
        with pytest.raises(redis.ConnectionError):
            w.rpush("jobs:a", 3)                          # second match: ran, then dropped
    assert f.fired == 1
    assert o.lrange("jobs:a", 0, -1) == [b"1", b"2", b"3"]


def test_drop_connections_and_reconnect(server, raw_factory):
    raw = raw_factory()
    c = client(server)
    first = c.client_id()
    assert server.faults.drop_connections() >= 2
    with pytest.raises(ConnectionError):
        raw.call("PING")
    # redis-py notices the closed connection before reusing it and reconnects.
    assert c.ping() and c.client_id() != first


# -- server-wide -------------------------------------------------------------

def test_pause_holds_everyone_until_resumed(server, raw_factory):
    a = raw_factory()
    a.call("SET", "k", "v")
    paused = server.faults.pause()
    try:
        a.send("GET", "k")
        server.wait_until(lambda s: any(c.pending for c in s.server.clients.values()),
                          timeout=5)
        assert not readable(a.sock)
        with pytest.raises(TimeoutError, match="postponed by a pause"):
            server.wait_idle(timeout=0.2)
    finally:
        paused.end()
    assert a.read_reply() == b"$1\r\nv\r\n"


def test_refuse_connections(server):
    old = client(server)
    assert old.ping()
    with server.faults.refuse_connections():
        with pytest.raises(redis.ConnectionError):
            client(server).ping()
        assert old.ping()        # open connections stay
    assert client(server).ping()


def test_oom_reply_is_valkeys(server, raw, ref_server):
    ref = RawClient("127.0.0.1", ref_server.port)
    try:
        ref.call("CONFIG", "SET", "maxmemory", "1")
        expected = ref.call("SET", "k", "v")
        expected_rpush = ref.call("RPUSH", "l", "x")
        ref_get = ref.call("GET", "k")
    finally:
        ref.call("CONFIG", "SET", "maxmemory", "0")
        ref.close()
    assert expected == b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    with server.faults.fill_memory():
        assert raw.call("SET", "k", "v") == expected
        assert raw.call("RPUSH", "l", "x") == expected_rpush
        assert raw.call("GET", "k") == ref_get            # reads still run
        assert raw.call("DEL", "k") == b":0\r\n"
    assert raw.call("SET", "k", "v") == b"+OK\r\n"


def test_oom_evicts_nothing_under_an_evicting_policy(server, raw):
    raw.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    try:
        for i in range(100):
            raw.call("SET", "key:%d" % i, "x" * 100)
        with server.faults.oom():
            assert raw.call("SET", "k", "v").startswith(b"-OOM ")
            assert raw.call("DBSIZE") == b":100\r\n"
        assert raw.call("CONFIG", "GET", "maxmemory-policy") == \
            b"*2\r\n$16\r\nmaxmemory-policy\r\n$11\r\nallkeys-lru\r\n"
    finally:
        raw.call("CONFIG", "SET", "maxmemory-policy", "noeviction")


def test_restart_keeps_memory_data_without_persistence(hotkv_server_factory):
    s = hotkv_server_factory()
    c = client(s)
    c.rpush("q", "a", "b")
    c.set("ttl", "x", ex=1000)
    port = s.port
    run_id = c.info("server")["run_id"]
    s.restart()
    assert s.port == port
    assert c.info("server")["run_id"] != run_id     # reconnected, to a new server
    assert c.lrange("q", 0, -1) == [b"a", b"b"]
    assert 0 < c.ttl("ttl") <= 1000
    s.restart(keep_data=False)
    assert client(s).dbsize() == 0


def test_restart_replays_the_aof(hotkv_server_factory):
    s = hotkv_server_factory(appendonly=True)
    c = client(s)
    c.incr("n")
    c.incr("n")
    s.restart()
    assert client(s).get("n") == b"2"
    assert client(s).config_get("appendonly") == {"appendonly": "yes"}
    s.faults.restart(keep_data=False)
    assert client(s).get("n") is None
    client(s).set("after", "1")
    s.restart()       # the AOF says empty too (FLUSHALL was logged), then "after"
    assert client(s).keys("*") == [b"after"]


def test_clear_ends_everything(server, raw_factory):
    slow = raw_factory()
    server.faults.error("GET")
    server.faults.delay(LONG, "INCR")
    slow.send("INCR", "z")
    server.wait_until(lambda s: any(c.blocked is not None for c in s.server.clients.values()),
                      timeout=5)
    server.faults.refuse_connections()
    server.faults.oom()
    assert len(server.faults.active) == 4
    server.faults.clear()
    assert slow.read_reply() == b":1\r\n"
    c = client(server)
    assert c.set("k", "v") and c.get("k") == b"v"
    assert server.server.test_hooks is None


# -- queue libraries -----------------------------------------------------------

def _rq_sum_input(key):
    import rq
    conn = rq.get_current_job().connection
    return sum(int(x) for x in conn.lrange(key, 0, -1))


def test_rq_job_retried_after_an_error_on_the_second_fetch(server, rq_short_pubsub_poll):
    import rq
    from rq import Retry as RQRetry
    # Without redis-py's retries: it retries LOADING by itself (BusyLoadingError
    # is a ConnectionError), and the job would never see the fault.
    c = client(server)
    c.delete("rq-in:1", "rq-in:2")
    c.rpush("rq-in:1", 1, 2)
    c.rpush("rq-in:2", 10, 20)
    q = rq.Queue("faults", connection=c)
    q.empty()
    first = q.enqueue(_rq_sum_input, "rq-in:1", retry=RQRetry(max=2))
    second = q.enqueue(_rq_sum_input, "rq-in:2", retry=RQRetry(max=2))
    with server.faults.error("LRANGE", keys="rq-in:*", nth=2,
                             message="LOADING Redis is loading the dataset in memory") as f:
        server.journal.start()
        rq.SimpleWorker([q], connection=c).work(burst=True)
        server.journal.stop()
    assert f.fired == 1
    first.refresh()
    second.refresh()
    assert first.get_status() == "finished" and first.return_value() == 3
    assert second.get_status() == "finished" and second.return_value() == 30
    assert first.retries_left == 2
    assert second.retries_left == 1        # its first run failed and was retried
    fetches = [e for e in server.journal.commands("LRANGE") if e.argv[1].startswith(b"rq-in:")]
    assert [e.argv[1] for e in fetches] == [b"rq-in:1", b"rq-in:2", b"rq-in:2"]
    assert [e.fault for e in fetches] == [None, "error", None]
    c.close()


def test_dramatiq_worker_survives_a_dropped_connection(server, monkeypatch):
    import dramatiq
    import dramatiq.worker
    from dramatiq.brokers.redis import RedisBroker
    monkeypatch.setattr(dramatiq.worker, "CONSUMER_RESTART_DELAY", 50)
    broker = RedisBroker(host=server.host, port=server.port, namespace="faults-test")
    broker.flush_all()
    done = []
    lock = threading.Lock()

    @dramatiq.actor(broker=broker, max_retries=0)
    def add(x, y):
        with lock:
            done.append(x + y)

    for i in range(5):
        add.send(i, 1)
    # The worker's first script call (its first fetch) loses its connection.
    fault = server.faults.drop("EVALSHA", keys="faults-test*", nth=1)
    worker = dramatiq.Worker(broker, worker_threads=2, worker_timeout=50)
    worker.start()
    try:
        broker.join(add.queue_name, timeout=20000)
    finally:
        worker.stop()
        broker.close()
    assert fault.fired == 1
    assert sorted(done) == [1, 2, 3, 4, 5]
    c = redis.Redis(host=server.host, port=server.port)
    assert c.llen("faults-test:default") == 0
    c.close()


def test_celery_worker_survives_a_dropped_brpop(server):
    import celery
    from celery.contrib.testing.worker import start_worker
    base = "redis://%s:%d" % (server.host, server.port)
    app = celery.Celery("hotkv_faults", broker=base + "/3", backend=base + "/4",
                        set_as_current=False)
    app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=False)

    @app.task
    def add(x, y):
        return x + y

    with start_worker(app, perform_ping_check=False, pool="solo", concurrency=1,
                      shutdown_timeout=10):
        assert add.delay(1, 1).get(timeout=15) == 2
        server.journal.start()
        # The worker's next fetch loses its connection before it runs.
        fault = server.faults.drop("BRPOP", keys="celery*", nth=1)
        assert add.delay(2, 2).get(timeout=30) == 4
        assert add.delay(3, 3).get(timeout=30) == 6
        server.journal.stop()
    app.close()
    assert fault.fired == 1
    fetches = server.journal.commands("BRPOP")
    dropped = [e for e in fetches if e.fault == "drop"]
    assert len(dropped) == 1
    # It fetched again on a new connection.
    assert any(e.client_id != dropped[0].client_id and e.seq > dropped[0].seq for e in fetches)


def test_socket_module_sees_reset_on_refused_connection(server):
    # What any client sees from a refused connection: EOF or a reset at once.
    with server.faults.refuse_connections():
        s = socket.create_connection((server.host, server.port), timeout=5)
        try:
            s.sendall(b"PING\r\n")
            data = s.recv(100)
            assert data == b""
        except ConnectionResetError:
            pass
        finally:
            s.close()


_LEAK_TESTS = '''
import redis

def test_1_leaves_everything_on(hotkv):
    hotkv.faults.error("GET", message="ERR leaked")
    hotkv.faults.delay(60, "INCR")
    hotkv.faults.oom()
    hotkv.faults.refuse_connections()
    hotkv.journal.start(replies=True)

def test_2_sees_none_of_it(hotkv):
    c = redis.Redis(host=hotkv.host, port=hotkv.port)
    assert c.set("k", "v") and c.get("k") == b"v" and c.incr("n") == 1
    assert hotkv.server.test_hooks is None and hotkv.faults.active == []
    assert len(hotkv.journal) == 0 and not hotkv.journal.recording
'''


def test_nothing_leaks_into_the_next_test_through_the_fixture(tmp_path):
    """The plugin's ``hotkv`` fixture ends every fault and the journal after
    a test that left them on (a real pytest run, in order)."""
    import os
    import subprocess
    import sys
    (tmp_path / "test_leak.py").write_text(_LEAK_TESTS)
    # Only hotkv's plugin: loading every installed one (celery, anyio...) took seconds.
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] + sys.path))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "hotkv.pytest_plugin",
                          "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "2 passed" in run.stdout, run.stdout + run.stderr
