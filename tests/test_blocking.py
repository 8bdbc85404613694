"""Blocking list commands across connections (hotkv/core/blocking.py and the
blocking half of hotkv/commands/lists.py).

Most scenarios run twice: against hotkv and against the reference Valkey,
with the same assertions, so every expectation here is Redis's behaviour.
Clients are raw sockets (exact replies, pipelining, abrupt disconnects) and
valkey-py (the job-queue flow as an application writes it)."""

from __future__ import annotations

import threading
import time

import valkey

from support import RawClient, aof_commands, start_aof_server

B = lambda *items: b"".join(items)  # noqa: E731


def bulk(v: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(v), v)


def arr(*items: bytes) -> bytes:
    return b"*%d\r\n" % len(items) + b"".join(items)


NULL_ARRAY = b"*-1\r\n"


def silent(c: RawClient, wait: float = 0.05) -> bool:
    """Nothing arrived on c within wait seconds."""
    return c.read_available(wait) == b""


# ----------------------------------------------------------------------
# Wake-ups
# ----------------------------------------------------------------------

def test_push_wakes_a_blocked_pop(target):
    a, w = target.admin, target.client()
    w.send("BRPOP", "q", "0")
    target.wait_blocked(a, 1)
    assert silent(w)
    assert a.call("LPUSH", "q", "job1") == b":1\r\n"
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"job1"))
    target.wait_blocked(a, 0)
    assert a.call("EXISTS", "q") == b":0\r\n"


def test_waiters_are_served_first_come_first_served(target):
    a = target.admin
    ws = [target.client() for _ in range(4)]
    for i, w in enumerate(ws):
        w.send("BLPOP", "q", "0")
        target.wait_blocked(a, i + 1)
    # One push of four elements: each waiter gets one, in blocking order.
    a.call("RPUSH", "q", "1", "2", "3", "4")
    for i, w in enumerate(ws):
        assert w.read_reply() == arr(bulk(b"q"), bulk(b"%d" % (i + 1)))
    target.wait_blocked(a, 0)
    # A push of one element serves only the first waiter.
    for i, w in enumerate(ws[:2]):
        w.send("BLPOP", "q", "0")
        target.wait_blocked(a, i + 1)
    a.call("LPUSH", "q", "x")
    assert ws[0].read_reply() == arr(bulk(b"q"), bulk(b"x"))
    assert silent(ws[1])
    target.wait_blocked(a, 1)
    a.call("LPUSH", "q", "y")
    assert ws[1].read_reply() == arr(bulk(b"q"), bulk(b"y"))


def test_first_nonempty_key_in_argument_order_wins(target):
    a, w = target.admin, target.client()
    w.send("BLPOP", "k1", "k2", "k3", "0")
    target.wait_blocked(a, 1)
    # k3 becomes ready first, but when the waiter runs again k2 is non-empty too.
    assert a.call("MULTI") == b"+OK\r\n"
    a.call("RPUSH", "k3", "c")
    a.call("RPUSH", "k2", "b")
    assert a.call("EXEC") == arr(b":1\r\n", b":1\r\n")
    assert w.read_reply() == arr(bulk(b"k2"), bulk(b"b"))
    assert a.call("LLEN", "k3") == b":1\r\n"
    # Served at once: argument order, not key age.
    assert w.call("BRPOP", "nokey", "k3", "k2", "0") == arr(bulk(b"k3"), bulk(b"c"))


def test_same_key_twice_is_one_waiter(target):
    a, w = target.admin, target.client()
    w.send("BLPOP", "q", "q", "q", "0")
    target.wait_blocked(a, 1)
    a.call("RPUSH", "q", "a", "b")
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"a"))
    target.wait_blocked(a, 0)
    assert a.call("LRANGE", "q", "0", "-1") == arr(bulk(b"b"))


def test_multi_exec_hands_pushes_over_after_exec_in_order(target):
    a = target.admin
    w1, w2, w3 = target.client(), target.client(), target.client()
    w1.send("BRPOP", "q", "0")
    target.wait_blocked(a, 1)
    w2.send("BRPOP", "q", "0")
    target.wait_blocked(a, 2)
    w3.send("BLMPOP", "0", "1", "q", "RIGHT", "COUNT", "10")
    target.wait_blocked(a, 3)
    a.call("MULTI")
    a.call("LPUSH", "q", "a")
    a.call("LPUSH", "q", "b")
    a.call("LPUSH", "q", "c")
    assert silent(w1)
    a.call("EXEC")
    assert w1.read_reply() == arr(bulk(b"q"), bulk(b"a"))
    assert w2.read_reply() == arr(bulk(b"q"), bulk(b"b"))
    assert w3.read_reply() == arr(bulk(b"q"), arr(bulk(b"c")))


def test_push_then_delete_in_one_transaction_wakes_nobody(target):
    a, w = target.admin, target.client()
    w.send("BLPOP", "q", "0")
    target.wait_blocked(a, 1)
    a.call("MULTI")
    a.call("LPUSH", "q", "x")
    a.call("LPOP", "q")
    a.call("EXEC")
    assert silent(w)
    target.wait_blocked(a, 1)
    # The key turned into another type is not served either.
    a.call("MULTI")
    a.call("LPUSH", "q", "x")
    a.call("DEL", "q")
    a.call("SET", "q", "string")
    a.call("EXEC")
    assert silent(w)
    target.wait_blocked(a, 1)
    a.call("DEL", "q")
    a.call("RPUSH", "q", "y")
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"y"))


def test_waiters_are_per_database(target):
    a, w = target.admin, target.client()
    assert w.call("SELECT", "1") == b"+OK\r\n"
    w.send("BLPOP", "q", "0")
    target.wait_blocked(a, 1)
    a.call("RPUSH", "q", "db0")
    assert silent(w)
    a.call("SELECT", "1")
    a.call("RPUSH", "q", "db1")
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"db1"))
    a.call("SELECT", "0")
    assert a.call("LLEN", "q") == b":1\r\n"


def test_pipelined_commands_wait_for_the_blocked_one(target):
    a, w = target.admin, target.client()
    w.send_raw(b"BLPOP q 0\r\nPING\r\nLLEN q\r\nRPOP q\r\n")
    target.wait_blocked(a, 1)
    assert silent(w)
    a.call("RPUSH", "q", "x", "y", "z")
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"x"))
    assert w.read_reply() == b"+PONG\r\n"
    assert w.read_reply() == b":2\r\n"
    assert w.read_reply() == bulk(b"z")


def test_fairness_kept_while_pipelining(target):
    a, w1, w2 = target.admin, target.client(), target.client()
    w1.send("BLPOP", "q", "0")
    target.wait_blocked(a, 1)
    # w2's push serves w1 first; w2's own BLPOP then blocks.
    w2.send_raw(b"LPUSH q 1\r\nBLPOP q 0\r\n")
    assert w1.read_reply() == arr(bulk(b"q"), bulk(b"1"))
    assert w2.read_reply() == b":1\r\n"
    target.wait_blocked(a, 1)
    a.call("LPUSH", "q", "2")
    assert w2.read_reply() == arr(bulk(b"q"), bulk(b"2"))


# ----------------------------------------------------------------------
# Timeouts and disconnects
# ----------------------------------------------------------------------

def test_timeout_replies_null_and_runs_pipelined_commands(target):
    a, w = target.admin, target.client()
    start = time.time()
    w.send_raw(b"BLPOP q 0.1\r\nPING\r\n")
    assert w.read_reply() == NULL_ARRAY
    assert time.time() - start >= 0.09
    assert w.read_reply() == b"+PONG\r\n"
    target.wait_blocked(a, 0)
    # A timed out BLMOVE answers a null *array*, as Redis does.
    assert w.call("BLMOVE", "q", "d", "LEFT", "RIGHT", "0.01") == NULL_ARRAY
    assert w.call("BRPOPLPUSH", "q", "d", "0.01") == NULL_ARRAY
    assert w.call("BLMPOP", "0.01", "2", "q", "r", "LEFT") == NULL_ARRAY
    w.call("HELLO", "3")
    assert w.call("BLMOVE", "q", "d", "LEFT", "RIGHT", "0.01") == b"_\r\n"
    assert w.call("BLPOP", "q", "0.01") == b"_\r\n"


def test_tiny_negative_timeout_rounds_to_forever(target):
    a, w = target.admin, target.client()
    w.send("BLPOP", "q", "-0.0001")
    target.wait_blocked(a, 1)
    time.sleep(0.05)
    assert silent(w)
    a.call("RPUSH", "q", "v")
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"v"))


def test_earlier_timeouts_fire_first_and_served_waiters_do_not_time_out(target):
    a = target.admin
    long_, short = target.client(), target.client()
    long_.send("BLPOP", "q", "0.4")
    target.wait_blocked(a, 1)
    short.send("BLPOP", "q", "0.05")
    assert short.read_reply() == NULL_ARRAY
    target.wait_blocked(a, 1)
    a.call("RPUSH", "q", "v")
    assert long_.read_reply() == arr(bulk(b"q"), bulk(b"v"))
    time.sleep(0.45)
    assert silent(long_)


def test_disconnect_while_blocked_leaves_no_waiter(target):
    a = target.admin
    ghost = RawClient(target.host, target.port)
    ghost.send("BRPOP", "q", "0")
    target.wait_blocked(a, 1)
    live = target.client()
    live.send("BRPOP", "q", "0")
    target.wait_blocked(a, 2)
    ghost.close()
    target.wait_blocked(a, 1)
    a.call("LPUSH", "q", "job")
    assert live.read_reply() == arr(bulk(b"q"), bulk(b"job"))
    target.wait_blocked(a, 0)
    # Nobody is left to take the next job: it stays in the queue.
    a.call("LPUSH", "q", "job2")
    time.sleep(0.02)
    assert a.call("LRANGE", "q", "0", "-1") == arr(bulk(b"job2"))


def test_disconnect_with_pipelined_input_while_blocked(target):
    a = target.admin
    ghost = RawClient(target.host, target.port)
    ghost.send_raw(b"BLMOVE src dst LEFT RIGHT 0\r\nLPUSH other x\r\n")
    target.wait_blocked(a, 1)
    ghost.close()
    target.wait_blocked(a, 0)
    a.call("RPUSH", "src", "job")
    assert a.call("LRANGE", "src", "0", "-1") == arr(bulk(b"job"))
    assert a.call("EXISTS", "dst", "other") == b":0\r\n"


# ----------------------------------------------------------------------
# BLMOVE / BRPOPLPUSH
# ----------------------------------------------------------------------

def test_blmove_chain(target):
    a = target.admin
    w1, w2, w3 = target.client(), target.client(), target.client()
    w1.send("BLMOVE", "a", "b", "LEFT", "RIGHT", "0")
    target.wait_blocked(a, 1)
    w2.send("BRPOPLPUSH", "b", "c", "0")
    target.wait_blocked(a, 2)
    w3.send("BLPOP", "c", "0")
    target.wait_blocked(a, 3)
    a.call("RPUSH", "a", "job")
    assert w1.read_reply() == bulk(b"job")
    assert w2.read_reply() == bulk(b"job")
    assert w3.read_reply() == arr(bulk(b"c"), bulk(b"job"))
    target.wait_blocked(a, 0)
    assert a.call("EXISTS", "a", "b", "c") == b":0\r\n"


def test_circular_and_self_referential_brpoplpush(target):
    a, w1, w2 = target.admin, target.client(), target.client()
    w1.send("BRPOPLPUSH", "x", "y", "0")
    target.wait_blocked(a, 1)
    w2.send("BRPOPLPUSH", "y", "x", "0")
    target.wait_blocked(a, 2)
    a.call("RPUSH", "x", "foo")
    assert w1.read_reply() == bulk(b"foo")
    assert w2.read_reply() == bulk(b"foo")
    assert a.call("LRANGE", "x", "0", "-1") == arr(bulk(b"foo"))
    assert a.call("EXISTS", "y") == b":0\r\n"
    w1.send("BRPOPLPUSH", "self", "self", "0")
    target.wait_blocked(a, 1)
    a.call("RPUSH", "self", "a", "b")
    assert w1.read_reply() == bulk(b"b")
    assert a.call("LRANGE", "self", "0", "-1") == arr(bulk(b"b"), bulk(b"a"))


def test_blmove_to_wrong_type_destination_keeps_the_job(target):
    a, w1, w2 = target.admin, target.client(), target.client()
    a.call("SET", "dst", "string")
    w1.send("BLMOVE", "src", "dst", "RIGHT", "LEFT", "0")
    target.wait_blocked(a, 1)
    w2.send("BLMOVE", "src", "ok", "RIGHT", "LEFT", "0")
    target.wait_blocked(a, 2)
    a.call("RPUSH", "src", "a", "b")
    assert w1.read_reply().startswith(b"-WRONGTYPE")
    assert w2.read_reply() == bulk(b"b")
    target.wait_blocked(a, 0)
    # The failed move took nothing: never in neither list.
    assert a.call("LRANGE", "src", "0", "-1") == arr(bulk(b"a"))
    assert a.call("LRANGE", "ok", "0", "-1") == arr(bulk(b"b"))


def test_blmove_with_a_client_blpopping_the_target(target):
    a, w1, w2 = target.admin, target.client(), target.client()
    w1.send("BLMOVE", "src", "target", "LEFT", "LEFT", "0")
    target.wait_blocked(a, 1)
    w2.send("BLPOP", "target", "0")
    target.wait_blocked(a, 2)
    a.call("RPUSH", "src", "foo")
    assert w1.read_reply() == bulk(b"foo")
    assert w2.read_reply() == arr(bulk(b"target"), bulk(b"foo"))
    assert a.call("EXISTS", "target", "src") == b":0\r\n"


def test_nested_unblock_order(target):
    a = target.admin
    w1, w2, w3 = target.client(), target.client(), target.client()
    w1.send("BRPOPLPUSH", "l1", "l3", "0")
    target.wait_blocked(a, 1)
    w2.send("BLPOP", "l2", "0")
    target.wait_blocked(a, 2)
    w3.send("BLMPOP", "0", "2", "l2", "l3", "LEFT", "COUNT", "1")
    target.wait_blocked(a, 3)
    a.call("MULTI")
    a.call("LPUSH", "l1", "1")
    a.call("LPUSH", "l2", "2")
    a.call("EXEC")
    assert w1.read_reply() == bulk(b"1")
    assert w2.read_reply() == arr(bulk(b"l2"), bulk(b"2"))
    assert w3.read_reply() == arr(bulk(b"l3"), arr(bulk(b"1")))


def test_blocking_commands_inside_multi_do_not_block(target):
    a = target.admin
    a.call("MULTI")
    a.call("BLPOP", "q", "0")
    a.call("BLMOVE", "q", "d", "LEFT", "LEFT", "0")
    a.call("BLMPOP", "0", "1", "q", "LEFT")
    assert a.call("EXEC") == arr(NULL_ARRAY, b"$-1\r\n", NULL_ARRAY)
    target.wait_blocked(a, 0)


# ----------------------------------------------------------------------
# The reliable queue, as an application writes it (valkey-py)
# ----------------------------------------------------------------------

def test_reliable_queue_flow(r, server):
    done = []
    errors = []

    def worker(name, n):
        client = valkey.Valkey(host=server.host, port=server.port)
        try:
            for _ in range(n):
                job = client.blmove("jobs", f"processing:{name}", timeout=5,
                                    src="RIGHT", dest="LEFT")
                if job is None:
                    errors.append(f"{name}: timed out")
                    return
                done.append(job)
                assert client.lrem(f"processing:{name}", 1, job) == 1
        except Exception as e:  # reported below, not lost in the thread
            errors.append(repr(e))
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}", 5)) for i in range(3)]
    for t in threads:
        t.start()
    for i in range(15):
        r.lpush("jobs", f"job{i}")
    for t in threads:
        t.join(10)
    assert not errors
    assert sorted(done) == sorted(f"job{i}".encode() for i in range(15))
    assert r.exists("jobs", "processing:w0", "processing:w1", "processing:w2") == 0

    # A worker that dies after taking a job leaves it in its processing list;
    # a reaper moves it back to the consuming end of the queue.
    r.lpush("jobs", "a", "b")
    assert r.blmove("jobs", "processing:dead", 1, "RIGHT", "LEFT") == b"a"
    assert r.lmove("processing:dead", "jobs", "RIGHT", "RIGHT") == b"a"
    assert r.exists("processing:dead") == 0
    assert r.brpop(["jobs"], 1) == (b"jobs", b"a")
    assert r.brpop(["jobs"], 1) == (b"jobs", b"b")


def test_blocked_worker_with_valkey_py_is_woken(r, server):
    got = []
    client = valkey.Valkey(host=server.host, port=server.port)
    t = threading.Thread(target=lambda: got.append(client.brpop(["q1", "q2"], 5)))
    t.start()
    deadline = time.time() + 5
    while server.server.blocked_clients != 1 and time.time() < deadline:
        time.sleep(0.005)
    r.lpush("q2", "hello")
    t.join(5)
    client.close()
    assert got == [(b"q2", b"hello")]


# ----------------------------------------------------------------------
# Logged as the non-blocking form (AOF determinism)
# ----------------------------------------------------------------------

def test_served_blocking_commands_are_logged_as_non_blocking(hotkv_server_factory, tmp_path):
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    a = RawClient(srv.host, srv.port)
    w = RawClient(srv.host, srv.port)
    try:
        def wait_blocked():
            deadline = time.time() + 5
            while srv.server.blocked_clients != 1 and time.time() < deadline:
                time.sleep(0.005)
        a.call("RPUSH", "l", "a", "b", "c")
        a.call("BLPOP", "l", "0")
        a.call("BLMPOP", "0", "1", "l", "RIGHT", "COUNT", "5")
        w.send("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
        wait_blocked()
        a.call("RPUSH", "src", "job")
        assert w.read_reply() == bulk(b"job")
        w.send("BRPOPLPUSH", "src", "dst", "0")
        wait_blocked()
        a.call("RPUSH", "src", "job2")
        assert w.read_reply() == bulk(b"job2")
        w.send("BRPOP", "q", "0")
        wait_blocked()
        a.call("LPUSH", "q", "x")
        assert w.read_reply() == arr(bulk(b"q"), bulk(b"x"))
        a.call("LMPOP", "1", "dst", "LEFT", "COUNT", "10")
        a.call("SET", "sentinel", "1")
        time.sleep(0.05)
    finally:
        a.close()
        w.close()
    cmds = aof_commands(tmp_path)
    assert cmds[:10] == [
        [b"RPUSH", b"l", b"a", b"b", b"c"],
        [b"LPOP", b"l"],
        [b"RPOP", b"l", b"2"],
        [b"RPUSH", b"src", b"job"],
        [b"LMOVE", b"src", b"dst", b"LEFT", b"RIGHT"],
        [b"RPUSH", b"src", b"job2"],
        [b"RPOPLPUSH", b"src", b"dst"],
        [b"LPUSH", b"q", b"x"],
        [b"RPOP", b"q"],
        [b"LPOP", b"dst", b"2"],
    ]


# ----------------------------------------------------------------------
# Bookkeeping
# ----------------------------------------------------------------------

def test_blocked_command_counted_once_in_commandstats(target):
    a, w = target.admin, target.client()
    assert a.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    w.send("BLPOP", "q", "0")
    target.wait_blocked(a, 1)
    a.call("LPUSH", "q", "x")
    assert w.read_reply() == arr(bulk(b"q"), bulk(b"x"))
    w.call("BLPOP", "q", "0.01")
    stats = a.call("INFO", "commandstats")
    line = [ln for ln in stats.split(b"\r\n") if ln.startswith(b"cmdstat_blpop:")]
    assert line and b"calls=2," in line[0], stats
    assert b"failed_calls=0" in line[0]


def _info_field(a: RawClient, field: bytes) -> int:
    reply = a.call("INFO", "clients")
    for line in reply.split(b"\r\n"):
        if line.startswith(field + b":"):
            return int(line.split(b":")[1])
    raise AssertionError(f"INFO clients has no {field.decode()}: {reply!r}")


def test_blocking_key_counts(target):
    a = target.admin
    w1, w2 = target.client(), target.client()
    w1.send("BLPOP", "a", "b", "0")
    target.wait_blocked(a, 1)
    w2.send("BLPOP", "b", "c", "0")
    target.wait_blocked(a, 2)
    assert _info_field(a, b"total_blocking_keys") == 3
    assert _info_field(a, b"total_blocking_keys_on_nokey") == 0
    a.call("RPUSH", "b", "x")
    assert w1.read_reply() == arr(bulk(b"b"), bulk(b"x"))
    target.wait_blocked(a, 1)
    assert _info_field(a, b"total_blocking_keys") == 2
    w2.close()
    target.wait_blocked(a, 0)
    assert _info_field(a, b"total_blocking_keys") == 0


def test_list_and_stream_group_waiters_on_one_key(target):
    """A list waiter and an XREADGROUP waiter (which also wakes when the key
    goes away) share a key's queue; the on-nokey count follows the latter."""
    a = target.admin
    w1, w2 = target.client(), target.client()
    w1.send("BLPOP", "k", "0")
    target.wait_blocked(a, 1)
    assert a.call("XGROUP", "CREATE", "k", "g", "$", "MKSTREAM") == b"+OK\r\n"
    w2.send("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "k", ">")
    target.wait_blocked(a, 2)
    assert _info_field(a, b"total_blocking_keys") == 1
    assert _info_field(a, b"total_blocking_keys_on_nokey") == 1
    w1.close()
    target.wait_blocked(a, 1)
    assert _info_field(a, b"total_blocking_keys_on_nokey") == 1
    # Deleting the stream wakes the group reader (its group is gone).
    a.call("DEL", "k")
    assert w2.read_reply().startswith(b"-")
    target.wait_blocked(a, 0)
    assert _info_field(a, b"total_blocking_keys") == 0
    assert _info_field(a, b"total_blocking_keys_on_nokey") == 0


def test_waiters_for_another_type_are_passed_over(target):
    """Stream readers ahead of a list waiter on one key: a push skips them
    (they keep waiting) and serves the list waiter behind them."""
    a = target.admin
    readers = [target.client() for _ in range(3)]
    for x in readers:
        x.send("XREAD", "BLOCK", "0", "STREAMS", "k", "$")
    target.wait_blocked(a, 3)
    w = target.client()
    w.send("BLPOP", "k", "0")
    target.wait_blocked(a, 4)
    a.call("RPUSH", "k", "job")
    assert w.read_reply() == arr(bulk(b"k"), bulk(b"job"))
    target.wait_blocked(a, 3)
    assert all(silent(x) for x in readers)
    a.call("DEL", "k")
    a.call("XADD", "k", "1-1", "f", "v")
    for x in readers:
        assert x.read_reply().startswith(b"*1\r\n*2\r\n$1\r\nk\r\n")
    target.wait_blocked(a, 0)


def test_client_unblock_list_waiters(target):
    a = target.admin
    w = target.client()
    wid = w.call("CLIENT", "ID")
    assert wid.startswith(b":"), wid
    wid = wid[1:-2].decode()
    w.send("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
    target.wait_blocked(a, 1)
    assert a.call("CLIENT", "UNBLOCK", wid, "TIMEOUT") == b":1\r\n"
    assert w.read_reply() == NULL_ARRAY
    target.wait_blocked(a, 0)
    w.send_raw(b"BRPOP q 0\r\nPING\r\n")
    target.wait_blocked(a, 1)
    assert a.call("CLIENT", "UNBLOCK", wid, "ERROR") == b":1\r\n"
    assert w.read_reply() == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    assert w.read_reply() == b"+PONG\r\n"
    assert a.call("CLIENT", "UNBLOCK", wid) == b":0\r\n"
    # Nothing is left waiting: a push stays in the list.
    a.call("RPUSH", "q", "job")
    assert a.call("LLEN", "q") == b":1\r\n"


def test_many_served_waiters_with_timeouts_then_a_timeout(target):
    """Served waiters' timeout entries are dropped lazily (and compacted);
    the timeouts that remain still fire, and only them."""
    a, w, slow = target.admin, target.client(), target.client()
    slow.send("BLPOP", "other", "30")
    target.wait_blocked(a, 1)
    for i in range(150):
        w.send("BLPOP", "q", "30")
        target.wait_blocked(a, 2)
        a.call("RPUSH", "q", str(i))
        assert w.read_reply() == arr(bulk(b"q"), bulk(str(i).encode()))
    w.send("BLPOP", "q", "0.05")
    assert w.read_reply() == NULL_ARRAY
    assert silent(slow)
    a.call("RPUSH", "other", "x")
    assert slow.read_reply() == arr(bulk(b"other"), bulk(b"x"))
    target.wait_blocked(a, 0)


def test_served_worker_is_not_dropped_as_idle(hotkv_server_factory):
    """With `timeout` set, a worker blocked longer than it is not idle: once
    served it has a fresh interaction time (Redis counts the reply it writes)."""
    srv = hotkv_server_factory(timeout=2)
    w = RawClient(srv.host, srv.port)
    a = None
    try:
        w.send("BLPOP", "q", "0")
        time.sleep(3.0)              # blocked clients are never idle
        a = RawClient(srv.host, srv.port)
        a.call("RPUSH", "q", "job")
        assert w.read_reply() == arr(bulk(b"q"), bulk(b"job"))
        time.sleep(1.2)              # an idle scan runs meanwhile
        assert w.call("PING") == b"+PONG\r\n"
    finally:
        if a is not None:
            a.close()
        w.close()
