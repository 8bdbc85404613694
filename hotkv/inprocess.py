"""In-process connections: redis-py / valkey-py talking to an embedded hotkv without a socket.

Owns the client side of a connection that never leaves the process
(``InProcessSocket``, a socket look-alike redis-py's and valkey-py's own
connection code reads and writes; for asyncio a StreamReader and a writer),
the server side's transport (``_Pipe``, handed to an ordinary
``hotkv.net.connection.Connection``), the ways a request reaches the server's thread
(``LoopLock``, the thread hop, in place on the same loop), the redis-py /
valkey-py connection classes, ``client(server, ...)`` and ``async_client``.

What a command goes through is exactly what a TCP client's goes through:
the request's bytes are given to ``net.Connection.data_received`` -- the
same RESP parser, dispatcher, ``hotkv.clients.client.Client`` state machine, the
server's ``before_sleep`` (AOF first, then replies) and ``Connection.flush``
-- and the reply bytes are what ``flush`` hands to the transport, captured
by ``_Pipe.write``.  There is no second implementation of any command or of
the reply encoding: the bytes are those a TCP client reads.  The client is
a real connection of the server's: it has an id, CLIENT LIST shows it
(``addr=/inprocess/<id>:0``, ``laddr=/inprocess:0``, ``fd=-1``), CLIENT KILL
ends it (its reader then sees end of file, as after a TCP close), the
journal, the clock, MONITOR, ACL, pub/sub, blocking, MULTI/WATCH and every
limit see it as any other.

The threading question.  ``EmbeddedServer`` runs the server on an asyncio
loop in a background thread and the server is not thread-safe.  Two ways:

* **Lock (run in the caller's thread)**, for a server started with
  ``EmbeddedServer(inprocess=True)`` (what ``hotkv.fake.FakeServer`` does):
  its loop is asyncio's ``SelectorEventLoop`` over an epoll selector whose
  ``poll`` releases a ``LoopLock`` while it waits for events and takes it
  again before returning.  The loop thread therefore holds the lock
  whenever it runs anything (callbacks, data_received, before_sleep, cron,
  timers); a caller takes the lock -- possible only while the loop sleeps
  in epoll -- and runs one loop turn itself: ``data_received`` with the
  request, then the end of the turn (deferred transport callbacks,
  ``Server.before_sleep``), then wakes the loop only if the turn left it
  work (a callback scheduled, a timer earlier than the one it sleeps for).
  While the caller runs, ``server.turn_thread`` names its thread, so
  ``Server.on_loop_thread`` (what the server's code asks, never asyncio's
  running loop) says it is on the loop.  No thread switch, no syscall on
  the common path.  uvloop offers no hook around its poll, so this needs asyncio's
  loop (TCP clients of such a server are served by that loop too).
* **Thread hop**, for any running ``EmbeddedServer`` (uvloop or not): the
  request is scheduled into the loop with ``call_soon_threadsafe`` and the
  caller waits on a condition until ``before_sleep`` has written the reply
  into the pipe.  Correct everywhere, but it costs two thread switches per
  round trip (figures: bench/inprocess.py).

A connection picks the lock when the server has one, else the hop; a
client on the server's own loop (an ``AsyncEmbeddedServer`` and a
redis.asyncio client in the same loop) calls ``data_received`` in place.

asyncio clients (``async_client``, ``connection_class(lib, aio=True)``): the
connection's ``StreamReader`` is fed by the pipe, in order (``call_soon`` from
the client's thread, ``call_soon_threadsafe`` from the server's: one FIFO),
and its writer runs the request through the same route.  Under the lock the
turn runs inside the client's loop thread, holding that loop for the turn.

Replies are read by the connection's owner thread from ``_Pipe.chunks``
(a deque: the server side appends, the reader pops); a reader with nothing
to read waits on the pipe's condition, which a write notifies only when a
reader waits (the common path takes no lock: the reply is already there
when ``sendall`` returns).  That is how a blocked BLPOP, a subscriber or a
reply produced by another client's command (a push served by another
thread, a TCP client's PUBLISH) reach the reader.

Invariants:
* server state is only touched by the loop thread or by a caller holding
  the loop's ``LoopLock`` (which the loop thread holds except inside epoll);
* what asyncio would run "soon" after a transport call (``connection_lost``
  after a close or abort, input delivered after ``resume_reading``) runs
  soon here too: on the loop (``call_soon``), or, in a caller's turn, at
  the end of that turn -- so after CLIENT KILL the killer's next command
  sees the victim gone, as over TCP;
* bytes sent on one connection reach ``data_received`` in order; input
  that arrives while the server paused reading is held and delivered on
  ``resume_reading``;
* a connection closed by the client (``close``) is ``connection_lost`` on
  the server, as a TCP close is.

A synchronous call from where only the server's loop could answer it --
its loop thread (a sync client inside an AsyncEmbeddedServer's loop, a
server callback), a caller's turn, a ``wait_until`` check (which runs as
the loop's turn: ``server.turn_thread``) -- raises
``hotkv.testing.LoopThreadCallError`` at once (``on_its_loop``): it waited
for itself (a deadlock on the lock, or a wait for a reply until the socket
timeout, forever by default).  An asyncio client on the server's own loop
is served in place and is not refused.

Limits: while a busy script holds the loop (``ServeWhileBlocked``), an
in-process client waits for the script to end instead of being answered
BUSY (the pump reads sockets and in-process clients have none), so it
cannot send SCRIPT KILL; a TCP client can.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import errno
import functools
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Literal, overload

from .net.connection import Connection
from .testing import LOOP_THREAD_CALL, LoopThreadCallError

if TYPE_CHECKING:
    import redis
    import redis.asyncio
    import valkey
    import valkey.asyncio

# asyncio's running-loop slot for this thread (public names of asyncio.events).
_get_running_loop = asyncio._get_running_loop
_get_ident = threading.get_ident

LOCAL_ADDR = "/inprocess"     # the laddr of every in-process client ("/inprocess:0")


# ----------------------------------------------------------------------
# The lock the loop thread holds except while it sleeps in epoll
# ----------------------------------------------------------------------

class LoopLock:
    """Held by the loop thread whenever it is not waiting in epoll; a caller
    holding it may run server code (``turn``).  ``deferred``: what a
    transport asked to run soon during a caller's turn."""

    def __init__(self):
        self.lock = threading.Lock()
        self.loop = None
        self.server = None
        self.loop_thread = None
        self.deferred: list = []
        self.closed = False
        self.loop_waiting = False   # the loop thread, back from epoll, waits for the lock

    # -- the loop thread -----------------------------------------------------
    def attach(self, loop, server):
        """The loop thread, once the server exists (it holds the lock)."""
        self.loop, self.server = loop, server
        self.loop_thread = threading.get_ident()

    # -- a caller's loop turn -------------------------------------------------
    def turn(self, fn, *args):
        """Run ``fn(*args)`` as one loop turn of the server's, in this thread."""
        if self.loop_waiting:
            self._let_loop_in()
        with self.lock:
            self._turn(fn, args)

    def try_turn(self, fn, *args) -> bool:
        """``turn`` if the lock is free now (the loop asleep in epoll), else
        False at once: for a caller that may already hold the lock in this
        thread (a close from a garbage collection inside a turn)."""
        if self.loop_waiting or not self.lock.acquire(False):
            return False
        try:
            self._turn(fn, args)
        finally:
            self.lock.release()
        return True

    def _turn(self, fn, args):
        """One loop turn (the lock held): ``fn(*args)``, then the end of the
        turn (deferred transport calls, ``before_sleep``)."""
        if self.closed:
            raise ConnectionResetError(errno.ECONNRESET, "the server has stopped")
        loop, server = self.loop, self.server
        scheduled, ready = loop._scheduled, loop._ready
        head = scheduled[0] if scheduled else None
        # Work already queued woke the loop when it was queued: waking it
        # again after every turn until it runs costs each command a
        # self-pipe write (12 us) and the lock hand-over.
        queued_before = len(ready)
        # Server code that asks where it runs (Server.on_loop_thread) learns
        # it is on the loop.  asyncio's running loop is left as it is: the
        # server asks its own loop by name, and swapping it cost two of
        # 3.11's _set_running_loop, 0.6 us a command.
        server.turn_thread = _get_ident()
        # Our own before_sleep ends this turn: no need for wake() to queue one.
        queued = server._wake_scheduled
        server._wake_scheduled = True
        try:
            fn(*args)
        finally:
            try:
                server.before_sleep()
                deferred = self.deferred
                while deferred:
                    calls = deferred[:]
                    del deferred[:]
                    for call, call_args in calls:
                        call(*call_args)
                    server.before_sleep()
            finally:
                if queued:   # the loop had one queued before we came: it runs it
                    server._wake_scheduled = True
                server.turn_thread = None
        if len(ready) > queued_before or (scheduled and scheduled[0] is not head):
            loop._write_to_self()   # the loop has work now, or an earlier timer

    def _let_loop_in(self):
        """The loop has events to handle: let it take the lock first.  (A lock
        is not fair: a caller sending command after command would take it
        again before the woken loop thread runs, and starve the loop's TCP
        clients and timers.)  Bounded, in case the loop is gone."""
        deadline = time.monotonic() + 0.1
        while self.loop_waiting and not self.closed and time.monotonic() < deadline:
            time.sleep(0.00002)

    def soon(self, fn, *args):
        """fn(*args) soon: on the loop, or at the end of the current caller's turn."""
        if threading.get_ident() == self.loop_thread:
            self.loop.call_soon(fn, *args)
        else:
            self.deferred.append((fn, args))


class _GatedEpoll:
    """select.epoll whose ``poll`` releases the loop's lock while it waits."""

    __slots__ = ("epoll", "lock", "owner")

    def __init__(self, epoll, owner: LoopLock):
        self.epoll = epoll
        self.lock = owner.lock
        self.owner = owner

    def poll(self, timeout=-1, maxevents=-1):
        self.lock.release()
        try:
            return self.epoll.poll(timeout, maxevents)
        finally:
            owner = self.owner
            owner.loop_waiting = True
            self.lock.acquire()
            owner.loop_waiting = False

    def register(self, fd, mask):
        self.epoll.register(fd, mask)

    def modify(self, fd, mask):
        self.epoll.modify(fd, mask)

    def unregister(self, fd):
        self.epoll.unregister(fd)

    def fileno(self):
        return self.epoll.fileno()

    def close(self):
        self.epoll.close()


def locked_event_loop(loop_lock: LoopLock):
    """An asyncio loop for a server's thread that holds ``loop_lock`` except
    inside epoll.  The caller (the loop thread) must hold the lock already."""
    selector = selectors.EpollSelector()
    selector._selector = _GatedEpoll(selector._selector, loop_lock)
    return asyncio.SelectorEventLoop(selector)


# ----------------------------------------------------------------------
# The server side: a transport that keeps what it is given
# ----------------------------------------------------------------------

class _Pipe:
    """The transport of an in-process ``net.Connection``: ``write`` appends
    to ``chunks`` for the client's reader; ``close`` / ``abort`` end the
    stream (asyncio's order: ``connection_lost`` soon after)."""

    __slots__ = ("route", "conn", "chunks", "cond", "waiting", "eof", "written", "consumed",
                 "paused", "inbox", "peer", "lost")

    def __init__(self, route):
        self.route = route
        self.conn = None
        self.chunks = collections.deque()
        self.cond = threading.Condition(threading.Lock())
        self.waiting = False
        self.eof = False
        self.lost = False
        self.written = 0      # bytes written (server side only)
        self.consumed = 0     # bytes read (reader only)
        self.paused = False
        self.inbox: list = []   # input held while reading is paused
        self.peer = LOCAL_ADDR

    # -- the asyncio transport interface net.Connection uses -----------------
    def write(self, data):
        if self.eof:
            return
        if type(data) is not bytes:
            data = bytes(data)
        self.chunks.append(data)
        self.written += len(data)
        if self.waiting:
            with self.cond:
                self.cond.notify_all()

    def close(self):
        self._end(False)

    def abort(self):
        self._end(True)

    def _end(self, drop: bool):
        if self.eof:
            return
        self.eof = True
        if drop:
            self.chunks.clear()
        self._notify()
        self.route.soon(self._lost)

    def _lost(self):
        if not self.lost:      # once, as asyncio calls it once
            self.lost = True
            self.inbox.clear()
            if self.conn is not None:
                self.conn.connection_lost(None)

    def get_extra_info(self, name, default=None):
        if name == "peername":
            return self.peer
        if name == "sockname":
            return LOCAL_ADDR
        return default

    def set_write_buffer_limits(self, high=None, low=None):
        pass

    def get_write_buffer_size(self) -> int:
        """Reply bytes the client has not read yet (a TCP transport's backlog)."""
        return self.written - self.consumed

    def is_closing(self) -> bool:
        return self.eof

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False
        if self.inbox:
            self.route.soon(self._deliver)

    # -- the client's side --------------------------------------------------
    def receive(self, data):
        """The client's bytes (on the loop, or in a caller's turn)."""
        if self.eof:
            return
        if self.paused or self.inbox:
            self.inbox.append(data)
            return
        self.conn.data_received(data)

    def _deliver(self):
        if self.paused or not self.inbox or self.eof:
            return
        data = b"".join(self.inbox)
        self.inbox.clear()
        self.conn.data_received(data)

    def hang_up(self):
        """The client closed its end: the server sees the connection lost."""
        if not self.eof:
            self.eof = True
            self._notify()
        self._lost()

    def _notify(self):
        with self.cond:
            self.cond.notify_all()


# ----------------------------------------------------------------------
# Routes: how a request reaches the server's thread
# ----------------------------------------------------------------------

class _LockRoute:
    """The caller runs the turn itself, holding the loop's lock."""

    def __init__(self, loop_lock: LoopLock):
        self.loop_lock = loop_lock
        self.soon = loop_lock.soon

    def run(self, fn, *args):
        self.loop_lock.turn(fn, *args)

    def try_run(self, fn) -> bool:
        """fn() in a turn of this thread's if the lock is free now, else False."""
        return self.loop_lock.try_turn(fn)

    def call(self, fn):
        box = []
        self.loop_lock.turn(lambda: box.append(fn()))
        return box[0]

    def later(self, fn):
        """fn() on the loop thread, without waiting (from any thread)."""
        self.loop_lock.loop.call_soon_threadsafe(fn)


class _HopRoute:
    """The request is handed to the loop thread (call_soon_threadsafe)."""

    def __init__(self, loop):
        self.loop = loop

    def soon(self, fn, *args):
        self.loop.call_soon(fn, *args)

    def run(self, fn, *args):
        self.loop.call_soon_threadsafe(fn, *args)

    def call(self, fn):
        done: concurrent.futures.Future = concurrent.futures.Future()

        def run():
            try:
                done.set_result(fn())
            except BaseException as e:   # handed to the caller
                done.set_exception(e)
        self.loop.call_soon_threadsafe(run)
        return done.result(30)

    def later(self, fn):
        self.loop.call_soon_threadsafe(fn)

    def try_run(self, fn) -> bool:
        return False


class _DirectRoute:
    """The server runs on the caller's own loop (AsyncEmbeddedServer): its
    data_received is called in place, as the loop would."""

    def __init__(self, loop):
        self.loop = loop

    def soon(self, fn, *args):
        self.loop.call_soon(fn, *args)

    def run(self, fn, *args):
        fn(*args)

    def call(self, fn):
        return fn()

    def later(self, fn):
        self.loop.call_soon(fn)

    def try_run(self, fn) -> bool:
        return False


def _route(embedded):
    """The route to ``embedded`` (an EmbeddedServer or AsyncEmbeddedServer),
    or ConnectionRefusedError."""
    server = embedded.server
    loop = server.loop if server is not None else None
    if loop is None or loop.is_closed():
        raise ConnectionRefusedError(errno.ECONNREFUSED, "the embedded server is not running")
    if _get_running_loop() is loop:
        return _DirectRoute(loop)
    loop_lock = getattr(embedded, "loop_lock", None)
    if loop_lock is not None:
        if loop_lock.closed:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "the embedded server has stopped")
        return _LockRoute(loop_lock)
    return _HopRoute(loop)


def on_its_loop(server) -> bool:
    """Whether this thread runs ``server``'s loop now: its loop thread, a
    caller's turn under the lock, a wait_until check (``server.turn_thread``).
    A synchronous call to ``server`` from there waits for itself."""
    loop = server.loop
    return server.turn_thread == _get_ident() or (loop is not None and
                                                  _get_running_loop() is loop)


def _refuse():
    raise LoopThreadCallError("in-process client: " + LOOP_THREAD_CALL)


def _open(embedded, pipe_class, *args) -> tuple:
    """A new server-side connection of ``embedded``'s: (route, pipe, client id)."""
    route = _route(embedded)
    if not isinstance(route, _DirectRoute) and on_its_loop(embedded.server):
        _refuse()       # the lock is this thread's (a deadlock), or the hop waits for us
    pipe = pipe_class(route, *args)

    def made():
        conn = Connection(embedded.server)
        pipe.conn = conn
        pipe.peer = "%s/%d" % (LOCAL_ADDR, conn.id)
        conn.connection_made(pipe)
        return conn.id
    return route, pipe, route.call(made)


# ----------------------------------------------------------------------
# The client side: a socket look-alike
# ----------------------------------------------------------------------

class InProcessSocket:
    """What redis-py / valkey-py read and write instead of a socket:
    ``sendall`` runs the request through the server (its route),
    ``recv`` / ``recv_into`` return the reply bytes, honouring the socket
    timeout (``socket.timeout``; 0: ``BlockingIOError``)."""

    def __init__(self, embedded):
        server = self.server = embedded.server
        if server is not None and on_its_loop(server):
            _refuse()     # (a synchronous reply: only this thread could produce it)
        self.route, self.pipe, self.client_id = _open(embedded, _Pipe)
        # (the lock's turn itself when there is one: a call less per command)
        route = self.route
        self._run = route.loop_lock.turn if isinstance(route, _LockRoute) else route.run
        self._timeout = None
        self._rest = b""
        self._closed = False

    # -- writing -------------------------------------------------------------
    def sendall(self, data, flags=0):
        if self._closed:
            raise OSError(errno.EBADF, "Bad file descriptor")
        pipe = self.pipe
        if pipe.eof:
            return    # as a TCP write after the peer closed: the read sees the end
        if type(data) is not bytes:
            data = bytes(data)
        server = self.server
        if server.turn_thread == _get_ident() or _get_running_loop() is server.loop:
            _refuse()     # (on_its_loop, inlined: a command's path)
        self._run(pipe.receive, data)

    send = sendall

    # -- reading -------------------------------------------------------------
    def recv(self, bufsize, flags=0):
        return self._take(bufsize)

    def recv_into(self, buffer, nbytes=0, flags=0):
        data = self._take(nbytes or len(buffer))
        n = len(data)
        buffer[:n] = data
        return n

    def _take(self, n):
        rest = self._rest
        if not rest:
            chunks = self.pipe.chunks
            if not chunks:
                self._wait()
                if not chunks:
                    return b""          # end of stream
            rest = chunks.popleft()
            self.pipe.consumed += len(rest)
        if len(rest) <= n:
            self._rest = b""
            return rest
        self._rest = rest[n:]
        return rest[:n]

    def _wait(self):
        pipe = self.pipe
        if self._closed:
            raise OSError(errno.EBADF, "Bad file descriptor")
        timeout = self._timeout
        if timeout == 0:
            if pipe.eof:
                return
            raise BlockingIOError(errno.EWOULDBLOCK, "Resource temporarily unavailable")
        deadline = None if timeout is None else time.monotonic() + timeout
        with pipe.cond:
            pipe.waiting = True
            try:
                while not pipe.chunks and not pipe.eof and not self._closed:
                    if deadline is None:
                        pipe.cond.wait()
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise socket.timeout("timed out")
                    pipe.cond.wait(left)
            finally:
                pipe.waiting = False

    def readable(self) -> bool:
        return bool(self._rest or self.pipe.chunks or self.pipe.eof)

    # -- the rest of a socket's interface redis-py uses ----------------------
    def settimeout(self, timeout):
        self._timeout = timeout

    def gettimeout(self):
        return self._timeout

    def setblocking(self, flag):
        self._timeout = None if flag else 0.0

    def setsockopt(self, *args):
        pass

    def getsockname(self):
        return LOCAL_ADDR

    def getpeername(self):
        return self.pipe.peer

    def fileno(self):
        return -1

    def shutdown(self, how):
        self.close()

    def close(self):
        if self._closed:
            return
        self._closed = True
        pipe = self.pipe
        pipe._notify()
        if not pipe.lost:
            try:
                # The server sees the close now, in a turn of this thread's when
                # the loop's lock is free (no wake-up of its thread), else soon.
                if not self.route.try_run(pipe.hang_up):
                    self.route.later(pipe.hang_up)
            except (RuntimeError, ConnectionResetError):   # the loop is closed/stopped
                pass

    def __repr__(self):
        return "<InProcessSocket client id=%d>" % self.client_id


# ----------------------------------------------------------------------
# The asyncio client side: a StreamReader fed by the pipe, a writer
# ----------------------------------------------------------------------

class _StreamPipe(_Pipe):
    """A pipe whose bytes go to an ``asyncio.StreamReader`` of the client's
    loop, in order: ``call_soon`` from the client's thread,
    ``call_soon_threadsafe`` from the server's (both append to the one FIFO
    of ready callbacks)."""

    __slots__ = ("reader", "reader_loop", "reader_thread")

    def __init__(self, route, reader, reader_loop):
        super().__init__(route)
        self.reader = reader
        self.reader_loop = reader_loop
        self.reader_thread = threading.get_ident()

    def _to_reader(self, fn, *args):
        loop = self.reader_loop
        try:
            if threading.get_ident() == self.reader_thread:
                loop.call_soon(fn, *args)
            else:
                loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:   # the client's loop is closed: nobody reads
            pass

    def write(self, data):
        if self.eof:
            return
        if type(data) is not bytes:
            data = bytes(data)
        self.written += len(data)
        self.consumed += len(data)
        self._to_reader(self.reader.feed_data, data)

    def _notify(self):
        if self.eof:
            self._to_reader(self._feed_eof)

    def _feed_eof(self):
        if not self.reader.at_eof():
            self.reader.feed_eof()


class _StreamWriter:
    """What redis.asyncio writes to (an ``asyncio.StreamWriter``'s
    interface, its own ``transport``): ``write`` runs the request through
    the server's route."""

    def __init__(self, route, pipe):
        self.route = route
        self.pipe = pipe
        self.closed = False
        self.transport = self
        # In the server's own loop the request runs in place; from another
        # loop, a write on the server's loop thread would wait for itself.
        self.server = None if isinstance(route, _DirectRoute) else pipe.conn.server

    def write(self, data):
        if self.closed:
            raise ConnectionResetError(errno.ECONNRESET, "the connection is closed")
        if self.pipe.eof:
            return
        if self.server is not None and on_its_loop(self.server):
            _refuse()
        self.route.run(self.pipe.receive, bytes(data))

    def writelines(self, chunks):
        self.write(b"".join(chunks))

    async def drain(self):
        if self.closed:
            raise ConnectionResetError(errno.ECONNRESET, "the connection is closed")

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name, default=None):
        if name == "peername":
            return self.pipe.peer
        if name == "sockname":
            return LOCAL_ADDR
        return default

    def close(self):
        if self.closed:
            return
        self.closed = True
        pipe = self.pipe
        if not pipe.lost:
            try:
                if not self.route.try_run(pipe.hang_up):
                    self.route.later(pipe.hang_up)
            except (RuntimeError, ConnectionResetError):   # the server's loop is closed
                pass

    abort = close

    async def wait_closed(self):
        pass


def _async_connection_class(lib):
    """``lib.asyncio``'s connection, its streams in-process ones."""
    base = lib.asyncio.connection.AbstractConnection

    class AsyncInProcessConnection(base):
        def __init__(self, *, embedded=None, host=None, port=None, socket_keepalive=None,
                     socket_keepalive_options=None, socket_type=0, **kwargs):
            if embedded is None:
                raise TypeError("an in-process connection needs embedded= (an EmbeddedServer)")
            self.embedded = embedded
            self.host, self.port = "inprocess", 0
            super().__init__(**kwargs)

        def repr_pieces(self):
            pieces = [("server", repr(self.embedded)), ("db", self.db)]
            if self.client_name:
                pieces.append(("client_name", self.client_name))
            return pieces

        async def _connect(self):
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=2 ** 16, loop=loop)
            route, pipe, _ = _open(self.embedded, _StreamPipe, reader, loop)
            self._reader = reader
            self._writer = _StreamWriter(route, pipe)

        def _host_error(self):
            return "in-process hotkv"

    AsyncInProcessConnection.__qualname__ = AsyncInProcessConnection.__name__ = \
        "AsyncInProcess%sConnection" % lib.__name__.capitalize()
    return AsyncInProcessConnection


# ----------------------------------------------------------------------
# redis-py and valkey-py connection classes
# ----------------------------------------------------------------------

def _connection_class(lib):
    """An ``AbstractConnection`` subclass of ``lib`` (redis or valkey) whose
    socket is an ``InProcessSocket``; everything else (HELLO, AUTH, SELECT,
    CLIENT SETINFO, the parsers, retries, pub/sub) is the library's own."""
    base = lib.connection.AbstractConnection

    class InProcessConnection(base):
        def __init__(self, embedded=None, host=None, port=None, socket_keepalive=None,
                     socket_keepalive_options=None, socket_type=0, socket_timeout=None,
                     **kwargs):
            if embedded is None:
                raise TypeError("an in-process connection needs embedded= (an EmbeddedServer)")
            self.embedded = embedded
            self.host, self.port = "inprocess", 0
            super().__init__(**kwargs)
            self.socket_timeout = socket_timeout

        def repr_pieces(self):
            pieces = [("server", repr(self.embedded)), ("db", self.db)]
            if self.client_name:
                pieces.append(("client_name", self.client_name))
            return pieces

        def _connect(self):
            sock = InProcessSocket(self.embedded)
            sock.settimeout(self.socket_timeout)
            return sock

        def _host_error(self):
            return "in-process hotkv"

        def can_read(self, timeout=0):
            # redis-py's hiredis parser polls the socket's descriptor, which
            # an in-process socket has not: ask the reader, then read.
            parser, sock = self._parser, self._sock
            reader = getattr(parser, "_reader", None)
            if sock is None or not hasattr(reader, "has_data") or \
                    not hasattr(parser, "read_from_socket"):
                return super().can_read(timeout)
            if reader.has_data():
                return True
            if timeout == 0 and not sock.readable():
                return False     # (the pool asks before every command: no exception made)
            try:
                return parser.read_from_socket(timeout=timeout, raise_on_timeout=False)
            except OSError as e:
                self.disconnect()
                raise lib.exceptions.ConnectionError(
                    f"Error while reading from in-process hotkv: {e.args}") from e

    InProcessConnection.__qualname__ = InProcessConnection.__name__ = \
        "InProcess%sConnection" % lib.__name__.capitalize()
    return InProcessConnection


def _lib(lib: str):
    if lib == "redis":
        import redis as module
    elif lib == "valkey":
        import valkey as module
    else:
        raise ValueError("lib is 'redis' or 'valkey', not %r" % (lib,))
    return module


@functools.lru_cache(maxsize=None)
def connection_class(lib: str = "redis", aio: bool = False) -> type:
    """The in-process connection class for ``lib`` ("redis" or "valkey");
    ``aio=True``: for ``lib.asyncio``'s clients.  (One class per library:
    made once, a pure function's cache.)"""
    make = _async_connection_class if aio else _connection_class
    return make(_lib(lib))


def _in_process(r, lib: str, aio: bool, embedded):
    pool = r.connection_pool
    pool.connection_class = connection_class(lib, aio)
    kwargs = dict(pool.connection_kwargs, embedded=embedded)
    # Where the settings are copied into a TCP client (``Valkey(**pool.
    # connection_kwargs)``, a worker process handed host and port), they
    # name the server's TCP address, not the library's default 6379.
    server = embedded.server
    if server is not None and server.config.values["port"] and embedded.host:
        kwargs["host"], kwargs["port"] = embedded.host, embedded.port
    pool.connection_kwargs = kwargs
    return r


@overload
def client(embedded: Any, lib: Literal["redis"] = ..., **kwargs: Any) -> redis.Redis: ...


@overload
def client(embedded: Any, lib: Literal["valkey"], **kwargs: Any) -> valkey.Valkey: ...


def client(embedded: Any, lib: str = "redis", **kwargs: Any) -> redis.Redis | valkey.Valkey:
    """A ``redis.Redis`` (lib="valkey": ``valkey.Valkey``) whose connections
    are in-process connections to ``embedded`` (a running EmbeddedServer).
    ``kwargs`` are the client's own (decode_responses, protocol, db,
    password, client_name, retry...); host/port are ignored (the pool's
    connection_kwargs carry the server's own TCP address)."""
    module = _lib(lib)
    factory = module.Redis if lib == "redis" else module.Valkey
    # The library takes a single connection while it is constructed, before
    # the pool's class is the in-process one (it dialled localhost:6379):
    # that client is made again on the in-process pool, which it then owns.
    single = kwargs.pop("single_connection_client", False)
    r = _in_process(factory(**kwargs), lib, False, embedded)
    if single:
        r = factory(connection_pool=r.connection_pool, single_connection_client=True)
        r.auto_close_connection_pool = True
    return r


@overload
def async_client(embedded: Any, lib: Literal["redis"] = ...,
                 **kwargs: Any) -> redis.asyncio.Redis: ...


@overload
def async_client(embedded: Any, lib: Literal["valkey"], **kwargs: Any) -> valkey.asyncio.Valkey: ...


def async_client(embedded: Any, lib: str = "redis",
                 **kwargs: Any) -> redis.asyncio.Redis | valkey.asyncio.Valkey:
    """``client``'s asyncio twin: a ``redis.asyncio.Redis`` (``valkey.asyncio.Valkey``)
    for an EmbeddedServer (run under its lock or hopped to, as ``client``) or an
    AsyncEmbeddedServer on the caller's own loop (called in place)."""
    module = _lib(lib)
    factory = module.asyncio.Redis if lib == "redis" else module.asyncio.Valkey
    return _in_process(factory(**kwargs), lib, True, embedded)


__all__ = ["LoopLock", "locked_event_loop", "InProcessSocket", "connection_class", "client",
           "async_client"]
