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
``_parse`` / ``_encode`` count the slots); NaN and Inf are refused
unless the settings say otherwise.  Neither direction recurses in Python:
``_encode`` keeps its own stack.  Decoding has a fast path: json.loads, for
a document nested at most ``_SHALLOW`` deep that it reads as lua-cjson does;
every other document -- every error, and what only lua-cjson reads (NUL,
strtod's numbers, deep nesting) -- goes to ``_parse``, lua-cjson's lexer
and parser, which gives its exact messages (tests/test_cjson_errors.py
drives both against valkey-server; tests/test_cjson_depth.py every depth
to 2,000).  ``null`` decodes to the cjson.null sentinel and numbers to Lua
numbers (doubles).  Error texts are lua-cjson's.  Object key order is
stock Lua 5.1's table order, not Valkey's (its Lua hashes strings with
murmur32).

Invariant: ``encode`` and ``decode`` return (True, value) or (False,
message), never raise; they see the Lua state only through what they are
passed (the null sentinel, rawequal, a table constructor).
"""

from __future__ import annotations

import json
import math
import re

from lupa import lua51

from ..values import lua_num_str


class JsonError(Exception):
    pass


class Config:
    """One Lua state's cjson settings (lua-cjson keeps them per state and
    they outlive the script that set them): the nesting limits, what NaN /
    Inf encode to (refused, their %.14g text, or null), the sparse-array
    rule (convert to an object or refuse; ratio; safe size) and the number
    precision."""
    __slots__ = ("encode_max_depth", "decode_max_depth", "invalid_numbers", "keep_buffer",
                 "decode_invalid", "sparse_convert", "sparse_ratio", "sparse_safe", "precision")

    def __init__(self):
        self.encode_max_depth = 1000
        self.decode_max_depth = 1000
        self.invalid_numbers = False      # False, True or b"null"
        self.keep_buffer = True
        self.decode_invalid = True
        self.sparse_convert = False
        self.sparse_ratio = 2
        self.sparse_safe = 10
        self.precision = 14


_DEFAULT = Config()
_INT_MAX = 2147483647
_INT_MIN = -2147483648
# Lua 5.1's LUAI_MAXCSTACK: the stack slots a C function (lua-cjson's
# encode / decode) may hold; it limits their nesting whatever the max_depth.
_LUAI_MAXCSTACK = 8000
# Documents nested at most this deep are parsed by json.loads (recursive, in
# C); deeper ones by _parse.
_SHALLOW = 200
# name: (the number of arguments, then per argument its attribute and kind:
# an int range, or the options of json_enum_option)
_SETTINGS = {
    "encode_sparse_array": (("sparse_convert", None), ("sparse_ratio", (0, _INT_MAX)),
                            ("sparse_safe", (0, _INT_MAX))),
    "encode_max_depth": (("encode_max_depth", (1, _INT_MAX)),),
    "decode_max_depth": (("decode_max_depth", (1, _INT_MAX)),),
    "encode_number_precision": (("precision", (1, 14)),),
    "encode_keep_buffer": (("keep_buffer", None),),
    "encode_invalid_numbers": (("invalid_numbers", (b"off", b"on", b"null")),),
    "decode_invalid_numbers": (("decode_invalid", None),),
}


def setting(cfg: Config, name: str, *args):
    """cjson.<name>(...): lua-cjson's configuration functions (json_arg_init,
    json_integer_option, json_enum_option); (True, values tuple) or (False,
    message)."""
    fname = name.encode()
    spec = _SETTINGS.get(name)
    if spec is None:
        return True, ()
    if len(args) > len(spec):
        return False, (b"bad argument #%d to '%s' (found too many arguments)"
                       % (len(spec) + 1, fname))
    out = []
    for i, (attr, kind) in enumerate(spec):
        arg = args[i] if i < len(args) else None
        if type(kind) is tuple and type(kind[0]) is int:
            if arg is not None:
                n = _lua_tonumber(arg)
                if n is None:
                    return False, (b"bad argument #%d to '%s' (number expected, got %s)"
                                   % (i + 1, fname, _lua_type(arg)))
                n = _c_int(n)
                if not kind[0] <= n <= kind[1]:
                    # (lua-cjson names argument 1 whichever it is)
                    return False, (b"bad argument #1 to '%s' (expected integer between %d and "
                                   b"%d)" % (fname, kind[0], kind[1]))
                setattr(cfg, attr, n)
            out.append(getattr(cfg, attr))
            continue
        options = kind or (b"off", b"on")
        if arg is not None:
            if arg is True or arg is False:
                setattr(cfg, attr, arg)
            else:
                if type(arg) in (int, float):
                    arg = lua_num_str(arg).encode()
                if type(arg) is not bytes:
                    return False, (b"bad argument #%d to '%s' (string expected, got %s)"
                                   % (i + 1, fname, _lua_type(arg)))
                if arg not in options:
                    return False, (b"bad argument #%d to '%s' (invalid option '%s')"
                                   % (i + 1, fname, arg))
                setattr(cfg, attr, arg == b"on" if arg != b"null" else b"null")
        out.append(getattr(cfg, attr))
    return True, tuple(out)


_LUA_NUMBER = re.compile(rb"[ \t\n\v\f\r]*([+-]?(?:0[xX][0-9a-fA-F]+|(?:[0-9]+(?:\.[0-9]*)?|"
                         rb"\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?"
                         rb"|[nN][aA][nN]))[ \t\n\v\f\r]*\Z").match


def _lua_tonumber(v):
    """A number, or a string Lua 5.1 reads as one (luaO_str2d); else None."""
    if type(v) in (int, float):
        return v
    if type(v) is bytes:
        m = _LUA_NUMBER(v)
        if m is not None:
            text = m.group(1)
            if text.lstrip(b"+-")[:2] in (b"0x", b"0X"):
                return int(text, 16)
            return _strtod(text)
    return None


def _c_int(n) -> int:
    """lua_tointeger's ptrdiff_t, then C's int, as luaL_checkinteger into an int."""
    try:
        v = int(n)
    except (ValueError, OverflowError):
        v = -1 << 63
    if not -(1 << 63) <= v < 1 << 63:
        v = -1 << 63
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v > _INT_MAX else v


def _lua_type(v) -> bytes:
    if v is None:
        return b"nil"
    if type(v) is bytes:
        return b"string"
    if type(v) is bool:
        return b"boolean"
    if type(v) in (int, float):
        return b"number"
    if type(v).__name__ == "_LuaCoroutineFunction":
        return b"thread"         # lupa's view of a coroutine not yet resumed
    t = lua51.lua_type(v)
    return (t.encode() if isinstance(t, str) else t) or b"userdata"


def encode(v, null, rawequal, cfg: Config = _DEFAULT, real=None):
    """(True, JSON bytes) or (False, lua-cjson's message).  real: the table
    a read-only proxy shows (the prelude's library tables are empty proxies;
    lua-cjson encodes what they hold)."""
    try:
        out: list = []
        _encode(v, null, rawequal, out, cfg, real)
        return True, "".join(out).encode("utf-8", "surrogateescape")
    except JsonError as e:
        return False, str(e).encode()


def _number(v, cfg) -> str:
    """json_append_number: NaN / Inf by encode_invalid_numbers, then %.<precision>g."""
    if type(v) is float and (v != v or v in (math.inf, -math.inf)):
        if cfg.invalid_numbers is False:
            raise JsonError("Cannot serialise number: must not be NaN or Inf")
        if cfg.invalid_numbers == b"null":
            return "null"
        if v != v:
            return "nan"      # whatever its sign bit
    if cfg.precision == 14:
        return lua_num_str(v)
    return "%.*g" % (cfg.precision, float(v))


def _scalar(v, null, rawequal, out, cfg):
    t = type(v)
    if v is None:
        out.append("null")
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int or t is float:
        out.append(_number(v, cfg))
    elif t is bytes:
        out.append(json_str(v))
    elif rawequal(v, null):
        out.append("null")
    else:
        raise JsonError("Cannot serialise %s: type not supported" % _lua_type(v).decode())


def _array_items(v, maxi):
    """(text before the value, value) of each element, in index order."""
    for i in range(1, maxi + 1):
        yield ("," if i > 1 else ""), v[i]


def _object_items(items, cfg):
    """The same for an object's members; a bad key is refused when reached
    (after the members before it, as lua-cjson walks the table)."""
    first = True
    for k, val in items:
        sep = "" if first else ","
        first = False
        if type(k) is bytes:
            yield sep + json_str(k) + ":", val
        elif type(k) in (int, float) and not isinstance(k, bool):
            yield sep + '"' + _number(k, cfg) + '":', val
        else:
            raise JsonError("Cannot serialise %s: table key must be a number or "
                            "string" % _lua_type(k).decode())


def _array_length(items, cfg) -> int:
    """lua_array_length: the largest index when every key is a positive
    integer (C's int: an infinite or huge one wraps to INT_MIN), -1 for an
    object; a too sparse array is refused or made an object."""
    top = 0
    for k, _ in items:
        if type(k) not in (int, float) or isinstance(k, bool) or not k or k < 1 \
                or (k != math.inf and k != int(k)):
            return -1
        if k > top:
            top = int(k) if k <= _INT_MAX else _INT_MIN
    ratio = cfg.sparse_ratio
    if ratio > 0 and top > len(items) * ratio and top > cfg.sparse_safe:
        if not cfg.sparse_convert:
            raise JsonError("Cannot serialise table: excessively sparse array")
        return -1
    return top


def _open_table(v, out, cfg, real=None):
    """Start a table: (its members' iterator, closing text, its Lua stack
    slots while a member is encoded: the value, plus the key in an object)."""
    items = list(v.items())
    if not items and real is not None:
        shown = real(v)
        if shown is not None:
            v = shown
            items = list(v.items())
    maxi = _array_length(items, cfg)
    if maxi > 0:
        out.append("[")
        return _array_items(v, maxi), "]", 1
    out.append("{")
    return _object_items(items, cfg), "}", 2


def _encode(v, null, rawequal, out, cfg, real=None):
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
            members, close, slots = _open_table(v, out, cfg, real)
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


# ----------------------------------------------------------------------
# decode
# ----------------------------------------------------------------------
#
# Two paths.  The fast one: json.loads, for a document it reads exactly as
# lua-cjson does -- nested at most _SHALLOW (and decode_max_depth) deep,
# with no lone surrogate escape and no bare -0 (json.loads would take them
# differently), valid (else it raises).  Everything else -- every error,
# NUL bytes, strtod's extra numbers (01, +1, 0x10, 1., inf, nan), deep
# documents -- goes to _parse, lua-cjson's own lexer and parser (json_next_
# token, json_parse_*_context) without recursion, which makes the value or
# the exact message.  tests/test_cjson_errors.py drives both over generated
# documents against valkey-server; tests/test_cjson_depth.py every depth.

def decode(s, null, new_table, cfg: Config = _DEFAULT):
    """(True, Lua value) or (False, lua-cjson's message); new_table() makes
    an empty Lua table."""
    if type(s) in (int, float):
        s = lua_num_str(s).encode()
    if type(s) is not bytes:
        return False, b"bad argument #1 to 'decode' (string expected, got %s)" % _lua_type(s)
    if len(s) >= 2 and (not s[0] or not s[1]):
        return False, b"JSON parser does not support UTF-16 or UTF-32"
    limit = min(cfg.decode_max_depth, _SHALLOW)
    if ((s.count(b"[") + s.count(b"{") <= limit or _deepest(s) <= limit)
            and not (b"\\u" in s and _lone_surrogate(s))
            and not (b"-0" in s and _MINUS_ZERO(s))):
        try:
            doc = s.decode("utf-8", "surrogateescape")
            return True, _decode(json.loads(doc, parse_constant=_reject_constant), null,
                                 new_table)
        except (ValueError, RecursionError):
            pass      # an error, or a document only lua-cjson reads: the exact path
    return _parse(s, cfg, null, new_table)


# json.loads takes a bare -0 as the integer 0; strtod gives -0.0.  (Where a
# value starts: not the -0 of a date inside a string, which would cost the
# slow path for nothing.)
_MINUS_ZERO = re.compile(rb"(?:^|[\[:,])[ \t\n\r]*-0(?![.eE0-9])").search
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]").search
_ESCAPE = re.compile(rb"\\(?:u([dD][89a-fA-F][0-9a-fA-F]{2}))?")


def _lone_surrogate(s: bytes) -> bool:
    """A \\u escape of a surrogate that is not a high one directly followed
    by a low one (json.loads keeps it, lua-cjson refuses it)."""
    if _SURROGATE(s) is None:
        return False
    pos = 0
    n = len(s)
    while True:
        m = _ESCAPE.search(s, pos)
        if m is None:
            return False
        unit = m.group(1)
        if unit is None:
            pos = m.end() + 1          # an escaped character: skip it
            continue
        if unit[1] in b"cdefCDEF":
            return True                # a low one first
        pos = m.end()
        low = _ESCAPE.match(s, pos)
        if low is None or low.group(1) is None or low.group(1)[1] not in b"cdefCDEF":
            return True
        pos = low.end()
        if pos > n:
            return False


def _deepest(s: bytes) -> int:
    """The deepest nesting of a document (strings skipped, as JSON's)."""
    depth = deepest = 0
    for m in _BRACKETS(s):
        ch = m.group()
        if ch == b"[" or ch == b"{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch == b"]" or ch == b"}":
            depth -= 1
    return deepest


_BRACKETS = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.S).finditer


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


# lua-cjson's token types (json_token_type_t), by the names its messages use.
(T_OBJ_BEGIN, T_OBJ_END, T_ARR_BEGIN, T_ARR_END, T_STRING, T_NUMBER, T_BOOLEAN, T_NULL,
 T_COLON, T_COMMA, T_END, T_WHITESPACE, T_ERROR) = range(13)
_TOKEN_NAMES = (b"T_OBJ_BEGIN", b"T_OBJ_END", b"T_ARR_BEGIN", b"T_ARR_END", b"T_STRING",
                b"T_NUMBER", b"T_BOOLEAN", b"T_NULL", b"T_COLON", b"T_COMMA", b"T_END",
                b"T_WHITESPACE", b"T_ERROR")
_SINGLE = {0x7B: T_OBJ_BEGIN, 0x7D: T_OBJ_END, 0x5B: T_ARR_BEGIN, 0x5D: T_ARR_END,
           0x2C: T_COMMA, 0x3A: T_COLON}
_NUMBER_START = frozenset(b"-0123456789")
_MAYBE_INVALID = frozenset(b"+iInN")     # strtod's, with decode_invalid_numbers on
_ESCAPES = {0x22: b'"', 0x5C: b"\\", 0x2F: b"/", 0x62: b"\b", 0x74: b"\t", 0x6E: b"\n",
            0x66: b"\f", 0x72: b"\r"}
_SKIP_WS = re.compile(rb"[ \t\n\r]*").match
_PLAIN = re.compile(rb'[^"\\]*').match
_HEX4 = re.compile(rb"[0-9a-fA-F]{4}").match
# glibc strtod in the C locale (after the lexer's whitespace): a sign, then
# inf[inity], nan[(chars)], a hex float or a decimal one.
_STRTOD = re.compile(rb"""[+-]?(?:
      (?P<inf>[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)
    | (?P<nan>[nN][aA][nN](?:\([0-9A-Za-z_]*\))?)
    | 0[xX](?P<hex>(?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)
    | (?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?
    )""", re.X).match


class _Error(Exception):
    """json_throw_parse_error / json_decode_descend's message."""


def _strtod(text: bytes) -> float:
    neg = text[:1] == b"-"
    body = text.lstrip(b"+-").lower()
    if body.startswith(b"inf"):
        return -math.inf if neg else math.inf
    if body.startswith(b"nan"):
        return -math.nan if neg else math.nan
    if body.startswith(b"0x"):
        try:
            v = float.fromhex(body.decode())
        except OverflowError:
            v = math.inf
        return -v if neg else v
    return float(text)


def _is_invalid_number(s: bytes, pos: int) -> bool:
    """json_is_invalid_number: what strtod reads but strict JSON does not."""
    ch = s[pos:pos + 1]
    if ch == b"+":
        return True
    if ch == b"-":
        pos += 1
        ch = s[pos:pos + 1]
    if ch == b"0":
        ch2 = s[pos + 1:pos + 2]
        return ch2 in (b"x", b"X") or (ch2 != b"" and ch2 in b"0123456789")
    if ch == b"" or ch[0] <= 0x39 or ch[0] >= 0x80:     # C's signed char <= '9'
        return False
    return s[pos:pos + 3].lower() in (b"inf", b"nan")


def _string(s: bytes, pos: int):
    """json_next_string_token from the opening quote at pos: (bytes, end),
    or _Error's (message, index)."""
    parts = []
    pos += 1
    n = len(s)
    while True:
        end = _PLAIN(s, pos).end()
        if end > pos:
            parts.append(s[pos:end])
            pos = end
        if pos >= n:
            raise _Error(b"unexpected end of string", pos)
        if s[pos] == 0x22:
            return b"".join(parts), pos + 1
        # a backslash
        esc = s[pos + 1] if pos + 1 < n else 0
        if esc == 0x75:
            text, pos = _unicode_escape(s, pos)
            parts.append(text)
            continue
        text = _ESCAPES.get(esc)
        if text is None:
            raise _Error(b"invalid escape code", pos)
        parts.append(text)
        pos += 2


def _unicode_escape(s: bytes, pos: int):
    """json_append_unicode_escape at the backslash: (UTF-8 bytes, end)."""
    m = _HEX4(s, pos + 2)
    if m is None:
        raise _Error(b"invalid unicode escape code", pos)
    cp = int(m.group(), 16)
    end = pos + 6
    if cp & 0xF800 == 0xD800:
        low = _HEX4(s, pos + 8) if s[end:end + 2] == b"\\u" else None
        if cp & 0x400 or low is None:
            raise _Error(b"invalid unicode escape code", pos)
        lo = int(low.group(), 16)
        if lo & 0xFC00 != 0xDC00:
            raise _Error(b"invalid unicode escape code", pos)
        cp = (((cp & 0x3FF) << 10) | (lo & 0x3FF)) + 0x10000
        end = pos + 12
    return chr(cp).encode("utf-8"), end


def _token(s: bytes, pos: int, cfg: Config, null):
    """json_next_token: (type, value, index, end); T_ERROR's value is its
    message.  s ends where the C string would (at the first NUL)."""
    pos = _SKIP_WS(s, pos).end()
    if pos >= len(s):
        return T_END, None, pos, pos
    ch = s[pos]
    single = _SINGLE.get(ch)
    if single is not None:
        return single, None, pos, pos + 1
    if ch == 0x22:
        try:
            text, end = _string(s, pos)
        except _Error as e:
            return T_ERROR, e.args[0], e.args[1], e.args[1]
        return T_STRING, text, pos, end
    if ch in _NUMBER_START:
        if not cfg.decode_invalid and _is_invalid_number(s, pos):
            return T_ERROR, b"invalid number", pos, pos
        return _number_token(s, pos)
    if s.startswith(b"true", pos):
        return T_BOOLEAN, True, pos, pos + 4
    if s.startswith(b"false", pos):
        return T_BOOLEAN, False, pos, pos + 5
    if s.startswith(b"null", pos):
        return T_NULL, null, pos, pos + 4
    if ch in _MAYBE_INVALID and cfg.decode_invalid and _is_invalid_number(s, pos):
        return _number_token(s, pos)
    return T_ERROR, b"invalid token", pos, pos


def _number_token(s: bytes, pos: int):
    m = _STRTOD(s, pos)
    if m is None:
        return T_ERROR, b"invalid number", pos, pos
    return T_NUMBER, _strtod(m.group()), pos, m.end()


def _parse(s: bytes, cfg: Config, null, new_table):
    """lua-cjson's json_decode, its recursion kept in a list: (True, value)
    or (False, message).  A '[' or '{' past decode_max_depth, or one
    lua_checkstack would refuse (an array needs 2 free slots, an object 3,
    of LUAI_MAXCSTACK: the argument takes one, each enclosing array one --
    its table --, each enclosing object two -- its table and the key), is
    refused where it stands, after any error before it."""
    nul = s.find(b"\0")
    if nul >= 0:
        s = s[:nul]
    limit = cfg.decode_max_depth
    stack = []            # [table, is an array, next index or key]
    used = 1
    try:
        typ, value, index, pos = _token(s, 0, cfg, null)
        while True:
            # json_process_value: the token starts a value
            if typ == T_ARR_BEGIN or typ == T_OBJ_BEGIN:
                is_array = typ == T_ARR_BEGIN
                depth = len(stack) + 1
                if depth > limit or used + (2 if is_array else 3) > _LUAI_MAXCSTACK:
                    return False, (b"Found too many nested data structures (%d) at character %d"
                                   % (depth, pos))
                table = new_table()
                typ, value, index, pos = _token(s, pos, cfg, null)
                if typ == (T_ARR_END if is_array else T_OBJ_END):
                    value = table
                elif is_array:
                    stack.append([table, True, 1])
                    used += 1
                    continue
                else:
                    key, pos = _member(s, typ, value, index, pos, cfg, null)
                    stack.append([table, False, key])
                    used += 2
                    typ, value, index, pos = _token(s, pos, cfg, null)
                    continue
            elif not T_STRING <= typ <= T_NULL:
                raise _Error(b"value", typ, value, index)
            # hand the value to its container, closing those that end
            while True:
                typ, value2, index, pos = _token(s, pos, cfg, null)
                if not stack:
                    if typ != T_END:
                        raise _Error(b"the end", typ, value2, index)
                    return True, value
                frame = stack[-1]
                table, is_array, slot = frame
                table[slot] = value
                if typ == (T_ARR_END if is_array else T_OBJ_END):
                    stack.pop()
                    used -= 1 if is_array else 2
                    value = table
                    continue
                if typ != T_COMMA:
                    raise _Error(b"comma or array end" if is_array else b"comma or object end",
                                 typ, value2, index)
                typ, value, index, pos = _token(s, pos, cfg, null)
                if is_array:
                    frame[2] = slot + 1
                else:
                    frame[2], pos = _member(s, typ, value, index, pos, cfg, null)
                    typ, value, index, pos = _token(s, pos, cfg, null)
                break
    except _Error as e:
        expected, typ, value, index = e.args
        found = value if typ == T_ERROR else _TOKEN_NAMES[typ]
        return False, b"Expected %s but found %s at character %d" % (expected, found, index + 1)


def _member(s, typ, value, index, pos, cfg, null):
    """An object's key token and the colon after it: (key, position after
    the colon)."""
    if typ != T_STRING:
        raise _Error(b"object key string", typ, value, index)
    typ, value2, index, pos = _token(s, pos, cfg, null)
    if typ != T_COLON:
        raise _Error(b"colon", typ, value2, index)
    return value, pos


_JSON_ESC = {0x22: '\\"', 0x5C: "\\\\", 0x2F: "\\/", 0x08: "\\b", 0x0C: "\\f",
             0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


# The bytes json_str must escape or map back (control bytes, '"', '\\',
# '/', DEL and every non-ASCII byte): a string without any is its own text.
_NEEDS_WORK = re.compile(rb'[\x00-\x1f"\\/\x7f-\xff]')


def json_str(b: bytes, _plain=_NEEDS_WORK.search) -> str:
    if _plain(b) is None:
        return '"' + b.decode("ascii") + '"'
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
