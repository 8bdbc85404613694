"""cmsgpack for scripts: lua-cmsgpack 0.4.0's pack / unpack /
unpack_one / unpack_limit as Redis ships it.

Owns the MessagePack encoding of Lua values and back: integers in the
smallest form, non-integral numbers as float32 when exact, else float64;
strings as str8/16/32 (fixstr below 32); a table whose keys are exactly
1..n is an array, any other a map; tables nested deeper than 16 encode as
nil, as lua-cmsgpack's limit; decoding refuses bin and ext types (lua-cmsgpack
0.4.0 has none), drops nil array items and map pairs with a nil value
(a nil or NaN key is lua_settable's error), and turns 64-bit integers
beyond 2^53 into doubles (a Lua 5.1 number; a uint64 past 2^63 read as
the signed lua_Integer lua-cmsgpack pushes).  Error texts are
lua-cmsgpack's.

Invariant: ``pack`` raises only ``LibError``; ``unpack`` returns (True, n,
values...) or (False, message) and never raises; they see the Lua state
only through the table constructor they are passed; (None, message) from
``unpack`` is an error to raise as it is (lua_settable's, no position).
"""

from __future__ import annotations

import math
import struct

from lupa import lua51

from ..values import lua_num_str, lua_tonumber, lua_type_name
from . import LibError

MISSING = object()      # an argument not given (Lua's "no value")


class MsgpackError(Exception):
    """A byte no MessagePack type starts with (lua-cmsgpack's BADFMT)."""


class TableIndexError(Exception):
    """A map key Lua cannot index by (nil, NaN): lua_settable's error, which
    names no position (unpack returns (None, message))."""


class _Truncated(Exception):
    """The input ends inside a value (lua-cmsgpack's EOF)."""


def pack(*args, real=None):
    """cmsgpack.pack(...): the values' encodings, concatenated.  real: the
    table a read-only proxy shows (the prelude's library tables are empty
    proxies; lua-cmsgpack packs what they hold)."""
    if not args:
        raise LibError(b"bad argument #0 to 'pack' (MessagePack pack needs input.)")
    if len(args) > 4000:    # (lua-cmsgpack's lua_checkstack(nargs) on an 8,000-slot stack)
        raise LibError(b"bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)")
    out = bytearray()
    for v in args:
        _encode(v, out, 0, real)
    return bytes(out)


def _encode(v, out: bytearray, depth: int, real=None):
    t = type(v)
    if v is None:
        out.append(0xC0)
    elif t is bool:
        out.append(0xC3 if v else 0xC2)
    elif t is int or t is float:
        if t is float and (v != v or v in (math.inf, -math.inf) or v != int(v)
                           or not -(1 << 63) <= v < (1 << 63)):
            f32 = struct.unpack("<f", struct.pack("<f", v))[0] \
                if abs(v) < 3.5e38 or v != v or v in (math.inf, -math.inf) else None
            if f32 is not None and f32 == v:     # (never for NaN: a float64, as C's ==)
                out += b"\xca" + struct.pack(">f", v)
            else:
                out += b"\xcb" + struct.pack(">d", v)
        else:
            _encode_int(int(v), out)
    elif t is bytes:
        n = len(v)
        if n < 32:
            out.append(0xA0 | n)
        elif n < 256:
            out += b"\xd9" + bytes([n])
        elif n < 65536:
            out += b"\xda" + struct.pack(">H", n)
        else:
            out += b"\xdb" + struct.pack(">I", n)
        out += v
    elif lua51.lua_type(v) == "table":
        if depth >= 16:     # lua-cmsgpack's nesting limit: deeper tables are nil
            out.append(0xC0)
            return
        items = list(v.items())
        if not items and real is not None:
            shown = real(v)
            if shown is not None:
                v = shown
                items = list(v.items())
        n = len(items)
        is_array = all(type(k) in (int, float) and not isinstance(k, bool) and k >= 1
                       and k == int(k) for k, _ in items) and \
            (not items or max(int(k) for k, _ in items) == n)
        if is_array:
            if n < 16:
                out.append(0x90 | n)
            elif n < 65536:
                out += b"\xdc" + struct.pack(">H", n)
            else:
                out += b"\xdd" + struct.pack(">I", n)
            for i in range(1, n + 1):
                _encode(v[i], out, depth + 1, real)
        else:
            if n < 16:
                out.append(0x80 | n)
            elif n < 65536:
                out += b"\xde" + struct.pack(">H", n)
            else:
                out += b"\xdf" + struct.pack(">I", n)
            for k, x in items:
                _encode(k, out, depth + 1, real)
                _encode(x, out, depth + 1, real)
    else:
        out.append(0xC0)


def _encode_int(n: int, out: bytearray):
    if n >= 0:
        if n < 128:
            out.append(n)
        elif n < 256:
            out += b"\xcc" + bytes([n])
        elif n < 65536:
            out += b"\xcd" + struct.pack(">H", n)
        elif n < (1 << 32):
            out += b"\xce" + struct.pack(">I", n)
        else:
            out += b"\xcf" + struct.pack(">Q", n)
    elif n >= -32:
        out.append(n + 256)
    elif n >= -128:
        out += b"\xd0" + struct.pack(">b", n)
    elif n >= -32768:
        out += b"\xd1" + struct.pack(">h", n)
    elif n >= -(1 << 31):
        out += b"\xd2" + struct.pack(">i", n)
    else:
        out += b"\xd3" + struct.pack(">q", n)


def unpack(s, offset, limit, with_offset, new_table):
    """Decode from byte offset, at most limit values (0: all); with_offset
    puts the next offset (-1 at the end) first, unless offset and limit are
    both 0 (lua-cmsgpack's decode_all).  (True, n, values...) or
    (False, message)."""
    if type(s) in (int, float):
        s = lua_num_str(s).encode()
    if type(s) is not bytes:
        return False, (b"bad argument #1 to 'unpack' (string expected, got %s)"
                       % (b"no value" if s is MISSING else lua_type_name(s).encode()))
    try:
        offset = int(lua_tonumber(offset))
        limit = int(lua_tonumber(limit))
    except (TypeError, ValueError):
        return False, b"bad argument #2 to 'unpack' (number expected)"
    if offset < 0 or limit < 0:
        # (lua-cmsgpack names the input's length as the limit here)
        return False, (b"Invalid request to unpack with offset of %d and limit of %d."
                       % (offset, len(s)))
    if offset > len(s):
        return False, (b"Start offset %d greater than input length %d."
                       % (offset, len(s)))
    decode_all = limit == 0 and offset == 0
    values = []
    pos = offset
    try:
        while pos < len(s) and (decode_all or len(values) < limit):
            v, pos = _decode(s, pos, new_table)
            values.append(v)
    except TableIndexError as e:
        return None, e.args[0]
    except MsgpackError:
        return False, b"Bad data format in input."
    except (IndexError, struct.error, _Truncated):
        return False, b"Missing bytes in input."
    except RecursionError:
        return False, b"Bad data format in input."
    if with_offset and not decode_all:      # (unpack_limit(s, 0, 0) decodes all, as unpack)
        values.insert(0, -1 if pos >= len(s) else pos)
    return (True, len(values), *values)


# The fixed-size types: (struct reader, size).
_FIXED = {0xCA: (struct.Struct(">f").unpack_from, 4), 0xCB: (struct.Struct(">d").unpack_from, 8),
          0xCC: (struct.Struct(">B").unpack_from, 1), 0xCD: (struct.Struct(">H").unpack_from, 2),
          0xCE: (struct.Struct(">I").unpack_from, 4), 0xCF: (struct.Struct(">Q").unpack_from, 8),
          0xD0: (struct.Struct(">b").unpack_from, 1), 0xD1: (struct.Struct(">h").unpack_from, 2),
          0xD2: (struct.Struct(">i").unpack_from, 4), 0xD3: (struct.Struct(">q").unpack_from, 8)}
# str 8, 16, 32: the length's size.  (lua-cmsgpack 0.4.0 has no bin types:
# 0xC4-0xC6 are a bad format, as ext types are.)
_SIZED = {0xD9: 1, 0xDA: 2, 0xDB: 4}
_BIG = 1 << 53
_INT64 = 1 << 63


def _decode(s: bytes, pos: int, new_table):
    """One value at pos: (value, next position).  The commonest bytes
    first; the containers' loops below decode their scalar items in line
    (one Python call per container, not per item)."""
    b = s[pos]
    pos += 1
    if b < 0x80:                    # positive fixint
        return b, pos
    if b >= 0xE0:                   # negative fixint
        return b - 256, pos
    if b < 0xC0:
        if b >= 0xA0:               # fixstr
            end = pos + (b & 0x1F)
            if end > len(s):
                raise _Truncated()
            return s[pos:end], end
        if b >= 0x90:
            return _decode_array(s, pos, b & 0x0F, new_table)
        return _decode_map(s, pos, b & 0x0F, new_table)
    if b == 0xC0:
        return None, pos
    if b == 0xC2:
        return False, pos
    if b == 0xC3:
        return True, pos
    fixed = _FIXED.get(b)
    if fixed is not None:
        read, size = fixed
        if pos + size > len(s):
            raise _Truncated()
        v = read(s, pos)[0]
        if b == 0xCF or b == 0xD3:
            if v >= _INT64:
                v -= 1 << 64      # (lua-cmsgpack pushes a uint64 as a lua_Integer: signed)
            if not -_BIG <= v <= _BIG:
                v = float(v)      # a Lua 5.1 number is a double
        return v, pos + size
    size = _SIZED.get(b)
    if size is not None:
        if pos + size > len(s):
            raise _Truncated()
        n = int.from_bytes(s[pos:pos + size], "big")
        pos += size
        if pos + n > len(s):
            raise _Truncated()
        return s[pos:pos + n], pos + n
    if b == 0xDC or b == 0xDD:
        size = 2 if b == 0xDC else 4
        if pos + size > len(s):
            raise _Truncated()
        n = int.from_bytes(s[pos:pos + size], "big")
        return _decode_array(s, pos + size, n, new_table)
    if b == 0xDE or b == 0xDF:
        size = 2 if b == 0xDE else 4
        if pos + size > len(s):
            raise _Truncated()
        n = int.from_bytes(s[pos:pos + size], "big")
        return _decode_map(s, pos + size, n, new_table)
    raise MsgpackError()


# The one-byte values (fixints, nil, false, true) by their byte; _MORE for
# every other byte.
_MORE = object()
_ONE = [_MORE] * 256
for _b in range(0x80):
    _ONE[_b] = _b
for _b in range(0xE0, 0x100):
    _ONE[_b] = _b - 256
_ONE[0xC0], _ONE[0xC2], _ONE[0xC3] = None, False, True


def _decode_array(s, pos, n, new_table, one=_ONE, more=_MORE):
    t = new_table()
    size = len(s)
    for i in range(1, n + 1):
        b = s[pos]
        v = one[b]
        if v is not more:
            pos += 1
        elif 0xA0 <= b < 0xC0:                  # fixstr
            end = pos + 1 + (b & 0x1F)
            if end > size:
                raise _Truncated()
            v = s[pos + 1:end]
            pos = end
        else:
            v, pos = _decode(s, pos, new_table)
        if v is not None:
            t[i] = v
    return t, pos


def _decode_map(s, pos, n, new_table, one=_ONE, more=_MORE):
    t = new_table()
    size = len(s)
    for _ in range(n):
        b = s[pos]
        if 0xA0 <= b < 0xC0:                    # a fixstr key
            end = pos + 1 + (b & 0x1F)
            if end > size:
                raise _Truncated()
            k = s[pos + 1:end]
            pos = end
        else:
            k, pos = _decode(s, pos, new_table)
        b = s[pos]
        v = one[b]
        if v is not more:
            pos += 1
        elif 0xA0 <= b < 0xC0:                  # fixstr
            end = pos + 1 + (b & 0x1F)
            if end > size:
                raise _Truncated()
            v = s[pos + 1:end]
            pos = end
        else:
            v, pos = _decode(s, pos, new_table)
        if k is None or k != k:
            # lua_settable's own error (raised as it is, no position)
            raise TableIndexError(b"table index is nil" if k is None else b"table index is NaN")
        if v is not None:
            t[k] = v
    return t, pos
