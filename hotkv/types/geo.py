"""Geo math: the 52-bit geohash scores of geo sets and the search areas.

Owns the pure arithmetic behind the GEO* commands (hotkv/commands/geo.py):
* ``encode_score`` / ``score_lonlat``: a longitude/latitude pair <-> the
  sorted-set score Valkey stores, latitude and longitude bits interleaved
  (26 each) over the Mercator-limited ranges [-180, 180] x [-85.05112878,
  85.05112878]; a decoded point is the centre of its cell;
* ``geohash_text``: GEOHASH's 11-character base-32 string (re-encoded over
  the standard [-90, 90] latitude range);
* ``search_boxes``: the cell of the search centre and its 8 neighbours, at
  the precision the search radius calls for, minus the useless ones -- the
  ranges of scores a GEOSEARCH scans, in the order Valkey scans them;
* ``distance`` (haversine on a sphere of 6372797.560856 m) and
  ``Shape.within`` (in a circle / in an axis-aligned box);
* ``format_distance`` (4 decimals, rounded from d * 10000 half to even) and
  ``format_coord`` (the ``%.17Lf`` text, trailing zeros dropped);
* ``merge_sort``: glibc's qsort, for the full sort when a distance is NaN;
* ``partial_sort``: the three-way partial quicksort Valkey sorts a
  COUNT-limited result with (Bentley & McIlroy), so equal distances come
  out in the same order as in Valkey.

Invariants: no state but one lookup table built on first use (the 16-bit
bit-splitting table of ``score_lonlat``), no client, no I/O; every C
``uint64_t`` operation is masked to 64 bits and every C double operation is
one Python float operation in the same order, so results are the same
doubles as Valkey's (the same glibc libm computes sin/cos/asin/sqrt on both;
where Python's math raises, C gives NaN and so does this module).
``score_lonlat`` is ``cell`` unrolled for speed; ``score_lonlat_by_cell``
is the step-by-step form tests hold it to.
"""

from __future__ import annotations

import math

from ..protocol.longdouble import format_long_double

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1
STEP_MAX = 26                       # 26 bits a coordinate: 52-bit scores
LAT_MIN = -85.05112878
LAT_MAX = 85.05112878
LON_MIN = -180.0
LON_MAX = 180.0
EARTH_RADIUS_IN_METERS = 6372797.560856
MERCATOR_MAX = 20037726.37
D_R = math.pi / 180.0

# Unit name (lower case) -> metres in one unit.
UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}

CIRCLE = 1
BOX = 2

_B = (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F,
      0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF)
_ALPHABET = b"0123456789bcdefghjkmnpqrstuvwxyz"


def _spread(v: int) -> int:
    """The low 32 bits of v moved to the even bit positions."""
    v &= M32
    v = (v | (v << 16)) & _B[4]
    v = (v | (v << 8)) & _B[3]
    v = (v | (v << 4)) & _B[2]
    v = (v | (v << 2)) & _B[1]
    return (v | (v << 1)) & _B[0]


def _squeeze(v: int) -> int:
    """The even bits of a 64-bit v packed into its low 32 bits."""
    v &= _B[0]
    v = (v | (v >> 1)) & _B[1]
    v = (v | (v >> 2)) & _B[2]
    v = (v | (v >> 4)) & _B[3]
    v = (v | (v >> 8)) & _B[4]
    return (v | (v >> 16)) & _B[5]


def encode(lon: float, lat: float, step: int,
           lon_min: float = LON_MIN, lon_max: float = LON_MAX,
           lat_min: float = LAT_MIN, lat_max: float = LAT_MAX) -> int | None:
    """The ``2 * step``-bit hash of a point (latitude bits at the even
    positions), or None outside the ranges or the Mercator limits."""
    if lon > LON_MAX or lon < LON_MIN or lat > LAT_MAX or lat < LAT_MIN:
        return None
    if lat < lat_min or lat > lat_max or lon < lon_min or lon > lon_max:
        return None
    lat_off = (lat - lat_min) / (lat_max - lat_min)
    lon_off = (lon - lon_min) / (lon_max - lon_min)
    scale = float(1 << step)
    # C converts each offset to uint32_t (truncation); a point on the upper
    # edge gives 2**step, whose bit lands above the hash, as in Valkey.
    return _spread(int(lat_off * scale)) | (_spread(int(lon_off * scale)) << 1)


def encode_score(lon: float, lat: float) -> int:
    """GEOADD's score of a point already checked to be in range."""
    return encode(lon, lat, STEP_MAX)


def cell(bits: int, step: int,
         lon_min: float = LON_MIN, lon_max: float = LON_MAX,
         lat_min: float = LAT_MIN, lat_max: float = LAT_MAX):
    """The area of a hash: (lon_lo, lon_hi, lat_lo, lat_hi)."""
    ilat = _squeeze(bits)
    ilon = _squeeze(bits >> 1)
    div = float(1 << step)
    lat_scale = lat_max - lat_min
    lon_scale = lon_max - lon_min
    return (lon_min + (ilon * 1.0 / div) * lon_scale,
            lon_min + (((ilon + 1) & M32) * 1.0 / div) * lon_scale,
            lat_min + (ilat * 1.0 / div) * lat_scale,
            lat_min + (((ilat + 1) & M32) * 1.0 / div) * lat_scale)


def double_to_u64(d: float) -> int:
    """C's ``(uint64_t)d`` as x86-64 compilers emit it (cvttsd2si, with a
    2**63 offset for large values; out of range gives 2**63, or 0 past
    2**64): Valkey decodes any zset score this way, geo or not."""
    if d != d:
        return 1 << 63
    if d < 9223372036854775808.0:
        if d <= -9223372036854775808.0 - 1024:   # below int64: indefinite
            return 1 << 63
        return int(d) & M64
    d -= 9223372036854775808.0
    if d >= 9223372036854775808.0:
        return 0
    return int(d) ^ (1 << 63)


# deinterleave64 of a score, 16 bits at a time: a 16-bit chunk's even bits
# (4 bits at 0..7) and odd bits (at 32..39), so that one pass of lookups
# splits a score into latitude (low 32 bits) and longitude (high 32 bits).
# Built on first use (65,536 entries).
_SPLIT16 = None
_DIV26 = float(1 << STEP_MAX)
_LAT_SCALE = LAT_MAX - LAT_MIN
_LON_SCALE = LON_MAX - LON_MIN


def _split16():
    global _SPLIT16
    by8 = []
    for x in range(256):
        even = odd = 0
        for k in range(4):
            even |= ((x >> (2 * k)) & 1) << k
            odd |= ((x >> (2 * k + 1)) & 1) << k
        by8.append(even | (odd << 32))
    _SPLIT16 = [by8[x & 0xFF] | (by8[x >> 8] << 4) for x in range(1 << 16)]
    return _SPLIT16


def score_lonlat(score: float):
    """The point (lon, lat) a score stands for: the centre of its cell,
    clamped to the valid ranges (``cell`` at 26 bits, unrolled: a search
    decodes every candidate)."""
    bits = int(score) if 0.0 <= score < 9223372036854775808.0 else double_to_u64(score)
    t = _SPLIT16 or _split16()
    both = (t[bits & 0xFFFF] | (t[(bits >> 16) & 0xFFFF] << 8)
            | (t[(bits >> 32) & 0xFFFF] << 16) | (t[bits >> 48] << 24))
    ilat = both & M32
    ilon = both >> 32
    # The same double operations, in the same order, as cell() and C.
    lon = ((LON_MIN + (ilon / _DIV26) * _LON_SCALE)
           + (LON_MIN + (((ilon + 1) & M32) / _DIV26) * _LON_SCALE)) / 2
    if lon > LON_MAX:
        lon = LON_MAX
    elif lon < LON_MIN:
        lon = LON_MIN
    lat = ((LAT_MIN + (ilat / _DIV26) * _LAT_SCALE)
           + (LAT_MIN + (((ilat + 1) & M32) / _DIV26) * _LAT_SCALE)) / 2
    if lat > LAT_MAX:
        lat = LAT_MAX
    elif lat < LAT_MIN:
        lat = LAT_MIN
    return lon, lat


def score_lonlat_by_cell(score: float):
    """score_lonlat through cell(), step by step as C: what the unrolled
    one is tested against."""
    lon_lo, lon_hi, lat_lo, lat_hi = cell(double_to_u64(score), STEP_MAX)
    lon = min(max((lon_lo + lon_hi) / 2, LON_MIN), LON_MAX)
    lat = min(max((lat_lo + lat_hi) / 2, LAT_MIN), LAT_MAX)
    return lon, lat


def geohash_text(score: float) -> bytes:
    """GEOHASH's 11-character string of a score."""
    lon, lat = score_lonlat(score)
    bits = encode(lon, lat, STEP_MAX, -180.0, 180.0, -90.0, 90.0)
    out = bytearray()
    for i in range(10):
        out.append(_ALPHABET[(bits >> (52 - (i + 1) * 5)) & 0x1F])
    out.append(_ALPHABET[0])     # 52 bits make 10.4 characters: the 11th is 0
    return bytes(out)


# ----------------------------------------------------------------------
# Distances
# ----------------------------------------------------------------------

_sin, _cos, _asin, _sqrt = math.sin, math.cos, math.asin, math.sqrt


def _c_call(fn, x: float) -> float:
    """fn(x), or NaN where C's libm returns NaN and Python's math raises."""
    try:
        return fn(x)
    except ValueError:
        return math.nan


def lat_distance(lat1: float, lat2: float) -> float:
    return EARTH_RADIUS_IN_METERS * math.fabs(lat2 * D_R - lat1 * D_R)


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Great-circle distance in metres (haversine)."""
    try:
        v = _sin((lon2 * D_R - lon1 * D_R) / 2)
        if v == 0.0:
            # Same meridian: the haversine reduces to the latitude difference.
            return EARTH_RADIUS_IN_METERS * math.fabs(lat2 * D_R - lat1 * D_R)
        lat1r = lat1 * D_R
        lat2r = lat2 * D_R
        u = _sin((lat2r - lat1r) / 2)
        return 2.0 * EARTH_RADIUS_IN_METERS * _asin(_sqrt(
            u * u + _cos(lat1r) * _cos(lat2r) * v * v))
    except ValueError:
        return _distance_nan(lon1, lat1, lon2, lat2)


def _distance_nan(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """distance() when a step has no real value (cos(inf); asin past 1 for
    nearly antipodal points): C's libm gives NaN there, and so does this."""
    v = _c_call(_sin, (lon2 * D_R - lon1 * D_R) / 2)
    if v == 0.0:
        return lat_distance(lat1, lat2)
    lat1r = lat1 * D_R
    lat2r = lat2 * D_R
    u = _c_call(_sin, (lat2r - lat1r) / 2)
    a = u * u + _c_call(_cos, lat1r) * _c_call(_cos, lat2r) * v * v
    return 2.0 * EARTH_RADIUS_IN_METERS * _c_call(_asin, _c_call(_sqrt, a))


class Shape:
    """A search area: a circle (``radius``) or a box (``width`` x
    ``height``), in ``unit``s of ``conversion`` metres, around (lon, lat)."""
    __slots__ = ("kind", "lon", "lat", "radius", "width", "height", "conversion")

    def __init__(self):
        self.kind = 0
        self.lon = self.lat = 0.0
        self.radius = self.width = self.height = 0.0
        self.conversion = 1.0

    def within(self, score: float):
        """(lon, lat, distance in metres) of a score's point if it lies in
        the shape, else None."""
        lon, lat = score_lonlat(score)
        if self.kind == CIRCLE:
            d = distance(self.lon, self.lat, lon, lat)
            if d > self.radius * self.conversion:
                return None
            return lon, lat, d
        width_m = self.width * self.conversion
        height_m = self.height * self.conversion
        # The cheap latitude test first, as Valkey.
        if lat_distance(lat, self.lat) > height_m / 2:
            return None
        if distance(lon, lat, self.lon, lat) > width_m / 2:
            return None
        return lon, lat, distance(self.lon, self.lat, lon, lat)


# ----------------------------------------------------------------------
# Search areas
# ----------------------------------------------------------------------

def estimate_steps(range_m: float, lat: float) -> int:
    """Bits of precision a coordinate needs for cells about as large as
    the search radius (fewer near the poles, where cells shrink)."""
    if range_m == 0:
        return 26
    step = 1
    while range_m < MERCATOR_MAX:
        range_m *= 2
        step += 1
    step -= 2
    if lat > 66 or lat < -66:
        step -= 1
        if lat > 80 or lat < -80:
            step -= 1
    return min(max(step, 1), 26)


def bounding_box(shape: Shape):
    """(min_lon, min_lat, max_lon, max_lat) around the shape: the
    longitude span is taken at the edge farther from the equator."""
    lon, lat = shape.lon, shape.lat
    if shape.kind == CIRCLE:
        height = shape.conversion * shape.radius
        width = shape.conversion * shape.radius
    else:
        height = shape.conversion * (shape.height / 2)
        width = shape.conversion * (shape.width / 2)
    lat_delta = (height / EARTH_RADIUS_IN_METERS) / D_R
    top = (width / EARTH_RADIUS_IN_METERS / _c_call(_cos, (lat + lat_delta) * D_R)) / D_R
    bottom = (width / EARTH_RADIUS_IN_METERS
              / _c_call(_cos, (lat - lat_delta) * D_R)) / D_R
    if lat < 0:
        return lon - bottom, lat - lat_delta, lon + bottom, lat + lat_delta
    return lon - top, lat - lat_delta, lon + top, lat + lat_delta


def _move_x(bits: int, step: int, d: int) -> int:
    x = bits & 0xAAAAAAAAAAAAAAAA
    y = bits & 0x5555555555555555
    zz = 0x5555555555555555 >> (64 - step * 2)
    if d > 0:
        x = (x + (zz + 1)) & M64
    else:
        x = ((x | zz) - (zz + 1)) & M64
    x &= 0xAAAAAAAAAAAAAAAA >> (64 - step * 2)
    return x | y


def _move_y(bits: int, step: int, d: int) -> int:
    x = bits & 0xAAAAAAAAAAAAAAAA
    y = bits & 0x5555555555555555
    zz = 0xAAAAAAAAAAAAAAAA >> (64 - step * 2)
    if d > 0:
        y = (y + (zz + 1)) & M64
    else:
        y = ((y | zz) - (zz + 1)) & M64
    y &= 0x5555555555555555 >> (64 - step * 2)
    return x | y


def _neighbour(bits: int, step: int, dx: int, dy: int) -> int:
    if dx:
        bits = _move_x(bits, step, dx)
    if dy:
        bits = _move_y(bits, step, dy)
    return bits


# Scan order of the 9 cells: centre, N, S, E, W, NE, NW, SE, SW.
_MOVES = ((0, 0), (0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1))


def search_boxes(shape: Shape):
    """The cells to scan, in order, as (bits, step) or None for a cell
    left out; duplicates are kept (the scanner skips a cell equal to the
    last one scanned)."""
    min_lon, min_lat, max_lon, max_lat = bounding_box(shape)
    if shape.kind == CIRCLE:
        radius_m = shape.radius
    else:
        w2, h2 = shape.width / 2, shape.height / 2
        radius_m = math.sqrt(w2 * w2 + h2 * h2)
    radius_m *= shape.conversion
    step = estimate_steps(radius_m, shape.lat)
    bits = encode(shape.lon, shape.lat, step) or 0
    cells = [_neighbour(bits, step, dx, dy) for dx, dy in _MOVES]
    # A cell next to the centre one may still miss part of the box: then
    # one step coarser.
    if (cell(cells[1], step)[3] < max_lat or cell(cells[2], step)[2] > min_lat
            or cell(cells[3], step)[1] < max_lon or cell(cells[4], step)[0] > min_lon):
        if step > 1:
            step -= 1
            bits = encode(shape.lon, shape.lat, step) or 0
            cells = [_neighbour(bits, step, dx, dy) for dx, dy in _MOVES]
    out = [(b, step) for b in cells]
    if step >= 2:
        lon_lo, lon_hi, lat_lo, lat_hi = cell(bits, step)
        drop = set()
        if lat_lo < min_lat:
            drop.update((2, 7, 8))           # S, SE, SW
        if lat_hi > max_lat:
            drop.update((1, 5, 6))           # N, NE, NW
        if lon_lo < min_lon:
            drop.update((4, 6, 8))           # W, NW, SW
        if lon_hi > max_lon:
            drop.update((3, 5, 7))           # E, NE, SE
        for i in drop:
            out[i] = None
    return out


def box_scores(bits: int, step: int):
    """[lo, hi): the scores of every point inside a cell."""
    shift = 52 - step * 2
    return (bits << shift) & M64, ((bits + 1) << shift) & M64


# ----------------------------------------------------------------------
# Reply text
# ----------------------------------------------------------------------

def format_distance(d: float) -> bytes:
    """A distance with 4 decimals, from d * 10000 rounded half to even
    (C's llrint: NaN or out of range gives LLONG_MIN)."""
    if d == 0:
        return b"0.0000"
    x = d * 10000.0
    v = round(x) if -9223372036854775808.0 <= x < 9223372036854775808.0 else -(1 << 63)
    sign = b""
    if v < 0:
        sign, v = b"-", -v
    whole, frac = divmod(v, 10000)
    return b"%s%d.%04d" % (sign, whole, frac)


def format_coord(x: float) -> bytes:
    """A coordinate as Valkey's human long double text (%.17Lf, trailing
    zeros and a bare point dropped)."""
    if x == 0:
        return b"0"
    m, den = x.as_integer_ratio()
    return format_long_double((m, 1 - den.bit_length()))


# ----------------------------------------------------------------------
# Partial sort
# ----------------------------------------------------------------------

def merge_sort(a: list, cmp) -> list:
    """glibc's qsort (a top-down merge sort, halves of n // 2 and the rest,
    the left element taken while cmp(left, right) <= 0): for comparators
    that are no order (a NaN distance), the order glibc leaves."""
    n = len(a)
    if n <= 1:
        return a
    left = merge_sort(a[:n // 2], cmp)
    right = merge_sort(a[n // 2:], cmp)
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if cmp(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(left[i:])
    out.extend(right[j:])
    return out


def _med3(a, i, j, k, cmp):
    if cmp(a[i], a[j]) < 0:
        if cmp(a[j], a[k]) < 0:
            return j
        return k if cmp(a[i], a[k]) < 0 else i
    if cmp(a[j], a[k]) > 0:
        return j
    return i if cmp(a[i], a[k]) < 0 else k


def partial_sort(a: list, cmp, first: int, last: int) -> None:
    """Sort ``a`` in place with Bentley & McIlroy's three-way quicksort,
    recursing only into parts that overlap positions [first, last]: those
    end up as a full sort would put them, in the order (among equals) of
    Valkey's pqsort."""
    _pqsort(a, 0, len(a), cmp, first, last)


def _pqsort(a, lo, n, cmp, lrange, rrange):
    while True:
        if n < 7:
            for m in range(lo + 1, lo + n):
                p = m
                while p > lo and cmp(a[p - 1], a[p]) > 0:
                    a[p], a[p - 1] = a[p - 1], a[p]
                    p -= 1
            return
        pm = lo + n // 2
        if n > 7:
            pl = lo
            pn = lo + n - 1
            if n > 40:
                d = n // 8
                pl = _med3(a, pl, pl + d, pl + 2 * d, cmp)
                pm = _med3(a, pm - d, pm, pm + d, cmp)
                pn = _med3(a, pn - 2 * d, pn - d, pn, cmp)
            pm = _med3(a, pl, pm, pn, cmp)
        a[lo], a[pm] = a[pm], a[lo]
        pa = pb = lo + 1
        pc = pd = lo + n - 1
        pivot = a[lo]
        while True:
            while pb <= pc:
                r = cmp(a[pb], pivot)
                if r > 0:
                    break
                if r == 0:
                    a[pa], a[pb] = a[pb], a[pa]
                    pa += 1
                pb += 1
            while pb <= pc:
                r = cmp(a[pc], pivot)
                if r < 0:
                    break
                if r == 0:
                    a[pc], a[pd] = a[pd], a[pc]
                    pd -= 1
                pc -= 1
            if pb > pc:
                break
            a[pb], a[pc] = a[pc], a[pb]
            pb += 1
            pc -= 1
        pn = lo + n
        r = min(pa - lo, pb - pa)
        _vecswap(a, lo, pb - r, r)
        r = min(pd - pc, pn - pd - 1)
        _vecswap(a, pb, pn - r, r)
        r = pb - pa
        if r > 1 and _overlaps(lo, lo + r - 1, lrange, rrange):
            _pqsort(a, lo, r, cmp, lrange, rrange)
        r = pd - pc
        if r > 1:
            lo = pn - r
            n = r
            if _overlaps(lo, lo + r - 1, lrange, rrange):
                continue
        return


def _overlaps(first, last, lrange, rrange) -> bool:
    return not ((lrange < first and rrange < first) or (lrange > last and rrange > last))


def _vecswap(a, i, j, n):
    for k in range(n):
        a[i + k], a[j + k] = a[j + k], a[i + k]
