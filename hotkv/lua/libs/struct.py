"""struct for scripts: Lua's struct library (Roberto Ierusalimschy's) as
Redis ships it: pack / unpack / size.

Owns the binary layouts: little-endian by default ('<' / '>' switch),
native sizes of a 64-bit build (l / L / T 8 bytes, h 2, i / I 4 unless
given, up to 32), alignment only after '!' (default 8, a power of 2),
'c' fixed strings (c0 takes its size from the previous value when
unpacking), 's' zero-terminated strings, 'x' padding; integers are C's
(long long) cast of the number, truncated to their size; unpacked
integers beyond 2^53 become doubles (a Lua 5.1 number).  Error texts are
the library's (with luaL_argerror's "bad argument #n to 'f'").

Invariant: the functions raise only ``LibError`` and touch no Lua state.
"""

from __future__ import annotations

import struct

from ..values import is_lua_number, lua_num_str, lua_tonumber, lua_type_name, truncate
from . import LibError

_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8,
          "x": 1}
_MAXINT = 32
_MAXALIGN = 8


def _items(fmt: bytes, fname: str):
    """Parse a struct format: yields (option, size, little_endian, padding
    before it given the position so far) as the library lays them out."""
    text = fmt.decode("latin-1")
    i = 0
    little, align = True, 1

    def number(default):
        nonlocal i
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        if j == i:
            return default
        v = int(text[i:j])
        i = j
        if v > 2 ** 31 - 1:
            raise LibError(b"integral size overflow")
        return v
    while i < len(text):
        opt = text[i]
        i += 1
        if opt in _SIZES:
            size = _SIZES[opt]
        elif opt == "c":
            size = number(1)
        elif opt in "iI":
            size = number(4)
            if size > _MAXINT:
                raise LibError(b"integral size %d is larger than limit of %d"
                                % (size, _MAXINT))
        elif opt == "s":
            size = 0
        elif opt == " ":
            continue
        elif opt in "<>":
            little = opt == "<"
            continue
        elif opt == "!":
            a = number(_MAXALIGN)
            if a <= 0 or a & (a - 1):
                raise LibError(b"alignment %d is not a power of 2" % a)
            align = a
            continue
        else:
            raise LibError(("bad argument #1 to '%s' (invalid format option '%s')"
                             % (fname, opt)).encode("latin-1"))
        yield opt, size, little, align


def _pad(pos: int, opt: str, size: int, align: int) -> int:
    if size == 0 or opt == "c":
        return 0
    size = min(size, align)
    return (size - (pos & (size - 1))) & (size - 1)


_MISSING = object()


def _arg_type(v) -> bytes:
    return b"no value" if v is _MISSING else lua_type_name(v).encode()


def _string(v):
    """A string argument as luaL_checklstring takes it: a number too."""
    if (type(v) is int or type(v) is float) and v is not _MISSING:
        return lua_num_str(v).encode()
    return v


def pack(fmt=_MISSING, *args):
    fmt = _string(fmt)
    if type(fmt) is not bytes:
        raise LibError(b"bad argument #1 to 'pack' (string expected, got %s)"
                        % _arg_type(fmt))
    out = bytearray()
    arg = 0
    for opt, size, little, align in _items(fmt, "pack"):
        out += b"\0" * _pad(len(out), opt, size, align)
        if opt == "x":
            out.append(0)
            continue
        if arg >= len(args) or (opt != "c" and opt != "s" and
                                not is_lua_number(args[arg])):
            # (the library's own stack slot makes a missing argument "nil")
            got = "nil" if arg >= len(args) else lua_type_name(args[arg])
            want = "string" if opt in "cs" else "number"
            raise LibError(("bad argument #%d to 'pack' (%s expected, got %s)"
                             % (arg + 2, want, got)).encode())
        v = args[arg]
        arg += 1
        if opt in "cs":
            if type(v) in (int, float):
                v = lua_num_str(v).encode()
            elif type(v) is not bytes:
                raise LibError(("bad argument #%d to 'pack' (string expected, got %s)"
                                 % (arg + 1, lua_type_name(v))).encode())
            n = size or len(v)
            if len(v) < n:
                raise LibError(b"bad argument #%d to 'pack' (string too short)" % (arg + 2))
            out += v[:n]
            if opt == "s":
                out.append(0)
            continue
        num = float(lua_tonumber(v))
        if opt == "f":
            out += struct.pack("<f" if little else ">f", num)
        elif opt == "d":
            out += struct.pack("<d" if little else ">d", num)
        else:
            value = truncate(num) & 0xFFFFFFFFFFFFFFFF
            raw = value.to_bytes(8, "little")[:size].ljust(size, b"\0")
            out += raw if little else raw[::-1]
    return bytes(out)


def unpack(*args):
    """struct.unpack(fmt, data [, pos]); its stack is Lua's: one slot per
    argument and per value pushed, 8,000 in all (LUAI_MAXCSTACK)."""
    fmt = args[0] if args else _MISSING
    data = args[1] if len(args) > 1 else _MISSING
    pos = args[2] if len(args) > 2 else 1
    return _unpack(fmt, data, pos, len(args))


def _unpack(fmt, data, pos, nargs):
    fmt, data = _string(fmt), _string(data)
    if type(fmt) is not bytes:
        raise LibError(b"bad argument #1 to 'unpack' (string expected, got %s)"
                        % _arg_type(fmt))
    if type(data) is not bytes:
        raise LibError(b"bad argument #2 to 'unpack' (string expected, got %s)"
                        % _arg_type(data))
    try:
        pos = int(lua_tonumber(pos if pos is not None else 1))
    except (TypeError, ValueError):
        raise LibError(b"bad argument #3 to 'unpack' (number expected)")
    if pos == 0:
        raise LibError(b"bad argument #3 to 'unpack' (offset must be 1 or greater)")
    if pos < 0:
        pos += 1 << 64          # (a size_t in Valkey's struct: far past any data)
    pos -= 1
    n = len(data)
    values: list = []
    for opt, size, little, align in _items(fmt, "unpack"):
        pos += _pad(pos, opt, size, align)
        if size > n or pos > n - size:
            raise LibError(b"bad argument #2 to 'unpack' (data string too short)")
        if nargs + len(values) + 2 > 8000:     # (room for the value and the position)
            raise LibError(b"stack overflow (too many results)")
        chunk = data[pos:pos + size]
        if opt == "x":
            pass
        elif opt == "f":
            values.append(struct.unpack("<f" if little else ">f", chunk)[0])
        elif opt == "d":
            values.append(struct.unpack("<d" if little else ">d", chunk)[0])
        elif opt == "c":
            if size == 0:
                if not values or not is_lua_number(values[-1]):
                    raise LibError(b"format 'c0' needs a previous size")
                size = int(values.pop())
                if size > n or pos > n - size:
                    raise LibError(b"bad argument #2 to 'unpack' (data string too short)")
            values.append(data[pos:pos + size])
        elif opt == "s":
            end = data.find(b"\0", pos)
            if end < 0:
                raise LibError(b"unfinished string in data")
            values.append(data[pos:end])
            size = end - pos + 1
        else:
            raw = chunk if not little else chunk[::-1]
            value = int.from_bytes(raw[-8:] if size > 8 else raw, "big")
            if opt.islower() and size:
                bits = min(size, 8) * 8
                if value & (1 << (bits - 1)):
                    value -= 1 << bits
            values.append(value if -(1 << 53) <= value <= (1 << 53) else float(value))
        pos += size
    values.append(pos + 1)
    return tuple(values)


def size(fmt=_MISSING, *_ignored):
    fmt = _string(fmt)
    if type(fmt) is not bytes:
        raise LibError(b"bad argument #1 to 'size' (string expected, got %s)"
                        % _arg_type(fmt))
    pos = 0
    for opt, size, little, align in _items(fmt, "size"):
        pos += _pad(pos, opt, size, align)
        if opt == "s":
            raise LibError(b"bad argument #1 to 'size' (option 's' has no fixed size)")
        if opt == "c" and size == 0:
            raise LibError(b"bad argument #1 to 'size' (option 'c0' has no fixed size)")
        pos += size
    return pos


def fn(name: str):
    """The library function the prelude's struct table names."""
    return {"pack": pack, "unpack": unpack, "size": size}[name]

