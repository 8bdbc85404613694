"""The RDB writer's and reader's fast paths against their general twins, on
seeded data that crosses every boundary the fast paths test (element sizes
63/64, 125/126, 4095/4096, integer-looking strings, 13-bit ints, int64 ID
deltas, tombstones, several fields, node byte and count limits):

* ``codec.lp_entry`` (short-cut encodings) vs ``lp_encode_str``;
* ``codec.lp_build`` (13-bit int table, lp_entry) vs element by element;
* ``lists.quicklist_nodes`` (inlined payload encoding) vs an element-by-
  element split;
* ``stream_persist._plain_node_listpack`` vs ``node_listpack``'s general
  path, and the reader's one-field entry vs a full decode (the round trip);
* ``rdbfile._plain_string`` (inline lengths, inline LZF) vs ``Reader.string``.

``HOTKV_FASTPATH_SCALE`` multiplies the sizes (as tests/test_fastpaths.py).
"""

from __future__ import annotations

import os
import random

import pytest

from hotkv import rdbfile
from hotkv.types import codec, stream_persist
from hotkv.types.codec import Reader, lp_encode_int, lp_encode_str, lp_entry, lp_from_entries
from hotkv.types.lists import quicklist_nodes
from hotkv.types.stream import Stream

SCALE = int(os.environ.get("HOTKV_FASTPATH_SCALE", "1"))
SIZES = [0, 1, 2, 5, 19, 20, 21, 62, 63, 64, 65, 100, 124, 125, 126, 127, 128, 4093, 4094,
         4095, 4096, 5000, 9000, 20000]


_PATTERN = bytes(random.Random(0).choice(b"0123456789ax") for _ in range(30000))


def _string(rng) -> bytes:
    """A string of one of SIZES bytes: its first byte drawn (digits, signs,
    letters: integer-looking or not), the rest a slice of a fixed pattern."""
    n = rng.choice(SIZES)
    if n == 0:
        return b""
    if n <= 20 and rng.random() < 0.3:
        return b"%d" % rng.randrange(-10 ** (n - 1), 10 ** n)
    off = rng.randrange(0, 5000)
    return bytes((rng.choice(b"0123456789-+ax"),)) + _PATTERN[off:off + n - 1]


def _general_entry(e: bytes) -> bytes:
    out = bytearray()
    lp_encode_str(e, out)
    return bytes(out)


def test_lp_entry_and_lp_build_equal_their_general_twins():
    rng = random.Random(11)
    for _ in range(3000 * SCALE):
        e = _string(rng)
        assert lp_entry(e) == _general_entry(e), e[:30]
    for _ in range(500 * SCALE):
        els = []
        for _ in range(rng.randrange(0, 60)):
            k = rng.random()
            els.append(rng.randrange(-5000, 5000) if k < 0.4 else
                       rng.randrange(-2 ** 63, 2 ** 63) if k < 0.5 else _string(rng))
        body = bytearray()
        for e in els:
            (lp_encode_int if type(e) is int else lp_encode_str)(e, body)
        want = ((7 + len(body)).to_bytes(4, "little") + min(len(els), 65535).to_bytes(2, "little")
                + bytes(body) + b"\xff")
        assert codec.lp_build(els) == want


def _general_nodes(lst, fill):
    if fill < 0:
        max_bytes = 4096 << min(-fill - 1, 4)
        max_count = 1 << 62
        large = max_bytes
    else:
        max_bytes = large = 8192
        max_count = max(fill, 1)
    nodes, cur, size = [], [], 7
    for e in lst:
        n = len(e)
        if n > large:
            if cur:
                nodes.append((2, lp_from_entries(cur, len(cur))))
                cur, size = [], 7
            nodes.append((1, e))
            continue
        if cur and (len(cur) + 1 > max_count or size + n + 8 > max_bytes):
            nodes.append((2, lp_from_entries(cur, len(cur))))
            cur, size = [], 7
        ent = _general_entry(e)
        cur.append(ent)
        size += len(ent)
    if cur:
        nodes.append((2, lp_from_entries(cur, len(cur))))
    return nodes


@pytest.mark.parametrize("fill", [-1, -2, -3, -5, 1, 5, 128])
def test_quicklist_nodes_equal_the_element_by_element_split(fill):
    rng = random.Random(fill)
    for _ in range(60 * SCALE):
        lst = [_string(rng) for _ in range(rng.randrange(0, 600))]
        assert quicklist_nodes(lst, fill) == _general_nodes(lst, fill)


def _stream(rng, shape: str) -> Stream:
    s = Stream()
    max_entries = rng.choice([1, 7, 100])
    ms = rng.randrange(0, 2 ** 40)
    for i in range(rng.randrange(1, 700)):
        if shape == "bigdelta" and i % 5 == 0:
            ms += rng.randrange(4096, 2 ** 50)
        else:
            ms += rng.randrange(0, 3)
        seq = rng.randrange(0, 2 ** 63) if shape == "bigdelta" else i
        eid = (ms << 64) | seq
        if eid <= s.last_id:
            continue
        if shape == "fields" and i % 4 == 0:
            args = [b"f", _string(rng), b"g", b"v"]
        else:
            args = [b"f", _string(rng)]
        s.append(eid, args, 0, 4096, max_entries)
        s.last_id = eid
    return s


@pytest.mark.parametrize("shape", ["plain", "bigdelta", "fields", "tombstones"])
def test_stream_node_listpacks_equal_the_general_path(shape, monkeypatch):
    rng = random.Random(hash(shape) & 0xFFFF)
    plain_used = 0
    for _ in range(12 * SCALE):
        s = _stream(rng, shape)
        if shape == "tombstones":
            ids = [eid for node in s.nodes for eid in node.ids]
            for eid in ids[::3]:
                s.delete(eid)
        nodes = list(s.nodes)
        fast = [stream_persist.node_listpack(n) for n in nodes]
        plain_used += sum(stream_persist._plain_node_listpack(
            n, n.master >> 64, n.master & ((1 << 64) - 1)) is not None for n in nodes)
        with monkeypatch.context() as m:
            m.setattr(stream_persist, "_plain_node_listpack", lambda *a: None)
            slow = [stream_persist.node_listpack(n) for n in nodes]
        assert fast == slow
        # The reader's one-field shortcut: what it reads back writes the same.
        for n, lp in zip(nodes, fast):
            again = stream_persist.node_from_listpack(n.master, lp)
            assert stream_persist.node_listpack(again) == lp
    if shape in ("plain", "bigdelta"):
        assert plain_used, "the fast path never ran"


def test_plain_string_equals_reader_string():
    rng = random.Random(5)
    for compress in (True, False):
        with codec.lzf_compression(compress):
            out = bytearray()
            values = []
            for _ in range(2000 * SCALE):
                v = _string(rng) if rng.random() < 0.8 else b"%d" % rng.randrange(-2 ** 40, 2 ** 40)
                values.append(v)
                codec.put_string(v, out)
            buf = bytes(out)
            a, b = Reader(buf), Reader(buf)
            for v in values:
                assert rdbfile._plain_string(a) == b.string() == v
                assert a.pos == b.pos
