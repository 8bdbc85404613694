"""The stream data type: entries, consumer groups, pending entries lists.

Owns ``Stream`` and its parts (``Node``, ``Group``, ``Consumer``, ``NACK``);
no sockets, no commands, no replies (hotkv/commands/streams.py does those).

Layout.  An entry ID is one int, ``ms << 64 | seq``.  Entries live in
``Node``s, each mirroring one listpack of Redis's radix tree: a master ID
(the key of the node), the master field names, and parallel lists of IDs
and flat ``(field, value, field, value...)`` tuples.  An entry whose field
names equal the master's shares the master's field objects, so a queue's
repeated field names cost one pointer each.  A deleted entry inside a
node is a tombstone (``None``) until the whole node goes, exactly as in
Redis -- which is what makes ``MAXLEN ~`` / ``MINID ~`` trim to the same
length as Valkey: nodes are split where Valkey splits them
(stream-node-max-entries, and stream-node-max-bytes measured with the
listpack encoding sizes Valkey would use), and approximate trimming only
drops whole nodes.

Complexity.  Nodes are found by bisecting ``node_keys`` (their master
IDs), entries by bisecting a node's ``ids``: a range read or trim is
O(log n + k) plus at most one node's worth of tombstones.

Consumer groups.  ``Group.pel`` and ``Consumer.pel`` are SortedDicts from
ID to the *same* ``NACK`` object (delivery time, delivery count, owner), so
ownership changes move one reference between consumers.

Invariants:
* ``node_keys[i] == nodes[i].master``; IDs strictly increase across nodes;
* ``length`` == number of non-tombstone entries == sum of ``Node.live``;
* ``last_id`` >= every ID ever added (it never decreases, except XSETID);
* every NACK in ``group.pel`` is in exactly its owner's ``consumer.pel``;
  delivery counts never go negative.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from sortedcontainers import SortedDict

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


# ----------------------------------------------------------------------
# Structures
# ----------------------------------------------------------------------

class Node:
    """One listpack's worth of entries."""
    __slots__ = ("master", "fields", "ids", "items", "live", "deleted", "nbytes")

    def __init__(self, master: int, fields: tuple):
        self.master = master
        self.fields = fields
        self.ids: list = []
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
        n.ids = self.ids[:]
        n.items = self.items[:]
        n.live = self.live
        n.deleted = self.deleted
        n.nbytes = self.nbytes
        return n


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
        self.pel = SortedDict()


class Group:
    __slots__ = ("name", "last_id", "entries_read", "pel", "consumers")

    def __init__(self, name: bytes, last_id: int, entries_read: int):
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel = SortedDict()
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
        fv = args[start:]
        names = fv[0::2]
        values = fv[1::2]
        numfields = len(names)
        nodes = self.nodes
        node = nodes[-1] if nodes else None
        if node is not None:
            if node_max_bytes == 0 or node_max_bytes > LISTPACK_MAX_SIZE:
                node_max_bytes = LISTPACK_MAX_SIZE
            if node.lp_bytes() + sum(map(len, fv)) >= node_max_bytes:
                node = None
            elif node_max_entries and node.live + node.deleted >= node_max_entries:
                node = None
        if node is None:
            node = Node(eid, tuple(names))
            nodes.append(node)
            self.node_keys.append(eid)
            same = True
            items = tuple(fv)
        else:
            fields = node.fields
            same = len(fields) == numfields and fields == tuple(names)
            if same:
                if numfields == 1:
                    items = (fields[0], values[0])
                else:
                    fv[0::2] = fields     # share the master's field objects
                    items = tuple(fv)
            else:
                items = tuple(fv)
        master = node.master
        dm = (eid >> 64) - (master >> 64)
        if dm >= 1 << 63:
            dm -= 1 << 64
        ds = (eid & MASK64) - (master & MASK64)
        if ds >= 1 << 63:
            ds -= 1 << 64
        elif ds < -(1 << 63):
            ds += 1 << 64
        # flags, ms delta, seq delta, values, lp-count [, num-fields, names]
        nb = 2 + (2 if 0 <= dm <= 127 else _int_elsize(dm)) + \
            (2 if 0 <= ds <= 127 else _int_elsize(ds))
        for v in values:
            nb += _str_elsize(v)
        if same:
            nb += _int_elsize(numfields + 3)
        else:
            nb += _int_elsize(numfields) + _int_elsize(2 * numfields + 4)
            for f in names:
                nb += _str_elsize(f)
        node.nbytes += nb
        node.ids.append(eid)
        node.items.append(items)
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
            j = bisect_left(ids, start) if first else 0
            first = False
            n = len(ids)
            while j < n:
                eid = ids[j]
                if eid > end:
                    return out
                it = items[j]
                if it is not None:
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
            j = (bisect_right(ids, end) if first else len(ids)) - 1
            first = False
            while j >= 0:
                eid = ids[j]
                if eid < start:
                    return out
                it = items[j]
                if it is not None:
                    out.append((eid, it))
                    if count and len(out) >= count:
                        return out
                j -= 1
            ni -= 1
        return out

    def _find(self, eid: int):
        """(node index, position) of a live entry, or None."""
        ni = bisect_right(self.node_keys, eid) - 1
        if ni < 0:
            return None
        node = self.nodes[ni]
        j = bisect_left(node.ids, eid)
        if j < len(node.ids) and node.ids[j] == eid and node.items[j] is not None:
            return ni, j
        return None

    def get(self, eid: int):
        """The items tuple of a live entry, or None."""
        pos = self._find(eid)
        if pos is None:
            return None
        return self.nodes[pos[0]].items[pos[1]]

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
            total += 120 + 8 * len(node.ids) * 2 + node.lp_bytes()
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
    CREATECONSUMER when it has none."""
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

__all__ = ["Stream", "Group", "Consumer", "NACK", "Node", "MAX_ID", "MASK64",
           "INVALID_ENTRIES_READ", "make_id", "id_bytes", "rewrite_commands"]
