"""A real hotkv server inside the calling process.

``EmbeddedServer`` runs the server on its own event loop in a background
thread: a context manager, or ``start()`` / ``stop()``.  It binds an
ephemeral port (or a unix socket) and reports ``host``, ``port`` and ``url``.
``AsyncEmbeddedServer`` runs inside the caller's running event loop.

Settings are redis.conf names, with ``_`` for ``-``:
``EmbeddedServer(requirepass="s3cret", appendonly=True, dir=tmp)``.
``tls_port=0`` with ``tls_cert_file`` / ``tls_key_file`` (and
``tls_ca_cert_file`` or ``tls_auth_clients="no"``) adds a TLS listener on an
ephemeral port, reported as ``tls_port``; ``url`` is then ``rediss://``.
``cluster_enabled=True`` gives a ready single cluster node: a fresh one takes
every slot once it listens (``ClusterState.own_every_slot``); its nodes.conf
goes to ``dir`` (without one, to a temporary directory of the object's own)
and a restart with that file comes back as the file says.

Invariants: ``start()`` returns only once the server accepts connections
(it waits on an event, never sleeps); ``stop()`` leaves no thread, socket
or unix-socket file behind.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import weakref
from os import PathLike
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, overload

from .core.clock import Clock
from .core.config import ALIASES, PARAMS
from .inprocess import LoopLock, client as inprocess_client, locked_event_loop
from .net.listeners import Listener, close_loop, new_event_loop
from .server import Server
from .testing import snapshot
from .testing.faults import Faults, faults_of, restart, restart_async
from .testing.inspect import Inspector
from .testing.journal import Journal, journal_of
from .testing.snapshot import Snapshot
from .testing.waiting import wait_idle, wait_idle_async, wait_until, wait_until_async

if TYPE_CHECKING:
    import redis
    import valkey


def _private_nodes_conf(owner: object, settings: dict[str, Any]) -> None:
    """A cluster node given no ``dir`` keeps its nodes.conf in a temporary
    directory of its own (removed with ``owner``), not in the process's
    working directory: two embedded cluster nodes of one process (or of
    pytest-xdist workers in one checkout) would otherwise share one file,
    which a second node refuses (its lock).  ``restart()`` keeps the path."""
    on = str(settings.get("cluster-enabled", "no")).lower() in ("yes", "true", "1")
    if not on or "dir" in settings or "cluster-config-file" in settings:
        return
    tmp = tempfile.mkdtemp(prefix="hotkv-nodes-")
    settings["cluster-config-file"] = os.path.join(tmp, "nodes.conf")
    weakref.finalize(owner, shutil.rmtree, tmp, True)


def _check_names(settings: Mapping[str, Any]) -> None:
    """Refuse a setting the server does not know, naming it (the server's own
    error, Valkey's, is a bare "unknown")."""
    for name in settings:
        if name.lower() in PARAMS or name.lower() in ALIASES:
            continue
        import difflib
        close = difflib.get_close_matches(name.lower(), list(PARAMS), 3)
        raise ValueError("unknown setting %r (given as %s=...): settings are redis.conf "
                         "names with _ for -%s" % (
                             name, name.replace("-", "_"),
                             "; did you mean %s?" % ", ".join(
                                 c.replace("-", "_") for c in close) if close else ""))


def _settings(port: int, host: str, unixsocket: str | PathLike[str] | None,
              config: Mapping[str, Any]) -> dict[str, Any]:
    settings = {k.replace("_", "-"): v for k, v in config.items()}
    _check_names(settings)
    settings.setdefault("port", port)
    settings.setdefault("bind", host)
    if unixsocket:
        settings["unixsocket"] = str(unixsocket)
        if "port" not in config and port == 0:
            settings["port"] = 0
    settings.setdefault("save", "")
    if config.get("tls_port") == 0 and "tls-port" in settings:
        settings["tls-port"] = -1   # hotkv.net.tls: bind an ephemeral TLS port
    return settings


class _Common:
    server: Server
    _listener: Listener
    settings: dict[str, Any]
    _stopped: Callable[[], bool]    # each subclass's

    @property
    def host(self) -> str:
        return self._listener.bound[0][0] if self._listener and self._listener.bound else ""

    @property
    def port(self) -> int:
        return self.server.config.values["port"]

    @property
    def tls_port(self) -> int:
        """The TLS port (0 when TLS is off)."""
        port = self.server.config.values.get("tls-port") or 0
        return port if port > 0 else 0

    @property
    def unixsocket(self) -> str | None:
        return self.server.config.values["unixsocket"] or None

    def _running(self, what: str) -> Server:
        """The running ``Server``, or a RuntimeError saying what to do: the
        test-control helpers (clock, faults, journal, inspect, snapshots,
        waits) act on a running server only."""
        server = self.server
        if server is None:
            raise RuntimeError("%s: the server is not started yet: call start() first "
                               "(or use it as a context manager)" % what)
        if self._stopped():
            raise RuntimeError("%s: the server is stopped: call start() (or restart()) "
                               "before using it again" % what)
        return server

    @property
    def clock(self) -> Clock:
        """The server's clock (hotkv.core.clock.Clock): freeze(), advance(s), set(t)."""
        return self._running("clock").clock

    @property
    def url(self) -> str:
        password = self.server.config.values["requirepass"]
        auth = f":{password}@" if password else ""
        if self.server.config.values.get("tls-port"):
            return f"rediss://{auth}{self.host}:{self.server.config.values['tls-port']}/0"
        if not self.server.config.values["port"] and self.unixsocket:
            return f"unix://{self.unixsocket}"
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        return f"redis://{auth}{host}:{self.port}/0"

    # -- test control (issue 16): hotkv/testing/ -------------------------
    @property
    def inspect(self) -> Inspector:
        """Read-only views of the data, without a client
        (hotkv.testing.inspect.Inspector)."""
        self._running("inspect")
        return Inspector(self)

    def snapshot(self) -> Snapshot:
        """An in-memory deep copy of every database (hotkv.testing.snapshot)."""
        return snapshot.take(self._running("snapshot"))

    def restore(self, snap: Snapshot) -> None:
        """Make the databases hold exactly ``snap``'s keys and TTLs again."""
        snapshot.restore(self._running("restore"), snap)

    def seed(self, data: Mapping[str | bytes, Any], db: int = 0,
             ttl: Mapping[str | bytes, float] | None = None) -> int:
        """Store Python objects as keys: ``seed({"k": "v", "q": ["a"], "h": {...}})``."""
        return snapshot.seed(self._running("seed"), data, db, ttl)

    def load_rdb(self, path: str | PathLike[str]) -> int:
        """Replace the databases with a dump.rdb's keys; returns how many."""
        return snapshot.load_rdb(self._running("load_rdb"), path)

    @property
    def faults(self) -> Faults:
        """Errors, delays, dropped connections, pause, OOM... on demand
        (hotkv.testing.faults.Faults)."""
        faults = faults_of(self._running("faults"))
        faults.embedded = self
        return faults

    @property
    def journal(self) -> Journal:
        """The command journal (hotkv.testing.journal.Journal); off until start()."""
        return journal_of(self._running("journal"))

    def wait_until(self, predicate: Callable[[Any], object], timeout: float = 5.0) -> None:
        """Return once predicate(self) is true, re-checked after every loop
        turn on the server's thread (hotkv.testing.waiting); TimeoutError."""
        self._running("wait_until")
        wait_until(self, predicate, timeout)

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Return once no command, input or reply is in flight and no blocked
        client could be served (hotkv.testing.waiting); TimeoutError."""
        self._running("wait_idle")
        wait_idle(self, timeout)


class EmbeddedServer(_Common):
    """A hotkv server on a background thread.

    ``inprocess=True``: the loop is asyncio's, holding a ``LoopLock`` except
    while it waits in epoll, so in-process connections (hotkv.inprocess)
    run their commands in the caller's thread instead of hopping to the
    loop's; without it they hop (``hotkv.inprocess.client`` works on both)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1",
                 unixsocket: str | PathLike[str] | None = None, inprocess: bool = False,
                 **config: Any) -> None:
        self.settings = _settings(port, host, unixsocket, config)
        _private_nodes_conf(self, self.settings)
        self.inprocess = inprocess
        self.loop_lock = None
        self.server = None
        self._listener = None
        self._thread = None
        self._loop = None
        self._started = threading.Event()
        self._error = None

    def start(self) -> EmbeddedServer:
        if self._thread is not None:
            return self
        self._started.clear()
        self._thread = threading.Thread(target=self._run, name="hotkv-embedded", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error
        return self

    def _stopped(self) -> bool:
        return self._thread is None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's event loop (None until started)."""
        return self._loop

    @overload
    def client(self, lib: Literal["redis"] = ..., **kwargs: Any) -> redis.Redis: ...

    @overload
    def client(self, lib: Literal["valkey"], **kwargs: Any) -> valkey.Valkey: ...

    def client(self, lib: str = "redis", **kwargs: Any) -> redis.Redis | valkey.Valkey:
        """A redis-py (lib="valkey": valkey-py) client whose connections are
        in-process ones (hotkv.inprocess.client): no socket."""
        return inprocess_client(self, lib, **kwargs)

    def _run(self) -> None:
        loop_lock = None
        if self.inprocess:
            loop_lock = LoopLock()
            loop_lock.lock.acquire()    # held by this thread except inside epoll
            loop = self._loop = locked_event_loop(loop_lock)
        else:
            loop = self._loop = new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._serve(loop, loop_lock)
        finally:
            if loop_lock is not None:
                loop_lock.closed = True
                loop_lock.lock.release()

    def _serve(self, loop: asyncio.AbstractEventLoop, loop_lock: LoopLock | None) -> None:
        try:
            self.server = Server(self.settings)
            if loop_lock is not None:
                loop_lock.attach(loop, self.server)
                self.loop_lock = loop_lock
            self._listener = Listener(self.server)
            loop.run_until_complete(self._listener.start(loop))
            if self.server.cluster is not None:
                self.server.cluster.own_every_slot()   # the ready single node (README)
        except BaseException as e:  # report start-up failures to start()
            self._error = e
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_until_complete(self._listener.closed)
        finally:
            try:
                loop.run_until_complete(self._listener.stop())
            finally:
                close_loop(loop)

    def stop(self) -> None:
        if self._thread is None:
            return
        loop, listener = self._loop, self._listener
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(listener.request_shutdown)
            except RuntimeError:  # loop already closed (SHUTDOWN command)
                pass
        self._thread.join()
        self._thread = None

    def restart(self, keep_data: bool = True) -> EmbeddedServer:
        """Stop and start again on the same port (hotkv.testing.faults.restart)."""
        return restart(self, keep_data)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<EmbeddedServer {self.url if self.server else 'stopped'}>"


class _StoppedLoop:
    """A stopped AsyncEmbeddedServer's ``server.loop``.  The caller's loop
    outlives ``stop()``; the clock, faults and journal taken before it (and
    in-process connections) ask ``server.loop.is_closed()``, as for a stopped
    EmbeddedServer (whose loop is closed), so they refuse.  The rest is the
    loop's: a late transport callback still runs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def is_closed(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loop, name)


class AsyncEmbeddedServer(_Common):
    """A hotkv server inside the caller's running event loop."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1",
                 unixsocket: str | PathLike[str] | None = None, **config: Any) -> None:
        self.settings = _settings(port, host, unixsocket, config)
        _private_nodes_conf(self, self.settings)
        self.server = None
        self._listener = None
        self._is_stopped = False

    def _stopped(self) -> bool:
        return self._is_stopped

    async def start(self) -> AsyncEmbeddedServer:
        self._is_stopped = False
        self.server = Server(self.settings)
        self._listener = Listener(self.server)
        await self._listener.start(asyncio.get_running_loop())
        if self.server.cluster is not None:
            self.server.cluster.own_every_slot()   # the ready single node (README)
        return self

    async def stop(self) -> None:
        if self._listener is not None:
            self._is_stopped = True
            await self._listener.stop()
            self._listener.request_shutdown()
            self.server.loop = _StoppedLoop(self.server.loop)

    async def restart(self, keep_data: bool = True) -> AsyncEmbeddedServer:
        """Stop and start again on the same port, in this loop: as
        ``EmbeddedServer.restart`` (hotkv.testing.faults.restart_async)."""
        return await restart_async(self, keep_data)

    async def wait_until(self, predicate: Callable[[Any], object],  # type: ignore[override]
                         timeout: float = 5.0) -> None:
        """``await``: return once predicate(self) is true (hotkv.testing.waiting)."""
        self._running("wait_until")
        await wait_until_async(self, predicate, timeout)

    async def wait_idle(self, timeout: float = 5.0) -> None:  # type: ignore[override]
        """``await``: return once the server is idle (hotkv.testing.waiting)."""
        self._running("wait_idle")
        await wait_idle_async(self, timeout)

    async def __aenter__(self) -> AsyncEmbeddedServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
