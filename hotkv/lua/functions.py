"""Valkey functions: the library registry and the Lua state functions run in.

Owns ``Registry`` (one per server, ``server.functions``, made lazily by
``registry(server)``): the loaded libraries (name -> Library, names
case-sensitive, in load order) and their functions (lower-cased name ->
Function: FCALL's lookup and the collision check are case-insensitive, as
Valkey's dict), the per-engine counts FUNCTION STATS reports, and the
payload of FUNCTION DUMP / RESTORE (one RDB_OPCODE_FUNCTION2 record per
library, the RDB version, the CRC64 footer) -- the same records an RDB file
carries (hotkv/persistence/rdbfile.py reads and writes them through ``codes`` /
``load_codes``).

The functions run in ``FunctionEngine``, an ``hotkv.lua.engine.Engine`` of
their own (Valkey keeps them out of EVAL's Lua state too) whose prelude
runs in function mode (chunk ``@user_function``): a library's code runs
once, at FUNCTION LOAD, against the load API only
(``server.register_function``, ``server.log``, the version fields; 500 ms
at most, no limit when the AOF, an RDB file or a RESTORE loads it), and
each registered callback gets KEYS and ARGV as its two arguments.  DEBUG
RELOAD / LOADAOF delete the libraries with the data (hotkv.commands.debug)
and INFO memory reads ``memory_info``.  Flags are Valkey's script flags (``no-writes``,
``allow-oom``, ``allow-stale``, ``no-cluster``, ``allow-cross-slot-keys``);
a function always runs in flags mode (never EVAL's compat mode).

Invariants:
* a library is linked whole or not at all: every check of a load (its
  metadata, names, the functions it registered, collisions with the other
  libraries) runs before anything changes, and a failed REPLACE leaves the
  old library in place; RESTORE compiles the whole payload into a fresh
  context first and joins it only if every library fits;
* ``LibCtx.functions`` holds exactly the functions of ``LibCtx.libraries``.
"""

from __future__ import annotations

import time

from ..persistence.rdb import RDB_VERSION, crc64, verify
from ..protocol.resp import split_inline_args
from ..types.codec import RDBError, Reader, lzf_compression, put_string
from .engine import Engine

# Valkey's script flags, in its order (FUNCTION LIST prints them so); the
# prelude reports a function's flags as their 1-based positions here.
FLAG_NAMES = (b"no-writes", b"allow-oom", b"allow-stale", b"no-cluster",
              b"allow-cross-slot-keys")
# The engine's names for them (hotkv.lua.engine.SHEBANG_FLAGS' values).
FLAG_KEYS = ("no_writes", "allow_oom", "allow_stale", "no_cluster", "allow_cross_slot")

ENGINE_NAME = b"LUA"
LOAD_TIMEOUT_MS = 500
OP_FUNCTION2 = 0xF5
OP_FUNCTION_PRE_GA = 0xF6

_NAME_RULE = "can only contain letters, numbers, or underscores(_) and must be at least one " \
             "character long"
BUSY_FUNCTION = ("BUSY Valkey is busy running a script. You can only call FUNCTION KILL or "
                 "SHUTDOWN NOSAVE.")
_NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class FunctionError(Exception):
    """An error reply without its "ERR " (the commands add it)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def valid_name(name: bytes) -> bool:
    return bool(name) and all(c in _NAME_CHARS for c in name)


class Function:
    __slots__ = ("name", "func", "desc", "bits", "flags", "library")

    def __init__(self, name: bytes, func, desc, bits, library):
        self.name = name
        self.func = func            # the Lua callback
        self.desc = desc            # bytes, or None
        self.bits = tuple(bits)     # positions in FLAG_NAMES, ascending
        self.flags = frozenset(FLAG_KEYS[b] for b in self.bits)
        self.library = library

    def flag_names(self) -> list[bytes]:
        return [FLAG_NAMES[b] for b in self.bits]


class Library:
    __slots__ = ("name", "code", "functions")

    def __init__(self, name: bytes, code: bytes):
        self.name = name
        self.code = code            # the whole code, shebang included
        self.functions: dict[bytes, Function] = {}


class LibCtx:
    """A set of libraries and the index of their functions (Valkey's
    functionsLibCtx): the current one, or a RESTORE's before it is joined."""

    def __init__(self):
        self.libraries: dict[bytes, Library] = {}
        self.functions: dict[bytes, Function] = {}

    def link(self, lib: Library):
        for fn in lib.functions.values():
            self.functions[fn.name.lower()] = fn
        self.libraries[lib.name] = lib

    def unlink(self, lib: Library):
        for fn in lib.functions.values():
            self.functions.pop(fn.name.lower(), None)
        del self.libraries[lib.name]


def parse_metadata(code: bytes):
    """(engine, library name, position of the code after the shebang line)
    from ``#!<engine> name=<lib>``; raises FunctionError with Valkey's text."""
    if not code.startswith(b"#!"):
        raise FunctionError("Missing library metadata")
    end = code.find(b"\n")
    if end < 0:
        raise FunctionError("Invalid library metadata")
    parts = split_inline_args(code[:end])
    if not parts:
        raise FunctionError("Invalid library metadata")
    name = None
    for part in parts[1:]:
        if part[:5].lower() == b"name=":
            if name is not None:
                raise FunctionError(
                    "Invalid metadata value, name argument was given multiple times")
            name = part[5:]
            continue
        raise FunctionError("Invalid metadata value given: %s" % _text(part))
    if name is None:
        raise FunctionError("Library name was not given")
    return parts[0][2:], name, end


class FunctionEngine(Engine):
    """The Lua state of the functions: EVAL's engine in function mode."""

    CHUNK = b"@user_function"
    BUSY = BUSY_FUNCTION
    KILL = "FUNCTION KILL"

    def __init__(self, server):
        self.load_deadline = None     # monotonic time a running load must end by
        super().__init__(server)

    def funcname(self, name: bytes) -> str:
        return _text(name)

    label = funcname

    def _py_load_expired(self):
        return self.load_deadline is not None and time.monotonic() > self.load_deadline

    def compile_library(self, name: bytes, code: bytes, body: bytes, timeout_ms: int) -> Library:
        """Run a library's code (``body``: from its shebang's newline on, so
        line numbers count the shebang) and collect what it registered."""
        self.load_deadline = (time.monotonic() + timeout_ms / 1000) if timeout_ms else None
        try:
            res = self._load(body)
        finally:
            self.load_deadline = None
        ok, value, regs = (tuple(res) + (None, None, None))[:3]
        if ok is None:
            raise FunctionError("Error compiling function: " + (
                _text(value) if isinstance(value, bytes) else str(value)))
        if not ok:
            msg = self._errinfo(value)[0] if self.lua_type(value) == "table" else value
            if isinstance(msg, bytes):
                text = _text(msg)
            elif isinstance(msg, (int, float)) and not isinstance(msg, bool):
                text = "ERR %s" % msg
            else:
                text = "ERR unknown error"
            raise FunctionError("Error registering functions: " + text)
        lib = Library(name, code)
        n = len(regs)
        for i in range(1, n + 1):
            reg = regs[i]
            fname, func, desc, bits = reg[1], reg[2], reg[3], reg[4]
            if not valid_name(fname):
                raise FunctionError("Function names " + _NAME_RULE)
            if fname.lower() in lib.functions:
                # (Valkey 8.1.8 asserts on "f" and "F" in one library; we refuse.)
                raise FunctionError("Function already exists in the library")
            blist = [bits[j] - 1 for j in range(1, len(bits) + 1)]
            lib.functions[fname.lower()] = Function(
                fname, func, desc if isinstance(desc, bytes) else None, blist, lib)
        return lib


class Registry:
    def __init__(self, server):
        self.server = server
        self.engine = FunctionEngine(server)
        self.ctx = LibCtx()
        self.running_argv = None     # the FCALL running now (FUNCTION STATS)

    # ------------------------------------------------------------------
    @property
    def libraries(self) -> dict:
        return self.ctx.libraries

    def get(self, name: bytes):
        return self.ctx.functions.get(name.lower())

    def create(self, code: bytes, replace: bool, timeout_ms: int = LOAD_TIMEOUT_MS,
               ctx: LibCtx | None = None) -> bytes:
        """FUNCTION LOAD into ctx (the current one by default); returns the
        library's name.  Raises FunctionError; ctx is unchanged then."""
        if ctx is None:
            ctx = self.ctx
        engine_name, name, end = parse_metadata(code)
        if not valid_name(name):
            raise FunctionError("Library names " + _NAME_RULE)
        if engine_name.upper() != ENGINE_NAME:
            raise FunctionError("Engine '%s' not found" % _text(engine_name))
        old = ctx.libraries.get(name)
        if old is not None and not replace:
            raise FunctionError("Library '%s' already exists" % _text(name))
        if old is not None:
            ctx.unlink(old)
        try:
            lib = self.engine.compile_library(name, code, code[end:], timeout_ms)
            if not lib.functions:
                raise FunctionError("No functions registered")
            for key, fn in lib.functions.items():
                if key in ctx.functions:
                    raise FunctionError("Function %s already exists" % _text(fn.name))
        except BaseException:
            if old is not None:
                ctx.link(old)
            raise
        ctx.link(lib)
        return name

    def delete(self, name: bytes):
        lib = self.ctx.libraries.get(name)
        if lib is None:
            raise FunctionError("Library not found")
        self.ctx.unlink(lib)

    def flush(self):
        self.ctx = LibCtx()

    def stats(self) -> tuple[int, int]:
        """(libraries, functions)."""
        return len(self.ctx.libraries), len(self.ctx.functions)

    # ------------------------------------------------------------------
    # Persistence: RDB records and the DUMP payload
    # ------------------------------------------------------------------
    def codes(self) -> list[bytes]:
        return [lib.code for lib in self.ctx.libraries.values()]

    def dump(self) -> bytes:
        out = bytearray()
        with lzf_compression(self.server.config.values["rdbcompression"]):
            for code in self.codes():
                out.append(OP_FUNCTION2)
                put_string(code, out)
        out += RDB_VERSION.to_bytes(2, "little")
        out += crc64(bytes(out)).to_bytes(8, "little")
        return bytes(out)

    def restore(self, payload: bytes, policy: bytes):
        """FUNCTION RESTORE with policy flush / append / replace."""
        if not verify(payload):
            raise FunctionError("DUMP payload version or checksum are wrong")
        ctx = LibCtx()
        r = Reader(payload, 0)
        limit = len(payload) - 10
        while r.pos < limit:
            try:
                op = r.take(1)[0]
            except (RDBError, IndexError):
                raise FunctionError("can not read data type") from None
            if op == OP_FUNCTION_PRE_GA:
                raise FunctionError("Pre-GA function format not supported")
            if op != OP_FUNCTION2:
                raise FunctionError("given type is not a function")
            try:
                code = r.string()
            except (RDBError, IndexError, ValueError):
                raise FunctionError("Failed loading library payload") from None
            self.create(code, False, 0, ctx)
        if policy == b"flush":
            self.ctx = ctx
        else:
            self.join(ctx, policy == b"replace")

    def join(self, src: LibCtx, replace: bool):
        """Add src's libraries to the current ones (Valkey's libraryJoin)."""
        dst = self.ctx
        replaced = []
        try:
            for name, lib in src.libraries.items():
                old = dst.libraries.get(name)
                if old is not None:
                    if not replace:
                        raise FunctionError("Library %s already exists" % _text(name))
                    dst.unlink(old)
                    replaced.append(old)
            for key, fn in src.functions.items():
                if key in dst.functions:
                    raise FunctionError("Function %s already exists" % _text(fn.name))
        except FunctionError:
            for old in replaced:
                dst.link(old)
            raise
        for lib in src.libraries.values():
            dst.link(lib)

    def load_codes(self, codes: list[bytes], replace: bool = False):
        """An RDB file's libraries (no load timeout): all of them or none;
        raises FunctionError naming what failed.  ``replace`` (DEBUG RELOAD
        MERGE): a library already loaded is replaced, else it is an error."""
        ctx = LibCtx()
        for code in codes:
            self.create(code, False, 0, ctx)
        self.join(ctx, replace)


def memory_info(server) -> dict:
    """INFO memory's script and function fields, by Valkey's names: the Lua
    states' sizes (0 for a state not made yet: hotkv makes them on first
    use), the cached scripts' and the libraries' code bytes (Valkey adds
    its structures' overhead), and the counts."""
    eng = server.scripting
    reg = server.functions
    vm_eval = eng.vm_memory() if eng is not None else 0
    vm_functions = reg.engine.vm_memory() if reg is not None else 0
    scripts_eval = sum(len(s.body) for s in eng.scripts.values()) if eng is not None else 0
    functions = sum(len(code) for code in reg.codes()) if reg is not None else 0
    libs, fns = reg.stats() if reg is not None else (0, 0)
    return {"vm_eval": vm_eval, "vm_functions": vm_functions, "scripts_eval": scripts_eval,
            "functions": functions, "cached_scripts": len(eng.scripts) if eng else 0,
            "libraries": libs, "function_count": fns}


def registry(server) -> Registry:
    reg = server.functions
    if reg is None:
        reg = Registry(server)
        server.functions = reg
    return reg
