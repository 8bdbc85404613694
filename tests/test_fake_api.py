"""hotkv.fake: fakeredis's API on a real hotkv server.

``import hotkv.fake as fakeredis`` must move a suite over: the class names,
the constructor arguments fakeredis documents (``server=``, ``connected=``,
``version=``, ``server_type=``, ``decode_responses=``, host/port/db,
``from_url``), and the sharing rules (one FakeServer per host/port; a fresh
one for a client given neither).
"""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest
import redis
import valkey

import hotkv.fake as fakeredis


def test_names():
    for name in ("FakeServer", "FakeRedis", "FakeStrictRedis", "FakeValkey", "FakeStrictValkey",
                 "FakeConnection", "FakeAsyncRedis", "FakeAsyncValkey"):
        assert hasattr(fakeredis, name), name
    assert isinstance(fakeredis.FakeRedis(), redis.Redis)
    assert isinstance(fakeredis.FakeStrictRedis(), redis.StrictRedis)
    assert isinstance(fakeredis.FakeValkey(), valkey.Valkey)
    assert isinstance(fakeredis.FakeStrictValkey(), valkey.StrictValkey)


def test_package_names_and_aioredis():
    # ``import hotkv as fakeredis`` moves a suite too (issue 30): the names are
    # hotkv's, loaded on first use; ``aioredis`` is fakeredis's module of asyncio clients.
    import hotkv
    for name in ("FakeServer", "FakeRedis", "FakeStrictRedis", "FakeValkey", "FakeStrictValkey",
                 "FakeConnection", "FakeAsyncRedis", "FakeAsyncValkey", "aioredis"):
        assert getattr(hotkv, name) is getattr(fakeredis, name), name
    assert hotkv.aioredis.FakeRedis is fakeredis.FakeAsyncRedis
    assert hotkv.aioredis.FakeServer is fakeredis.FakeServer
    from hotkv.fake.aioredis import FakeRedis
    assert FakeRedis is fakeredis.aioredis.FakeRedis
    with pytest.raises(AttributeError):
        hotkv.FakeNothing


def test_collected_server_stops_without_waiting():
    # A FakeServer nobody can reach, collected in the middle of some test, is
    # asked to stop and not waited for (the join cost ~0.2 ms); its thread ends.
    r = fakeredis.FakeRedis()
    r.set("k", "v")
    thread = r.fake_server.embedded._thread
    r.close()
    del r
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_server_shared_between_clients():
    server = fakeredis.FakeServer()
    a = fakeredis.FakeRedis(server=server)
    b = fakeredis.FakeValkey(server=server)
    a.set("k", "v")
    assert b.get("k") == b"v"
    assert fakeredis.FakeRedis().get("k") is None          # a fresh server of its own


def test_host_port_share_a_server():
    a = fakeredis.FakeRedis(host="h1", port=1234)
    a.set("k", "v")
    assert fakeredis.FakeStrictRedis(host="h1", port=1234).get("k") == b"v"
    assert fakeredis.FakeRedis(host="h1", port=1235).get("k") is None
    assert fakeredis.FakeRedis(host="h2", port=1234).get("k") is None


def test_db_and_decode_responses():
    server = fakeredis.FakeServer()
    r = fakeredis.FakeRedis(server=server, db=2, decode_responses=True)
    r.set("k", "v")
    assert r.get("k") == "v"
    assert fakeredis.FakeRedis(server=server).get("k") is None
    assert fakeredis.FakeRedis(server=server, db=2).get("k") == b"v"


def test_protocol_3():
    r = fakeredis.FakeRedis(protocol=3)
    r.hset("h", "f", "1")
    assert r.hgetall("h") == {b"f": b"1"}
    assert int(r.client_info()["resp"]) == 3
    assert int(fakeredis.FakeRedis(protocol=2).client_info()["resp"]) == 2


def test_connected_false_raises_connection_error():
    r = fakeredis.FakeRedis(connected=False)
    with pytest.raises(redis.ConnectionError, match="emulating a connection error"):
        r.ping()
    v = fakeredis.FakeValkey(connected=False)
    with pytest.raises(valkey.ConnectionError):
        v.set("a", 1)


def test_server_connected_attribute():
    server = fakeredis.FakeServer()
    r = fakeredis.FakeRedis(server=server)
    r.set("a", 1)
    server.connected = False
    with pytest.raises(redis.ConnectionError):
        r.get("a")
    with pytest.raises(redis.ConnectionError):
        fakeredis.FakeRedis(server=server).ping()
    server.connected = True
    assert r.get("a") == b"1"


def test_version_server_type_lua_modules_accepted():
    for version in ((7,), (6, 2), "7.4", 8):
        assert fakeredis.FakeRedis(version=version).ping()
    assert fakeredis.FakeServer(version=(7, 4), server_type="valkey")
    assert fakeredis.FakeRedis(lua_modules={"cjson"}).eval("return cjson.encode({1})", 0) == \
        b"[1]"
    with pytest.raises(ValueError):
        fakeredis.FakeServer(server_type="nosuch")


def test_from_url():
    r = fakeredis.FakeRedis.from_url("redis://somewhere:6390/5", decode_responses=True)
    r.set("k", "v")
    assert r.get("k") == "v" and int(r.client_info()["db"]) == 5
    same = fakeredis.FakeRedis.from_url("redis://somewhere:6390/5")
    assert same.get("k") == b"v"
    v = fakeredis.FakeValkey.from_url("valkey://elsewhere:1/0")
    assert v.ping()


def test_single_connection_client():
    r = fakeredis.FakeRedis(single_connection_client=True)
    assert r.connection is not None
    rid = r.client_id()
    assert all(r.client_id() == rid for _ in range(3))


def test_server_config_and_settings():
    server = fakeredis.FakeServer(config={b"requirepass": b"s3cret"})
    with pytest.raises(redis.AuthenticationError):
        fakeredis.FakeRedis(server=server).ping()
    assert fakeredis.FakeRedis(server=server, password="s3cret").ping()
    small = fakeredis.FakeServer(maxmemory="1mb", maxmemory_policy="noeviction")
    r = fakeredis.FakeRedis(server=small)
    assert r.config_get("maxmemory")["maxmemory"] == "1048576" or \
        r.config_get("maxmemory")[b"maxmemory"] == b"1048576"


def test_pubsub_and_blocking_through_the_fake():
    server = fakeredis.FakeServer()
    r = fakeredis.FakeRedis(server=server)
    p = r.pubsub()
    p.subscribe("c")
    p.get_message(timeout=10)
    fakeredis.FakeRedis(server=server).publish("c", "m")
    assert p.get_message(timeout=10)["data"] == b"m"
    got = []
    t = threading.Thread(target=lambda: got.append(r.blpop("q", timeout=30)))
    t.start()
    server.embedded.wait_until(lambda s: any(c.blocked for c in s.server.clients.values()))
    fakeredis.FakeRedis(server=server).rpush("q", "x")
    t.join()
    assert got == [(b"q", b"x")]


def test_hotkv_helpers_on_the_fake_server():
    server = fakeredis.FakeServer()
    r = fakeredis.FakeRedis(server=server)
    server.embedded.clock.freeze()
    r.set("t", 1, ex=10)
    server.embedded.clock.advance(11)
    assert r.get("t") is None
    with server.embedded.journal as j:
        r.set("j", 1)
    j.assert_called("SET", "j", "1")


def test_server_stops_when_collected_and_restarts_when_used():
    server = fakeredis.FakeServer()
    r = fakeredis.FakeRedis(server=server)
    r.set("a", 1)
    embedded = server.embedded
    server.stop()
    assert embedded._thread is None
    assert r.get("a") is None          # a new, empty server
    embedded = server.embedded
    del r, server
    gc.collect()
    embedded._thread is None or embedded._thread.join(30)
    assert embedded._thread is None or not embedded._thread.is_alive()


def test_async_clients():
    async def run():
        server = fakeredis.FakeServer()
        r = fakeredis.FakeAsyncRedis(server=server, decode_responses=True)
        v = fakeredis.FakeAsyncValkey(server=server)
        await r.set("k", "v")
        assert await v.get("k") == b"v"
        assert fakeredis.FakeRedis(server=server).get("k") == b"v"     # sync, same server
        off = fakeredis.FakeAsyncRedis(connected=False)
        with pytest.raises(redis.ConnectionError):
            await off.ping()
        single = fakeredis.FakeAsyncRedis(server=server, single_connection_client=True)
        assert await single.get("k") == b"v"
        for c in (r, v, off, single):
            await c.aclose()
    asyncio.run(run())


def test_client_of_a_fake_client_uses_its_server():
    """``r.client()`` (redis-py builds ``cls(connection_pool=..., single_connection_client=True)``)
    talks to r's server: it made a fresh server and moved r's pool to it
    (fakeredis's async blocking tests read None)."""
    server = fakeredis.FakeServer()
    r = fakeredis.FakeRedis(server=server)
    r.rpush("list", "x")
    with r.client() as conn:
        assert conn.blpop("list", timeout=1) == (b"list", b"x")
    assert r.fake_server is server and r.lpush("list", "y") == 1

    async def run():
        a = fakeredis.FakeAsyncRedis(server=server)
        async with a.client() as conn:
            assert await conn.blpop("list", timeout=1) == (b"list", b"y")
        await a.aclose()
    asyncio.run(run())


def test_positional_host_port_and_major_version_are_the_sharing_key():
    """As fakeredis: FakeRedis("h", 6000) shares with FakeRedis(host="h", port=6000), not with
    port 6379; another major version is another server."""
    a = fakeredis.FakeRedis("poshost", 6000)
    a.set("k", "v")
    assert fakeredis.FakeRedis(host="poshost", port=6000).get("k") == b"v"
    assert fakeredis.FakeRedis("poshost").get("k") is None
    assert fakeredis.FakeRedis("poshost", 6000, 1).get("k") is None       # db 1
    assert fakeredis.FakeRedis("poshost", 6000, version=8).get("k") is None
    assert fakeredis.FakeRedis("poshost", 6000, version=(7, 4)).get("k") == b"v"


def test_what_was_received_is_read_after_a_disconnection():
    """A subscriber whose server "drops" still reads the confirmation already
    sent to it (as from a real socket's buffer), then gets ConnectionError."""
    server = fakeredis.FakeServer()
    p = fakeredis.FakeRedis(server=server).pubsub()
    p.subscribe("logs")
    server.connected = False
    assert p.get_message() == {"type": "subscribe", "pattern": None, "channel": b"logs",
                               "data": 1}
    with pytest.raises(redis.ConnectionError):
        p.get_message()


def test_a_fresh_server_loads_no_dump_from_the_working_directory(tmp_path, monkeypatch):
    """A FakeServer without ``dir`` keeps its files in a directory of the process's:
    its SAVE wrote dump.rdb into the working directory, and the next fresh
    FakeRedis() there started with that data."""
    monkeypatch.chdir(tmp_path)
    r = fakeredis.FakeRedis()
    r.set("leak", "1")
    assert r.save()
    assert list(tmp_path.iterdir()) == []
    assert fakeredis.FakeRedis().keys() == []
    server = fakeredis.FakeServer(dir=str(tmp_path))      # unless it is given one
    assert fakeredis.FakeRedis(server=server).save()
    assert (tmp_path / "dump.rdb").exists()


def test_no_socket_timeout_unless_given():
    """As fakeredis's reads: redis-py 8's default socket_timeout (5 s) ended a
    ``blpop(timeout=10)`` or a command held by CLIENT PAUSE with TimeoutError."""
    r = fakeredis.FakeStrictRedis()
    conn = r.connection_pool.get_connection()
    try:
        assert conn.socket_timeout is None and conn._sock.gettimeout() is None
    finally:
        r.connection_pool.release(conn)
    given = fakeredis.FakeRedis(socket_timeout=1.5)
    conn = given.connection_pool.get_connection()
    try:
        assert conn.socket_timeout == 1.5 and conn._sock.gettimeout() == 1.5
    finally:
        given.connection_pool.release(conn)
    assert fakeredis.FakeValkey().connection_pool.connection_kwargs["socket_timeout"] is None
