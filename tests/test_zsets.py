"""The sorted-set commands (hotkv/commands/zsets.py): every command, option
and error through valkey-py (``r``), redis-py RESP3 (``r3``) and byte for
byte against the reference Valkey (``diff``); the blocking pops across
connections; the ZSCAN cursor guarantee."""

from __future__ import annotations

import random
import struct
import threading
import time

import pytest
import valkey

from support import aof_commands, scenario_tests, start_aof_server
from test_sets import unordered

SCENARIOS = {
    "zadd_basic": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1", "a", "5", "d"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZCARD", "z"), ("ZCARD", "noz"),
        ("ZSCORE", "z", "d"), ("ZSCORE", "z", "x"), ("ZSCORE", "noz", "x"),
        ("ZADD", "z", "1"), ("ZADD", "z", "1", "a", "2"), ("ZADD", "z", "x", "a"),
        ("ZADD", "z", "nan", "a"), ("ZADD", "z", "1", "a", "x", "b"), ("ZRANGE", "z", "0", "-1"),
        ("ZADD", "z", " 1", "a"), ("ZADD", "z", "1 ", "a"), ("ZADD", "z", "", "a"),
        ("ZADD", "z", "1e400", "a"), ("ZADD", "z", "1e-400", "a"), ("ZADD", "z", "0x10", "hx"),
        ("ZADD", "z", "-inf", "lo", "+inf", "hi", "infinity", "hi2"),
        ("ZADD", "z", "1e-310", "den"),
        ("ZADD", "z", "-0", "negz"), ("ZSCORE", "z", "negz"), ("ZADD", "z", ".5", "p"),
        ("ZADD", "z", "5.", "q"), ("ZADD", "z", "1_0", "u"), ("ZADD", "z", "+3", "plus"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZADD", "bin", "0", b"\x00\xff", "0", b"", "0", b"\r\n"), ("ZRANGE", "bin", "0", "-1"),
    ],
    "zadd_flags": [
        ("ZADD", "z", "1", "a", "2", "b"), ("ZADD", "z", "NX", "5", "a", "3", "c"),
        ("ZADD", "z", "XX", "5", "a", "4", "d"), ("ZADD", "z", "XX", "CH", "6", "a", "2", "b"),
        ("ZADD", "z", "CH", "7", "a", "1", "e", "2", "b"), ("ZADD", "z", "GT", "1", "a"),
        ("ZADD", "z", "GT", "CH", "8", "a", "0", "b"),
        ("ZADD", "z", "LT", "CH", "9", "a", "0", "b"),
        ("ZADD", "z", "GT", "10", "new"), ("ZADD", "z", "XX", "GT", "11", "new", "1", "nope"),
        ("ZADD", "z", "NX", "XX", "1", "a"), ("ZADD", "z", "NX", "GT", "1", "a"),
        ("ZADD", "z", "LT", "NX", "1", "a"), ("ZADD", "z", "GT", "LT", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a", "2", "b"), ("ZADD", "z", "INCR", "2.5", "a"),
        ("ZADD", "z", "INCR", "NX", "1", "a"), ("ZADD", "z", "INCR", "XX", "1", "zz"),
        ("ZADD", "z", "INCR", "GT", "-1", "a"), ("ZADD", "z", "INCR", "LT", "-1", "a"),
        ("ZADD", "z", "INCR", "LT", "1", "a"), ("ZADD", "z", "INCR", "NX", "3", "fresh"),
        ("ZADD", "z", "nx", "xx"), ("ZADD", "z", "ch"), ("ZADD", "z", "XX", "INCR", "x", "a"),
        ("ZADD", "noz", "XX", "1", "a"), ("ZADD", "noz", "XX", "INCR", "1", "a"), ("ZCARD", "noz"),
        ("ZADD", "z", "INCR", "+inf", "i"), ("ZADD", "z", "INCR", "-inf", "i"),
        ("ZSCORE", "z", "i"), ("ZADD", "z", "0", "i"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ],
    "zincrby": [
        ("ZINCRBY", "z", "1.5", "a"), ("ZINCRBY", "z", "-0.25", "a"), ("ZINCRBY", "z", "x", "a"),
        ("ZINCRBY", "z", "inf", "a"), ("ZINCRBY", "z", "-inf", "a"), ("ZSCORE", "z", "a"),
        ("ZINCRBY", "z", "0.1", "b"), ("ZINCRBY", "z", "0.2", "b"), ("ZINCRBY", "z", "1e20", "c"),
        ("ZINCRBY", "z", "1e-7", "d"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZINCRBY", "z", "1", "a", "b"), ("ZINCRBY", "z", "1"), ("ZINCRBY", "z", "NX", "1"),
        ("ZINCRBY", "z", "INCR", "("), ("ZINCRBY", "z", "nx", "xx"), ("ZINCRBY", "z", "ch", "x"),
        ("ZINCRBY", "noz", "GT", "5"),
    ],
    "zrem_zcard": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZREM", "z", "x"),
        ("ZREM", "z", "a", "a", "x"),
        ("ZREM", "noz", "a"), ("ZCARD", "z"), ("ZREM", "z", "b", "c"), ("ZCARD", "z"),
        ("ZRANGE", "z", "0", "-1"), ("ZREM", "z"),
    ],
    "zmscore_zrank": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "2", "bb"), ("ZMSCORE", "z", "a", "x", "c"),
        ("ZMSCORE", "noz", "a", "b"), ("ZRANK", "z", "a"), ("ZRANK", "z", "bb"),
        ("ZRANK", "z", "x"),
        ("ZRANK", "noz", "a"), ("ZREVRANK", "z", "a"), ("ZREVRANK", "z", "c"),
        ("ZRANK", "z", "b", "WITHSCORE"), ("ZREVRANK", "z", "b", "withscore"),
        ("ZRANK", "z", "x", "WITHSCORE"), ("ZRANK", "noz", "x", "WITHSCORE"),
        ("ZRANK", "z", "a", "WITHSCORES"), ("ZRANK", "z", "a", "WITHSCORE", "x"),
        ("ZREVRANK", "z", "a", "b", "c"), ("ZMSCORE", "z"),
    ],
    "zcount_zlexcount": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("ZCOUNT", "z", "-inf", "+inf"),
        ("ZCOUNT", "z", "(1", "3"), ("ZCOUNT", "z", "(1", "(3"), ("ZCOUNT", "z", "3", "1"),
        ("ZCOUNT", "z", "2", "2"), ("ZCOUNT", "z", "(2", "2"), ("ZCOUNT", "z", "x", "1"),
        ("ZCOUNT", "z", "1", "(x"), ("ZCOUNT", "noz", "0", "1"), ("ZCOUNT", "noz", "x", "1"),
        ("ZCOUNT", "z", " 2", "3"), ("ZCOUNT", "z", "", "5"), ("ZCOUNT", "z", "(", "5"),
        ("ZCOUNT", "z", "1e400", "inf"), ("ZCOUNT", "z", "nan", "1"),
        ("ZCOUNT", "z", "(inf", "inf"),
        ("ZCOUNT", "z", "-inf", "(-inf"), ("ZCOUNT", "z", "0x1", "0x3"),
        ("ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"), ("ZLEXCOUNT", "l", "-", "+"),
        ("ZLEXCOUNT", "l", "[b", "[c"), ("ZLEXCOUNT", "l", "(b", "(c"),
        ("ZLEXCOUNT", "l", "+", "-"),
        ("ZLEXCOUNT", "l", "b", "c"), ("ZLEXCOUNT", "l", "[b", "+x"),
        ("ZLEXCOUNT", "noz", "-", "+"),
        ("ZLEXCOUNT", "noz", "x", "+"), ("ZLEXCOUNT", "l", "[", "(e"),
    ],
    "zrange_rank": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        ("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "1", "3", "WITHSCORES"),
        ("ZRANGE", "z", "-2", "-1"), ("ZRANGE", "z", "3", "1"), ("ZRANGE", "z", "-100", "100"),
        ("ZRANGE", "z", "5", "10"), ("ZRANGE", "z", "0", "-6"), ("ZRANGE", "z", "0", "0", "REV"),
        ("ZRANGE", "z", "1", "-2", "REV", "WITHSCORES"), ("ZREVRANGE", "z", "0", "1"),
        ("ZREVRANGE", "z", "0", "-1", "WITHSCORES"), ("ZREVRANGE", "z", "0", "1", "REV"),
        ("ZRANGE", "z", "x", "1"), ("ZRANGE", "z", "0", "1.5"), ("ZRANGE", "noz", "0", "-1"),
        ("ZRANGE", "noz", "x", "1"), ("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"),
        ("ZRANGE", "z", "0", "-1", "FOO"), ("ZRANGE", "z", "0", "-1", "LIMIT", "0"),
        ("ZRANGE", "z", "-9223372036854775808", "9223372036854775807"),
        ("ZREVRANGE", "z", "0", "-1", "BYSCORE"),
    ],
    "zrange_byscore": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "3", "cc"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf"), ("ZRANGEBYSCORE", "z", "(1", "(4", "WITHSCORES"),
        ("ZRANGEBYSCORE", "z", "2", "4", "LIMIT", "1", "2"),
        ("ZRANGEBYSCORE", "z", "2", "4", "LIMIT", "1", "-1"),
        ("ZRANGEBYSCORE", "z", "2", "4", "LIMIT", "-1", "2"),
        ("ZRANGEBYSCORE", "z", "2", "4", "LIMIT", "0", "0"),
        ("ZRANGEBYSCORE", "z", "2", "4", "LIMIT", "10", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "5", "10", "WITHSCORES"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "6", "10"),
        ("ZRANGEBYSCORE", "z", "4", "2"), ("ZRANGEBYSCORE", "z", "x", "2"),
        ("ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "x", "1"),
        ("ZRANGEBYSCORE", "z", "1", "2", "REV"),
        ("ZRANGEBYSCORE", "z", "1", "2", "BYLEX"), ("ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "0"),
        ("ZREVRANGEBYSCORE", "z", "+inf", "-inf"),
        ("ZREVRANGEBYSCORE", "z", "4", "(2", "WITHSCORES"),
        ("ZREVRANGEBYSCORE", "z", "4", "2", "LIMIT", "1", "2"),
        ("ZREVRANGEBYSCORE", "z", "(4", "(2", "LIMIT", "0", "-5"),
        ("ZREVRANGEBYSCORE", "z", "2", "4"),
        ("ZRANGE", "z", "2", "4", "BYSCORE", "WITHSCORES"),
        ("ZRANGE", "z", "4", "2", "BYSCORE", "REV", "LIMIT", "1", "3", "WITHSCORES"),
        ("ZRANGE", "z", "(2", "+inf", "BYSCORE", "LIMIT", "0", "2"),
        ("ZRANGE", "z", "x", "1", "BYSCORE"), ("ZRANGE", "z", "1", "2", "BYSCORE", "BYLEX"),
        ("ZRANGE", "z", "1", "2", "BYSCORE", "BYSCORE"), ("ZRANGE", "noz", "x", "1", "BYSCORE"),
        ("ZRANGE", "noz", "0", "1", "BYSCORE"),
    ],
    "zrange_bylex": [
        ("ZADD", "l", "0", "alpha", "0", "bar", "0", "cool", "0", "down", "0", "elephant",
         "0", "foo", "0", "great", "0", "hill", "0", "omega"),
        ("ZRANGEBYLEX", "l", "-", "+"), ("ZRANGEBYLEX", "l", "[bar", "(foo"),
        ("ZRANGEBYLEX", "l", "(bar", "[foo"), ("ZRANGEBYLEX", "l", "[c", "[e"),
        ("ZRANGEBYLEX", "l", "-", "[cool", "LIMIT", "1", "1"),
        ("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "2", "-1"),
        ("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "-1", "2"), ("ZRANGEBYLEX", "l", "+", "-"),
        ("ZRANGEBYLEX", "l", "[z", "[a"), ("ZRANGEBYLEX", "l", "a", "[b"),
        ("ZRANGEBYLEX", "l", "[a", "b"), ("ZRANGEBYLEX", "l", "-", "+", "WITHSCORES"),
        ("ZREVRANGEBYLEX", "l", "+", "-"), ("ZREVRANGEBYLEX", "l", "[foo", "(bar"),
        ("ZREVRANGEBYLEX", "l", "+", "-", "LIMIT", "1", "3"), ("ZREVRANGEBYLEX", "l", "-", "+"),
        ("ZRANGE", "l", "[b", "[d", "BYLEX"), ("ZRANGE", "l", "[d", "[b", "BYLEX", "REV"),
        ("ZRANGE", "l", "-", "+", "BYLEX", "LIMIT", "3", "2"),
        ("ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES"), ("ZRANGE", "l", "x", "+", "BYLEX"),
        ("ZRANGEBYLEX", "noz", "-", "+"), ("ZRANGEBYLEX", "noz", "x", "+"),
        ("ZRANGEBYLEX", "l", "[", "+"), ("ZRANGEBYLEX", "l", "(", "+"),
        ("ZADD", "mixed", "1", "b", "2", "a", "3", "c"), ("ZRANGEBYLEX", "mixed", "-", "+"),
    ],
    "zrangestore": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZRANGESTORE", "d", "z", "0", "1"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "d", "z", "(1", "+inf", "BYSCORE"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("ZRANGESTORE", "d", "z", "5", "6"),
        ("ZCARD", "d"), ("ZRANGESTORE", "d", "noz", "0", "-1"),
        ("ZRANGESTORE", "d", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "d", "z", "[a", "[b", "BYLEX", "REV"),
        ("ZRANGESTORE", "d", "z", "[b", "[a", "BYLEX", "REV"), ("ZRANGE", "d", "0", "-1"),
    ],
    "zremrange": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZREMRANGEBYRANK", "z", "-1", "-1"),
        ("ZREMRANGEBYRANK", "z", "5", "10"), ("ZREMRANGEBYRANK", "z", "2", "1"),
        ("ZREMRANGEBYRANK", "z", "x", "1"), ("ZRANGE", "z", "0", "-1"),
        ("ZREMRANGEBYSCORE", "z", "(2", "3"), ("ZREMRANGEBYSCORE", "z", "x", "1"),
        ("ZREMRANGEBYSCORE", "z", "10", "20"), ("ZRANGE", "z", "0", "-1"),
        ("ZREMRANGEBYRANK", "z", "0", "-1"), ("ZCARD", "z"),
        ("ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"),
        ("ZREMRANGEBYLEX", "l", "[b", "(d"), ("ZREMRANGEBYLEX", "l", "x", "+"),
        ("ZRANGE", "l", "0", "-1"), ("ZREMRANGEBYLEX", "l", "-", "+"), ("ZCARD", "l"),
        ("ZREMRANGEBYRANK", "noz", "0", "1"), ("ZREMRANGEBYSCORE", "noz", "x", "1"),
        ("ZREMRANGEBYLEX", "noz", "-", "+"), ("ZREMRANGEBYRANK", "noz", "x", "1"),
        ("ZADD", "e", "1", "a"), ("ZREMRANGEBYSCORE", "e", "-inf", "+inf"), ("ZCARD", "e"),
    ],
    "zpop": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"), ("ZPOPMIN", "z"),
        ("ZPOPMAX", "z"), ("ZPOPMIN", "z", "2"), ("ZPOPMAX", "z", "0"), ("ZPOPMIN", "z", "1"),
        ("ZPOPMAX", "z", "10"), ("ZCARD", "z"), ("ZPOPMIN", "z"), ("ZPOPMIN", "z", "3"),
        ("ZPOPMIN", "z", "-1"), ("ZPOPMIN", "z", "x"), ("ZPOPMIN", "z", "1", "2"),
        ("ZADD", "z", "1", "a"), ("ZPOPMAX", "z", "-1"), ("ZPOPMAX", "z", "0"),
    ],
    "zmpop": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "y", "9", "y"),
        ("ZMPOP", "2", "noz", "z", "MIN"), ("ZMPOP", "2", "z", "y", "MAX", "COUNT", "10"),
        ("ZMPOP", "1", "z", "MIN"), ("ZMPOP", "1", "y", "max", "count", "1"),
        ("ZMPOP", "1", "noz", "MIN"), ("ZMPOP", "0", "z", "MIN"), ("ZMPOP", "-1", "z", "MIN"),
        ("ZMPOP", "x", "z", "MIN"), ("ZMPOP", "3", "z", "MIN"), ("ZMPOP", "1", "z", "MID"),
        ("ZMPOP", "1", "z", "MIN", "COUNT", "0"), ("ZMPOP", "1", "z", "MIN", "COUNT", "x"),
        ("ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "1"), ("ZMPOP", "1", "z", "MIN", "COUNT"),
        ("ZMPOP", "1", "z", "MIN", "FOO"), ("ZMPOP", "2", "z"),
        ("ZADD", "z", "4", "d"), ("BZMPOP", "0", "1", "z", "MIN"), ("BZMPOP", "x", "1", "z", "MIN"),
        ("BZMPOP", "-1", "1", "z", "MIN"), ("BZMPOP", "0", "0", "z", "MIN"),
        ("BZMPOP", "0.01", "1", "z", "MIN", "COUNT", "0"),
        ("ZADD", "z", "5", "q"), ("BZMPOP", "0", "2", "noz", "z", "MAX", "COUNT", "3"),
    ],
    "bzpop_served_and_errors": [
        ("ZADD", "z", "1", "a", "2", "b"), ("BZPOPMIN", "noz", "z", "0"), ("BZPOPMAX", "z", "0"),
        ("BZPOPMIN", "z", "x"), ("BZPOPMIN", "z", "-1"), ("BZPOPMIN", "z", "nan"),
        ("BZPOPMIN", "z", "inf"), ("BZPOPMAX", "z", "1e30"), ("BZPOPMIN", "noz", "0.01"),
        ("BZPOPMAX", "noz", "noz2", "0.01"), ("ZCARD", "z"),
    ],
    "zunion_zinter_store": [
        ("ZADD", "a", "1", "x", "2", "y", "3", "z"), ("ZADD", "b", "10", "y", "20", "z", "30", "w"),
        ("SADD", "s", "x", "w", "q"),
        ("ZUNIONSTORE", "d", "2", "a", "b"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "d", "3", "a", "b", "s", "WEIGHTS", "2", "0.5", "10"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "d", "2", "a", "b", "AGGREGATE", "MIN"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "d", "2", "a", "b", "AGGREGATE", "max", "WEIGHTS", "1", "-1"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "d", "2", "a", "b"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "d", "3", "a", "b", "s"), ("ZCARD", "d"),
        ("ZINTERSTORE", "d", "2", "a", "s", "WEIGHTS", "3", "4", "AGGREGATE", "SUM"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("ZINTERSTORE", "d", "2", "a", "a"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "d", "2", "a", "noz"), ("ZCARD", "d"), ("ZUNIONSTORE", "d", "1", "noz"),
        ("ZUNIONSTORE", "d", "0", "a"), ("ZUNIONSTORE", "d", "-1", "a"),
        ("ZUNIONSTORE", "d", "x", "a"),
        ("ZUNIONSTORE", "d", "3", "a", "b"), ("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1"),
        ("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "x"),
        ("ZUNIONSTORE", "d", "2", "a", "b", "AGGREGATE", "AVG"),
        ("ZUNIONSTORE", "d", "2", "a", "b", "AGGREGATE"),
        ("ZUNIONSTORE", "d", "2", "a", "b", "FOO"),
        ("ZUNIONSTORE", "d", "1", "a", "WITHSCORES"),
        ("ZADD", "i", "inf", "x", "-inf", "y"), ("ZADD", "j", "-inf", "x", "inf", "y"),
        ("ZUNIONSTORE", "d", "2", "i", "j"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "d", "2", "i", "j", "WEIGHTS", "0", "1"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("ZUNIONSTORE", "d", "1", "i", "WEIGHTS", "0"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("HSET", "h", "f", "v"),
        ("ZUNIONSTORE", "d", "2", "a", "h"), ("ZINTERSTORE", "d", "2", "noz", "h"),
        ("ZUNIONSTORE", "h", "1", "a"), ("ZRANGE", "h", "0", "-1"),
    ],
    "zunion_zinter_zdiff_read": [
        ("ZADD", "a", "1", "x", "2", "y", "3", "z"), ("ZADD", "b", "10", "y", "20", "z", "30", "w"),
        ("ZUNION", "2", "a", "b"), ("ZUNION", "2", "a", "b", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "1", "2", "AGGREGATE", "MAX", "WITHSCORES"),
        ("ZINTER", "2", "a", "b", "WITHSCORES"), ("ZINTER", "2", "a", "noz"),
        ("ZDIFF", "2", "a", "b", "WITHSCORES"), ("ZDIFF", "1", "a"), ("ZDIFF", "2", "noz", "a"),
        ("ZDIFF", "2", "a", "b", "WEIGHTS", "1", "1"), ("ZDIFF", "2", "a", "b", "AGGREGATE", "MIN"),
        ("ZDIFFSTORE", "d", "2", "a", "b"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
        ("ZDIFFSTORE", "d", "2", "a", "a"), ("ZCARD", "d"),
        ("ZDIFFSTORE", "d", "1", "a", "WITHSCORES"),
        ("ZINTERCARD", "2", "a", "b"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "1"),
        ("ZINTERCARD", "2", "a", "b", "LIMIT", "0"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "-1"),
        ("ZINTERCARD", "0", "a"), ("ZINTERCARD", "3", "a", "b"), ("ZINTERCARD", "x", "a"),
        ("ZINTERCARD", "2", "a", "b", "WITHSCORES"),
        ("ZINTERCARD", "2", "a", "b", "WEIGHTS", "1", "2"),
        ("ZUNION", "0", "a"), ("ZUNION", "1", "a", "WITHSCORES", "WITHSCORES"),
    ],
    "zrandmember_errors": [
        ("ZRANDMEMBER", "noz"), ("ZRANDMEMBER", "noz", "3"), ("ZRANDMEMBER", "noz", "x"),
        ("ZADD", "z", "1.5", "a"), ("ZRANDMEMBER", "z"), ("ZRANDMEMBER", "z", "1"),
        ("ZRANDMEMBER", "z", "-2", "WITHSCORES"), ("ZRANDMEMBER", "z", "0"),
        ("ZRANDMEMBER", "z", "x"), ("ZRANDMEMBER", "z", "1", "WITHVALUES"),
        ("ZRANDMEMBER", "z", "1", "WITHSCORES", "x"), ("ZRANDMEMBER", "z", "-9223372036854775808"),
        ("ZRANDMEMBER", "z", "-9223372036854770000", "WITHSCORES"),
        ("ZRANDMEMBER", "z", "4611686018427387904", "WITHSCORES"),
    ],
    "zscan": [
        ("ZSCAN", "noz", "0"), ("ZSCAN", "noz", "x"),
        ("ZADD", "z", "1", "a1", "2.5", "a2", "3", "b1"),
        ("ZSCAN", "z", "0"), ("ZSCAN", "z", "0", "MATCH", "a*"), ("ZSCAN", "z", "0", "NOSCORES"),
        ("ZSCAN", "z", "0", "NOVALUES"), ("ZSCAN", "z", "0", "COUNT", "0"), ("ZSCAN", "z", "-1"),
        ("ZADD", "z", "1e-7", "tiny", "-0", "zero", "1e300", "huge"), ("ZSCAN", "z", "0"),
    ],
    "wrongtype": [
        ("SADD", "s", "x"), ("ZADD", "s", "1", "a"), ("ZINCRBY", "s", "1", "a"), ("ZREM", "s", "a"),
        ("ZCARD", "s"), ("ZSCORE", "s", "a"), ("ZMSCORE", "s", "a"), ("ZRANK", "s", "a"),
        ("ZREVRANK", "s", "a", "WITHSCORE"), ("ZCOUNT", "s", "0", "1"),
        ("ZLEXCOUNT", "s", "-", "+"),
        ("ZRANGE", "s", "0", "-1"), ("ZRANGEBYSCORE", "s", "0", "1"),
        ("ZRANGEBYLEX", "s", "-", "+"),
        ("ZREVRANGE", "s", "0", "1"), ("ZREMRANGEBYRANK", "s", "0", "1"),
        ("ZREMRANGEBYSCORE", "s", "0", "1"), ("ZREMRANGEBYLEX", "s", "-", "+"), ("ZPOPMIN", "s"),
        ("ZPOPMAX", "s", "2"), ("BZPOPMIN", "s", "0"), ("ZMPOP", "1", "s", "MIN"),
        ("BZMPOP", "0", "1", "s", "MIN"), ("ZRANDMEMBER", "s"), ("ZSCAN", "s", "0"),
        ("ZRANGESTORE", "d", "s", "0", "-1"), ("ZADD", "s", "x", "a"), ("ZRANGE", "s", "x", "1"),
        ("ZADD", "z", "1", "a"), ("SADD", "z", "x"), ("BZPOPMIN", "noz", "s", "z", "0"),
        ("ZMPOP", "3", "noz", "s", "z", "MIN"), ("ZRANGESTORE", "s", "z", "0", "-1"),
        ("ZRANGE", "s", "0", "-1", "WITHSCORES"),
    ],
    "arity": [
        ("ZADD", "z", "1"), ("ZINCRBY", "z", "1"), ("ZREM", "z"), ("ZCARD",), ("ZSCORE", "z"),
        ("ZRANGE", "z", "0"), ("ZRANK", "z"), ("ZPOPMIN",), ("BZPOPMIN", "z"), ("ZMPOP", "1", "z"),
        ("BZMPOP", "0", "1", "z"), ("ZUNIONSTORE", "d", "1"), ("ZSCAN", "z"), ("ZCOUNT", "z", "0"),
    ],
}


test_scenario, test_scenario_resp3 = scenario_tests(SCENARIOS)


SCORES = ["0", "1", "-1", "1.5", "0.1", "0.30000000000000004", "1e-7", "1e-6", "123456.789",
          "1e15", "1e16", "1e17", "4611686018427387904", "4611686018427387905", "1e21", "1e22",
          "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308", "-1e-300", "3.14159",
          "100", "1e100", "12345678901234567890", "0.000001234", "-0.5", "2.5e-5",
          "99999999999999999"]


@pytest.mark.parametrize("resp3", [False, True])
def test_score_formatting(diff, resp3):
    if resp3:
        diff.resp3()
    for i, s in enumerate(SCORES):
        diff("ZADD", "z", s, "m%d" % i)
        diff("ZSCORE", "z", "m%d" % i)
        diff("ZINCRBY", "w", s, "m")
    diff("ZRANGE", "z", "0", "-1", "WITHSCORES")
    diff("ZSCORE", "w", "m")


def test_big_zset_vs_reference(diff):
    """Past the listpack size (skiplist in Valkey) ranges still agree."""
    args = []
    for i in range(400):
        args += [str((i * 37) % 101), "m%03d" % i]
    diff("ZADD", "z", *args)
    for cmd in [("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZRANGE", "z", "100", "120", "REV"),
                ("ZRANGEBYSCORE", "z", "(10", "20", "LIMIT", "3", "7"),
                ("ZREVRANGEBYSCORE", "z", "50", "-inf", "LIMIT", "10", "5", "WITHSCORES"),
                ("ZCOUNT", "z", "5", "(50"), ("ZRANK", "z", "m200"), ("ZREVRANK", "z", "m200"),
                ("ZREMRANGEBYSCORE", "z", "40", "45"), ("ZREMRANGEBYRANK", "z", "10", "20"),
                ("ZPOPMIN", "z", "3"), ("ZPOPMAX", "z", "3"), ("ZCARD", "z"),
                ("ZUNIONSTORE", "u", "2", "z", "z", "WEIGHTS", "1", "0.5"),
                ("ZRANGE", "u", "0", "-1", "WITHSCORES")]:
        diff(*cmd)
    unordered(diff, "ZRANDMEMBER", "z", "1000")


def test_valkey_py(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5}, xx=True, ch=True) == 1
    assert r.zadd("z", {"a": 1}, incr=True) == 6.0
    assert r.zrange("z", 0, -1, withscores=True) == [(b"b", 2.0), (b"c", 3.0), (b"a", 6.0)]
    assert r.zscore("z", "a") == 6.0
    assert r.zrank("z", "a") == 2 and r.zrevrank("z", "a") == 0
    assert r.zcount("z", 2, 3) == 2
    assert r.zrangebyscore("z", "(2", "+inf") == [b"c", b"a"]
    assert r.zincrby("z", 0.5, "b") == 2.5
    assert r.zpopmin("z") == [(b"b", 2.5)]
    assert r.zpopmax("z", 5) == [(b"a", 6.0), (b"c", 3.0)]
    assert r.zcard("z") == 0
    r.zadd("x", {"m": 1})
    assert r.bzpopmin("x", timeout=1) == (b"x", b"m", 1.0)
    assert r.bzpopmin("x", timeout=0.05) is None
    r.sadd("s", "v")
    with pytest.raises(valkey.ResponseError, match="WRONGTYPE"):
        r.zadd("s", {"a": 1})
    with pytest.raises(valkey.ResponseError, match="not a valid float"):
        r.zadd("z", {"a": "abc"})


def test_resp3_shapes(r3, raw):
    r3.zadd("z", {"a": 1, "b": 2.5})
    assert r3.zscore("z", "b") == 2.5
    raw.call("HELLO", "3")
    assert raw.call("ZSCORE", "z", "b") == b",2.5\r\n"
    assert raw.call("ZRANGE", "z", "0", "-1", "WITHSCORES") == \
        b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    assert raw.call("ZRANK", "z", "b", "WITHSCORE") == b"*2\r\n:1\r\n,2.5\r\n"
    assert raw.call("ZRANK", "z", "q", "WITHSCORE") == b"_\r\n"
    assert raw.call("ZPOPMIN", "z") == b"*2\r\n$1\r\na\r\n,1\r\n"
    assert raw.call("ZPOPMIN", "z", "1") == b"*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    raw.call("ZADD", "z", "inf", "i")
    assert raw.call("ZMPOP", "1", "z", "MAX") == b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\ni\r\n,inf\r\n"
    assert raw.call("ZMPOP", "1", "z", "MAX") == b"_\r\n"


def test_emptied_zset_is_deleted(r):
    r.zadd("z", {"a": 1})
    r.zrem("z", "a")
    r.sadd("z", "now a set")          # would be WRONGTYPE if the key remained
    assert r.delete("z") == 1
    r.zadd("z", {"a": 1, "b": 2})
    r.zpopmin("z", 2)
    assert r.hset("z", "f", "v") == 1


def test_zscan_guarantee_under_churn(r):
    stable = {b"s%d" % i: i for i in range(700)}
    r.zadd("z", stable)
    r.zadd("z", {b"t%d" % i: -i for i in range(300)})
    cursor, seen, step = 0, {}, 0
    while True:
        cursor, batch = r.zscan("z", cursor, count=20)
        seen.update(batch)
        step += 1
        r.zrem("z", *[b"t%d" % i for i in range(step * 8, step * 8 + 8)])
        r.zadd("z", {b"n%d_%d" % (step, i): 0.5 for i in range(8)})
        if cursor == 0:
            break
        assert step < 1000
    assert set(stable) <= set(seen)
    for m, s in stable.items():
        assert seen[m] == float(s)
    cursor, batch = r.zscan("z", 0, count=5)
    assert cursor != 0 and len(batch) < 50


# ----------------------------------------------------------------------
# Blocking across connections
# ----------------------------------------------------------------------

def test_bzpopmin_blocks_until_zadd(raw_factory):
    waiter, writer = raw_factory(), raw_factory()
    waiter.call("FLUSHALL")
    waiter.send("BZPOPMIN", "z1", "z2", "0")
    assert waiter.read_available(0.1) == b""
    assert writer.call("ZADD", "z2", "3", "c", "1", "a") == b":2\r\n"
    assert waiter.read_reply() == b"*3\r\n$2\r\nz2\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert writer.call("ZRANGE", "z2", "0", "-1") == b"*1\r\n$1\r\nc\r\n"


def test_bzpopmax_resp3_and_fifo(raw_factory):
    a, b, w = raw_factory(), raw_factory(), raw_factory()
    w.call("FLUSHALL")
    a.call("HELLO", "3")
    a.send("BZPOPMAX", "z", "0")
    b.send("BZPOPMAX", "z", "0")
    time.sleep(0.05)
    w.call("ZADD", "z", "1", "x", "2", "y")
    assert a.read_reply() == b"*3\r\n$1\r\nz\r\n$1\r\ny\r\n,2\r\n"
    assert b.read_reply() == b"*3\r\n$1\r\nz\r\n$1\r\nx\r\n$1\r\n1\r\n"
    assert w.call("ZCARD", "z") == b":0\r\n"


def test_bzmpop_blocks_and_timeout(raw_factory):
    a, w = raw_factory(), raw_factory()
    w.call("FLUSHALL")
    a.send("BZMPOP", "0", "2", "z1", "z2", "MAX", "COUNT", "2")
    time.sleep(0.05)
    w.call("ZADD", "z1", "1", "a", "2", "b", "3", "c")
    assert a.read_reply() == (b"*2\r\n$2\r\nz1\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"
                              b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n")
    assert a.call("BZMPOP", "0.05", "1", "nothing", "MIN") == b"*-1\r\n"
    assert a.call("BZPOPMIN", "nothing", "0.05") == b"*-1\r\n"
    a.call("HELLO", "3")
    assert a.call("BZPOPMIN", "nothing", "0.05") == b"_\r\n"


def test_bzpopmin_wrong_type_written_then_zset(raw_factory):
    """A waiter is not served by a key of another type; it stays blocked."""
    a, w = raw_factory(), raw_factory()
    w.call("FLUSHALL")
    a.send("BZPOPMIN", "k", "0")
    time.sleep(0.05)
    w.call("SADD", "k", "x")
    assert a.read_available(0.1) == b""
    w.call("SREM", "k", "x")
    w.call("ZADD", "k", "7", "m")
    assert a.read_reply() == b"*3\r\n$1\r\nk\r\n$1\r\nm\r\n$1\r\n7\r\n"


def test_bzpop_inside_multi_returns_at_once(raw):
    raw.call("MULTI")
    raw.call("BZPOPMIN", "nothing", "0")
    raw.call("BZMPOP", "0", "1", "nothing", "MIN")
    assert raw.call("EXEC") == b"*2\r\n*-1\r\n*-1\r\n"


def test_bzpopmin_client_threads(server):
    """Through valkey-py: a blocked BZPOPMIN in a thread is served by ZADD."""
    result = {}
    c1 = valkey.Valkey(host=server.host, port=server.port)
    c2 = valkey.Valkey(host=server.host, port=server.port)
    c1.delete("jobs")

    def worker():
        result["v"] = c1.bzpopmin("jobs", timeout=5)

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.1)
    c2.zadd("jobs", {"job1": 10})
    t.join(5)
    assert result["v"] == (b"jobs", b"job1", 10.0)
    c1.close()
    c2.close()


def test_zset_events_match_valkey(server, ref_server):
    from test_sets import events_match
    events_match(server, ref_server, [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("ZADD", "z", "1", "a"),
        ("ZADD", "z", "NX", "9", "a"), ("ZADD", "z", "INCR", "1", "a"), ("ZINCRBY", "z", "1", "b"),
        ("ZREM", "z", "x"), ("ZREM", "z", "a"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z", "1"),
        ("ZADD", "z", "5", "e", "6", "f", "7", "g"), ("ZREMRANGEBYRANK", "z", "0", "0"),
        ("ZREMRANGEBYSCORE", "z", "6", "6"), ("ZREMRANGEBYLEX", "z", "-", "+"),
        ("ZADD", "y", "1", "a"), ("ZUNIONSTORE", "u", "1", "y"), ("ZINTERSTORE", "u", "1", "y"),
        ("ZDIFFSTORE", "u", "1", "y"), ("ZRANGESTORE", "u", "y", "0", "-1"),
        ("ZINTERSTORE", "u", "2", "y", "noz"), ("ZMPOP", "1", "y", "MIN"),
        ("ZADD", "y", "1", "a", "2", "b"), ("BZPOPMAX", "y", "0"), ("BZMPOP", "0", "1", "y", "MIN"),
    ])


# ----------------------------------------------------------------------
# Propagation: commands that choose what they change are logged in a
# deterministic form (checked in the AOF), and replaying it rebuilds the data
# ----------------------------------------------------------------------

def test_deterministic_propagation(hotkv_server_factory, tmp_path):
    from support import RawClient
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    w = RawClient(srv.host, srv.port)
    try:
        c.call("HINCRBYFLOAT", "h", "f", "0.1")
        c.call("HINCRBYFLOAT", "h", "f", "abc")            # error: not logged
        c.call("SADD", "s", "a", "b", "c", "d")
        popped = c.call("SPOP", "s")
        c.call("SPOP", "s", "2")
        c.call("SPOP", "s", "10")                          # the rest: UNLINK (lazy-server-del)
        c.call("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
        c.call("BZPOPMIN", "noz", "z", "0")
        c.call("ZMPOP", "1", "z", "MAX", "COUNT", "5")
        c.send("BZPOPMAX", "z2", "0")
        time.sleep(0.05)
        w.call("ZADD", "z2", "7", "x", "8", "y")
        assert c.read_reply() == b"*3\r\n$2\r\nz2\r\n$1\r\ny\r\n$1\r\n8\r\n"
        c.send("BZMPOP", "0", "1", "z3", "MIN", "COUNT", "3")
        time.sleep(0.05)
        w.call("ZADD", "z3", "1", "p")
        c.read_reply()
        c.call("ZPOPMIN", "nothing")                        # no change: not logged
        c.call("SET", "sentinel", "1")
    finally:
        c.close()
        w.close()
    cmds = aof_commands(tmp_path)
    member = popped.split(b"\r\n")[1]
    assert cmds[0] == [b"HSET", b"h", b"f", b"0.1"]
    assert cmds[1] == [b"SADD", b"s", b"a", b"b", b"c", b"d"]
    assert cmds[2] == [b"SREM", b"s", member]
    assert cmds[3][:2] == [b"SREM", b"s"] and len(cmds[3]) == 4
    assert cmds[4] == [b"UNLINK", b"s"]
    assert cmds[5][0] == b"ZADD"
    assert cmds[6] == [b"ZPOPMIN", b"z"]
    assert cmds[7] == [b"ZPOPMAX", b"z", b"3"]
    assert cmds[8][0] == b"ZADD" and cmds[9] == [b"ZPOPMAX", b"z2"]
    assert cmds[10][0] == b"ZADD" and cmds[11] == [b"ZPOPMIN", b"z3", b"1"]
    assert cmds[12] == [b"SET", b"sentinel", b"1"] and len(cmds) == 13


def test_aof_replay_rebuilds_types(hotkv_server_factory, tmp_path):
    from support import RawClient
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    script = [("HSET", "h", "a", "1", "b", "2"), ("HINCRBYFLOAT", "h", "a", "0.5"),
              ("HDEL", "h", "b"), ("SADD", "s", *[str(i) for i in range(50)]), ("SPOP", "s", "7"),
              ("SPOP", "s"),
              ("ZADD", "z", *[x for i in range(30) for x in (str(i * 1.5), "m%d" % i)]),
              ("ZPOPMIN", "z", "2"), ("ZREMRANGEBYSCORE", "z", "10", "20"),
              ("ZUNIONSTORE", "u", "2", "z", "s", "WEIGHTS", "2", "1"),
              ("ZINCRBY", "z", "0.1", "m29")]
    for args in script:
        c.call(*args)
    reads = [("HGETALL", "h"), ("SMEMBERS", "s"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
             ("ZRANGE", "u", "0", "-1", "WITHSCORES")]
    before = [c.call(*q) for q in reads]
    c.close()
    srv.stop()
    srv2 = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = RawClient(srv2.host, srv2.port)
    try:
        after = [c.call(*q) for q in reads]
    finally:
        c.close()
    assert after[0] == before[0] and after[2:] == before[2:]
    from test_sets import canon, parse
    assert canon(parse(after[1])[0]) == canon(parse(before[1])[0])


# ----------------------------------------------------------------------
# COMMAND metadata
# ----------------------------------------------------------------------

ALL_COMMANDS = """hset hsetnx hget hmset hmget hdel hlen hstrlen hexists hkeys hvals hgetall
hincrby hincrbyfloat hrandfield hscan sadd srem smembers sismember smismember scard spop
srandmember smove sinter sintercard sinterstore sunion sunionstore sdiff sdiffstore sscan zadd
zrem zcard zscore zmscore zincrby zrank zrevrank zcount zlexcount zrange zrangestore
zrangebyscore zrevrangebyscore zrangebylex zrevrangebylex zrevrange zremrangebyscore
zremrangebyrank zremrangebylex zpopmin zpopmax bzpopmin bzpopmax zmpop bzmpop zunionstore
zinterstore zdiffstore zunion zinter zintercard zdiff zrandmember zscan""".split()


def test_command_info_matches_valkey(diff):
    differ = [name for name in ALL_COMMANDS
              if diff.ours.call("COMMAND", "INFO", name) != diff.theirs.call("COMMAND", "INFO",
                                                                             name)]
    assert differ == [], "COMMAND INFO differs from Valkey's for these"


@pytest.mark.parametrize("args", [
    ("ZADD", "z", "1", "a"), ("BZMPOP", "0", "2", "a", "b", "MIN"), ("ZMPOP", "2", "a", "b", "MIN"),
    ("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"), ("ZUNION", "2", "a", "b"),
    ("ZINTERCARD", "2", "a", "b"), ("SINTERCARD", "2", "a", "b"),
    ("ZRANGESTORE", "d", "s", "0", "1"),
    ("SMOVE", "a", "b", "m"), ("BZPOPMIN", "a", "b", "0"), ("SINTERSTORE", "d", "a", "b"),
    ("ZDIFFSTORE", "d", "2", "a", "b"), ("HSET", "h", "f", "v", "g", "w"),
])
def test_command_getkeys_matches_valkey(diff, args):
    diff("COMMAND", "GETKEYS", *args)


# ----------------------------------------------------------------------
# Seeded random walk vs Valkey
# ----------------------------------------------------------------------

def _random_zset_command(rnd):
    keys = ["z1", "z2", "z3", "lex"]
    members = ["m%d" % i for i in range(40)] + ["", "a", "b", "ab", "zz"]
    scores = ["0", "1", "-1", "2.5", "1e-3", "100", "-inf", "+inf", "3", "7", "(2", "1e20"]

    def score():
        s = rnd.choice(scores)
        return s[1:] if s.startswith("(") else s

    def bound():
        s = rnd.choice(scores + ["(1", "(3", "(-inf", "(+inf", "x"])
        return s

    def lexb():
        return rnd.choice(["-", "+", "[a", "(a", "[m1", "(m2", "[m3", "[zz", "(", "[", "x"])

    def idx():
        return str(rnd.choice([0, 1, 2, -1, -2, 5, 10, -50, 100]))

    k = rnd.choice(keys)
    op = rnd.randrange(22)
    if op in (3, 4) and k == "lex":
        k = "z1"     # "lex" keeps one score: lex ranges are undefined otherwise
    if op in (0, 1, 2):
        if k == "lex":
            return ["ZADD", k] + [x for m in rnd.sample(members, 3) for x in ("0", m)]
        flags = rnd.sample(["NX", "XX", "GT", "LT", "CH"], rnd.randrange(3))
        n = rnd.randrange(1, 6)
        return ["ZADD", k] + flags + [x for m in rnd.sample(members, n) for x in (score(), m)]
    if op == 3:
        return ["ZADD", k, "INCR"] + rnd.sample(["NX", "XX", "GT", "LT", ""], 1)[0:1] + \
            [score(), rnd.choice(members)]
    if op == 4:
        return ["ZINCRBY", k, score(), rnd.choice(members)]
    if op == 5:
        return ["ZREM", k] + rnd.sample(members, 3)
    if op == 6:
        extra = rnd.choice([[], ["WITHSCORES"], ["REV"], ["REV", "WITHSCORES"]])
        return ["ZRANGE", k, idx(), idx()] + extra
    if op == 7:
        extra = rnd.choice([[], ["WITHSCORES"], ["LIMIT", str(rnd.randrange(-1, 5)),
                                                str(rnd.randrange(-1, 5))]])
        return [rnd.choice(["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]), k, bound(), bound()] + extra
    if op == 8:
        extra = rnd.choice([[], ["LIMIT", str(rnd.randrange(0, 4)), str(rnd.randrange(-1, 4))]])
        return [rnd.choice(["ZRANGEBYLEX", "ZREVRANGEBYLEX"]), "lex", lexb(), lexb()] + extra
    if op == 9:
        return ["ZRANGE", k, bound(), bound(), "BYSCORE"] + rnd.choice([[], ["REV"]]) + \
            rnd.choice([[], ["LIMIT", "1", "2"]]) + rnd.choice([[], ["WITHSCORES"]])
    if op == 10:
        return ["ZCOUNT", k, bound(), bound()]
    if op == 11:
        return ["ZLEXCOUNT", "lex", lexb(), lexb()]
    if op == 12:
        return [rnd.choice(["ZRANK", "ZREVRANK"]), k, rnd.choice(members)] + \
            rnd.choice([[], ["WITHSCORE"]])
    if op == 13:
        return ["ZREMRANGEBYRANK", k, idx(), idx()]
    if op == 14:
        return ["ZREMRANGEBYSCORE", k, bound(), bound()]
    if op == 15:
        return ["ZREMRANGEBYLEX", "lex", lexb(), lexb()]
    if op == 16:
        return [rnd.choice(["ZPOPMIN", "ZPOPMAX"]),
                k] + rnd.choice([[], [str(rnd.randrange(0, 4))]])
    if op == 17:
        srcs = rnd.sample(keys[:3], rnd.randrange(1, 4))
        cmd = [rnd.choice(["ZUNIONSTORE", "ZINTERSTORE"]), rnd.choice(["d", "z3"]),
               str(len(srcs))] + srcs
        if rnd.random() < 0.5:
            cmd += ["WEIGHTS"] + [rnd.choice(["1", "2", "-1", "0.5", "0"]) for _ in srcs]
        if rnd.random() < 0.5:
            cmd += ["AGGREGATE", rnd.choice(["SUM", "MIN", "MAX"])]
        return cmd
    if op == 18:
        srcs = rnd.sample(keys[:3], rnd.randrange(1, 4))
        return ["ZDIFFSTORE", "d", str(len(srcs))] + srcs
    if op == 19:
        return ["ZMSCORE", k] + rnd.sample(members, 3)
    if op == 20:
        return ["ZMPOP", "2", k, rnd.choice(keys), rnd.choice(["MIN", "MAX"]), "COUNT",
                str(rnd.randrange(1, 4))]
    return ["ZCARD", k]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_walk_vs_valkey(diff, seed):
    import random as _random
    rnd = _random.Random(seed)
    if seed == 3:
        diff.resp3()
        # a big sorted set so Valkey uses its skiplist encoding
        diff("ZADD", "z1", *[x for i in range(300) for x in (str(i % 17), "big%d" % i)])
    for _ in range(700):
        diff(*_random_zset_command(rnd))
    for k in ("z1", "z2", "z3", "lex", "d"):
        diff("ZRANGE", k, "0", "-1", "WITHSCORES")


# ----------------------------------------------------------------------
# A real job-queue library: RQ keeps jobs in hashes and its registries in
# sorted sets; its scheduler (run here in the worker) moves due jobs with EVALSHA
# ----------------------------------------------------------------------

@pytest.mark.parametrize("resp3", [False, True])
def test_zrandmember_whole_set_order_matches_valkey(diff, resp3):
    if resp3:
        diff.resp3()
    diff("ZADD", "z", "1", "a", "2", "b", "3", "c", "2", "bb")
    diff("ZRANDMEMBER", "z", "4", "WITHSCORES")
    diff("ZRANDMEMBER", "z", "100")
    diff("ZADD", "big", *[x for i in range(200) for x in (str(i % 7), "m%d" % i)])
    diff("ZRANDMEMBER", "big", "200", "WITHSCORES")


def test_random_samples_keep_listpack_order(r):
    """Redis samples a small (listpack) zset or hash in its stored order."""
    r.zadd("z", {"m%02d" % i: i for i in range(50)})
    for _ in range(5):
        got = r.zrandmember("z", 10)
        assert got == sorted(got) and len(set(got)) == 10
    r.hset("h", mapping={"f%02d" % i: "v" for i in range(50)})
    for _ in range(5):
        got = r.hrandfield("h", 10)
        assert got == sorted(got) and len(set(got)) == 10


def test_aof_rewrite_keeps_exact_scores(hotkv_server_factory, tmp_path):
    """BGREWRITEAOF writes hash/set/zset contents that reload bit for bit
    (scores that need all 17 digits, infinities, subnormals, a big set)."""
    from support import RawClient
    srv = start_aof_server(hotkv_server_factory, tmp_path)
    c = RawClient(srv.host, srv.port)
    scores = ["0.30000000000000004", "1e-300", "5e-324", "+inf", "-inf", "1.7976931348623157e308",
              "-2.5", "123456789.123456789", "0"]
    c.call("ZADD", "z", *[x for i, s in enumerate(scores) for x in (s, "m%d" % i)])
    c.call("ZADD", "big", *[x for i in range(1000) for x in (str(i / 7), "b%d" % i)])
    c.call("HSET", "h", *[x for i in range(300) for x in ("f%d" % i, "v" * (i % 90))])
    c.call("SADD", "s", *[str(i) for i in range(700)])
    reads = [("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZRANGE", "big", "0", "-1", "WITHSCORES"),
             ("HLEN", "h"), ("HGET", "h", "f89"), ("SCARD", "s"), ("SISMEMBER", "s", "699")]
    before = [c.call(*q) for q in reads]
    assert c.call("BGREWRITEAOF").startswith(b"+")
    deadline = time.time() + 20
    while time.time() < deadline:
        inf = c.call("INFO", "persistence")
        if b"aof_rewrite_in_progress:0" in inf and b"aof_rewrite_scheduled:0" in inf:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the rewrite did not finish")
    c.close()
    srv.stop()
    srv2 = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = RawClient(srv2.host, srv2.port)
    try:
        assert [c.call(*q) for q in reads] == before
    finally:
        c.close()


@pytest.mark.parametrize("resp3", [False, True])
def test_scores_print_as_valkeys_grisu2_digits(diff, resp3):
    """Scores come back in fpconv_dtoa's text, whose Grisu2 digits are not
    always the shortest round trip (5e22 -> 49999999999999996000000; about
    one double in a thousand, at any magnitude).  Python's repr digits gave
    '5e+22'.  Thousands of doubles -- random bit patterns, short decimals
    at every exponent, timestamps -- through ZADD, ZRANGE WITHSCORES,
    ZSCORE, ZINCRBY and a listpack-encoded zset (its scores are stored as
    text)."""
    if resp3:
        diff.resp3()
    rnd = random.Random(5022)
    values = [5e22, -5e22, 1945088398766704.2, 2.8681705516121664e+58]
    while len(values) < 3000:
        kind = rnd.random()
        if kind < 0.4:
            v = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
            if v != v or v in (float("inf"), float("-inf")):
                continue
        elif kind < 0.8:
            nd = rnd.randint(1, 17)
            v = float("%de%d" % (rnd.randint(10 ** (nd - 1), 10 ** nd - 1),
                                 rnd.randint(-40, 40) - nd))
        else:
            v = rnd.uniform(1.6e9, 1.8e9)
        values.append(v)
    for start in range(0, len(values), 500):
        args = []
        for i, v in enumerate(values[start:start + 500]):
            args += [repr(v), "m%d" % (start + i)]
        diff("ZADD", "big", *args)
    diff("ZRANGE", "big", "0", "-1", "WITHSCORES")
    for i in range(0, len(values), 7):
        diff("ZSCORE", "big", "m%d" % i)
    diff("ZINCRBY", "big", "0", "m0")
    for i in range(0, 120):
        diff("ZADD", "small", repr(values[i]), "m%d" % i)
    diff("OBJECT", "ENCODING", "small")
    diff("ZRANGE", "small", "0", "-1", "WITHSCORES")
