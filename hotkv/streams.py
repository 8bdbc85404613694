"""The stream data type: entries, consumer groups, pending entries lists.

Owns ``Stream`` and its parts (``Node``, ``Group``, ``Consumer``, ``NACK``);
no sockets, no commands, no replies (hotkv/commands/streams.py does those).

Layout.  An entry ID is one int, ``ms << 64 | seq``.  Entries live in
``Node``s, each mirroring one listpack of Redis's radix tree: a master ID
(the key of the node), the master field names, the entries' IDs (an
``IdArray``: two arrays of 64-bit halves, 16 bytes an entry) and their
fields as flat ``(field, value, field, value...)`` tuples.  An entry whose
field names equal the master's shares the master's field objects, and a
single-field one is stored as its value alone -- a queue's repeated field
names cost nothing per entry, and 1M entries of one 100-byte field take
about 24 bytes each on top of their value objects.  A deleted entry inside
a node is a tombstone (``None``) until the whole node goes, exactly as in
Redis -- which is what makes ``MAXLEN ~`` / ``MINID ~`` trim to the same
length as Valkey: nodes are split where Valkey splits them
(stream-node-max-entries, and stream-node-max-bytes measured with the
listpack encoding sizes Valkey would use), and approximate trimming only
drops whole nodes.

Complexity.  Nodes are found by bisecting ``node_keys`` (their master
IDs), entries by bisecting a node's ``ids``: a range read or trim is
O(log n + k) plus at most one node's worth of tombstones.

Consumer groups.  ``Group.pel`` and ``Consumer.pel`` are ``PEL``s (a dict
plus the IDs sorted in chunks; O(1) to add an ID above all pending ones or
to ack the oldest, O(log n) to find a range) from ID to the *same* ``NACK``
object (delivery time, delivery count, owner), so ownership changes move
one reference between consumers.

Persistence helpers: ``rewrite_commands`` (the AOF rewrite's commands for a
stream) and ``rdb_save`` / ``rdb_load`` (the RDB payload DUMP/RESTORE and
snapshots carry: Valkey's listpack layout, types 15/19/21 on load).

Invariants:
* ``node_keys[i] == nodes[i].master``; IDs strictly increase across nodes;
* ``length`` == number of non-tombstone entries == sum of ``Node.live``;
* ``last_id`` >= every ID ever added (it never decreases, except XSETID);
* every NACK in ``group.pel`` is in exactly its owner's ``consumer.pel``;
  delivery counts never go negative.

Fast paths (each with its general twin and the test proving them equal):
* ``range_entries`` / ``revrange_entries`` vs ``range`` / ``revrange`` (and a
  sorted model): tests/test_fastpaths.py::test_range_entries_equal_range_and_model,
  ::test_range_entries_reads_past_nodes_that_yield_nothing;
* ``append_one`` (and its queue shape) vs append()'s general sizing:
  tests/test_fastpaths.py::test_append_one_equals_general_sizing, with the
  split points against Valkey's DUMP in tests/test_streams_fastpaths.py;
* ``PEL``'s ends (above-all insert, oldest pop, ``extend_above``) vs a
  SortedDict: tests/test_fastpaths.py::test_pel_chunk_boundaries and
  tests/test_streams_fastpaths.py::test_pel_behaves_as_a_sorted_dict;
* ``Group.deliver``'s batch and ``advance_group_through`` vs the per-entry
  delivery an AOF server takes: tests/test_fastpaths_server.py::
  test_xreadgroup_fast_general_aof_and_valkey_agree.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from itertools import chain

from .util import string2ll

MASK64 = (1 << 64) - 1
MAX_ID = (1 << 128) - 1
INVALID_ENTRIES_READ = -1
LISTPACK_MAX_SIZE = 1 << 30


def make_id(ms: int, seq: int) -> int:
    return (ms << 64) | seq


def id_bytes(i: int) -> bytes:
    return b"%d-%d" % (i >> 64, i & MASK64)


# ----------------------------------------------------------------------
# Listpack sizes (only to split nodes where Valkey would)
# ----------------------------------------------------------------------

def _int_elsize(v: int) -> int:
    """Bytes of an integer listpack element, encoding + back-length."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -2147483648 <= v <= 2147483647:
        return 6
    return 10


def _backlen(n: int) -> int:
    if n <= 127:
        return 1
    if n < 16383:
        return 2
    if n < 2097151:
        return 3
    if n < 268435455:
        return 4
    return 5


_INTISH = frozenset(b"-0123456789")


def _str_elsize(s: bytes) -> int:
    """Bytes of a string listpack element (strings that are canonical
    int64s are stored as integers, as listpack does)."""
    n = len(s)
    if n <= 20 and n and s[0] in _INTISH:
        if n < 19 and s.isdigit():
            # a canonical non-negative int: string2ll's answer, without its regex
            if s[0] != 48 or n == 1:
                return _int_elsize(int(s))
        else:
            v = string2ll(s)
            if v is not None:
                return _int_elsize(v)
    if n < 64:
        return n + 2                      # 1-byte header, 1-byte back-length
    if n < 4096:
        return n + 2 + _backlen(n + 2)
    return n + 5 + _backlen(n + 5)


def _delta(a: int, b: int) -> int:
    """a - b as the int64 Valkey stores (uint64 wrap-around)."""
    d = (a - b) & MASK64
    return d - (1 << 64) if d >= 1 << 63 else d


def _deltas_size(eid: int, master: int) -> int:
    """Listpack bytes of an entry's ms and seq deltas from its master."""
    dm = (eid >> 64) - (master >> 64)
    if dm >= 1 << 63:
        dm -= 1 << 64
    ds = (eid & MASK64) - (master & MASK64)
    if ds >= 1 << 63:
        ds -= 1 << 64
    elif ds < -(1 << 63):
        ds += 1 << 64
    return (2 if 0 <= dm <= 127 else _int_elsize(dm)) + (2 if 0 <= ds <= 127 else _int_elsize(ds))


# ----------------------------------------------------------------------
# Structures
# ----------------------------------------------------------------------

class IdArray:
    """A node's entry IDs, ascending, as two arrays of 64-bit halves:
    16 bytes an entry instead of a 128-bit int object and its pointer.
    Indexing yields the ``ms << 64 | seq`` int; bisecting runs on the
    arrays in C (ms first, then seq among equal ms)."""
    __slots__ = ("ms", "seq")

    def __init__(self, ms=None, seq=None):
        self.ms = array("Q") if ms is None else ms
        self.seq = array("Q") if seq is None else seq

    def append(self, eid: int):
        self.ms.append(eid >> 64)
        self.seq.append(eid & MASK64)

    def __len__(self):
        return len(self.ms)

    def __getitem__(self, j: int) -> int:
        return (self.ms[j] << 64) | self.seq[j]

    def __iter__(self):
        for m, q in zip(self.ms, self.seq):
            yield (m << 64) | q

    def __eq__(self, other):
        return list(self) == list(other)

    def bisect_left(self, eid: int) -> int:
        ms = eid >> 64
        lo = bisect_left(self.ms, ms)
        hi = bisect_right(self.ms, ms, lo)
        return bisect_left(self.seq, eid & MASK64, lo, hi)

    def bisect_right(self, eid: int) -> int:
        ms = eid >> 64
        lo = bisect_left(self.ms, ms)
        hi = bisect_right(self.ms, ms, lo)
        return bisect_right(self.seq, eid & MASK64, lo, hi)

    def copy(self) -> "IdArray":
        return IdArray(array("Q", self.ms), array("Q", self.seq))

    def nbytes(self) -> int:
        return self.ms.buffer_info()[1] * 16


class Node:
    """One listpack's worth of entries.  ``items[j]`` is the flat
    (field, value, ...) tuple of entry j; a single-field entry whose field
    is the master's holds just its value (bytes); a tombstone is None."""
    __slots__ = ("master", "fields", "ids", "items", "live", "deleted", "nbytes")

    def __init__(self, master: int, fields: tuple):
        self.master = master
        self.fields = fields
        self.ids = IdArray()
        self.items: list = []
        self.live = 0
        self.deleted = 0
        # listpack bytes except the live/deleted counters (their size varies)
        nbytes = 7 + _int_elsize(len(fields)) + 2   # header+end, num-fields, zero terminator
        for f in fields:
            nbytes += _str_elsize(f)
        self.nbytes = nbytes

    def lp_bytes(self) -> int:
        return self.nbytes + _int_elsize(self.live) + _int_elsize(self.deleted)

    def last_live_index(self) -> int:
        items = self.items
        for j in range(len(items) - 1, -1, -1):
            if items[j] is not None:
                return j
        return -1

    def first_live_index(self) -> int:
        for j, it in enumerate(self.items):
            if it is not None:
                return j
        return -1

    def copy(self) -> "Node":
        n = Node.__new__(Node)
        n.master = self.master
        n.fields = self.fields
        n.ids = self.ids.copy()
        n.items = self.items[:]
        n.live = self.live
        n.deleted = self.deleted
        n.nbytes = self.nbytes
        return n

    def entry(self, j: int):
        """Entry j's flat field/value tuple (None for a tombstone)."""
        it = self.items[j]
        if type(it) is bytes:
            return (self.fields[0], it)
        return it


class PEL:
    """A pending entries list: entry ID -> NACK, iterated in ID order.

    A dict holds the NACKs (get / contains / len in O(1)); the IDs are kept
    sorted in chunks of at most ``_CHUNK`` (``chunks``), with ``maxes[i]``
    the last ID of ``chunks[i]``, so an ID is found by bisecting ``maxes``
    then one chunk: O(log n) to find, a chunk's memmove to insert or
    remove.  Deliveries add IDs above every pending one and acks mostly
    take the oldest, so both ends have a fast path.  Invariants: the
    chunks hold exactly the dict's keys, ascending, none empty; no value
    is None (NACKs only)."""
    __slots__ = ("d", "chunks", "maxes")

    def __init__(self):
        self.d = {}
        self.chunks = []
        self.maxes = []

    def __len__(self):
        return len(self.d)

    def __contains__(self, i):
        return i in self.d

    def __getitem__(self, i):
        return self.d[i]

    def get(self, i, default=None):
        return self.d.get(i, default)

    def __setitem__(self, i: int, nack):
        maxes = self.maxes
        if maxes and i > maxes[-1]:         # above every pending ID: not in d
            self.d[i] = nack
            chunk = self.chunks[-1]
            if len(chunk) < _CHUNK:
                chunk.append(i)
                maxes[-1] = i
            else:
                self.chunks.append([i])
                maxes.append(i)
            return
        d = self.d
        if i in d:
            d[i] = nack
            return
        d[i] = nack
        chunks = self.chunks
        if not maxes:
            chunks.append([i])
            maxes.append(i)
            return
        k = bisect_left(maxes, i)          # i < maxes[k]: that max stays
        chunk = chunks[k]
        chunk.insert(bisect_left(chunk, i), i)
        if len(chunk) > _CHUNK:
            half = len(chunk) >> 1
            chunks.insert(k + 1, chunk[half:])
            del chunk[half:]
            maxes.insert(k, chunk[-1])

    def pop(self, i, default=None):
        nack = self.d.pop(i, None)
        if nack is None:
            return default
        chunks = self.chunks
        chunk = chunks[0]
        if chunk[0] == i:                   # the oldest
            del chunk[0]
            if not chunk:
                del chunks[0]
                del self.maxes[0]
            return nack
        self._unlink(i)
        return nack

    def _unlink(self, i: int):
        """Take i (not the oldest) out of the sorted chunks."""
        maxes = self.maxes
        k = bisect_left(maxes, i)
        chunk = self.chunks[k]
        del chunk[bisect_left(chunk, i)]
        if not chunk:
            del self.chunks[k]
            del maxes[k]
        elif maxes[k] == i:
            maxes[k] = chunk[-1]

    def extend_above(self, ids: list, nacks: list):
        """Add ids (ascending, each above every pending ID) with their nacks."""
        self.d.update(zip(ids, nacks))
        chunks = self.chunks
        maxes = self.maxes
        i = 0
        if chunks:
            chunk = chunks[-1]
            i = _CHUNK - len(chunk)
            if i > 0:
                chunk += ids[:i]
                maxes[-1] = chunk[-1]
        n = len(ids)
        while i < n:
            chunk = ids[i:i + _CHUNK]
            chunks.append(chunk)
            maxes.append(chunk[-1])
            i += _CHUNK

    def __iter__(self):
        return chain.from_iterable(self.chunks)

    def items(self):
        d = self.d
        return [(i, d[i]) for i in chain.from_iterable(self.chunks)]

    def values(self):
        return self.d.values()

    def first(self) -> int:
        return self.chunks[0][0]

    def last(self) -> int:
        return self.maxes[-1]

    def irange(self, minimum: int = 0, maximum: int = MAX_ID):
        """IDs in [minimum, maximum], ascending, lazily: the PEL must not
        change while this is walked (materialize it first)."""
        maxes = self.maxes
        k = bisect_left(maxes, minimum)
        chunks = self.chunks
        n = len(chunks)
        if k == n:
            return
        chunk = chunks[k]
        j = bisect_left(chunk, minimum)
        while True:
            if maxes[k] > maximum:
                yield from chunk[j:bisect_right(chunk, maximum)]
                return
            yield from chunk[j:] if j else chunk
            k += 1
            if k == n:
                return
            chunk = chunks[k]
            j = 0


_new = object.__new__
_CHUNK = 256     # a small chunk keeps acking the oldest (del chunk[0]) cheap


class NACK:
    """A pending entry: delivered, not yet acknowledged."""
    __slots__ = ("delivery_time", "delivery_count", "consumer")

    def __init__(self, delivery_time: int, consumer, delivery_count: int = 1):
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count
        self.consumer = consumer


class Consumer:
    __slots__ = ("name", "seen_time", "active_time", "pel")

    def __init__(self, name: bytes, now: int):
        self.name = name
        self.seen_time = now
        self.active_time = -1
        self.pel = PEL()


class Group:
    __slots__ = ("name", "last_id", "entries_read", "pel", "consumers")

    def __init__(self, name: bytes, last_id: int, entries_read: int):
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel = PEL()
        self.consumers: dict = {}

    def sorted_consumers(self):
        """Consumers in Redis's (radix tree, byte-wise) order."""
        return [self.consumers[k] for k in sorted(self.consumers)]

    def create_consumer(self, name: bytes, now: int):
        """The new consumer, or None if it exists."""
        if name in self.consumers:
            return None
        c = self.consumers[name] = Consumer(name, now)
        return c

    def delete_consumer(self, consumer) -> int:
        """Remove consumer and its pending entries; returns how many it had."""
        n = len(consumer.pel)
        pel = self.pel
        for i in consumer.pel:
            pel.pop(i, None)
        del self.consumers[consumer.name]
        return n

    def ack(self, i: int) -> bool:
        nack = self.pel.pop(i, None)
        if nack is None:
            return False
        nack.consumer.pel.pop(i, None)
        return True

    def ack_all(self, ids) -> int:
        """Acknowledge each of ids; returns how many were pending."""
        pop = self.pel.pop
        n = 0
        for i in ids:
            nack = pop(i)
            if nack is not None:
                n += 1
                nack.consumer.pel.pop(i)
        return n

    def deliver(self, ids: list, consumer, now: int):
        """ids (ascending) delivered to consumer: new ones get a NACK, one
        already pending (the group was moved back) changes hands with its
        delivery count reset."""
        pel = self.pel
        cpel = consumer.pel
        if (not pel.maxes or ids[0] > pel.maxes[-1]) and \
                (not cpel.maxes or ids[0] > cpel.maxes[-1]):
            nacks = []
            for _ in ids:
                # NACK(now, consumer) without the call into __init__
                nack = _new(NACK)
                nack.delivery_time = now
                nack.delivery_count = 1
                nack.consumer = consumer
                nacks.append(nack)
            pel.extend_above(ids, nacks)
            cpel.extend_above(ids, nacks)
        else:
            for i in ids:
                nack = pel.get(i)
                if nack is None:
                    nack = NACK(now, consumer)
                    pel[i] = nack
                    cpel[i] = nack
                else:
                    self.assign(i, nack, consumer)
                    nack.delivery_time = now
                    nack.delivery_count = 1
        consumer.active_time = now

    def assign(self, i: int, nack, consumer):
        """Move nack (of entry i) to consumer's PEL."""
        old = nack.consumer
        if old is not consumer:
            if old is not None:
                old.pel.pop(i, None)
            consumer.pel[i] = nack
            nack.consumer = consumer


class Stream:
    __slots__ = ("nodes", "node_keys", "length", "last_id", "first_id",
                 "max_deleted_id", "entries_added", "groups", "_rax_cache")

    def __init__(self):
        self.nodes: list = []
        self.node_keys: list = []
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted_id = 0
        self.entries_added = 0
        self.groups = None          # name -> Group, created on demand
        self._rax_cache = None

    def __len__(self):
        return self.length

    # ------------------------------------------------------------------
    # Adding
    # ------------------------------------------------------------------
    def append(self, eid: int, args, start: int, node_max_bytes: int, node_max_entries: int):
        """Append entry eid (already validated: > last_id) whose field/value
        pairs are args[start:].  Splits nodes where Valkey would."""
        if len(args) - start == 2:
            return self.append_one(eid, args[start], args[start + 1], node_max_bytes,
                                   node_max_entries)
        fv = args[start:]
        names = fv[0::2]
        values = fv[1::2]
        numfields = len(names)
        nodes = self.nodes
        node = self._open_node(sum(map(len, fv)), node_max_bytes, node_max_entries)
        if node is None:
            node = Node(eid, tuple(names))
            nodes.append(node)
            self.node_keys.append(eid)
            same = True
        else:
            fields = node.fields
            same = fields == tuple(names)
            if same:
                fv[0::2] = fields     # share the master's field objects
        items = tuple(fv)
        # flags, ms delta, seq delta, values, lp-count [, num-fields, names]
        master = node.master
        d = eid - master
        if 0 <= d <= 127:                   # same ms, close seq
            nb = 6
        else:
            nb = 2 + _deltas_size(eid, master)
        for v in values:
            nb += _str_elsize(v)
        if same:
            nb += 2 if numfields < 125 else _int_elsize(numfields + 3)
        else:
            nb += _int_elsize(numfields) + _int_elsize(2 * numfields + 4)
            for f in names:
                nb += _str_elsize(f)
        self._link(node, eid, items, nb)

    def append_one(self, eid: int, field: bytes, value: bytes, node_max_bytes: int,
                   node_max_entries: int):
        """append() of a one-field entry: the capped queue's XADD.  The
        common shape -- the master's field, an ID a few sequence numbers past
        the master's, a value of 21..125 bytes, room in the last node -- is
        sized here without _open_node's general test; any other shape is
        sized below, as append() sizes its entries."""
        vlen = len(value)
        nodes = self.nodes
        if nodes and 20 < vlen < 126 and 0 <= eid - (node := nodes[-1]).master <= 127:
            fields = node.fields
            live = node.live
            deleted = node.deleted
            if len(fields) == 1 and fields[0] == field and live < 128 and deleted < 128 \
                    and (not node_max_entries or live + deleted < node_max_entries) \
                    and 0 < node_max_bytes <= LISTPACK_MAX_SIZE \
                    and node.nbytes + 4 + len(field) + vlen < node_max_bytes:
                # _open_node's test with both counters in one byte; then
                # flags and both deltas (6), the value, lp-count (2), as below
                return self._link(node, eid, value, 10 + vlen if vlen < 64 else 11 + vlen)
        node = self._open_node(len(field) + vlen, node_max_bytes, node_max_entries)
        if node is None:
            node = Node(eid, (field,))
            nodes.append(node)
            self.node_keys.append(eid)
            same = True
        else:
            fields = node.fields
            same = len(fields) == 1 and fields[0] == field
        master = node.master
        d = eid - master
        if 0 <= d <= 127:                   # same ms, close seq
            nb = 6                          # flags and both deltas
        else:
            dm = (eid >> 64) - (master >> 64)
            ds = (eid & MASK64) - (master & MASK64)
            if -4096 <= dm <= 4095 and -4096 <= ds <= 4095:
                # each delta in one or two bytes, plus its back-length
                nb = 2 + (2 if 0 <= dm <= 127 else 3) + (2 if 0 <= ds <= 127 else 3)
            else:
                nb = 2 + _deltas_size(eid, master)
        if vlen > 20:
            if vlen < 64:
                nb += vlen + 2
            elif vlen < 126:
                nb += vlen + 3
            else:
                nb += _str_elsize(value)
        elif vlen and value[0] not in _INTISH:  # short, and cannot be an integer
            nb += vlen + 2
        elif vlen < 4 and value.isdigit() and (value[0] != 48 or vlen == 1):
            nb += 2 if vlen < 3 or int(value) < 128 else 3     # 0..999, as _str_elsize
        else:
            nb += _str_elsize(value)
        if same:
            nb += 2                             # lp-count (4)
            item = value                        # the field is the master's
        else:
            nb += 4 + _str_elsize(field)        # num-fields (1), lp-count (6), name
            item = (field, value)
        self._link(node, eid, item, nb)

    def _open_node(self, size: int, node_max_bytes: int, node_max_entries: int):
        """The last node if an entry of size bytes still goes into it (where
        Valkey would not start a new listpack), else None."""
        nodes = self.nodes
        if not nodes:
            return None
        node = nodes[-1]
        live = node.live
        deleted = node.deleted
        if node_max_bytes == 0 or node_max_bytes > LISTPACK_MAX_SIZE:
            node_max_bytes = LISTPACK_MAX_SIZE
        # lp_bytes(): the two counters are small ints in all but huge nodes
        lp = node.nbytes + (2 if live < 128 else _int_elsize(live)) + \
            (2 if deleted < 128 else _int_elsize(deleted))
        if lp + size >= node_max_bytes or \
                (node_max_entries and live + deleted >= node_max_entries):
            return None
        return node

    def _link(self, node, eid: int, item, nb: int):
        """The bookkeeping of an entry appended to node (last): its ID, its
        item, nb listpack bytes, and the stream's counters."""
        node.nbytes += nb
        ids = node.ids
        ids.ms.append(eid >> 64)
        ids.seq.append(eid & MASK64)
        node.items.append(item)
        node.live += 1
        self.length += 1
        self.entries_added += 1
        self.last_id = eid
        if self.length == 1:
            self.first_id = eid

    # ------------------------------------------------------------------
    # Reading
    # ------------------------------------------------------------------
    def range(self, start: int, end: int, count: int = 0):
        """(id, items) for live entries in [start, end], ascending."""
        out = []
        if start > end or not self.nodes:
            return out
        nodes = self.nodes
        ni = bisect_right(self.node_keys, start) - 1
        if ni < 0:
            ni = 0
        first = True
        while ni < len(nodes):
            node = nodes[ni]
            ids = node.ids
            items = node.items
            j = ids.bisect_left(start) if first else 0
            first = False
            n = len(ids)
            msa = ids.ms
            seqa = ids.seq
            while j < n:
                eid = (msa[j] << 64) | seqa[j]
                if eid > end:
                    return out
                it = items[j]
                if it is not None:
                    if type(it) is bytes:
                        it = (node.fields[0], it)
                    out.append((eid, it))
                    if count and len(out) >= count:
                        return out
                j += 1
            ni += 1
        return out

    def revrange(self, start: int, end: int, count: int = 0):
        """(id, items) for live entries in [start, end], descending."""
        out = []
        if start > end or not self.nodes:
            return out
        nodes = self.nodes
        ni = bisect_right(self.node_keys, end) - 1
        first = True
        while ni >= 0:
            node = nodes[ni]
            ids = node.ids
            items = node.items
            j = (ids.bisect_right(end) if first else len(ids)) - 1
            first = False
            msa = ids.ms
            seqa = ids.seq
            while j >= 0:
                eid = (msa[j] << 64) | seqa[j]
                if eid < start:
                    return out
                it = items[j]
                if it is not None:
                    if type(it) is bytes:
                        it = (node.fields[0], it)
                    out.append((eid, it))
                    if count and len(out) >= count:
                        return out
                j -= 1
            ni -= 1
        return out

    def range_entries(self, start: int, end: int, count: int = 0, ids=None):
        """range() as the reply wants it: [id bytes, (field, value, ...)]
        per entry; ``ids``, when a list, also gets the entries' IDs."""
        out = []
        nodes = self.nodes
        if start > end or not nodes:
            return out
        ni = bisect_right(self.node_keys, start) - 1
        if ni < 0:
            ni = 0
        nn = len(nodes)
        j = nodes[ni].ids.bisect_left(start) if start else 0
        while ni < nn:
            node = nodes[ni]
            idarr = node.ids
            msa = idarr.ms
            seqa = idarr.seq
            n = len(msa)
            hi = n if end == MAX_ID or (msa[-1] << 64 | seqa[-1]) <= end else \
                idarr.bisect_right(end)
            items = node.items
            f0 = node.fields[0] if node.fields else None
            if not node.deleted:
                # no tombstones: the count bounds the slice, no test per entry
                stop = hi
                if count and j + count - len(out) < hi:
                    stop = j + count - len(out)
                if ids is None:
                    for m, q, it in zip(msa[j:stop], seqa[j:stop], items[j:stop]):
                        out.append([b"%d-%d" % (m, q), (f0, it) if type(it) is bytes else it])
                else:
                    for m, q, it in zip(msa[j:stop], seqa[j:stop], items[j:stop]):
                        out.append([b"%d-%d" % (m, q), (f0, it) if type(it) is bytes else it])
                        ids.append(m << 64 | q)
                # count 0 means no limit: an empty visit must not end the read
                if count and len(out) >= count:
                    return out
            else:
                for k in range(j, hi):
                    it = items[k]
                    if it is None:
                        continue
                    if type(it) is bytes:
                        it = (f0, it)
                    m = msa[k]
                    q = seqa[k]
                    out.append([b"%d-%d" % (m, q), it])
                    if ids is not None:
                        ids.append(m << 64 | q)
                    if len(out) == count:
                        return out
            if hi < n:
                return out
            ni += 1
            j = 0
        return out

    def revrange_entries(self, start: int, end: int, count: int = 0):
        """revrange() as the reply wants it (see range_entries)."""
        out = []
        nodes = self.nodes
        if start > end or not nodes:
            return out
        ni = bisect_right(self.node_keys, end) - 1
        if ni < 0:
            return out
        j = len(nodes[ni].ids) if end == MAX_ID else nodes[ni].ids.bisect_right(end)
        while ni >= 0:
            node = nodes[ni]
            idarr = node.ids
            msa = idarr.ms
            seqa = idarr.seq
            lo = 0 if not start or (msa[0] << 64 | seqa[0]) >= start else \
                idarr.bisect_left(start)
            items = node.items
            f0 = node.fields[0] if node.fields else None
            for k in range(j - 1, lo - 1, -1):
                it = items[k]
                if it is None:
                    continue
                if type(it) is bytes:
                    it = (f0, it)
                out.append([b"%d-%d" % (msa[k], seqa[k]), it])
                if len(out) == count:
                    return out
            if lo > 0:
                return out
            ni -= 1
            if ni >= 0:
                j = len(nodes[ni].ids)
        return out

    def _find(self, eid: int):
        """(node index, position) of a live entry, or None."""
        ni = bisect_right(self.node_keys, eid) - 1
        if ni < 0:
            return None
        node = self.nodes[ni]
        j = node.ids.bisect_left(eid)
        if j < len(node.ids) and node.ids[j] == eid and node.items[j] is not None:
            return ni, j
        return None

    def get(self, eid: int):
        """The items tuple of a live entry, or None."""
        pos = self._find(eid)
        if pos is None:
            return None
        return self.nodes[pos[0]].entry(pos[1])

    def exists(self, eid: int) -> bool:
        return self._find(eid) is not None

    def last_valid_id(self) -> int:
        """ID of the last live entry (0 if none)."""
        for node in reversed(self.nodes):
            j = node.last_live_index()
            if j >= 0:
                return node.ids[j]
        return 0

    def first_valid_id(self) -> int:
        for node in self.nodes:
            j = node.first_live_index()
            if j >= 0:
                return node.ids[j]
        return 0

    def first_edge_id(self) -> int:
        """The first ID including tombstones (Valkey's streamGetEdgeID
        without skipping tombstones); MAX_ID when there is none."""
        if not self.nodes:
            return MAX_ID
        return self.nodes[0].ids[0]

    # ------------------------------------------------------------------
    # Deleting
    # ------------------------------------------------------------------
    def delete(self, eid: int) -> bool:
        pos = self._find(eid)
        if pos is None:
            return False
        ni, j = pos
        node = self.nodes[ni]
        if node.live == 1:
            del self.nodes[ni]
            del self.node_keys[ni]
        else:
            node.items[j] = None
            node.live -= 1
            node.deleted += 1
        self.length -= 1
        return True

    def trim(self, maxlen=None, minid=None, approx=False, limit=0) -> int:
        """Valkey's streamTrim: by length (maxlen) or by ID (minid).  With
        approx only whole nodes go; limit caps the entries removed (0 = no
        cap).  Returns how many entries were removed."""
        if maxlen is None and minid is None:
            return 0
        nodes = self.nodes
        deleted = 0
        i = 0
        by_len = maxlen is not None
        while i < len(nodes):
            if by_len and self.length <= maxlen:
                break
            node = nodes[i]
            entries = node.live
            if limit and deleted + entries > limit:
                break
            if by_len:
                remove = self.length - entries >= maxlen
            else:
                remove = node.ids[-1] < minid
            if remove:
                self.length -= entries
                deleted += entries
                i += 1
                continue
            if approx:
                break
            ids = node.ids
            items = node.items
            removed_here = 0
            for j in range(len(ids)):
                if by_len:
                    if self.length <= maxlen:
                        break
                elif ids[j] >= minid:
                    break
                if items[j] is not None:
                    items[j] = None
                    removed_here += 1
                    self.length -= 1
            node.live -= removed_here
            node.deleted += removed_here
            deleted += removed_here
            break
        if i:
            del nodes[:i]
            del self.node_keys[:i]
        if self.length == 0:
            self.first_id = 0
        elif deleted:
            self.first_id = self.first_valid_id()
        return deleted

    # ------------------------------------------------------------------
    # Consumer groups
    # ------------------------------------------------------------------
    def create_group(self, name: bytes, last_id: int, entries_read: int):
        """The new group, or None if one of that name exists."""
        if self.groups is None:
            self.groups = {}
        if name in self.groups:
            return None
        g = self.groups[name] = Group(name, last_id, entries_read)
        return g

    def group(self, name: bytes):
        if self.groups is None:
            return None
        return self.groups.get(name)

    def sorted_groups(self):
        if not self.groups:
            return []
        return [self.groups[k] for k in sorted(self.groups)]

    def range_has_tombstones(self, start: int, end: int = MAX_ID) -> bool:
        # Valkey 8.1 does not exempt a max deleted ID below the first entry.
        if not self.length or not self.max_deleted_id:
            return False
        return start <= self.max_deleted_id <= end

    def estimate_distance(self, eid: int) -> int:
        """The logical read counter of eid, or INVALID_ENTRIES_READ when
        it cannot be known (Valkey's streamEstimateDistanceFromFirstEverEntry)."""
        if not self.entries_added:
            return 0
        if not self.length and eid <= self.last_id:
            return self.entries_added
        if eid and eid < self.max_deleted_id:
            return INVALID_ENTRIES_READ      # before the last tombstone
        if eid == self.last_id:
            return self.entries_added
        if eid > self.last_id:
            return INVALID_ENTRIES_READ
        if not self.max_deleted_id or self.max_deleted_id < self.first_id:
            if eid < self.first_id:
                return self.entries_added - self.length
            if eid == self.first_id:
                return self.entries_added - self.length + 1
        return INVALID_ENTRIES_READ

    def group_lag(self, g):
        """Entries not yet delivered to the group, or None if unknown."""
        if not self.entries_added:
            return 0
        if g.entries_read != INVALID_ENTRIES_READ and not self.range_has_tombstones(g.last_id):
            return self.entries_added - g.entries_read
        er = self.estimate_distance(g.last_id)
        if er != INVALID_ENTRIES_READ:
            return self.entries_added - er
        return None

    def advance_group(self, g, eid: int):
        """Group g delivers eid (> its last ID): move its read counter."""
        if g.entries_read != INVALID_ENTRIES_READ and g.last_id >= self.first_id and \
                not self.range_has_tombstones(g.last_id):
            g.entries_read += 1
        elif self.entries_added:
            g.entries_read = self.estimate_distance(eid)
        g.last_id = eid

    def advance_group_through(self, g, ids: list):
        """advance_group for each of ids (ascending) above g's last ID."""
        last = g.last_id
        if g.entries_read != INVALID_ENTRIES_READ and ids[0] > last >= self.first_id and \
                not self.range_has_tombstones(last):
            # every step would take the counting branch: last_id only grows
            g.entries_read += len(ids)
            g.last_id = ids[-1]
            return
        for i in ids:
            if i > g.last_id:
                self.advance_group(g, i)

    def rax_node_count(self) -> int:
        """Valkey's XINFO radix-tree-nodes: the nodes of a radix tree over
        the node keys (16-byte big-endian IDs) in rax's compressed layout --
        a compressed node per shared run of bytes, a branching node where
        keys diverge, one node for a lone key's tail, one leaf per key.
        Cached: node keys are only appended at the end or removed, so
        (count, first, last) identifies the set."""
        keys = self.node_keys
        if not keys:
            return 1
        tag = (len(keys), keys[0], keys[-1])
        cache = self._rax_cache
        if cache is not None and cache[0] == tag:
            return cache[1]
        raw = [k.to_bytes(16, "big") for k in keys]

        def count(lo, hi, d):
            if hi - lo == 1:
                return 1 if d == 16 else 2
            first, last = raw[lo], raw[hi - 1]
            c = d
            while first[c] == last[c]:
                c += 1
            n = 2 if c > d else 1
            i = lo
            while i < hi:
                ch = raw[i][c]
                j = i + 1
                while j < hi and raw[j][c] == ch:
                    j += 1
                n += count(i, j, c + 1)
                i = j
            return n

        n = count(0, len(raw), 0)
        self._rax_cache = (tag, n)
        return n

    # ------------------------------------------------------------------
    def copy(self) -> "Stream":
        """A deep copy (COPY): entries, groups, consumers and PELs."""
        s = Stream()
        s.nodes = [n.copy() for n in self.nodes]
        s.node_keys = self.node_keys[:]
        s.length = self.length
        s.last_id = self.last_id
        s.first_id = self.first_id
        s.max_deleted_id = self.max_deleted_id
        s.entries_added = self.entries_added
        if self.groups is not None:
            s.groups = {}
            for name, g in self.groups.items():
                ng = s.groups[name] = Group(name, g.last_id, g.entries_read)
                for cname, c in g.consumers.items():
                    nc = ng.consumers[cname] = Consumer(cname, c.seen_time)
                    nc.active_time = c.active_time
                for i, nack in g.pel.items():
                    owner = ng.consumers[nack.consumer.name]
                    nn = NACK(nack.delivery_time, owner, nack.delivery_count)
                    ng.pel[i] = nn
                    owner.pel[i] = nn
        return s

    def memory_usage(self) -> int:
        """A rough byte count (MEMORY USAGE)."""
        total = 200
        for node in self.nodes:
            total += 120 + node.ids.nbytes() + 8 * len(node.items) + node.lp_bytes()
        if self.groups:
            for g in self.groups.values():
                total += 200 + 64 * len(g.pel) + 100 * len(g.consumers)
        return total


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
    restores it (hotkv.commands.streams.xclaim), as Valkey's RDB preamble
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


def _register():
    from .db import register_type
    register_type(Stream, b"stream")


Stream.type_name = b"stream"
_register()

__all__ = ["Stream", "Group", "Consumer", "NACK", "PEL", "Node", "MAX_ID", "MASK64",
           "INVALID_ENTRIES_READ", "make_id", "id_bytes", "rewrite_commands"]


# ----------------------------------------------------------------------
# RDB serialization (the DUMP / RESTORE payload of a stream value)
# ----------------------------------------------------------------------
#
# Valkey writes a stream as RDB_TYPE_STREAM_LISTPACKS_3: the listpacks of
# its radix tree (node key + listpack bytes), the stream's counters, then
# every group with its PEL and consumers.  ``rdb_save`` produces that
# layout from our nodes (byte-compatible listpacks, no LZF compression:
# valid for any loader); ``rdb_load`` reads types 15, 19 and 21, including
# LZF-compressed strings, so payloads DUMPed by Redis 5+ / Valkey restore.
# The DUMP/RESTORE commands (framing: RDB version + CRC64) live elsewhere.

RDB_TYPE_STREAM_LISTPACKS = 15
RDB_TYPE_STREAM_LISTPACKS_2 = 19
RDB_TYPE_STREAM_LISTPACKS_3 = 21


class RDBError(ValueError):
    """A malformed or unsupported stream payload."""


def _lp_encode_int(v: int, out: bytearray):
    if 0 <= v <= 127:
        enc = bytes((v,))
    elif -4096 <= v <= 4095:
        u = v & 0x1FFF
        enc = bytes((0xC0 | (u >> 8), u & 0xFF))
    elif -32768 <= v <= 32767:
        enc = b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    elif -8388608 <= v <= 8388607:
        enc = b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    elif -2147483648 <= v <= 2147483647:
        enc = b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    else:
        enc = b"\xf4" + (v & MASK64).to_bytes(8, "little")
    out += enc
    _lp_backlen(len(enc), out)


def _lp_backlen(n: int, out: bytearray):
    if n <= 127:
        out.append(n)
    elif n < 16383:
        out += bytes((n >> 7, (n & 127) | 128))
    elif n < 2097151:
        out += bytes((n >> 14, ((n >> 7) & 127) | 128, (n & 127) | 128))
    elif n < 268435455:
        out += bytes((n >> 21, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128, (n & 127) | 128))
    else:
        out += bytes((n >> 28, ((n >> 21) & 127) | 128, ((n >> 14) & 127) | 128,
                      ((n >> 7) & 127) | 128, (n & 127) | 128))


def _lp_encode_str(s: bytes, out: bytearray):
    if 0 < len(s) <= 20 and s[0] in _INTISH:
        v = string2ll(s)
        if v is not None:
            return _lp_encode_int(v, out)
    n = len(s)
    if n < 64:
        head = bytes((0x80 | n,))
    elif n < 4096:
        head = bytes((0xE0 | (n >> 8), n & 0xFF))
    else:
        head = b"\xf0" + n.to_bytes(4, "little")
    out += head
    out += s
    _lp_backlen(len(head) + n, out)


def _lp_build(elements) -> bytes:
    body = bytearray()
    for e in elements:
        if type(e) is int:
            _lp_encode_int(e, body)
        else:
            _lp_encode_str(e, body)
    total = 6 + len(body) + 1
    count = len(elements) if len(elements) < 65535 else 65535
    return total.to_bytes(4, "little") + count.to_bytes(2, "little") + bytes(body) + b"\xff"


def _lp_parse(lp: bytes) -> list:
    """A listpack's elements: ints stay ints, strings are bytes."""
    if len(lp) < 7 or int.from_bytes(lp[:4], "little") != len(lp) or lp[-1] != 0xFF:
        raise RDBError("bad listpack header")
    out = []
    p = 6
    end = len(lp) - 1
    while p < end:
        b = lp[p]
        if b < 0x80:
            v, n = b, 1
        elif b < 0xC0:
            ln = b & 0x3F
            v, n = lp[p + 1:p + 1 + ln], 1 + ln
        elif b < 0xE0:
            u = ((b & 0x1F) << 8) | lp[p + 1]
            v, n = (u - 0x2000 if u >= 0x1000 else u), 2
        elif b < 0xF0:
            ln = ((b & 0x0F) << 8) | lp[p + 1]
            v, n = lp[p + 2:p + 2 + ln], 2 + ln
        elif b == 0xF0:
            ln = int.from_bytes(lp[p + 1:p + 5], "little")
            v, n = lp[p + 5:p + 5 + ln], 5 + ln
        elif 0xF1 <= b <= 0xF4:
            size = {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}[b]
            v = int.from_bytes(lp[p + 1:p + 1 + size], "little", signed=True)
            n = 1 + size
        else:
            raise RDBError("bad listpack encoding")
        if p + n > end:
            raise RDBError("listpack element out of bounds")
        out.append(v)
        p += n + _backlen(n)
    if p != end:
        raise RDBError("listpack length mismatch")
    return out


def _as_int(e) -> int:
    if type(e) is int:
        return e
    v = string2ll(e)
    if v is None:
        raise RDBError("expected an integer in a stream listpack")
    return v


def _node_listpack(node: Node) -> bytes:
    """The listpack Valkey holds for node (flags, deltas, master fields)."""
    fields = node.fields
    els = [node.live, node.deleted, len(fields), *fields, 0]
    mms, mseq = node.master >> 64, node.master & MASK64
    for j, eid in enumerate(node.ids):
        items = node.entry(j)
        # hotkv keeps no fields for a tombstone: it is written with none
        # (and the deleted flag), which every loader skips.
        deleted = items is None
        flat = () if deleted else items
        same = len(flat) == 2 * len(fields) and all(
            flat[2 * k] == fields[k] for k in range(len(fields)))
        flags = (1 if deleted else 0) | (2 if same else 0)
        els.append(flags)
        els.append(_delta(eid >> 64, mms))
        els.append(_delta(eid & MASK64, mseq))
        nf = len(flat) // 2
        if same:
            els.extend(flat[1::2])
            els.append(nf + 3)
        else:
            els.append(nf)
            els.extend(flat)
            els.append(2 * nf + 4)
    return _lp_build(els)




def _rdb_len(v: int, out: bytearray):
    if v < 0:
        v &= MASK64
    if v < 64:
        out.append(v)
    elif v < 16384:
        out += bytes((0x40 | (v >> 8), v & 0xFF))
    elif v <= 0xFFFFFFFF:
        out.append(0x80)
        out += v.to_bytes(4, "big")
    else:
        out.append(0x81)
        out += v.to_bytes(8, "big")


def _rdb_str(s: bytes, out: bytearray):
    if len(s) <= 11:
        v = string2ll(s)
        if v is not None and b"%d" % v == s:
            if -128 <= v <= 127:
                out += b"\xc0" + (v & 0xFF).to_bytes(1, "little")
                return
            if -32768 <= v <= 32767:
                out += b"\xc1" + (v & 0xFFFF).to_bytes(2, "little")
                return
            if -2147483648 <= v <= 2147483647:
                out += b"\xc2" + (v & 0xFFFFFFFF).to_bytes(4, "little")
                return
    _rdb_len(len(s), out)
    out += s


def rdb_save(stream: Stream):
    """(RDB type, payload) of a stream value, as Valkey 8 writes it."""
    out = bytearray()
    _rdb_len(len(stream.nodes), out)
    for node in stream.nodes:
        _rdb_str(node.master.to_bytes(16, "big"), out)
        _rdb_str(_node_listpack(node), out)
    _rdb_len(stream.length, out)
    for i in (stream.last_id, stream.first_id, stream.max_deleted_id):
        _rdb_len(i >> 64, out)
        _rdb_len(i & MASK64, out)
    _rdb_len(stream.entries_added, out)
    groups = stream.sorted_groups()
    _rdb_len(len(groups), out)
    for g in groups:
        _rdb_str(g.name, out)
        _rdb_len(g.last_id >> 64, out)
        _rdb_len(g.last_id & MASK64, out)
        _rdb_len(g.entries_read, out)
        _rdb_len(len(g.pel), out)
        for i, nack in g.pel.items():
            out += i.to_bytes(16, "big")
            out += (nack.delivery_time & MASK64).to_bytes(8, "little")
            _rdb_len(nack.delivery_count, out)
        consumers = g.sorted_consumers()
        _rdb_len(len(consumers), out)
        for c in consumers:
            _rdb_str(c.name, out)
            out += (c.seen_time & MASK64).to_bytes(8, "little")
            out += (c.active_time & MASK64).to_bytes(8, "little")
            _rdb_len(len(c.pel), out)
            for i in c.pel:
                out += i.to_bytes(16, "big")
    return RDB_TYPE_STREAM_LISTPACKS_3, bytes(out)


def _lzf_decompress(data: bytes, expected: int) -> bytes:
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            ln = ctrl + 1
            if i + ln > n:
                raise RDBError("LZF literal out of bounds")
            out += data[i:i + ln]
            i += ln
        else:
            ln = ctrl >> 5
            if ln == 7:
                ln += data[i]
                i += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
            i += 1
            if ref < 0:
                raise RDBError("LZF back-reference out of bounds")
            for _ in range(ln + 2):     # may overlap what it copies
                out.append(out[ref])
                ref += 1
    if len(out) != expected:
        raise RDBError("LZF length mismatch")
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0):
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RDBError("payload too short")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def length(self, encoded_ok: bool = False):
        b = self.take(1)[0]
        kind = b >> 6
        if kind == 0:
            return (b & 0x3F, False)
        if kind == 1:
            return (((b & 0x3F) << 8) | self.take(1)[0], False)
        if b == 0x80:
            return (int.from_bytes(self.take(4), "big"), False)
        if b == 0x81:
            return (int.from_bytes(self.take(8), "big"), False)
        if kind == 3 and encoded_ok:
            return (b & 0x3F, True)
        raise RDBError("bad length encoding")

    def num(self) -> int:
        return self.length()[0]

    def string(self) -> bytes:
        v, enc = self.length(True)
        if not enc:
            return self.take(v)
        if v == 0:
            return b"%d" % int.from_bytes(self.take(1), "little", signed=True)
        if v == 1:
            return b"%d" % int.from_bytes(self.take(2), "little", signed=True)
        if v == 2:
            return b"%d" % int.from_bytes(self.take(4), "little", signed=True)
        if v == 3:
            clen = self.num()
            ulen = self.num()
            return _lzf_decompress(self.take(clen), ulen)
        raise RDBError("unknown string encoding")

    def mstime(self) -> int:
        v = int.from_bytes(self.take(8), "little")
        return v - (1 << 64) if v >= 1 << 63 else v


def _node_from_listpack(master: int, lp: bytes) -> Node:
    els = _lp_parse(lp)
    try:
        live, deleted, nmaster = _as_int(els[0]), _as_int(els[1]), _as_int(els[2])
        fields = tuple(bytes(f) if type(f) is not int else b"%d" % f
                       for f in els[3:3 + nmaster])
        p = 3 + nmaster
        if _as_int(els[p]) != 0:
            raise RDBError("bad master entry terminator")
        p += 1
        node = Node(master, fields)
        mms, mseq = master >> 64, master & MASK64
        seen_live = seen_deleted = 0
        while p < len(els):
            flags = _as_int(els[p])
            eid = make_id((mms + _as_int(els[p + 1])) & MASK64,
                          (mseq + _as_int(els[p + 2])) & MASK64)
            p += 3
            if flags & 2:
                nf = nmaster
                vals = els[p:p + nf]
                p += nf
                flat = []
                for k in range(nf):
                    flat.append(fields[k])
                    flat.append(_el_bytes(vals[k]))
            else:
                nf = _as_int(els[p])
                p += 1
                flat = [_el_bytes(e) for e in els[p:p + 2 * nf]]
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
    node.nbytes = len(lp) - _int_elsize(live) - _int_elsize(deleted)
    ids = list(node.ids)
    if ids and ids != sorted(set(ids)):
        raise RDBError("stream listpack IDs out of order")
    return node


def _el_bytes(e) -> bytes:
    return b"%d" % e if type(e) is int else bytes(e)


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0):
    """Read a stream value of RDB type 15, 19 or 21 from buf at pos.
    Returns (stream, position after it); raises RDBError when malformed."""
    if rdb_type not in (RDB_TYPE_STREAM_LISTPACKS, RDB_TYPE_STREAM_LISTPACKS_2,
                        RDB_TYPE_STREAM_LISTPACKS_3):
        raise RDBError("not a stream RDB type")
    r = _Reader(buf, pos)
    s = Stream()
    for _ in range(r.num()):
        key = r.string()
        if len(key) != 16:
            raise RDBError("stream node key is not the size of a stream ID")
        master = int.from_bytes(key, "big")
        lp = r.string()
        node = _node_from_listpack(master, lp)
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
    if rdb_type >= RDB_TYPE_STREAM_LISTPACKS_2:
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
        if rdb_type >= RDB_TYPE_STREAM_LISTPACKS_2:
            er = r.num()
            entries_read = er - (1 << 64) if er >= 1 << 63 else er
        else:
            entries_read = s.estimate_distance(last)
        g = s.create_group(name, last, entries_read)
        if g is None:
            raise RDBError("duplicated consumer group name")
        for _ in range(r.num()):
            i = int.from_bytes(r.take(16), "big")
            t = r.mstime()
            if i in g.pel:
                raise RDBError("duplicated PEL entry")
            g.pel[i] = NACK(t, None, r.num())
        for _ in range(r.num()):
            cname = r.string()
            seen = r.mstime()
            c = g.create_consumer(cname, seen)
            if c is None:
                raise RDBError("duplicated consumer")
            c.active_time = r.mstime() if rdb_type >= RDB_TYPE_STREAM_LISTPACKS_3 else seen
            for _ in range(r.num()):
                i = int.from_bytes(r.take(16), "big")
                nack = g.pel.get(i)
                if nack is None or nack.consumer is not None:
                    raise RDBError("consumer PEL entry not in the group PEL")
                nack.consumer = c
                c.pel[i] = nack
        if any(n.consumer is None for n in g.pel.values()):
            raise RDBError("group PEL entry without a consumer")
    return s, r.pos


__all__ += ["rdb_save", "rdb_load", "RDBError", "RDB_TYPE_STREAM_LISTPACKS",
            "RDB_TYPE_STREAM_LISTPACKS_2", "RDB_TYPE_STREAM_LISTPACKS_3"]
