"""redis.call / redis.pcall replies in Lua against valkey-server 8.1.8, at
volume: the common replies (integers, bulk strings, nil, status, flat
arrays) take a quick path into Lua (hotkv.lua.calls._quick_reply and the
prelude's call_reply), everything else the general RESP reader; both must
give Lua the same values.  Generated scripts, a fixed seed, RESP2 and
RESP3 (redis.setresp), arrays either side of the quick path's 7,000-item
limit; each script returns what it got, walked into a flat description."""
from __future__ import annotations

import random

import pytest

# Describes any Lua value deterministically (tables by sorted keys).
DESCRIBE = r"""
local function d(v, depth)
  local t = type(v)
  if t == 'table' then
    if depth > 6 then return 'deep' end
    local ks = {}
    for k in pairs(v) do ks[#ks + 1] = k end
    table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
    local parts = {}
    for _, k in ipairs(ks) do parts[#parts + 1] = tostring(k) .. '=' .. d(v[k], depth + 1) end
    return '{' .. table.concat(parts, ',') .. '}#' .. #v
  end
  return t .. ':' .. tostring(v)
end
"""

SETUP = [("RPUSH", "l", *[str(i) for i in range(50)]), ("RPUSH", "l2", "a", "", "c"),
         ("HSET", "h", "f1", "v1", "f2", "", "n", "5"), ("SADD", "s", "1", "2", "x"),
         ("ZADD", "z", "1", "a", "2.5", "b", "-3", "c"), ("SET", "str", "hello"),
         ("SET", "n", "10"), ("XADD", "x", "1-1", "f", "v"), ("XADD", "x", "2-1", "g", "w")]

CALLS = [
    "'GET', 'str'", "'GET', 'nokey'", "'INCR', 'n'", "'SET', 'k', 'v'", "'PING'",
    "'LRANGE', 'l', 0, -1", "'LRANGE', 'l', 0, 4", "'LRANGE', 'nokey', 0, -1",
    "'LRANGE', 'l2', 0, -1", "'HGETALL', 'h'", "'HMGET', 'h', 'f1', 'nope', 'f2'",
    "'SMEMBERS', 's'", "'ZRANGE', 'z', 0, -1, 'WITHSCORES'", "'ZSCORE', 'z', 'b'",
    "'XRANGE', 'x', '-', '+'", "'TYPE', 'h'", "'EXISTS', 'str', 'nokey', 'h'",
    "'MGET', 'str', 'nokey', 'n'", "'HLEN', 'h'",  # (not TIME or SCAN: not the same twice)
    "'OBJECT', 'ENCODING', 'l'", "'ZRANDMEMBER', 'nokey'", "'LPOS', 'l', '7'",
    "'INCR', 'str'", "'NOSUCHCOMMAND'", "'GET'", "'LPUSH', 'str', 'x'",
    "'HINCRBYFLOAT', 'h', 'n', '0.5'", "'SINTERCARD', 1, 's'", "'EXPIRE', 'nokey', 10",
    "'CONFIG', 'GET', 'maxmemory'", "'DBSIZE'", "'ECHO', ''", "'SETRANGE', 'k', 0, ''",
]


def _script(rng: random.Random, resp3: bool) -> str:
    body = [DESCRIBE, "local out = {}"]
    if resp3:
        body.append("redis.setresp(3)")
    for _ in range(rng.randint(1, 6)):
        call = rng.choice(CALLS)
        fn = rng.choice(["redis.pcall", "redis.call", "pcall"])
        if fn == "pcall":
            body.append("local ok, v = pcall(redis.call, %s) out[#out + 1] = tostring(ok) .. "
                        "'|' .. d(v, 0)" % call)
        else:
            body.append("out[#out + 1] = d(%s(%s), 0)" % (fn, call))
    body.append("return out")
    return "\n".join(body)


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_call_replies_match_valkey_at_volume(diff, resp3):
    for cmd in SETUP:
        diff(*cmd)
    rng = random.Random(1207 + resp3)
    for _ in range(400):
        script = _script(rng, resp3)
        diff("EVAL", script, "0")
        diff("SET", "n", "10")        # the INCRs start from the same value each time


@pytest.mark.parametrize("size", [6999, 7000, 7001, 20000])
def test_long_array_replies_match_valkey(diff, size):
    """Either side of the quick path's limit (7,000 items as Lua values)."""
    diff("DEL", "big")
    for start in range(0, size, 1000):
        diff("RPUSH", "big", *[str(i) for i in range(start, min(size, start + 1000))])
    diff("EVAL", "local t = redis.call('LRANGE', 'big', 0, -1) "
                 "return {#t, t[1], t[#t], t[7000], t[7001]}", "0")
    diff("EVAL", "local t = redis.pcall('LRANGE', 'big', 0, -1) return #t", "0")
