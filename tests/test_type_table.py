"""The type table (hotkv/types/table.py) is the one place that knows the types.

OBJECT ENCODING (hotkv.types.encodings), DEBUG DIGEST (hotkv.core.digest),
lazy freeing (hotkv.core.lazyfree) and COPY (hotkv.types.copying) ask a
value's row, so adding a type is its module and one row: these tests read
those four modules with ``ast`` and fail when one names a value class or
imports a type module, and check that every row carries what they ask.
The values they compute are the ones valkey-server 8.1.8 gives:
tests/test_debug_digest.py (digests), tests/test_small_encoding_order.py
and tests/test_dump.py (encodings), tests/test_keyspace.py (COPY, lazy
freeing counters).
"""

from __future__ import annotations

import ast
import pathlib

from hotkv.types import table
from hotkv.types.copying import copy_value
from hotkv.types.hashes import HashValue
from hotkv.types.lists import ListValue
from hotkv.types.sets import build
from hotkv.types.stream import Stream
from hotkv.types.zsets import ZSetValue

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hotkv"
ASKERS = ["types/encodings.py", "types/copying.py", "core/digest.py", "core/lazyfree.py"]
VALUE_CLASSES = {"ListValue", "HashValue", "SetValue", "ZSetValue", "Stream", "bytearray"}
TYPE_MODULES = {"strings", "lists", "hashes", "sets", "zsets", "stream", "stream_groups",
                "stream_ids", "stream_persist"}


def test_the_askers_name_no_value_class():
    for rel in ASKERS:
        tree = ast.parse((ROOT / rel).read_text(), rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                last = node.module.rpartition(".")[2]
                assert last not in TYPE_MODULES, f"{rel}:{node.lineno} imports {node.module}"
            if isinstance(node, ast.Name):
                assert node.id not in VALUE_CLASSES, f"{rel}:{node.lineno} names {node.id}"


def test_every_row_carries_what_is_asked():
    codes = {b"string": 0, b"list": 1, b"set": 2, b"zset": 3, b"hash": 4, b"stream": 6}
    for row in table.TYPES:
        assert row.obj_type == codes[row.name]
        assert row.digest in table.DIGEST_KINDS
        for fn in (row.encoding, row.digest_parts, row.free_effort, row.copy, row.rewrite,
                   row.rdb_save, row.rdb_load):
            assert callable(fn), (row.name, fn)


def _samples():
    z = ZSetValue()
    z.d[b"m"] = 1.0
    z.sl.add((1.0, b"m"))
    s = Stream()
    s.append(1 << 64, [b"f", b"v"], 0, 4096, 100)
    return [b"str", bytearray(b"raw"), ListValue([b"a", b"b"]), HashValue({b"f": b"v"}),
            build([b"x", b"y"]), z, s]


def test_copies_share_no_mutable_state():
    for value in _samples():
        c = copy_value(value)
        assert type(c) is type(value)
        if type(value) is bytes:
            assert c is value          # immutable: shared
            continue
        assert c is not value
        if isinstance(value, bytearray):
            c[0:1] = b"R"
            assert value == bytearray(b"raw")
        elif isinstance(value, ListValue):
            c.append(b"c")
            assert len(value) == 2
        elif isinstance(value, HashValue):
            c[b"g"] = b"w"
            assert b"g" not in value
        elif isinstance(value, ZSetValue):
            c.d[b"n"] = 2.0
            assert b"n" not in value.d
        elif isinstance(value, Stream):
            c.append(2 << 64, [b"f", b"v"], 0, 4096, 100)
            assert value.length == 1
        else:
            c.add(b"z")
            assert b"z" not in value
