"""The deep copy of a stored value: COPY's, and the test snapshots'.

Owns ``copy_value``.  Invariant: the copy shares no mutable state with the
original (a change to one is never seen in the other); immutable parts
(``bytes`` strings, a container's bytes members) are shared, which is what
makes a copy cheap.  Lives with the types, not with COPY, because the core
(hotkv.testing's snapshots) copies values too and must not import a
command module.
"""

from __future__ import annotations

from collections import deque

from ..protocol.errors import CommandError
from .hashes import HashValue
from .lists import ListValue
from .sets import SetValue

_BUILTIN_MODULES = ("builtins", "collections")


def copy_value(value):
    """A deep copy of a stored value.  Strings are immutable and shared; the
    built-in containers hold only immutable bytes, so a new container of the
    same class is a deep copy; a type registered by another module supplies
    its own ``copy()`` (which must copy deeply)."""
    t = type(value)
    if t is bytes:
        return value
    if t is bytearray:      # a string changed in place: the copy is the new key's own
        return bytearray(value)
    if t is ListValue or t is HashValue or t is SetValue:
        return t(value)
    for klass in t.__mro__:
        if klass.__module__ in _BUILTIN_MODULES:
            break
        if "copy" in vars(klass):
            return value.copy()
    if isinstance(value, (dict, set, list, deque)):
        return t(value)
    raise CommandError("ERR unknown type object")
