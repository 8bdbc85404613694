"""The data types: one module per Redis type, values and algorithms only.

Each module owns one type's value class (a string is plain ``bytes``), the
operations on it (the commands call them with plain values), what the type
table asks of every type (its object type code, OBJECT ENCODING, digest,
free effort and deep copy) and its persistence: ``rewrite`` (the AOF
rewrite's commands that rebuild a value), ``rdb_save`` / ``rdb_load`` (its
DUMP/RDB payload, Valkey's layout).  None knows of clients, sockets, commands,
replies or asyncio; command modules (hotkv/commands/) import from here,
never the reverse.

* ``table`` -- the static type table (name, class, and each type's functions:
  encoding, digest, free effort, copy, persistence, RDB type codes) that
  TYPE, SCAN TYPE, OBJECT ENCODING (``encodings``), COPY (``copying``),
  DEBUG DIGEST, lazy freeing, hotkv/persistence/aof/ and
  hotkv/persistence/rdb.py read;
* ``codec`` -- byte formats the types share (RDB lengths/strings, listpacks,
  ziplist/zipmap/intset readers, the rewrite's batching);
* ``strings``, ``lists``, ``hashes``, ``sets``, ``zsets``;
* the stream in three: ``stream_ids`` (the 128-bit ID as one int),
  ``stream`` (entries in nodes, trimming, ranges), ``stream_groups``
  (consumer groups, consumers, PELs), ``stream_persist`` (its rewrite and
  RDB layout).

Adding a type: its module here, a row in ``table``, its command module;
nothing else switches on value classes (tests/test_type_table.py).
This package imports nothing at import time (its modules import each
other explicitly).
"""
