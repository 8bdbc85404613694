"""DEBUG DIGEST / DEBUG DIGEST-VALUE: hotkv's values against valkey-server 8.1.8's.

Each test writes the same data to a hotkv started with enable-debug-command
yes and to the reference Valkey, then asks both for the digests: per key
(DIGEST-VALUE, so a mismatch names the key) and for the whole dataset
(DIGEST).  Covered: every type and encoding (integer-encoded strings,
intset/listpack/hashtable sets, listpack/hashtable hashes, listpack/skiplist
zsets, lists over many quicklist nodes, streams over many nodes with
deleted entries and consumer groups with PELs), zset scores in every
format fpconv_dtoa writes, expiry, several databases; and seeded queue
workloads from compat/volume.py compared in one DIGEST call each.

The volume part runs HOTKV_DIGEST_SEEDS=3 seeds of HOTKV_DIGEST_COMMANDS=1500
commands in CI; run it long with e.g.
    HOTKV_DIGEST_SEEDS=40 HOTKV_DIGEST_COMMANDS=6000 \\
        python -m pytest -q tests/test_debug_digest.py -k volume
"""

from __future__ import annotations

import importlib.util
import math
import os
import random
import struct

import pytest

from hotkv import EmbeddedServer
from support import RawClient, encode_command

ZEROS = b"+" + b"0" * 40 + b"\r\n"
SEEDS = int(os.environ.get("HOTKV_DIGEST_SEEDS", "3"))
COMMANDS = int(os.environ.get("HOTKV_DIGEST_COMMANDS", "1500"))
# Settings the tests change, put back after each test (on both servers).
_SETTINGS = ("list-max-listpack-size", "hash-max-listpack-entries",
             "set-max-intset-entries", "set-max-listpack-entries",
             "zset-max-listpack-entries", "stream-node-max-entries",
             "stream-node-max-bytes")


@pytest.fixture(scope="module")
def debug_server():
    srv = EmbeddedServer(port=0, enable_debug_command="yes").start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def pair(debug_server, ref_server):
    """(hotkv client, valkey client), both flushed; settings restored after."""
    ours = RawClient(debug_server.host, debug_server.port, timeout=60)
    theirs = RawClient(ref_server.host, ref_server.port, timeout=60)
    saved = []
    for c in (ours, theirs):
        assert c.call("FLUSHALL") == b"+OK\r\n"
        saved.append({name: _config_get(c, name) for name in _SETTINGS})
    yield ours, theirs
    for c, settings in zip((ours, theirs), saved):
        c.call("SELECT", "0")
        c.call("FLUSHALL")
        for name, value in settings.items():
            assert c.call("CONFIG", "SET", name, value) == b"+OK\r\n"
        c.close()


def _config_get(c, name: str) -> bytes:
    reply = c.call("CONFIG", "GET", name)
    # *2\r\n$n\r\nname\r\n$m\r\nvalue\r\n
    return reply.split(b"\r\n")[4]


def both(pair, *cmd) -> bytes:
    """Send cmd to both servers; the replies must be equal; returns it."""
    a, b = (c.call(*cmd) for c in pair)
    assert a == b, (cmd, a, b)
    return a


def pipeline(pair, commands) -> None:
    """Send many commands to both in one write each; replies must be equal."""
    data = b"".join(encode_command(*cmd) for cmd in commands)
    replies = []
    for c in pair:
        c.send_raw(data)
        replies.append([c.read_reply() for _ in commands])
    for cmd, a, b in zip(commands, *replies):
        assert a == b, (cmd, a, b)


def digest_values(pair, keys) -> None:
    """DIGEST-VALUE of every key equal on both, and each one not all zeros
    (the key exists); a mismatch names the first differing key."""
    a, b = (c.call("DEBUG", "DIGEST-VALUE", *keys) for c in pair)
    lines_a, lines_b = a.split(b"\r\n")[1:-1], b.split(b"\r\n")[1:-1]
    assert len(lines_a) == len(keys) == len(lines_b), (a[:200], b[:200])
    for key, x, y in zip(keys, lines_a, lines_b):
        assert x == y, (key, x, y)
        assert x != ZEROS[:-2], key


def dataset_digest(pair) -> bytes:
    """DEBUG DIGEST on both: equal and not the empty dataset's; returned."""
    a = both(pair, "DEBUG", "DIGEST")
    assert a.startswith(b"+") and len(a) == 43 and a != ZEROS, a
    return a


# ---------------------------------------------------------------------------
# Small values, every type
# ---------------------------------------------------------------------------

def test_empty_dataset_is_forty_zeros(pair):
    assert both(pair, "DEBUG", "DIGEST") == ZEROS
    assert both(pair, "DEBUG", "DIGEST-VALUE", "missing", "other") == b"*2\r\n" + ZEROS * 2
    assert both(pair, "DEBUG", "DIGEST-VALUE") == b"*0\r\n"
    assert both(pair, "DEBUG", "DIGEST", "x").startswith(b"-ERR unknown subcommand")


def test_every_type_small(pair):
    pipeline(pair, [
        ("SET", "str", "hello"), ("SET", "int", "12345"), ("SET", "neg", "-7"),
        ("SET", "big", "123456789012345678901234567890"), ("SET", "empty", ""),
        ("SET", "zeroes", "007"), ("SET", "bin", b"\x00\xff\r\n"),
        ("RPUSH", "list", "a", "1", "-2", "bb", ""),
        ("SADD", "intset", "1", "2", "-3", "100000000000"),
        ("SADD", "lpset", "a", "1", "b"),
        ("HSET", "hash", "f", "v", "n", "1", "", "empty"),
        ("ZADD", "zset", "1.5", "a", "-0", "b", "1e30", "c", "0.1", "d", "inf", "e",
         "-inf", "f", "3", "g", "1e-7", "h", "123456789", "i"),
        ("XADD", "stream", "1-1", "f", "v", "g", "w"),
        ("XADD", "stream", "2-0", "f", "v2"),
        ("XADD", "stream", "18446744073709551615-5", "x", "y"),
    ])
    keys = ["str", "int", "neg", "big", "empty", "zeroes", "bin", "list", "intset",
            "lpset", "hash", "zset", "stream"]
    digest_values(pair, keys)
    before = dataset_digest(pair)
    # Expiry is part of the digest (a key's own and the dataset's).
    both(pair, "EXPIRE", "str", "100000")
    both(pair, "PEXPIREAT", "list", "4102444800000")
    digest_values(pair, keys)
    assert dataset_digest(pair) != before


def test_skiplist_zset_and_hashtable_encodings(pair):
    for name, value in (("zset-max-listpack-entries", "0"), ("hash-max-listpack-entries", "0"),
                        ("set-max-intset-entries", "0"), ("set-max-listpack-entries", "0")):
        both(pair, "CONFIG", "SET", name, value)
    pipeline(pair, [
        ("ZADD", "z", "-0", "a", "0", "b", "1e17", "c", "2.5", "d", "-1e-300", "e"),
        ("HSET", "h", "f", "v", "n", "1"),
        ("SADD", "s", "1", "2", "x"),
    ])
    assert both(pair, "OBJECT", "ENCODING", "z") == b"$8\r\nskiplist\r\n"
    assert both(pair, "OBJECT", "ENCODING", "h") == b"$9\r\nhashtable\r\n"
    assert both(pair, "OBJECT", "ENCODING", "s") == b"$9\r\nhashtable\r\n"
    digest_values(pair, ["z", "h", "s"])
    dataset_digest(pair)


def _random_doubles(rng: random.Random, n: int) -> list:
    """Finite doubles of every shape: random bit patterns, decimal-looking
    values over a wide exponent range, integers near the plain/scientific
    switch, tiny and subnormal values."""
    out = []
    while len(out) < n:
        kind = rng.randrange(5)
        if kind == 0:
            x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        elif kind == 1:
            x = round(rng.uniform(-1000, 1000), rng.randrange(0, 8))
            x *= 10.0 ** rng.randrange(-25, 25)
        elif kind == 2:
            x = float(rng.randrange(1, 10)) * 10.0 ** rng.randrange(0, 30)
        elif kind == 3:
            x = rng.random() * 10.0 ** rng.randrange(-320, -290)
        else:
            x = float(rng.getrandbits(rng.randrange(1, 64)))
        if math.isfinite(x) and x != 0:
            out.append(x)
    return out


@pytest.mark.parametrize("encoding", ["listpack", "skiplist"])
def test_zset_scores_formatted_as_valkey(pair, encoding):
    """One single-member zset per score, so a mismatch names the score."""
    if encoding == "skiplist":
        both(pair, "CONFIG", "SET", "zset-max-listpack-entries", "0")
    scores = _random_doubles(random.Random(1234), 1500)
    pipeline(pair, [("ZADD", "z%d" % i, repr(x), "m") for i, x in enumerate(scores)])
    keys = ["z%d" % i for i in range(len(scores))]
    for start in range(0, len(keys), 300):
        digest_values(pair, keys[start:start + 300])
    dataset_digest(pair)


# ---------------------------------------------------------------------------
# Big structures
# ---------------------------------------------------------------------------

def test_big_structures(pair):
    both(pair, "CONFIG", "SET", "list-max-listpack-size", "5")
    both(pair, "CONFIG", "SET", "stream-node-max-entries", "7")
    rng = random.Random(99)
    cmds = []
    for i in range(0, 2000, 100):
        cmds.append(("RPUSH", "list", *[b"e%d" % rng.randrange(10 ** rng.randrange(1, 12))
                                       for _ in range(100)]))
        cmds.append(("LPUSH", "list", *[str(rng.randrange(-10 ** 6, 10 ** 6))
                                       for _ in range(100)]))
    cmds.append(("RPUSH", "list", "x" * 20000))          # a plain (big) node
    cmds.append(("HSET", "hash", *[b"f%d" % i if j == 0 else b"v%d" % (i * 7)
                                   for i in range(600) for j in (0, 1)]))
    cmds.append(("HSET", "hash", "long", "y" * 100))
    cmds.append(("SADD", "intset", *range(0, 1000, 3)))
    cmds.append(("SADD", "set", *[b"m%d" % i for i in range(700)]))
    cmds.append(("SADD", "lpset", *[b"m%d" % i for i in range(100)]))
    cmds.append(("ZADD", "zset", *[x for i in range(400)
                                   for x in (repr(rng.uniform(-1e6, 1e6)), b"m%d" % i)]))
    for i in range(1, 600):
        if i % 3:
            cmds.append(("XADD", "stream", "%d-%d" % (i // 5, i), "job", "j%d" % i))
        else:
            cmds.append(("XADD", "stream", "%d-%d" % (i // 5, i), "job", "j%d" % i,
                         "try", str(i % 4)))
    cmds += [("XDEL", "stream", "%d-%d" % (i // 5, i)) for i in range(1, 600, 11)]
    cmds += [("XGROUP", "CREATE", "stream", "g1", "0"), ("XGROUP", "CREATE", "stream", "g2", "$"),
             ("XREADGROUP", "GROUP", "g1", "c1", "COUNT", "50", "STREAMS", "stream", ">"),
             ("XREADGROUP", "GROUP", "g1", "c2", "COUNT", "50", "STREAMS", "stream", ">"),
             ("XACK", "stream", "g1", "1-1", "1-2", "1-7"),
             ("XTRIM", "stream", "MINID", "10-0")]
    pipeline(pair, cmds)
    assert both(pair, "OBJECT", "ENCODING", "list") == b"$9\r\nquicklist\r\n"
    assert both(pair, "OBJECT", "ENCODING", "hash") == b"$9\r\nhashtable\r\n"
    assert both(pair, "OBJECT", "ENCODING", "intset") == b"$6\r\nintset\r\n"
    assert both(pair, "OBJECT", "ENCODING", "lpset") == b"$8\r\nlistpack\r\n"
    assert both(pair, "OBJECT", "ENCODING", "zset") == b"$8\r\nskiplist\r\n"
    digest_values(pair, ["list", "hash", "intset", "set", "lpset", "zset", "stream"])
    before = dataset_digest(pair)
    # Order inside a list matters; a stream's groups do not (as Valkey).
    both(pair, "LSET", "list", "0", "changed")
    both(pair, "XGROUP", "DESTROY", "stream", "g2")
    digest_values(pair, ["list", "stream"])
    assert dataset_digest(pair) != before


def test_several_databases(pair):
    for db in (0, 3, 15):
        both(pair, "SELECT", str(db))
        pipeline(pair, [("SET", "k", "v%d" % db), ("RPUSH", "l", "a", "b"),
                        ("SETEX", "t", "1000", "x")])
        digest_values(pair, ["k", "l", "t"])
    whole = dataset_digest(pair)
    # The same keys moved to another database give another digest.
    both(pair, "SELECT", "3")
    both(pair, "MOVE", "k", "4")
    assert dataset_digest(pair) != whole
    both(pair, "SELECT", "0")


def test_digest_sees_one_byte(pair):
    """The digest is a real comparison: one differing byte on one side."""
    ours, theirs = pair
    for c in pair:
        c.call("HSET", "h", "f", "value")
    assert ours.call("DEBUG", "DIGEST") == theirs.call("DEBUG", "DIGEST")
    ours.call("HSET", "h", "f", "valuf")
    assert ours.call("DEBUG", "DIGEST") != theirs.call("DEBUG", "DIGEST")
    assert ours.call("DEBUG", "DIGEST-VALUE", "h") != theirs.call("DEBUG", "DIGEST-VALUE", "h")


def test_digest_gated(raw):
    """The session server keeps DEBUG off; DIGEST is refused like the rest."""
    assert raw.call("DEBUG", "DIGEST").startswith(b"-ERR DEBUG command not allowed.")
    assert raw.call("DEBUG", "DIGEST-VALUE", "k").startswith(b"-ERR DEBUG command not allowed.")


# ---------------------------------------------------------------------------
# Whole-dataset differential: compat/volume.py's queue workloads
# ---------------------------------------------------------------------------

def _volume():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat", "volume.py")
    spec = importlib.util.spec_from_file_location("hotkv_compat_volume", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", range(SEEDS))
def test_volume_workload_digest(pair, seed):
    volume = _volume()
    config, script = volume.workload(seed, COMMANDS)
    for name, value in config.items():
        both(pair, "CONFIG", "SET", name, value)
    for start in range(0, len(script), 200):
        batch = script[start:start + 200]
        data = b"".join(encode_command(*argv) for argv in batch)
        for c in pair:
            c.send_raw(data)
            for _ in batch:
                c.read_reply()
    dataset_digest(pair)
