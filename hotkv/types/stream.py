"""The stream data type: entries in nodes, ranges, trimming.

Owns ``Stream`` and its entry storage (``Node``, ``IdArray``); its consumer
groups are hotkv/types/stream_groups.py, its IDs stream_ids.py, its AOF
rewrite and RDB layout stream_persist.py; what the type table asks of the
stream (encoding, digest, free effort, copy) closes this module.  No
sockets, no commands, no replies (the hotkv/commands/streams package does
those).

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

Consumer groups live in ``groups`` (name -> ``Group``, created on
demand); the Stream moves their read counters (``advance_group*``,
``group_lag``) because those depend on its tombstones.

Invariants:
* ``node_keys[i] == nodes[i].master``; IDs strictly increase across nodes;
* ``length`` == number of non-tombstone entries == sum of ``Node.live``;
* ``last_id`` >= every ID ever added (it never decreases, except XSETID);
* ``Node.nbytes`` is the node's listpack size as Valkey would encode it,
  less its live/deleted counters (whose size varies).

Fast paths (each with its general twin and the test proving them equal):
* ``range_entries`` / ``revrange_entries`` vs ``range`` / ``revrange`` (and a
  sorted model): tests/test_fastpaths.py::test_range_entries_equal_range_and_model,
  ::test_range_entries_reads_past_nodes_that_yield_nothing;
* ``append_one`` (and its queue shape) vs append()'s general sizing:
  tests/test_fastpaths.py::test_append_one_equals_general_sizing, with the
  split points against Valkey's DUMP in tests/test_streams_fastpaths.py;
* ``advance_group_through`` vs the per-entry
  delivery an AOF server takes: tests/test_fastpaths_server.py::
  test_xreadgroup_fast_general_aof_and_valkey_agree.
"""


from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

from .codec import INTISH as _INTISH, lp_int_size as _int_elsize, lp_str_size as _str_elsize
from .stream_groups import NACK, Consumer, Group
from .stream_ids import INVALID_ENTRIES_READ, MASK64, MAX_ID

LISTPACK_MAX_SIZE = 1 << 30


# ----------------------------------------------------------------------
# Listpack sizes (only to split nodes where Valkey would)
# ----------------------------------------------------------------------

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

    def delete_ids(self, ids) -> int:
        """XDEL: delete the entries with these IDs, keeping ``first_id`` and
        ``max_deleted_id`` as Valkey's streamDeleteItem callers do; how many
        were there."""
        deleted = 0
        first_entry = False
        for i in ids:
            if self.delete(i):
                if i == self.first_id:
                    first_entry = True
                if i > self.max_deleted_id:
                    self.max_deleted_id = i
                deleted += 1
        if deleted:
            if self.length == 0:
                self.first_id = 0
            elif first_entry:
                self.first_id = self.first_valid_id()
        return deleted

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

    def pending_history(self, consumer, start: int, count: int, now: int) -> list:
        """A consumer's own pending entries with IDs >= start, at most count
        (0: all), as (id, fields or None when the entry was deleted) pairs:
        XREADGROUP with an ID.  Each one still in the stream is delivered
        again (its delivery time now, its count one more)."""
        out = []
        cpel = consumer.pel
        for eid in cpel.irange(minimum=start):
            if count and len(out) >= count:
                break
            items = self.get(eid)
            if items is not None:
                nack = cpel[eid]
                nack.delivery_time = now
                nack.delivery_count += 1
            out.append((eid, items))
        return out

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


# ----------------------------------------------------------------------
# What the type table asks of a type (hotkv/types/table.py; the stream's
# persistence is stream_persist.py)
# ----------------------------------------------------------------------

OBJ_TYPE = 6            # OBJ_STREAM


def object_encoding(value: Stream, key: bytes, expires: bool, settings) -> bytes:
    return b"stream"


DIGEST = "ordered"


def digest_parts(value: Stream):
    """Per live entry in ID order, "ms.seq" then each field and value;
    consumer groups, PELs, consumers and the stream's counters are not part
    of Valkey's digest."""
    for node in value.nodes:
        ids = node.ids
        ms, seq = ids.ms, ids.seq
        for j, item in enumerate(node.items):
            if item is None:
                continue
            if type(item) is bytes:
                item = (node.fields[0], item)
            yield b"%d.%d" % (ms[j], seq[j])
            yield from item


def free_effort(value: Stream, settings) -> int:
    """Valkey's lazyfreeGetFreeEffort of a stream: its rax nodes (at least
    one per listpack), plus, per group, one and its first group's PEL size."""
    effort = len(value.nodes) + 1
    groups = value.groups
    if groups:
        first = next(iter(groups.values()))
        effort += len(groups) * (1 + len(first.pel))
    return effort


def copy(value: Stream) -> Stream:
    return value.copy()
