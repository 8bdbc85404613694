"""LOLWUT: computer art and the server version, as valkey-server 8.1.8 draws it.

Owns the LOLWUT command and the two pieces Valkey keeps for it (its
lolwut.c, lolwut5.c, lolwut6.c; read for the algorithm, written anew here):

* ``LOLWUT [VERSION v] ...``: ``VERSION`` (any case, with a value) picks
  the piece by the value taken as a C ``unsigned int`` printed as
  ``"%u.0.0"``: 5 (also 5 + 2**32) is Schotter, 6 the skyline, anything
  else -- and LOLWUT without VERSION, since 8.1.8 has no piece of its own --
  the version line alone, its other arguments ignored.  Arguments a piece
  reads must be integers (``ERR value is not an integer or out of range``);
  out of range they are clamped, never refused.
* Schotter (``VERSION 5 [cols] [squares-per-row] [squares-per-col]``,
  defaults 66 8 12, each clamped to 1..1000 / 1..200 / 1..200): Georg
  Nees's squares, drawn with Bresenham lines on a canvas of cols*2 pixels
  across, rendered in Braille characters (2x4 pixels each).
* The skyline (``VERSION 6 [cols] [rows]``, defaults 80 20, each clamped to
  1..1000): three layers of skyscrapers in the terminal's four grays, one
  escape sequence a pixel.

Invariants: the reply is a verbatim string (RESP3 ``=``, bulk in RESP2);
the version line says ``Redis ver. 8.1.8`` (Valkey prints its own version
there, not the Redis-compatible 7.2.4 of INFO); the art's arithmetic is the
C code's -- float (32-bit) where Valkey uses ``float``, C's ``round`` (half
away from zero), truncation where a float becomes an int -- so every pixel
that does not come from ``rand()`` is Valkey's, byte for byte.  Valkey seeds
``rand()`` from the time and its pid, so the rows of squares after the
second and the whole skyline differ from run to run there as here; hotkv
draws them from a ``random.Random`` of its own in the same ranges and order.
The Schotter canvas is kept sparse (a set of pixels), so a tall canvas costs
what its squares cost, not width*height.
"""

from __future__ import annotations

import math
import random
import struct

from ..core.registry import command
from ..protocol.resp import Verbatim
from ..protocol.util import parse_int

VALKEY_VERSION = b"8.1.8"     # what valkey-server 8.1.8 prints after "Redis ver. "
_RAND_MAX = 2147483647
_F32 = struct.Struct("f")


def _f32(x: float) -> float:
    """x rounded to a C float (each float operation rounds so)."""
    return _F32.unpack(_F32.pack(x))[0]


def _c_round(x: float) -> float:
    """C's round(): halves away from zero (Python's round() goes to even)."""
    if x < 0:
        return -_c_round(-x)
    r = math.floor(x)
    return r + 1 if x - r >= 0.5 else r


def _rand(rng) -> int:
    """A C rand() value: 0..RAND_MAX."""
    return rng.getrandbits(31)


# -- a canvas of pixels ---------------------------------------------------------


class _SparseCanvas:
    """Schotter's canvas: the set pixels only (the background is 0)."""
    __slots__ = ("width", "height", "on")

    def __init__(self, width: int, height: int):
        self.width = width
        self.height = height
        self.on = set()

    def draw(self, x: int, y: int):
        if 0 <= x < self.width and 0 <= y < self.height:
            self.on.add((x, y))


def _line(canvas, x1: int, y1: int, x2: int, y2: int):
    """Bresenham's line from (x1, y1) to (x2, y2), both ends drawn."""
    dx, dy = abs(x2 - x1), abs(y2 - y1)
    sx = 1 if x1 < x2 else -1
    sy = 1 if y1 < y2 else -1
    err = dx - dy
    while True:
        canvas.draw(x1, y1)
        if x1 == x2 and y1 == y2:
            return
        e2 = err * 2
        if e2 > -dy:
            err -= dy
            x1 += sx
        if e2 < dx:
            err += dx
            y1 += sy


def _square(canvas, x: int, y: int, size: float, angle: float):
    """A square centred on (x, y), ``size`` across, turned by ``angle``: its
    corners are points of the circle through them, a quarter turn apart."""
    size = _f32(_c_round(_f32(size / 1.4142135623)))   # the inscribed square's side
    k = _f32(math.pi / 4 + angle)
    px, py = [], []
    for _ in range(4):
        px.append(int(_c_round(math.sin(k) * size + x)))
        py.append(int(_c_round(math.cos(k) * size + y)))
        k = _f32(k + math.pi / 2)
    for j in range(4):
        _line(canvas, px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4])


# -- LOLWUT VERSION 5: Schotter ------------------------------------------------------


def _schotter(cols: int, per_row: int, per_col: int, rng) -> _SparseCanvas:
    width = cols * 2
    padding = 2 if width > 4 else 0
    side = _f32(_f32(width - padding * 2) / _f32(per_row))
    height = int(_f32(_f32(side * _f32(per_col)) + padding * 2))
    canvas = _SparseCanvas(width, height)
    half = _f32(side / 2)
    fcol = _f32(per_col)
    for y in range(per_col):
        for x in range(per_row):
            sx = int(_f32(_f32(_f32(x * side) + half) + padding))
            sy = int(_f32(_f32(_f32(y * side) + half) + padding))
            angle = 0.0
            if y > 1:
                # The lower the row, the more the square turns and strays.
                r = [_f32(_f32(_f32(_f32(_rand(rng)) / _f32(_RAND_MAX)) / fcol) * y)
                     for _ in range(3)]
                for i in range(3):
                    if _rand(rng) % 2:
                        r[i] = -r[i]
                angle = r[0]
                sx = int(_f32(sx + _f32(_f32(r[1] * side) / 3)))
                sy = int(_f32(sy + _f32(_f32(r[2] * side) / 3)))
            _square(canvas, sx, sy, side, angle)
    return canvas


# Braille: a character is 2x4 pixels; bit n of its code is the pixel at
# _BRAILLE_BIT[(dx, dy)].
_BRAILLE_BIT = {(0, 0): 1, (0, 1): 2, (0, 2): 4, (1, 0): 8, (1, 1): 16, (1, 2): 32,
                (0, 3): 64, (1, 3): 128}
_BRAILLE = [chr(0x2800 + n).encode() for n in range(256)]


def _render_braille(canvas: _SparseCanvas) -> bytes:
    rows = {}
    bit = _BRAILLE_BIT
    for x, y in canvas.on:
        row = rows.get(y >> 2)
        if row is None:
            row = rows[y >> 2] = bytearray(canvas.width >> 1)
        row[x >> 1] |= bit[(x & 1, y & 3)]
    blank = _BRAILLE[0] * (canvas.width >> 1)
    out = []
    last = canvas.height - 1
    for y in range(0, canvas.height, 4):
        row = rows.get(y >> 2)
        out.append(blank if row is None else b"".join([_BRAILLE[n] for n in row]))
        if y != last:
            out.append(b"\n")
    return b"".join(out)


def _lolwut5(args, rng) -> bytes:
    cols, per_row, per_col = 66, 8, 12
    if len(args) > 0:
        cols = parse_int(args[0])
    if len(args) > 1:
        per_row = parse_int(args[1])
    if len(args) > 2:
        per_col = parse_int(args[2])
    cols = min(max(cols, 1), 1000)
    per_row = min(max(per_row, 1), 200)
    per_col = min(max(per_col, 1), 200)
    art = _render_braille(_schotter(cols, per_row, per_col, rng))
    return art + b"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. " + \
        VALKEY_VERSION + b"\n"


# -- LOLWUT VERSION 6: a skyline -----------------------------------------------------

_SKY = 3     # the canvas's background: white


class _Canvas:
    """The skyline's canvas: one byte a pixel (colors 0..3)."""
    __slots__ = ("width", "height", "pixels")

    def __init__(self, width: int, height: int, color: int):
        self.width = width
        self.height = height
        self.pixels = bytearray([color]) * (width * height)

    def draw(self, x: int, y: int, color: int):
        if 0 <= x < self.width and 0 <= y < self.height:
            self.pixels[x + y * self.width] = color

    def get(self, x: int, y: int) -> int:
        if 0 <= x < self.width and 0 <= y < self.height:
            return self.pixels[x + y * self.width]
        return 0


def _skyscraper(canvas: _Canvas, xoff: int, width: int, height: int, windows: bool,
                color: int, rng):
    """One building standing on the bottom row, its roof two pixels in from
    each side; windows (two pixels wide, one tall) in one of the grays."""
    starty = canvas.height - 1
    endy = starty - height + 1
    for y in range(starty, endy - 1, -1):
        for x in range(xoff, xoff + width):
            if y == endy and (x <= xoff + 1 or x >= xoff + width - 2):
                continue
            c = color
            if windows and xoff + 1 < x < xoff + width - 2 and endy + 1 < y < starty - 1:
                relx = x - (xoff + 1)
                rely = y - (endy + 1)
                if relx // 2 % 2 and rely % 2:
                    c = 1 + _rand(rng) % 2
                    while c == color:
                        c = 1 + _rand(rng) % 2
                    if relx % 2:
                        c = canvas.get(x - 1, y)   # a window's two pixels alike
            canvas.draw(x, y, c)


def _skyline(canvas: _Canvas, rng):
    h = canvas.height
    # The background: the light gray row first, so it stays behind the darker.
    for color in (2, 1):
        offset = -10
        while offset < canvas.width:
            offset += _rand(rng) % 8
            width = 10 + _rand(rng) % 9
            height = h // 2 + _rand(rng) % h // (2 if color == 2 else 3)
            _skyscraper(canvas, offset, width, height, False, color, rng)
            offset += width // 2 if color == 2 else width + 1
    # The foreground: black, with windows.
    offset = -10
    while offset < canvas.width:
        offset += _rand(rng) % 8
        width = 5 + _rand(rng) % 14
        if width % 4:
            width += width % 3
        height = h // 3 + _rand(rng) % h // 2
        _skyscraper(canvas, offset, width, height, True, 0, rng)
        offset += width + 5


# Each pixel sets the foreground and the background (terminals agree better).
_CELLS = [b"\033[%s \033[0m" % ce for ce in (b"0;30;40m", b"0;90;100m", b"0;37;47m",
                                              b"0;97;107m")]


def _lolwut6(args, rng) -> bytes:
    cols, rows = 80, 20
    if len(args) > 0:
        cols = parse_int(args[0])
    if len(args) > 1:
        rows = parse_int(args[1])
    cols = min(max(cols, 1), 1000)
    rows = min(max(rows, 1), 1000)
    canvas = _Canvas(cols, rows, _SKY)
    _skyline(canvas, rng)
    px = canvas.pixels
    lines = [b"".join([_CELLS[p] for p in px[y * cols:(y + 1) * cols]]) for y in range(rows)]
    return b"\n".join(lines) + (
        b"\nDedicated to the 8 bit game developers of past and present.\n"
        b"Original 8 bit image from Plaguemon by hikikomori. Redis ver. " + VALKEY_VERSION + b"\n")


# -- the command -------------------------------------------------------------------


@command("lolwut", -1, "readonly fast", group="server", since="5.0.0",
         summary="Displays computer art and the server version", args="[VERSION version:i]")
def lolwut(c, argv):
    """LOLWUT [VERSION version] [piece's arguments...]"""
    args = argv[1:]
    version = None
    if len(argv) >= 3 and argv[1].lower() == b"version":
        version = parse_int(argv[2]) & 0xFFFFFFFF     # C's (unsigned int)
        args = argv[3:]
    if version == 5:
        return Verbatim(_lolwut5(args, random.Random()))
    if version == 6:
        return Verbatim(_lolwut6(args, random.Random()))
    return Verbatim(b"Redis ver. " + VALKEY_VERSION + b"\n")
