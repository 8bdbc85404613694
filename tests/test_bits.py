"""The bitmap commands (hotkv/commands/bits.py) and strings changed in place
(hotkv/commands/strings.py, hotkv/types/strings.py), byte for byte against
the reference valkey-server 8.1.8.

* scenario tables (RESP2 and RESP3): SETBIT/GETBIT/BITCOUNT/BITPOS/BITOP/
  BITFIELD/BITFIELD_RO edge cases and errors, OBJECT ENCODING of values
  changed in place, WRONGTYPE, GETKEYSANDFLAGS of BITFIELD;
* seeded random workloads, each reply compared: SETBIT at random offsets,
  BITOP over keys of different lengths (missing keys, NOT, the destination
  among the sources), BITFIELD with every type width, ``#N`` offsets, values
  around the limits and every overflow mode, BITPOS/BITCOUNT with random
  BYTE and BIT ranges, APPEND/SETRANGE chains, GET/DUMP/OBJECT ENCODING of
  every key at the end;
* keyspace events and AOF propagation, compared with the reference's own
  notifications and appendonly log;
* in-place mutation: a chain of APPENDs keeps the one stored bytearray (the
  object itself is inspected: the session server runs in this process), and
  nothing that was replied or copied changes with it (MULTI, Lua, COPY).

CI runs seeds 1-2 of 1500 commands in each protocol.  Long run:
``HOTKV_BITS_SEEDS=1-200 HOTKV_BITS_OPS=20000 python -m pytest -q
tests/test_bits.py -k random``.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from support import RawClient, ReferenceValkey, aof_commands, scenario_tests, start_aof_server

LLMAX = "9223372036854775807"
LLMIN = "-9223372036854775808"
# An absolute expiry (2100-01-01): PEXPIRETIME is then exact on both servers,
# where a TTL read a moment later may round to a different second.
DEADLINE = "4102444800"


def _seeds(text: str) -> list:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


SEEDS = _seeds(os.environ.get("HOTKV_BITS_SEEDS", "1-2"))
OPS = int(os.environ.get("HOTKV_BITS_OPS", "1500"))

SCENARIOS = {
    "setbit_getbit": [
        ("SETBIT", "k", "0", "1"), ("SETBIT", "k", "0", "1"), ("GET", "k"),
        ("OBJECT", "ENCODING", "k"), ("SETBIT", "k", "15", "1"), ("GETBIT", "k", "15"),
        ("GETBIT", "k", "16"), ("SETBIT", "k", "1", "2"), ("SETBIT", "k", "1", "-1"),
        ("SETBIT", "k", "1", "01"), ("SETBIT", "k", "-1", "1"), ("SETBIT", "k", "#1", "1"),
        ("SETBIT", "k", "4294967296", "1"), ("GETBIT", "k", "4294967296"),
        ("GETBIT", "k", LLMAX), ("GETBIT", "nokey", "0"),
        ("SET", "n", "12"), ("OBJECT", "ENCODING", "n"), ("SETBIT", "n", "2", "1"),
        ("OBJECT", "ENCODING", "n"), ("GET", "n"),
        ("SET", "e", "ab"), ("SETBIT", "e", "0", "0"), ("OBJECT", "ENCODING", "e"),
        ("SET", "t", "x"), ("EXPIREAT", "t", DEADLINE), ("SETBIT", "t", "100", "1"),
        ("PEXPIRETIME", "t"),
        ("RPUSH", "l", "a"), ("SETBIT", "l", "0", "1"), ("GETBIT", "l", "0"),
    ],
    "bitcount": [
        ("SET", "s", "foobar"), ("BITCOUNT", "s"), ("BITCOUNT", "s", "1", "1"),
        ("BITCOUNT", "s", "-2", "-1"), ("BITCOUNT", "s", "-1", "-2"),
        ("BITCOUNT", "s", "5", "30", "BIT"), ("BITCOUNT", "s", "-7", "-3", "bit"),
        ("BITCOUNT", "s", "0", "-1", "byte"), ("BITCOUNT", "s", "0"),
        ("BITCOUNT", "s", "0", "-1", "bits"), ("BITCOUNT", "s", "x", "1"),
        ("BITCOUNT", "s", "0", "x", "FOO"), ("BITCOUNT", "s", "0", "1", "BIT", "x"),
        ("BITCOUNT", "s", LLMIN, LLMAX, "BIT"), ("BITCOUNT", "nokey", "0", "-1", "BIT"),
        ("BITCOUNT", "nokey", "0", "-1", "FOO"), ("LPUSH", "l", "a"), ("BITCOUNT", "l"),
        ("BITCOUNT", "l", "0", "1", "FOO"),
    ],
    "bitpos": [
        ("BITPOS", "nokey", "0"), ("BITPOS", "nokey", "1"), ("BITPOS", "nokey", "0", "5", "9"),
        ("SET", "s", b"\xff\xf0\x00"), ("BITPOS", "s", "0"), ("BITPOS", "s", "1", "2"),
        ("BITPOS", "s", "0", "0", "0"), ("BITPOS", "s", "0", "0", "-3"),
        ("BITPOS", "s", "1", "7", "15", "BIT"), ("BITPOS", "s", "0", "7", "11", "bit"),
        ("BITPOS", "s", "0", "-20", "-1", "BIT"), ("BITPOS", "s", "1", "16", "23", "BIT"),
        ("BITPOS", "s", "1", "3", "3", "BIT"), ("BITPOS", "s", "0", "3", "2", "BIT"),
        ("SET", "f", b"\xff\xff"), ("BITPOS", "f", "0"), ("BITPOS", "f", "0", "0"),
        ("BITPOS", "f", "0", "0", "-1"), ("BITPOS", "f", "0", "1", "14", "BIT"),
        ("SET", "z", b"\x00\x00"), ("BITPOS", "z", "1"), ("BITPOS", "z", "1", "0", "-1", "BIT"),
        ("BITPOS", "s", "2"), ("BITPOS", "s", "-1"), ("BITPOS", "s", "x"),
        ("BITPOS", "s", "1", "x"), ("BITPOS", "s", "1", "0", "x"),
        ("BITPOS", "s", "1", "0", "1", "FOO"), ("BITPOS", "s", "1", "0", "1", "BIT", "x"),
        ("BITPOS", "s", "1", LLMIN, LLMAX, "BIT"), ("SET", "e", ""), ("BITPOS", "e", "0"),
        ("BITPOS", "e", "1"), ("LPUSH", "l", "a"), ("BITPOS", "l", "1"),
        ("BITPOS", "l", "2"), ("BITPOS", "l", "1", "0", "0", "FOO"),
    ],
    "bitop": [
        ("SET", "a", "foobar"), ("SET", "b", "abcdef"), ("SET", "c", "xy"),
        ("BITOP", "AND", "d", "a", "b"), ("GET", "d"), ("OBJECT", "ENCODING", "d"),
        ("BITOP", "or", "d", "a", "c", "nokey"), ("GET", "d"),
        ("BITOP", "XOR", "d", "a", "b", "c"), ("GET", "d"),
        ("BITOP", "NOT", "d", "c"), ("GET", "d"), ("BITOP", "NOT", "d", "a", "b"),
        ("BITOP", "NOT", "d"), ("BITOP", "DIFF", "d", "a", "b"), ("BITOP", "ONE", "d", "a"),
        ("BITOP", "ANDOR", "d", "a", "b"), ("BITOP", "FOO", "d", "a"),
        ("BITOP", "AND", "a", "a", "b"), ("GET", "a"),
        ("SET", "i", "1234"), ("BITOP", "OR", "d", "i"), ("GET", "d"),
        ("SET", "x", "1"), ("EXPIREAT", "x", DEADLINE), ("BITOP", "OR", "x", "b"),
        ("PEXPIRETIME", "x"),
        ("BITOP", "OR", "d", "nokey", "nokey2"), ("EXISTS", "d"),
        ("BITOP", "OR", "d", "nokey"), ("SET", "e", ""), ("BITOP", "OR", "d", "b", "e"),
        ("GET", "d"), ("BITOP", "AND", "d", "e", "nokey"), ("EXISTS", "d"),
        ("LPUSH", "l", "a"), ("BITOP", "OR", "d", "a", "l"), ("BITOP", "OR", "l", "a"),
        ("TYPE", "l"), ("BITOP", "NOT", "d", "l"), ("LPUSH", "l2", "a"),
        ("BITOP", "OR", "l2", "nokey"), ("EXISTS", "l2"),
    ],
    "bitfield": [
        ("BITFIELD", "k", "SET", "i8", "0", "-100", "GET", "u8", "0", "GET", "i4", "4"),
        ("BITFIELD", "k", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "i3",
         "3", "5", "OVERFLOW", "FAIL", "INCRBY", "i3", "3", "5", "GET", "i64", "0"),
        ("BITFIELD", "k", "SET", "u8", "#2", "255", "GET", "u8", "#2", "GET", "i8", "#2"),
        ("BITFIELD", "k", "SET", "i64", "0", LLMIN, "INCRBY", "i64", "0", "-1"),
        ("BITFIELD", "k", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "-1",
         "INCRBY", "i64", "0", LLMAX, "INCRBY", "i64", "0", LLMAX),
        ("BITFIELD", "k", "OVERFLOW", "SAT", "SET", "i8", "0", LLMIN, "SET", "i8", "0", LLMAX,
         "OVERFLOW", "WRAP", "SET", "i8", "0", LLMIN, "SET", "i8", "0", "300"),
        ("BITFIELD", "k", "SET", "u63", "1", "-1", "OVERFLOW", "SAT", "SET", "u63", "1", "-1",
         "INCRBY", "u63", "1", LLMAX, "INCRBY", "u63", "1", LLMIN),
        ("BITFIELD", "k", "GET", "u64", "0"), ("BITFIELD", "k", "GET", "i65", "0"),
        ("BITFIELD", "k", "GET", "i0", "0"), ("BITFIELD", "k", "GET", "x8", "0"),
        ("BITFIELD", "k", "GET", "", "0"), ("BITFIELD", "k", "GET", "I8", "0"),
        ("BITFIELD", "k", "GET", "u8", "-1"), ("BITFIELD", "k", "GET", "u8", "#-1"),
        ("BITFIELD", "k", "GET", "u8", "#" + LLMAX), ("BITFIELD", "k", "GET", "u8", "##1"),
        ("BITFIELD", "k", "GET", "u8", "4294967295"), ("BITFIELD", "k", "GET", "u8", "4294967296"),
        ("BITFIELD", "k", "SET", "u8", "0", "x"), ("BITFIELD", "k", "SET", "u8", "0"),
        ("BITFIELD", "k", "GET", "u8"), ("BITFIELD", "k", "FOO", "u8", "0"),
        ("BITFIELD", "k", "OVERFLOW", "FOO", "GET", "u8", "0"), ("BITFIELD", "k", "OVERFLOW"),
        ("BITFIELD", "k", "GET", "x8", "0", "SET", "u8", "0", "1"),
        ("BITFIELD", "k"), ("BITFIELD", "nokey"), ("BITFIELD", "nokey", "GET", "u8", "100"),
        ("EXISTS", "nokey"),
        ("BITFIELD", "new", "OVERFLOW", "FAIL", "INCRBY", "u2", "10", "7"), ("GET", "new"),
        ("BITFIELD", "new", "SET", "u1", "0", "0"), ("OBJECT", "ENCODING", "new"),
        ("SET", "n", "5"), ("BITFIELD", "n", "GET", "u8", "0"), ("OBJECT", "ENCODING", "n"),
        ("BITFIELD", "n", "SET", "u8", "0", "0"), ("OBJECT", "ENCODING", "n"), ("GET", "n"),
        ("BITFIELD_RO", "k", "GET", "i8", "0", "GET", "u4", "#3"), ("BITFIELD_RO", "k"),
        ("BITFIELD_RO", "k", "GET", "i8", "0", "SET", "i8", "0", "1"),
        ("BITFIELD_RO", "k", "INCRBY", "i8", "0", "x"), ("BITFIELD_RO", "k", "FOO"),
        ("BITFIELD_RO", "nokey", "GET", "u8", "0"),
        ("LPUSH", "l", "a"), ("BITFIELD", "l", "GET", "u8", "0"), ("BITFIELD", "l"),
        ("BITFIELD", "l", "SET", "u8", "0", "1"), ("BITFIELD_RO", "l", "GET", "u8", "0"),
        ("BITFIELD", "l", "GET", "u99", "0"),
    ],
    "integer_parsing": [
        ("BITFIELD", "k", "GET", "i+8", "0"), ("BITFIELD", "k", "GET", "u08", "0"),
        ("BITFIELD", "k", "GET", b"u8\x00junk", "0"), ("BITFIELD", "k", "GET", "u8", "#0"),
        ("BITFIELD", "k", "GET", "u8", "#-0"), ("BITFIELD", "k", "GET", "u8", "-0"),
        ("BITFIELD", "k", "GET", "u8", "#"), ("BITFIELD", "k", "GET", "u8", "+1"),
        ("BITFIELD", "k", "SET", "u8", "#1", "+5"), ("BITFIELD", "k", "SET", "u8", "#1", "05"),
        ("BITFIELD", "k", "SET", "i1", "0", "-1", "GET", "i1", "0", "GET", "u1", "0"),
        ("BITFIELD", "k", "SET", "i64", "#1", "-1", "GET", "i64", "#1", "GET", "u63", "#1",
         "GET", "u63", "65"),
        ("BITFIELD", "k", "INCRBY", "u63", "0", LLMAX, "OVERFLOW", "SAT", "INCRBY", "u63", "0",
         LLMAX, "OVERFLOW", "FAIL", "INCRBY", "u63", "0", "1"),
        ("BITFIELD", "k", "OVERFLOW", "WRAP", "INCRBY", "i64", "0", LLMAX, "INCRBY", "i64", "0",
         LLMAX, "INCRBY", "i64", "0", LLMIN, "INCRBY", "i64", "0", LLMIN),
        ("BITFIELD", "k", "OVERFLOW", "SAT", "SET", "u2", "0", LLMIN, "SET", "i2", "0", LLMAX,
         "OVERFLOW", "WRAP", "SET", "u2", "0", LLMIN, "SET", "i2", "0", "-3"),
        ("SETBIT", "k", "0", "+1"), ("SETBIT", "k", "+0", "1"), ("SETBIT", "k", "00", "1"),
        ("GETBIT", "k", "01"), ("BITPOS", "k", "01"), ("BITPOS", "k", "1", "+0"),
        ("BITCOUNT", "k", "0", "+1"),
    ],
    "raw_strings": [
        ("SET", "a", "12"), ("APPEND", "a", "3"), ("OBJECT", "ENCODING", "a"), ("GET", "a"),
        ("INCR", "a"), ("OBJECT", "ENCODING", "a"), ("APPEND", "a", ""),
        ("OBJECT", "ENCODING", "a"), ("APPEND", "b", "7"), ("OBJECT", "ENCODING", "b"),
        ("SETRANGE", "c", "2", "x"), ("OBJECT", "ENCODING", "c"), ("GET", "c"),
        ("SET", "d", "hello"), ("SETRANGE", "d", "1", ""), ("OBJECT", "ENCODING", "d"),
        ("SETRANGE", "d", "1", "EL"), ("OBJECT", "ENCODING", "d"), ("GET", "d"),
        ("SETRANGE", "d", "8", "!"), ("GET", "d"), ("STRLEN", "d"), ("GETRANGE", "d", "1", "-2"),
        ("COPY", "d", "d2"), ("OBJECT", "ENCODING", "d2"), ("APPEND", "d", "more"),
        ("GET", "d2"), ("GET", "d"), ("RENAME", "d", "d3"), ("OBJECT", "ENCODING", "d3"),
        ("TYPE", "d3"), ("SCAN", "0", "TYPE", "string", "MATCH", "d3"),
        ("SET", "d3", "x", "GET"), ("OBJECT", "ENCODING", "d3"), ("APPEND", "d3", "y"),
        ("GETSET", "d3", "z"), ("APPEND", "d3", "w"), ("GETDEL", "d3"),
        ("APPEND", "g", "v"), ("APPEND", "g", "w"), ("GETEX", "g", "PX", "100000"),
        ("MGET", "g", "d2", "nokey"), ("LCS", "g", "d2"), ("INCRBYFLOAT", "c", "1"),
        ("SET", "f", "1.5"), ("APPEND", "f", "0"), ("INCRBYFLOAT", "f", "1"),
        ("SET", "i", "41"), ("SETRANGE", "i", "0", "5"), ("INCRBY", "i", "1"), ("GET", "i"),
        ("RPUSH", "ids", "1", "2"), ("SET", "w_1", "5"), ("APPEND", "w_1", "0"),
        ("SET", "w_2", "7"), ("SETRANGE", "w_2", "1", "1"), ("SORT", "ids", "BY", "w_*"),
        ("SORT", "ids", "BY", "w_*", "GET", "w_*", "GET", "#"),
    ],
}

test_scenarios_resp2, test_scenarios_resp3 = scenario_tests(SCENARIOS)


@pytest.mark.parametrize("args", [
    ("a0",), ("a0", "GET", "i8", "0"), ("a0", "GET", "i8", "0", "OVERFLOW", "SAT"),
    ("a0", "GET", "i8"), ("a0", "OVERFLOW"), ("a0", "SET", "i8", "0", "1", "FOO"),
    ("a0", "get", "u1", "0", "incrby", "u1", "0", "1"), ("a0", "FOO")])
def test_bitfield_getkeysandflags(diff, args):
    diff("COMMAND", "GETKEYSANDFLAGS", "BITFIELD", *args)


# ----------------------------------------------------------------------
# Seeded random workloads
# ----------------------------------------------------------------------

BITMAPS = ["b0", "b1", "b2", "b3"]


def _offset(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.randrange(64)
    if r < 0.95:
        return rng.randrange(2048)
    return rng.randrange(65536)


def _range_args(rng: random.Random) -> list:
    """[] or [start] or [start end] or [start end BYTE|BIT] (a few invalid)."""
    n = rng.randrange(4)
    span = rng.choice([8, 40, 300])
    args = [str(rng.randrange(-span, span)) for _ in range(min(n, 2))]
    if n == 3:
        args.append(rng.choice(["BIT", "BYTE", "bit", "byte", "BITS"]))
    return args


def _bf_type(rng: random.Random) -> tuple:
    if rng.random() < 0.02:
        return rng.choice(["u64", "i65", "i0", "x8", "u", "i-1"]), 8
    signed = rng.random() < 0.5
    bits = rng.randrange(1, 65 if signed else 64)
    return ("i" if signed else "u") + str(bits), bits


def _bf_value(rng: random.Random, bits: int) -> str:
    r = rng.random()
    if r < 0.3:
        return str(rng.randrange(-20, 20))
    if r < 0.6:
        edge = 1 << rng.choice([bits - 1, bits])
        return str(rng.choice([edge, -edge, edge - 1, -edge - 1, edge + 1]) + rng.randrange(-2, 3))
    if r < 0.75:
        return rng.choice([LLMAX, LLMIN, "0", "-1", "1"])
    return str(rng.randrange(-(1 << 63), 1 << 63))


def _bitfield(rng: random.Random, ro: bool) -> list:
    argv = ["BITFIELD_RO" if ro else "BITFIELD", rng.choice(BITMAPS)]
    for _ in range(rng.randrange(1, 5)):
        r = rng.random()
        if r < 0.2:
            argv += ["OVERFLOW", rng.choice(["WRAP", "SAT", "FAIL", "sat", "fail"])]
            continue
        name, bits = _bf_type(rng)
        off = _offset(rng) if rng.random() < 0.8 else rng.randrange(64)
        off = str(off) if rng.random() < 0.8 else "#%d" % (off // max(bits, 1))
        if ro and rng.random() < 0.9 or r < 0.45:
            argv += ["GET", name, off]
        else:
            argv += [rng.choice(["SET", "INCRBY"]), name, off, _bf_value(rng, bits)]
    return argv


def _command(rng: random.Random) -> list:
    r = rng.random()
    key = rng.choice(BITMAPS)
    if r < 0.25:
        return ["SETBIT", key, str(_offset(rng)), str(rng.randrange(2))]
    if r < 0.32:
        return ["GETBIT", key, str(_offset(rng))]
    if r < 0.42:
        return ["BITCOUNT", key, *_range_args(rng)]
    if r < 0.52:
        return ["BITPOS", key, str(rng.randrange(2)), *_range_args(rng)]
    if r < 0.60:
        op = rng.choice(["AND", "OR", "XOR", "NOT", "and"])
        n = 1 if op == "NOT" else rng.randrange(1, 5)
        srcs = [rng.choice(BITMAPS + ["missing"]) for _ in range(n)]
        return ["BITOP", op, rng.choice(BITMAPS), *srcs]
    if r < 0.75:
        return _bitfield(rng, rng.random() < 0.2)
    if r < 0.80:
        return ["APPEND", rng.choice(["s", key]), rng.choice(["", "x", "12", "\x00\xff" * 3])]
    if r < 0.85:
        return ["SETRANGE", rng.choice(["s", key]), str(rng.randrange(40)),
                rng.choice(["", "ab", "7", "zzzzzzzz"])]
    if r < 0.88:
        return ["GETRANGE", rng.choice(["s", key]), str(rng.randrange(-30, 30)),
                str(rng.randrange(-30, 30))]
    if r < 0.90:
        return ["SET", rng.choice(["s", key]), rng.choice(["7", "-3", "abc", "", "x" * 50])]
    if r < 0.91:
        return ["DEL", rng.choice(BITMAPS + ["s"])]
    if r < 0.92:
        return ["INCR", rng.choice(["s", key])]
    if r < 0.93:
        return ["EXPIREAT", key, DEADLINE]
    if r < 0.94:
        return ["PEXPIRETIME", key]
    if r < 0.95:
        return ["RPUSH", "l", "x"] if rng.random() < 0.5 else ["SETBIT", "l", "1", "1"]
    if r < 0.97:
        return ["OBJECT", "ENCODING", rng.choice(BITMAPS + ["s"])]
    return ["GET", rng.choice(BITMAPS + ["s"])]


def _batch_diff(ours: RawClient, theirs: RawClient, cmds: list, history: list):
    """Send the whole batch to both servers (pipelined), then compare the
    replies one by one."""
    for c in cmds:
        ours.send(*c)
        theirs.send(*c)
    for c in cmds:
        a, b = ours.read_reply(), theirs.read_reply()
        history.append(c)
        assert a == b, (f"{c!r} after {len(history)} commands (last: {history[-6:]!r}):\n"
                        f" hotkv:  {a!r}\n valkey: {b!r}")


@pytest.mark.parametrize("proto", ["2", "3"])
@pytest.mark.parametrize("seed", SEEDS)
def test_random_bit_workload_matches_valkey(diff, seed, proto):
    if proto == "3":
        diff.resp3()
    rng = random.Random(seed * 7919 + int(proto))
    history: list = []
    batch = 200
    for start in range(0, OPS, batch):
        cmds = [_command(rng) for _ in range(min(batch, OPS - start))]
        _batch_diff(diff.ours, diff.theirs, cmds, history)
    final = []
    for key in BITMAPS + ["s", "l"]:
        final += [["GET", key], ["STRLEN", key], ["OBJECT", "ENCODING", key],
                  ["PEXPIRETIME", key], ["BITCOUNT", key], ["TYPE", key]]
    _batch_diff(diff.ours, diff.theirs, final, history)
    # DUMP: hotkv never LZF-compresses a DUMP (hotkv/types/codec.py), so
    # the payloads are compared by what they restore to, both ways.
    for key in BITMAPS + ["s"]:
        for src, dst in ((diff.ours, diff.theirs), (diff.theirs, diff.ours)):
            dump = src.call("DUMP", key)
            if dump == src.call("DUMP", "missing"):
                continue
            body = dump[dump.index(b"\r\n") + 2:-2]
            assert dst.call("RESTORE", key + "_copy", "0", body, "REPLACE") == b"+OK\r\n"
            assert dst.call("GET", key + "_copy") == src.call("GET", key), key


# ----------------------------------------------------------------------
# Keyspace events and AOF propagation, against the reference's own
# ----------------------------------------------------------------------

EVENT_SCRIPT = [
    ("SETBIT", "k", "3", "1"), ("SETBIT", "k", "3", "1"), ("SETBIT", "k", "100", "0"),
    ("SETBIT", "k", "3", "0"), ("BITFIELD", "k", "GET", "u8", "0"),
    ("BITFIELD", "k", "SET", "u8", "0", "0"), ("BITFIELD", "k", "SET", "u8", "0", "9",
                                               "INCRBY", "u8", "0", "1"),
    ("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9"),
    ("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "1"),
    ("BITFIELD_RO", "k", "GET", "u8", "0"),
    ("BITOP", "OR", "d", "k", "f"), ("BITOP", "AND", "d", "k", "nokey"),
    ("BITOP", "OR", "d", "nokey"), ("BITOP", "OR", "d", "nokey"),
    ("SET", "s", "ab"), ("APPEND", "s", "c"), ("APPEND", "s", ""), ("SETRANGE", "s", "1", ""),
    ("SETRANGE", "s", "1", "Z"), ("SETRANGE", "new", "2", "q"), ("APPEND", "new2", "1"),
    ("SET", "sentinel", "1"),
]


def _collect_events(host, port, script) -> list:
    """The keyspace/keyevent messages ``script`` causes on one server."""
    c = RawClient(host, port)
    sub = RawClient(host, port)
    try:
        c.call("FLUSHALL")
        c.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
        sub.call("PSUBSCRIBE", "__key*__:*")
        for cmd in script:
            c.call(*cmd)
        out = []
        for _ in range(1000):              # bounded: stops at the sentinel's event
            msg = sub.read_reply()
            out.append(msg)
            if b"__keyevent@0__:set\r\n$8\r\nsentinel" in msg:
                return out
        raise AssertionError("the sentinel's event never came: %r" % out[-5:])
    finally:
        c.call("CONFIG", "SET", "notify-keyspace-events", "")
        c.close()
        sub.close()


def test_keyspace_events_match_valkey(server, ref_server):
    ours = _collect_events(server.host, server.port, EVENT_SCRIPT)
    theirs = _collect_events(ref_server.host, ref_server.port, EVENT_SCRIPT)
    assert ours == theirs


def test_aof_propagation_matches_valkey(hotkv_server_factory, tmp_path):
    (tmp_path / "hotkv").mkdir()
    srv = start_aof_server(hotkv_server_factory, tmp_path / "hotkv")
    ref = ReferenceValkey("--appendonly", "yes", "--appendfsync", "always",
                          "--aof-use-rdb-preamble", "no")
    ref.start()
    try:
        for host, port in ((srv.host, srv.port), (ref.host, ref.port)):
            c = RawClient(host, port)
            try:
                for cmd in EVENT_SCRIPT:
                    c.call(*cmd)
            finally:
                c.close()
        ours = aof_commands(tmp_path / "hotkv")
        theirs = aof_commands(ref.dir)
    finally:
        ref.stop()
    assert theirs and theirs[-1] == [b"SET", b"sentinel", b"1"]
    assert ours == theirs


# ----------------------------------------------------------------------
# Strings changed in place
# ----------------------------------------------------------------------

def _stored(server, key: bytes):
    """The object the session server stores at key in db 0 (read between
    commands: the server's loop is idle then)."""
    return server.server.dbs[0].data.get(key)


def test_append_chain_mutates_one_buffer(server, raw):
    """10,000 APPENDs to a 10 MB string change one bytearray in place: the
    stored object stays the same one (a copy per APPEND would replace it)."""
    big = b"x" * (10 << 20)
    raw.call("SET", "big", big)
    assert type(_stored(server, b"big")) is bytes
    assert raw.call("APPEND", "big", "y") == b":%d\r\n" % (len(big) + 1)
    buf = _stored(server, b"big")
    assert type(buf) is bytearray
    n = 10_000
    for start in range(0, n, 500):            # pipelined, 500 at a time
        for _ in range(500):
            raw.send("APPEND", "big", "0123456789")
        for i in range(500):
            assert raw.read_reply() == b":%d\r\n" % (len(big) + 1 + 10 * (start + i + 1))
    assert _stored(server, b"big") is buf
    assert raw.call("STRLEN", "big") == b":%d\r\n" % (len(big) + 1 + 10 * n)
    assert raw.call("GETRANGE", "big", str(len(big) - 1), str(len(big) + 10)) == \
        b"$12\r\nxy0123456789\r\n"
    for cmd in (("SETRANGE", "big", "5", "abc"), ("SETBIT", "big", "7", "1"),
                ("BITFIELD", "big", "INCRBY", "u8", "#3", "1")):
        raw.call(*cmd)
        assert _stored(server, b"big") is buf
    assert raw.call("GETRANGE", "big", "0", "9") == b"$10\r\nyxxyxabcxx\r\n"
    assert raw.call("OBJECT", "ENCODING", "big") == b"$3\r\nraw\r\n"
    raw.call("DEL", "big")


def test_replies_do_not_change_with_the_key(diff):
    """A value already replied (queued in MULTI, held by Lua) or copied does
    not follow later in-place changes to the key."""
    diff("SET", "k", "ab")
    diff("APPEND", "k", "c")
    diff("MULTI")
    for cmd in (("GET", "k"), ("APPEND", "k", "d"), ("GETRANGE", "k", "0", "-1"),
                ("SETRANGE", "k", "0", "Z"), ("MGET", "k", "k"), ("SETBIT", "k", "0", "0"),
                ("GETSET", "k", "new"), ("APPEND", "k", "!"), ("GET", "k")):
        diff(*cmd)
    diff("EXEC")
    diff("EVAL", "local a = redis.call('GET', KEYS[1]); redis.call('APPEND', KEYS[1], 'x');"
         " redis.call('SETRANGE', KEYS[1], 0, 'Q'); local b = redis.call('GET', KEYS[1]);"
         " return {a, b}", "1", "k")
    diff("COPY", "k", "c")
    diff("APPEND", "k", "more")
    diff("SETBIT", "c", "0", "1")
    diff("MGET", "k", "c")
    diff("SORT", "nolist", "BY", "nosort", "GET", "k")


def test_digest_of_raw_strings_matches_valkey(hotkv_server_factory, ref_server):
    """DEBUG DIGEST(-VALUE) of values changed in place: the same as Valkey's,
    and the same as for the equal value stored by SET."""
    srv = hotkv_server_factory(enable_debug_command="yes")
    ours = RawClient(srv.host, srv.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    try:
        theirs.call("FLUSHALL")
        script = [("SET", "a", "12"), ("APPEND", "a", "3"), ("SETBIT", "b", "77", "1"),
                  ("SETRANGE", "c", "2", "xy"), ("BITOP", "XOR", "d", "a", "b"),
                  ("SET", "plain", "1230")]
        for cmd in script:
            assert ours.call(*cmd) == theirs.call(*cmd), cmd
        for cmd in (("DEBUG", "DIGEST-VALUE", "a", "b", "c", "d", "plain"), ("DEBUG", "DIGEST")):
            assert ours.call(*cmd) == theirs.call(*cmd), cmd
        ours.call("SET", "plain", "123")
        d = ours.call("DEBUG", "DIGEST-VALUE", "a", "plain")
        assert d.count(d.split(b"\r\n")[1]) == 2, d     # bytearray "123" == bytes "123"
    finally:
        theirs.call("FLUSHALL")
        ours.close()
        theirs.close()


def test_raw_strings_survive_dump_rdb_and_aof_rewrite(hotkv_server_factory, tmp_path):
    """Values changed in place are saved as the same bytes by DUMP, an RDB
    save and an AOF rewrite, and load back as strings equal to them."""
    srv = hotkv_server_factory(dir=str(tmp_path), appendonly="yes")
    c = RawClient(srv.host, srv.port)
    try:
        c.call("SET", "a", "12")
        c.call("APPEND", "a", "3")
        c.call("SETBIT", "b", "1000", "1")
        c.call("SETRANGE", "s", "3", "x" * 40)
        c.call("BITOP", "NOT", "n", "b")
        keys = ["a", "b", "s", "n"]
        before = [c.call("GET", k) for k in keys]
        dumps = [c.call("DUMP", k) for k in keys]
        for k, d, value in zip(keys, dumps, before):
            body = d[d.index(b"\r\n") + 2:-2]
            assert c.call("RESTORE", k + "_r", "0", body) == b"+OK\r\n"
            assert c.call("GET", k + "_r") == value
            c.call("DEL", k + "_r")
        assert c.call("BGREWRITEAOF").startswith(b"+")
        for _ in range(500):                  # bounded wait for the rewrite to finish
            if b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence") and \
                    b"aof_rewrite_scheduled:0" in c.call("INFO", "persistence"):
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the AOF rewrite did not finish")
        assert c.call("SAVE") == b"+OK\r\n"
    finally:
        c.close()
    srv.stop()
    for appendonly in ("yes", "no"):          # from the rewritten AOF, then the RDB
        again = hotkv_server_factory(dir=str(tmp_path), appendonly=appendonly)
        c = RawClient(again.host, again.port)
        try:
            assert [c.call("GET", k) for k in keys] == before
            assert [c.call("DUMP", k) for k in keys] == dumps
        finally:
            c.close()
        again.stop()


def test_proto_max_bulk_len_limits_match_valkey(diff):
    """Offsets whose byte reaches proto-max-bulk-len are refused (BITFIELD
    may still grow the string a few bytes past it, as Valkey does); SETRANGE
    and APPEND refuse to pass it."""
    old = diff("CONFIG", "GET", "proto-max-bulk-len").split(b"\r\n")[-2]
    diff("CONFIG", "SET", "proto-max-bulk-len", "1mb")
    try:
        limit_bits = 8 << 20
        for cmd in (("SETBIT", "k", str(limit_bits), "1"),
                    ("SETBIT", "k", str(limit_bits - 1), "1"), ("STRLEN", "k"),
                    ("GETBIT", "k", str(limit_bits)), ("GETBIT", "k", str(limit_bits - 1)),
                    ("BITFIELD", "k", "SET", "u8", "#1048576", "1"),
                    ("BITFIELD", "k", "GET", "u8", str(limit_bits)),
                    ("BITFIELD", "k", "SET", "u8", "#1048575", "1"),
                    ("BITFIELD", "k", "SET", "i64", str(limit_bits - 8), "-1"), ("STRLEN", "k"),
                    ("BITFIELD_RO", "k", "GET", "i64", str(limit_bits - 8)),
                    ("SETRANGE", "k", str((1 << 20) - 1), "ab"), ("APPEND", "k", "x"),
                    ("SETRANGE", "n", str(1 << 20), "a"),
                    ("SETRANGE", "n", str((1 << 20) - 1), "a"),
                    ("STRLEN", "n"), ("BITCOUNT", "k", "-2", "-1")):
            diff(*cmd)
    finally:
        diff("CONFIG", "SET", "proto-max-bulk-len", old)
        diff("FLUSHALL")


@pytest.mark.parametrize("args", [("GET", "u8", "0"), ("SET", "u8", "0", "1"), (),
                                  ("OVERFLOW", "SAT", "GET", "u8", "0"),
                                  ("GET", "u8", "0", "INCRBY", "u8", "0", "1")])
def test_acl_read_only_key_pattern(diff, args):
    """A user with read-only key access (%R~*) may run BITFIELD with GETs
    only, as Valkey decides from BITFIELD's arguments."""
    diff("ACL", "SETUSER", "bitsro", "on", "nopass", "%R~*", "+@all")
    try:
        diff("AUTH", "bitsro", "x")
        diff("BITFIELD", "k", *args)
        diff("BITFIELD_RO", "k", "GET", "u8", "0")
        diff("AUTH", "default", "x")
    finally:
        diff("ACL", "DELUSER", "bitsro")


def _hits_misses(client: RawClient) -> tuple:
    info = client.call("INFO", "stats").decode()
    fields = dict(line.split(":", 1) for line in info.split("\r\n") if ":" in line)
    return int(fields["keyspace_hits"]), int(fields["keyspace_misses"])


def test_keyspace_hits_and_misses_match_valkey(diff):
    """Reads count hits/misses (GETBIT, BITCOUNT, BITPOS, BITOP's sources,
    a GET-only BITFIELD); writes' lookups do not (SETBIT, BITFIELD SET)."""
    script = [("SETBIT", "a", "1", "1"), ("SETBIT", "nokey1", "1", "0"),
              ("GETBIT", "a", "1"), ("GETBIT", "nokey2", "1"), ("BITCOUNT", "a"),
              ("BITCOUNT", "nokey3", "0", "1"), ("BITPOS", "a", "1"), ("BITPOS", "nokey4", "0"),
              ("BITOP", "OR", "d", "a", "nokey5", "a"), ("BITFIELD", "a", "GET", "u8", "0"),
              ("BITFIELD", "nokey6", "GET", "u8", "0"), ("BITFIELD", "a", "SET", "u8", "0", "1"),
              ("BITFIELD", "nokey7", "INCRBY", "u8", "0", "1", "GET", "u8", "0"),
              ("BITFIELD_RO", "a", "GET", "u8", "0"), ("APPEND", "a", "x"),
              ("SETRANGE", "nokey8", "0", "x"), ("STRLEN", "a"), ("GETRANGE", "a", "0", "1")]
    ours0, theirs0 = _hits_misses(diff.ours), _hits_misses(diff.theirs)
    for cmd in script:
        diff(*cmd)
    ours1, theirs1 = _hits_misses(diff.ours), _hits_misses(diff.theirs)
    delta = (ours1[0] - ours0[0], ours1[1] - ours0[1])
    assert delta == (theirs1[0] - theirs0[0], theirs1[1] - theirs0[1])
    assert delta[0] > 0 and delta[1] > 0
