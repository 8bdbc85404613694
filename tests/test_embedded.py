"""The in-process server and the pytest plugin's fixtures."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time

import pytest

import hotkv


def test_context_manager_start_stop_leaves_nothing():
    threads_before = {t.ident for t in threading.enumerate()}
    with hotkv.EmbeddedServer() as srv:
        port = srv.port
        assert srv.url == f"redis://127.0.0.1:{port}/0"
        import valkey
        assert valkey.Valkey.from_url(srv.url).ping()
    assert {t.ident for t in threading.enumerate()} <= threads_before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5)


def test_start_to_first_ping_is_quick():
    """Start-up must be fit for a per-test fixture (a budget, not a benchmark:
    generous so a loaded CI machine does not flake)."""
    t0 = time.perf_counter()
    srv = hotkv.EmbeddedServer().start()
    try:
        s = socket.create_connection((srv.host, srv.port))
        s.sendall(b"PING\r\n")
        assert s.recv(16) == b"+PONG\r\n"
        elapsed = time.perf_counter() - t0
        s.close()
    finally:
        srv.stop()
    assert elapsed < 0.5, elapsed


def test_start_stop_methods_and_settings(tmp_path):
    srv = hotkv.EmbeddedServer(requirepass="s3cret", databases=4)
    srv.start()
    try:
        import valkey
        assert srv.url.startswith("redis://:s3cret@127.0.0.1:")
        c = valkey.Valkey(host=srv.host, port=srv.port)
        with pytest.raises(valkey.AuthenticationError):
            c.ping()
        assert valkey.Valkey.from_url(srv.url).ping()
        with pytest.raises(valkey.ResponseError, match="DB index is out of range"):
            valkey.Valkey.from_url(srv.url).execute_command("SELECT", 4)
    finally:
        srv.stop()


def test_unix_socket(tmp_path):
    path = str(tmp_path / "hotkv.sock")
    with hotkv.EmbeddedServer(unixsocket=path, port=0) as srv:
        import valkey
        c = valkey.Valkey(unix_socket_path=path)
        assert c.ping()
        assert srv.unixsocket == path
    assert not os.path.exists(path)


def test_port_in_use_raises():
    with hotkv.EmbeddedServer() as a:
        with pytest.raises(OSError):
            hotkv.EmbeddedServer(port=a.port).start()


def test_async_embedded_server():
    async def main():
        async with hotkv.AsyncEmbeddedServer() as srv:
            reader, writer = await asyncio.open_connection(srv.host, srv.port)
            writer.write(b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n")
            await writer.drain()
            reply = await reader.readexactly(8)
            writer.close()
            return reply
    assert asyncio.run(main()) == b"$2\r\nhi\r\n"


def test_valkey_asyncio_client(server):
    import valkey.asyncio as va

    async def main():
        c = va.Valkey(host=server.host, port=server.port)
        pong = await c.ping()
        echoed = await c.echo("x")
        await c.aclose()
        return pong, echoed
    assert asyncio.run(main()) == (True, b"x")


def test_plugin_fixtures(hotkv_client, hotkv_url, hotkv_server_factory):
    assert hotkv_client.ping()
    assert hotkv_url.startswith("redis://127.0.0.1:")
    other = hotkv_server_factory(requirepass="pw")
    import valkey
    assert valkey.Valkey.from_url(other.url).ping()
    assert other.port != hotkv_client.connection_pool.connection_kwargs["port"]


def test_stop_while_the_initial_aof_is_written_says_so(tmp_path, caplog):
    """An embedded server's stop is prepare_shutdown's decision as FORCE
    (issue 29: one shutdown rule): with the AOF's first rewrite still running
    it says "Writing initial AOF. Exit anyway." and stops, as valkey-server's
    SHUTDOWN FORCE; before, the stop skipped the check and said nothing."""
    import valkey
    srv = hotkv.EmbeddedServer(dir=str(tmp_path), save="", appendonly="no").start()
    try:
        c = valkey.Valkey(host=srv.host, port=srv.port)
        c.mset({"k%d" % i: i for i in range(10)})
        c.config_set("rdb-key-save-delay", "10000000")
        c.config_set("appendonly", "yes")
        deadline = time.monotonic() + 10
        while c.info("persistence")["aof_rewrite_in_progress"] != 1:
            assert time.monotonic() < deadline, "the first rewrite did not start"
            time.sleep(0.01)
        c.close()
    finally:
        with caplog.at_level("INFO", logger="hotkv"):
            srv.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert "Writing initial AOF. Exit anyway." in messages
