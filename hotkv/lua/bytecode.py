"""One rewrite of a compiled script: a tail call to one of the API's
functions becomes a plain call.

Owns the reading and writing of Lua 5.1 binary chunks (``string.dump``'s
format on this build: little-endian, 4-byte int and Instruction, 8-byte
size_t and double), the rewrite below -- the prelude (prelude.lua) applies
it to every EVAL script and FUNCTION library it compiles -- and ``strip``,
which the engine applies to the prelude itself.

Why: the functions a script can call (redis.call, cjson.decode, loadstring,
pairs, ...) are Lua closures of the prelude -- a script never holds a
Python object -- where Valkey's are C functions.  A Lua tail call to a Lua
function replaces the caller's frame, so ``return redis.call('bad')`` would
lose the frame whose line Valkey's error names ("on @user_script:1."),
and a library's message its ``user_script:1:`` position.  So a ``TAILCALL``
whose callee was loaded by

* ``GETGLOBAL A K`` (a global: scripts cannot define globals, so this is
  always one of ours or a library's), or
* ``GETTABLE A B K`` with a constant key K named like an API function
  (``redis.call``, ``cjson.decode``, ``coroutine.create``, ...),

becomes ``CALL`` (its ``RETURN A 0`` already follows, and CALL with C = 0
leaves the results to it).  A user's own recursion through a local or an
upvalue keeps its tail calls; one through a table field named like an API
function (``M.call``) would grow the stack, the one difference it makes.

Every other instruction, constant and the debug information (lines, local
names) stay as compiled; the code keeps its length, so no jump moves.  A
chunk this module cannot read, or with no such site, is left alone
(``rewrite`` returns None).

Invariant: a rewritten chunk passes Lua's own check of loaded bytecode
(luaG_checkcode: CALL with C = 0 is followed by an open RETURN).
"""

from __future__ import annotations

import struct

_HEADER = b"\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00"
_GETGLOBAL, _GETTABLE, _CALL, _TAILCALL = 5, 6, 28, 29
# The names of the API's functions, as table fields (redis / server,
# cjson, bit, cmsgpack, struct, and the library functions the prelude
# replaces: string.dump, coroutine.create / wrap).
_API_FIELDS = frozenset((
    b"call", b"pcall", b"setresp", b"log", b"sha1hex", b"acl_check_cmd", b"breakpoint",
    b"debug", b"status_reply", b"error_reply", b"set_repl", b"replicate_commands",
    b"register_function", b"encode", b"decode", b"encode_keep_buffer", b"encode_max_depth",
    b"decode_max_depth", b"encode_number_precision", b"encode_sparse_array",
    b"encode_invalid_numbers", b"decode_invalid_numbers", b"tobit", b"bnot", b"band", b"bor",
    b"bxor", b"lshift", b"rshift", b"arshift", b"rol", b"ror", b"bswap", b"tohex", b"pack",
    b"unpack", b"unpack_one", b"unpack_limit", b"size", b"dump", b"create", b"wrap"))
# Opcodes whose A field is not a register they write (so a backward scan
# for the callee's load passes over them).
_A_NOT_WRITTEN = frozenset((7, 8, 9, 22, 23, 24, 25, 26, 30, 34, 35))
_INT = struct.Struct("<i")
_SIZE = struct.Struct("<Q")


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int):
        self.data, self.pos = data, pos

    def int(self) -> int:
        v = _INT.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return v

    def byte(self) -> int:
        v = self.data[self.pos]
        self.pos += 1
        return v

    def string(self):
        n = _SIZE.unpack_from(self.data, self.pos)[0]
        self.pos += 8
        if n == 0:
            return None
        s = self.data[self.pos:self.pos + n - 1]     # (without its NUL)
        self.pos += n
        return s


def _read_function(r: _Reader) -> dict:
    f = {"source": r.string(), "lines": (r.int(), r.int()),
         "head": bytes((r.byte(), r.byte(), r.byte(), r.byte()))}
    n = r.int()
    f["code"] = list(struct.unpack_from("<%dI" % n, r.data, r.pos))
    r.pos += 4 * n
    consts = []
    for _ in range(r.int()):
        t = r.byte()
        if t == 0:
            consts.append((0, None))
        elif t == 1:
            consts.append((1, r.byte()))
        elif t == 3:
            consts.append((3, r.data[r.pos:r.pos + 8]))
            r.pos += 8
        elif t == 4:
            consts.append((4, r.string()))
        else:
            raise ValueError("constant type %d" % t)
    f["consts"] = consts
    f["protos"] = [_read_function(r) for _ in range(r.int())]
    start = r.pos                       # the debug information, kept as read
    n = r.int()                         # a line per instruction
    r.pos += 4 * n
    for _ in range(r.int()):            # local names
        r.string()
        r.pos += 8
    for _ in range(r.int()):            # upvalue names
        r.string()
    f["debug"] = r.data[start:r.pos]
    return f


def _string(s) -> bytes:
    if s is None:
        return _SIZE.pack(0)
    return _SIZE.pack(len(s) + 1) + s + b"\0"


def _write_function(f: dict, out: list) -> None:
    out.append(_string(f["source"]))
    out.append(_INT.pack(f["lines"][0]) + _INT.pack(f["lines"][1]) + f["head"])
    code = f["code"]
    out.append(_INT.pack(len(code)) + struct.pack("<%dI" % len(code), *code))
    out.append(_INT.pack(len(f["consts"])))
    for t, v in f["consts"]:
        out.append(bytes((t,)))
        if t == 1:
            out.append(bytes((v,)))
        elif t == 3:
            out.append(v)
        elif t == 4:
            out.append(_string(v))
    out.append(_INT.pack(len(f["protos"])))
    for p in f["protos"]:
        _write_function(p, out)
    out.append(f["debug"])


def _const(f: dict, index: int):
    consts = f["consts"]
    if 0 <= index < len(consts) and consts[index][0] == 4:
        return consts[index][1]
    return None


def _api_callee(f: dict, pc: int, a: int) -> bool:
    """Whether the callee in register ``a`` of the call at ``pc`` was loaded
    as a global or as a table field named like an API function."""
    code = f["code"]
    i = pc - 1
    while i >= 0:
        ins = code[i]
        op = ins & 0x3F
        if (ins >> 6) & 0xFF == a and op not in _A_NOT_WRITTEN:
            break
        i -= 1
    else:
        return False
    ins = code[i]
    op = ins & 0x3F
    if op == _GETGLOBAL:
        return True
    c = (ins >> 14) & 0x1FF
    return op == _GETTABLE and bool(c & 0x100) and _const(f, c & 0xFF) in _API_FIELDS


def _rewrite_function(f: dict) -> bool:
    changed = False
    code = f["code"]
    for pc, ins in enumerate(code):
        if ins & 0x3F != _TAILCALL:
            continue
        if _api_callee(f, pc, (ins >> 6) & 0xFF):
            code[pc] = (ins & ~0x3F) | _CALL
            changed = True
    for p in f["protos"]:
        changed = _rewrite_function(p) or changed
    return changed


def _strip_function(f: dict) -> None:
    f["debug"] = _INT.pack(0) * 3       # no line, local or upvalue names
    for p in f["protos"]:
        _strip_function(p)


def _read_chunk(chunk: bytes):
    """The chunk's main function as read, or None when it cannot be read."""
    if not chunk.startswith(_HEADER):
        return None
    try:
        r = _Reader(chunk, len(_HEADER))
        top = _read_function(r)
    except (ValueError, IndexError, struct.error):
        return None
    return top if r.pos == len(chunk) else None


def _write_chunk(top: dict) -> bytes:
    out = [_HEADER]
    _write_function(top, out)
    return b"".join(out)


def strip(chunk: bytes):
    """The chunk without its debug information (as ``luac -s``), or None
    when it cannot be read.  For hotkv's own Lua (the prelude): every
    function of it stays alive in each Lua state, and its line numbers are
    never shown (the error handler skips its frames)."""
    top = _read_chunk(chunk)
    if top is None:
        return None
    _strip_function(top)
    return _write_chunk(top)


def rewrite(chunk: bytes):
    """The chunk with its tail calls to API functions made plain calls (see
    the module docstring), or None when nothing changes."""
    top = _read_chunk(chunk)
    if top is None or not _rewrite_function(top):
        return None
    return _write_chunk(top)
