"""The list type: ``ListValue``, a deque of ``bytes`` elements.

Laid out as Valkey's t_list.c: the value class with its operations (the
"List API": the data operations the list commands need, on plain values,
no clients; the commands are hotkv/commands/lists.py), then what the type
table asks of every type (``OBJ_TYPE``, ``object_encoding``,
``digest_parts``, ``free_effort``, ``copy``: hotkv/types/table.py), then
its persistence:
* ``rewrite``: RPUSH batches of ``ITEMS_PER_CMD`` elements;
* ``rdb_save``: RDB type 18 (quicklist 2), listpack nodes split by
  ``list-max-listpack-size`` as a list grown by RPUSH would be, or one
  node when OBJECT ENCODING says listpack;
* ``rdb_load``: types 1 (plain), 10 (ziplist), 14 (quicklist of ziplists)
  and 18 (quicklist 2: listpack or plain nodes).

Operations (``ListValue`` methods): ``range`` (LRANGE), ``element``
(LINDEX), ``replace`` (LSET), ``insert_at_pivot`` (LINSERT), ``positions``
(LPOS), ``remove_matches`` (LREM), ``trim`` (LTRIM), ``pop_n`` (the pops'
counts); pushes and single pops are the deque's own (``append``,
``appendleft``, ``pop``, ``popleft``), which the hot commands call directly.
Indexes are Redis's: negative from the tail, walked from the nearer end.

Invariant: a list in the keyspace is never empty (the command that empties
it deletes the key); ``rdb_load`` refuses an empty one.  The operations
leave an emptied list empty: deleting its key is the caller's.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from .codec import (
    DEFAULT_LIMITS,
    ITEMS_PER_CMD,
    LP_MID_BACK,
    LP_MID_HEAD,
    T_LIST,
    T_LIST_QUICKLIST,
    T_LIST_QUICKLIST_2,
    T_LIST_ZIPLIST,
    RDBError,
    Reader,
    batches,
    listpack_elements,
    lp_entry,
    lp_from_entries,
    put_len,
    put_string,
    ziplist_elements,
)

RDB_TYPES = (T_LIST, T_LIST_ZIPLIST, T_LIST_QUICKLIST, T_LIST_QUICKLIST_2)

_QL_PLAIN, _QL_PACKED = 1, 2        # quicklist 2 node containers


LEFT, RIGHT = 0, 1                  # the end an operation works at (LEFT: the head)


# ----------------------------------------------------------------------
# List API
# ----------------------------------------------------------------------

class ListValue(deque):
    """A Redis list: O(1) pushes and pops at both ends."""
    __slots__ = ()

    def range(self, start: int, end: int) -> list:
        """Elements start..end (inclusive, negative from the end), walking
        from the nearer end of the deque (LRANGE)."""
        llen = len(self)
        if start < 0:
            start += llen
        if end < 0:
            end += llen
        if start < 0:
            start = 0
        if start > end or start >= llen:
            return []
        if end >= llen:
            end = llen - 1
        if start == 0 and end == llen - 1:
            return list(self)
        if start <= llen - 1 - end:
            return list(islice(self, start, end + 1))
        out = list(islice(reversed(self), llen - 1 - end, llen - start))
        out.reverse()
        return out

    def element(self, index: int):
        """The element at index (negative from the end), None when out of
        range (LINDEX); a deque walks from the nearer end."""
        n = len(self)
        if index < 0:
            index += n
        if index < 0 or index >= n:
            return None
        return self[index]

    def replace(self, index: int, value: bytes) -> bool:
        """Set the element at index (negative from the end) to value (LSET);
        False, changing nothing, when out of range."""
        n = len(self)
        if index < 0:
            index += n
        if index < 0 or index >= n:
            return False
        self[index] = value
        return True

    def insert_at_pivot(self, pivot: bytes, value: bytes, after: bool) -> int:
        """Insert value before (or after) the first element equal to pivot
        (LINSERT): the new length, or -1 when pivot is not there."""
        try:
            i = self.index(pivot)
        except ValueError:
            return -1
        self.insert(i + 1 if after else i, value)
        return len(self)

    def positions(self, value: bytes, rank: int, count: int, maxlen: int) -> list:
        """LPOS: the indexes of the matches of value, from the rank-th match
        on (a negative rank counts matches from the tail), at most count of
        them (0: all), looking at no more than maxlen elements (0: all)."""
        llen = len(self)
        if rank < 0:
            rank = -rank
            it = reversed(self)
            to_index = lambda k: llen - 1 - k  # noqa: E731
        else:
            it = iter(self)
            to_index = None
        if maxlen:
            it = islice(it, maxlen)
        matches = 0
        found = []
        for k, item in enumerate(it):
            if item == value:
                matches += 1
                if matches >= rank:
                    found.append(k if to_index is None else to_index(k))
                    if count and matches - rank + 1 >= count:
                        break
        return found

    def remove_matches(self, value: bytes, count: int) -> int:
        """LREM: remove the first count elements equal to value (from the
        tail when count < 0; every one when count is 0); how many went."""
        removed = 0
        if count == 1 or (count == -1 and len(self) == 1):
            # The acknowledge of a reliable queue: the first match, in C.
            try:
                self.remove(value)
                removed = 1
            except ValueError:
                pass
        elif count == -1 and self and self[-1] == value:
            self.pop()
            removed = 1
        else:
            limit = abs(count)
            if value in self:
                source = reversed(self) if count < 0 else self
                kept = []
                append = kept.append
                for item in source:
                    if item == value and (not limit or removed < limit):
                        removed += 1
                    else:
                        append(item)
                if count < 0:
                    kept.reverse()
                self.clear()
                self.extend(kept)
        return removed

    def trim(self, start: int, end: int) -> int:
        """LTRIM: keep elements start..end (inclusive, negative from the
        end), remove the rest; how many were removed."""
        llen = len(self)
        if start < 0:
            start += llen
        if end < 0:
            end += llen
        if start < 0:
            start = 0
        if start > end or start >= llen:
            ltrim_n, rtrim_n = llen, 0
        else:
            if end >= llen:
                end = llen - 1
            ltrim_n, rtrim_n = start, llen - end - 1
        keep = llen - ltrim_n - rtrim_n
        if keep < ltrim_n + rtrim_n:
            kept = list(islice(self, ltrim_n, ltrim_n + keep))
            self.clear()
            self.extend(kept)
        else:
            for _ in range(ltrim_n):
                self.popleft()
            for _ in range(rtrim_n):
                self.pop()
        return ltrim_n + rtrim_n

    def pop_n(self, where: int, n: int) -> list:
        """Pop n elements (n <= len) from the head (LEFT) or the tail, in
        the order popped."""
        if n == 1:
            return [self.popleft() if where == LEFT else self.pop()]
        pop = self.popleft if where == LEFT else self.pop
        return [pop() for _ in range(n)]


# ----------------------------------------------------------------------
# What the type table asks of a type (hotkv/types/table.py)
# ----------------------------------------------------------------------

OBJ_TYPE = 1            # OBJ_LIST


def object_encoding(value: ListValue, key: bytes, expires: bool, settings) -> bytes:
    """listpack while the list fits one node of list-max-listpack-size (a
    count when positive, a byte size when negative), else quicklist."""
    limit = settings.get("list-max-listpack-size", -2)
    if limit >= 0:
        return b"listpack" if len(value) <= limit else b"quicklist"
    max_bytes = 4096 << min(-limit - 1, 4)
    if len(value) * 2 > max_bytes:
        return b"quicklist"
    size = 6
    for e in value:
        size += len(e) + 2
        if size > max_bytes:
            return b"quicklist"
    return b"listpack"


DIGEST = "ordered"


def digest_parts(value: ListValue):
    """The elements, head to tail."""
    return value


_FEW = 64     # hotkv.core.lazyfree's threshold; a node holds at least one element


def free_effort(value: ListValue, settings) -> int:
    """Valkey's lazyfreeGetFreeEffort of a list: its quicklist nodes,
    estimated from the first elements (hotkv's list is one deque).  A list
    of at most ``_FEW`` elements has at most that many nodes, below lazy
    freeing's threshold: 1, without sampling."""
    n = len(value)
    if n <= _FEW:
        return 1
    fill = settings.get("list-max-listpack-size", -2)
    if fill >= 0:
        return -(-n // max(fill, 1))
    limit = 4096 << min(-fill - 1, 4)
    sample = list(islice(value, 256))
    avg = sum(len(e) for e in sample) / len(sample) + 2
    return max(1, int(n * avg // limit) + 1)


def copy(value: ListValue) -> ListValue:
    """Elements are immutable bytes: a new deque is a deep copy."""
    return ListValue(value)


# ----------------------------------------------------------------------
# Persistence
# ----------------------------------------------------------------------

def rewrite(key: bytes, value: ListValue):
    return batches(b"RPUSH", key, value, ITEMS_PER_CMD)


def quicklist_nodes(lst, fill: int):
    """Split a list into quicklist nodes the way Valkey 8.1's quicklist grown
    at the tail (RPUSH) would be: an element longer than a negative fill's
    byte limit (8 kB for a positive fill) is a plain node of its own; otherwise an element joins the
    tail listpack unless its bytes, plus the raw element length plus 8 (the
    quicklist's deliberate overestimate), pass the byte limit -- or, for a
    positive fill, the entry count passes fill or the bytes 8 kB.  Returns
    [(container, blob)]."""
    if fill < 0:
        max_bytes = 4096 << min(-fill - 1, 4)
        max_count = 1 << 62
        large = max_bytes
    else:
        max_bytes = large = 8192
        max_count = max(fill, 1)
    nodes = []
    cur, size = [], 7
    append = cur.append
    head, back = LP_MID_HEAD, LP_MID_BACK
    for e in lst:
        n = len(e)
        if n > large:
            if cur:
                nodes.append((_QL_PACKED, lp_from_entries(cur, len(cur))))
                cur, size = [], 7
                append = cur.append
            nodes.append((_QL_PLAIN, e))
            continue
        if cur and (len(cur) + 1 > max_count or size + n + 8 > max_bytes):
            nodes.append((_QL_PACKED, lp_from_entries(cur, len(cur))))
            cur, size = [], 7
            append = cur.append
        if 64 <= n < 4096:
            # A queue's typical payload: lp_entry's encoding, inlined (a
            # string this long is never an integer).
            append(head[n] + e + back[n])
            size += n + (3 if n < 126 else 4)
        else:
            ent = lp_entry(e)
            append(ent)
            size += len(ent)
    if cur:
        nodes.append((_QL_PACKED, lp_from_entries(cur, len(cur))))
    return nodes


def rdb_save(value: ListValue, encoding: bytes = b"", limits=DEFAULT_LIMITS):
    out = bytearray()
    if encoding == b"listpack":
        nodes = [(_QL_PACKED, lp_from_entries([lp_entry(e) for e in value], len(value)))]
    else:
        nodes = quicklist_nodes(value, limits.list_fill)
    put_len(len(nodes), out)
    for container, blob in nodes:
        put_len(container, out)
        put_string(blob, out)     # as rdbSaveRawString: LZF in files, when it pays
    return T_LIST_QUICKLIST_2, bytes(out)


def rdb_load(rdb_type: int, buf: bytes, pos: int = 0, limits=DEFAULT_LIMITS):
    r = Reader(buf, pos)
    if rdb_type == T_LIST:
        n = r.num()
        lst = ListValue(bytes(r.string()) for _ in range(n))
    elif rdb_type == T_LIST_ZIPLIST:
        lst = ListValue(ziplist_elements(bytes(r.string())))
    else:
        lst = ListValue()
        for _ in range(r.num()):
            container = _QL_PACKED
            if rdb_type == T_LIST_QUICKLIST_2:
                container = r.num()
                if container not in (_QL_PACKED, _QL_PLAIN):
                    raise RDBError("bad quicklist container")
            blob = bytes(r.string())
            if not blob:
                raise RDBError("empty quicklist node")
            if container == _QL_PLAIN:
                lst.append(blob)
            elif rdb_type == T_LIST_QUICKLIST_2:
                lst.extend(listpack_elements(blob))
            else:
                lst.extend(ziplist_elements(blob))
    if not lst:
        raise RDBError("empty list")
    return lst, r.pos
