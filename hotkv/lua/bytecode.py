"""One rewrite of a compiled script: redis.call / server.call sites whose
argument list ends in a multiple-value expression (``unpack(t)``, ``...``).

Owns the reading and writing of Lua 5.1 binary chunks (``string.dump``'s
format on this build: little-endian, 4-byte int and Instruction, 8-byte
size_t and double) and the rewrite below; the prelude (prelude.lua) applies
it to every EVAL script and FUNCTION library it compiles.

Why: the API functions are Python callables, and lupa checks for two free
stack slots before it calls one -- a C function's stack is capped at 8,000
slots (LUAI_MAXCSTACK), so a call with more than 7,997 arguments failed
("bad argument #1 to '?' (not a python object)") where Valkey's C
redis.call takes 8,001 (its Tcl suite: "Script check unpack with massive
arguments").  Only a call whose last argument expands to many values can
have that many, so only those sites change:

* ``GETGLOBAL A "redis"`` (or ``"server"``) followed by ``GETTABLE A A
  "call"`` (or ``"pcall"``) that loads the callee of a ``CALL`` or
  ``TAILCALL`` with B = 0 reads the global ``VNAME`` instead, a table whose
  call / pcall are the prelude's Lua wrappers (they pass a long argument
  list to Python as one table);
* such a ``TAILCALL`` becomes ``CALL`` (its ``RETURN A 0`` already follows):
  a Lua tail call would replace the user's frame by the wrapper's, and the
  error handler would lose the line a Valkey error names.  The callee is
  never the user's own function, so no recursion loses its tail call.

Every other instruction, constant and the debug information (lines, local
names) stay as compiled; the code keeps its length, so no jump moves.  A
chunk this module cannot read, or with no such site, is left alone
(``rewrite`` returns None).

Invariant: a rewritten chunk passes Lua's own check of loaded bytecode
(luaG_checkcode: GETGLOBAL names a string constant; CALL with C = 0 is
followed by an open RETURN).
"""

from __future__ import annotations

import struct

VNAME = b"\0hotkv-api"     # the hidden global (no Lua identifier can name it)

_HEADER = b"\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00"
_GETGLOBAL, _GETTABLE, _CALL, _TAILCALL = 5, 6, 28, 29
_API = (b"redis", b"server")
_CALLS = (b"call", b"pcall")
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


def _callee_load(f: dict, pc: int, a: int):
    """The pc of the GETGLOBAL that starts ``redis.call`` as the callee in
    register ``a`` of the call at ``pc``, or None."""
    code = f["code"]
    i = pc - 1
    while i >= 0:
        ins = code[i]
        op = ins & 0x3F
        if (ins >> 6) & 0xFF == a and op not in _A_NOT_WRITTEN:
            break
        i -= 1
    else:
        return None
    ins = code[i]
    b, c = ins >> 23, (ins >> 14) & 0x1FF
    if ins & 0x3F != _GETTABLE or b != a or not c & 0x100 or \
            _const(f, c & 0xFF) not in _CALLS or i == 0:
        return None
    prev = code[i - 1]
    if prev & 0x3F != _GETGLOBAL or (prev >> 6) & 0xFF != a or \
            _const(f, prev >> 14) not in _API:
        return None
    return i - 1


def _rewrite_function(f: dict) -> bool:
    changed = False
    code = f["code"]
    vindex = None
    for pc, ins in enumerate(code):
        op = ins & 0x3F
        if op not in (_CALL, _TAILCALL) or ins >> 23 != 0:
            continue
        a = (ins >> 6) & 0xFF
        at = _callee_load(f, pc, a)
        if at is None:
            continue
        if vindex is None:
            vindex = len(f["consts"])
            if vindex >= 1 << 18:       # (GETGLOBAL's Bx)
                break
            f["consts"].append((4, VNAME))
        code[at] = (code[at] & 0x3FFF) | (vindex << 14)
        if op == _TAILCALL:
            code[pc] = (ins & ~0x3F) | _CALL
        changed = True
    for p in f["protos"]:
        changed = _rewrite_function(p) or changed
    return changed


def rewrite(chunk: bytes):
    """The chunk with its vararg redis.call / server.call sites rewritten
    (see the module docstring), or None when nothing changes."""
    if not chunk.startswith(_HEADER):
        return None
    try:
        r = _Reader(chunk, len(_HEADER))
        top = _read_function(r)
        if r.pos != len(chunk):
            return None
    except (ValueError, IndexError, struct.error):
        return None
    if not _rewrite_function(top):
        return None
    out = [_HEADER]
    _write_function(top, out)
    return b"".join(out)
