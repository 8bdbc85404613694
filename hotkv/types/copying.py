"""The deep copy of a stored value: COPY's, and the test snapshots'.

Owns ``copy_value``, which asks the value's row in the type table
(hotkv/types/table.py) for its type's ``copy``.  Invariant: the copy shares
no mutable state with the original (a change to one is never seen in the
other); immutable parts (``bytes`` strings, a container's bytes members)
are shared, which is what makes a copy cheap.  Lives with the types, not
with COPY, because the core (hotkv.testing's snapshots) copies values too
and must not import a command module.
"""

from __future__ import annotations

from ..protocol.errors import CommandError
from .table import BY_CLASS


def copy_value(value):
    """A deep copy of a stored value (strings are immutable and shared)."""
    t = BY_CLASS.get(type(value))
    if t is None:
        raise CommandError("ERR unknown type object")
    return t.copy(value)
