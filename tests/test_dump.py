"""DUMP / RESTORE (hotkv/commands/dump.py, hotkv/persistence/rdb.py).

* Cross-server round trips for every type and encoding size: a value built
  in the reference Valkey is DUMPed there and RESTOREd here, and one built
  here is DUMPed here and RESTOREd there; the contents (and, for what we
  write, Valkey's OBJECT ENCODING of the result) must match.
* Byte-for-byte replies and errors against Valkey (``diff``), including the
  DUMP bytes of values Valkey does not LZF-compress.
* Legacy encodings Valkey 8.1 no longer writes (zipmap, ziplists, quicklist
  of ziplists, intsets of every width, string-encoded zset scores): the
  values of Valkey's own test RDB files (tests/assets/*.rdb of the Valkey
  repository, BSD-3-Clause, embedded below) are cut into DUMP payloads and
  RESTOREd into both servers.
* Corrupt payloads with a valid checksum give "Bad data format" (or a
  value), never a dead server; RESTORE's side effects: TTL, ABSTTL logging
  to the AOF, keyspace events, WATCH, and BLPOP wake-up.
"""

from __future__ import annotations

import base64
import os
import random
import time

import pytest
import valkey

from hotkv.persistence import rdb

# ----------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------


def payload(body: bytes, version: int = rdb.RDB_VERSION) -> bytes:
    """A DUMP payload around a type byte + value body."""
    body = body + version.to_bytes(2, "little")
    return body + rdb.crc64(body).to_bytes(8, "little")


def snapshot(client, key):
    """A comparable picture of a key's value."""
    t = client.type(key)
    if t == b"string":
        return t, client.get(key)
    if t == b"list":
        return t, client.lrange(key, 0, -1)
    if t == b"set":
        return t, sorted(client.smembers(key))
    if t == b"hash":
        return t, sorted(client.hgetall(key).items())
    if t == b"zset":
        return t, client.zrange(key, 0, -1, withscores=True)
    if t == b"stream":
        return t, client.execute_command("XINFO", "STREAM", key, "FULL")
    return t, None


@pytest.fixture
def pair(r, ref_server):
    theirs = valkey.Valkey(host=ref_server.host, port=ref_server.port)
    theirs.flushall()
    theirs.config_set("sanitize-dump-payload", "yes")
    yield r, theirs
    for client in (r, theirs):      # whatever a test changed, even when it failed
        client.config_set("list-max-listpack-size", "-2")
    theirs.config_set("sanitize-dump-payload", "no")
    theirs.close()


def both(pair, *cmd):
    for client in pair:
        client.execute_command(*cmd)


def round_trip(pair, key, check_encoding=True):
    ours, theirs = pair
    want = snapshot(theirs, key)
    assert want[0] != b"none"
    assert snapshot(ours, key) == want, key
    # Valkey -> hotkv
    ours.restore(key + "{v}", 0, theirs.dump(key))
    assert snapshot(ours, key + "{v}") == want, key
    # hotkv -> Valkey (and hotkv -> hotkv)
    mine = ours.dump(key)
    theirs.restore(key + "{h}", 0, mine)
    assert snapshot(theirs, key + "{h}") == want, key
    ours.restore(key + "{h}", 0, mine)
    assert snapshot(ours, key + "{h}") == want, key
    if check_encoding:
        assert theirs.object("encoding", key + "{h}") == theirs.object("encoding", key), key
    return mine


# ----------------------------------------------------------------------
# Cross-server round trips
# ----------------------------------------------------------------------

STRINGS = ["", "a", "0", "12", "-1", "127", "-128", "128", "32767", "-32769", "2147483647",
           "2147483648", "-2147483648", "9223372036854775807", "-9223372036854775808",
           "9223372036854775808", "123456789012", "007", "+1", "1.5", "x" * 30,
           "hello world " * 10, "\x00\xff\r\n"]


def test_strings_round_trip(pair):
    for i, s in enumerate(STRINGS):
        both(pair, "SET", f"s{i}", s)
        round_trip(pair, f"s{i}", check_encoding=False)
    blob = bytes(random.Random(1).randrange(256) for _ in range(20000))
    both(pair, "SET", "blob", blob)
    round_trip(pair, "blob")


def test_lists_round_trip(pair):
    ints = ["0", "12", "13", "127", "-4096", "4095", "32767", "-32768", "8388607",
            "-8388608", "2147483647", "-2147483648", "9223372036854775807",
            "-9223372036854775808", "9223372036854775808"]
    both(pair, "RPUSH", "small", "a", "", *ints, "x" * 63, "y" * 64, "z" * 4095, "w" * 4096)
    round_trip(pair, "small")
    both(pair, "RPUSH", "tiny", "only")
    round_trip(pair, "tiny")
    both(pair, "RPUSH", "big", *[f"item:{i}" for i in range(3000)])
    round_trip(pair, "big")
    both(pair, "RPUSH", "huge", "x" * 70000, "y", "z" * 10000)
    round_trip(pair, "huge")
    both(pair, "LPUSH", "numbers", *[str(i * 7919) for i in range(2000)])
    round_trip(pair, "numbers")


def test_list_fill_settings(pair):
    for fill in ("5", "1", "0", "-1", "-5"):
        both(pair, "CONFIG", "SET", "list-max-listpack-size", fill)
        key = f"l{fill}"
        both(pair, "RPUSH", key, *[f"e{i}" * (i % 7 + 1) for i in range(300)])
        round_trip(pair, key)
        both(pair, "RPUSH", key + "s", "a", "b")
        round_trip(pair, key + "s")


def test_sets_round_trip(pair):
    both(pair, "SADD", "i16", "1", "-5", "300", "32767", "-32768")
    both(pair, "SADD", "i32", "1", "70000", "-2147483648")
    both(pair, "SADD", "i64", "1", "9223372036854775807", "-9223372036854775808")
    both(pair, "SADD", "lp", "a", "1", "bb", "")
    both(pair, "SADD", "intbig", *[str(i) for i in range(600)])
    both(pair, "SADD", "strbig", *[f"m{i}" for i in range(200)])
    both(pair, "SADD", "long", "a", "x" * 65)
    both(pair, "SADD", "one", "7")
    for key in ("i16", "i32", "i64", "lp", "intbig", "strbig", "long", "one"):
        round_trip(pair, key)


def test_hashes_round_trip(pair):
    both(pair, "HSET", "small", "f", "v", "n", "12", "neg", "-70000", "e", "")
    both(pair, "HSET", "big", *[x for i in range(200) for x in (f"f{i}", str(i))])
    both(pair, "HSET", "longval", "f", "v" * 100)
    both(pair, "HSET", "longfield", "f" * 100, "v")
    for key in ("small", "big", "longval", "longfield"):
        round_trip(pair, key)


def test_zsets_round_trip(pair):
    scores = ["1", "1.5", "-inf", "+inf", "1e100", "-0", "5e-324", "0.1", "-2.5e-7",
              "4611686018427387904", "4611686018427387905", "123456789", "-3"]
    args = [x for i, s in enumerate(scores) for x in (s, f"m{i}")]
    both(pair, "ZADD", "small", *args)
    both(pair, "ZADD", "big", *[x for i in range(300) for x in (str(i / 7), f"m{i}")], *args)
    both(pair, "ZADD", "long", "1", "x" * 65, "2", "y")
    for key in ("small", "big", "long"):
        round_trip(pair, key)


def test_streams_round_trip(pair):
    ours, theirs = pair
    for i in range(1, 260):
        both(pair, "XADD", "s", f"{i}-1", "field", f"v{i}", *(["extra", "x"] if i % 5 == 0 else []))
    both(pair, "XDEL", "s", "3-1", "4-1", "200-1")
    both(pair, "XGROUP", "CREATE", "s", "g1", "0")
    both(pair, "XGROUP", "CREATE", "s", "g2", "$")
    both(pair, "XGROUP", "CREATE", "s", "g3", "10-1", "ENTRIESREAD", "5")
    theirs.execute_command("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "5", "STREAMS", "s", ">")
    theirs.execute_command("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "3", "STREAMS", "s", ">")
    theirs.execute_command("XACK", "s", "g1", "2-1")
    theirs.execute_command("XGROUP", "CREATECONSUMER", "s", "g2", "carol")
    # the consumer state (times) only exists on Valkey: restore it here first
    ours.restore("s", 0, theirs.dump("s"), replace=True)
    round_trip(pair, "s")
    both(pair, "XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    ours.restore("empty", 0, theirs.dump("empty"), replace=True)
    round_trip(pair, "empty")


def test_dump_bytes_match_valkey(diff):
    """Values Valkey does not compress (strings up to 20 bytes, small
    listpacks and intsets, plain encodings of short members) dump to the
    very same bytes."""
    script = [("SET", "s", "hello"), ("SET", "n", "12345"), ("SET", "b", "9223372036854775807"),
              ("RPUSH", "l", "a", "1", "-300"), ("SADD", "si", "1", "2", "-5"),
              ("SADD", "sl", "a"), ("HSET", "h", "f", "v"), ("ZADD", "z", "1.5", "a", "2", "b"),
              ("XADD", "x", "1-1", "f", "v")]
    for cmd in script:
        diff(*cmd)
    for key in ("s", "n", "b", "l", "si", "sl", "h", "z", "x", "missing"):
        diff("DUMP", key)


# ----------------------------------------------------------------------
# Legacy encodings: Valkey's test RDB files
# ----------------------------------------------------------------------

ASSETS = {
    "encodings": (
        "UkVESVMwMDA0/gADBHpzZXQMAmJiAjIwAmNjAjMwA2JiYgMyMDAEYmJiYgo1MDAwMDAwMDAwA2NjYwMzMDAEY2NjYwkxMjM0NTY3"
        "ODkBYQExAmFhAjEwAWIBMgNhYWEDMTAwAWMBMwRhYWFhBDEwMDALDHNldF96aXBwZWRfMRACAAAABAAAAAEAAgADAAQACgtsaXN0"
        "X3ppcHBlZDAwAAAAJQAAAAgAAMABAATAAgAEwAMABAFhAwFiAwFjA9CghgEABuAAvKBlAQAAAP8ABnN0cmluZwtIZWxsbyBXb3Js"
        "ZAAMY29tcHJlc3NpYmxlwwlAiQFhYeB8AAFhYQsMc2V0X3ppcHBlZF8yGAQAAAAEAAAAoIYBAEANAwDgkwQAgBoGAAAGbnVtYmVy"
        "wAoLDHNldF96aXBwZWRfMzgIAAAABgAAAADKmjsAAAAAAJQ1dwAAAAAAXtCyAAAAAAAoa+4AAAAAAPIFKgEAAAAAvKBlAQAAAAID"
        "c2V0CAo2MDAwMDAwMDAwwqCGAQABYcABAWLAAgFjwAMBBGxpc3QYwAHAAsADAWEBYgFjwqCGAQAKNjAwMDAwMDAwMMABwALAAwFh"
        "AWIBY8KghgEACjYwMDAwMDAwMDDAAcACwAMBYQFiAWPCoIYBAAo2MDAwMDAwMDAwDQtoYXNoX3ppcHBlZCAgAAAAGwAAAAYAAAFh"
        "A8ABAAQBYgPAAgAEAWMDwAMA/wwLenNldF96aXBwZWQgIAAAABsAAAAGAAABYQPAAQAEAWIDwAIABAFjA8ADAP8EBGhhc2gLAWLA"
        "AgJhYcAKAWPAAwNhYWHAZAJiYsAUAmNjwB4DYmJiwcgAA2NjY8EsAQNkZGTBkAEDZWVlCjUwMDAwMDAwMDABYcAB/w=="),
    "hash-zipmap": "UkVESVMwMDAz/gAJBGhhc2gQAgJmMQIAdjECZjICAHYy//8=",
    "hash-ziplist": (
        "UkVESVMwMDA5+glyZWRpcy12ZXILMjU1LjI1NS4yNTX6CnJlZGlzLWJpdHPAQPoFY3RpbWXCyFyWYPoIdXNlZC1tZW3CkK0MAPoM"
        "YW9mLXByZWFtYmxlwAD+APsBAA0EaGFzaBsbAAAAFgAAAAQAAAJmMQQCdjEEAmYyBAJ2Mv//T5zR/RZpmIM="),
    "list-quicklist": (
        "UkVESVMwMDA4+glyZWRpcy12ZXIFNC4wLjn6CnJlZGlzLWJpdHPAQPoFY3RpbWXCnwYmYfoIdXNlZC1tZW3CgJIHAPoMYW9mLXBy"
        "ZWFtYmxlwAD+APsCAA4EbGlzdAENDQAAAAoAAAABAAD4/wABeMAH/zVy+FQaxNdA"),
    "zset-ziplist": (
        "UkVESVMwMDEw+glyZWRpcy12ZXILMjU1LjI1NS4yNTX6CnJlZGlzLWJpdHPAQPoFY3RpbWXCYrcTYfoIdXNlZC1tZW3CUPQMAPoM"
        "YW9mLXByZWFtYmxlwAD+APsBAAwEenNldBkZAAAAFgAAAAQAAANvbmUF8gIDdHdvBfP//x+y/fCZf54Z"),
    "corrupt_empty_keys": (
        "UkVESVMwMDEw+glyZWRpcy12ZXILMjU1LjI1NS4yNTX6CnJlZGlzLWJpdHPAQPoFY3RpbWXCehgVYfoIdXNlZC1tZW3CgDEQAPoM"
        "YW9mLXByZWFtYmxlwAD+APsJAAIDc2V0AAQEaGFzaAAKDGxpc3RfemlwbGlzdAsLAAAACgAAAAAA/wUEenNldAARDXpzZXRfbGlz"
        "dHBhY2sHBwAAAAAA/xAMaGFzaF96aXBsaXN0BwcAAAAAAP8ODmxpc3RfcXVpY2tsaXN0AAwMenNldF96aXBsaXN0CwsAAAAKAAAA"
        "AAD/DhxsaXN0X3F1aWNrbGlzdF9lbXB0eV96aXBsaXN0AQsLAAAACgAAAAAA///w9Qbdxm5hgw=="),
}


def rdb_values(data: bytes):
    """(key, type, value bytes) of every key of an RDB file (no expiry
    handling needed for these files)."""
    assert data[:5] == b"REDIS"
    version = int(data[5:9])
    pos = 9
    out = []

    def length(pos):
        b = data[pos]
        if b >> 6 == 0:
            return b & 0x3F, pos + 1
        if b >> 6 == 1:
            return ((b & 0x3F) << 8) | data[pos + 1], pos + 2
        if b == 0x80:
            return int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
        raise AssertionError("unexpected length")

    def string_end(pos):
        b = data[pos]
        if b >> 6 == 3:
            enc = b & 0x3F
            if enc == 3:
                clen, p = length(pos + 1)
                _, p = length(p)
                return p + clen
            return pos + 1 + (1, 2, 4)[enc]
        n, p = length(pos)
        return p + n

    while True:
        op = data[pos]
        if op == 0xFF:
            break
        if op == 0xFE:
            _, pos = length(pos + 1)
        elif op == 0xFB:
            _, pos = length(pos + 1)
            _, pos = length(pos)
        elif op == 0xFA:
            pos = string_end(string_end(pos + 1))
        else:
            kstart = pos + 1
            kend = string_end(kstart)
            key = bytes(data[kstart + 1:kend])
            try:
                _, vend = rdb.load_value(op, data, kend)
            except rdb.RDBError:
                vend = None
            out.append((key, op, data[kend:vend] if vend else None, version))
            if vend is None:
                break
            pos = vend
    return out


@pytest.mark.parametrize("name", [n for n in ASSETS if n != "corrupt_empty_keys"])
def test_legacy_encodings(pair, name):
    ours, theirs = pair
    values = rdb_values(base64.b64decode(ASSETS[name]))
    assert values
    for key, rdb_type, body, version in values:
        assert body is not None, key
        p = payload(bytes([rdb_type]) + body, version)
        assert theirs.restore(key, 0, p)
        assert ours.restore(key, 0, p)
        assert snapshot(ours, key) == snapshot(theirs, key), (name, key)
        assert snapshot(ours, key)[0] != b"none"
        # and what we write back restores there the same
        theirs.restore(key + b"{h}", 0, ours.dump(key))
        assert snapshot(theirs, key + b"{h}") == snapshot(theirs, key)


def test_legacy_contents(pair):
    ours, _ = pair
    for key, rdb_type, body, version in rdb_values(base64.b64decode(ASSETS["encodings"])):
        ours.restore(key, 0, payload(bytes([rdb_type]) + body, version))
    assert ours.lrange("list_zipped", 0, -1) == [b"1", b"2", b"3", b"a", b"b", b"c",
                                                   b"100000", b"6000000000"]
    assert sorted(ours.smembers("set_zipped_3"), key=int) == [
        b"%d" % (i * 1000000000) for i in range(1, 7)]
    assert ours.zrange("zset", 0, -1, withscores=True)[-1] == (b"bbbb", 5000000000.0)
    assert ours.hgetall("hash_zipped") == {b"a": b"1", b"b": b"2", b"c": b"3"}
    value = ours.get("compressible")
    assert value == b"a" * len(value) and len(value) > 100


def test_empty_legacy_keys_refused(diff):
    data = base64.b64decode(ASSETS["corrupt_empty_keys"])
    # cut by hand: every value in this file is an empty container
    spans = []
    pos = data.index(b"\xfe\x00\xfb\x09\x00") + 5
    while data[pos] != 0xFF:
        rdb_type = data[pos]
        klen = data[pos + 1]
        vstart = pos + 2 + klen
        b = data[vstart]
        if rdb_type == 14 and b == 1:                 # one empty ziplist node
            vend = vstart + 2 + data[vstart + 1]
        elif rdb_type in (2, 3, 4, 5, 14):            # a length: the empty count
            vend = vstart + 1
        else:
            vend = vstart + 1 + b
        spans.append(bytes([rdb_type]) + data[vstart:vend])
        pos = vend
    assert len(spans) == 9
    for body in spans:
        diff("RESTORE", "k", "0", payload(body))
    diff("EXISTS", "k")


# ----------------------------------------------------------------------
# Errors and options, byte for byte
# ----------------------------------------------------------------------

def test_restore_errors(diff):
    diff("SET", "foo", "bar")
    good = diff("DUMP", "foo").split(b"\r\n", 1)[1][:-2]
    diff("RESTORE", "foo", "0", good)
    diff("RESTORE", "foo", "0", good, "REPLACE")
    diff("RESTORE", "new", "-1", good)
    diff("RESTORE", "new", "abc", good)
    diff("RESTORE", "foo", "abc", good)
    diff("RESTORE", "new", "0", "garbage")
    diff("RESTORE", "new", "0", "")
    diff("RESTORE", "new", "0", good[:-1] + bytes([good[-1] ^ 1]))
    diff("RESTORE", "new", "0", payload(good[:-10], 12))
    diff("RESTORE", "new", "0", payload(good[:-10], 9))
    diff("RESTORE", "new2", "0", payload(b"\x00\x05abc"))
    diff("RESTORE", "new3", "0", payload(b"\x08\x00"))
    diff("RESTORE", "new3", "0", payload(b"\x06\x00"))
    diff("RESTORE", "new3", "0", payload(b"\x16\x00"))
    diff("RESTORE", "new3", "0", payload(b"\x0e\x01\x00"))
    diff("RESTORE", "new3", "0", payload(b"\x12\x01\x03\x01a"))
    diff("RESTORE", "new", "0", good, "BOGUS")
    diff("RESTORE", "new", "0", good, "IDLETIME")
    diff("RESTORE", "new", "0", good, "IDLETIME", "-1")
    diff("RESTORE", "new", "0", good, "IDLETIME", "x")
    diff("RESTORE", "new", "0", good, "FREQ", "256")
    diff("RESTORE", "new", "0", good, "FREQ", "-1")
    diff("RESTORE", "new", "0", good, "FREQ", "10", "IDLETIME", "10")
    diff("RESTORE", "new", "0", good, "IDLETIME", "10", "FREQ", "10")
    diff("RESTORE", "new", "0", good, "IDLETIME", "10", "replace", "absttl")
    diff("GET", "new")
    diff("RESTORE", "new")
    diff("DUMP")
    diff("DUMP", "missing")


def test_restore_ttl(diff, r):
    diff("SET", "foo", "bar")
    good = diff("DUMP", "foo").split(b"\r\n", 1)[1][:-2]
    diff("RESTORE", "t1", "100000", good)
    assert 99000 < r.pttl("t1") <= 100000
    future = int(time.time() * 1000) + 50000
    diff("RESTORE", "t2", str(future), good, "ABSTTL")
    assert 40000 < r.pttl("t2") <= 50000
    diff("RESTORE", "t3", "1", good, "ABSTTL")
    diff("EXISTS", "t3")
    diff("RESTORE", "foo", "1", good, "ABSTTL", "REPLACE")
    diff("EXISTS", "foo")
    diff("SET", "foo", "x", "EX", "100")
    diff("RESTORE", "foo", "0", good, "REPLACE")
    diff("TTL", "foo")
    diff("GET", "foo")


def test_restore_resp3(diff):
    diff.resp3()
    diff("DUMP", "nokey")
    diff("SET", "foo", "bar")
    good = diff("DUMP", "foo").split(b"\r\n", 1)[1][:-2]
    diff("RESTORE", "foo2", "0", good)
    diff("RESTORE", "foo2", "0", good)


# ----------------------------------------------------------------------
# Robustness: corrupted contents with valid checksums
# ----------------------------------------------------------------------

def test_corrupt_payloads_never_crash(r):
    rng = random.Random(7)
    r.rpush("l", *[str(i) for i in range(50)], "x" * 100)
    r.sadd("si", *range(20))
    r.sadd("ss", *[f"m{i}" for i in range(20)])
    r.hset("h", mapping={f"f{i}": str(i) for i in range(20)})
    r.zadd("z", {f"m{i}": i / 3 for i in range(20)})
    r.zadd("zb", {f"m{i}": i / 3 for i in range(200)})
    r.xadd("x", {"a": "1"}, id="1-1")
    r.xadd("x", {"a": "2", "b": "3"}, id="2-1")
    r.xgroup_create("x", "g", "0")
    r.xreadgroup("g", "c", {"x": ">"})
    r.set("s", "hello world")
    bodies = [r.dump(k)[:-10] for k in ("l", "si", "ss", "h", "z", "zb", "x", "s")]
    outcomes = set()
    for i in range(1500):
        body = bytearray(rng.choice(bodies))
        how = rng.randrange(3)
        if how == 0:
            body = body[:rng.randrange(1, len(body))]
        else:
            for _ in range(rng.randrange(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
        try:
            r.restore("k", 0, payload(bytes(body)), replace=True)
            outcomes.add("ok")
            r.type("k")
        except valkey.ResponseError as e:
            assert str(e) == "Bad data format", e
            outcomes.add("bad")
    assert outcomes == {"ok", "bad"}
    assert r.ping()


# ----------------------------------------------------------------------
# Side effects
# ----------------------------------------------------------------------

def test_restore_wakes_blpop_and_fails_watch(r, raw_factory):
    r.rpush("src", "a", "b")
    data = r.dump("src")
    waiter = raw_factory()
    waiter.send("BLPOP", "dst", "5")
    deadline = time.time() + 5
    while int(r.info("clients")["blocked_clients"]) != 1 and time.time() < deadline:
        time.sleep(0.01)
    assert r.restore("dst", 0, data)
    assert waiter.read_reply() == b"*2\r\n$3\r\ndst\r\n$1\r\na\r\n"
    p = r.pipeline(transaction=True)
    p.watch("dst")
    r.restore("dst", 0, data, replace=True)
    p.multi()
    p.ping()
    with pytest.raises(valkey.WatchError):
        p.execute()


def test_restore_event(r):
    r.config_set("notify-keyspace-events", "KEA")
    try:
        sub = r.pubsub()
        sub.psubscribe("__keyevent@0__:*")
        assert sub.get_message(timeout=1)["type"] == "psubscribe"
        r.set("a", "1")
        data = r.dump("a")
        r.restore("b", 0, data)
        events = []
        for _ in range(2):
            events.append(sub.get_message(timeout=1)["channel"])
        assert events == [b"__keyevent@0__:set", b"__keyevent@0__:restore"]
        sub.close()
    finally:
        r.config_set("notify-keyspace-events", "")


def test_restore_logged_with_absolute_ttl(hotkv_server_factory, tmp_path):
    server = hotkv_server_factory(appendonly=True, dir=str(tmp_path), appendfsync="always")
    c = valkey.Valkey(host=server.host, port=server.port)
    c.set("a", "v")
    data = c.dump("a")
    before = int(time.time() * 1000)
    c.restore("b", 60000, data)
    c.restore("c", 0, data)
    c.rpush("l", "z", "y")
    c.sort("l", alpha=True, store="sorted")
    c.close()
    text = b""
    for root, _, files in os.walk(tmp_path):
        for f in files:
            if ".aof" in f:
                with open(os.path.join(root, f), "rb") as fh:
                    text += fh.read()
    assert b"ABSTTL" in text
    i = text.index(b"$1\r\nb\r\n")
    ttl = int(text[i:].split(b"\r\n")[3])
    assert before + 59000 < ttl < before + 61000
    assert b"$4\r\nSORT\r\n" in text.upper() or b"$4\r\nsort\r\n" in text


def test_payload_helpers():
    assert rdb.crc64(b"123456789") == 0xE9C6D914C4B8D9CA
    p = rdb.dump_payload(b"hello")
    assert rdb.verify(p) and not rdb.verify(p[:-1] + b"\x00")
    assert rdb.load_payload(p) == b"hello"


def test_command_info(diff):
    diff("COMMAND", "INFO", "dump", "restore")
    diff("COMMAND", "GETKEYSANDFLAGS", "RESTORE", "k", "0", "x", "REPLACE")
    diff("COMMAND", "GETKEYSANDFLAGS", "DUMP", "k")


def test_random_values_round_trip(pair):
    """Random members of every kind (integers of every width, long strings)
    in containers on both sides of every encoding threshold."""
    ours, theirs = pair
    rng = random.Random(11)

    def member():
        k = rng.random()
        if k < 0.3:
            return str(rng.randrange(-10 ** rng.randrange(1, 19), 10 ** rng.randrange(1, 19)))
        if k < 0.4:
            return str(rng.randrange(-20, 20))
        if k < 0.9:
            return "m%d" % rng.randrange(10 ** 6)
        return "x" * rng.choice([63, 64, 65, 4096, 5000])

    for i in range(60):
        n = rng.choice([1, 2, 5, 127, 128, 129, 513])
        kind = rng.choice(["list", "set", "zset", "hash", "string"])
        members = list(dict.fromkeys(member() for _ in range(n)))
        key = f"k{i}"
        if kind == "list":
            both(pair, "RPUSH", key, *members)
        elif kind == "set":
            both(pair, "SADD", key, *members)
        elif kind == "zset":
            both(pair, "ZADD", key, *[x for m in members for x in (
                repr(rng.choice([rng.random() * 100, rng.randrange(-5, 5), 1e300])), m)])
        elif kind == "hash":
            both(pair, "HSET", key, *[x for m in members for x in (m, member())])
        else:
            both(pair, "SET", key, members[0])
        round_trip(pair, key, check_encoding=False)
