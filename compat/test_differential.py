"""Random command sequences sent to hotkv and to Valkey: the replies must match.

A hypothesis state machine draws commands from every supported family --
strings, counters, lists, keyspace and expiry, hashes, sets, sorted sets,
streams with explicit IDs and their consumer groups (reads, acks, claims,
pending summaries, XINFO STREAM / GROUPS), transactions; bitmaps,
HyperLogLog, geo and functions in a machine of their own -- over a tiny
alphabet of keys and values so that commands collide, hit wrong types, and
exercise error paths.
The first diverging command is what hypothesis shrinks a failure to.

Only deterministic commands are drawn: nothing that depends on the clock
(TTL is read with a large expiry so rounding cannot differ), on randomness
(SPOP, RANDOMKEY) or on server identity (INFO, CLIENT).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from differential import UNORDERED, Pair

KEYS = st.sampled_from([b"k1", b"k2", b"k3", b"{q}list"])
VALUES = st.sampled_from([b"a", b"b", b"", b"1", b"-7", b"10.5", b"9223372036854775807",
                          b"x" * 40, b"\x00\xff"])
INTS = st.sampled_from([b"0", b"1", b"2", b"-1", b"-3", b"5", b"100", b"notanint", b"1.5"])
FLOATS = st.sampled_from([b"0", b"1.5", b"-2", b"1e3", b"inf", b"-inf", b"nan", b"abc", b"0.1"])


def _c(*parts):
    """A strategy for an argv whose parts are constants or strategies."""
    return st.tuples(*[p if isinstance(p, st.SearchStrategy) else st.just(p) for p in parts]
                     ).map(list)


STRINGS = st.one_of(
    _c(b"SET", KEYS, VALUES), _c(b"GET", KEYS), _c(b"SETNX", KEYS, VALUES),
    _c(b"SET", KEYS, VALUES, st.sampled_from([b"NX", b"XX", b"GET", b"KEEPTTL", b"BAD"])),
    _c(b"SET", KEYS, VALUES, b"EX", INTS), _c(b"GETSET", KEYS, VALUES), _c(b"GETDEL", KEYS),
    _c(b"MSET", KEYS, VALUES, KEYS, VALUES), _c(b"MGET", KEYS, KEYS, KEYS),
    _c(b"MSETNX", KEYS, VALUES, KEYS, VALUES),
    _c(b"INCR", KEYS), _c(b"DECR", KEYS), _c(b"INCRBY", KEYS, INTS), _c(b"DECRBY", KEYS, INTS),
    _c(b"INCRBYFLOAT", KEYS, FLOATS), _c(b"APPEND", KEYS, VALUES), _c(b"STRLEN", KEYS),
    _c(b"GETRANGE", KEYS, INTS, INTS), _c(b"SETRANGE", KEYS, INTS, VALUES),
)
LISTS = st.one_of(
    _c(st.sampled_from([b"LPUSH", b"RPUSH", b"LPUSHX", b"RPUSHX"]), KEYS, VALUES, VALUES),
    _c(st.sampled_from([b"LPOP", b"RPOP"]), KEYS),
    _c(st.sampled_from([b"LPOP", b"RPOP"]), KEYS, INTS),
    _c(b"LLEN", KEYS), _c(b"LRANGE", KEYS, INTS, INTS), _c(b"LINDEX", KEYS, INTS),
    _c(b"LSET", KEYS, INTS, VALUES), _c(b"LREM", KEYS, INTS, VALUES),
    _c(b"LTRIM", KEYS, INTS, INTS),
    _c(b"LINSERT", KEYS, st.sampled_from([b"BEFORE", b"AFTER", b"MIDDLE"]), VALUES, VALUES),
    _c(b"LPOS", KEYS, VALUES), _c(b"LPOS", KEYS, VALUES, b"RANK", INTS),
    _c(b"LPOS", KEYS, VALUES, b"COUNT", INTS), _c(b"RPOPLPUSH", KEYS, KEYS),
    _c(b"LMOVE", KEYS, KEYS, st.sampled_from([b"LEFT", b"RIGHT", b"UP"]),
       st.sampled_from([b"LEFT", b"RIGHT"])),
    _c(b"LMPOP", b"2", KEYS, KEYS, st.sampled_from([b"LEFT", b"RIGHT"])),
    _c(b"BLPOP", KEYS, KEYS, b"0.01"), _c(b"BRPOPLPUSH", KEYS, KEYS, b"0.01"),
)
KEYSPACE = st.one_of(
    _c(b"DEL", KEYS, KEYS), _c(b"EXISTS", KEYS, KEYS), _c(b"TYPE", KEYS), _c(b"UNLINK", KEYS),
    _c(b"RENAME", KEYS, KEYS), _c(b"RENAMENX", KEYS, KEYS), _c(b"COPY", KEYS, KEYS),
    _c(b"COPY", KEYS, KEYS, b"REPLACE"),
    _c(b"EXPIRE", KEYS, st.sampled_from([b"1000", b"-1", b"x"])),
    _c(b"EXPIRE", KEYS, b"1000", st.sampled_from([b"NX", b"XX", b"GT", b"LT", b"ZZ"])),
    _c(b"PERSIST", KEYS), _c(b"TTL", KEYS), _c(b"EXPIRETIME", KEYS), _c(b"KEYS", b"k*"),
    _c(b"DBSIZE"), _c(b"TOUCH", KEYS, KEYS), _c(b"MOVE", KEYS, b"1"),
)
HASHES = st.one_of(
    _c(b"HSET", KEYS, VALUES, VALUES), _c(b"HGET", KEYS, VALUES), _c(b"HDEL", KEYS, VALUES),
    _c(b"HLEN", KEYS), _c(b"HGETALL", KEYS), _c(b"HINCRBY", KEYS, VALUES, INTS),
    _c(b"HEXISTS", KEYS, VALUES), _c(b"HMGET", KEYS, VALUES, VALUES),
    _c(b"HSETNX", KEYS, VALUES, VALUES),
)
SETS = st.one_of(
    _c(b"SADD", KEYS, VALUES, VALUES), _c(b"SREM", KEYS, VALUES), _c(b"SCARD", KEYS),
    _c(b"SISMEMBER", KEYS, VALUES), _c(b"SMEMBERS", KEYS), _c(b"SINTER", KEYS, KEYS),
    _c(b"SMOVE", KEYS, KEYS, VALUES),
)
ZSETS = st.one_of(
    _c(b"ZADD", KEYS, FLOATS, VALUES), _c(b"ZSCORE", KEYS, VALUES), _c(b"ZRANGE", KEYS, INTS, INTS),
    _c(b"ZRANGE", KEYS, INTS, INTS, b"WITHSCORES"), _c(b"ZINCRBY", KEYS, FLOATS, VALUES),
    _c(b"ZREM", KEYS, VALUES), _c(b"ZCARD", KEYS), _c(b"ZRANK", KEYS, VALUES),
    _c(b"ZPOPMIN", KEYS), _c(b"ZRANGEBYSCORE", KEYS, b"-inf", b"+inf"),
)
STREAM_IDS = st.sampled_from([b"1-1", b"1-2", b"2-0", b"5-5", b"0-0", b"0-1", b"bad", b"3"])
# Consumer groups: only what replies the same whatever the clock says (no
# XINFO CONSUMERS, no idle times of the extended XPENDING, no ``*`` IDs).
SKEYS = st.sampled_from([b"k1", b"s", b"s", b"s2"])
GROUPS = st.sampled_from([b"g1", b"g2"])
CONSUMERS = st.sampled_from([b"c1", b"c2"])
READ_IDS = st.sampled_from([b">", b">", b"0", b"1-1", b"$", b"bad"])
GROUP_IDS = st.sampled_from([b"0", b"$", b"1-1", b"2-0", b"bad"])
SMALL = st.sampled_from([b"0", b"1", b"2", b"3", b"-1", b"x"])
STREAMS = st.one_of(
    _c(b"XADD", SKEYS, STREAM_IDS, b"f", VALUES), _c(b"XLEN", SKEYS),
    _c(b"XRANGE", SKEYS, b"-", b"+"),
    _c(b"XREVRANGE", SKEYS, b"+", b"-", b"COUNT", INTS), _c(b"XDEL", SKEYS, STREAM_IDS),
    _c(b"XTRIM", SKEYS, b"MAXLEN", INTS), _c(b"XRANGE", SKEYS, STREAM_IDS, b"+"),
    _c(b"XADD", SKEYS, st.sampled_from([b"MAXLEN", b"MINID"]), st.sampled_from([b"~", b"="]),
       st.sampled_from([b"0", b"1", b"2", b"2-0"]), st.sampled_from([b"6-*", b"7-1", b"1-*"]),
       b"f", VALUES),
    _c(b"XADD", SKEYS, b"NOMKSTREAM", st.sampled_from([b"8-1", b"9-*"]), b"f", VALUES, b"g",
       VALUES),
    _c(b"XTRIM", SKEYS, st.sampled_from([b"MAXLEN", b"MINID"]), b"~",
       st.sampled_from([b"1", b"5-0"]), b"LIMIT", SMALL),
    _c(b"XDEL", SKEYS, STREAM_IDS, STREAM_IDS),
    _c(b"XSETID", SKEYS, st.sampled_from([b"9-9", b"5-5", b"0-0", b"2-0"])),
    _c(b"XSETID", SKEYS, b"9-9", b"ENTRIESADDED", SMALL, b"MAXDELETEDID", STREAM_IDS),
    _c(b"XINFO", b"STREAM", SKEYS), _c(b"XINFO", b"GROUPS", SKEYS),
    _c(b"XGROUP", b"CREATE", SKEYS, GROUPS, GROUP_IDS),
    _c(b"XGROUP", b"CREATE", SKEYS, GROUPS, GROUP_IDS, b"MKSTREAM"),
    _c(b"XGROUP", b"CREATE", SKEYS, GROUPS, b"0", b"ENTRIESREAD", SMALL),
    _c(b"XGROUP", b"SETID", SKEYS, GROUPS, GROUP_IDS),
    _c(b"XGROUP", b"SETID", SKEYS, GROUPS, GROUP_IDS, b"ENTRIESREAD", SMALL),
    _c(b"XGROUP", b"DESTROY", SKEYS, GROUPS),
    _c(b"XGROUP", st.sampled_from([b"CREATECONSUMER", b"DELCONSUMER"]), SKEYS, GROUPS, CONSUMERS),
    _c(b"XREADGROUP", b"GROUP", GROUPS, CONSUMERS, b"STREAMS", SKEYS, READ_IDS),
    _c(b"XREADGROUP", b"GROUP", GROUPS, CONSUMERS, b"COUNT", SMALL, b"STREAMS", SKEYS, READ_IDS),
    _c(b"XREADGROUP", b"GROUP", GROUPS, CONSUMERS, b"NOACK", b"STREAMS", SKEYS, SKEYS, READ_IDS,
       READ_IDS),
    _c(b"XREAD", b"COUNT", SMALL, b"STREAMS", SKEYS, SKEYS, STREAM_IDS,
       st.sampled_from([b"0", b"+"])),
    _c(b"XACK", SKEYS, GROUPS, STREAM_IDS, STREAM_IDS),
    _c(b"XPENDING", SKEYS, GROUPS),
    _c(b"XPENDING", SKEYS, GROUPS, b"IDLE", b"3600000", b"-", b"+", b"10"),
    _c(b"XCLAIM", SKEYS, GROUPS, CONSUMERS, b"0", STREAM_IDS, STREAM_IDS,
       st.sampled_from([b"JUSTID", b"FORCE", b"RETRYCOUNT", b"LASTID"]),
       st.sampled_from([b"JUSTID", b"5", b"5-5"])),
    _c(b"XAUTOCLAIM", SKEYS, GROUPS, CONSUMERS, b"0", st.sampled_from([b"0", b"1-2", b"-"]),
       b"COUNT", st.sampled_from([b"1", b"2", b"100", b"0"])),
    _c(b"XAUTOCLAIM", SKEYS, GROUPS, CONSUMERS, b"0", b"0", b"JUSTID"),
)
# The families of issue 15: bitmaps, HyperLogLog, geo, functions.
OFFSETS = st.sampled_from([b"0", b"1", b"7", b"8", b"100", b"-1", b"x", b"4294967296"])
BITS = st.one_of(
    _c(b"SETBIT", KEYS, OFFSETS, st.sampled_from([b"0", b"1", b"2"])), _c(b"GETBIT", KEYS, OFFSETS),
    _c(b"BITCOUNT", KEYS), _c(b"BITCOUNT", KEYS, INTS, INTS),
    _c(b"BITCOUNT", KEYS, INTS, INTS, st.sampled_from([b"BYTE", b"BIT", b"BAD"])),
    _c(b"BITPOS", KEYS, st.sampled_from([b"0", b"1"]), INTS, INTS,
       st.sampled_from([b"BYTE", b"BIT"])),
    _c(b"BITOP", st.sampled_from([b"AND", b"OR", b"XOR", b"NOT", b"DIFF"]), KEYS, KEYS, KEYS),
    _c(b"BITFIELD", KEYS, b"SET", st.sampled_from([b"u8", b"i5", b"u63", b"i64", b"u64"]),
       st.sampled_from([b"0", b"#1", b"13"]), INTS),
    _c(b"BITFIELD", KEYS, b"OVERFLOW", st.sampled_from([b"WRAP", b"SAT", b"FAIL"]), b"INCRBY",
       st.sampled_from([b"u4", b"i8"]), b"0", INTS, b"GET", b"u4", b"0"),
    _c(b"BITFIELD_RO", KEYS, b"GET", st.sampled_from([b"u8", b"i16"]), OFFSETS),
)
HLLS = st.one_of(
    _c(b"PFADD", KEYS, VALUES, VALUES, VALUES), _c(b"PFADD", KEYS),
    _c(b"PFCOUNT", KEYS), _c(b"PFCOUNT", KEYS, KEYS), _c(b"PFMERGE", KEYS, KEYS, KEYS),
)
LONLAT = st.sampled_from([(b"13.361389", b"38.115556"), (b"15.087269", b"37.502669"),
                          (b"-180", b"-85.05112878"), (b"179.9", b"85"), (b"0", b"0"),
                          (b"200", b"0"), (b"x", b"1")])
GEOS = st.one_of(
    st.tuples(st.just(b"GEOADD"), KEYS, LONLAT, VALUES).map(
        lambda t: [t[0], t[1], t[2][0], t[2][1], t[3]]),
    _c(b"GEOPOS", KEYS, VALUES, VALUES), _c(b"GEOHASH", KEYS, VALUES),
    _c(b"GEODIST", KEYS, VALUES, VALUES, st.sampled_from([b"m", b"km", b"mi", b"ft", b"xx"])),
    st.tuples(KEYS, LONLAT, st.sampled_from([b"10", b"500", b"20000"]),
              st.sampled_from([b"ASC", b"DESC"])).map(
        lambda t: [b"GEOSEARCH", t[0], b"FROMLONLAT", t[1][0], t[1][1], b"BYRADIUS", t[2],
                   b"km", t[3], b"WITHCOORD", b"WITHDIST", b"WITHHASH"]),
    _c(b"GEOSEARCH", KEYS, b"FROMMEMBER", VALUES, b"BYBOX", b"400", b"400", b"km", b"COUNT",
       b"2"),
    _c(b"GEOSEARCHSTORE", KEYS, KEYS, b"FROMMEMBER", VALUES, b"BYRADIUS", b"1000", b"km",
       b"STOREDIST"),
)
FUNCTION_LIB = (b"#!lua name=difflib\n"
                b"server.register_function('dget', function(keys, args) "
                b"return server.call('GET', keys[1]) end)\n"
                b"server.register_function{function_name='dset', callback=function(keys, args) "
                b"return server.call('SET', keys[1], args[1]) end}\n"
                b"server.register_function{function_name='dro', flags={'no-writes'}, "
                b"callback=function(keys, args) return #keys end}")
FUNCTIONS = st.one_of(
    _c(b"FUNCTION", b"LOAD", b"REPLACE", FUNCTION_LIB), _c(b"FUNCTION", b"LOAD", FUNCTION_LIB),
    _c(b"FCALL", st.sampled_from([b"dget", b"dro", b"nosuch"]), b"1", KEYS),
    _c(b"FCALL", b"dset", b"1", KEYS, VALUES), _c(b"FCALL_RO", st.sampled_from([b"dro", b"dset"]),
                                                    b"1", KEYS, VALUES),
    _c(b"FUNCTION", b"DELETE", st.sampled_from([b"difflib", b"nosuch"])),
    # (no FUNCTION LIST: Valkey lists a library's functions in its dict's
    # order, which its per-process hash seed decides)
)
NEW_FAMILIES = st.one_of(BITS, HLLS, GEOS, FUNCTIONS, STRINGS, KEYSPACE)
OTHER = st.one_of(
    _c(b"PING"), _c(b"ECHO", VALUES), _c(b"NOSUCHCMD", VALUES), _c(b"GET"), _c(b"SET", KEYS),
    _c(b"SELECT", st.sampled_from([b"0", b"1", b"16", b"x"])),
)
COMMANDS = st.one_of(STRINGS, LISTS, KEYSPACE, HASHES, SETS, ZSETS, STREAMS, OTHER)
# Inside EXEC a reply is nested, where the runner cannot re-order unordered
# replies: keep those commands out of transaction bodies.
ORDERED_COMMANDS = COMMANDS.filter(lambda argv: argv[0] not in UNORDERED)

EXAMPLES = int(os.environ.get("HOTKV_DIFF_EXAMPLES", "60"))


def _machine(server, ref_server, resp3: bool, commands=COMMANDS, ordered=ORDERED_COMMANDS):
    class Differential(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.pair = Pair((server.host, server.port), (ref_server.host, ref_server.port),
                             resp3=resp3)
            self.pair.run([b"FLUSHALL"])

        @rule(argv=commands)
        def command(self, argv):
            ours, theirs = self.pair.run(argv)
            assert ours == theirs, f"{argv!r}\n hotkv:  {ours!r}\n valkey: {theirs!r}"

        @rule(body=st.lists(ordered, min_size=1, max_size=4))
        def transaction(self, body):
            for argv in [[b"MULTI"], *body, [b"EXEC"]]:
                ours, theirs = self.pair.run(argv)
                assert ours == theirs, f"{argv!r} in MULTI\n hotkv:  {ours!r}\n valkey: {theirs!r}"

        def teardown(self):
            self.pair.close()

    Differential.TestCase.settings = settings(
        max_examples=EXAMPLES, stateful_step_count=30, deadline=None,
        suppress_health_check=list(HealthCheck))
    return Differential


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_random_command_sequences(server, ref_server, resp3):
    _machine(server, ref_server, resp3).TestCase().runTest()


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_random_stream_sequences(server, ref_server, resp3):
    """Streams and consumer groups only, on three keys (one also drawn by
    the other families' commands above): groups get created, read, acked,
    claimed and destroyed on the same streams within one example."""
    _machine(server, ref_server, resp3, STREAMS, STREAMS).TestCase().runTest()


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_random_new_family_sequences(server, ref_server, resp3):
    """Bitmaps, HyperLogLog, geo and functions, mixed with strings and the
    keyspace on the same keys (wrong types, overwrites, DEL, RENAME)."""
    ordered = NEW_FAMILIES.filter(lambda argv: argv[0] not in UNORDERED)
    try:
        _machine(server, ref_server, resp3, NEW_FAMILIES, ordered).TestCase().runTest()
    finally:
        pair = Pair((server.host, server.port), (ref_server.host, ref_server.port))
        pair.run([b"FUNCTION", b"FLUSH"])
        pair.close()


SCRIPTS = {
    "reliable-list-queue": [
        [b"LPUSH", b"queue:emails", b'{"to":"ada@example.com","tpl":"welcome"}'],
        [b"LPUSH", b"queue:emails", b"job2"],
        [b"BLMOVE", b"queue:emails", b"queue:emails:processing", b"RIGHT", b"LEFT", b"0"],
        [b"LRANGE", b"queue:emails:processing", b"0", b"-1"],
        [b"LREM", b"queue:emails:processing", b"1", b'{"to":"ada@example.com","tpl":"welcome"}'],
        [b"BLMOVE", b"queue:emails", b"queue:emails:processing", b"RIGHT", b"LEFT", b"0"],
        [b"LMOVE", b"queue:emails:processing", b"queue:emails", b"LEFT", b"RIGHT"],
        [b"LRANGE", b"queue:emails", b"0", b"-1"],
        [b"BRPOP", b"queue:emails", b"1"],
        [b"BRPOP", b"queue:emails", b"0.05"],
    ],
    "counters-and-locks": [
        [b"SET", b"lock", b"owner1", b"NX", b"PX", b"30000"],
        [b"SET", b"lock", b"owner2", b"NX", b"PX", b"30000"],
        [b"GET", b"lock"], [b"INCR", b"jobs:done"], [b"INCRBY", b"jobs:done", b"41"],
        [b"INCRBYFLOAT", b"f", b"0.1"], [b"INCRBYFLOAT", b"f", b"0.2"],
        [b"INCRBYFLOAT", b"f", b"1e300"], [b"GETDEL", b"lock"], [b"EXISTS", b"lock"],
    ],
    "streams-with-groups": [
        [b"XADD", b"s", b"1-1", b"job", b"a"], [b"XADD", b"s", b"1-2", b"job", b"b"],
        [b"XGROUP", b"CREATE", b"s", b"g", b"0"],
        [b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"1", b"STREAMS", b"s", b">"],
        [b"XPENDING", b"s", b"g"], [b"XACK", b"s", b"g", b"1-1"], [b"XACK", b"s", b"g", b"1-1"],
        [b"XREADGROUP", b"GROUP", b"g", b"c2", b"STREAMS", b"s", b">"],
        [b"XREADGROUP", b"GROUP", b"g", b"c2", b"STREAMS", b"s", b"0"],
        [b"XLEN", b"s"], [b"XDEL", b"s", b"1-2"], [b"XTRIM", b"s", b"MAXLEN", b"0"],
        [b"XGROUP", b"CREATE", b"s2", b"g", b"$"],
        [b"XGROUP", b"CREATE", b"s2", b"g", b"$", b"MKSTREAM"],
    ],
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
def test_scripts(server, ref_server, name, resp3):
    pair = Pair((server.host, server.port), (ref_server.host, ref_server.port), resp3=resp3)
    try:
        pair.run([b"FLUSHALL"])
        assert pair.first_divergence(SCRIPTS[name]) is None
    finally:
        pair.close()
