"""Replication state shared by both ends: hotkv as a primary and as a replica.

``ReplState`` (``server.repl``, made by the server with its other
subsystems) is the one place the replication ids, the offset, the backlog
and the attached replicas live; ROLE and INFO replication read it, the
primary side (``hotkv.replication.primary``) and the replica side
(``hotkv.replication.replica``) change it.

Fields (Valkey's names where it has them):

* ``role`` -- ``"master"`` or ``"slave"``; the replica side sets
  ``"slave"`` while hotkv follows a primary and back on REPLICAOF NO ONE;
* ``replid`` / ``replid2`` -- the current replication id (40 hex chars) and
  the previous one (``"0" * 40`` when none), ``second_replid_offset`` the
  offset up to which ``replid2`` is still valid for a PSYNC (-1: none);
* ``master_repl_offset`` -- bytes of replication stream produced so far
  (the primary's ``master_repl_offset``); while the AOF is on and no
  backlog exists, one per command that would be streamed (``CountedAOF``,
  Valkey's count without a backlog);
* ``backlog`` -- a ``hotkv.replication.backlog.Backlog`` or None (created
  with the first replica, as Valkey does, and kept afterwards); on a
  replica, the primary's stream as applied, made at each full sync (the
  replica side appends to it and passes it on to sub-replicas);
* ``replicas`` -- the ``primary.ReplicaLink`` of every replica connection,
  in attach order (INFO's ``slaveN`` numbering).

How ROLE and INFO read it: when ``role == "slave"`` they call the replica
side's ``role_reply(server)`` / ``info_fields(server)``
(``hotkv.replication.replica``) and otherwise build the master form from
these fields (``hotkv.commands.replication``).

Invariants: ``master_repl_offset`` only grows while ``replid`` stays; the
backlog, when present, ends at ``master_repl_offset`` once the primary's
per-turn buffer is flushed; ``server.aof`` (the
propagation sink) includes the primary feed exactly while ``backlog`` is
not None and ``role`` is ``"master"``, so a server that never had a
replica propagates nothing more than before, and a replica adds nothing of
its own to the stream it passes on (chained replication).
"""

from __future__ import annotations

import os

NULL_REPLID = "0" * 40


def new_replid() -> str:
    return os.urandom(20).hex()


class ReplState:
    def __init__(self, server):
        self.server = server
        self.role = "master"
        self.replid = new_replid()
        self.replid2 = NULL_REPLID
        self.master_repl_offset = 0
        self.second_replid_offset = -1
        self.backlog = None
        self.loaded_stream_db = -1      # repl-stream-db of the RDB loaded at start
        self.replicas: list = []
        # The primary side's machinery (hotkv.replication.primary.Primary),
        # made on first use so a server without replicas pays nothing.
        self.primary = None
        listeners = server.config.listeners
        for name in ("min-replicas-to-write", "min-replicas-max-lag"):
            listeners[name] = self._min_replicas_changed
        values = server.config.values
        # No replica yet: any min-replicas-to-write refuses writes (NOREPLICAS).
        server.repl_refuse = bool(values["min-replicas-to-write"]
                                  and values["min-replicas-max-lag"])
        listeners["repl-backlog-size"] = self._backlog_size_changed

    def _min_replicas_changed(self, _value):
        self.get_primary().refresh_good()

    def _backlog_size_changed(self, value):
        if self.backlog is not None:
            self.backlog.resize(value)

    def get_primary(self):
        """The primary side's machinery, made on first use."""
        if self.primary is None:
            # Function-level: primary -> persistence.rdbfile -> lua -> replication.replica_gate
            # -> this package, a cycle if imported here at the top.
            from .primary import Primary
            self.primary = Primary(self.server)
        return self.primary

    def cron(self):
        """The server's cron (hz times a second)."""
        if self.primary is not None:
            self.primary.cron()
        elif self.server.repl_refuse and self.role != "master":
            self.server.repl_refuse = False   # a replica never answers NOREPLICAS

    def client_gone(self, c):
        """A replica connection closed (the server calls this for kind "replica")."""
        if self.primary is not None:
            self.primary.gone(c)

    def shutdown(self):
        if self.primary is not None:
            self.primary.stop()

    def shift_replid(self):
        """A new history starts (a replica promoted): the old id stays
        valid for PSYNC up to the current offset (Valkey's shiftReplicationId)."""
        self.replid2 = self.replid
        self.second_replid_offset = self.master_repl_offset + 1
        self.replid = new_replid()

    def clear_replid2(self):
        self.replid2 = NULL_REPLID
        self.second_replid_offset = -1

    def rdb_aux(self) -> list:
        """The RDB aux fields of Valkey's rdbPopulateSaveInfo for a replica
        (a primary's are not written): the stream's db, the primary's replid
        and the offset applied, so a restart can continue with a PSYNC."""
        link = self.server.replica_link
        if self.role != "slave" or link is None or not link.replid or link.reploff < 0 \
                or link.client is None:
            return []
        return [(b"repl-stream-db", b"%d" % link.client.db.index),
                (b"repl-id", link.replid.encode()),
                (b"repl-offset", b"%d" % link.reploff)]

    def loaded_aux(self, aux: dict):
        """The RDB loaded at start held a replica's aux fields and hotkv is
        to follow a primary: its history becomes ours (the replid and the
        offset), which REPLICAOF offers as the cached primary's -- Valkey's
        replicationCachePrimaryUsingMyself after rdbLoad."""
        replid = aux.get(b"repl-id", b"")
        offset = aux.get(b"repl-offset", b"")
        db = aux.get(b"repl-stream-db", b"")
        if not self.server.config.values.get("replicaof") or len(replid) != 40 \
                or not offset.lstrip(b"-").isdigit() or not db.isdigit():
            return
        self.replid = replid.decode("latin-1")
        self.master_repl_offset = int(offset)
        self.loaded_stream_db = int(db)

    def backlog_fields(self) -> list:
        """INFO's repl_backlog_* fields (both roles report them)."""
        b = self.backlog
        size = self.server.config.values.get("repl-backlog-size", 1048576)
        if b is None:
            return [("repl_backlog_active", 0), ("repl_backlog_size", size),
                    ("repl_backlog_first_byte_offset", 0), ("repl_backlog_histlen", 0)]
        return [("repl_backlog_active", 1), ("repl_backlog_size", size),
                ("repl_backlog_first_byte_offset", b.first_offset()),
                ("repl_backlog_histlen", b.histlen)]


class CountedAOF:
    """The propagation sink while the AOF is on and no backlog exists:
    the AOF's feed, and ``master_repl_offset`` grown by one for each
    command that would be streamed (a transaction's MULTI and EXEC too, no
    SELECT), as Valkey's replicationFeedReplicas counts when it has no
    backlog (the offset that WAITAOF's fsync tracking reads)."""
    __slots__ = ("writer", "repl")

    def __init__(self, writer, repl):
        self.writer = writer
        self.repl = repl

    def feed(self, entries):
        self.writer.feed(entries)
        n = len(entries)
        self.repl.master_repl_offset += 1 if n == 1 else n + 2


__all__ = ["ReplState", "CountedAOF", "NULL_REPLID", "new_replid"]
