"""The bodies of hotkv's pytest fixtures (hotkv/pytest_plugin.py declares them).

pytest imports the plugin in every session of every project that has hotkv
installed; the plugin imports this module -- the embedded servers, the
test toolkit, the server and its commands -- only when a test asks for one
of its fixtures, so a session that uses none of them loads none of it.
Each function here is one fixture's body, named in its docstring; the
plugin's docstrings are the user's documentation.
"""
from __future__ import annotations

import warnings

import pytest

from .embedded import AsyncEmbeddedServer, EmbeddedServer
from .embedded_cluster import EmbeddedCluster
from .testing.faults import UnmatchedFaultWarning, unmatched_report
from .testing.inspect import run_on_loop
from .testing.isolation import Baseline
from .testing.snapshot import run_commands

MARKER = "hotkv"   # (hotkv.pytest_plugin registers it)


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
    faults = None if srv is None else srv.faults     # None until a fault was set
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
    faults = srv.faults                    # faults and journal: None until used
    if faults is not None:
        faults.clear()
    journal = srv.journal
    if journal is not None:
        journal.stop()
        journal.clear()
    if not srv.clock.real:
        srv.clock.reset()


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


def session_server(tmp_path_factory):
    """``hotkv_server``."""
    with EmbeddedServer(dir=str(tmp_path_factory.mktemp("hotkv-server")),
                        inprocess=True) as embedded:
        embedded._baseline = Baseline.take(embedded.server)
        yield embedded


def server_for_test(request, tmp_path_factory):
    """``hotkv``."""
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


def client_for(hotkv):
    """``hotkv_client``."""
    password = hotkv.server.config.values.get("requirepass") or None
    client = hotkv.client("valkey", password=password)
    try:
        yield client
    finally:
        client.close()


def server_factory(tmp_path_factory):
    """``hotkv_server_factory``."""
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


def export_url_env(hotkv, monkeypatch):
    """``hotkv_url_env``."""
    env = url_env(hotkv)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


# -- a session-wide seeded state, restored per test ------------------------

def seed_snapshot(hotkv_server, hotkv_seed_data):
    """``hotkv_seed_snapshot``."""
    _flush(hotkv_server)
    if callable(hotkv_seed_data):
        hotkv_seed_data(hotkv_server)
    elif hotkv_seed_data:
        hotkv_server.seed(hotkv_seed_data)
    return hotkv_server.snapshot()


# -- async -----------------------------------------------------------------

async def async_server(request, tmp_path_factory):
    settings = _marker_settings(request) or {}
    server = _marked_server(settings, tmp_path_factory, AsyncEmbeddedServer)
    try:
        await server.start()
    except Exception as e:
        raise pytest.UsageError("@pytest.mark.hotkv(%s): the server refused it: %s: %s" % (
            ", ".join("%s=%r" % kv for kv in settings.items() if kv[0] != "dir"),
            type(e).__name__, e)) from None
    return server


async def async_stop(server):
    try:
        if not _stopped(server):
            _warn_unfired(server)
    finally:
        await server.stop()


def cluster():
    """``hotkv_cluster``: a 3-primary, 1-replica-each EmbeddedCluster for the test."""
    with EmbeddedCluster(masters=3, replicas_per_master=1) as c:
        yield c
