"""cjson.decode / cjson.encode nesting limits, byte for byte against valkey-server 8.1.8.

lua-cjson refuses a table or document nested deeper than encode_max_depth /
decode_max_depth (1000 by default), and, whatever those say, one whose next
level would not find room on the Lua C stack (LUAI_MAXCSTACK slots: 7,998
arrays or 3,999 objects deep).  The sweeps cover arrays, objects and a mix,
every depth from 1 to 2,000 (hotkv's two decode paths -- json.loads up to
200 levels, its own iterative parser beyond -- meet inside it), the stack
limits with the max_depth raised, and decode_max_depth / encode_max_depth
settings around their edges.
"""

from __future__ import annotations

import pytest

from support import RawClient

DECODE = ("local ok, v = pcall(cjson.decode, ARGV[1]) "
          "if not ok then return 'ERR:' .. tostring(v) end "
          "local ok2, e = pcall(cjson.encode, v) "
          "if not ok2 then return 'ENC:' .. tostring(e) end return e")
DECODE_AT = "cjson.decode_max_depth(tonumber(ARGV[2])) " + DECODE
ENCODE = ("cjson.encode_max_depth(tonumber(ARGV[3])) "
          "local n = tonumber(ARGV[1]) local t = {} local cur = t "
          "for i = 2, n do local x = {} "
          "  if ARGV[2] == 'obj' or (ARGV[2] == 'mix' and i % 2 == 0) then cur.a = x "
          "  else cur[1] = x end "
          "  cur = x end "
          "cur[1] = 'leaf' "
          "local ok, v = pcall(cjson.encode, t) "
          "if not ok then return 'ERR:' .. tostring(v) end return v")


def doc(kind: str, n: int) -> str:
    """A document nested n deep: arrays, objects, or both in turn."""
    opens, closes = [], []
    for i in range(n):
        if kind == "arr" or (kind == "mix" and i % 2 == 0):
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k":')
            closes.append("}")
    inner = "1" if opens[-1] != "[" or kind == "arr" else '"x", 2.5'
    return "".join(opens) + inner + "".join(reversed(closes))


def pipelined(target, calls) -> list:
    c = RawClient(target.host, target.port, timeout=60)
    try:
        for i in range(0, len(calls), 200):
            batch = calls[i:i + 200]
            c.send_raw(b"".join(_encode(*call) for call in batch))
            yield from (c.read_reply() for _ in batch)
    finally:
        c.close()


def _encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def both(server, ref_server, calls):
    ours = list(pipelined(server, calls))
    theirs = list(pipelined(ref_server, calls))
    diffs = [(call[3:], o[:120], t[:120]) for call, o, t in zip(calls, ours, theirs) if o != t]
    assert not diffs, "%d of %d differ, first: %r" % (len(diffs), len(calls), diffs[:3])
    return theirs


# Every depth to 300 (the parsers' switch sits at 200), every 7th to 2,000,
# and every one around the default limit (1,000) and at the end: a third of
# the calls of every depth to 2,000, for the same edges (CI time).
DEPTHS = sorted(set(range(1, 301)) | set(range(301, 2001, 7)) | set(range(990, 1011))
                | {1999, 2000})


@pytest.mark.parametrize("kind", ["arr", "obj", "mix"])
def test_decode_depths_to_2000(server, ref_server, kind):
    calls = [("EVAL", DECODE, "0", doc(kind, n)) for n in DEPTHS]
    replies = dict(zip(DEPTHS, both(server, ref_server, calls)))
    assert not replies[1000].startswith(b"$4\r\nERR:")          # depth 1000 decodes
    assert b"Found too many nested data structures (1001)" in replies[1001]


@pytest.mark.parametrize("kind", ["arr", "obj", "mix"])
def test_encode_depths_to_2000(server, ref_server, kind):
    calls = [("EVAL", ENCODE, "0", str(n), kind, "1000") for n in DEPTHS]
    replies = dict(zip(DEPTHS, both(server, ref_server, calls)))
    assert replies[1000].startswith(b"$")
    assert b"Cannot serialise, excessive nesting (1001)" in replies[1001]


@pytest.mark.parametrize("kind", ["arr", "obj", "mix"])
def test_lua_stack_limits_past_a_raised_max_depth(server, ref_server, kind):
    edges = {"arr": (7996, 7997, 7998, 7999, 8000, 8001),
             "obj": (3998, 3999, 4000, 4001),
             "mix": (5330, 5331, 5332, 5333, 5334)}[kind]
    calls = [("EVAL", DECODE_AT, "0", doc(kind, n), "100000") for n in edges]
    calls += [("EVAL", ENCODE, "0", str(n), kind, "100000") for n in edges]
    replies = both(server, ref_server, calls)
    assert any(b"Found too many nested" in r for r in replies)
    assert any(b"excessive nesting" in r for r in replies)
    assert any(r.startswith(b"$") for r in replies)


@pytest.mark.parametrize("kind", ["arr", "obj", "mix"])
def test_max_depth_settings(server, ref_server, kind):
    calls = []
    for limit in (1, 2, 5, 100, 199, 200, 201, 250, 999, 1500, 2500):
        for n in {max(1, limit - 1), limit, limit + 1}:
            calls.append(("EVAL", DECODE_AT, "0", doc(kind, n), str(limit)))
            calls.append(("EVAL", ENCODE, "0", str(n), kind, str(limit)))
    # A syntax error before the refused bracket is reported first, after it not.
    calls.append(("EVAL", DECODE_AT, "0", "[[x[[[1]]]]]", "3"))
    calls.append(("EVAL", DECODE_AT, "0", "[[[[[1]]]]x", "3"))
    calls.append(("EVAL", DECODE_AT, "0", "[" * 300 + "x" + "]" * 300, "1000"))
    calls.append(("EVAL", DECODE_AT, "0", '[{"a":"[[[[["}]', "2"))
    both(server, ref_server, calls)


def test_deep_documents_decode_to_the_same_values(server, ref_server):
    """The iterative parser (past 200 levels) against the reference: strings
    with escapes, numbers of every form, literals, empty containers, keys."""
    walk = ("local v = cjson.decode(ARGV[1]) "
            "for i = 1, tonumber(ARGV[2]) do v = v[1] or v.k end "
            "local out = {v.s, #v.n, tostring(v.t), tostring(v.f), #v.e, next(v.o) == nil and 1,"
            " tostring(v.z == cjson.null)} "
            "for i = 1, #v.n do out[#out + 1] = string.format('%.17g', v.n[i]) end "
            "return out")
    inner = ('{"s":"a\\"b\\\\c\\u00e9\\n","n":[0,-1,1.5,-2e3,1E-2,9007199254740993,'
             '123456789012345678],"t":true,"f":false,"e":[],"o":{},"z":null} ')
    calls = []
    for n in (150, 199, 200, 201, 300, 999):
        calls.append(("EVAL", walk, "0", " [ " * n + inner + " ] " * n, str(n)))
        calls.append(("EVAL", walk, "0", '{"k" : ' * n + inner + "}" * n, str(n)))
    both(server, ref_server, calls)
