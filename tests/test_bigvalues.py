"""Big values (issue 32): the request parser's big-value paths and the
reply writer's, proven equal to the general ones at volume.

Fast paths under test (STYLE.md "Fast paths"):
* ``RequestParser._walk``: a long read's headers walked in Python, each
  argument sliced out of the read once (vs hiredis, vs the Redis-rule
  state machine alone);
* ``RequestParser._collect``: a big bulk string arriving over many reads,
  kept as the reads came and joined once (vs the state machine holding
  the whole stream);
* ``Connection.flush`` handing a turn's reply chunks to ``writelines``
  when one is a big value, instead of joining them (vs the join).

Parser cases are random request streams -- big bulks at and around
``_BIG_BULK`` (32 KB) and up to 1 MiB, small commands, inline commands,
malformed tails (a bad CRLF after a big bulk, a bulk length over
proto-max-bulk-len) -- fed whole, split at every byte of a stream with a
bulk just over the threshold, split at every byte near each header and
terminator of bigger ones, and cut into random read sizes (1 byte to
300 KB, 64 KB reads and uvloop's 256,000) -- against the state machine fed
the whole stream and, for well-formed streams, against hiredis reading it
whole (an implementation that shares nothing with hotkv's).  The server
cases send pipelines of SET/GET/APPEND/GETRANGE/MGET with big values in
random write sizes to hotkv and to valkey-server 8.1.8 and compare every
reply byte.  ``HOTKV_FASTPATH_SCALE=10`` makes every loop ten times longer.
"""

from __future__ import annotations

import os
import random
import socket

import hiredis
import pytest

from hotkv.protocol import resp
from hotkv.protocol.resp import RequestParser

SCALE = max(1, int(os.environ.get("HOTKV_FASTPATH_SCALE", "1")))
BIG = resp._BIG_BULK


def _cmd(*args) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


def _value(rnd, n: int) -> bytes:
    # contents that look like protocol to a scanner: CRLFs, headers
    unit = rnd.choice([b"x", b"\r\n*3\r\n$3\r\n", b"ab\r", b"\n$7\r\n", b"*9999999\r\n"])
    return (unit * (n // len(unit) + 1))[:n]


def _stream(rnd, sizes, malformed: bool = False) -> bytes:
    parts = []
    for _ in range(rnd.randint(1, 8)):
        k = rnd.random()
        if k < 0.45:
            n = rnd.choice(sizes)
            parts.append(_cmd(b"SET", b"k%d" % rnd.randrange(9), _value(rnd, n)))
        elif k < 0.55:
            parts.append(_cmd(b"MSET", b"a", _value(rnd, rnd.choice(sizes)), b"b",
                              _value(rnd, rnd.choice(sizes))))
        elif k < 0.75:
            parts.append(_cmd(b"GET", b"k%d" % rnd.randrange(9)))
        elif k < 0.85:
            parts.append(_cmd(b"LPUSH", b"l", *[b"e%d" % i for i in range(rnd.randint(1, 6))]))
        elif k < 0.9:
            parts.append(b"PING\r\n")
        else:
            parts.append(_cmd(b"SET", b"k", b"v" * rnd.randint(0, 40)))
    if malformed:
        n = rnd.choice(sizes)
        parts.append(rnd.choice([
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%bxy" % (n, _value(rnd, n)),   # bad CRLF
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%b\rx" % (n, _value(rnd, n)),
            b"*2\r\n$3\r\nGET\r\n$%d\r\n" % (2 * 1024 * 1024 + 1),   # over max_bulk_len
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0%d\r\n" % n,          # a leading zero
            b"*1\r\n+%d\r\n" % n,
        ]))
    return b"".join(parts)


MAX_BULK = 2 * 1024 * 1024


def _general(data: bytes):
    """The Redis-rule state machine alone, the stream whole: no hiredis, no
    walk, no collecting (every bulk is complete in its buffer)."""
    p = RequestParser(MAX_BULK)
    p._buf += data
    commands: list = []
    return commands, p._slow(commands, handoff=False)


def _hiredis(data: bytes):
    """hiredis reading a well-formed stream whole (inline commands aside)."""
    reader = hiredis.Reader()
    reader.feed(data)
    out = []
    while True:
        got = reader.gets()
        if got is False:
            return out
        out.append(got)


def _fed(pieces):
    p = RequestParser(MAX_BULK)
    commands: list = []
    for piece in pieces:
        got, error = p.feed(piece, 1024)
        commands += got
        while error is None and p.more:
            got, error = p.feed(b"", 1024)
            commands += got
        if error is not None:
            return commands, error
    # nothing is held for a complete stream
    assert p.pending == 0 or p._args is not None or p._buf, p.pending
    return commands, None


def _cuts(rnd, data: bytes, limit: int = 200):
    """Split points near every header and bulk end, and random ones."""
    cuts = {1, len(data) - 1, BIG, BIG + 1, 65536, 256000}
    pos = data.find(b"\r\n")
    while 0 <= pos and len(cuts) < limit:
        cuts.update((pos - 1, pos, pos + 1, pos + 2, pos + 3))
        pos = data.find(b"\r\n", pos + 2)
    cuts.update(rnd.randrange(1, len(data)) for _ in range(40))
    return sorted(c for c in cuts if 0 < c < len(data))


def _random_reads(rnd, data: bytes):
    out, i = [], 0
    while i < len(data):
        n = rnd.choice([1, 7, 4096, 16384, 65536, 65536, 256000, rnd.randint(1, 300000)])
        out.append(data[i:i + n])
        i += n
    return out


def _check(rnd, data: bytes, every_byte: bool = False):
    want = _general(data)
    if want[1] is None and b"PING" not in data:
        assert want[0] == _hiredis(data)
    assert _fed([data]) == want
    cuts = range(1, len(data)) if every_byte else _cuts(rnd, data)
    for cut in cuts:
        assert _fed([data[:cut], data[cut:]]) == want, cut
    for _ in range(6):
        assert _fed(_random_reads(rnd, data)) == want
    return len(cuts)


def test_a_bulk_just_over_the_threshold_split_at_every_byte():
    rnd = random.Random(32)
    splits = 0
    for n in (BIG - 1, BIG, BIG + 1):
        data = _cmd(b"SET", b"k", _value(rnd, n)) + _cmd(b"GET", b"k") + b"PING\r\n"
        splits += _check(rnd, data, every_byte=True)
    bad = _cmd(b"GET", b"k") + b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%bx\n" % (
        BIG + 3, _value(rnd, BIG + 3))
    splits += _check(rnd, bad, every_byte=True)
    assert splits > 4 * BIG


@pytest.mark.parametrize("malformed", [False, True])
def test_parser_big_streams_equal_the_state_machine(malformed):
    rnd = random.Random(1024 + malformed)
    sizes = [0, 10, 1000, BIG - 2, BIG, BIG + 2, 40000, 100 * 1024, 300000]
    for _ in range(12 * SCALE):
        _check(rnd, _stream(rnd, sizes, malformed))


def test_parser_mebibyte_values_in_many_reads():
    rnd = random.Random(1 << 20)
    for _ in range(3 * SCALE):
        data = _stream(rnd, [1 << 20, 1000, (1 << 20) + 1])
        want = _general(data)
        assert want[1] is None
        for _ in range(4):
            assert _fed(_random_reads(rnd, data)) == want
        assert _fed([data[i:i + 65536] for i in range(0, len(data), 65536)]) == want


@pytest.mark.parametrize("first", [20000, 50000])   # state machine / walk starts it
def test_collecting_counts_what_it_holds(first):
    # qbuf (CLIENT LIST) and the query-buffer limit see a big bulk's bytes
    # while it arrives, as they did when the state machine held them: the
    # bytes of the bulk so far and 48 a split-off argument.
    data = _cmd(b"SET", b"key", b"v" * 100000)
    head = len(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$100000\r\n")
    p = RequestParser()
    assert p.feed(data[:first]) == ([], None)
    assert p.pending == p.held == first - head + 2 * (3 + 48)
    assert p._bulklen == 100000    # (clientbufs sizes qbuf by it)
    assert p.feed(data[first:90000]) == ([], None)
    assert p.pending == p.held == 90000 - head + 2 * (3 + 48)
    assert p.feed(data[90000:]) == ([[b"SET", b"key", b"v" * 100000]], None)
    assert p.pending == p.held == 0
    p.feed(data[:70000])
    p.drop()
    assert p.pending == 0 and p.feed(_cmd(b"PING")) == ([[b"PING"]], None)


def test_walk_leaves_small_arguments_to_hiredis():
    # a long read of small commands: walked only a few arguments, then the
    # whole read goes to hiredis (no copy of it), with the same result
    data = _cmd(b"LPUSH", b"l", b"a", b"b") * 2000
    p = RequestParser()
    assert p._walk(data, []) == 0
    assert p.feed(data) == ([[b"LPUSH", b"l", b"a", b"b"]] * 2000, None)
    assert p.whole is data


# ----------------------------------------------------------------------
# The reply writer: writelines of the chunks vs one joined write
# ----------------------------------------------------------------------

class _Transport:
    def __init__(self, lines: bool):
        self.got = bytearray()
        self.calls = []
        if lines:
            self.writelines = self._writelines

    def write(self, data):
        self.calls.append("write")
        self.got += data

    def _writelines(self, chunks):
        self.calls.append("writelines")
        for c in chunks:
            self.got += c

    def get_extra_info(self, name, default=None):
        return default

    def set_write_buffer_limits(self, **kw):
        pass

    def get_write_buffer_size(self):
        return 0

    def is_closing(self):
        return False

    def close(self):
        pass


def test_flush_writelines_equals_the_joined_write():
    from hotkv.net.connection import Connection
    from hotkv.server import Server

    rnd = random.Random(7)
    server = Server({"save": ""})
    conns = []
    for lines in (True, False):
        c = Connection(server)
        t = _Transport(lines)
        c.connection_made(t)
        conns.append((c, t))
    stats = []
    for _ in range(300 * SCALE):
        chunks = []
        for _ in range(rnd.randint(1, 20)):
            n = rnd.choice([0, 5, 1023, 16383, 16384, 16385, 200000])
            chunks.append(rnd.choice([b"$%d\r\n" % n, b":1\r\n", b"+OK\r\n", b"*2\r\n"]))
            chunks.append(b"z" * n)
            chunks.append(b"\r\n")
        for c, _t in conns:
            c.out.extend(chunks)
            c.flush()
            stats.append(c.net_out)
    (a, ta), (b, tb) = conns
    assert bytes(ta.got) == bytes(tb.got)
    assert a.net_out == b.net_out and a.rb_peak == b.rb_peak
    assert "writelines" in ta.calls and "write" in ta.calls and "writelines" not in tb.calls


# ----------------------------------------------------------------------
# Over sockets: hotkv and valkey-server 8.1.8, every reply byte
# ----------------------------------------------------------------------

def _replies(host, port, data: bytes, count: int, rnd) -> bytes:
    """Send data in random write sizes, read until count replies came."""
    s = socket.create_connection((host, port), timeout=20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = hiredis.Reader()   # counts the replies; their bytes are kept as they came
    got = bytearray()
    n = i = 0
    s.setblocking(False)
    try:
        while n < count:
            if i < len(data):
                size = rnd.choice([1, 100, 4096, 65536, 300000])
                try:
                    i += s.send(data[i:i + size])
                except BlockingIOError:
                    pass
            try:
                chunk = s.recv(1 << 20)
            except BlockingIOError:
                chunk = None
                if i >= len(data):
                    s.settimeout(20)
                    chunk = s.recv(1 << 20)
                    s.setblocking(False)
            if chunk == b"":
                break
            if chunk:
                got += chunk
                reader.feed(chunk)
                while reader.gets() is not False:
                    n += 1
    finally:
        s.close()
    return bytes(got)


def test_big_value_pipelines_reply_as_valkey(server, ref_server):
    rnd = random.Random(3232)
    sizes = [0, 100, BIG - 1, BIG + 1, 100 * 1024, 1 << 20]
    total = 0
    for trial in range(6 * SCALE):
        cmds = [_cmd(b"FLUSHALL")]
        for _ in range(rnd.randint(5, 40)):
            key = b"k%d" % rnd.randrange(5)
            k = rnd.random()
            if k < 0.35:
                cmds.append(_cmd(b"SET", key, _value(rnd, rnd.choice(sizes))))
            elif k < 0.65:
                cmds.append(_cmd(b"GET", key))
            elif k < 0.75:
                cmds.append(_cmd(b"APPEND", key, _value(rnd, rnd.choice(sizes))))
            elif k < 0.85:
                cmds.append(_cmd(b"GETRANGE", key, b"%d" % rnd.randrange(BIG), b"-1"))
            elif k < 0.95:
                cmds.append(_cmd(b"MGET", b"k0", b"k1", b"k2", b"k3", b"k4"))
            else:
                cmds.append(_cmd(b"STRLEN", key))
        data = b"".join(cmds)
        total += len(data)
        seed = rnd.random()
        ours = _replies(server.host, server.port, data, len(cmds), random.Random(seed))
        theirs = _replies(ref_server.host, ref_server.port, data, len(cmds), random.Random(seed))
        assert ours == theirs, trial
    assert total > 5 * (1 << 20)


def test_unpipelined_commands_of_1_to_16_kb_reply_as_valkey(server, ref_server):
    """One command a write and its reply before the next (what an
    unpipelined client sends: RequestParser's one-read path, _one_long from
    1 KB to 16 KB), values of 0-17 KB holding CRLF, '*' and '$' lines, to
    hotkv and valkey-server 8.1.8: every reply byte equal."""
    rnd = random.Random(1616)
    tails = [b"", b"\r\n", b"\r\n*2\r\n", b"\r\n$3\r\nabc\r\n", b"$1\r\n*"]
    conns = []
    for srv in (server, ref_server):
        s = socket.create_connection((srv.host, srv.port), timeout=20)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conns.append((s, hiredis.Reader()))
    long_reads = 0
    try:
        for s, _ in conns:
            s.sendall(_cmd(b"FLUSHALL"))
            s.recv(100)
        for i in range(1500 * SCALE):
            def val():
                v = bytearray(_value(rnd, rnd.choice([0, 10, 900, 1000, 1100, 4000, 9000,
                                                      16300, 17000])))
                if v and rnd.random() < 0.4:
                    at = rnd.randrange(len(v))
                    v[at:at] = rnd.choice(tails)
                return bytes(v)
            key = b"k%d" % rnd.randrange(4)
            k = rnd.random()
            if k < 0.3:
                cmd = _cmd(b"SET", key, val())
            elif k < 0.45:
                cmd = _cmd(b"APPEND", key, val())
            elif k < 0.55:
                cmd = _cmd(b"HSET", b"h", val(), val(), val(), val())
            elif k < 0.65:
                cmd = _cmd(b"RPUSH", b"l", *[val() for _ in range(rnd.randint(1, 6))])
            elif k < 0.75:
                cmd = _cmd(b"LRANGE", b"l", b"0", b"-1")
            elif k < 0.85:
                cmd = _cmd(b"GET", key)
            else:     # (not HGETALL: a hashtable's order is Valkey's dict's)
                cmd = _cmd(b"HLEN", b"h")
            if i % 100 == 99:
                cmd = _cmd(b"DEL", b"l", b"h")
            long_reads += 1024 < len(cmd) <= 16384
            got = []
            for s, reader in conns:
                s.sendall(cmd)
                data = b""
                while True:
                    chunk = s.recv(1 << 20)
                    assert chunk, "connection closed"
                    data += chunk
                    reader.feed(chunk)
                    if reader.gets() is not False:
                        break
                got.append(data)
            assert got[0] == got[1], (i, cmd[:200])
    finally:
        for s, _ in conns:
            s.close()
    assert long_reads > 400 * SCALE, long_reads
