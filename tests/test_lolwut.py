"""LOLWUT (hotkv.commands.lolwut, issue 32) compared with valkey-server 8.1.8.

* Byte for byte, in RESP2 and RESP3: the version line (LOLWUT alone, with
  other arguments, with VERSION of another piece), argument errors, and
  Schotter (VERSION 5) over a range of sizes with one or two rows of
  squares -- the rows Valkey draws without rand(), so every pixel is
  determined (the float32 arithmetic, C's round, the Bresenham lines, the
  clamps, the Braille rendering).
* Where Valkey's rand() (seeded from the time and its pid) draws: Schotter's
  lower rows and the whole skyline (VERSION 6).  The same shape as
  Valkey's (length, lines, the cells' escape codes, the footer) and the
  rows above the first randomly placed square byte for byte.
* COMMAND INFO LOLWUT byte for byte; COMMAND DOCS' summary, since and group.
"""

from __future__ import annotations

import re
import struct

import pytest

from support import RawClient

DETERMINED = [
    ("LOLWUT",),
    ("lolwut", "10", "20", "30"),
    ("LOLWUT", "VERSION"),                     # VERSION without a value: the default
    ("LOLWUT", "VERSION", "x"),
    ("LOLWUT", "VERSION", "1.5"),
    ("LOLWUT", "VERSION", "4"),
    ("LOLWUT", "VERSION", "7", "x"),            # another piece ignores its arguments
    ("LOLWUT", "VERSION", "8"),
    ("LOLWUT", "VERSION", "-1"),
    ("LOLWUT", "VERSION", "55"),
    ("LOLWUT", "VERSION", "9223372036854775807"),
    ("LOLWUT", "VERSION", "9223372036854775808"),
    ("LOLWUT", "VERSION", "4294967301", "3", "2", "2"),   # 5 as an unsigned int
    ("LOLWUT", "version", "5", "x"),
    ("LOLWUT", "VERSION", "5", "10", "x"),
    ("LOLWUT", "VERSION", "5", "10", "3", "x"),
    ("LOLWUT", "VERSION", "5", " 10"),
    ("LOLWUT", "VERSION", "6", "a"),
    ("LOLWUT", "VERSION", "6", "10", "1.0"),
    ("LOLWUT", "VERSION", "5", "0", "0", "0"),
    ("LOLWUT", "VERSION", "5", "-7", "-7", "-7"),
    ("LOLWUT", "VERSION", "5", "1", "1", "1"),
    ("LOLWUT", "VERSION", "5", "3", "2", "2", "extra", "args"),
]
for _cols in (1, 2, 3, 4, 5, 9, 10, 33, 66, 80, 127, 1000, 1001, 99999):
    for _row in (1, 2, 3, 7, 8, 13, 64, 200, 201):
        for _col in (1, 2):
            DETERMINED.append(("LOLWUT", "VERSION", "5", str(_cols), str(_row), str(_col)))


def test_determined_replies_are_valkeys(diff):
    for cmd in DETERMINED:
        diff(*cmd)


def test_determined_replies_are_valkeys_in_resp3(diff):
    diff.resp3()
    for cmd in DETERMINED[:30]:
        diff(*cmd)


def _both(diff, *cmd):
    return diff.ours.call(*cmd), diff.theirs.call(*cmd)


def _body(reply: bytes) -> bytes:
    head, _, rest = reply.partition(b"\r\n")
    assert head.startswith(b"$") and int(head[1:]) == len(rest) - 2, reply[:80]
    return rest[:-2]


def _f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


@pytest.mark.parametrize("args", [(), ("66", "8", "3"), ("40", "5", "7"), ("100", "20", "40"),
                                  ("13", "1", "30"), ("200", "60", "200")])
def test_schotter_with_random_rows_has_valkeys_shape(diff, args):
    ours, theirs = (_body(r) for r in _both(diff, "LOLWUT", "VERSION", "5", *args))
    assert len(ours) == len(theirs)
    a, b = ours.split(b"\n"), theirs.split(b"\n")
    assert len(a) == len(b)
    assert a[-2:] == b[-2:] == [b"Georg Nees - schotter, plotter on paper, 1968. "
                                b"Redis ver. 8.1.8", b""]
    assert [len(x) for x in a] == [len(x) for x in b]
    # The rows above the third row of squares (the first that rand() places)
    # are the same; the third row's squares reach up at most to 1.5 sides.
    cols, per_row = (int(args[0]), int(args[1])) if args else (66, 8)
    side = _f32(_f32(cols * 2 - 4) / per_row)
    same = int(1.5 * side - 2) // 4
    assert same >= 1
    assert a[:same] == b[:same]


_CELL = rb"(?:\x1b\[0;30;40m \x1b\[0m|\x1b\[0;90;100m \x1b\[0m|\x1b\[0;37;47m \x1b\[0m" \
        rb"|\x1b\[0;97;107m \x1b\[0m)"


@pytest.mark.parametrize("args", [(), ("1",), ("1", "1"), ("5", "3"), ("40", "12"),
                                  ("120", "50"), ("0", "-3")])
def test_skyline_has_valkeys_shape(diff, args):
    ours, theirs = (_body(r) for r in _both(diff, "LOLWUT", "VERSION", "6", *args))
    footer = [b"Dedicated to the 8 bit game developers of past and present.",
              b"Original 8 bit image from Plaguemon by hikikomori. Redis ver. 8.1.8", b""]
    a, b = ours.split(b"\n"), theirs.split(b"\n")
    assert a[-3:] == b[-3:] == footer
    assert len(a) == len(b)
    cols = max(int(args[0]), 1) if args else 80
    line = re.compile(_CELL + b"{%d}" % cols)
    for x, y in zip(a[:-3], b[:-3]):
        assert line.fullmatch(x) and line.fullmatch(y), (x[:80], y[:80])


def test_skyline_and_schotter_differ_between_calls(raw):
    """As Valkey's (rand() runs on), two calls draw two pictures."""
    assert raw.call("LOLWUT", "VERSION", "6") != raw.call("LOLWUT", "VERSION", "6")
    assert raw.call("LOLWUT", "VERSION", "5") != raw.call("LOLWUT", "VERSION", "5")


def test_command_info_and_docs(diff):
    diff("COMMAND", "INFO", "LOLWUT")
    diff("COMMAND", "INFO", "lolwut", "nosuchcommand")
    ours, theirs = _both(diff, "COMMAND", "DOCS", "LOLWUT")
    fields = (b"$7\r\nsummary\r\n$44\r\nDisplays computer art and the server version\r\n"
              b"$5\r\nsince\r\n$5\r\n5.0.0\r\n$5\r\ngroup\r\n$6\r\nserver\r\n")
    assert ours.startswith(b"*2\r\n$6\r\nlolwut\r\n*")
    assert theirs.startswith(b"*2\r\n$6\r\nlolwut\r\n*")
    assert fields in ours and fields in theirs


def test_lolwut_in_scripts_and_transactions(diff):
    diff("EVAL", "return redis.call('lolwut')", "0")
    diff("EVAL", "return redis.call('lolwut', 'version', '5', '3', '2', '2')", "0")
    diff("MULTI")
    diff("LOLWUT", "VERSION", "5", "20", "4", "1")
    diff("LOLWUT", "VERSION", "x")
    diff("EXEC")


def test_a_big_canvas_is_clamped_as_valkeys(server):
    c = RawClient(server.host, server.port, timeout=60)
    try:
        body = _body(c.call("LOLWUT", "VERSION", "6", "5000", "1"))
        assert body.count(b"\x1b[0m") == 1000
    finally:
        c.close()
