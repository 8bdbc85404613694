"""bind-source-addr: the address hotkv's own outgoing connections come from
(a replica's link to its primary, MIGRATE's connection), as Valkey's
anetTcpNonBlockBestEffortBindConnect -- seen from a valkey-server 8.1.8
primary/target (Tcl networking 'CONFIG SET bind-source-addr')."""

from __future__ import annotations

import socket

import pytest
import valkey

from support import wait_for


def _loopback_alias_works() -> bool:
    try:
        with socket.create_server(("127.0.0.1", 0)) as srv:
            c = socket.create_connection(srv.getsockname(), timeout=1,
                                         source_address=("127.0.0.2", 0))
            c.close()
        return True
    except OSError:
        return False


@pytest.fixture
def alias():
    if not _loopback_alias_works():
        pytest.skip("this host cannot connect from 127.0.0.2 (no 127.0.0.0/8 loopback)")


def test_replica_link_and_migrate_come_from_bind_source_addr(alias, ref_server,
                                                             hotkv_server_factory):
    primary = valkey.Valkey(host=ref_server.host, port=ref_server.port)
    primary.flushall()
    srv = hotkv_server_factory()
    r = valkey.Valkey(host=srv.host, port=srv.port)
    r.config_set("bind-source-addr", "127.0.0.2")
    # MIGRATE: the target sees the connection from 127.0.0.2.
    r.set("moved", "1")
    assert r.migrate(ref_server.host, ref_server.port, "moved", 0, 1000)
    addrs = [c["addr"] for c in primary.client_list() if c.get("cmd") == "restore"]
    assert addrs and all(a.startswith("127.0.0.2:") for a in addrs), primary.client_list()
    # The replica's link: the primary lists its replica at 127.0.0.2.
    delay = primary.config_get("repl-diskless-sync-delay")["repl-diskless-sync-delay"]
    primary.config_set("repl-diskless-sync-delay", 0)     # (5 s by default)
    r.replicaof(ref_server.host, ref_server.port)
    try:
        assert wait_for(lambda: r.info("replication")["master_link_status"] == "up", timeout=20)
        assert wait_for(lambda: primary.info("replication").get("connected_slaves") == 1,
                        timeout=10)
        assert primary.info("replication")["slave0"]["ip"] == "127.0.0.2"
    finally:
        r.replicaof("no", "one")
        primary.config_set("repl-diskless-sync-delay", delay)
        primary.flushall()
        primary.close()
        r.close()
