"""The list type: ``ListValue``, a deque of ``bytes`` elements.

Owns the value class (O(1) pushes and pops at both ends; the list commands
are in hotkv/commands/lists.py) and its persistence:
* ``rewrite``: RPUSH batches of ``ITEMS_PER_CMD`` elements;
* ``rdb_save``: RDB type 18 (quicklist 2), listpack nodes split by
  ``list-max-listpack-size`` as a list grown by RPUSH would be, or one
  node when OBJECT ENCODING says listpack;
* ``rdb_load``: types 1 (plain), 10 (ziplist), 14 (quicklist of ziplists)
  and 18 (quicklist 2: listpack or plain nodes).

Invariant: a list in the keyspace is never empty (the command that empties
it deletes the key); ``rdb_load`` refuses an empty one.
"""

from __future__ import annotations

from collections import deque

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


class ListValue(deque):
    """A Redis list: O(1) pushes and pops at both ends."""
    __slots__ = ()


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
