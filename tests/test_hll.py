"""HyperLogLog (PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST) against the
reference valkey-server 8.1.8, byte for byte.

Every test sends the same commands to hotkv and to Valkey and compares the
replies (``diff``) and the stored HLL bytes (GET): the sparse opcodes, the
switch to dense at hll-sparse-max-bytes, the 6-bit dense registers and
the cached cardinality must be the reference's exactly, so counts are too.

Randomised tests are seeded; CI runs a few seeds and a bounded number of
elements.  To run them long:

    HOTKV_HLL_SEEDS=0-49 HOTKV_HLL_SCALE=10 python -m pytest -q tests/test_hll.py

(``HOTKV_HLL_SEEDS`` is a seed list, "0-49" or "1,5,9", for the seeded
tests; ``HOTKV_HLL_SCALE`` multiplies the element counts and fuzz rounds.)
"""

from __future__ import annotations

import os
import random

import pytest

from support import RawClient, aof_commands, start_aof_server, wait_for

SCALE = max(1, int(os.environ.get("HOTKV_HLL_SCALE", "1")))


def _seeds(default: str) -> list[int]:
    text = os.environ.get("HOTKV_HLL_SEEDS", default)
    out = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


SEEDS = _seeds("1,2,3")


def _pipeline(client: RawClient, commands) -> list[bytes]:
    """Send every command at once, then read every reply (exact bytes)."""
    from support import encode_command
    client.send_raw(b"".join(encode_command(*c) for c in commands))
    return [client.read_reply() for _ in commands]


def _both(diff, commands) -> list[bytes]:
    ours = _pipeline(diff.ours, commands)
    theirs = _pipeline(diff.theirs, commands)
    for cmd, a, b in zip(commands, ours, theirs):
        assert a == b, f"{cmd!r}:\n hotkv:  {a[:200]!r}\n valkey: {b[:200]!r}"
    return ours


@pytest.fixture(params=["2", "3"])
def d(request, diff):
    """``diff`` in RESP2 and RESP3, hll-sparse-max-bytes back at 3000."""
    if request.param == "3":
        diff.resp3()
    diff("CONFIG", "SET", "hll-sparse-max-bytes", "3000")
    yield diff
    diff("CONFIG", "SET", "hll-sparse-max-bytes", "3000")


# ----------------------------------------------------------------------
# Replies and values, command by command
# ----------------------------------------------------------------------

def test_basic_replies_and_bytes(d):
    for cmd in (["PFADD", "h", "a", "b", "c"], ["PFADD", "h", "a", "b", "c"],
                ["PFADD", "h"], ["PFADD", "h", ""], ["GET", "h"], ["PFCOUNT", "h"],
                ["GET", "h"], ["PFCOUNT", "h"], ["PFADD", "h", "1", "2", "3"],
                ["GETRANGE", "h", "15", "15"], ["PFADD", "new"], ["GET", "new"],
                ["PFCOUNT", "new"], ["GET", "new"], ["TYPE", "h"], ["STRLEN", "h"],
                ["OBJECT", "ENCODING", "h"], ["PFCOUNT", "missing"],
                ["PFCOUNT", "h", "new", "missing"], ["EXISTS", "missing"],
                ["PFDEBUG", "ENCODING", "h"], ["PFDEBUG", "DECODE", "h"],
                ["PFDEBUG", "DECODE", "new"], ["PFDEBUG", "GETREG", "h"],
                ["PFDEBUG", "ENCODING", "h"], ["PFDEBUG", "DECODE", "h"],
                ["PFDEBUG", "TODENSE", "h"], ["PFDEBUG", "TODENSE", "new"],
                ["PFDEBUG", "TODENSE", "new"], ["GET", "new"], ["PFCOUNT", "new"],
                ["PFDEBUG", "encoding", "new"], ["PFDEBUG", "nosuch", "new"],
                ["PFDEBUG", "getreg", "missing"], ["PFDEBUG", "GETREG"],
                ["PFDEBUG", "GETREG", "h", "x"], ["PFADD"], ["PFCOUNT"], ["PFMERGE"],
                ["PFSELFTEST", "x"], ["OBJECT", "ENCODING", "new"]):
        d(*cmd)


def _call_counts(client: RawClient, name: str) -> str:
    """calls/rejected/failed of one command in INFO commandstats."""
    info = client.call("INFO", "commandstats").decode()
    line = next(x for x in info.split("\r\n") if x.startswith(f"cmdstat_{name}:"))
    fields = dict(f.split("=") for f in line.split(":", 1)[1].split(","))
    return "%(calls)s/%(rejected_calls)s/%(failed_calls)s" % fields


def test_pfdebug_simd(d):
    # An argument other than ON/OFF gets Valkey's two replies: the error,
    # then the flag; the call counts as failed.
    d("CONFIG", "RESETSTAT")
    d("PFDEBUG", "SIMD", "OFF")
    d("PFDEBUG", "SIMD", "maybe")
    assert d.ours.read_reply() == d.theirs.read_reply() == b"+disabled\r\n"
    d("PFDEBUG", "SIMD", "on")
    d("PFDEBUG", "simd", "ON")
    assert _call_counts(d.ours, "pfdebug") == _call_counts(d.theirs, "pfdebug") == "4/0/1"
    d("INFO", "errorstats")


def _hits(client: RawClient) -> list[str]:
    info = client.call("INFO", "stats").decode()
    return [x for x in info.split("\r\n") if x.startswith("keyspace_")]


def test_keyspace_hits_and_misses(d):
    """PFCOUNT and PFMERGE read their keys as reads (hits/misses counted,
    PFMERGE's destination included); PFADD and PFDEBUG as writes."""
    d("CONFIG", "RESETSTAT")
    for cmd in (["PFADD", "h", "a"], ["PFADD", "h", "b"], ["PFCOUNT", "h"], ["PFCOUNT", "nx"],
                ["PFCOUNT", "h", "nx", "h"], ["PFMERGE", "d", "h", "nx"], ["PFMERGE", "d", "h"],
                ["PFDEBUG", "ENCODING", "h"], ["PFDEBUG", "GETREG", "nx"]):
        d(*cmd)
    assert _hits(d.ours) == _hits(d.theirs)


def test_pfselftest(r):
    assert r.execute_command("PFSELFTEST") in (b"OK", "OK", True)


def test_type_errors(d):
    for cmd in (["SET", "s", "abc"], ["PFADD", "s", "x"], ["PFCOUNT", "s"],
                ["PFCOUNT", "missing", "s"], ["PFMERGE", "s", "missing"],
                ["PFMERGE", "dest", "s"], ["EXISTS", "dest"], ["RPUSH", "l", "a"],
                ["PFADD", "l", "x"], ["PFCOUNT", "l"], ["PFCOUNT", "l", "s"],
                ["PFMERGE", "l"], ["PFDEBUG", "ENCODING", "l"], ["PFDEBUG", "GETREG", "s"],
                ["SET", "h", "HYLL"], ["PFADD", "h", "x"],
                ["SET", "h", b"HYLL\x02" + bytes(11) + b"\x7f\xff"], ["PFCOUNT", "h"],
                ["SET", "h", b"HYLL\x00" + bytes(11)], ["PFCOUNT", "h"],
                ["SET", "h", b"HYLX\x01" + bytes(11) + b"\x7f\xff"], ["PFCOUNT", "h"],
                ["SET", "h", b"HYLL\x01\x09\x09\x09" + bytes(8) + b"\x7f\xff"],
                ["PFADD", "h", "a"], ["GET", "h"]):
        d(*cmd)


def test_corrupt_sparse(d):
    cases = [
        b"",                                # no registers at all
        b"\x7f\xfe",                        # one short of 16384
        b"\x7f\xff\x00",                    # one over
        b"\x7f\xff\x80",                    # a VAL past the last register
        b"\x7f\xfe\x80",                    # exact, ending in a VAL
        b"\x7f\xfd\x80\x80",
        b"\x3f" * 256,                      # 256 ZERO of 64
        b"\x40\x00" * 16384,                # 16384 XZERO of 1 (longer than allowed)
        b"\x7f\xff\x7f",                    # a lone XZERO byte at the end
    ]
    for i, body in enumerate(cases):
        key = "c%d" % i
        value = b"HYLL\x01\x00\x00\x00" + bytes(7) + b"\x80" + body
        d("SET", key, value)
        d("PFCOUNT", key)
        d("PFCOUNT", key, "missing")
        d("PFMERGE", "m%d" % i, key)
        d("PFDEBUG", "DECODE", key)
        d("SET", key, value)
        d("PFADD", key, "a", "b", "c", "d")
        d("GET", key)
        d("SET", key, value)
        d("PFDEBUG", "TODENSE", key)
        d("GET", key)


def _lone_xzero_at_end(value: bytes) -> bool:
    """A sparse body whose last byte starts an XZERO (two-byte) opcode."""
    if len(value) < 16 or value[4] != 1:
        return False
    p = 16
    while p < len(value):
        p += 2 if 0x40 <= value[p] < 0x80 else 1
    return p > len(value)


def test_corrupted_values_fuzz(diff):
    """Random single-byte damage to sparse and dense HLLs: replies and the
    values left behind match the reference's.  A body damaged into ending
    with half an XZERO is left out: there Valkey reads (and may write)
    the byte past the string's end, which hotkv reads as the NUL it
    usually is and does not keep."""
    rng = random.Random(7)
    for round_ in range(40 * SCALE):
        n = rng.choice([3, 30, 300, 3000])
        items = [b"%d-%d" % (round_, i) for i in range(n)]
        cmds = [["DEL", "h"], ["PFADD", "h", *items]]
        _both(diff, cmds)
        length = int(diff("STRLEN", "h")[1:-2])
        cmds = []
        for _ in range(rng.randint(1, 3)):
            # Mostly the registers; now and then the header (encoding, cache).
            pos = rng.randrange(16, length) if rng.random() < 0.9 else rng.randrange(4, 16)
            cmds.append(["SETRANGE", "h", str(pos), bytes([rng.randrange(256)])])
        value = _both(diff, cmds + [["GET", "h"]])[-1].split(b"\r\n", 1)[1][:-2]
        if _lone_xzero_at_end(value):
            continue
        more = [b"%d+%d" % (round_, i) for i in range(rng.choice([3, 300]))]
        cmds = [["PFCOUNT", "h"], ["PFADD", "h", *more], ["GET", "h"],
                 ["PFCOUNT", "h", "h"], ["PFMERGE", "m", "h"], ["GET", "m"],
                 ["PFDEBUG", "DECODE", "h"], ["PFDEBUG", "TODENSE", "h"], ["GET", "h"]]
        _both(diff, cmds)


# ----------------------------------------------------------------------
# Registers across the sparse -> dense switch
# ----------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_registers_byte_equal_across_promotion(diff, seed):
    """Thousands of PFADDs in batches, each followed by GET: the stored
    bytes match after every batch, through the switch to dense (at three
    hll-sparse-max-bytes values, changed between batches too)."""
    rng = random.Random(seed)
    limits = ["3000", "300", "8000"]
    for key in ("a", "b", "c"):
        _both(diff, [["CONFIG", "SET", "hll-sparse-max-bytes", rng.choice(limits)],
                     ["DEL", key]])
        added = 0
        while added < 3000 * SCALE:
            cmds = []
            for _ in range(20):
                n = rng.choice([1, 1, 1, 2, 5, 20])
                els = [rng.randbytes(rng.randrange(0, 24)) if rng.random() < 0.3
                       else str(rng.random()).encode() for _ in range(n)]
                added += n
                cmds.append(["PFADD", key, *els])
                if rng.random() < 0.2:
                    cmds.append(["PFCOUNT", key])
                if rng.random() < 0.1:
                    cmds.append(["PFCOUNT", "a", "b", "c"])
            if rng.random() < 0.1:
                cmds.append(["CONFIG", "SET", "hll-sparse-max-bytes", rng.choice(limits)])
            cmds += [["GET", key], ["PFDEBUG", "ENCODING", key]]
            _both(diff, cmds)
        _both(diff, [["PFCOUNT", key], ["GET", key], ["PFCOUNT", "a", "b", "c"]])
    _both(diff, [["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]])


def test_promotion_at_each_limit(d):
    """The first PFADD that would grow the string past the limit makes it
    dense (and hll-sparse-max-bytes 0 makes the first change dense)."""
    for limit in ("0", "20", "100", "500", "3000"):
        d("CONFIG", "SET", "hll-sparse-max-bytes", limit)
        d("DEL", "h")
        d("PFADD", "h")
        for i in range(0, 1200, 10):
            d("PFADD", "h", *[f"{limit}:{i + j}" for j in range(10)])
            d("PFDEBUG", "ENCODING", "h")
            d("STRLEN", "h")
        d("GET", "h")
    d("CONFIG", "GET", "hll-sparse-max-bytes")


def test_promotion_boundary_one_element_at_a_time(diff):
    """One element per PFADD, STRLEN after each, up to the switch: a
    string may reach hll-sparse-max-bytes exactly and stay sparse (Valkey
    promotes only past it), which batches of elements hide."""
    for limit in (60, 100, 301, 500, 1000, 3000):
        cmds = [["CONFIG", "SET", "hll-sparse-max-bytes", str(limit)], ["DEL", "h"]]
        cmds += [c for i in range(limit * 2)
                 for c in (["PFADD", "h", f"{limit}/{i}"], ["STRLEN", "h"])]
        replies = _both(diff, cmds)
        lengths = [int(r[1:-2]) for r in replies[3::2]]
        assert max(x for x in lengths if x <= limit) > limit - 4
        assert lengths[-1] == 12304
    _both(diff, [["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]])


def _dense_value(registers) -> bytes:
    """A dense HLL string (cache marked invalid) holding these registers:
    6 bits each, packed from the least significant bit (the test's own
    packing, independent of hotkv's)."""
    acc = 0
    for i, r in enumerate(registers):
        acc |= r << (6 * i)
    return b"HYLL\x00\x00\x00\x00" + bytes(7) + b"\x80" + acc.to_bytes(12288, "little")


def test_estimator_on_crafted_registers(d):
    """PFCOUNT's estimate for register histograms PFADD rarely reaches:
    every value 0..63, many registers at 50/51 (Ertl's tau term), one
    register set, all equal -- single key (cache rewritten), several
    keys, and after PFMERGE."""
    rng = random.Random(11)
    shapes = [
        [0] * 16384,
        [1] * 16384,
        [51] * 16384,
        [50] * 8192 + [51] * 8192,
        [0] * 16383 + [7],
        [rng.randrange(52) for _ in range(16384)],
        [rng.randrange(64) for _ in range(16384)],
        [min(51, off + int(rng.expovariate(0.7))) for off in (0, 10, 30, 45)
         for _ in range(4096)],
        [rng.choice((0, 0, 0, 1, 2, 51)) for _ in range(16384)],
        # High registers only, so the tau term (scaled by 2^-50) shows in
        # the estimate and the estimate stays below 2^63.
        [45] * 8192 + [51] * 8192,
        [48] * 12000 + [51] * 4384,
        [rng.randrange(40, 52) for _ in range(16384)],
    ]
    for i, regs in enumerate(shapes):
        key = "x%d" % i
        d("SET", key, _dense_value(regs))
        d("PFCOUNT", key)
        d("GETRANGE", key, "8", "15")
        d("PFCOUNT", key, "missing")
        d("PFMERGE", "m%d" % i, key)
        d("PFCOUNT", "m%d" % i)
    d("PFCOUNT", *["x%d" % i for i in range(len(shapes))])


def test_ttl_kept(d):
    for cmd in (["PFADD", "h", "a"], ["EXPIRE", "h", "100"], ["PFADD", "h", "b"],
                ["TTL", "h"], ["PFCOUNT", "h"], ["TTL", "h"], ["PFMERGE", "h", "x"],
                ["TTL", "h"], ["PFDEBUG", "TODENSE", "h"], ["TTL", "h"],
                ["PFADD", "h", "c"], ["TTL", "h"]):
        d(*cmd)


def test_large_registers_promote(d):
    """A register value over 32 cannot be sparse: promoted at once."""
    # Elements whose hash has many trailing zeros after the index bits are
    # rare; a dense HLL built from them is reached through PFMERGE.
    d("SET", "h", b"HYLL\x00" + bytes(11) + b"\xff" * 12288)
    d("PFCOUNT", "h")
    d("PFMERGE", "m", "h")
    d("GET", "m")
    d("PFDEBUG", "GETREG", "h")
    d("PFADD", "s", "a")
    d("PFMERGE", "s", "h")
    d("GET", "s")
    d("PFCOUNT", "s", "h")


# ----------------------------------------------------------------------
# PFMERGE and multi-key PFCOUNT
# ----------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS[:2])
def test_merge_mixed_encodings(diff, seed):
    rng = random.Random(seed)
    sizes = {"s1": 10, "s2": 200, "s3": 700, "d1": 5000 * SCALE, "d2": 50}
    cmds = []
    for key, n in sizes.items():
        els = [b"%d:%s:%d" % (seed, key.encode(), rng.randrange(1 << 30)) for _ in range(n)]
        for i in range(0, n, 500):
            cmds.append(["PFADD", key, *els[i:i + 500]])
    cmds.append(["PFDEBUG", "TODENSE", "d2"])
    _both(diff, cmds)
    combos = [("new1", "s1", "s2"), ("new2", "s1", "d1"), ("s3", "s1", "s2"),
              ("s1", "d2"), ("d1", "s3", "missing"), ("new3",), ("new4", "missing"),
              ("s2", "s2"), ("d2", "s1", "s2", "s3", "d1")]
    cmds = []
    for combo in combos:
        cmds += [["PFCOUNT", *(combo[1:] or ("missing",))], ["PFMERGE", *combo],
                 ["GET", combo[0]], ["PFDEBUG", "ENCODING", combo[0]],
                 ["PFCOUNT", combo[0]], ["GET", combo[0]]]
    _both(diff, cmds)
    _both(diff, [["PFCOUNT", *sizes], ["PFCOUNT", "new1", "new2", "new3", "s1"]])


def test_merge_into_sparse_promotes(d):
    """A sparse destination is edited register by register and promoted
    when it outgrows the limit."""
    d("CONFIG", "SET", "hll-sparse-max-bytes", "200")
    d("PFADD", "a", *[f"a{i}" for i in range(60)])
    d("PFADD", "b", *[f"b{i}" for i in range(60)])
    d("PFDEBUG", "ENCODING", "a")
    d("PFMERGE", "dest", "a", "b")
    d("PFDEBUG", "ENCODING", "dest")
    d("GET", "dest")


# ----------------------------------------------------------------------
# DUMP / RESTORE across servers
# ----------------------------------------------------------------------

@pytest.mark.parametrize("n", [5, 800, 4000])
def test_dump_restore_both_ways(diff, n):
    els = [b"e%d" % i for i in range(n)]
    for src, dst in ((diff.theirs, diff.ours), (diff.ours, diff.theirs)):
        for c in (src, dst):
            c.call("DEL", "h", "r")
        src.call("PFADD", "h", *els)
        dumped = src.call("DUMP", "h")
        payload = dumped.split(b"\r\n", 1)[1][:-2]
        assert dst.call("RESTORE", "r", "0", payload) == b"+OK\r\n"
        assert dst.call("GET", "r") == src.call("GET", "h")
        assert dst.call("PFCOUNT", "r") == src.call("PFCOUNT", "h")
        more = [b"m%d" % i for i in range(300)]
        assert dst.call("PFADD", "r", *more) == src.call("PFADD", "h", *more)
        assert dst.call("GET", "r") == src.call("GET", "h")
        assert dst.call("PFDEBUG", "ENCODING", "r") == src.call("PFDEBUG", "ENCODING", "h")


# ----------------------------------------------------------------------
# Events, WATCH, MULTI, Lua, AOF
# ----------------------------------------------------------------------

def _events(client: RawClient) -> list[bytes]:
    out = []
    data = client.read_available(0.3)
    for chunk in data.split(b"pmessage")[1:]:
        parts = chunk.split(b"\r\n")
        out.append(parts[4] + b" " + parts[6])
    return out


def test_keyspace_events(target):
    admin = target.admin
    admin.call("CONFIG", "SET", "notify-keyspace-events", "KEAn")
    sub = target.client()
    sub.call("PSUBSCRIBE", "__keyevent@*")
    try:
        for cmd in (["PFADD", "h", "a"], ["PFADD", "h", "a"], ["PFCOUNT", "h"],
                    ["PFADD", "h2"], ["PFMERGE", "m", "h", "h2"], ["PFMERGE", "m"],
                    ["PFCOUNT", "m"], ["PFDEBUG", "TODENSE", "m"]):
            admin.call(*cmd)
        got = _events(sub)
    finally:
        admin.call("CONFIG", "SET", "notify-keyspace-events", "")
    assert got == [b"__keyevent@0__:new h", b"__keyevent@0__:pfadd h",
                   b"__keyevent@0__:new h2", b"__keyevent@0__:pfadd h2",
                   b"__keyevent@0__:new m", b"__keyevent@0__:pfadd m",
                   b"__keyevent@0__:pfadd m"], target.name


def test_pfcount_cache_write_fails_watch(d):
    d("PFADD", "h", "a", "b")
    d("WATCH", "h")
    d("PFCOUNT", "h")          # writes the cache: a change to the key
    d("MULTI")
    d("PING")
    d("EXEC")
    d("WATCH", "h")
    d("PFCOUNT", "h")          # cache valid: no change
    d("MULTI")
    d("PING")
    d("EXEC")


def test_multi_and_lua(d):
    d("MULTI")
    d("PFADD", "h", "a", "b", "c")
    d("PFCOUNT", "h")
    d("PFMERGE", "m", "h")
    d("PFCOUNT", "m", "h")
    d("EXEC")
    d("EVAL", "redis.call('PFADD', KEYS[1], 'x', 'y'); return redis.call('PFCOUNT', KEYS[1])",
      "1", "h")
    d("EVAL", "return redis.pcall('PFADD', KEYS[1], 'x')", "1", "missing-not-hll")
    d("SET", "s", "plain")
    d("EVAL", "return redis.pcall('PFCOUNT', KEYS[1])", "1", "s")
    # PFCOUNT may write the cache: Valkey counts it as a write (may_replicate).
    d("EVAL_RO", "return redis.pcall('PFCOUNT', KEYS[1])", "1", "m")
    d("GET", "h")


def test_aof_propagation(hotkv_server_factory, tmp_path):
    """PFADD that changes nothing and PFCOUNT answered from the cache are
    not logged; PFCOUNT that writes the cache is (as Valkey's dirty++);
    the log replays into the same bytes."""
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    try:
        c.call("PFADD", "h", "a", "b")
        c.call("PFADD", "h", "a")
        c.call("PFCOUNT", "h")
        c.call("PFCOUNT", "h")
        c.call("PFCOUNT", "h", "missing")
        c.call("PFMERGE", "m", "h")
        c.call("PFDEBUG", "TODENSE", "m")
        c.call("PFDEBUG", "TODENSE", "m")
        c.call("PFDEBUG", "GETREG", "h")
        before = (c.call("GET", "h"), c.call("GET", "m"))
    finally:
        c.close()
    logged = [cmd for cmd in aof_commands(tmp_path) if cmd[0].upper() != b"SELECT"]
    assert logged == [[b"PFADD", b"h", b"a", b"b"], [b"PFCOUNT", b"h"],
                      [b"PFMERGE", b"m", b"h"], [b"PFDEBUG", b"TODENSE", b"m"],
                      [b"PFDEBUG", b"GETREG", b"h"]]
    srv.stop()
    again = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(again.host, again.port)
    try:
        assert (c.call("GET", "h"), c.call("GET", "m")) == before
        # The rewrite writes the HLL strings (RDB preamble or SET): the same
        # bytes after a restart.
        assert c.call("BGREWRITEAOF").startswith(b"+")
        assert wait_for(lambda: b"aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0"
                        in c.call("INFO", "persistence"), timeout=10)
    finally:
        c.close()
    again.stop()
    third = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(third.host, third.port)
    try:
        assert (c.call("GET", "h"), c.call("GET", "m")) == before
    finally:
        c.close()


def test_debug_reload_keeps_bytes(hotkv_server_factory, ref_server):
    """An RDB save and load (DEBUG RELOAD) keeps every HLL byte, and the
    reloaded value behaves as the reference's (encoding included)."""
    srv = hotkv_server_factory(**{"enable-debug-command": "yes"})
    ours = RawClient(srv.host, srv.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    try:
        theirs.call("FLUSHALL")
        cmds = [["PFADD", "s", "a", "b"], ["PFADD", "d", *[f"e{i}" for i in range(3000)]],
                ["PFCOUNT", "d"], ["DEBUG", "RELOAD"], ["GET", "s"], ["GET", "d"],
                ["OBJECT", "ENCODING", "s"], ["PFADD", "s", "c"], ["OBJECT", "ENCODING", "s"],
                ["PFCOUNT", "s", "d"], ["GET", "s"]]
        for cmd in cmds:
            assert ours.call(*cmd) == theirs.call(*cmd), cmd
    finally:
        ours.close()
        theirs.close()
