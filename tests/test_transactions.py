"""MULTI / EXEC / DISCARD / WATCH: queueing, EXECABORT, WATCH invalidation
by other clients, expiry and FLUSHALL -- byte for byte against Valkey."""

from __future__ import annotations

import time

import pytest

from support import RawClient


def test_multi_exec_replies_match(diff):
    diff("MULTI")
    diff("SET", "a", "1")
    diff("INCR", "a")
    diff("ECHO", "x")
    diff("LPUSH", "a", "x")   # WRONGTYPE at exec time, the rest still runs
    diff("GET", "a")
    diff("EXEC")


@pytest.mark.parametrize("bad", [("NOSUCH",), ("GET",), ("SET", "a")])
def test_queue_time_errors_abort(diff, bad):
    diff("MULTI")
    diff("SET", "a", "1")
    diff(*bad)
    diff("SET", "b", "2")
    diff("EXEC")
    diff("EXISTS", "a", "b")


def test_nested_and_misplaced(diff):
    diff("EXEC")
    diff("DISCARD")
    diff("MULTI")
    diff("MULTI")
    diff("WATCH", "x")
    diff("PING")
    diff("EXEC")
    diff("MULTI")
    diff("SET", "k", "v")
    diff("DISCARD")
    diff("EXISTS", "k")


def test_empty_transaction(diff):
    diff("MULTI")
    diff("EXEC")


def test_resp3_exec(diff):
    diff.resp3()
    diff("MULTI")
    diff("SET", "a", "1")
    diff("GET", "a")
    diff("GET", "nope")
    diff("EXEC")


def _pair(server, ref_server):
    return [(RawClient(server.host, server.port), RawClient(server.host, server.port)),
            (RawClient(ref_server.host, ref_server.port),
             RawClient(ref_server.host, ref_server.port))]


def test_watch_fails_on_other_client_write(server, ref_server):
    results = []
    for a, b in _pair(server, ref_server):
        a.call("FLUSHALL")
        a.call("SET", "w", "1")
        a.call("WATCH", "w")
        b.call("SET", "w", "2")
        a.call("MULTI")
        a.call("SET", "w", "3")
        results.append((a.call("EXEC"), a.call("GET", "w")))
        a.close()
        b.close()
    assert results[0] == results[1] == (b"*-1\r\n", b"$1\r\n2\r\n")


def test_watch_succeeds_when_untouched_and_unwatch(server, ref_server):
    results = []
    for a, b in _pair(server, ref_server):
        a.call("FLUSHALL")
        a.call("WATCH", "w")
        b.call("SET", "other", "1")
        a.call("MULTI")
        a.call("SET", "w", "3")
        first = a.call("EXEC")
        a.call("WATCH", "w")
        b.call("SET", "w", "x")
        a.call("UNWATCH")
        a.call("MULTI")
        a.call("SET", "w", "4")
        results.append((first, a.call("EXEC")))
    assert results[0] == results[1] == (b"*1\r\n+OK\r\n", b"*1\r\n+OK\r\n")


def test_watch_fails_on_flushall_and_expiry(r):
    r.set("k", "v")
    pipe = r.pipeline()
    pipe.watch("k")
    r.flushall()
    pipe.multi()
    pipe.set("k", "x")
    import valkey
    with pytest.raises(valkey.WatchError):
        pipe.execute()

    r.set("e", "v", px=50)
    pipe = r.pipeline()
    pipe.watch("e")
    time.sleep(0.12)
    assert r.get("e") is None      # expired (lazily) after WATCH
    pipe.multi()
    pipe.set("e", "x")
    with pytest.raises(valkey.WatchError):
        pipe.execute()


def test_watch_on_missing_key_created_by_other(r, raw_factory):
    import valkey
    pipe = r.pipeline()
    pipe.watch("new")
    other = raw_factory()
    other.call("SET", "new", "1")
    pipe.multi()
    pipe.get("new")
    with pytest.raises(valkey.WatchError):
        pipe.execute()


def test_watch_inside_transaction_state_cleared_by_discard(r, raw_factory):
    pipe = r.pipeline()
    pipe.watch("k")
    pipe.multi()
    pipe.reset()           # DISCARD/UNWATCH
    raw_factory().call("SET", "k", "1")
    pipe = r.pipeline()
    pipe.set("k", "2")
    assert pipe.execute() == [True]


def test_pipelined_transaction_valkey_py(r):
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 1).incr("a").incrby("a", 10).get("a")
    assert pipe.execute() == [True, 2, 12, b"12"]


def test_redis_py_resp3_transaction(r3):
    pipe = r3.pipeline(transaction=True)
    pipe.rpush("q", "a", "b").lrange("q", 0, -1)
    assert pipe.execute() == [2, [b"a", b"b"]]


# LPUSH/RPUSH, single LPOP/RPOP and XADD count the change themselves when
# nobody watches, waits on or listens to the key (Server.written inlined on
# the path of every job); each effect must still happen when somebody does.
HOT_WRITES = [
    (("RPUSH", "k", "x", "y", "z"), ("LPUSH", "k", "a", "b")),
    (("RPUSH", "k", "x", "y", "z"), ("RPUSH", "k", "a")),
    (("RPUSH", "k", "x", "y", "z"), ("LPOP", "k")),
    (("RPUSH", "k", "x", "y", "z"), ("RPOP", "k")),
    (("XADD", "k", "1-1", "f", "v"), ("XADD", "k", "*", "f", "v")),
    (("XADD", "k", "1-1", "f", "v"), ("XADD", "k", "MAXLEN", "~", "10", "*", "f", "v")),
]


@pytest.mark.parametrize("setup,write", HOT_WRITES, ids=lambda a: " ".join(a))
def test_hot_writes_are_counted_watched_and_notified(target, setup, write):
    a = target.admin
    a.call(*setup)

    def changes() -> int:
        info = a.call("INFO", "persistence")
        return int(info.split(b"rdb_changes_since_last_save:")[1].split(b"\r\n")[0])

    before = changes()
    a.call(*write)
    assert changes() == before + (len(write) - 2 if write[0].endswith("PUSH") else 1)
    watcher = target.client()
    assert watcher.call("WATCH", "k") == b"+OK\r\n"
    a.call(*write)
    watcher.call("MULTI")
    watcher.call("PING")
    assert watcher.call("EXEC") == b"*-1\r\n"
    a.call("CONFIG", "SET", "notify-keyspace-events", "KA")
    try:
        sub = target.client()
        sub.call("SUBSCRIBE", "__keyspace@0__:k")
        a.call(*write)
        event = write[0].lower().encode()
        assert sub.read_reply() == (b"*3\r\n$7\r\nmessage\r\n$16\r\n__keyspace@0__:k\r\n"
                                    b"$%d\r\n%b\r\n" % (len(event), event))
    finally:
        a.call("CONFIG", "SET", "notify-keyspace-events", "")


def _lazy_expired_watch(a):
    """WATCH a live key, let its TTL pass without touching it (active expiry
    off), EXEC: the key is logically expired, so the EXEC fails."""
    a.call("FLUSHALL")
    a.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        a.call("SET", "k", "1", "PX", "5")
        a.call("WATCH", "k")
        time.sleep(0.03)     # past the TTL; nothing reads the key until EXEC
        a.call("MULTI")
        a.call("INCR", "k")
        return a.call("EXEC")
    finally:
        a.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_exec_fails_on_watched_key_expired_since_watch(server, ref_server):
    results = []
    for a, b in _pair(server, ref_server):
        results.append(_lazy_expired_watch(a))
        a.close()
        b.close()
    assert results[0] == results[1] == b"*-1\r\n"


def _swapdb_stale(a):
    """A key that does not exist, WATCHed, replaced by SWAPDB with a stale
    (expired, not yet deleted) key: logically nothing changed."""
    a.call("FLUSHALL")
    a.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        a.call("SELECT", "0")
        a.call("SET", "x", "foo", "PX", "1")
        time.sleep(0.01)
        a.call("SELECT", "1")
        a.call("WATCH", "x")
        a.call("SWAPDB", "0", "1")
        a.call("MULTI")
        a.call("PING")
        return a.call("EXEC")
    finally:
        a.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        a.call("SELECT", "0")


def test_swapdb_missing_watched_key_replaced_with_stale_key(server, ref_server):
    results = []
    for a, b in _pair(server, ref_server):
        results.append(_swapdb_stale(a))
        a.close()
        b.close()
    assert results[0] == results[1] == b"*1\r\n+PONG\r\n"


def _aof_commands(directory) -> list:
    import glob
    import os

    from support import parse_aof
    files = glob.glob(os.path.join(directory, "appendonlydir", "*.incr.aof"))
    assert len(files) == 1, files
    with open(files[0], "rb") as f:
        return [[a.lower() if i == 0 else a for i, a in enumerate(cmd)]
                for cmd in parse_aof(f.read())]


def test_transaction_in_aof_is_multi_then_select(hotkv_server_factory, tmp_path):
    """A transaction is logged MULTI first, the SELECT inside it (Valkey
    propagates MULTI with no database), as valkey-server's AOF."""
    from support import ReferenceValkey
    ours = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always")
    logs = []
    with ReferenceValkey("--appendonly", "yes", "--appendfsync", "always") as ref:
        for host, port, directory in ((ours.host, ours.port, str(tmp_path)),
                                      (ref.host, ref.port, ref.dir)):
            a = RawClient(host, port)
            a.call("SELECT", "9")
            a.call("MULTI")
            a.call("SET", "foo", "bar")
            a.call("FLUSHALL")
            a.call("EXEC")
            a.call("SELECT", "3")
            a.call("MULTI")
            a.call("SET", "a", "1")
            a.call("SELECT", "4")
            a.call("SET", "b", "2")
            a.call("EXEC")
            a.close()
            logs.append(_aof_commands(directory))
    assert logs[0] == logs[1]
    assert logs[0][:5] == [[b"multi"], [b"select", b"9"], [b"set", b"foo", b"bar"],
                           [b"flushall"], [b"exec"]]


def _replicaof_in_exec(host, port):
    """A transaction that turns its server into a replica (REPLICAOF a port
    nothing listens on) while an old-protocol SYNC replica is attached."""
    import socket

    from support import free_port
    sync = socket.create_connection((host, port), timeout=10)
    a = RawClient(host, port)
    try:
        sync.sendall(b"SYNC\r\n")
        head = b""
        for _ in range(100):          # bounded: the payload's length line
            head += sync.recv(1)
            if head.endswith(b"\r\n") and head.strip():
                break
        assert head.lstrip(b"\n").startswith(b"$"), head
        replies = [a.call("SET", "foo", "bar"), a.call("MULTI"), a.call("SET", "foo2", "bar"),
                   a.call("REPLICAOF", "127.0.0.1", str(free_port())),
                   a.call("SET", "foo3", "bar"), a.call("EXEC"), a.call("SET", "foo4", "x"),
                   a.call("REPLICAOF", "NO", "ONE"), a.call("MGET", "foo", "foo2", "foo3")]
    finally:
        sync.close()
        a.close()
    return replies


def test_replicaof_inside_exec(server, ref_server):
    """EXEC runs on: the queue's writes before REPLICAOF are not fed to a
    replica stream that no longer exists (hotkv closed the client: the
    pending feed had no sink), and the server is a replica afterwards."""
    ours = _replicaof_in_exec(server.host, server.port)
    theirs = _replicaof_in_exec(ref_server.host, ref_server.port)
    assert ours == theirs
    assert ours[5] == b"*3\r\n+OK\r\n+OK\r\n+OK\r\n"
    assert ours[6].startswith(b"-READONLY")
