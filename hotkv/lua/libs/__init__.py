"""The Lua libraries Valkey gives scripts, written in Python: ``cjson``
(lua-cjson), ``cmsgpack`` (lua-cmsgpack), ``struct`` (Lua's struct library
as Redis ships it), ``bit`` (LuaBitOp).  The prelude builds their Lua
tables from the callables the engine makes of these functions.

Owns the error carrier they share: a library function raises ``LibError``
(message) -- or returns (False, message) through ``lib`` -- and the Lua
error handler prefixes the user's position, as luaL_error does.

Invariants: a library function is a Python callable (a C function to Lua),
so a user's ``return cjson.decode(x)`` keeps its frame for the error
position; it raises nothing but ``LibError``; no library knows the engine,
the server or a client -- what it needs of the Lua state (a new table, the
cjson.null sentinel, rawequal) is passed in.
"""

from __future__ import annotations


class LibError(Exception):
    """A library function's error message (cjson, bit, cmsgpack, struct):
    the Lua error handler prefixes the user's position, as luaL_error does."""

    def __init__(self, message: bytes):
        super().__init__(message)
        self.message = message


def lib(fn, multi: bool = False):
    """A Python implementation of a Lua library function: fn returns
    (True, value) or (False, message); multi: (True, n, values...)."""
    def call(*args):
        res = fn(*args)
        if not res[0]:
            raise LibError(res[1])
        if multi:
            return res[2:2 + res[1]] if res[1] != 1 else res[2]
        return res[1]
    return call
