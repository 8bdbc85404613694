"""The Python side of the Lua sandbox (SECURITY.md): what makes the Python
callables a script can reach safe to hand to Lua.

Owns ``guard`` (the decorator every API callable goes through), ``unwrap``
(what the prelude's error handler asks about a value lupa handed it),
``no_attributes`` (lupa's attribute filter), and the small adapters of the
libraries' callables (``one_arg``, ``json_setting``, ``ldb_addr``).  The Lua
closures around these callables are made in ``prelude.lua``.

Invariants:
* no Python exception ever enters the Lua state from a guarded callable:
  what it raises comes back as ``FAIL, kind, error`` -- kind 1 an error
  value to raise as it is (an error table), 2 a library's message -- and
  the prelude's wrapper raises that as a Lua value.  lupa would hand Lua
  the exception object (a traceback full of Lua references); freed by a
  later collection after its runtime was replaced, one crashed the process;
* no attribute of any Python object is reachable from Lua;
* an error of ours (not a library's nor a Lua error) is logged and reaches
  the script as a text, never as the exception object.
"""

from __future__ import annotations

import logging

from lupa import lua51

from .libs import LibError, cjson

log = logging.getLogger("hotkv")


def ldb_addr(v) -> bytes:
    """How the debugger names one of the API's Python callables (a C
    function to Valkey's Lua): "function@0x..."."""
    return b"function@0x%x" % id(v)


def json_setting(cfg, name: str, *args):
    """cjson's configuration functions, in lib(multi=True)'s shape."""
    ok, res = cjson.setting(cfg, name, *args)
    if not ok:
        return False, res
    return (True, len(res)) + tuple(res)


def no_attributes(obj, name, setting):
    # Scripts get Python callables; none of their attributes (no escape hatch).
    raise AttributeError("access denied")


def guard(fail):
    """A decorator for the Python callables a script can reach: what the
    callable raises comes back as ``fail, kind, error`` -- kind 1 an error
    value to raise as it is (an error table), 2 a library's message (the
    prelude positions it at the user's call) -- so no exception, and no
    traceback holding Lua references, ever enters the Lua state.  lupa
    would hand Lua the exception object and keep it as the runtime's last
    error; freed by a later collection, after its runtime was replaced,
    it crashed the process."""
    def guard(fn):
        def call(*args):
            try:
                return fn(*args)
            except LibError as e:
                return fail, 2, e.message
            except lua51.LuaError as e:
                if e.args and lua51.lua_type(e.args[0]) == "table":
                    return fail, 1, e.args[0]
                return failure(fail, e)
            except Exception as e:
                return failure(fail, e)
        return call
    return guard


def one_arg(name: str, fn):
    """cjson.encode / decode: exactly one argument, as lua-cjson checks."""
    message = b"bad argument #1 to '%s' (expected 1 argument)" % name.encode()

    def call(*args):
        if len(args) != 1:
            return False, message
        return fn(args[0])
    return call


def failure(fail, e):
    log.error("scripting: a server function failed: %r", e)
    return fail, 1, ("%s: %s" % (type(e).__name__, e)).encode("utf-8", "surrogateescape")


def unwrap(err):
    """What a Python callback raised (lupa hands Lua the exception; the
    prelude's host wrappers turn it into a Lua value at once): an error
    table, (message, True) for a library error, the text of any other
    exception (a fault of ours: never the object), None for a value that
    is no Python exception."""
    if isinstance(err, LibError):
        return err.message, True
    if isinstance(err, lua51.LuaError) and err.args and lua51.lua_type(err.args[0]) == "table":
        return err.args[0]
    if isinstance(err, BaseException):
        log.error("scripting: a server function failed: %r", err)
        return ("%s: %s" % (type(err).__name__, err)).encode("utf-8", "surrogateescape")
    return None
