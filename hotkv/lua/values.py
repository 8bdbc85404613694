"""Lua 5.1 value semantics in Python, as the scripting engine and its
libraries see lupa's values (strings as bytes, numbers as int or float).

Owns: number -> string (``lua_num_str``, Lua's %.14g), string -> number
(``lua_tonumber``, as lua_tonumber coerces), Lua's type names
(``lua_type_name``), and C's ``(long long)`` cast of a Lua number
(``truncate``), which both a script's reply and struct's integers use.

Invariant: pure functions of their argument; none touches a Lua state or
the server.
"""

from __future__ import annotations

import math

from lupa import lua51

# C's (long long) cast of a double on x86: out of range and NaN give INT64_MIN.
INT64_MIN = -(1 << 63)


def truncate(n) -> int:
    if type(n) is int:
        if -(1 << 63) <= n < (1 << 63):
            return n
        return INT64_MIN
    if n != n or n >= 9.2233720368547758e18 or n < -9.2233720368547758e18:
        return INT64_MIN
    return int(n)


def lua_type_name(v) -> str:
    if v is None:
        return "nil"
    if type(v) is bool:
        return "boolean"
    if type(v) is bytes:
        return "string"
    if type(v) is int or type(v) is float:
        return "number"
    if type(v).__name__ in ("_LuaThread", "_LuaCoroutineFunction"):   # (lupa's names)
        return "thread"
    t = lua51.lua_type(v)
    return t.decode() if isinstance(t, bytes) else (t or "userdata")


def lua_tonumber(v):
    if type(v) in (int, float) and type(v) is not bool:
        return v
    if type(v) is bytes:
        s = v.strip()
        try:
            return int(s, 16) if s.lower().startswith(b"0x") else float(s)
        except ValueError:
            pass
    raise TypeError("not a number")


def is_lua_number(v) -> bool:
    try:
        lua_tonumber(v)
        return True
    except (TypeError, ValueError):
        return False


def lua_num_str(n) -> str:
    """Lua 5.1's number-to-string (%.14g)."""
    if type(n) is int and -(10 ** 14) < n < 10 ** 14:
        return str(n)
    f = float(n)
    if f != f:
        return "nan" if math.copysign(1, f) > 0 else "-nan"
    if f in (math.inf, -math.inf):
        return "inf" if f > 0 else "-inf"
    return "%.14g" % f
