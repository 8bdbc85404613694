"""fakeredis's API over a real hotkv server: ``import hotkv.fake as fakeredis``.

Owns ``FakeServer`` (one ``EmbeddedServer(inprocess=True)``, started on
first use, stopped when the FakeServer is garbage-collected or at exit)
and the clients ``FakeRedis``, ``FakeStrictRedis``, ``FakeValkey``,
``FakeStrictValkey``, ``FakeAsyncRedis`` and ``FakeAsyncValkey``: the
library's own client classes (redis.Redis, valkey.Valkey,
redis.asyncio.Redis...) whose connection pool makes in-process connections
(hotkv.inprocess) to the FakeServer's server.  Every command runs in
hotkv's parser and dispatcher, as over TCP; the replies are byte for byte
what a TCP client of the server reads.

What fakeredis's constructor arguments do here:
* ``server=`` a FakeServer shared between clients; without one, a client
  given ``host`` (or ``path``; positional or not) shares the server kept
  for that host/port/server_type/major version (fakeredis's
  ``FakeServer.get_server`` key), one given neither gets a fresh server of
  its own (as fakeredis >= 2.30), and one made on a fake client's pool
  (``r.client()``, ``connection_pool=r.connection_pool``) uses that pool's
  server;
* ``connected=False``: the client's commands raise the library's
  ``ConnectionError`` ("FakeRedis is emulating a connection error.");
  ``server.connected = False`` does it for every client of a server (what a
  connection had already received is still read, as after a real drop);
* ``version=`` and ``lua_modules=`` are accepted and ignored: hotkv answers
  as valkey-server 8.1.8 (``HELLO``/``INFO``) whatever version is asked for,
  and its Lua has cjson, cmsgpack, bit and struct built in;
* ``server_type=`` "redis" or "valkey" (others: ValueError);
* ``retry=``: none by default, as fakeredis's connections (redis-py 8's
  own default retries a failed command ten times, backing off for seconds);
  pass one to have it;
* ``socket_timeout=``: none by default, as fakeredis's reads, which wait as
  long as the server takes (redis-py 8's default of 5 s ended a
  ``blpop(timeout=10)`` with TimeoutError); pass one to have it;
* ``host``, ``port``, ``socket_*`` are only a sharing key; ``db``,
  ``decode_responses``, ``protocol``, ``password``, ``username``,
  ``client_name``, ``single_connection_client`` and the client class's
  other arguments act as with a real server (they are its own);
* FakeServer's ``config={b"requirepass": b"s"}`` (fakeredis's) and any
  redis.conf setting as a keyword (``FakeServer(maxmemory="10mb")``) are
  the server's settings.
``FakeServer.embedded`` is the EmbeddedServer, for hotkv's test helpers
(``clock``, ``journal``, ``snapshot``, ``faults``...); the server's clock
and the process's time move together with ``hotkv.testing.timetravel``
(a patched ``time.time`` attribute does not move the server's clock).
fakeredis 2.41.0's own suite on this module, and why each of its failures
is expected: docs/reference/fakeredis-suite.md (compat/fakeredis_fake.py).

``FakeAsyncRedis`` / ``FakeAsyncValkey`` are the redis.asyncio / valkey.asyncio
clients on the same terms (hotkv.inprocess's asyncio connection).  Not
here: ``TcpFakeServer`` (use ``EmbeddedServer``).  ``aioredis`` is fakeredis's
module of that name (``aioredis.FakeRedis`` is ``FakeAsyncRedis``); the
package exposes every name here too (``import hotkv as fakeredis``).
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import sys
import tempfile
import threading
import types
import weakref
from typing import Any, Callable, Mapping, TypeVar

from .embedded import EmbeddedServer
from .inprocess import connection_class

CONNECTION_ERROR_MSG = "FakeRedis is emulating a connection error."
SERVER_TYPES = ("redis", "valkey")
_M = TypeVar("_M", bound="_FakeMixin")


# Set at exit before weakref.finalize's exit hook runs the FakeServers'
# finalizers (atexit is last in, first out, and this finalize makes sure the
# finalizers' hook is registered first): at exit a server is waited for.
_exiting = threading.Event()
weakref.finalize(_exiting, int)
atexit.register(_exiting.set)


def _stop(embedded: EmbeddedServer, wait: bool = True) -> None:
    """Stop ``embedded`` from any thread (a finalizer may run on its own).

    ``wait=False`` (a FakeServer nobody can reach any more, collected by the
    garbage collector in the middle of some test): ask the loop to shut down
    and return without joining its thread -- the join waited for the loop
    thread to wake, ~0.2 ms a collected server.  At exit it always waits."""
    thread = embedded._thread
    if thread is not None and thread is threading.current_thread():
        loop = embedded.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon(embedded._listener.request_shutdown)
        return
    if not wait and not _exiting.is_set() and thread is not None:
        loop = embedded.loop
        try:
            loop.call_soon_threadsafe(embedded._listener.request_shutdown)
            return
        except RuntimeError:   # the loop is closed already (SHUTDOWN)
            pass
    embedded.stop()


_files_lock = threading.Lock()
_files_dir = None
_files_seq = itertools.count(1)


def _own_files() -> dict[str, str]:
    """Settings that give a server files of its own: a directory of the
    process's (made once, removed at exit) and file names no other server of
    it uses, so a fresh server loads no dump.rdb it finds and its SAVE or AOF
    writes nothing into the working directory."""
    global _files_dir
    with _files_lock:
        if _files_dir is None:
            _files_dir = tempfile.mkdtemp(prefix="hotkv-fake-")
            atexit.register(shutil.rmtree, _files_dir, True)
        n = next(_files_seq)
    return {"dir": _files_dir, "dbfilename": "fake-%d.rdb" % n,
            "appenddirname": "fake-%d-aof" % n}


class FakeServer:
    """A hotkv server for fake clients, started on first use."""

    _servers_map: dict[str, FakeServer] = {}
    _map_lock = threading.Lock()

    def __init__(self, version: Any = None, server_type: str = "redis",
                 config: Mapping[str | bytes, Any] | None = None, **settings: Any) -> None:
        if server_type not in SERVER_TYPES:
            raise ValueError(f"Unsupported server type: {server_type}")
        self.version = version
        self.server_type = server_type
        self.connected = True
        for name, value in (config or {}).items():
            name = name.decode() if isinstance(name, bytes) else name
            settings[name.replace("-", "_")] = value.decode() if isinstance(value, bytes) else value
        self.settings = settings
        self._embedded: EmbeddedServer | None = None
        self._lock = threading.Lock()
        self._finalizer: Callable[[], object] | None = None

    @property
    def embedded(self) -> EmbeddedServer:
        """The EmbeddedServer (started now if it is not yet)."""
        embedded = self._embedded
        if embedded is None or embedded.loop is None or embedded.loop.is_closed():
            with self._lock:
                embedded = self._embedded
                if embedded is None or embedded.loop is None or embedded.loop.is_closed():
                    settings = self.settings
                    if "dir" not in settings:
                        settings = dict(_own_files(), **settings)
                    embedded = EmbeddedServer(inprocess=True, **settings).start()
                    self._embedded = embedded
                    # (called when the FakeServer is collected, or at exit)
                    self._finalizer = weakref.finalize(self, _stop, embedded, False)
        return embedded

    def stop(self) -> None:
        """Stop the server (a later command starts a new, empty one)."""
        with self._lock:
            if self._finalizer is not None and self._finalizer.detach() is not None:
                _stop(self._embedded)    # (and wait for it)
            self._embedded = self._finalizer = None

    @staticmethod
    def get_server(key: str, version: Any = None, server_type: str = "redis") -> FakeServer:
        with FakeServer._map_lock:
            server = FakeServer._servers_map.get(key)
            if server is None:
                server = FakeServer._servers_map[key] = FakeServer(version, server_type)
            return server

    def __repr__(self) -> str:
        embedded = self._embedded
        return "<FakeServer %s>" % (embedded.url if embedded and embedded.server else "stopped")


# ----------------------------------------------------------------------
# Connections and clients
# ----------------------------------------------------------------------

class _NoRetryWhileDisconnected:
    """The client's retry policy, but an emulated disconnection fails at once
    (as fakeredis's, whose connections have no retry policy)."""

    def __init__(self, retry, conn):
        self._retry = retry
        self._conn = conn

    def call_with_retry(self, do, fail, *args, **kwargs):
        if not self._conn.is_fake_connected:
            return do()
        return self._retry.call_with_retry(do, fail, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._retry, name)


def _retry_while_connected() -> property:
    """A fake connection's ``retry``: the client's policy while connected;
    while "disconnected", one that fails at once (fakeredis's connections
    retry nothing).  A property, not a wrapper kept around the policy: the
    wrapper's extra call and check cost every command ~0.5 us."""
    def get(conn):
        policy = conn._retry_policy
        if (conn.fake_connected and conn.fake_server.connected) or policy is None or \
                not getattr(policy, "_retries", 1):   # (a policy that retries nothing)
            return policy
        return _NoRetryWhileDisconnected(policy, conn)

    def set_(conn, policy):
        conn._retry_policy = policy
    return property(get, set_)


def _fake_connection_class(lib: str) -> type:
    base = connection_class(lib)
    errors = __import__(lib).exceptions
    # The base methods as plain functions: these run on every command, and
    # super() with *args costs each ~0.15 us more.
    send_packed, read_response, can_read = \
        base.send_packed_command, base.read_response, base.can_read

    class Conn(base):
        """An in-process connection to a FakeServer's server, failing with
        ConnectionError while the client or the server is "disconnected"."""

        def __init__(self, server: FakeServer | None = None, connected: bool = True,
                     version: Any = None, server_type: str | None = None,
                     lua_modules: Any = None, **kwargs: Any) -> None:
            self.fake_server = server
            self.fake_connected = connected
            self._retry_policy = None
            super().__init__(embedded=server, **kwargs)

        retry = _retry_while_connected()

        @property
        def is_fake_connected(self) -> bool:
            return self.fake_connected and self.fake_server.connected

        def _check(self):
            if not (self.fake_connected and self.fake_server.connected):
                raise errors.ConnectionError(CONNECTION_ERROR_MSG)

        def _received(self) -> bool:
            """Reply bytes already here (in the socket or the parser's buffer):
            a client reads those even after the connection dropped."""
            sock = self._sock
            if sock is not None and (sock._rest or sock.pipe.chunks):
                return True
            parser = self._parser
            reader = getattr(parser, "_reader", None)
            if reader is not None and hasattr(reader, "has_data"):
                return bool(reader.has_data())
            buffer = getattr(parser, "_buffer", None)
            return buffer is not None and bool(buffer.unread_bytes())

        def _connect(self):
            self._check()
            self.embedded = self.fake_server.embedded
            return super()._connect()

        def send_packed_command(self, command, check_health=True):
            if not (self.fake_connected and self.fake_server.connected):
                raise errors.ConnectionError(CONNECTION_ERROR_MSG)
            return send_packed(self, command, check_health)

        def read_response(self, *args, **kwargs):
            if not (self.fake_connected and self.fake_server.connected) and not self._received():
                raise errors.ConnectionError(CONNECTION_ERROR_MSG)
            return read_response(self, *args, **kwargs)

        def can_read(self, timeout=0):
            if not (self.fake_connected and self.fake_server.connected) and not self._received():
                raise errors.ConnectionError(CONNECTION_ERROR_MSG)
            return can_read(self, timeout)

    Conn.__qualname__ = Conn.__name__ = "Fake%sConnection" % lib.capitalize()
    return Conn


def _fake_async_connection_class(lib: str) -> type:
    base = connection_class(lib, aio=True)
    errors = __import__(lib).exceptions

    class AsyncConn(base):
        """The asyncio twin of the fake connection."""

        def __init__(self, *, server: FakeServer | None = None, connected: bool = True,
                     version: Any = None, server_type: str | None = None,
                     lua_modules: Any = None, **kwargs: Any) -> None:
            self.fake_server = server
            self.fake_connected = connected
            self._retry_policy = None
            super().__init__(embedded=server, **kwargs)

        retry = _retry_while_connected()

        @property
        def is_fake_connected(self) -> bool:
            return self.fake_connected and self.fake_server.connected

        def _check(self):
            if not (self.fake_connected and self.fake_server.connected):
                raise errors.ConnectionError(CONNECTION_ERROR_MSG)

        async def _connect(self):
            self._check()
            self.embedded = self.fake_server.embedded
            await super()._connect()

        async def send_packed_command(self, command, check_health=True):
            self._check()
            await super().send_packed_command(command, check_health)

        async def read_response(self, *args, **kwargs):
            self._check()
            return await super().read_response(*args, **kwargs)

    AsyncConn.__qualname__ = AsyncConn.__name__ = "FakeAsync%sConnection" % lib.capitalize()
    return AsyncConn


def _major(version: Any) -> str:
    """The major version in fakeredis's sharing key (``7``, ``(7, 4)``, ``"7.4.1"``: 7)."""
    if isinstance(version, (tuple, list)):
        version = version[0] if version else ""
    return str(version).split(".")[0]


class _FakeMixin:
    _lib = "redis"
    _aio = False
    _connection_class = None   # set by each client class below

    def __init__(self, *args: Any, server: FakeServer | None = None, version: Any = (7,),
                 server_type: str = "redis", lua_modules: Any = None, connected: bool = True,
                 **kwargs: Any) -> None:
        if server_type not in SERVER_TYPES:
            raise ValueError(f"Unsupported server type: {server_type}")
        pool = kwargs.get("connection_pool")
        if pool is not None and server is None and "server" in pool.connection_kwargs:
            # A fake client's own pool (``r.client()``, ``connection_pool=r.connection_pool``):
            # its server and connections as they are.
            super().__init__(*args, **kwargs)
            self.fake_server = pool.connection_kwargs["server"]
            return
        if server is None:
            host = kwargs.get("path") or kwargs.get("unix_socket_path") or \
                kwargs.get("host", args[0] if args else None)
            if host is not None:     # (host, port, db... may be positional, as redis-py's)
                port = kwargs.get("port", args[1] if len(args) > 1 else 6379)
                key = "%s:%s:%s:v%s" % (host, port, server_type, _major(version))
                server = FakeServer.get_server(key, version, server_type)
            else:
                server = FakeServer(version, server_type)
        kwargs.pop("path", None)
        # (redis.asyncio makes its single connection on first use itself)
        single = False if self._aio else kwargs.pop("single_connection_client", False)
        if "retry" not in kwargs:   # fakeredis's connections retry nothing
            lib = __import__(self._lib)
            retry = (lib.asyncio.retry if self._aio else lib.retry).Retry
            kwargs["retry"] = retry(lib.backoff.NoBackoff(), 0)
        if len(args) < 5:     # (host, port, db, password, socket_timeout: the fifth positional)
            # fakeredis's reads wait as long as the server takes (a BLPOP of 10 s, a
            # CLIENT PAUSE); redis-py 8's default of 5 s would end them.
            kwargs.setdefault("socket_timeout", None)
        super().__init__(*args, **kwargs)
        self.fake_server = server
        pool = self.connection_pool
        pool.connection_class = self._connection_class
        pool.connection_kwargs = dict(pool.connection_kwargs, server=server, connected=connected)
        if single:
            try:
                self.connection = pool.get_connection()
            except TypeError:   # valkey-py names a command
                self.connection = pool.get_connection("_")
            self._single_connection_client = True

    @classmethod
    def from_url(cls: type[_M], url: str, **kwargs: Any) -> _M:
        """A client with the URL's db, password, protocol...; host/port are the sharing key."""
        lib = __import__(cls._lib)
        pool_kwargs = lib.connection.parse_url(url)
        pool_kwargs.pop("connection_class", None)
        host = pool_kwargs.pop("host", None) or pool_kwargs.pop("path", None) or "localhost"
        port = pool_kwargs.pop("port", 6379)
        for name in ("db", "password", "username", "protocol", "decode_responses"):
            if name in pool_kwargs:
                kwargs.setdefault(name, pool_kwargs[name])
        kwargs.setdefault("host", host)
        kwargs.setdefault("port", port)
        return cls(**kwargs)


try:
    import redis as _redis
    import redis.asyncio  # noqa: F401
except ImportError:   # pragma: no cover - valkey-py only
    _redis = None
try:
    import valkey as _valkey
    import valkey.asyncio  # noqa: F401
except ImportError:   # pragma: no cover - redis-py only
    _valkey = None

__all__ = ["FakeServer"]

if _redis is not None:
    FakeRedisConnection = FakeConnection = _fake_connection_class("redis")

    class FakeRedis(_FakeMixin, _redis.Redis):
        """redis.Redis on a FakeServer (hotkv)."""
        _connection_class = FakeRedisConnection

    class FakeStrictRedis(_FakeMixin, _redis.StrictRedis):
        """redis.StrictRedis on a FakeServer (hotkv)."""
        _connection_class = FakeRedisConnection

    FakeAsyncRedisConnection = FakeAsyncConnection = _fake_async_connection_class("redis")

    class FakeAsyncRedis(_FakeMixin, _redis.asyncio.Redis):
        """redis.asyncio.Redis on a FakeServer (hotkv)."""
        _aio = True
        _connection_class = FakeAsyncRedisConnection

    __all__ += ["FakeRedis", "FakeStrictRedis", "FakeConnection", "FakeRedisConnection",
                "FakeAsyncRedis", "FakeAsyncConnection", "FakeAsyncRedisConnection"]

if _valkey is not None:
    FakeValkeyConnection = _fake_connection_class("valkey")

    class FakeValkey(_FakeMixin, _valkey.Valkey):
        """valkey.Valkey on a FakeServer (hotkv)."""
        _lib = "valkey"
        _connection_class = FakeValkeyConnection

    class FakeStrictValkey(_FakeMixin, _valkey.StrictValkey):
        """valkey.StrictValkey on a FakeServer (hotkv)."""
        _lib = "valkey"
        _connection_class = FakeValkeyConnection

    FakeAsyncValkeyConnection = _fake_async_connection_class("valkey")

    class FakeAsyncValkey(_FakeMixin, _valkey.asyncio.Valkey):
        """valkey.asyncio.Valkey on a FakeServer (hotkv)."""
        _lib = "valkey"
        _aio = True
        _connection_class = FakeAsyncValkeyConnection

    __all__ += ["FakeValkey", "FakeStrictValkey", "FakeValkeyConnection", "FakeAsyncValkey",
                "FakeAsyncValkeyConnection"]

# fakeredis's ``fakeredis.aioredis`` (``fakeredis.aioredis.FakeRedis`` is its
# asyncio client): the same names here, importable too
# (``from hotkv.fake.aioredis import FakeRedis``).
aioredis = types.ModuleType(__name__ + ".aioredis", "fakeredis.aioredis's names: the asyncio "
                            "clients (FakeRedis is FakeAsyncRedis) and FakeServer.")
aioredis.FakeServer = FakeServer
if _redis is not None:
    aioredis.FakeRedis = FakeAsyncRedis
    aioredis.FakeConnection = aioredis.FakeAsyncConnection = FakeAsyncRedisConnection
    aioredis.FakeAsyncRedisConnection = FakeAsyncRedisConnection
if _valkey is not None:
    aioredis.FakeValkey = FakeAsyncValkey
sys.modules[aioredis.__name__] = aioredis
__all__ += ["aioredis"]
