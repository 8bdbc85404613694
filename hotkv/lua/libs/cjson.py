"""cjson for scripts: lua-cjson's encode / decode as Redis ships it.

Owns the JSON text a script gets and the Lua values it decodes to:
numbers as %.14g (Lua's tostring), '/' escaped, control bytes as \\u00XX,
other bytes passed through unchanged; a table is an array when every key
is a positive integer (lua-cjson's sparse-array rule: refused when the
largest index is over 10 and over twice the count), else an object;
nesting beyond encode_max_depth / decode_max_depth (1000 unless the
configuration functions, ``setting``, kept per Lua state in ``Config``,
say otherwise) is refused, and so is a level lua-cjson's lua_checkstack
would refuse (Lua's LUAI_MAXCSTACK: 7,998 arrays or 3,999 objects deep,
``_too_deep`` / ``_encode`` count the slots); NaN and Inf are refused
unless the settings say otherwise.  Neither direction recurses in Python:
``_encode`` keeps its own stack, and a document nested deeper than
``_SHALLOW`` is parsed by ``_loads_deep`` instead of json.loads (a second
path: tests/test_cjson_depth.py drives both, every depth to 2,000); ``null``
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
import json.decoder
import json.scanner
import math
import re

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
# Lua 5.1's LUAI_MAXCSTACK: the stack slots a C function (lua-cjson's
# encode / decode) may hold; it limits their nesting whatever the max_depth.
_LUAI_MAXCSTACK = 8000
# Documents nested at most this deep are parsed by json.loads (recursive, in
# C); deeper ones by _loads_deep.
_SHALLOW = 200
_WS = re.compile(r"[ \t\n\r]*").match
_NUMBER = json.scanner.NUMBER_RE.match
_scanstring = json.decoder.scanstring


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
        _encode(v, null, rawequal, out, cfg)
        return True, "".join(out).encode("utf-8", "surrogateescape")
    except JsonError as e:
        return False, str(e).encode()


def _scalar(v, null, rawequal, out, cfg):
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
    elif rawequal(v, null):
        out.append("null")
    else:
        raise JsonError("Cannot serialise %s: type not supported" % lua51.lua_type(v))


def _array_items(v, maxi):
    """(text before the value, value) of each element, in index order."""
    for i in range(1, maxi + 1):
        yield ("," if i > 1 else ""), v[i]


def _object_items(items):
    """The same for an object's members; a bad key is refused when reached
    (after the members before it, as lua-cjson walks the table)."""
    first = True
    for k, val in items:
        sep = "" if first else ","
        first = False
        if type(k) is bytes:
            yield sep + json_str(k) + ":", val
        elif type(k) in (int, float) and not isinstance(k, bool):
            yield sep + '"' + lua_num_str(k) + '":', val
        else:
            raise JsonError("Cannot serialise %s: table key must be a number or "
                            "string" % lua51.lua_type(k))


def _open_table(v, out):
    """Start a table: (its members' iterator, closing text, its Lua stack
    slots while a member is encoded: the value, plus the key in an object)."""
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
        return _array_items(v, maxi), "]", 1
    out.append("{")
    return _object_items(items), "}", 2


def _encode(v, null, rawequal, out, cfg):
    """Without recursion (a depth of thousands is legal).  A table at depth
    d is refused past encode_max_depth or when lua-cjson's lua_checkstack(3)
    would fail: the C function may hold LUAI_MAXCSTACK slots -- its argument,
    then one per enclosing array and two per enclosing object."""
    stack = []             # [members iterator, closing text, slots]
    used = 1
    while True:
        if lua51.lua_type(v) == "table":
            depth = len(stack) + 1
            if depth > cfg.encode_max_depth or used + 3 > _LUAI_MAXCSTACK:
                raise JsonError("Cannot serialise, excessive nesting (%d)" % depth)
            members, close, slots = _open_table(v, out)
            stack.append((members, close, slots))
            used += slots
        else:
            _scalar(v, null, rawequal, out, cfg)
        while stack:
            members, close, slots = stack[-1]
            nxt = next(members, None)
            if nxt is not None:
                prefix, v = nxt
                if prefix:
                    out.append(prefix)
                break
            out.append(close)
            stack.pop()
            used -= slots
        else:
            return


def _reject_constant(name):
    raise ValueError("invalid constant " + name)


def _too_deep(doc: str, limit: int):
    """((depth, index) of the first '[' or '{' lua-cjson refuses, or None;
    the deepest nesting).  Refused: deeper than decode_max_depth, or when
    lua_checkstack would fail (an array needs 2 free slots, an object 3, of
    LUAI_MAXCSTACK: the argument takes one, each enclosing array one (its
    table), each enclosing object two (its table and the key))."""
    depth = deepest = 0
    used = 1
    slots = []
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
        elif ch == "[" or ch == "{":
            depth += 1
            need = 2 if ch == "[" else 3
            if depth > limit or used + need > _LUAI_MAXCSTACK:
                return (depth, i), max(deepest, depth)
            deepest = max(deepest, depth)
            slots.append(need - 1)
            used += need - 1
        elif (ch == "]" or ch == "}") and slots:
            depth -= 1
            used -= slots.pop()
    return None, deepest


def decode(s, null, new_table, cfg: Config = _DEFAULT):
    """(True, Lua value) or (False, lua-cjson's message); new_table() makes
    an empty Lua table."""
    if type(s) in (int, float):
        s = lua_num_str(s).encode()
    if type(s) is not bytes:
        return False, b"bad argument #1 to 'decode' (string expected)"
    doc = s.decode("utf-8", "surrogateescape")
    deep, deepest = _too_deep(doc, cfg.decode_max_depth)
    value = None
    # Too deep: only a syntax error before the refused bracket comes first.
    text = doc if deep is None else doc[:deep[1]]
    try:
        if deepest <= _SHALLOW:
            value = _decode(json.loads(text, parse_constant=_reject_constant), null, new_table)
        else:
            value = _loads_deep(text, null, new_table)
    except ValueError as e:
        # lua-cjson's wording; Python's parser finds the same position.
        pos = getattr(e, "pos", 0) or 0
        if deep is None or pos < deep[1]:
            found = b"T_END" if pos >= len(doc.rstrip()) else b"invalid token"
            return False, b"Expected value but found %s at character %d" % (found, pos + 1)
    if deep is not None:
        return False, (b"Found too many nested data structures (%d) at character %d"
                       % (deep[0], deep[1] + 1))
    return True, value


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


def _syntax(pos: int):
    e = ValueError("syntax error")
    e.pos = pos
    return e


def _key(doc: str, pos: int):
    """An object key and its ':' at pos: (key bytes, where its value starts)."""
    if not doc.startswith('"', pos):
        raise _syntax(pos)
    key, pos = _scanstring(doc, pos + 1, True)
    pos = _WS(doc, pos).end()
    if not doc.startswith(":", pos):
        raise _syntax(pos)
    return key.encode("utf-8", "surrogateescape"), _WS(doc, pos + 1).end()


def _scalar_at(doc: str, pos: int, null):
    """A string, number or literal at pos: (Lua value, end)."""
    ch = doc[pos:pos + 1]
    if ch == '"':
        text, pos = _scanstring(doc, pos + 1, True)
        return text.encode("utf-8", "surrogateescape"), pos
    for word, value in (("null", null), ("true", True), ("false", False)):
        if doc.startswith(word, pos):
            return value, pos + len(word)
    m = _NUMBER(doc, pos)
    if m is None:
        raise _syntax(pos)
    integer, frac, exp = m.groups()
    if frac or exp:
        return float(integer + (frac or "") + (exp or "")), m.end()
    n = int(integer)
    return (float(n) if abs(n) >= 1 << 53 else n), m.end()


def _loads_deep(doc: str, null, new_table):
    """json.loads + _decode without recursion, for documents nested deeper
    than Python's recursion limit allows (the same grammar and values:
    decode's second path, driven by tests/test_cjson_depth.py across the
    switch).  ValueError with ``pos`` on bad input."""
    stack = []            # [table, is an array, next index or key]
    pos = _WS(doc, 0).end()
    while True:
        ch = doc[pos:pos + 1]
        if ch == "[" or ch == "{":
            table = new_table()
            pos = _WS(doc, pos + 1).end()
            if doc.startswith("]" if ch == "[" else "}", pos):
                value, pos = table, pos + 1
            elif ch == "[":
                stack.append([table, True, 1])
                continue
            else:
                key, pos = _key(doc, pos)
                stack.append([table, False, key])
                continue
        else:
            value, pos = _scalar_at(doc, pos, null)
        while True:          # hand the value to its container, closing those that end
            pos = _WS(doc, pos).end()
            if not stack:
                if pos != len(doc):
                    raise _syntax(pos)
                return value
            frame = stack[-1]
            table, is_array, slot = frame
            table[slot] = value
            ch = doc[pos:pos + 1]
            if ch == ",":
                pos = _WS(doc, pos + 1).end()
                if is_array:
                    frame[2] = slot + 1
                else:
                    frame[2], pos = _key(doc, pos)
                break
            if ch != ("]" if is_array else "}"):
                raise _syntax(pos)
            pos += 1
            stack.pop()
            value = table


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
