"""A differential fuzzer of the Lua sandbox: generated snippets that probe
what a script can reach and change, run on hotkv (``hotkv serve`` in a
child process, so a crash is seen, not suffered) and on valkey-server
8.1.8 side by side.

Each snippet applies one operation (getmetatable, setmetatable, rawset,
indexing, assignment, calling, string.dump, coroutine.create/wrap, load /
loadstring, pairs/next, unpack ranges, pcall/xpcall, concatenation,
arithmetic, comparison ...) to values drawn from a pool of everything a
script is handed (the API functions and tables, library tables,
metatables, API replies and error objects, cjson.null, coroutines, dumped
bytecode, odd numbers) inside a pcall, and returns whether it succeeded,
the type of what came back and, for strings, the text (addresses
normalised).  After every snippet a canary script runs on both servers:
nothing a snippet did may change what a later script sees.

Findings, by severity:
* ``allowed``: hotkv ran what Valkey refused -- the property this fuzzer
  guards (a test fails on any);
* ``crash``: hotkv stopped answering;
* ``canary``: a later script saw a change on hotkv that it did not see on
  Valkey;
* ``differs``: both refused or both ran, with different replies (counted,
  listed with --show; not a sandbox escape).

    python tests/fuzz/fuzz_sandbox.py --n 20000 --seed 7      # a long run
    python tests/fuzz/fuzz_sandbox.py --n 500 --seed 1 --show  # and what differs

tests/test_lua_sandbox_fuzz.py runs a bounded run in CI.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from jobcount import HotkvProcess  # noqa: E402
from support import RawClient, ReferenceValkey  # noqa: E402

# Everything a script is handed, as Lua expressions.
VALUES = [
    "redis.call", "redis.pcall", "redis.sha1hex", "redis.log", "redis.setresp",
    "redis.status_reply", "redis.error_reply", "redis.set_repl", "redis.acl_check_cmd",
    "redis.breakpoint", "redis", "server", "server.call", "cjson", "cjson.null", "cjson.decode",
    "cjson.encode", "cmsgpack", "cmsgpack.pack", "cmsgpack.unpack", "struct", "struct.pack",
    "struct.unpack", "bit", "bit.band", "string", "string.dump", "string.rep", "string.format",
    "math", "table", "table.concat", "os", "os.clock", "coroutine", "coroutine.create",
    "coroutine.wrap", "coroutine.resume", "_G", "getmetatable('')", "getmetatable(_G)",
    "getmetatable(redis)", "getmetatable(redis.call)", "redis.call('ping')",
    "redis.pcall('nosuchcmd')", "select(2, pcall(redis.call, 'nosuchcmd'))",
    "select(2, pcall(cjson.decode, '{'))", "select(2, pcall(error, {}))",
    "coroutine.create(function() end)", "load", "loadstring", "pairs", "ipairs", "next",
    "tostring", "tonumber", "type", "unpack", "select", "setmetatable", "getmetatable",
    "rawset", "rawget", "rawequal", "pcall", "xpcall", "error", "assert", "collectgarbage",
    "gcinfo", "KEYS", "ARGV", "'str'", "''", "'\\27Lua'", "1", "0", "-1", "2^31", "-2^31",
    "2^53", "0/0", "1/0", "{}", "{1, 2, 3}", "{a = 1}", "nil", "true", "false",
    "function() return 1 end", "function(...) return ... end",
    "string.dump(function() return 'bytecode-ran' end)",
    "setmetatable({}, {__index = function() return 'hook' end})",
    "setmetatable({}, {__metatable = 'locked'})",
    "newproxy", "io", "debug", "python", "require", "dofile", "getfenv", "module",
]

# Operations: (template, arity, kind); kind 'e' an expression, 's' a
# statement.
OPS = [
    ("getmetatable(A)", 1, "e"), ("setmetatable(A, B)", 2, "e"), ("rawset(A, B, C)", 3, "e"),
    ("rawget(A, B)", 2, "e"), ("A[B]", 2, "e"), ("A.x", 1, "e"), ("A[B] = C", 3, "s"),
    ("A.x = B", 2, "s"), ("A(B)", 2, "e"), ("A(B, C)", 3, "e"), ("A()", 1, "e"),
    ("tostring(A)", 1, "e"), ("type(A)", 1, "e"), ("#A", 1, "e"), ("A .. B", 2, "e"),
    ("A + B", 2, "e"), ("A < B", 2, "e"), ("A == B", 2, "e"), ("string.dump(A)", 1, "e"),
    ("coroutine.create(A)", 1, "e"), ("coroutine.wrap(A)", 1, "e"), ("load(A)", 1, "e"),
    ("load(A, B)", 2, "e"), ("loadstring(A)", 1, "e"), ("loadstring(A, B)", 2, "e"),
    ("(loadstring(A))()", 1, "e"), ("pairs(A)", 1, "e"), ("next(A)", 1, "e"),
    ("next(A, B)", 2, "e"), ("unpack(A, B, C)", 3, "e"), ("select(A, B)", 2, "e"),
    ("pcall(A, B)", 2, "e"), ("xpcall(A, B)", 2, "e"), ("error(A)", 1, "e"),
    ("string.format('%s', A)", 1, "e"), ("table.concat(A, B)", 2, "e"),
    ("table.sort(A, B)", 2, "e"), ("getmetatable(A).__index", 1, "e"),
    ("getmetatable(A).__call = B", 2, "s"), ("getmetatable(A).__index = B", 2, "s"),
    ("getmetatable(A).__metatable = B", 2, "s"), ("rawset(getmetatable(A), B, C)", 3, "e"),
    ("setmetatable(getmetatable(A), B)", 2, "e"), ("A = B", 2, "s"),
    ("coroutine.resume(coroutine.create(function() return A(B) end))", 2, "e"),
    ("select(2, coroutine.resume(coroutine.create(function() error(A) end)))", 1, "e"),
    ("xpcall(function() return A(B) end, function(e) return e end)", 2, "e"),
    ("load((function() local d = false return function() if d then return nil end "
     "d = true return A end end)())", 1, "e"),
    ("cjson.encode(A)", 1, "e"), ("cjson.decode(A)", 1, "e"), ("cmsgpack.pack(A)", 1, "e"),
    ("cmsgpack.unpack(A)", 1, "e"), ("struct.pack(A, B)", 2, "e"), ("redis.call(A, B)", 2, "e"),
    ("redis.sha1hex(A)", 1, "e"), ("bit.tohex(A, B)", 2, "e"),
]
# Operations whose time or memory grows with a number argument, kept to
# small numbers (a fuzzer must stop by itself).
SMALL = ("string.rep", "table.concat", "unpack", "string.format", "bit.tohex", "select",
         "struct.pack")
SMALL_VALUES = ["1", "0", "-1", "3", "'str'", "nil", "{}", "{1, 2, 3}"]

# Run before the first snippet and after every one: what it sees must not
# change on hotkv unless it changes on Valkey the same way.
CANARY = ("local out = {} "
          "for _, v in ipairs({redis.call, redis.pcall, cjson.encode, string.upper, tostring, "
          "type, pairs, loadstring, getmetatable, setmetatable, rawset, unpack}) do "
          "out[#out + 1] = type(v) .. ':' .. tostring(getmetatable(v)) end "
          "out[#out + 1] = ('abc'):upper() out[#out + 1] = tostring(redis.call('ping').ok) "
          "out[#out + 1] = cjson.encode({1, 'x'}) out[#out + 1] = type(getmetatable('')) "
          "out[#out + 1] = tostring(rawequal(getmetatable('').__index, string)) "
          "out[#out + 1] = tostring(#KEYS) out[#out + 1] = redis.sha1hex('') "
          "out[#out + 1] = tostring(select('#', unpack({1, 2, 3}))) return out")

ADDR = re.compile(rb"0x[0-9a-f]+|\(nil\)")
REPORT = ("local ok, r = pcall(function() %s end) "
          "if type(r) == 'string' then return {tostring(ok), type(r), r} end "
          "return {tostring(ok), type(r)}")


def _callable(v: str) -> bool:
    return v.startswith("function") or ("(" not in v and "'" not in v and v[0].isalpha()
                                       and v not in ("nil", "true", "false", "KEYS", "ARGV"))


def snippet(rng: random.Random) -> str:
    template, arity, kind = rng.choice(OPS)
    small = any(template.startswith(s) or ("." + s.split(".")[-1] + "(") in template
                for s in SMALL)
    args = {}
    for name in "ABC"[:arity]:
        pool = SMALL_VALUES if small and name != "A" else VALUES
        if template.startswith("load(") and name == "A":
            # a reader that never returns nil loads forever (on both servers)
            pool = [v for v in VALUES if not _callable(v)] + ["function() return nil end"]
        args[name] = rng.choice(pool)
    code = template
    for name, value in args.items():
        code = code.replace(name, "(%s)" % value if kind == "e" or name != "A" else value, 1)
    body = code if kind == "s" else "return " + code
    return REPORT % body


def normal(reply: bytes) -> bytes:
    """A reply with addresses (and the lengths of the strings holding them)
    made equal."""
    return re.sub(rb"\$\d+\r\n(?=[^\r\n]*ADDR)", b"$?\r\n", ADDR.sub(b"ADDR", reply))


def classify(ours: bytes, theirs: bytes) -> str | None:
    a, b = normal(ours), normal(theirs)
    if a == b:
        return None
    ok_ours = a.startswith(b"*") and b"$4\r\ntrue\r\n" in a[:20]
    ok_theirs = b.startswith(b"*") and b"$4\r\ntrue\r\n" in b[:20]
    refused_theirs = b.startswith(b"-") or (b.startswith(b"*") and not ok_theirs)
    if ok_ours and refused_theirs:
        return "allowed"
    return "differs"


def run(n: int, seed: int, show: bool = False, out=sys.stdout) -> dict:
    rng = random.Random(seed)
    found = {"allowed": [], "crash": [], "canary": [], "differs": []}
    ours_proc = HotkvProcess("--lua-time-limit", "1000").start()
    ref = ReferenceValkey("--lua-time-limit", "1000").start()
    try:
        ours = RawClient(ours_proc.host, ours_proc.port, timeout=30)
        theirs = RawClient(ref.host, ref.port, timeout=30)
        base_ours = normal(ours.call("EVAL", CANARY, "0"))
        base_theirs = normal(theirs.call("EVAL", CANARY, "0"))
        assert base_ours == base_theirs, (base_ours, base_theirs)
        for i in range(n):
            code = snippet(rng)
            try:
                a = ours.call("EVAL", code, "0")
            except OSError:
                found["crash"].append(code)
                break
            b = theirs.call("EVAL", code, "0")
            kind = classify(a, b)
            if kind:
                found[kind].append((code, a[:300], b[:300]))
            ca = normal(ours.call("EVAL", CANARY, "0"))
            cb = normal(theirs.call("EVAL", CANARY, "0"))
            if ca != cb:
                found["canary"].append((code, ca[:300], cb[:300]))
                # start again from equal states
                ours.call("SCRIPT", "FLUSH")
                theirs.call("SCRIPT", "FLUSH")
        ours.close()
        theirs.close()
    finally:
        if ours_proc.proc is not None and ours_proc.proc.poll() is not None:
            found["crash"].append("exit status %r" % ours_proc.proc.returncode)
        ours_proc.stop()
        ref.stop()
    if out is not None:
        print("seed %d, %d snippets: allowed %d, crash %d, canary %d, differs %d"
              % (seed, n, len(found["allowed"]), len(found["crash"]), len(found["canary"]),
                 len(found["differs"])), file=out)
        for kind in ("allowed", "crash", "canary") + (("differs",) if show else ()):
            for item in found[kind]:
                print("  %s: %r" % (kind, item), file=out)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="list the 'differs' findings too")
    args = ap.parse_args(argv)
    found = run(args.n, args.seed, args.show)
    return 1 if found["allowed"] or found["crash"] or found["canary"] else 0


if __name__ == "__main__":
    sys.exit(main())
