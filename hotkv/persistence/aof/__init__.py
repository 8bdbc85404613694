"""The append-only file: nothing acknowledged is lost.

``AOF`` (``server.aof_manager``, always there) owns the multi-part AOF of
Valkey 7+ in ``<dir>/<appenddirname>/`` (``appendonlydir``): the manifest
``<appendfilename>.manifest`` (``manifest``), one base file
``<appendfilename>.<seq>.base.rdb`` (an RDB preamble, with
``aof-use-rdb-preamble yes``, the default as Valkey's) or ``.base.aof``
(commands), and incr files ``<appendfilename>.<seq>.incr.aof`` holding the
writes since, the last of them being appended to.  It also owns the buffer
of records not yet written, the everysec fsync thread, the background
rewrite, loading at start-up (an old single-file ``<dir>/<appendfilename>``
is first moved into the directory as Valkey's upgrade does), and the
disk-error state.  ``server.aof`` -- what the dispatcher propagates to -- is
the same object while the AOF is on (or is being turned on and its rewrite
runs), and None otherwise, so a server without AOF pays nothing for
propagation.

Format of the files: the base is an RDB file (hotkv/persistence/rdbfile.py's format,
aux ``aof-base`` 1) or commands; an incr file (and a base in command form)
is a plain sequence of RESP multibulk commands, ``SELECT`` whenever the
database changes (and first in every new incr file), a multi-command unit
(a MULTI/EXEC that wrote more than one command, a command plus the
lazy-expiry DELs it caused) wrapped in ``MULTI`` ... ``EXEC`` -- exactly
what ``valkey-check-aof`` reads; the directory loads in valkey-server 8.1.8
as it is, and Valkey's in hotkv; the command form also replays through
``valkey-cli --pipe``.

Layout (one object, three concerns, as Valkey's aof.c is feed/flush,
loadAppendOnlyFile and rewriteAppendOnlyFileBackground):
* ``files``: the record encoding, the file primitives and the AOF's states,
  which the other three share;
* ``manifest``: the manifest's format, parsing and atomic replacement;
* ``writer``: ``AOF`` itself -- feeding, writing, fsync policies, disk
  errors, start/stop, cron, INFO;
* ``rewrite``: the forked child's snapshot (each type's ``rewrite`` through
  hotkv/types/table.py) and the parent's side of a rewrite (``RewriteMixin``);
* ``loader``: the upgrade of an old single file, then replaying the base and
  the incr files at start-up (``LoadMixin``, ``_Loader``).
``AOF`` inherits the rewrite and load mixins: their methods use its state
and its writer's helpers, and ``AOF`` is the only class that mixes them in.
"""

from __future__ import annotations

from .files import encode_command
from .loader import AOFLoadError
from .rewrite import rewrite_value, write_snapshot
from .writer import AOF

__all__ = ["AOF", "AOFLoadError", "encode_command", "write_snapshot", "rewrite_value"]
