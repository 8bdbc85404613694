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
* ``stream_persist._plain_node_from_listpack`` (a node read straight from
  its bytes) vs ``node_from_listpack``'s element list, on valid listpacks
  (ID deltas across 7/13/64 bits, values across 63/64 and 125/126 bytes,
  live counts over 127) and on corrupted ones (it may only give up);
* ``stream_persist``'s group and consumer PELs read in one step
  (``PEL.extend_above``) vs entry by entry, on PELs in and out of order;
* ``rdbfile._plain_string`` (inline lengths, inline LZF) vs ``Reader.string``.

``HOTKV_FASTPATH_SCALE`` multiplies the sizes (as tests/test_fastpaths.py).
"""

from __future__ import annotations

import os
import random

import pytest

from hotkv.persistence import rdbfile
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


M64 = (1 << 64) - 1


def _node_state(n):
    return (n.master, n.fields, list(n.ids.ms), list(n.ids.seq), n.items, n.live, n.deleted,
            n.nbytes)


def _delta_stream(rng, max_entries: int) -> Stream:
    """IDs whose deltas from their node's master cross the 7-bit, 13-bit and
    int64 encodings (seq deltas negative too); one field, 1..100 bytes."""
    s = Stream()
    ms = rng.randrange(0, 2 ** 40)
    field = b"f" * rng.choice([1, 2, 63, 64, 100])
    for _ in range(rng.randrange(1, 700)):
        ms += rng.choice([0, 0, 1, 2, 63, 64, 126, 127, 128, 4094, 4095, 4096, 5000, 2 ** 33])
        seq = rng.choice([0, 1, 5, 127, 128, 4095, 4096, 5000, rng.randrange(0, 2 ** 64)])
        eid = (ms << 64) | seq
        if eid <= s.last_id:
            eid = s.last_id + 1
        s.append(eid, [field, _string(rng)], 0, rng.choice([0, 4096]), max_entries)
        s.last_id = eid
    return s


def _corrupt(rng, lp: bytes) -> bytes:
    b = bytearray(lp)
    k = rng.random()
    if k < 0.5:
        for _ in range(rng.randrange(1, 3)):
            b[rng.randrange(len(b))] = rng.choice([0, 1, 2, 4, 0x7F, 0x80, 0xBF, 0xC0, 0xDF,
                                                   0xE0, 0xEF, 0xF0, 0xFF, rng.randrange(256)])
    elif k < 0.75:
        del b[rng.randrange(6, len(b)):]
        b[:4] = len(b).to_bytes(4, "little")       # a consistent header, a cut body
    else:
        at = rng.randrange(6, len(b))
        b[at:at] = bytes([rng.randrange(256)])
        b[:4] = len(b).to_bytes(4, "little")
    return bytes(b)


def _is_string_element(e: bytes, limit: int) -> bool:
    """e is a listpack string element (not an integer) under limit bytes."""
    head = lp_entry(e)[0]        # 6-bit and 12-bit strings; 0xC0-0xDF is a 13-bit int
    return len(e) < limit and (0x80 <= head < 0xC0 or 0xE0 <= head < 0xF0)


def _fast_readable(node) -> bool:
    """What _plain_node_from_listpack promises to read (the test's own
    statement of it): no tombstone, one field (a string under 64 bytes),
    every entry its bare value (a string under 4 kB), ID deltas and the
    live count within 13 bits."""
    if node.deleted or len(node.fields) != 1 or node.live > 4095 \
            or not _is_string_element(node.fields[0], 64):
        return False
    ms, seq = node.master >> 64, node.master & M64
    for eid, it in zip(node.ids, node.items):
        if type(it) is not bytes or not _is_string_element(it, 4096):
            return False
        for d in ((eid >> 64) - ms, (eid & M64) - seq):
            if not -4096 <= d <= 4095:
                return False
    return True


@pytest.mark.parametrize("shape", ["plain", "bigdelta", "fields", "tombstones", "deltas"])
def test_stream_node_reader_equals_the_general_path(shape, monkeypatch):
    rng = random.Random(1000 + len(shape))
    fast_used = 0
    for _ in range(10 * SCALE):
        if shape == "deltas":
            s = _delta_stream(rng, rng.choice([1, 7, 100, 300, 0]))
        else:
            s = _stream(rng, shape)
        if shape == "tombstones":
            for eid in [eid for node in s.nodes for eid in node.ids][::3]:
                s.delete(eid)
        cases = []
        for node in s.nodes:
            lp = stream_persist.node_listpack(node)
            if _fast_readable(node):
                assert stream_persist._plain_node_from_listpack(node.master, lp) is not None
            cases.append((node.master, lp))
            cases.extend((node.master, _corrupt(rng, lp)) for _ in range(3))
        for master, lp in cases:
            fast = stream_persist._plain_node_from_listpack(master, lp)
            with monkeypatch.context() as m:
                m.setattr(stream_persist, "_plain_node_from_listpack", lambda *a: None)
                try:
                    slow = _node_state(stream_persist.node_from_listpack(master, lp))
                except codec.RDBError:
                    slow = None
            if fast is not None:
                assert _node_state(fast) == slow        # never accepts what is refused
                fast_used += 1
            # The reader with its fast path: the general path's verdict.
            try:
                both = _node_state(stream_persist.node_from_listpack(master, lp))
            except codec.RDBError:
                both = None
            assert both == slow
    if shape != "fields":
        assert fast_used, "the fast path never ran"


def _groups_payload(stream: Stream, rng, order: str) -> bytes:
    """rdb_save's payload with every PEL written in ``order`` (sorted,
    shuffled, or with one ID written twice)."""
    _, body = stream_persist.rdb_save(stream)
    # The stream part is rdb_save's own; the groups are rewritten here.
    out = bytearray(body[:body.index(_groups_marker(stream))])
    groups = stream.sorted_groups()
    codec.put_len(len(groups), out)
    for g in groups:
        codec.put_string(g.name, out)
        codec.put_len(g.last_id >> 64, out)
        codec.put_len(g.last_id & M64, out)
        codec.put_len(g.entries_read, out)
        ids = list(g.pel)
        if order == "shuffled":
            rng.shuffle(ids)
        elif order == "duplicate" and ids:
            ids.insert(rng.randrange(len(ids)), rng.choice(ids))
        codec.put_len(len(ids), out)
        for i in ids:
            out += i.to_bytes(16, "big") + g.pel[i].delivery_time.to_bytes(8, "little")
            codec.put_len(g.pel[i].delivery_count, out)
        consumers = g.sorted_consumers()
        codec.put_len(len(consumers), out)
        for c in consumers:
            codec.put_string(c.name, out)
            out += (c.seen_time & M64).to_bytes(8, "little")
            out += (c.active_time & M64).to_bytes(8, "little")
            cids = list(c.pel)
            if order == "shuffled":
                rng.shuffle(cids)
            codec.put_len(len(cids), out)
            for i in cids:
                out += i.to_bytes(16, "big")
    return bytes(out)


def _groups_marker(stream: Stream) -> bytes:
    out = bytearray()
    codec.put_len(len(stream.sorted_groups()), out)
    g = stream.sorted_groups()[0]
    codec.put_string(g.name, out)
    return bytes(out)


@pytest.mark.parametrize("order", ["sorted", "shuffled", "duplicate"])
def test_stream_pels_read_in_one_step_equal_entry_by_entry(order):
    rng = random.Random(len(order))
    for _ in range(20 * SCALE):
        s = Stream()
        n = rng.choice([1, 2, 63, 64, 65, 300, 1200])
        for i in range(n):
            s.append((i + 1) << 64, [b"f", b"v"], 0, 4096, 100)
        s.last_id = n << 64
        for gname in (b"g1", b"g2"):
            g = s.create_group(gname, s.last_id, n)
            consumers = [g.create_consumer(b"c%d" % k, 5) for k in range(rng.choice([1, 3]))]
            for i in rng.sample(range(1, n + 1), rng.randrange(1, n + 1)):
                c = rng.choice(consumers)
                nack = stream_persist.NACK(rng.randrange(2 ** 40), c, rng.choice([1, 63, 64, 9000]))
                g.pel[i << 64] = nack
                c.pel[i << 64] = nack
        payload = _groups_payload(s, rng, order)
        if order == "duplicate":
            with pytest.raises(codec.RDBError, match="duplicated PEL entry"):
                stream_persist.rdb_load(21, payload)
            continue
        loaded, end = stream_persist.rdb_load(21, payload)
        assert end == len(payload)
        assert stream_persist.rdb_save(loaded) == stream_persist.rdb_save(s)
        for g in loaded.groups.values():
            assert list(g.pel) == sorted(g.pel.d)
            for c in g.consumers.values():
                assert list(c.pel) == sorted(c.pel.d)
                assert all(g.pel[i] is c.pel[i] and c.pel[i].consumer is c for i in c.pel)


def test_a_corrupt_field_count_is_refused_before_it_drives_a_loop():
    """An entry claiming 10**6 fields (or a negative count) in a 12-element
    listpack: refused at once for the count, not after a loop over it (a
    RESTORE payload or a file with 2**62 there would hang the server)."""
    for nf in (10 ** 6, -3, 2 ** 62):
        els = [1, 0, 1, b"f", 0, 0, 0, 0, nf, b"a", b"b", 6]
        with pytest.raises(codec.RDBError, match="field count out of range"):
            stream_persist.node_from_listpack(1 << 64, codec.lp_build(els))
    with pytest.raises(codec.RDBError, match="negative count"):
        stream_persist.node_from_listpack(1 << 64, codec.lp_build([1, 0, -1, 0, 2, 0, 0, b"v", 4]))
