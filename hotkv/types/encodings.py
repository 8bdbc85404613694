"""Encodings: what OBJECT ENCODING reports, and what DUMP and the RDB write.

Owns ``object_encoding``: the encoding Valkey 8.1 would give a value of the
same contents, which each type's module computes (its row in
hotkv/types/table.py: strings int/embstr/raw by value and key length;
containers by the *-max-listpack-* limits or the encoding they keep).
OBJECT ENCODING, DEBUG OBJECT, DUMP and the RDB writer
(hotkv/persistence/rdbfile.py) all read it, so it sits below commands/.

Invariants: derived from the contents and the current settings alone --
Valkey's encodings also depend on history (a quicklist shrinks back to a
listpack only at half the limit; a hash never converts back), which hotkv
does not track (compat/volume.py counts the list case).  ``c`` is anything
with ``.db`` and ``.server`` (a client, or the RDB writer's context).
"""

from __future__ import annotations

from .table import BY_CLASS


def cfg(c, name, default):
    v = c.server.config.values.get(name)
    return default if v is None else v


def object_encoding(c, key, value) -> bytes:
    """The encoding Redis/Valkey would report for value (OBJECT ENCODING)."""
    t = BY_CLASS.get(type(value))
    if t is None:
        return b"raw"
    return t.encoding(value, key, key in c.db.expires, c.server.config.values)
