"""A stream's persistence: its AOF rewrite and its RDB (DUMP) layout.

Owns ``rewrite_commands`` (the commands that rebuild a stream, groups and
PELs included) and ``rdb_save`` / ``rdb_load`` (Valkey's listpack layout:
written as type 21, read as 15, 19 or 21, LZF-compressed strings
included, so payloads DUMPed by Redis 5+ / Valkey restore).  ``rewrite`` is
``rewrite_commands`` under the name every type module uses.  The stream
itself is hotkv/types/stream.py, its groups stream_groups.py; the framing
of a payload (RDB version, CRC64) is hotkv/persistence/rdb.py's.

Invariants: ``node_listpack(node)`` is byte for byte the listpack Valkey
holds for the same entries when the node has no tombstone; with
tombstones (written without fields, hotkv keeps none) it is as long as
Valkey's, ``node.lp_bytes()``, as far as a padding form fits;
``rdb_load`` validates everything (counts, order, PEL ownership) and
raises ``RDBError`` rather than build a half-consistent stream.

Fast paths (each with its general twin and the test proving them equal,
tests/test_fastpaths_rdb.py):
* ``_plain_node_listpack`` vs ``node_listpack``'s element list:
  ::test_stream_node_listpacks_equal_the_general_path;
* ``_plain_node_from_listpack`` (the usual node read from its bytes) vs
  ``node_from_listpack``'s ``lp_parse``, on valid and corrupted listpacks
  (it gives up, never accepts what the general path refuses):
  ::test_stream_node_reader_equals_the_general_path;
* the group and consumer PELs read in one step (``_read_group_pel``,
  ``PEL.extend_above`` when ascending, as Valkey writes them) vs entry by
  entry: ::test_stream_pels_read_in_one_step_equal_entry_by_entry.
With them (and the GC paused, rdbfile.read_bytes) a 1M-entry stream with a
group loads in 1.45 s of CPU instead of 3.28 (a fresh process, bench/RESULTS.md).
"""

from __future__ import annotations

from array import array
from itertools import islice
from operator import lt as _lt

from ..protocol.util import string2ll
from .codec import (
    _LP_SMALL_INTS,
    DEFAULT_LIMITS,
    LP_MID_BACK,
    LP_MID_HEAD,
    T_STREAM_1,
    T_STREAM_2,
    T_STREAM_3,
    RDBError,
    Reader,
    el_bytes,
    lp_build,
    lp_elements,
    lp_entry,
    lp_int_size,
    lp_parse,
    put_len,
    put_string,
)
from .stream import IdArray, Node, Stream
from .stream_groups import NACK
from .stream_ids import MASK64, MAX_ID, id_bytes, int64_delta, make_id

RDB_TYPES = (T_STREAM_1, T_STREAM_2, T_STREAM_3)


# ----------------------------------------------------------------------
# AOF rewrite
# ----------------------------------------------------------------------

def rewrite_commands(key: bytes, stream: Stream) -> list:
    """The commands that rebuild ``stream`` at ``key`` (Valkey's
    rewriteStreamObject): an XADD per entry (or the XADD MAXLEN 0 trick for
    an empty stream), XSETID with ENTRIESADDED and MAXDELETEDID, then per
    group XGROUP CREATE ... ENTRIESREAD, and per consumer either an XCLAIM
    (TIME, RETRYCOUNT, JUSTID FORCE) per pending entry or XGROUP
    CREATECONSUMER when it has none.  A NACK whose entry was trimmed or
    deleted gets its XCLAIM too: replayed while loading, XCLAIM FORCE
    restores it (hotkv/commands/streams/groups.py's xclaim), as Valkey's RDB preamble
    keeps it; Valkey itself, with aof-use-rdb-preamble no, drops it."""
    cmds = []
    if stream.length:
        for eid, items in stream.range(0, MAX_ID):
            cmds.append([b"XADD", key, id_bytes(eid), *items])
    else:
        cmds.append([b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"])
    cmds.append([b"XSETID", key, id_bytes(stream.last_id), b"ENTRIESADDED",
                 b"%d" % stream.entries_added, b"MAXDELETEDID", id_bytes(stream.max_deleted_id)])
    for g in stream.sorted_groups():
        cmds.append([b"XGROUP", b"CREATE", key, g.name, id_bytes(g.last_id), b"ENTRIESREAD",
                     b"%d" % g.entries_read])
        for c in g.sorted_consumers():
            if not c.pel:
                cmds.append([b"XGROUP", b"CREATECONSUMER", key, g.name, c.name])
                continue
            for i, nack in c.pel.items():
                cmds.append([b"XCLAIM", key, g.name, c.name, b"0", id_bytes(i), b"TIME",
                             b"%d" % nack.delivery_time, b"RETRYCOUNT",
                             b"%d" % nack.delivery_count, b"JUSTID", b"FORCE"])
    return cmds


def rewrite(key: bytes, stream: Stream) -> list:
    return rewrite_commands(key, stream)


# ----------------------------------------------------------------------
# RDB serialization (the DUMP / RESTORE payload of a stream value)
# ----------------------------------------------------------------------
#
# Valkey writes a stream as RDB_TYPE_STREAM_LISTPACKS_3 (21): the listpacks
# of its radix tree (node key + listpack bytes), the stream's counters, then
# every group with its PEL and consumers.  ``rdb_save`` produces that
# layout from our nodes (byte-compatible listpacks, no LZF compression:
# valid for any loader); ``rdb_load`` reads types 15, 19 and 21, including
# LZF-compressed strings, so payloads DUMPed by Redis 5+ / Valkey restore.
# The DUMP/RESTORE commands (framing: RDB version + CRC64) live elsewhere.


def _as_int(e) -> int:
    if type(e) is int:
        return e
    v = string2ll(e)
    if v is None:
        raise RDBError("expected an integer in a stream listpack")
    return v


_I63 = 1 << 63


def _plain_node_listpack(node: Node, mms: int, mseq: int) -> bytes | None:
    """node_listpack for the usual node -- no tombstone, one field (the
    master's) stored bare in every entry -- encoded straight into bytes,
    without the element list; None when the node is not that node."""
    items = node.items
    if node.deleted or len(node.fields) != 1:
        return None
    for it in items:
        if type(it) is not bytes:
            return None
    small = _LP_SMALL_INTS
    body = bytearray()
    for e in (node.live, 0, 1, node.fields[0], 0):
        body += small[e + 4096] if type(e) is int and -4096 <= e < 4096 else lp_elements([e])
    same, lp_count = small[2 + 4096], small[4 + 4096]
    head, back = LP_MID_HEAD, LP_MID_BACK
    for eid, it in zip(node.ids, items):
        d1 = (eid >> 64) - mms
        d2 = (eid & MASK64) - mseq
        body += same
        body += small[d1 + 4096] if -4096 <= d1 < 4096 else \
            lp_elements([int64_delta(eid >> 64, mms)])
        body += small[d2 + 4096] if -4096 <= d2 < 4096 else \
            lp_elements([int64_delta(eid & MASK64, mseq)])
        n = len(it)
        if 64 <= n < 4096:          # lp_entry, inlined for a payload's size
            body += head[n]
            body += it
            body += back[n]
        else:
            body += lp_entry(it)
        body += lp_count
    count = 5 + 5 * len(items)
    return ((7 + len(body)).to_bytes(4, "little") + min(count, 65535).to_bytes(2, "little")
            + bytes(body) + b"\xff")


def node_listpack(node: Node) -> bytes:
    """The listpack Valkey holds for node (flags, deltas, master fields).
    A tombstone is written without its fields (hotkv keeps none), and the
    last one padded so that the listpack has the node's byte size
    (``lp_bytes()``, which counts each tombstone as the entry it was):
    the size is what decides a later split on ``stream-node-max-bytes``."""
    plain = _plain_node_listpack(node, node.master >> 64, node.master & MASK64)
    if plain is not None:
        return plain
    fields = node.fields
    els = [node.live, node.deleted, len(fields), *fields, 0]
    mms, mseq = node.master >> 64, node.master & MASK64
    tail = None                 # where the last tombstone's fields go in els
    single = len(fields) == 1
    node_items = node.items
    for j, eid in enumerate(node.ids):
        it = node_items[j]
        if single and type(it) is bytes:
            # The common entry: one field, the master's, stored bare:
            # flags "same fields", the ID deltas, the value, lp-count 4.
            d1 = (eid >> 64) - mms
            d2 = (eid & MASK64) - mseq
            if not (-_I63 <= d1 < _I63 and -_I63 <= d2 < _I63):
                d1 = int64_delta(eid >> 64, mms)
                d2 = int64_delta(eid & MASK64, mseq)
            els += (2, d1, d2, it, 4)
            continue
        items = node.entry(j)
        # A tombstone: no fields (and the deleted flag); loaders skip it.
        deleted = items is None
        flat = () if deleted else items
        same = len(flat) == 2 * len(fields) and all(
            flat[2 * k] == fields[k] for k in range(len(fields)))
        flags = (1 if deleted else 0) | (2 if same else 0)
        els.append(flags)
        els.append(int64_delta(eid >> 64, mms))
        els.append(int64_delta(eid & MASK64, mseq))
        if deleted:
            tail = len(els)
        nf = len(flat) // 2
        if same:
            els.extend(flat[1::2])
            els.append(nf + 3)
        else:
            els.append(nf)
            els.extend(flat)
            els.append(2 * nf + 4)
    lp = lp_build(els)
    if tail is None:
        return lp
    pad = node.lp_bytes() - len(lp)
    form = _tombstone_padding(pad, len(fields)) if pad > 0 else None
    if form is None:
        return lp
    same, tail_els = form
    if same:
        els[tail - 3] = 3                   # deleted + same fields as the master
    els[tail:tail + 2] = tail_els           # was [0 fields, lp-count 4]
    return lp_build(els)


def _str_size(n: int) -> int:
    """Listpack bytes of an n-byte (non-numeric) string element."""
    head = 1 if n < 64 else 2 if n < 4096 else 5
    body = head + n
    return body + (1 if body < 128 else 2 if body < 16384 else 3 if body < 2097152 else
                   4 if body < 268435456 else 5)


def _strings_of_size(total: int, count: int):
    """count filler strings whose listpack bytes add up to total, or None."""
    if count == 1:
        for n in (total - 2, total - 3, total - 4, total - 6, total - 7, total - 8):
            if n >= 0 and _str_size(n) == total:
                return [b"x" * n]
        return None
    for first in range(0, 4):
        rest = _strings_of_size(total - _str_size(first), count - 1)
        if rest is not None:
            return [b"x" * first] + rest
    return None


def _tombstone_padding(pad: int, nmaster: int):
    """A tombstone's fields ``pad`` bytes bigger than none at all: (same
    form?, the elements replacing [0, 4]), or None when no form fits."""
    # [1 field, "", value, lp-count 6]: 2 strings instead of nothing
    pair = _strings_of_size(pad, 2) if pad >= 4 else None
    if pair is not None:
        return False, [1, *pair, 6]
    if nmaster >= 1:
        # same form: nmaster values (int 0 costs 2 bytes) then lp-count
        # nmaster + 3, instead of [0, 4] (4 bytes)
        rest = pad + 2 - 2 * (nmaster - 1)
        one = _strings_of_size(rest, 1) if rest >= 2 else None
        if rest == 2:
            one = [0]
        if one is not None and nmaster + 3 < 128:
            return True, [*([0] * (nmaster - 1)), *one, nmaster + 3]
    return None


def rdb_save(stream: Stream, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    """(RDB type, payload) of a stream value, as Valkey 8 writes it."""
    out = bytearray()
    put_len(len(stream.nodes), out)
    for node in stream.nodes:
        put_string(node.master.to_bytes(16, "big"), out)
        put_string(node_listpack(node), out)
    put_len(stream.length, out)
    for i in (stream.last_id, stream.first_id, stream.max_deleted_id):
        put_len(i >> 64, out)
        put_len(i & MASK64, out)
    put_len(stream.entries_added, out)
    groups = stream.sorted_groups()
    put_len(len(groups), out)
    for g in groups:
        put_string(g.name, out)
        put_len(g.last_id >> 64, out)
        put_len(g.last_id & MASK64, out)
        put_len(g.entries_read, out)
        put_len(len(g.pel), out)
        for i, nack in g.pel.items():
            out += i.to_bytes(16, "big")
            out += (nack.delivery_time & MASK64).to_bytes(8, "little")
            put_len(nack.delivery_count, out)
        consumers = g.sorted_consumers()
        put_len(len(consumers), out)
        for c in consumers:
            put_string(c.name, out)
            out += (c.seen_time & MASK64).to_bytes(8, "little")
            out += (c.active_time & MASK64).to_bytes(8, "little")
            put_len(len(c.pel), out)
            for i in c.pel:
                out += i.to_bytes(16, "big")
    return T_STREAM_3, bytes(out)


def _plain_node_from_listpack(master: int, lp: bytes) -> Node | None:
    """node_from_listpack for the usual node -- what _plain_node_listpack
    writes: no tombstone, one master field (a string under 64 bytes), every
    entry flagged "same fields" with ID deltas of 7 or 13 bits and a string
    value under 4 kB -- read straight from the bytes, without the element
    list; None for any other node (or any doubt: a corrupt one), which the
    general path then reads or refuses.  It walks the same element
    boundaries lp_parse walks, so it accepts nothing the general path
    refuses."""
    n = len(lp)
    if type(lp) is not bytes or n < 7 or int.from_bytes(lp[:4], "little") != n \
            or lp[n - 1] != 0xFF:
        return None
    end = n - 1
    vals: list = []
    d1s: list = []
    d2s: list = []
    va, a1, a2 = vals.append, d1s.append, d2s.append
    try:
        # The master entry: live count, 0 deleted, 1 field, the field, 0.
        b = lp[6]
        if b < 0x80:
            live, p = b, 8
        elif 0xC0 <= b < 0xE0:
            u = ((b & 0x1F) << 8) | lp[7]
            live, p = (u - 0x2000 if u >= 0x1000 else u), 10
        else:
            return None
        b = lp[p + 4]
        if lp[p] != 0 or lp[p + 2] != 1 or not 0x80 <= b < 0xC0:
            return None
        ln = b & 0x3F
        field = lp[p + 5:p + 5 + ln]
        p += 6 + ln
        if lp[p] != 0:
            return None
        p += 2
        # Each entry: flags 2, ms delta, seq delta, value, lp-count 4 -- the
        # 1-byte elements followed by their 1-byte back-length.
        while p < end:
            if lp[p] != 2:
                return None
            b = lp[p + 2]
            if b < 0x80:
                a1(b)
                p += 4
            elif 0xC0 <= b < 0xE0:
                u = ((b & 0x1F) << 8) | lp[p + 3]
                a1(u - 0x2000 if u >= 0x1000 else u)
                p += 5
            else:
                return None
            b = lp[p]
            if b < 0x80:
                a2(b)
                p += 2
            elif 0xC0 <= b < 0xE0:
                u = ((b & 0x1F) << 8) | lp[p + 1]
                a2(u - 0x2000 if u >= 0x1000 else u)
                p += 3
            else:
                return None
            b = lp[p]
            if b >= 0xE0:
                if b >= 0xF0:
                    return None
                ln = ((b & 0x0F) << 8) | lp[p + 1]
                va(lp[p + 2:p + 2 + ln])
                # 2-byte header, back-length 1 byte up to 127, then lp-count
                p += 5 + ln if ln <= 125 else 6 + ln
            elif b >= 0x80:
                if b >= 0xC0:
                    return None
                ln = b & 0x3F
                va(lp[p + 1:p + 1 + ln])
                p += 4 + ln
            else:
                return None
            if lp[p - 2] != 4:
                return None
    except IndexError:
        return None
    if p != end or len(vals) != live:
        return None
    mms, mseq = master >> 64, master & MASK64
    ms = [(mms + d) & MASK64 for d in d1s]
    seq = [(mseq + d) & MASK64 for d in d2s]
    ids = [(m << 64) | q for m, q in zip(ms, seq)]
    if not all(map(_lt, ids, islice(ids, 1, None))):
        return None                         # out of order: the general path says so
    node = Node(master, (field,))
    node.ids = IdArray(array("Q", ms), array("Q", seq))
    node.items = vals
    node.live = live
    node.nbytes = n - lp_int_size(live) - 2
    return node


def node_from_listpack(master: int, lp: bytes) -> Node:
    node = _plain_node_from_listpack(master, lp)
    if node is not None:
        return node
    els = lp_parse(lp)
    try:
        live, deleted, nmaster = _as_int(els[0]), _as_int(els[1]), _as_int(els[2])
        if live < 0 or deleted < 0 or nmaster < 0:
            raise RDBError("negative count in a stream listpack")
        fields = tuple(bytes(f) if type(f) is not int else b"%d" % f
                       for f in els[3:3 + nmaster])
        p = 3 + nmaster
        if _as_int(els[p]) != 0:
            raise RDBError("bad master entry terminator")
        p += 1
        node = Node(master, fields)
        mms, mseq = master >> 64, master & MASK64
        seen_live = seen_deleted = 0
        n_els = len(els)
        ids_append, items_append = node.ids.append, node.items.append
        while p < n_els:
            flags = _as_int(els[p])
            eid = make_id((mms + _as_int(els[p + 1])) & MASK64,
                          (mseq + _as_int(els[p + 2])) & MASK64)
            p += 3
            if flags == 2 and nmaster == 1:
                # The common entry (one field, the master's, live): stored
                # bare, as XADD stores it.
                v = els[p]
                items_append(b"%d" % v if type(v) is int else bytes(v))
                ids_append(eid)
                seen_live += 1
                p += 2                              # the value, lp-count
                continue
            if flags & 2:
                nf = nmaster
                vals = els[p:p + nf]
                p += nf
                flat = []
                for k in range(nf):
                    flat.append(fields[k])
                    flat.append(el_bytes(vals[k]))
            else:
                nf = _as_int(els[p])
                p += 1
                # (a corrupt count must not drive the loop below: bounded by the elements)
                if nf < 0 or p + 2 * nf > n_els:
                    raise RDBError("stream entry field count out of range")
                flat = [el_bytes(e) for e in els[p:p + 2 * nf]]
                for k in range(nf):
                    if k < nmaster and flat[2 * k] == fields[k]:
                        flat[2 * k] = fields[k]
                p += 2 * nf
            p += 1                                  # lp-count
            node.ids.append(eid)
            if flags & 1:
                node.items.append(None)
                seen_deleted += 1
            elif len(flat) == 2 and nmaster == 1 and flat[0] is fields[0]:
                node.items.append(flat[1])
                seen_live += 1
            else:
                node.items.append(tuple(flat))
                seen_live += 1
        if p != len(els) or seen_live != live or seen_deleted != deleted:
            raise RDBError("stream listpack counts do not match its entries")
    except (IndexError, TypeError):
        raise RDBError("truncated stream listpack") from None
    node.live = live
    node.deleted = deleted
    node.nbytes = len(lp) - lp_int_size(live) - lp_int_size(deleted)
    ids = list(node.ids)
    if ids and ids != sorted(set(ids)):
        raise RDBError("stream listpack IDs out of order")
    return node


def _read_group_pel(r: Reader, count: int) -> tuple[list, list]:
    """A group PEL's ``count`` entries at r.pos -- 16-byte ID, 8-byte
    delivery time, delivery count (an RDB length) -- as (IDs, NACKs
    without a consumer), in file order; r moves past them.  The usual
    delivery count, under 64, is read inline."""
    buf = r.buf
    nbuf = len(buf)
    p = r.pos
    ids: list = []
    nacks: list = []
    ia, na = ids.append, nacks.append
    for _ in range(count):
        if p + 25 > nbuf:
            raise RDBError("payload too short")
        ia(int.from_bytes(buf[p:p + 16], "big"))
        t = int.from_bytes(buf[p + 16:p + 24], "little", signed=True)
        b = buf[p + 24]
        if b < 0x40:
            dc = b
            p += 25
        else:
            r.pos = p + 24
            dc = r.num()
            p = r.pos
        na(NACK(t, None, dc))
    r.pos = p
    return ids, nacks


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    """Read a stream value of RDB type 15, 19 or 21 from buf at pos.
    Returns (stream, position after it); raises RDBError when malformed."""
    if rdb_type not in RDB_TYPES:
        raise RDBError("not a stream RDB type")
    r = Reader(buf, pos)
    s = Stream()
    for _ in range(r.num()):
        key = r.string()
        if len(key) != 16:
            raise RDBError("stream node key is not the size of a stream ID")
        master = int.from_bytes(key, "big")
        lp = r.string()
        node = node_from_listpack(master, lp)
        if not node.ids:
            raise RDBError("empty listpack inside stream")
        if s.node_keys and (master <= s.node_keys[-1] or node.ids[0] <= s.nodes[-1].ids[-1]):
            raise RDBError("stream nodes out of order")
        s.nodes.append(node)
        s.node_keys.append(master)
    s.length = r.num()
    if s.length != sum(n.live for n in s.nodes):
        raise RDBError("stream length inconsistent with its entries")
    s.last_id = make_id(r.num(), r.num())
    if rdb_type >= T_STREAM_2:
        s.first_id = make_id(r.num(), r.num())
        s.max_deleted_id = make_id(r.num(), r.num())
        s.entries_added = r.num()
    else:
        s.entries_added = s.length
        # Valkey's first-edge lookup yields the maximal ID when there is none.
        s.first_id = s.first_valid_id() if s.length else MAX_ID
    for _ in range(r.num()):
        name = r.string()
        last = make_id(r.num(), r.num())
        if rdb_type >= T_STREAM_2:
            er = r.num()
            entries_read = er - (1 << 64) if er >= 1 << 63 else er
        else:
            entries_read = s.estimate_distance(last)
        g = s.create_group(name, last, entries_read)
        if g is None:
            raise RDBError("duplicated consumer group name")
        ids, nacks = _read_group_pel(r, r.num())
        gpel = g.pel
        if all(map(_lt, ids, islice(ids, 1, None))):
            gpel.extend_above(ids, nacks)       # ascending, as Valkey writes it
        else:
            for i, nack in zip(ids, nacks):
                if i in gpel:
                    raise RDBError("duplicated PEL entry")
                gpel[i] = nack
        get = gpel.get
        for _ in range(r.num()):
            cname = r.string()
            seen = r.mstime()
            c = g.create_consumer(cname, seen)
            if c is None:
                raise RDBError("duplicated consumer")
            c.active_time = r.mstime() if rdb_type >= T_STREAM_3 else seen
            blob = r.take(16 * r.num())
            ids = [int.from_bytes(blob[k:k + 16], "big") for k in range(0, len(blob), 16)]
            nacks = [get(i) for i in ids]
            for nack in nacks:
                if nack is None or nack.consumer is not None:
                    raise RDBError("consumer PEL entry not in the group PEL")
                nack.consumer = c
            if all(map(_lt, ids, islice(ids, 1, None))):
                c.pel.extend_above(ids, nacks)
            else:       # (not ascending: a duplicate was refused above)
                for i, nack in zip(ids, nacks):
                    c.pel[i] = nack
        if any(n.consumer is None for n in g.pel.values()):
            raise RDBError("group PEL entry without a consumer")
    return s, r.pos

