"""cjson for scripts: lua-cjson's encode / decode as Redis ships it.

Owns the JSON text a script gets and the Lua values it decodes to:
numbers as %.14g (Lua's tostring), '/' escaped, control bytes as \\u00XX,
other bytes passed through unchanged; a table is an array when every key
is a positive integer (lua-cjson's sparse-array rule: refused when the
largest index is over 10 and over twice the count), else an object;
nesting beyond 1000 levels is refused and NaN and Inf are, unless the
configuration functions (``setting``, kept per Lua state in ``Config``)
say otherwise; ``null``
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


class Config:
    """One Lua state's cjson settings (lua-cjson keeps them per state and
    they outlive the script that set them): the nesting limits and what
    NaN / Inf encode to (refused, their %.14g text, or null)."""
    __slots__ = ("encode_max_depth", "decode_max_depth", "invalid_numbers", "keep_buffer",
                 "decode_invalid")

    def __init__(self):
        self.encode_max_depth = 1000
        self.decode_max_depth = 1000
        self.invalid_numbers = False      # False, True or b"null"
        self.keep_buffer = True
        self.decode_invalid = True


_DEFAULT = Config()
_INT_MAX = 2147483647


def setting(cfg: Config, name: str, *args):
    """cjson.<name>(...): lua-cjson's configuration functions; (True, values
    tuple) or (False, message)."""
    fname = name.encode()
    if len(args) > 1:
        return False, b"bad argument #2 to '%s' (found too many arguments)" % fname
    arg = args[0] if args else None
    if name in ("encode_max_depth", "decode_max_depth"):
        if arg is not None:
            if type(arg) not in (int, float) or isinstance(arg, bool):
                return False, (b"bad argument #1 to '%s' (number expected, got %s)"
                               % (fname, _lua_type(arg)))
            if not 1 <= arg <= _INT_MAX:
                return False, (b"bad argument #1 to '%s' (expected integer between 1 and "
                               b"2147483647)" % fname)
            setattr(cfg, name, int(arg))
        return True, (getattr(cfg, name),)
    if name in ("encode_invalid_numbers", "encode_keep_buffer", "decode_invalid_numbers"):
        attr = {"encode_invalid_numbers": "invalid_numbers", "encode_keep_buffer": "keep_buffer",
                "decode_invalid_numbers": "decode_invalid"}[name]
        if arg is not None:
            if arg is True or arg is False:
                setattr(cfg, attr, arg)
            elif arg == b"on" or arg == b"off":
                setattr(cfg, attr, arg == b"on")
            elif arg == b"null" and name == "encode_invalid_numbers":
                setattr(cfg, attr, b"null")
            else:
                text = arg if type(arg) is bytes else _lua_type(arg)
                return False, b"bad argument #1 to '%s' (invalid option '%s')" % (fname, text)
        return True, (getattr(cfg, attr),)
    if name == "encode_sparse_array":
        return True, (False, 2, 10)
    if name == "encode_number_precision":
        return True, (14,)
    return True, ()


def _lua_type(v) -> bytes:
    if v is None:
        return b"nil"
    if type(v) is bytes:
        return b"string"
    if type(v) is bool:
        return b"boolean"
    t = lua51.lua_type(v)
    return (t.encode() if isinstance(t, str) else t) or b"userdata"


def encode(v, null, rawequal, cfg: Config = _DEFAULT):
    """(True, JSON bytes) or (False, lua-cjson's message)."""
    try:
        out: list = []
        _encode(v, null, rawequal, out, 0, cfg)
        return True, "".join(out).encode("utf-8", "surrogateescape")
    except JsonError as e:
        return False, str(e).encode()


def _encode(v, null, rawequal, out, depth, cfg):
    t = type(v)
    if v is None:
        out.append("null")
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int or t is float:
        if t is float and (v != v or v in (math.inf, -math.inf)):
            if cfg.invalid_numbers is False:
                raise JsonError("Cannot serialise number: must not be NaN or Inf")
            if cfg.invalid_numbers == b"null":
                out.append("null")
                return
            if v != v:
                out.append("nan")      # whatever its sign bit
                return
        out.append(lua_num_str(v))
    elif t is bytes:
        out.append(json_str(v))
    elif lua51.lua_type(v) == "table":
        if depth >= cfg.encode_max_depth:
            raise JsonError("Cannot serialise, excessive nesting (%d)" % (depth + 1))
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
                _encode(v[i], null, rawequal, out, depth + 1, cfg)
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
                _encode(val, null, rawequal, out, depth + 1, cfg)
            out.append("}")
    elif rawequal(v, null):
        out.append("null")
    else:
        raise JsonError("Cannot serialise %s: type not supported" % lua51.lua_type(v))


def _reject_constant(name):
    raise ValueError("invalid constant " + name)


def _too_deep(doc: str, limit: int):
    """(depth, index) of the first '[' or '{' nested deeper than limit
    (outside strings), or None."""
    depth = 0
    in_str = esc = False
    for i, ch in enumerate(doc):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return depth, i
        elif ch in "]}":
            depth -= 1
    return None


def decode(s, null, new_table, cfg: Config = _DEFAULT):
    """(True, Lua value) or (False, lua-cjson's message); new_table() makes
    an empty Lua table."""
    if type(s) in (int, float):
        s = lua_num_str(s).encode()
    if type(s) is not bytes:
        return False, b"bad argument #1 to 'decode' (string expected)"
    doc = s.decode("utf-8", "surrogateescape")
    deep = _too_deep(doc, cfg.decode_max_depth)
    try:
        value = json.loads(doc, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        # lua-cjson's wording; Python's parser finds the same position.
        pos = getattr(e, "pos", 0) or 0
        if deep is None or pos < deep[1]:
            found = b"T_END" if pos >= len(doc.rstrip()) else b"invalid token"
            return False, b"Expected value but found %s at character %d" % (found, pos + 1)
    if deep is not None:
        return False, (b"Found too many nested data structures (%d) at character %d"
                       % (deep[0], deep[1] + 1))
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
