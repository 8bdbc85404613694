"""Keyspace notifications (hotkv/core/notify.py): the notify-keyspace-events
parameter, the channel/message shapes, class masks, and -- per command
family -- the exact events every write command emits, compared with the
reference Valkey: the same commands run on both servers while a
``PSUBSCRIBE *`` connection on each records what was published.
"""

from __future__ import annotations

import time

import pytest

from hotkv import EmbeddedServer
from support import RawClient, ReferenceValkey


def _parse(raw: bytes):
    """One RESP2 array of bulks/ints -> list of bytes/int."""
    assert raw[:1] == b"*", raw
    nl = raw.index(b"\r\n")
    out, pos = [], nl + 2
    for _ in range(int(raw[1:nl])):
        kind = raw[pos:pos + 1]
        nl = raw.index(b"\r\n", pos)
        if kind == b":":
            out.append(int(raw[pos + 1:nl]))
            pos = nl + 2
        else:
            n = int(raw[pos + 1:nl])
            out.append(raw[nl + 2:nl + 2 + n] if n >= 0 else None)
            pos = nl + 2 + max(n, 0) + (2 if n >= 0 else 0)
    return out


class Recorder:
    """A command connection plus a PSUBSCRIBE * connection on one server."""

    def __init__(self, host, port):
        self.cmd = RawClient(host, port)
        self.sub = RawClient(host, port)
        self.sub.call("PSUBSCRIBE", "*")

    def events(self):
        """Everything published so far: (channel, message) pairs, in order.
        The PING reply is the barrier: it is queued after every message
        published before it was processed."""
        self.sub.send("PING")
        got = []
        while True:
            msg = _parse(self.sub.read_reply())
            if msg[0] == b"pong":
                return got
            assert msg[0] == b"pmessage", msg
            got.append((msg[2], msg[3]))

    def run(self, commands):
        replies = [self.cmd.call(*c) for c in commands]
        return replies, self.events()

    def close(self):
        self.cmd.close()
        self.sub.close()


@pytest.fixture(scope="module")
def servers():
    ours = EmbeddedServer(notify_keyspace_events="KEA").start()
    theirs = ReferenceValkey("--notify-keyspace-events", "KEA").start()
    try:
        yield ours, theirs
    finally:
        ours.stop()
        theirs.stop()


@pytest.fixture
def rec(servers):
    ours, theirs = servers
    pair = (Recorder(ours.host, ours.port), Recorder(theirs.host, theirs.port))
    for r in pair:
        r.cmd.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
        r.cmd.call("FLUSHALL")
        r.events()
    yield pair
    for r in pair:
        r.close()


def compare(rec, commands, setup=()):
    """Run setup, then commands, on both servers; the events of commands
    must be identical (and there must be some, or the test proves nothing)."""
    ours, theirs = rec
    for r in rec:
        for c in setup:
            r.cmd.call(*c)
        r.events()
    our_replies, our_events = ours.run(commands)
    their_replies, their_events = theirs.run(commands)
    assert our_events == their_events, (
        "\n hotkv:  %r\n valkey: %r" % (our_events, their_events))
    assert their_events, "scenario emits nothing on Valkey either"
    return our_events


# ----------------------------------------------------------------------
# Per command family, against Valkey
# ----------------------------------------------------------------------

STRINGS = {
    "set": [("SET", "k", "v"), ("SET", "k", "v2", "EX", "100"), ("SET", "k", "v3", "KEEPTTL"),
            ("SET", "k", "v4", "PX", "100000", "GET"), ("SET", "k", "x", "NX"),
            ("SET", "k", "x", "XX", "PXAT", "99999999999999"),
            ("SET", "k", "x", "EXAT", "1")],
    "setnx_setex": [("SETNX", "a", "1"), ("SETNX", "a", "2"), ("SETEX", "b", "100", "v"),
                    ("PSETEX", "c", "100000", "v"), ("GETSET", "a", "3"), ("GETSET", "new", "1")],
    "mset": [("MSET", "a", "1", "b", "2"), ("MSETNX", "c", "1", "d", "2"),
             ("MSETNX", "c", "1", "e", "2")],
    "getdel_getex": [("SET", "a", "1"), ("GETDEL", "a"), ("GETDEL", "a"), ("SET", "b", "1"),
                     ("GETEX", "b", "EX", "100"), ("GETEX", "b", "PERSIST"), ("GETEX", "b"),
                     ("GETEX", "b", "PXAT", "1")],
    "append_setrange": [("APPEND", "a", "x"), ("APPEND", "a", "y"), ("SETRANGE", "b", "3", "z"),
                        ("SETRANGE", "b", "0", "w"), ("SETRANGE", "c", "0", "")],
    "counters": [("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", "5"), ("DECRBY", "n", "2"),
                 ("INCRBYFLOAT", "f", "1.5"), ("INCR", "f")],
    "setbit": [("SETBIT", "bits", "7", "1"), ("SETBIT", "bits", "7", "0")],
}

KEYSPACE = {
    "del_unlink": [("SET", "a", "1"), ("SET", "b", "1"), ("DEL", "a", "b", "nope"),
                   ("SET", "c", "1"), ("UNLINK", "c", "nope")],
    "expire_family": [("SET", "a", "1"), ("EXPIRE", "a", "100"), ("PEXPIRE", "a", "200000"),
                      ("EXPIREAT", "a", "99999999999"), ("PEXPIREAT", "a", "99999999999999"),
                      ("EXPIRE", "a", "10", "GT"), ("EXPIRE", "a", "1000", "LT"),
                      ("PERSIST", "a"), ("PERSIST", "a"), ("EXPIRE", "nope", "10"),
                      ("EXPIRE", "a", "0"), ("SET", "b", "1"), ("PEXPIREAT", "b", "1")],
    "rename": [("SET", "a", "1"), ("RENAME", "a", "b"), ("SET", "c", "1"),
               ("RENAMENX", "b", "c"), ("RENAMENX", "b", "d"), ("RENAME", "d", "d")],
    "move_copy": [("SET", "a", "1"), ("MOVE", "a", "1"), ("SET", "b", "1"), ("COPY", "b", "c"),
                  ("COPY", "b", "c", "REPLACE"), ("COPY", "b", "x", "DB", "2")],
}

LISTS = {
    "push_pop": [("LPUSH", "l", "a", "b"), ("RPUSH", "l", "c"), ("LPUSHX", "l", "d"),
                 ("RPUSHX", "l", "e"), ("LPUSHX", "nol", "d"), ("LPOP", "l"), ("RPOP", "l", "2"),
                 ("LPOP", "l", "5"), ("LPOP", "l")],
    "edit": [("RPUSH", "l", "a", "b", "c", "b"), ("LINSERT", "l", "BEFORE", "b", "x"),
             ("LINSERT", "l", "AFTER", "zz", "x"), ("LSET", "l", "0", "A"), ("LREM", "l", "0", "b"),
             ("LREM", "l", "0", "zz"), ("LTRIM", "l", "0", "1"), ("LTRIM", "l", "5", "10")],
    "move": [("RPUSH", "s", "a", "b", "c"), ("RPOPLPUSH", "s", "d"), ("LMOVE", "s", "d", "LEFT",
                                                                       "RIGHT"),
             ("LMOVE", "s", "s", "LEFT", "RIGHT"), ("LMOVE", "s", "d", "RIGHT", "LEFT")],
    "mpop_blocking_forms": [("RPUSH", "a", "1", "2", "3"), ("LMPOP", "1", "a", "LEFT"),
                            ("BLPOP", "a", "0"), ("BRPOP", "a", "0"),
                            ("RPUSH", "b", "1"), ("BLMOVE", "b", "c", "LEFT", "LEFT", "0"),
                            ("BRPOPLPUSH", "c", "b", "0"), ("BLMPOP", "0", "1", "b", "RIGHT")],
}

HASHES = {
    "hset": [("HSET", "h", "a", "1", "b", "2"), ("HMSET", "h", "c", "3"), ("HSETNX", "h", "a", "x"),
             ("HSETNX", "h", "z", "x"), ("HSET", "h", "a", "1")],
    "hdel": [("HSET", "h", "a", "1", "b", "2"), ("HDEL", "h", "nope"), ("HDEL", "h", "a"),
             ("HDEL", "h", "b")],
    "hincr": [("HINCRBY", "h", "n", "5"), ("HINCRBYFLOAT", "h", "f", "0.5")],
}

SETS = {
    "sadd_srem": [("SADD", "s", "a", "b"), ("SADD", "s", "a"), ("SREM", "s", "x"),
                  ("SREM", "s", "a"), ("SREM", "s", "b")],
    "spop_smove": [("SADD", "s", "a", "b", "c"), ("SPOP", "s"), ("SPOP", "s", "1"),
                   ("SMOVE", "s", "t", "nope"), ("SADD", "u", "q"), ("SMOVE", "u", "t", "q"),
                   ("SPOP", "t", "10")],
    "store": [("SADD", "a", "1", "2"), ("SADD", "b", "2", "3"), ("SINTERSTORE", "i", "a", "b"),
              ("SUNIONSTORE", "u", "a", "b"), ("SDIFFSTORE", "d", "a", "b"),
              ("SDIFFSTORE", "d", "a", "a"), ("SINTERSTORE", "i", "a", "nope")],
}

ZSETS = {
    "zadd_zrem": [("ZADD", "z", "1", "a", "2", "b"), ("ZADD", "z", "1", "a"),
                  ("ZADD", "z", "INCR", "5", "a"), ("ZINCRBY", "z", "1", "b"),
                  ("ZREM", "z", "x"), ("ZREM", "z", "a"), ("ZREM", "z", "b")],
    "zremrange": [("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"),
                  ("ZREMRANGEBYSCORE", "z", "1", "1"), ("ZREMRANGEBYRANK", "z", "0", "0"),
                  ("ZREMRANGEBYLEX", "z", "[c", "[c"), ("ZREMRANGEBYSCORE", "z", "100", "200"),
                  ("ZREMRANGEBYRANK", "z", "0", "-1")],
    "zpop": [("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z", "5"),
             ("ZADD", "y", "1", "a", "2", "b"), ("BZPOPMIN", "y", "0"), ("BZPOPMAX", "y", "0"),
             ("ZADD", "x", "1", "a"), ("ZMPOP", "1", "x", "MIN"), ("ZADD", "w", "1", "a"),
             ("BZMPOP", "0", "1", "w", "MAX", "COUNT", "5")],
    "store": [("ZADD", "a", "1", "x", "2", "y"), ("ZADD", "b", "3", "y"),
              ("ZUNIONSTORE", "u", "2", "a", "b"), ("ZINTERSTORE", "i", "2", "a", "b"),
              ("ZDIFFSTORE", "d", "2", "a", "b"), ("ZRANGESTORE", "r", "a", "0", "-1"),
              ("ZINTERSTORE", "i", "2", "a", "nope"), ("ZRANGESTORE", "r", "a", "5", "6")],
}

STREAMS = {
    "xadd_xdel_xtrim": [("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "MAXLEN", "1", "*", "f", "v"),
                        ("XADD", "s", "NOMKSTREAM", "*", "f", "v"),
                        ("XADD", "t", "NOMKSTREAM", "*", "f", "v"), ("XDEL", "s", "1-1"),
                        ("XDEL", "s", "0-1"), ("XTRIM", "s", "MAXLEN", "0"),
                        ("XTRIM", "s", "MAXLEN", "0"), ("XSETID", "s", "999999999999999-0")],
    "groups": [("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
               ("XGROUP", "CREATECONSUMER", "s", "g", "bob"),
               ("XGROUP", "CREATECONSUMER", "s", "g", "bob"), ("XADD", "s", "1-1", "f", "v"),
               ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
               ("XCLAIM", "s", "g", "mike", "0", "1-1", "FORCE"),
               ("XAUTOCLAIM", "s", "g", "bob", "0", "0"),
               ("XGROUP", "DELCONSUMER", "s", "g", "lee"),
               ("XGROUP", "DELCONSUMER", "s", "g", "bob"), ("XACK", "s", "g", "1-1"),
               ("XGROUP", "SETID", "s", "g", "0"), ("XGROUP", "DESTROY", "s", "g"),
               ("XGROUP", "DESTROY", "s", "g")],
}

FAMILIES = {"strings": STRINGS, "keyspace": KEYSPACE, "lists": LISTS, "hashes": HASHES,
            "sets": SETS, "zsets": ZSETS, "streams": STREAMS}

CASES = [pytest.param(cmds, id=f"{family}-{name}")
         for family, table in FAMILIES.items() for name, cmds in table.items()]


@pytest.mark.parametrize("commands", CASES)
def test_events_match_valkey(rec, commands):
    compare(rec, commands)


def test_new_key_events_match_valkey(rec):
    for r in rec:
        r.cmd.call("CONFIG", "SET", "notify-keyspace-events", "En")
    events = compare(rec, [("SET", "foo", "bar"), ("SET", "foo", "baz"), ("SET", "bar", "bar"),
                           ("LPUSH", "l", "a"), ("LPUSH", "l", "b"), ("HSET", "h", "f", "v"),
                           ("SADD", "s", "m"), ("ZADD", "z", "1", "m"),
                           ("XADD", "x", "*", "f", "v"),
                           ("INCR", "n"), ("APPEND", "ap", "x"), ("RENAME", "foo", "moved"),
                           ("SUNIONSTORE", "su", "s")])
    assert (b"__keyevent@0__:new", b"foo") in events


def test_expired_events_lazy_and_active(rec):
    for r in rec:
        r.cmd.call("PSETEX", "lazy", "1", "v")
        r.cmd.call("PSETEX", "active", "30", "v")
    time.sleep(0.05)
    for r in rec:
        assert r.cmd.call("GET", "lazy") == b"$-1\r\n"   # lazy expiry on access
    deadline = time.time() + 5
    got = [[], []]
    while time.time() < deadline:
        for i, r in enumerate(rec):
            got[i] += r.events()
        if all((b"__keyevent@0__:expired", b"active") in g for g in got):
            break
        time.sleep(0.05)
    for g in got:
        assert (b"__keyspace@0__:lazy", b"expired") in g
        assert (b"__keyevent@0__:expired", b"lazy") in g
        assert (b"__keyevent@0__:expired", b"active") in g


# ----------------------------------------------------------------------
# The parameter and the channel shapes
# ----------------------------------------------------------------------

def test_config_get_formats_flags_as_valkey(diff):
    try:
        for flags in ("KA", "EA", "gKE", "$lshzxeKE", "AKE", "An", "AKEm", "Km", "nKE", "dt",
                      "xE", "", "K", "E", "AAdtnm"):
            diff("CONFIG", "SET", "notify-keyspace-events", flags)
            diff("CONFIG", "GET", "notify-keyspace-events")
        for bad in ("q", "KEA ", "kea", "1"):
            diff("CONFIG", "SET", "notify-keyspace-events", bad)
        diff("CONFIG", "GET", "notify-keyspace-events")
    finally:
        diff("CONFIG", "SET", "notify-keyspace-events", "")


def test_masks_select_classes_and_kinds(rec):
    ours, _ = rec
    c = ours.cmd
    c.call("CONFIG", "SET", "notify-keyspace-events", "Kl")
    c.call("SET", "foo", "bar")
    c.call("LPUSH", "mylist", "a")
    assert ours.events() == [(b"__keyspace@0__:mylist", b"lpush")]
    c.call("CONFIG", "SET", "notify-keyspace-events", "E$")
    c.call("SET", "foo", "bar")
    c.call("LPUSH", "mylist", "a")
    assert ours.events() == [(b"__keyevent@0__:set", b"foo")]
    c.call("CONFIG", "SET", "notify-keyspace-events", "A")   # no K nor E: nothing
    c.call("SET", "foo", "bar")
    c.call("CONFIG", "SET", "notify-keyspace-events", "KE")  # no class: nothing
    c.call("SET", "foo", "bar")
    assert ours.events() == []
    c.call("CONFIG", "SET", "notify-keyspace-events", "Kg")
    c.call("SET", "foo", "bar")
    c.call("EXPIRE", "foo", "100")
    c.call("DEL", "foo")
    assert ours.events() == [(b"__keyspace@0__:foo", b"expire"), (b"__keyspace@0__:foo", b"del")]


def test_database_index_and_binary_keys(rec):
    ours, theirs = rec
    key = b"bin\x00\xff key\r\n"
    for r in rec:
        r.cmd.call("SELECT", "13")
    events = compare(rec, [("SET", key, "v"), ("DEL", key)])
    assert events[0] == (b"__keyspace@13__:" + key, b"set")
    assert events[1] == (b"__keyevent@13__:set", key)


def test_notification_to_self_follows_the_reply(servers):
    ours, _ = servers
    c = RawClient(ours.host, ours.port)
    try:
        c.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
        c.call("HELLO", "3")
        c.call("SUBSCRIBE", "__keyspace@0__:mine")
        c.send("SET", "mine", "v")
        assert c.read_reply() == b"+OK\r\n"
        assert c.read_reply() == (b">3\r\n$7\r\nmessage\r\n$19\r\n__keyspace@0__:mine\r\n"
                                  b"$3\r\nset\r\n")
    finally:
        c.close()


def test_config_file_setting(hotkv_server_factory):
    srv = hotkv_server_factory(notify_keyspace_events="Elg")
    c = RawClient(srv.host, srv.port)
    try:
        assert c.call("CONFIG", "GET", "notify-keyspace-events").endswith(b"$3\r\nglE\r\n")
        sub = Recorder(srv.host, srv.port)
        c.call("SET", "k", "v")
        c.call("RPUSH", "l", "x")
        c.call("DEL", "k")
        assert sub.events() == [(b"__keyevent@0__:rpush", b"l"), (b"__keyevent@0__:del", b"k")]
        sub.close()
    finally:
        c.close()
    from hotkv.core.config import ConfigError
    with pytest.raises(ConfigError):
        hotkv_server_factory(notify_keyspace_events="Kq")


@pytest.mark.parametrize("block,wake", [
    (("BLPOP", "q", "0"), ("RPUSH", "q", "a", "b")),
    (("BLMOVE", "q", "d", "LEFT", "RIGHT", "0"), ("LPUSH", "q", "a")),
    (("BZPOPMIN", "z", "0"), ("ZADD", "z", "1", "a")),
    (("BLMPOP", "0", "1", "q", "LEFT", "COUNT", "5"), ("RPUSH", "q", "a", "b")),
    (("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"),
     ("XADD", "s", "1-1", "f", "v")),
], ids=["blpop", "blmove", "bzpopmin", "blmpop", "xreadgroup"])
def test_events_of_served_blocked_clients_match_valkey(servers, rec, block, wake):
    """A blocked command served by another client's write: the writer's event
    first, then the events of the served command, as in Valkey."""
    transcripts = []
    for r, srv in zip(rec, servers):
        if block[0] == "XREADGROUP":
            r.cmd.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        r.events()
        waiter = RawClient(srv.host, srv.port)
        waiter.send(*block)
        for _ in range(200):   # wait until it is blocked
            if b"blocked_clients:1" in r.cmd.call("INFO", "clients"):
                break
            time.sleep(0.005)
        r.cmd.call(*wake)
        waiter.read_reply()
        waiter.close()
        transcripts.append(r.events())
    assert transcripts[0] == transcripts[1], transcripts
    assert transcripts[1]
