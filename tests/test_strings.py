"""The string commands (hotkv/commands/strings.py): every command, option
and error through valkey-py (``r``), redis-py RESP3 (``r3``) and byte for
byte against the reference Valkey (``diff``); INCRBYFLOAT's long double
arithmetic, LCS and the bit commands against Valkey on random inputs; the
deterministic forms written to the AOF."""

from __future__ import annotations

import random

import pytest
import redis
import valkey

from support import KeyEvents, RawClient, aof_commands, scenario_tests, start_aof_server

LLMAX = "9223372036854775807"
LLMIN = "-9223372036854775808"

# Each scenario is a list of commands sent in order to hotkv and to Valkey;
# every reply must be identical bytes.
SCENARIOS = {
    "get_set": [
        ("GET", "k"), ("SET", "k", "v"), ("GET", "k"), ("SET", "k", b"\x00\xff\r\n"),
        ("GET", "k"), ("SET", "e", ""), ("GET", "e"), ("STRLEN", "e"), ("EXISTS", "e"),
        ("RPUSH", "l", "a"), ("GET", "l"), ("SET", "l", "x"), ("GET", "l"), ("TYPE", "l"),
    ],
    "set_nx_xx_get": [
        ("SET", "k", "v", "NX"), ("SET", "k", "w", "NX"), ("GET", "k"),
        ("SET", "k", "w", "XX"), ("GET", "k"), ("SET", "nok", "w", "XX"), ("EXISTS", "nok"),
        ("SET", "k", "z", "GET"), ("SET", "nok", "z", "GET"), ("GET", "nok"),
        ("SET", "k", "a", "NX", "GET"), ("SET", "new", "a", "NX", "GET"), ("GET", "new"),
        ("SET", "k", "b", "XX", "GET"), ("SET", "none", "b", "XX", "GET"), ("EXISTS", "none"),
        ("SET", "k", "c", "get", "GET"), ("GET", "k"),
        ("RPUSH", "l", "x"), ("SET", "l", "v", "GET"), ("TYPE", "l"), ("SET", "l", "v", "NX"),
        ("SET", "l", "v", "XX"), ("GET", "l"),
    ],
    "set_syntax": [
        ("SET", "k", "v", "NX", "XX"), ("SET", "k", "v", "XX", "NX"), ("SET", "k", "v", "FOO"),
        ("SET", "k", "v", "EX"), ("SET", "k", "v", "PX"), ("SET", "k", "v", "EX", "10", "PX", "10"),
        ("SET", "k", "v", "EX", "10", "EX", "10"), ("SET", "k", "v", "EXAT", "10", "PXAT", "10"),
        ("SET", "k", "v", "KEEPTTL", "EX", "10"), ("SET", "k", "v", "EX", "10", "KEEPTTL"),
        ("SET", "k", "v", "PERSIST"), ("SET", "k", "v", "NX", "NX"),
        ("SET", "k", "v", "KEEPTTL", "KEEPTTL"),
        ("SET", "k", "v", "ex", "abc"), ("SET", "k", "v", "EX", "1.5"),
        ("SET", "k", "v", "EX", "0"),
        ("SET", "k", "v", "EX", "-1"), ("SET", "k", "v", "PX", "0"), ("SET", "k", "v", "PXAT", "0"),
        ("SET", "k", "v", "EXAT", "-5"), ("SET", "k", "v", "PX", LLMAX),
        ("SET", "k", "v", "EX", "9223372036854775"), ("SET", "k", "v", "EX", "9223372036854776"),
        ("SET", "k", "v", "EXAT", "9223372036854776"),
        ("SET", "k", "v", "EX", "99999999999999999999"),
        ("EXISTS", "k"),
        # the expire value is checked before GET's type check
        ("RPUSH", "l", "x"), ("SET", "l", "v", "GET", "EX", "0"),
        ("SET", "l", "v", "GET", "EX", "5"),
        ("SET", "k"), ("SET",),
    ],
    "set_expiry": [
        ("SET", "k", "v", "EX", "100"), ("TTL", "k"), ("SET", "k", "v", "PX", "100000"),
        ("TTL", "k"),
        ("SET", "k", "v", "EXAT", "4102444800"), ("EXPIRETIME", "k"),
        ("SET", "k", "v", "PXAT", "4102444800123"), ("PEXPIRETIME", "k"), ("EXPIRETIME", "k"),
        ("SET", "k", "w", "KEEPTTL"), ("PEXPIRETIME", "k"), ("SET", "k", "x"), ("TTL", "k"),
        ("SET", "k", "y", "EX", "100", "GET"), ("TTL", "k"),
        ("SET", "k", "z", "XX", "KEEPTTL", "GET"),
        ("TTL", "k"), ("SET", "k", "z", "NX", "EX", "5"), ("TTL", "k"),
        # an absolute time in the past deletes the key
        ("SET", "k", "gone", "PXAT", "1"), ("EXISTS", "k"), ("SET", "k", "v"),
        ("SET", "k", "gone", "EXAT", "1", "GET"), ("EXISTS", "k"),
        ("SET", "nok", "x", "PXAT", "1", "GET"), ("EXISTS", "nok"),
        ("SET", "nok", "x", "PXAT", "1", "XX"), ("SET", "nok", "x", "EXAT", "1", "NX"),
        ("EXISTS", "nok"),
    ],
    "setnx_setex_psetex": [
        ("SETNX", "k", "v"), ("SETNX", "k", "w"), ("GET", "k"), ("RPUSH", "l", "a"),
        ("SETNX", "l", "x"),
        ("SETEX", "k", "100", "v2"), ("TTL", "k"), ("GET", "k"), ("SETEX", "k", "0", "v"),
        ("SETEX", "k", "-10", "v"), ("SETEX", "k", "abc", "v"),
        ("SETEX", "k", "9223372036854776", "v"),
        ("PSETEX", "k", "100000", "v3"), ("TTL", "k"), ("PSETEX", "k", "0", "v"),
        ("PSETEX", "k", "-1", "v"), ("PSETEX", "k", "x", "v"), ("PSETEX", "k", LLMAX, "v"),
        ("SETEX", "l", "10", "s"), ("TYPE", "l"), ("SETEX", "k", "10"), ("SETNX", "k"),
    ],
    "getset_getdel": [
        ("GETSET", "k", "v"), ("GETSET", "k", "w"), ("GET", "k"), ("EXPIRE", "k", "100"),
        ("GETSET", "k", "x"), ("TTL", "k"), ("GETDEL", "k"), ("GETDEL", "k"), ("EXISTS", "k"),
        ("RPUSH", "l", "a"), ("GETSET", "l", "v"), ("GETDEL", "l"), ("LLEN", "l"),
    ],
    "getex": [
        ("GETEX", "nok"), ("GETEX", "nok", "EX", "0"), ("GETEX", "nok", "FOO"),
        ("SET", "k", "v"), ("GETEX", "k"), ("TTL", "k"), ("GETEX", "k", "EX", "100"), ("TTL", "k"),
        ("GETEX", "k", "PX", "200000"), ("TTL", "k"), ("GETEX", "k", "EXAT", "4102444800"),
        ("EXPIRETIME", "k"), ("GETEX", "k", "PXAT", "4102444800999"), ("PEXPIRETIME", "k"),
        ("GETEX", "k", "PERSIST"), ("TTL", "k"), ("GETEX", "k", "PERSIST"),
        ("GETEX", "k", "EX", "0"), ("GETEX", "k", "PX", "-1"), ("GETEX", "k", "EX", "x"),
        ("GETEX", "k", "EX", "9223372036854776"), ("GETEX", "k", "PX", LLMAX),
        ("GETEX", "k", "PERSIST", "EX", "10"), ("GETEX", "k", "EX", "10", "PERSIST"),
        ("GETEX", "k", "EX", "10", "PX", "10"), ("GETEX", "k", "NX"), ("GETEX", "k", "KEEPTTL"),
        ("GETEX", "k", "GET"), ("GETEX", "k", "EX"), ("GETEX", "k", "PXAT", "1"), ("EXISTS", "k"),
        ("RPUSH", "l", "a"), ("GETEX", "l"), ("GETEX", "l", "EX", "0"), ("GETEX", "l", "FOO"),
    ],
    "mget_mset": [
        ("MSET", "a", "1", "b", "2"), ("MGET", "a", "b", "c"), ("RPUSH", "l", "x"),
        ("MGET", "a", "l", "b"), ("MSET", "a", "1", "b"), ("MSET", "a"), ("MSETNX", "a", "1", "b"),
        ("MSETNX", "c", "3", "a", "9"), ("MGET", "a", "c"), ("MSETNX", "c", "3", "d", "4"),
        ("MGET", "c", "d"), ("MSET", "a", "x", "a", "y"), ("GET", "a"),
        ("MSETNX", "n1", "x", "n1", "y"), ("GET", "n1"), ("MSETNX", "l", "v"),
        ("EXPIRE", "a", "100"), ("MSET", "a", "z"), ("TTL", "a"),
    ],
    "incr_decr": [
        ("INCR", "n"), ("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", "10"), ("DECRBY", "n", "3"),
        ("INCRBY", "n", "-20"), ("DECRBY", "n", "-5"), ("GET", "n"), ("DECR", "fresh"),
        ("SET", "n", LLMAX), ("INCR", "n"), ("INCRBY", "n", "0"), ("DECRBY", "n", "-1"),
        ("SET", "n", LLMIN), ("DECR", "n"), ("INCRBY", "n", "-1"), ("INCRBY", "n", LLMAX),
        ("DECRBY", "x", LLMIN), ("DECRBY", "x", "-9223372036854775807"),
        ("INCRBY", "x", "9223372036854775808"),
        ("INCRBY", "x", "1.5"), ("INCRBY", "x", ""), ("INCRBY", "x", "+1"), ("INCRBY", "x", " 1"),
        ("INCRBY", "x", "01"), ("INCRBY", "x", "-0"),
        ("SET", "s", "abc"), ("INCR", "s"), ("SET", "s", " 1"), ("INCR", "s"), ("SET", "s", "1 "),
        ("INCR", "s"), ("SET", "s", "01"), ("INCR", "s"), ("SET", "s", "+1"), ("INCR", "s"),
        ("SET", "s", "1.0"), ("INCR", "s"), ("SET", "s", "12345678901234567890"), ("INCR", "s"),
        ("SET", "s", "-0"), ("DECR", "s"), ("SET", "s", ""), ("INCR", "s"),
        ("RPUSH", "l", "1"), ("INCR", "l"), ("DECRBY", "l", "1"), ("INCRBY", "l", "x"),
        ("SET", "t", "5"), ("EXPIRE", "t", "100"), ("INCR", "t"), ("TTL", "t"),
    ],
    "incrbyfloat": [
        ("INCRBYFLOAT", "f", "0.1"), ("INCRBYFLOAT", "f", "0.2"), ("INCRBYFLOAT", "f", "-0.3"),
        ("INCRBYFLOAT", "f", "1e3"), ("INCRBYFLOAT", "f", "1.5e-3"), ("INCRBYFLOAT", "f", ".5"),
        ("INCRBYFLOAT", "f", "5."), ("INCRBYFLOAT", "f", "+7"), ("INCRBYFLOAT", "f", "-1E2"),
        ("INCRBYFLOAT", "f", "0x10"), ("INCRBYFLOAT", "f", "0x1.8p1"), ("GET", "f"),
        ("INCRBYFLOAT", "f", "1e300"), ("INCRBYFLOAT", "f", "1e4000"),
        ("INCRBYFLOAT", "f", "-1e4000"),
        ("INCRBYFLOAT", "f", "1e5000"), ("INCRBYFLOAT", "f", "1e-5000"),
        ("INCRBYFLOAT", "f", "0e99999"),
        ("INCRBYFLOAT", "g", "3.0e3"), ("INCRBYFLOAT", "g", "1.23456789012345678901"),
        ("INCRBYFLOAT", "g", "-3000"), ("INCRBYFLOAT", "g", "0.00000000000000001"),
        ("INCRBYFLOAT", "g", "0.000000000000000004"), ("INCRBYFLOAT", "g", "-1e-30"),
        ("INCRBYFLOAT", "f", "inf"), ("INCRBYFLOAT", "f", "-infinity"), ("INCRBYFLOAT", "f", "nan"),
        ("INCRBYFLOAT", "f", "abc"), ("INCRBYFLOAT", "f", ""), ("INCRBYFLOAT", "f", " 1"),
        ("INCRBYFLOAT", "f", "1 "), ("INCRBYFLOAT", "f", "1e"), ("INCRBYFLOAT", "f", "0x"),
        ("INCRBYFLOAT", "f", b"1\x00"), ("INCRBYFLOAT", "f", "1" * 5200),
        ("SET", "s", "abc"), ("INCRBYFLOAT", "s", "1"), ("SET", "s", "1\x002"),
        ("INCRBYFLOAT", "s", "1"),
        ("SET", "s", "10"), ("INCRBYFLOAT", "s", "-10"), ("GET", "s"),
        ("SET", "s", "1.5e3"), ("INCRBYFLOAT", "s", "0"), ("SET", "s", "inf"),
        ("INCRBYFLOAT", "s", "1"),
        ("SET", "s", "0x1p-16445"), ("INCRBYFLOAT", "s", "0"),
        ("RPUSH", "l", "1"), ("INCRBYFLOAT", "l", "1"), ("INCRBYFLOAT", "l", "x"),
        ("SET", "t", "1"), ("EXPIRE", "t", "100"), ("INCRBYFLOAT", "t", "1.1"), ("TTL", "t"),
        ("INCRBYFLOAT", "z", str(1 / 41)), ("INCRBYFLOAT", "z", str(-1 / 41)), ("GET", "z"),
    ],
    "append_strlen": [
        ("APPEND", "k", "ab"), ("APPEND", "k", "cd"), ("GET", "k"), ("STRLEN", "k"),
        ("APPEND", "k", ""), ("APPEND", "e", ""), ("EXISTS", "e"), ("STRLEN", "e"),
        ("STRLEN", "nok"),
        ("SET", "n", "12"), ("APPEND", "n", "34"), ("INCR", "n"), ("EXPIRE", "n", "100"),
        ("APPEND", "n", "x"), ("TTL", "n"), ("RPUSH", "l", "a"), ("APPEND", "l", "x"),
        ("STRLEN", "l"),
    ],
    "getrange_substr": [
        ("SET", "k", "Hello World"), ("GETRANGE", "k", "0", "4"), ("GETRANGE", "k", "-5", "-1"),
        ("GETRANGE", "k", "0", "-1"), ("GETRANGE", "k", "5", "3"), ("GETRANGE", "k", "-1", "-5"),
        ("GETRANGE", "k", "-100", "100"), ("GETRANGE", "k", "20", "30"),
        ("GETRANGE", "k", "0", "0"),
        ("GETRANGE", "k", "-1", "-1"), ("GETRANGE", "k", LLMIN, LLMAX),
        ("GETRANGE", "k", "-20", "-15"),
        ("GETRANGE", "k", "a", "1"), ("GETRANGE", "k", "1", "b"), ("GETRANGE", "nok", "0", "-1"),
        ("GETRANGE", "nok", "x", "1"), ("SUBSTR", "k", "1", "3"), ("SUBSTR", "k", "-3", "-1"),
        ("SUBSTR", "nok", "0", "1"), ("SET", "e", ""), ("GETRANGE", "e", "0", "-1"),
        ("GETRANGE", "e", "0", "0"), ("SET", "n", "12345"), ("GETRANGE", "n", "1", "2"),
        ("RPUSH", "l", "a"), ("GETRANGE", "l", "0", "1"), ("SUBSTR", "l", "0", "1"),
    ],
    "setrange": [
        ("SETRANGE", "k", "0", "abc"), ("GET", "k"), ("SETRANGE", "k", "1", "X"), ("GET", "k"),
        ("SETRANGE", "k", "5", "Y"), ("GET", "k"), ("SETRANGE", "k", "2", ""),
        ("SETRANGE", "nok", "3", ""),
        ("EXISTS", "nok"), ("SETRANGE", "nok", "3", "z"), ("GET", "nok"),
        ("SETRANGE", "k", "-1", "x"),
        ("SETRANGE", "k", "abc", "x"), ("SETRANGE", "k", "1.5", "x"), ("SETRANGE", "k", "0", ""),
        ("SETRANGE", "k", "536870911", "xx"), ("SETRANGE", "k", "536870912", ""),
        ("SETRANGE", "big", "536870912", "x"), ("SETRANGE", "big", LLMAX, "x"), ("EXISTS", "big"),
        ("SET", "n", "1234"), ("SETRANGE", "n", "1", "9"), ("INCR", "n"),
        ("EXPIRE", "n", "100"), ("SETRANGE", "n", "0", "7"), ("TTL", "n"),
        ("RPUSH", "l", "a"), ("SETRANGE", "l", "0", "x"), ("SETRANGE", "l", "0", ""),
        ("SETRANGE", "l", "-1", "x"),
    ],
    "lcs": [
        ("MSET", "a", "ohmytext", "b", "mynewtext"), ("LCS", "a", "b"), ("LCS", "a", "b", "LEN"),
        ("LCS", "a", "b", "IDX"), ("LCS", "a", "b", "IDX", "WITHMATCHLEN"),
        ("LCS", "a", "b", "IDX", "MINMATCHLEN", "4"),
        ("LCS", "a", "b", "idx", "minmatchlen", "-3", "withmatchlen"),
        ("LCS", "a", "b", "LEN", "IDX"), ("LCS", "a", "b", "FOO"), ("LCS", "a", "b", "MINMATCHLEN"),
        ("LCS", "a", "b", "MINMATCHLEN", "x"), ("LCS", "a", "nok"), ("LCS", "nok", "nok2", "IDX"),
        ("LCS", "nok", "nok2", "LEN"), ("LCS", "a", "a"), ("LCS", "a", "a", "IDX", "WITHMATCHLEN"),
        ("RPUSH", "l", "x"), ("LCS", "a", "l"), ("LCS", "l", "nok", "FOO"), ("LCS", "a"),
    ],
    "bits": [
        ("SETBIT", "b", "7", "1"), ("GET", "b"), ("SETBIT", "b", "7", "1"),
        ("SETBIT", "b", "7", "0"),
        ("SETBIT", "b", "100", "1"), ("STRLEN", "b"), ("GETBIT", "b", "100"), ("GETBIT", "b", "99"),
        ("GETBIT", "b", "100000"), ("GETBIT", "nok", "0"), ("SETBIT", "b", "0", "2"),
        ("SETBIT", "b", "0", "-1"), ("SETBIT", "b", "0", "x"), ("SETBIT", "b", "-1", "1"),
        ("SETBIT", "b", "x", "1"), ("SETBIT", "b", "4294967296", "1"), ("GETBIT", "b", "-1"),
        ("GETBIT", "b", "4294967296"), ("GETBIT", "b", "4294967295"), ("SETBIT", "z", "10", "0"),
        ("GET", "z"), ("SET", "n", "12"), ("GETBIT", "n", "2"), ("SETBIT", "n", "7", "1"),
        ("GET", "n"),
        ("BITCOUNT", "n"), ("BITCOUNT", "nok"), ("BITCOUNT", "nok", "0", "-1"),
        ("SET", "s", "foobar"), ("BITCOUNT", "s"), ("BITCOUNT", "s", "0", "0"),
        ("BITCOUNT", "s", "1", "1"),
        ("BITCOUNT", "s", "1"), ("BITCOUNT", "s", "-2", "-1"), ("BITCOUNT", "s", "-1", "-2"),
        ("BITCOUNT", "s", "5", "30", "BIT"), ("BITCOUNT", "s", "5", "30", "bit"),
        ("BITCOUNT", "s", "1", "2", "BYTE"), ("BITCOUNT", "s", "-7", "-3", "BIT"),
        ("BITCOUNT", "s", "0", "-1", "FOO"), ("BITCOUNT", "s", "a", "1"),
        ("BITCOUNT", "s", "1", "b"),
        ("BITCOUNT", "s", "0", "1", "BIT", "x"), ("BITCOUNT", "s", LLMIN, LLMAX),
        ("RPUSH", "l", "a"), ("SETBIT", "l", "0", "1"), ("GETBIT", "l", "0"), ("BITCOUNT", "l"),
        ("SET", "t", "x"), ("EXPIRE", "t", "100"), ("SETBIT", "t", "100", "1"), ("TTL", "t"),
    ],
}


test_matches_valkey_resp2, test_matches_valkey_resp3 = scenario_tests(SCENARIOS)


def test_arity_errors(diff):
    for cmd in [("GET",), ("GET", "a", "b"), ("SET", "k"), ("SETNX", "k"), ("SETEX", "k", "1"),
                ("PSETEX", "k", "1"), ("GETSET", "k"), ("GETDEL",), ("GETEX",), ("MGET",),
                ("MSET", "k"), ("MSETNX", "k"), ("MSET", "a", "1", "b"), ("INCR",),
                ("DECR", "a", "b"),
                ("INCRBY", "k"), ("DECRBY", "k"), ("INCRBYFLOAT", "k"), ("APPEND", "k"),
                ("STRLEN",), ("GETRANGE", "k", "0"), ("SUBSTR", "k", "0"), ("SETRANGE", "k", "0"),
                ("LCS", "a"), ("SETBIT", "k", "0"), ("GETBIT", "k"), ("BITCOUNT",)]:
        diff(*cmd)


def test_transaction_replies(diff):
    for cmd in [("MULTI",), ("SET", "k", "1"), ("INCR", "k"), ("SET", "k", "v", "EX", "0"),
                ("INCR", "k"), ("GETSET", "k", "v"), ("APPEND", "k", "w"), ("EXEC",)]:
        diff(*cmd)


# ----------------------------------------------------------------------
# Random inputs compared with Valkey
# ----------------------------------------------------------------------

def _rand_float(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randint(-10**6, 10**6))
    if kind == 1:
        return "%.*f" % (rng.randrange(1, 20), rng.uniform(-1000, 1000))
    if kind == 2:
        return "%de%d" % (rng.randint(-999, 999), rng.randint(-40, 40))
    if kind == 3:
        return repr(rng.random() * 10 ** rng.randint(-20, 25))
    if kind == 4:
        return "0." + "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 30)))
    return "-%d.%d" % (rng.randrange(100), rng.randrange(10**9))


def test_incrbyfloat_matches_valkey_on_random_sums(diff):
    """Long double rounding and %.17Lf printing, bit for bit."""
    rng = random.Random(41)
    for i in range(300):
        if i % 25 == 0:
            diff("SET", "f", _rand_float(rng))
        diff("INCRBYFLOAT", "f", _rand_float(rng))
    # Known spots where a double differs from a long double.
    for start, incr in [("0.1", "0.2"), ("1.1", "2.2"), ("3", "1.0e-17"),
                        ("0", "0.3333333333333333333"),
                        ("1e20", "1"), ("5.0e3", "2.0e2"), ("10.5", "-10.4999999999999999"),
                        ("123456789012345678", "0.1"), ("0", "1e-17"), ("0", "5e-18"),
                        ("0", "-5e-18")]:
        diff("SET", "g", start)
        diff("INCRBYFLOAT", "g", incr)


def test_lcs_matches_valkey_on_random_strings(diff):
    rng = random.Random(7)
    for _ in range(40):
        a = "".join(rng.choice("ACGT") for _ in range(rng.randrange(0, 60)))
        b = "".join(rng.choice("ACGT") for _ in range(rng.randrange(0, 60)))
        diff("MSET", "a", a, "b", b)
        diff("LCS", "a", "b")
        diff("LCS", "a", "b", "LEN")
        diff("LCS", "a", "b", "IDX", "WITHMATCHLEN")
        diff("LCS", "a", "b", "IDX", "MINMATCHLEN", str(rng.randrange(4)))


def test_lcs_long_strings(r):
    """Bit-parallel LCS: 3000 x 3000 characters answers quickly and right."""
    rng = random.Random(3)
    common = "".join(rng.choice("ab") for _ in range(1000))
    a = "x" * 1000 + common + "y" * 1000
    b = "z" * 1000 + common + "w" * 1000
    r.mset({"a": a, "b": b})
    assert r.lcs("a", "b") == common.encode()
    assert r.lcs("a", "b", len=True) == 1000
    res = r.lcs("a", "b", idx=True, minmatchlen=1000)
    assert res == [b"matches", [[[1000, 1999], [1000, 1999]]], b"len", 1000]


def test_bits_match_valkey_on_random_operations(diff):
    rng = random.Random(11)
    for _ in range(200):
        op = rng.randrange(3)
        if op == 0:
            diff("SETBIT", "b", str(rng.randrange(300)), str(rng.randrange(2)))
        elif op == 1:
            diff("GETBIT", "b", str(rng.randrange(320)))
        else:
            args = [str(rng.randrange(-45, 45)), str(rng.randrange(-45, 45))]
            diff("BITCOUNT", "b", *args, rng.choice(["BIT", "BYTE"]))
            diff("BITCOUNT", "b", *args)
    diff("GET", "b")


def test_setrange_getrange_match_valkey_on_random_operations(diff):
    rng = random.Random(5)
    for _ in range(200):
        if rng.randrange(2):
            diff("SETRANGE", "s", str(rng.randrange(40)), "".join(
                rng.choice("abc") for _ in range(rng.randrange(6))))
        else:
            diff("GETRANGE", "s", str(rng.randrange(-50, 50)), str(rng.randrange(-50, 50)))
    diff("GET", "s")


# ----------------------------------------------------------------------
# Through the client libraries
# ----------------------------------------------------------------------

def test_strings_with_valkey_py(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True, get=True) == b"v"
    assert r.set("k", "x", ex=100) is True and r.ttl("k") == 100
    assert r.set("k", "y", keepttl=True) is True and 99 <= r.ttl("k") <= 100
    assert r.setnx("n", 1) is True and r.setnx("n", 2) is False
    assert r.incr("n") == 2 and r.decrby("n", 5) == -3 and r.incrby("n", 3) == 0
    assert r.incrbyfloat("fl", 0.1) == pytest.approx(0.1)
    assert r.get("fl") == b"0.1"
    assert r.incrbyfloat("fl", 0.2) == pytest.approx(0.3) and r.get("fl") == b"0.3"
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "nope") == [b"1", b"2", None]
    assert r.msetnx({"a": "x", "c": "3"}) is False and r.get("c") is None
    assert r.append("a", "23") == 3 and r.strlen("a") == 3
    assert r.getrange("a", 1, -1) == b"23"
    assert r.setrange("a", 5, "z") == 6 and r.get("a") == b"123\x00\x00z"
    assert r.getdel("a") == b"123\x00\x00z" and r.exists("a") == 0
    assert r.getex("k", persist=True) == b"y" and r.ttl("k") == -1
    assert r.getex("k", px=50000) == b"y" and 49 <= r.ttl("k") <= 50
    assert r.getset("k", "z") == b"y" and r.ttl("k") == -1
    assert r.setex("se", 100, "v") is True and r.ttl("se") == 100
    assert r.psetex("pse", 100000, "v") is True and r.ttl("pse") == 100
    assert r.setbit("bits", 5, 1) == 0 and r.getbit("bits", 5) == 1 and r.bitcount("bits") == 1
    r.rpush("list", "x")
    with pytest.raises(valkey.ResponseError, match="WRONGTYPE"):
        r.get("list")
    with pytest.raises(valkey.ResponseError, match="not an integer"):
        r.incr("k")
    with pytest.raises(valkey.ResponseError, match="not a valid float"):
        r.incrbyfloat("k", 1)
    with pytest.raises(valkey.ResponseError, match="invalid expire time in 'set' command"):
        r.set("k", "v", ex=0)


def test_strings_with_redis_py_resp3(r3):
    assert r3.set("k", "v", get=True) is None
    assert r3.set("k", "w", get=True) == b"v"
    assert r3.get("nope") is None
    assert r3.mget("k", "nope") == [b"w", None]
    assert r3.incrbyfloat("f", "1.5") == 1.5
    assert r3.getex("nope", ex=10) is None
    assert r3.lcs("k", "k") == b"w"
    r3.mset({"a": "ohmytext", "b": "mynewtext"})
    res = r3.lcs("a", "b", idx=True, withmatchlen=True)
    assert res == {b"matches": [[[4, 7], [5, 8], 4], [[2, 3], [0, 1], 2]], b"len": 6}
    r3.set("n", LLMAX)
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r3.incr("n")


def test_proto_max_bulk_len_is_enforced(r):
    """APPEND/SETRANGE/SETBIT refuse to grow a string past proto-max-bulk-len."""
    old = r.config_get("proto-max-bulk-len")["proto-max-bulk-len"]
    assert r.config_set("proto-max-bulk-len", 1024 * 1024) is True
    try:
        r.set("k", "x" * 1000)
        with pytest.raises(valkey.ResponseError,
                           match=r"string exceeds maximum allowed size \(proto-max-bulk-len\)"):
            r.setrange("k", 1024 * 1024, "y")
        with pytest.raises(valkey.ResponseError, match="proto-max-bulk-len"):
            r.append("k", "z" * (1024 * 1024))
        with pytest.raises(valkey.ResponseError,
                           match="bit offset is not an integer or out of range"):
            r.setbit("k", 8 * 1024 * 1024, 1)
        assert r.setbit("k", 8 * 1024 * 1024 - 1, 1) == 0
        assert r.strlen("k") == 1024 * 1024
    finally:
        r.config_set("proto-max-bulk-len", old)


# ----------------------------------------------------------------------
# Propagation: what the AOF records
# ----------------------------------------------------------------------

@pytest.fixture
def aof_server(hotkv_server_factory, tmp_path):
    return start_aof_server(hotkv_server_factory, tmp_path)


def test_string_writes_are_logged_deterministically(aof_server, tmp_path):
    c = RawClient(aof_server.host, aof_server.port)
    try:
        c.call("SET", "a", "1", "EX", "100")
        c.call("SET", "b", "2", "PX", "100000", "GET")
        c.call("SET", "c", "3", "EXAT", "4102444800")
        c.call("SET", "d", "4", "PXAT", "4102444800123")
        c.call("SET", "e", "5", "GET")
        c.call("SET", "e", "6", "get", "XX")
        c.call("SET", "e", "7", "PXAT", "1")            # in the past: deleted
        c.call("SET", "nokey", "7", "PXAT", "1")        # nothing to delete: nothing logged
        c.call("SETEX", "f", "100", "v")
        c.call("PSETEX", "g", "100000", "v")
        c.call("GETSET", "f", "w")
        c.call("GETEX", "g", "EX", "100")
        c.call("GETEX", "g", "PERSIST")
        c.call("GETEX", "g", "PERSIST")                 # nothing to do: nothing logged
        c.call("GETEX", "g")
        c.call("GETEX", "g", "EXAT", "1")
        c.call("SET", "h", "1")
        c.call("GETDEL", "h")
        c.call("GETDEL", "h")
        c.call("INCRBYFLOAT", "i", "0.1")
        c.call("INCRBYFLOAT", "i", "0.2")
        c.call("SETNX", "j", "1")
        c.call("SETNX", "j", "2")
        c.call("SETBIT", "k", "1", "0")
        c.call("SETBIT", "k", "1", "0")                 # unchanged: nothing logged
        c.call("SETRANGE", "k", "0", "")                # nothing: not logged
        c.call("INCR", "x")
        c.call("SET", "sentinel", "1")
    finally:
        c.close()
    cmds = aof_commands(tmp_path)
    now_ms = __import__("time").time() * 1000

    def pxat(argv, i):
        ms = int(argv[i])
        assert now_ms - 5000 < ms - 100000 < now_ms + 1000, argv
        return argv[:i] + [b"<ms>"]

    assert pxat(cmds[0], 4) == [b"SET", b"a", b"1", b"PXAT", b"<ms>"]
    assert pxat(cmds[1], 4) == [b"SET", b"b", b"2", b"PXAT", b"<ms>"]
    assert cmds[2] == [b"SET", b"c", b"3", b"PXAT", b"4102444800000"]
    assert cmds[3] == [b"SET", b"d", b"4", b"PXAT", b"4102444800123"]
    # UNLINK for an expiry in the past (lazyfree-lazy-expire yes, as Valkey 8.1); GETDEL: DEL
    assert cmds[4:7] == [[b"SET", b"e", b"5"], [b"SET", b"e", b"6", b"XX"], [b"UNLINK", b"e"]]
    assert pxat(cmds[7], 4) == [b"SET", b"f", b"v", b"PXAT", b"<ms>"]
    assert pxat(cmds[8], 4) == [b"SET", b"g", b"v", b"PXAT", b"<ms>"]
    assert cmds[9] == [b"SET", b"f", b"w"]
    assert pxat(cmds[10], 2) == [b"PEXPIREAT", b"g", b"<ms>"]
    assert cmds[11:] == [
        [b"PERSIST", b"g"], [b"UNLINK", b"g"], [b"SET", b"h", b"1"], [b"DEL", b"h"],
        [b"SET", b"i", b"0.1", b"KEEPTTL"], [b"SET", b"i", b"0.3", b"KEEPTTL"],
        [b"SETNX", b"j", b"1"], [b"SETBIT", b"k", b"1", b"0"], [b"INCR", b"x"],
        [b"SET", b"sentinel", b"1"]]


def test_keyspace_events_for_strings(r, server):
    with KeyEvents(r, server) as ev:
        r.set("a", "1", ex=100)
        r.incr("a")
        r.incrbyfloat("a", 1.5)
        r.append("a", "0")
        r.setrange("a", 0, "9")
        r.setbit("a", 0, 1)
        r.getex("a", ex=50)
        r.getex("a", persist=True)
        r.getdel("a")
        r.set("b", "1")
        r.set("b", "1", exat=1)
        r.mset({"c": "1", "d": "2"})
        assert ev.collect(14) == [
            ("set", b"a"), ("expire", b"a"), ("incrby", b"a"), ("incrbyfloat", b"a"),
            ("append", b"a"), ("setrange", b"a"), ("setbit", b"a"), ("expire", b"a"),
            ("persist", b"a"), ("del", b"a"), ("set", b"b"), ("expired", b"b"), ("set", b"c"),
            ("set", b"d")]


def test_incrbyfloat_near_long_double_limits_match_valkey(diff):
    """Values with thousands of digits: past Python's int/str 4300-digit guard."""
    diff("INCRBYFLOAT", "s", "1e4931")
    diff("INCRBYFLOAT", "s", "-1e4931")
    diff("INCRBYFLOAT", "big", "9" * 4500)
    diff("SET", "frac", "0." + "1" * 4900)
    diff("INCRBYFLOAT", "frac", "1")
    diff("HINCRBYFLOAT", "h", "f", "1e4931")
    diff("HINCRBYFLOAT", "h", "f", "1e4931")
    diff("MGET", "s", "big", "frac")
