"""cjson for scripts: lua-cjson's encode / decode as Redis ships it.

Owns the JSON text a script gets and the Lua values it decodes to:
numbers as %.14g (Lua's tostring), '/' escaped, control bytes as \\u00XX,
other bytes passed through unchanged; a table is an array when every key
is a positive integer (lua-cjson's sparse-array rule: refused when the
largest index is over 10 and over twice the count), else an object;
nesting beyond 1000 levels is refused; NaN and Inf are refused; ``null``
decodes to the cjson.null sentinel and integers beyond 2^53 to doubles
(a Lua 5.1 number).  Error texts are lua-cjson's.  Object key order is
stock Lua 5.1's table order, not Valkey's (its Lua hashes strings with
murmur32).

Invariant: ``encode`` and ``decode`` return (True, value) or (False,
message), never raise; they see the Lua state only through what they are
passed (the null sentinel, rawequal, a table constructor).
"""

from __future__ import annotations

import json
import math

from lupa import lua51

from ..values import lua_num_str


class JsonError(Exception):
    pass


def encode(v, null, rawequal):
    """(True, JSON bytes) or (False, lua-cjson's message)."""
    try:
        out: list = []
        _encode(v, null, rawequal, out, 0)
        return True, "".join(out).encode("utf-8", "surrogateescape")
    except JsonError as e:
        return False, str(e).encode()


def _encode(v, null, rawequal, out, depth):
    t = type(v)
    if v is None:
        out.append("null")
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int or t is float:
        if t is float and (v != v or v in (math.inf, -math.inf)):
            raise JsonError("Cannot serialise number: must not be NaN or Inf")
        out.append(lua_num_str(v))
    elif t is bytes:
        out.append(json_str(v))
    elif lua51.lua_type(v) == "table":
        if depth >= 1000:
            raise JsonError("Cannot serialise, excessive nesting (1001)")
        items = list(v.items())
        maxi = 0
        is_array = True
        for k, _ in items:
            if type(k) in (int, float) and not isinstance(k, bool) and k >= 1 and k == int(k):
                maxi = max(maxi, int(k))
            else:
                is_array = False
                break
        if is_array and items:
            if maxi > 10 and maxi > 2 * len(items):
                raise JsonError("Cannot serialise table: excessively sparse array")
            out.append("[")
            for i in range(1, maxi + 1):
                if i > 1:
                    out.append(",")
                _encode(v[i], null, rawequal, out, depth + 1)
            out.append("]")
        else:
            out.append("{")
            first = True
            for k, val in items:
                if not first:
                    out.append(",")
                first = False
                if type(k) is bytes:
                    out.append(json_str(k))
                elif type(k) in (int, float) and not isinstance(k, bool):
                    out.append('"' + lua_num_str(k) + '"')
                else:
                    raise JsonError("Cannot serialise %s: table key must be a number or "
                                    "string" % lua51.lua_type(k))
                out.append(":")
                _encode(val, null, rawequal, out, depth + 1)
            out.append("}")
    elif rawequal(v, null):
        out.append("null")
    else:
        raise JsonError("Cannot serialise %s: type not supported" % lua51.lua_type(v))


def _reject_constant(name):
    raise ValueError("invalid constant " + name)


def decode(s, null, new_table):
    """(True, Lua value) or (False, lua-cjson's message); new_table() makes
    an empty Lua table."""
    if type(s) in (int, float):
        s = lua_num_str(s).encode()
    if type(s) is not bytes:
        return False, b"bad argument #1 to 'decode' (string expected)"
    doc = s.decode("utf-8", "surrogateescape")
    try:
        value = json.loads(doc, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        # lua-cjson's wording; Python's parser finds the same position.
        pos = getattr(e, "pos", 0) or 0
        found = b"T_END" if pos >= len(doc.rstrip()) else b"invalid token"
        return False, b"Expected value but found %s at character %d" % (found, pos + 1)
    return True, _decode(value, null, new_table)


def _decode(v, null, new_table):
    if v is None:
        return null
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return float(v) if abs(v) >= 1 << 53 else v
    if isinstance(v, list):
        t = new_table()
        for i, x in enumerate(v, 1):
            t[i] = _decode(x, null, new_table)
        return t
    if isinstance(v, dict):
        t = new_table()
        for k, x in v.items():
            t[k.encode("utf-8", "surrogateescape")] = _decode(x, null, new_table)
        return t
    return v


_JSON_ESC = {0x22: '\\"', 0x5C: "\\\\", 0x2F: "\\/", 0x08: "\\b", 0x0C: "\\f",
             0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def json_str(b: bytes) -> str:
    out = ['"']
    for ch in b:
        e = _JSON_ESC.get(ch)
        if e is not None:
            out.append(e)
        elif ch < 0x20 or ch == 0x7F:
            out.append("\\u%04x" % ch)
        else:
            out.append(chr(ch) if ch < 0x80 else bytes([ch]).decode("latin-1"))
    out.append('"')
    s = "".join(out)
    # Non-ASCII bytes pass through unchanged (as lua-cjson): re-map latin-1 back.
    return s.encode("latin-1").decode("utf-8", "surrogateescape")
