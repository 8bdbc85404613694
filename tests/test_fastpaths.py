"""Fast paths proven equal to their general twins, in-process, on large
generated inputs (the socket-level twins are in test_fastpaths_server.py,
the "0 means no limit" audit against Valkey in test_fastpaths_nolimit.py).

A fast path is a second implementation of behaviour a general path already
has.  Each test here drives both over the same inputs -- empty, one, many;
node boundaries; tombstones and empty nodes; count 0 (no limit), 1, exactly
what remains, more; IDs at the 64-bit edges -- and asserts the same result.
Where the general path could itself be wrong, a brute-force model (a sorted
list, a SortedDict, the listpack encoder) is the third witness.

Pairs covered here:
* ``Stream.range_entries`` / ``revrange_entries`` vs ``range`` / ``revrange``
  vs a sorted model (``test_range_entries_equal_range_and_model``);
* ``Stream.append_one`` vs append()'s general sizing written out for one
  field (``test_append_one_equals_general_sizing``);
* ``PEL``'s ends (append above, pop oldest, ``extend_above``) at chunk
  boundaries vs a SortedDict (``test_pel_chunk_boundaries``);
* ``RequestParser``'s hiredis path and its screen (joined check under 16 KB,
  per-argument over) vs its own Redis-rule parser ``_slow`` alone, whole
  and split (``test_parser_fast_equals_slow``);
* ``resp.encode``'s header caches and Entries' one-field shortcut vs plain
  formatting (``test_encode_caches_equal_plain_formatting``);
* ``commands.streams.args.parse_ll`` vs ``string2ll``, ``parse_id``'s digit-only form
  vs its C-string form (``test_ll_and_parse_id_fast_forms``);
* ``acl_rules.glob_matcher``'s shortcuts vs ``util.stringmatch``
  (``test_glob_matcher_shortcuts_equal_stringmatch``).

Every test is bounded (seeded, fixed counts); together they take a few
seconds.  ``HOTKV_FASTPATH_SCALE=10 python -m pytest -q tests/test_fastpaths.py``
runs them ten times longer (more entries, queries and seeds).
"""

from __future__ import annotations

import os
import random
from bisect import bisect_left, bisect_right

import pytest
from sortedcontainers import SortedDict

from hotkv.types.codec import lp_int_size as _int_elsize, lp_str_size as _str_elsize
from hotkv.types.stream import LISTPACK_MAX_SIZE, Node, Stream, _deltas_size
from hotkv.types.stream_groups import NACK, PEL
from hotkv.types.stream_ids import MASK64, MAX_ID, id_bytes
from hotkv.types.stream_persist import node_listpack as _node_listpack

SCALE = max(1, int(os.environ.get("HOTKV_FASTPATH_SCALE", "1")))
TOP = MASK64                      # 2**64 - 1, the largest ms and seq

NODE_LIMITS = [(4096, 1), (4096, 2), (4096, 3), (4096, 100), (60, 0), (200, 0), (0, 0)]


# ----------------------------------------------------------------------
# Stream reads: range_entries / revrange_entries vs range / revrange
# ----------------------------------------------------------------------

def _gen_ids(rnd, n):
    """n ascending IDs from walks starting at the 64-bit edges: 0-1, a seq
    running into 2**64-1, an ms near 2**64-1 ending at the last ID."""
    ids = set()
    starts = [1, (7 << 64) | (TOP - 40), (1 << 127), MAX_ID - 3000]
    for base in starts:
        eid = base
        for _ in range(n // len(starts)):
            ids.add(eid)
            eid += rnd.choice([1, 1, 1, 2, 127, 128, 1 << 64, (1 << 64) - 1, 4095 << 64])
            if eid > MAX_ID:
                break
    ids.add(MAX_ID)
    ids.discard(0)
    return sorted(ids)


def _fields(rnd):
    if rnd.random() < 0.75:
        return [b"f", rnd.choice([b"", b"1", b"v" * rnd.choice([1, 21, 64, 200])])]
    return [x for _ in range(rnd.randint(1, 3))
            for x in (rnd.choice([b"f", b"g", b"12"]), b"%d" % rnd.randint(0, 999))]


def _build(rnd, max_bytes, max_entries, n):
    s = Stream()
    model = []                                    # [(id, items)], ascending, live only
    for eid in _gen_ids(rnd, n):
        fv = _fields(rnd)
        s.append(eid, [b"XADD", b"k", b"*", *fv], 3, max_bytes, max_entries)
        model.append((eid, tuple(fv)))
    # Tombstones: scattered, runs, and the last entry of some nodes.
    for eid, _ in rnd.sample(model, len(model) // 4):
        assert s.delete(eid)
    for node in list(s.nodes[1::5]):
        if node.live:
            s.delete(node.ids[node.last_live_index()])
    # An empty node (all tombstones, still linked): an exact MINID trim that
    # stops at a tombstone in the first node.
    first = s.nodes[0]
    if first.live > 1 and first.items[-1] is not None:
        s.delete(first.ids[-1])
    if s.nodes[0] is first and first.items[-1] is None:
        s.trim(minid=first.ids[-1])
        assert first.live == 0 and s.nodes[0] is first
    live = {i for node in s.nodes for i, it in zip(node.ids, node.items) if it is not None}
    model = [(i, items) for i, items in model if i in live]
    return s, model


def _model_range(model, keys, a, b, count, rev):
    lo = bisect_left(keys, a)
    hi = bisect_right(keys, b)
    part = model[lo:hi]
    if rev:
        part = part[::-1]
    return part[:count] if count else part


@pytest.mark.parametrize("max_bytes,max_entries", NODE_LIMITS)
def test_range_entries_equal_range_and_model(max_bytes, max_entries):
    rnd = random.Random(max_bytes * 1000 + max_entries)
    s, model = _build(rnd, max_bytes, max_entries, 1200 * SCALE)
    keys = [i for i, _ in model]
    assert s.length == len(model)
    empty = [n for n in s.nodes if not n.live]
    assert len(s.nodes) == 1 or empty or max_entries == 1, "no empty node was made"
    edges = [0, 1, MAX_ID, MAX_ID - 1]
    for node in s.nodes:
        edges += [node.master, node.ids[-1], node.master - 1, node.ids[-1] + 1]
    edges = [min(max(e, 0), MAX_ID) for e in edges]
    every_id = [i for node in s.nodes for i in node.ids]
    for q in range(120 * SCALE):
        pool = rnd.choice([edges, every_id])
        a, b = sorted(rnd.choice(pool) + rnd.choice([-1, 0, 0, 1]) for _ in range(2))
        a = min(max(a, 0), MAX_ID)
        b = min(max(b, 0), MAX_ID)
        if q % 7 == 0:
            a, b = 0, MAX_ID
        total = bisect_right(keys, b) - bisect_left(keys, a)
        for count in sorted({0, 1, 2, total, max(total - 1, 0), total + 1, 10 ** 6}):
            want = _model_range(model, keys, a, b, count, False)
            assert s.range(a, b, count) == want, (a, b, count)
            got_ids = []
            assert s.range_entries(a, b, count, got_ids) == \
                [[id_bytes(i), items] for i, items in want], (a, b, count)
            assert got_ids == [i for i, _ in want]
            assert s.range_entries(a, b, count) == [[id_bytes(i), items] for i, items in want]
            rwant = _model_range(model, keys, a, b, count, True)
            assert s.revrange(a, b, count) == rwant, (a, b, count)
            assert s.revrange_entries(a, b, count) == \
                [[id_bytes(i), items] for i, items in rwant], (a, b, count)
    # Empty intervals, and an empty stream.
    for a, b in [(5, 4), (MAX_ID, MAX_ID - 1)]:
        assert s.range_entries(a, b) == s.revrange_entries(a, b) == s.range(a, b) == []
    assert Stream().range_entries(0, MAX_ID) == Stream().revrange_entries(0, MAX_ID) == []


def test_range_entries_reads_past_nodes_that_yield_nothing():
    """The shape of the 4a32dcf bug, on purpose: a read starting after the
    last entry of a node, count 0, with one entry per node and with fully
    tombstoned nodes in the way."""
    for max_entries in (1, 2, 3):
        s = Stream()
        for k in range(1, 301):
            s.append(k, [b"XADD", b"k", b"*", b"f", b"v"], 3, 4096, max_entries)
        for k in range(1, 301, 5):
            s.delete(k)
        for start in range(1, 302):
            want = s.range(start, MAX_ID)
            assert len(s.range_entries(start, MAX_ID)) == len(want) == \
                len([k for k in range(start, 301) if k % 5 != 1]), (max_entries, start)
            assert len(s.revrange_entries(0, start)) == len(s.revrange(0, start))


# ----------------------------------------------------------------------
# Stream.append_one vs the general sizing
# ----------------------------------------------------------------------

def _general_append_one(s, eid, field, value, max_bytes, max_entries):
    """Stream.append's own code for numfields == 1, without the delegation
    to append_one: the general twin."""
    node = s._open_node(len(field) + len(value), max_bytes, max_entries)
    if node is None:
        node = Node(eid, (field,))
        s.nodes.append(node)
        s.node_keys.append(eid)
        same = True
    else:
        same = node.fields == (field,)
    d = eid - node.master
    nb = 6 if 0 <= d <= 127 else 2 + _deltas_size(eid, node.master)
    nb += _str_elsize(value)
    if same:
        nb += 2
    else:
        nb += _int_elsize(1) + _int_elsize(6) + _str_elsize(field)
    s._link(node, eid, value if same else (field, value), nb)


def _layout(s):
    return [(n.master, n.fields, list(n.ids), n.items, n.live, n.deleted, n.nbytes)
            for n in s.nodes], (s.length, s.last_id, s.first_id, s.entries_added)


_VALUES = [b"", b"0", b"7", b"127", b"128", b"999", b"1000", b"01", b"-1", b"00", b"x",
           b"12345678901234567890", b"9223372036854775807", b"9223372036854775808"]


@pytest.mark.parametrize("max_bytes,max_entries", NODE_LIMITS + [
    (LISTPACK_MAX_SIZE, 0), (LISTPACK_MAX_SIZE + 1, 0), (1 << 20, 0), (1 << 20, 200)])
def test_append_one_equals_general_sizing(max_bytes, max_entries):
    rnd = random.Random(max_bytes + 7 * max_entries)
    fast, slow = Stream(), Stream()
    added = []
    eid = rnd.choice([1, (3 << 64) | (TOP - 300)])
    for step in range(2500 * SCALE):
        eid += rnd.choice([1, 1, 1, 3, 60, 127, 128, 129, 1 << 64, (1 << 64) + 5, 4096 << 64,
                           (5000 << 64) - 9])
        if eid > MAX_ID:
            break
        field = b"f" if rnd.random() < 0.85 else rnd.choice([b"g", b"12", b"f" * 70])
        k = rnd.random()
        if k < 0.6:
            value = b"v" * rnd.choice([20, 21, 22, 62, 63, 64, 65, 124, 125, 126, 127])
        elif k < 0.85:
            value = rnd.choice(_VALUES)
        else:
            value = b"w" * rnd.choice([1, 2, 3, 19, 4095, 4096, 5000])
        fast.append_one(eid, field, value, max_bytes, max_entries)
        added.append((eid, field, value))
        _general_append_one(slow, eid, field, value, max_bytes, max_entries)
        if rnd.random() < 0.08 and fast.length > 1:
            node = rnd.choice(fast.nodes)
            j = rnd.randrange(len(node.ids))
            if node.items[j] is not None:
                victim = node.ids[j]
                assert fast.delete(victim) and slow.delete(victim)
        if step % 100 == 0:
            assert _layout(fast) == _layout(slow), step
    assert _layout(fast) == _layout(slow)
    # The encoder writes a tombstone's placeholder, not the bytes it had:
    # it is the witness for nodes without tombstones only.
    clean = Stream()
    for args in added:
        clean.append_one(*args, max_bytes, max_entries)
    for node in clean.nodes:
        assert node.lp_bytes() == len(_node_listpack(node))


# ----------------------------------------------------------------------
# PEL at chunk boundaries
# ----------------------------------------------------------------------

def test_pel_chunk_boundaries():
    """Runs of exactly a chunk (256), one more, one less, appended one by
    one or with extend_above; popped oldest-first, newest-first, and from
    the middle; irange bounds on every chunk edge."""
    rnd = random.Random(256)
    for trial in range(12 * SCALE):
        pel, model = PEL(), SortedDict()
        top = rnd.choice([0, TOP - 2000, MAX_ID - (1 << 20)])
        for size in rnd.sample([1, 255, 256, 257, 511, 512, 513, 1000], 4):
            ids = list(range(top + 1, top + 1 + size * 2, 2))
            top = ids[-1]
            nacks = [NACK(trial, None) for _ in ids]
            if rnd.random() < 0.5:
                pel.extend_above(ids, nacks)
            else:
                for i, nack in zip(ids, nacks):
                    pel[i] = nack
            model.update(zip(ids, nacks))
        assert pel.items() == list(model.items())
        for lo in pel.maxes + [c[0] for c in pel.chunks] + [0, MAX_ID]:
            for hi in (lo - 1, lo, lo + 1, lo + 600, MAX_ID):
                assert list(pel.irange(lo, hi)) == list(model.irange(lo, hi)), (lo, hi)
        order = rnd.choice(["oldest", "newest", "random", "inner"])
        keys = list(model)
        if order == "newest":
            keys.reverse()
        elif order == "random":
            rnd.shuffle(keys)
        elif order == "inner":
            keys = keys[1::2] + keys[0::2]
        for n, i in enumerate(keys):
            assert pel.pop(i) is model.pop(i)
            assert pel.pop(i) is None
            if n % 97 == 0:
                assert list(pel) == list(model)
                assert all(pel.chunks) and pel.maxes == [c[-1] for c in pel.chunks]
                if model:
                    assert (pel.first(), pel.last()) == (model.keys()[0], model.keys()[-1])
            if n % 300 == 0 and model:
                i = model.keys()[-1] + 1       # above all, after pops
                pel[i] = model[i] = NACK(n, None)
        assert list(pel) == list(model)
        for i in list(model):
            assert pel.pop(i) is model.pop(i)
        assert len(pel) == 0 and pel.chunks == [] and pel.maxes == []


# ----------------------------------------------------------------------
# The request parser: hiredis + screen vs the Redis-rule parser alone
# ----------------------------------------------------------------------

def _cmd(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(out)


def _payload(rnd, big: bool) -> bytes:
    parts = []
    for _ in range(rnd.randint(1, 12)):
        k = rnd.random()
        if k < 0.25:
            parts.append(_cmd(b"XADD", b"q", b"MAXLEN", b"~", b"100", b"*", b"f",
                              b"v" * rnd.randint(0, 40)))
        elif k < 0.4:
            parts.append(_cmd(b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"10",
                              b"STREAMS", b"q", b">"))
        elif k < 0.55:
            # bulk contents that look like headers to the screen
            parts.append(_cmd(b"SET", b"k", rnd.choice([b"\r\n+0", b"\r\n*1234567", b"~",
                                                        b"\r\n%", b"a\r\n>\r\n", b"*9"])))
        elif k < 0.65:
            parts.append(b"PING\r\n")                       # inline, mid-stream
        elif k < 0.7:
            parts.append(rnd.choice([b"*0\r\n", b"*-1\r\n", b"\r\n"]))
        else:
            parts.append(_cmd(b"LPUSH", b"l", *[b"e%d" % i for i in range(rnd.randint(1, 5))]))
    if big:
        parts.insert(rnd.randrange(len(parts) + 1),
                     _cmd(b"SET", b"big", b"b" * rnd.choice([16384, 17000, 40000])))
    if rnd.random() < 0.3:
        parts.append(rnd.choice([b"*1\r\n+0\r\n", b"*2\r\n$1\r\na\r\n:1\r\n",
                                 b"*1\r\n$-5\r\n", b"*abc\r\n", b"*1\r\n*1\r\n$1\r\na\r\n",
                                 b"*3000000\r\n$1\r\na\r\n", b"*1\r\n$3\r\nabcd\r\n"]))
    return b"".join(parts)


def _general_parse(data: bytes):
    """The Redis-rule state machine alone: no hiredis, no screen."""
    from hotkv.protocol.resp import RequestParser
    p = RequestParser()
    p._buf += data
    commands: list = []
    error = p._slow(commands, handoff=False)
    return commands, error


def _fed(pieces):
    from hotkv.protocol.resp import RequestParser
    p = RequestParser()
    commands: list = []
    for piece in pieces:
        got, error = p.feed(piece)
        commands += got
        if error is not None:
            return commands, error
    return commands, None


def test_parser_fast_equals_slow():
    rnd = random.Random(16384)
    for trial in range(120 * SCALE):
        big = trial % 3 == 0
        data = _payload(rnd, big)
        want = _general_parse(data)
        assert _fed([data]) == want, data[:200]
        # Split points: every byte of a small read; near every header and a
        # random sample of a big one (bounded).
        if len(data) <= 400:
            cuts = range(1, len(data))
        else:
            cuts = {1, len(data) - 1, 16383, 16384, 16385}
            pos = data.find(b"\r\n")
            while 0 <= pos and len(cuts) < 120:
                cuts.update((pos - 1, pos, pos + 1, pos + 2))
                pos = data.find(b"\r\n", pos + 2)
            cuts.update(rnd.randrange(1, len(data)) for _ in range(40))
            cuts = sorted(c for c in cuts if 0 < c < len(data))
        for cut in cuts:
            assert _fed([data[:cut], data[cut:]]) == want, (cut, data[:200])
        if len(data) <= 2000 and trial % 10 == 0:
            assert _fed([data[i:i + 1] for i in range(len(data))]) == want


def _one_command_payload(rnd) -> bytes:
    """One command (or what looks like one), mostly of at most ~1.1 KB, some
    with values up to 17 KB, in Redis's
    framing or one of the framings Redis refuses or reads otherwise:
    arguments holding CRLF, CR, LF, '*' and '$' lines; length and count
    lines with leading zeros, signs, spaces, wrong values; a missing or
    partial last CRLF; a second command or an inline line after it."""
    pool = [b"", b"a", b"LPUSH", b"\r\n", b"\r", b"\n", b"a\r", b"\nb", b"*1", b"$1",
            b"\r\n*1\r\n", b"\r\n$1\r\na", b"x" * 200, b"\r\n" * 3, b"0", b"-1"]
    args = []
    for _ in range(rnd.choice([1, 1, 2, 3, 5, 8, 40, 150])):
        if rnd.random() < 0.03:
            # A value past 1 KB (the long-line branch), up to past the limit,
            # sometimes holding CRLF, '*' or '$' lines.
            big = bytearray(rnd.choice(b"xy") for _ in range(rnd.randint(1000, 17000)))
            for _ in range(rnd.choice([0, 0, 1, 3])):
                at = rnd.randrange(len(big))
                big[at:at + 4] = rnd.choice([b"\r\n*1", b"\r\n$5", b"\r\n\r\n", b"\r\n"])
            args.append(bytes(big))
        elif rnd.random() < 0.7:
            args.append(rnd.choice(pool))
        else:
            args.append(bytes(rnd.choice(b"ab\r\n*$0") for _ in range(rnd.randint(0, 12))))
    count = b"%d" % len(args)
    k = rnd.random()
    if k < 0.05:
        count = rnd.choice([b"0" + count, b"+" + count, b" " + count, b"%d" % (len(args) + 1),
                            b"%d" % (len(args) - 1), b"0", b"-1", b"1_0"])
    out = [b"*" + count + b"\r\n"]
    for a in args:
        line = b"%d" % len(a)
        if rnd.random() < 0.02:
            line = rnd.choice([b"0" + line, b"+" + line, b"%d" % (len(a) + 1), b"-1",
                               b"%d" % max(0, len(a) - 1), line + b" "])
        end = b"\r\n" if rnd.random() > 0.01 else rnd.choice([b"\n", b"\r", b"", b"\r\r\n",
                                                                   b"\n\r", b"xx"])
        out.append(b"$" + line + b"\r\n" + a + end)
    data = b"".join(out)
    k = rnd.random()
    if k < 0.03:
        data = data[:-rnd.randint(1, 3)]
    elif k < 0.06:
        data += rnd.choice([b"PING\r\n", _cmd(b"GET", b"k"), b"*1\r\n", b"\r\n"])
    return data


def test_parser_one_command_equals_slow():
    """``_one_command`` (a read of up to 16 KB that is one command) against
    the Redis-rule parser alone, whole and split in two at every byte (a
    bounded sample of cuts past 300 bytes)."""
    from hotkv.protocol.resp import _ONE_LIMIT, _one_command, _one_long

    def one(data):     # the path RequestParser.feed takes for a read of one command
        if len(data) > 1024:
            return _one_long(data)
        return None if b"\r\n*" in data else _one_command(data)
    rnd = random.Random(1024)
    taken = big_taken = 0
    for trial in range(1500 * SCALE):
        data = _one_command_payload(rnd)
        want = _general_parse(data)
        assert _fed([data]) == want, data[:300]
        if len(data) <= _ONE_LIMIT:
            # The path itself: the command, or None for the general path.
            got = one(data)
            if got is not None:
                taken += 1
                big_taken += len(data) > 1024
                assert want == ([got], None), data[:300]
        cuts = range(1, len(data)) if len(data) <= 300 else \
            sorted({rnd.randrange(1, len(data)) for _ in range(30)})
        if trial % 5 == 0:
            for cut in cuts:
                assert _fed([data[:cut], data[cut:]]) == want, (cut, data[:300])
    # Sizes around the limit and around 1 KB (where _one_command gives way
    # to _one_long): one command +- a few bytes, in one read, also split.
    for size in [*range(_ONE_LIMIT - 40, _ONE_LIMIT + 20), *range(1000, 1070)]:
        value = b"v" * (size - 27)
        data = _cmd(b"SET", b"k", value)
        want = ([[b"SET", b"k", value]], None)
        assert _fed([data]) == _general_parse(data) == want
        assert _fed([data[:size // 2], data[size // 2:]]) == want
        if len(data) <= _ONE_LIMIT:
            assert one(data) == want[0][0]
        # The same with the value's CRLF replaced by two other bytes: refused
        # by both (a protocol error), never read as a command.
        bad = data[:-2] + rnd.choice([b"\n\r", b"xx", b"\r\r"])
        assert one(bad) is None and _fed([bad]) == _general_parse(bad) != want
    assert taken > 300 * SCALE, taken    # a good share of the trials took the path
    assert big_taken > 10 * SCALE, big_taken   # and some past 1 KB


# ----------------------------------------------------------------------
# The reply encoder's caches and Entries' shortcut
# ----------------------------------------------------------------------

def _plain(value, resp3=False) -> bytes:
    """RESP2/RESP3 formatting written out, no caches, no shortcuts."""
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, (list, tuple)):
        return b"*%d\r\n" % len(value) + b"".join(_plain(v, resp3) for v in value)
    raise TypeError(value)


def test_encode_caches_equal_plain_formatting():
    from hotkv.protocol.resp import Entries, encode

    def enc(v, resp3):
        out: list = []
        encode(v, out, resp3)
        return b"".join(out)

    for resp3 in (False, True):
        for i in list(range(-3, 1100)) + [2 ** 63 - 1, -2 ** 63]:
            assert enc(i, resp3) == _plain(i)
        for n in list(range(0, 40)) + list(range(1015, 1030)) + [5000]:
            assert enc(b"x" * n, resp3) == _plain(b"x" * n)
        for n in (0, 1, 254, 255, 256, 257, 1000):
            arr = [b"a" * (k % 3) if k % 4 else k for k in range(n)]
            assert enc(arr, resp3) == _plain(arr)
        lens = [0, 1, 20, 1022, 1023, 1024, 1025, 3000]
        for n in (0, 1, 255, 256, 257):
            entries = []
            for k in range(n):
                eid = id_bytes(rnd_id(k))
                nf, nv = lens[k % len(lens)], lens[(k * 3 + 1) % len(lens)]
                items = (b"f" * nf, b"v" * nv) if k % 5 else (b"a", b"1", b"b", b"")
                entries.append([eid, items])
            assert enc(Entries(entries), resp3) == _plain(entries)
            assert enc([[b"s", Entries(entries)]], resp3) == _plain([[b"s", entries]])


def rnd_id(k: int) -> int:
    return [1, MAX_ID, TOP, TOP << 64, (k << 64) | k][k % 5]


# ----------------------------------------------------------------------
# Small parsers
# ----------------------------------------------------------------------

def _outcome(f, *args, **kwargs):
    from hotkv.protocol.errors import CommandError
    try:
        return f(*args, **kwargs)
    except CommandError as e:
        return e.message


def test_ll_and_parse_id_fast_forms():
    """_ll's digit-only shortcut vs string2ll; parse_id's digit-only form vs
    the same ID followed by a NUL (which only its C-string path reads, and
    which Valkey reads as the ID up to the NUL)."""
    from hotkv.commands.streams.args import parse_id, parse_ll as _ll
    from hotkv.protocol.util import string2ll
    rnd = random.Random(19)
    nums = [b"0", b"00", b"01", b"-0", b"-1", b"+1", b" 1", b"1 ", b"", b"1a",
            b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
            b"-9223372036854775809", b"18446744073709551615", b"18446744073709551616",
            b"1" * 18, b"9" * 18, b"1" * 19, b"9" * 19, b"1" * 20, b"\xd9\xa1"]
    nums += [b"%d" % rnd.randint(0, 10 ** rnd.randint(1, 20)) for _ in range(300)]
    for s in nums:
        want = string2ll(s)
        got = _outcome(_ll, s)
        if want is None:
            assert got == "ERR value is not an integer or out of range", s
        else:
            assert got == want, s
    parts = [b"0", b"1", b"00", b"007", b"18446744073709551615", b"18446744073709551616",
             b"9999999999999999999", b"99999999999999999999", b"-1", b"", b"*", b"+2"]
    parts += [b"%d" % rnd.randint(0, 2 ** 64 - 1) for _ in range(30)]
    for ms in parts:
        for seq in parts + [None]:
            arg = ms if seq is None else ms + b"-" + seq
            for kw in ({}, {"strict": True}, {"seq_star": True}, {"missing_seq": TOP}):
                assert _outcome(parse_id, arg, **kw) == \
                    _outcome(parse_id, arg + b"\0tail", **kw), (arg, kw)


def test_glob_matcher_shortcuts_equal_stringmatch():
    from hotkv.clients.acl_rules import glob_matcher
    from hotkv.protocol.util import stringmatch
    rnd = random.Random(42)
    alphabet = b"ab*?"
    shapes = [b"", b"*", b"a", b"ab", b"a*", b"*b", b"a*b", b"??", b"a?", b"*a*", b"[ab]*",
              b"\\*", b"a\\", b"**", b"?*", b"*?"]
    shapes += [bytes(rnd.choice(alphabet + b"[]\\^-") for _ in range(rnd.randint(0, 6)))
               for _ in range(300 * SCALE)]
    strings = [b"", b"a", b"b", b"ab", b"ba", b"aab", b"*", b"?", b"a*b", b"\\"]
    strings += [bytes(rnd.choice(alphabet) for _ in range(rnd.randint(0, 7)))
                for _ in range(60)]
    for pattern in shapes:
        match = glob_matcher(pattern)
        for s in strings:
            assert bool(match(s)) == stringmatch(pattern, s), (pattern, s)
