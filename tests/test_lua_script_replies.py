"""A script's returned tables as RESP, byte for byte against valkey-server
8.1.8, at volume: thousands of generated values (arrays of every length
from 0 to 20 and either side of the one-call unpack's limit, nested,
with holes, every scalar type, status / error / RESP3 tables inside
arrays), in RESP2 and RESP3 (hotkv.lua.replies: an array's items come
out of Lua in one call)."""

from __future__ import annotations

import random

import pytest

# One cached script: the value is a Lua expression read by loadstring.
_SCRIPT = "return loadstring('return ' .. ARGV[1])()"


def _scalar(rng: random.Random) -> str:
    k = rng.randrange(12)
    if k == 0:
        return repr(rng.randrange(-5, 5000))
    if k == 1:
        return repr(rng.choice([2 ** 53, 2 ** 63, -2 ** 63, 2 ** 64, 1e30, -1e300, 123456789012]))
    if k == 2:
        return rng.choice(["0.5", "-2.5", "3.99", "-0.0", "0/0", "1/0", "-1/0", "1e-300"])
    if k == 3:
        return rng.choice(["true", "false"])
    if k == 4:
        return "nil"
    if k == 5:
        return "{ok='st%d'}" % rng.randrange(10)
    if k == 6:
        return "{err='E%d x'}" % rng.randrange(10)
    if k == 7:
        return "{double=%s}" % rng.choice(["1.5", "-0.25", "1/0", "3"])
    if k == 8:
        return "string.rep('ab', %d)" % rng.choice([0, 1, 600])
    if k == 9:
        return "{map={a=1}}"
    return "'s%d'" % rng.randrange(1000)


def _value(rng: random.Random, depth: int = 0) -> str:
    if depth > 3 or rng.random() < 0.35:
        return _scalar(rng)
    n = rng.choice([0, 1, 1, 2, 3, 5, 8, 13, 20, rng.randrange(21)])
    return "{" + ", ".join(_value(rng, depth + 1) for _ in range(n)) + "}"


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_generated_tables_reply_as_valkey(diff, resp3):
    if resp3:
        diff.resp3()
    sha = diff("SCRIPT", "LOAD", _SCRIPT).split(b"\r\n")[1].decode()
    rng = random.Random(33 + resp3)
    for _ in range(1500):
        diff("EVALSHA", sha, "0", _value(rng))


@pytest.mark.parametrize("n", [6999, 7000, 7001, 7002, 9000])
def test_long_arrays_reply_as_valkey(diff, n):
    diff("EVAL", "local t = {} for i = 1, %d do t[i] = (i %% 3 == 0) and i or ('x' .. i) end "
                 "t[%d] = {1, 'y', {ok='o'}} return t" % (n, n // 2), "0")
    diff("EVAL", "local t = {} for i = 1, %d do t[i] = i * 0.5 end return {t, 'z'}" % n, "0")


def test_arrays_from_redis_call_and_argv_reply_as_valkey(diff):
    diff("RPUSH", "l", *["v%d" % i for i in range(30)])
    diff("HSET", "h", *[x for i in range(10) for x in ("f%d" % i, str(i))])
    for body in ("return redis.call('lrange', 'l', 0, -1)",
                 "return {redis.call('lrange', 'l', 0, 2), redis.call('hgetall', 'h'), 7}",
                 "return {redis.call('lrange', 'l', 0, 0)}",
                 "return redis.call('lrange', 'l', 0, 0)",
                 "return redis.call('lrange', 'nolist', 0, -1)",
                 "return {KEYS, ARGV, #ARGV}"):
        diff("EVAL", body, "2", "k1", "k2", "a", "b", "c")
