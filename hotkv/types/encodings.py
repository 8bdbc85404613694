"""Encodings: what OBJECT ENCODING reports, and what DUMP and the RDB write.

Owns ``object_encoding``: the encoding Valkey 8.1 would give a value of the
same contents (string int/embstr/raw by value and key length; containers by
the *-max-listpack-* limits; a type may report its own through an
``encoding`` attribute).  OBJECT ENCODING, DEBUG OBJECT, DUMP and the RDB
writer (hotkv/persistence/rdbfile.py) all read it, so it sits below commands/.

Invariants: derived from the contents and the current settings alone --
Valkey's encodings also depend on history (a quicklist shrinks back to a
listpack only at half the limit; a hash never converts back), which hotkv
does not track (compat/volume.py counts the list case).  ``c`` is anything
with ``.db`` and ``.server`` (a client, or the RDB writer's context).
"""

from __future__ import annotations

from ..protocol.util import string2ll
from .hashes import HashValue
from .lists import ListValue
from .sets import SetValue
from .table import TYPE_NAMES

# Valkey 8.1 embeds the key (and the expiry, when set) in the string's
# allocation: a value is "embstr" while key + value (+ 8 with a TTL) fit.
_EMBSTR_BUDGET = 41


def cfg(c, name, default):
    v = c.server.config.values.get(name)
    return default if v is None else v


def object_encoding(c, key, value) -> bytes:
    """The encoding Redis/Valkey would report for value (OBJECT ENCODING).
    A type may report its own through an ``encoding`` attribute or method."""
    t = type(value)
    if t is bytes:
        if len(value) <= 20 and string2ll(value) is not None:
            return b"int"
        budget = _EMBSTR_BUDGET - (8 if key in c.db.expires else 0)
        return b"embstr" if len(key) + len(value) <= budget else b"raw"
    if t is bytearray:      # changed in place (APPEND, SETRANGE, SETBIT...)
        return b"raw"
    enc = getattr(value, "encoding", None)
    if enc is not None:
        enc = enc() if callable(enc) else enc
        return enc.encode() if isinstance(enc, str) else enc
    if t is ListValue:
        limit = cfg(c, "list-max-listpack-size", -2)
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
    if t is HashValue:
        if len(value) > cfg(c, "hash-max-listpack-entries", 128):
            return b"hashtable"
        vmax = cfg(c, "hash-max-listpack-value", 64)
        for f, v in value.items():
            if len(f) > vmax or (type(v) is bytes and len(v) > vmax):
                return b"hashtable"
        return b"listpack"
    if t is SetValue:
        n = len(value)
        if n <= cfg(c, "set-max-intset-entries", 512) and all(
                string2ll(e) is not None for e in value):
            return b"intset"
        if n <= cfg(c, "set-max-listpack-entries", 128):
            vmax = cfg(c, "set-max-listpack-value", 64)
            if all(len(e) <= vmax for e in value):
                return b"listpack"
        return b"hashtable"
    name = TYPE_NAMES.get(t)
    if name == b"zset":
        try:
            n = len(value)
            if n <= cfg(c, "zset-max-listpack-entries", 128):
                members = value.keys() if hasattr(value, "keys") else value
                vmax = cfg(c, "zset-max-listpack-value", 64)
                if all(len(m) <= vmax for m in members):
                    return b"listpack"
        except TypeError:
            pass
        return b"skiplist"
    if name == b"stream":
        return b"stream"
    return b"raw"
