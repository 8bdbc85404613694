"""The append-only file: nothing acknowledged is lost.

``AOF`` (``server.aof_manager``, always there) owns the file
``<dir>/<appendfilename>``, the buffer of records not yet written, the
everysec fsync thread, the background rewrite, loading at start-up, and the
disk-error state.  ``server.aof`` -- what the dispatcher propagates to -- is
the same object while the AOF is on or a rewrite runs, and None otherwise,
so a server without AOF pays nothing for propagation.

Format: after a rewrite with ``aof-use-rdb-preamble yes`` (the default, as
Valkey's) the file starts with an RDB preamble (hotkv/rdbfile.py's format,
aux ``aof-base`` 1) and the commands follow it; otherwise, and after the
preamble, a plain sequence of RESP multibulk commands, ``SELECT`` whenever the
database changes, a multi-command unit (a MULTI/EXEC that wrote more than
one command, a command plus the lazy-expiry DELs it caused) wrapped in
``MULTI`` ... ``EXEC`` -- exactly what ``valkey-check-aof`` reads and valkey-server 8.1.8 loads as
an old-style AOF (either form); the command form also replays through
``valkey-cli --pipe``.

Layout (one object, three concerns, as Valkey's aof.c is feed/flush,
loadAppendOnlyFile and rewriteAppendOnlyFileBackground):
* ``files``: the record encoding, the file primitives and the AOF's states,
  which the other three share;
* ``writer``: ``AOF`` itself -- feeding, writing, fsync policies, disk
  errors, start/stop, cron, INFO;
* ``rewrite``: the forked child's snapshot (each type's ``rewrite`` through
  hotkv/types/table.py) and the parent's side of a rewrite (``RewriteMixin``);
* ``loader``: replaying the file at start-up (``LoadMixin``, ``_Loader``).
``AOF`` inherits the rewrite and load mixins: their methods use its state
and its writer's helpers, and ``AOF`` is the only class that mixes them in.
"""

from __future__ import annotations

from .files import encode_command
from .loader import AOFLoadError
from .rewrite import rewrite_value, write_snapshot
from .writer import AOF

__all__ = ["AOF", "AOFLoadError", "encode_command", "write_snapshot", "rewrite_value"]
