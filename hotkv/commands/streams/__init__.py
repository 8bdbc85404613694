"""The stream commands (Valkey's t_stream.c, its command half), by concern.

Importing this package registers them, in this order -- COMMAND's order
and the ACL bits (hotkv/commands/__init__.py):

* ``entries`` -- XADD, XTRIM, XLEN, XRANGE, XREVRANGE, XDEL, XSETID, XREAD;
* ``groups`` -- XREADGROUP, XGROUP and its subcommands, XACK, XPENDING,
  XCLAIM, XAUTOCLAIM;
* ``info`` -- XINFO and its subcommands.

and three modules that register nothing, which the others share:

* ``args`` -- error texts, ID and integer parsing, replies several commands
  build (entries, help, NOGROUP);
* ``changes`` -- the stream at a key, and how a change is announced (who
  it wakes);
* ``read`` -- the XREAD / XREADGROUP engine: parsing, delivery to a group's
  consumers, blocking, and the AOF forms of PEL changes.

The data operations are the type's (hotkv/types/stream.py,
stream_groups.py, stream_ids.py); the modules here parse, reply, announce
and choose what is logged.  What one module uses of another is public (no
underscore); dependencies point one way: entries and groups -> read ->
changes, args (info uses only the last two).
"""

from . import entries, groups, info  # noqa: F401  (registration order: see above)
