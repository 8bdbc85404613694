"""hotkv as a replica of a Redis/Valkey primary (the replica half of Valkey's
replication.c): the link, the full and partial resynchronisation, the applied
stream, and what ROLE, INFO and the dispatcher ask of a replica.

``ReplicaLink`` (``server.replica_link`` while hotkv follows a primary) runs
one task on the server's loop: connect, ``PING``, ``AUTH`` (``masterauth`` /
``masteruser``), ``REPLCONF listening-port``, ``REPLCONF capa eof capa
psync2``, ``PSYNC <replid> <offset+1>`` (or ``? -1``), then

* ``+FULLRESYNC <replid> <offset>``: the RDB -- as ``$<len>`` or as the
  diskless ``$EOF:<40-byte mark>`` form -- is read as the chunks that come
  (the loop keeps serving), parsed, checked and indexed in a worker thread,
  and only then swapped in for the whole keyspace (``_install``; the old
  dictionaries are emptied in a worker thread): a corrupt or truncated
  payload is logged, leaves the old data as it was, and the link is
  retried; with ``appendonly yes`` an AOF rewrite follows;
* ``+CONTINUE [<replid>]``: the stream resumes where the cached offset
  stopped (a new replid is adopted, the old one kept as replid2).

The stream is applied by a "master" client (``Client(kind="master")``,
no reply leaves it) through the dispatcher; every command adds its exact
RESP size to the processed offset once it ran (a transaction's commands at
EXEC, as Valkey's ``reploff``); ``REPLCONF GETACK`` answers ``REPLCONF ACK
<offset>`` at once and a cron sends one every second, with ``FACK <offset>``
-- the offset the local AOF holds fsynced, for WAITAOF -- while the AOF is
on.  When the link breaks, the master client and its offset are kept for
the next ``PSYNC`` (Valkey's cached primary); reconnection backs off from
0.1 s to 1 s, the pace of Valkey's replicationCron.

Chained replication (Valkey's replica proxies its primary's stream): the
applied bytes, exactly as received, go to ``server.repl.backlog`` (made at
each full sync, from the primary's offset) and to the replicas of this
replica (``Primary.relay``); nothing of hotkv's own is added to that stream
(``Server.relink_propagation`` leaves the primary side's feed out while
``role == "slave"``, and its cron sends no PING).  So a sub-replica sees
the top primary's replid and offsets: PSYNC is served from that backlog,
a full sync gets ``+FULLRESYNC <primary's replid> <applied offset>`` and
an RDB whose ``repl-stream-db`` aux field names the db the stream has
selected (read back here too: the master client starts in that db, as
Valkey's replicationCreatePrimaryClient).  SYNC/PSYNC while the link is
not up answers ``-NOMASTERLINK`` (``sync_refusal``).  The sub-replicas
are disconnected, to resync, when this replica loads a new RDB, when its
primary's replid changes (``+CONTINUE <new id>``), on REPLICAOF and on
``REPLICAOF NO ONE``, which shifts the replid (the primary's becomes
replid2 up to the offset) so they continue with ``+CONTINUE`` -- the
other replicas of the old primary too.  Commands
the replica fails are logged as Valkey logs them ("== CRITICAL == ...");
``tls-replication yes`` makes the link TLS.  An RDB saved by a replica
holds ``repl-stream-db`` / ``repl-id`` / ``repl-offset`` (``ReplState.
rdb_aux``); started again from it with ``replicaof``, hotkv offers that
history as its cached primary (``ReplState.loaded_aux``) and continues with
a partial resync, as Valkey does.

While hotkv is a replica: ``server.repl.role == "slave"``; the dispatcher's
``repl_check`` gate refuses writes from ordinary clients
(``replica-read-only``) and, with ``replica-serve-stale-data no`` and the
link down, every command without the stale flag; nothing expires actively
and a logically expired key reads as missing but stays until the primary's
DEL comes (``Database.lookup``), except for the master client, which sees
it as the primary did; scripts are held to the same rules
(``replica_gate.refuses_writes`` / ``running_stale``: hotkv.lua.engine, FCALL).

Invariants: ``reploff`` only counts commands that ran whole; a full sync
installs all of a checked RDB or nothing; ``stop()`` ends the task and
closes the socket, and no method of a stopped link changes the server.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time

import hiredis

from ..clients import limits
from ..clients.client import Client
from ..core import blocking
from ..core.dispatch import process_command, reject
from ..core.keyindex import KeyIndex
from ..core.multi import discard_transaction
from ..core.pause import hold_primary_command
from ..lua.functions import FunctionError, registry  # (lupa only when needed)
from ..persistence import rdbfile
from ..persistence.aof.files import ON as AOF_ON
from .backlog import Backlog
from .primary import info_fields as primary_info_fields
from .replica_gate import MASTERDOWN, READONLY, refuses_writes, running_stale

log = logging.getLogger("hotkv")

EOF_MARK_SIZE = 40
CHUNK = 1 << 16


class LinkError(Exception):
    """Why the link went down; logged, then the link is retried."""


def _encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = b"%d" % a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def command_size(argv) -> int:
    """The bytes of argv as a primary writes it (canonical multibulk)."""
    n = len(b"*%d\r\n" % len(argv))
    for a in argv:
        k = len(a)
        n += k + 5 + len(str(k))       # "$", the length, CRLF, the data, CRLF
    return n


def _parse_rdb(chunks, cut, databases, zset_entries, zset_value, clocks):
    """In a worker thread: the payload parsed and checked, and each
    database's key indexes and access times built (``_install`` then only
    swaps them in)."""
    buf = b"".join(chunks)
    if cut:
        buf = buf[:-cut]
    # Every key is kept, expired or not: a replica leaves deletions to its
    # primary (Valkey's rdbLoad keeps expired keys when not a primary).
    loaded = rdbfile.read_bytes(buf, databases, -(1 << 63), zset_entries, zset_value)
    del buf
    loaded.prepared = [(KeyIndex(keys), KeyIndex(expires), dict.fromkeys(keys, clock))
                       for keys, expires, clock in zip(loaded.dbs, loaded.expires, clocks)]
    return loaded


def _install(server, loaded) -> list:
    """Replace the whole dataset by ``loaded`` (Valkey's emptyData then
    rdbLoad): WATCHers and trackers told, function libraries replaced.
    Returns the old dictionaries, to be freed off the loop."""
    fast = not server.notify_new and all(type(db.access) is dict for db in server.dbs)
    if not fast:
        server.empty_data(functions=True)
        rdbfile.install(server, loaded)
        return []
    old = server.replace_data(
        [(keys, expires, index, volatile, access) for keys, expires, (index, volatile, access)
         in zip(loaded.dbs, loaded.expires, loaded.prepared)],
        functions=True)
    if loaded.functions:
        try:
            registry(server).load_codes(loaded.functions)
        except FunctionError as e:
            raise rdbfile.RDBLoadError("Failed loading a function library from the RDB: %s"
                                       % e.message) from None
    return old


def _drop(old):
    """In a worker thread: the replaced dictionaries emptied one item at a
    time (a Python loop, so the event loop keeps running)."""
    for dicts in old:
        for d in dicts:
            while d:
                d.popitem()


class PrimaryClient(Client):
    """The client the primary's stream runs as (Valkey's primary client,
    flag M): listed by CLIENT LIST; CLIENT KILL (TYPE master) breaks the
    link, which then resumes with a PSYNC."""
    __slots__ = ("link",)

    def kill(self):
        self.link._close()

    def close(self):
        self.link._close()

    def resume(self):       # server.resume_client's call when a pause ends
        self.link.resume_held()


class ReplicaLink:
    def __init__(self, server, host: str, port: int):
        self.server = server
        self.host = host
        self.port = port
        # Valkey's repl_state names as ROLE reports them.
        self.state = "connect"
        self.client = None            # the master client (kept while the link is down)
        self.replid = None            # the primary's replid, once synced
        self.reploff = -1             # processed offset (slave_repl_offset)
        self.read_reploff = -1        # read offset (slave_read_repl_offset)
        self.raw = bytearray()        # the stream read, not yet applied (_stream)
        self.pending_bytes = 0        # of commands inside a MULTI not yet at EXEC
        self.cached = None            # (replid, offset) for the next PSYNC
        self.last_io = time.time()
        self.down_since = 0           # 0: never up since REPLICAOF (INFO says -1)
        self.transfer_size = -1
        self.transfer_read = 0
        self.transfer_lastio = 0.0
        self.writer = None
        self.task = None
        self.cron_task = None
        self.stopped = False
        self.full_syncs = 0
        self.partial_syncs = 0
        self.failures = 0
        # WAITAOF on the primary: the offset this replica's AOF holds fsynced
        # (Valkey's fsynced_reploff; -1 while the AOF is off or its first
        # rewrite runs, and then no FACK is sent), and the (offset, time) of
        # the last moment the AOF buffer was empty: an fsync started after
        # that time covers that offset.
        self.fsynced_off = -1
        self.fack_mark = None

    # ------------------------------------------------------------------
    def start(self):
        loop = self.server.loop
        self.task = loop.create_task(self._run())
        self.cron_task = loop.create_task(self._cron())

    def stop(self):
        """End the link: no further command of this primary is applied."""
        self.stopped = True
        for t in (self.task, self.cron_task):
            if t is not None and not t.done():
                t.cancel()
        self._close()
        self._unlist_client()
        self.state = "none"

    def resume_held(self):
        """A CLIENT PAUSE ended: apply what it held of the stream, in order
        (up to a command a new pause holds), then relay it as _stream does."""
        c = self.client
        if self.writer is None or self.stopped or c is None:
            return
        applied = self.reploff
        while c.pending and c.blocked is None:
            argv = c.pending.popleft()
            if hold_primary_command(c, argv, at_head=True):
                break
            self._apply(c, argv)
        self._pass_on(applied)

    def _apply(self, c, argv):
        """One command of the primary: applied (a REPLCONF GETACK answered
        with the offset before it, as Valkey), then counted in the offset --
        a MULTI's commands only once its EXEC is applied."""
        if len(argv) >= 2 and argv[0].lower() == b"replconf" \
                and argv[1].lower() == b"getack":
            self.send_ack()
        else:
            process_command(c, argv)
            out = c.out         # a primary's commands get no reply
            if out:
                if any(chunk[:1] == b"-" for chunk in out):
                    _error_to_primary(out, argv)
                out.clear()
        self.pending_bytes += command_size(argv)
        if not c.multi:
            self.reploff += self.pending_bytes
            self.pending_bytes = 0

    def _pass_on(self, applied: int):
        """The bytes applied since offset ``applied``, exactly as the primary
        sent them, to the sub-replicas (chained replication) or the backlog."""
        repl = self.server.repl
        done = self.reploff - applied
        if done:
            raw = self.raw
            data = bytes(raw[:done])
            del raw[:done]
            if repl.replicas:
                repl.primary.relay(data)
            elif repl.backlog is not None:
                repl.backlog.append(data)
        repl.master_repl_offset = self.reploff

    def _close(self):
        c = self.client
        if c is not None and c.pending:
            # What a pause held goes with the connection (a PSYNC resumes
            # from the applied offset), as Valkey frees its primary client.
            c.pending.clear()
            blocking.drop(c)
        w, self.writer = self.writer, None
        if w is not None:
            try:
                w.close()
            except Exception:   # pragma: no cover - the transport is gone already
                pass

    @property
    def connected(self) -> bool:
        return self.state == "connected"

    # ------------------------------------------------------------------
    async def _run(self):
        while not self.stopped:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except LinkError as e:
                log.warning("%s", e)
            except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                    ssl.SSLError) as e:
                log.warning("Error condition on socket for SYNC with PRIMARY %s:%d: %s",
                            self.host, self.port, e or type(e).__name__)
            except Exception:
                log.exception("replication link failure (primary %s:%d)", self.host, self.port)
            self._link_down()
            if self.stopped:
                break
            self.failures += 1
            await asyncio.sleep(min(1.0, 0.1 * 2 ** min(self.failures - 1, 4)))

    def _link_down(self):
        was_up = self.state == "connected"
        self._close()
        self._unlist_client()
        if self.stopped:
            return
        self.state = "connect"
        self.transfer_size = -1
        if was_up:
            log.warning("Connection with primary lost.")
            self.down_since = int(time.time())
            c = self.client
            if c is not None:
                # Valkey's replicationCachePrimary: an unfinished transaction
                # goes; the offset stays where the last whole command left it.
                discard_transaction(c)
                self.pending_bytes = 0
                self.cached = (self.replid, self.reploff)
                log.info("Caching the disconnected primary state.")

    async def _cron(self):
        """Once a second: REPLCONF ACK, and the repl-timeout check.  Every
        0.1 s between: an ACK as soon as the AOF's fsynced offset moved (a
        WAITAOF on the primary waits for it; nothing is sent otherwise)."""
        tick = 0
        while not self.stopped:
            await asyncio.sleep(0.1)
            tick += 1
            if tick % 10:
                if self.state == "connected" and self.server.aof_writer is not None:
                    sent = self.fsynced_off
                    if self.fsynced_offset() > sent >= 0:
                        self.send_ack()
                continue
            timeout = self.server.config.values.get("repl-timeout", 60)
            now = time.time()
            if self.state == "connected":
                if now - self.last_io > timeout:
                    log.warning("PRIMARY timeout: no data nor PING received...")
                    self._close()
                else:
                    self.send_ack()
            elif self.state == "sync" and now - self.transfer_lastio > timeout:
                log.warning("Timeout receiving bulk data from PRIMARY... If the problem "
                            "persists try to set the 'repl-timeout' parameter in "
                            "valkey.conf to a larger value.")
                self._close()

    def send_ack(self):
        w = self.writer
        if w is not None and self.reploff >= 0:
            fack = self.fsynced_offset()
            if fack < 0:
                w.write(_encode("REPLCONF", "ACK", self.reploff))
            else:
                w.write(_encode("REPLCONF", "ACK", self.reploff, "FACK", fack))

    def fsynced_offset(self) -> int:
        """The applied offset the local AOF holds on disk, fsynced (sent as
        FACK).  Never ahead of the disk: an offset counts once the buffer
        that held it was written and an fsync started after that finished
        ('always' fsyncs as it writes; 'no' never counts, as Valkey)."""
        aof = self.server.aof_writer
        if aof is None or aof.state != AOF_ON:
            self.fsynced_off = -1
            self.fack_mark = None
            return -1
        off = max(self.reploff, 0)
        bio = aof.bio
        idle = bio is None or bio.pending_fsync == 0
        if self.fsynced_off < 0:
            self.fsynced_off = 0
        if not aof.buf and not aof.unsynced and idle:
            self.fsynced_off = max(self.fsynced_off, off)   # everything is on disk
            self.fack_mark = None
            return self.fsynced_off
        mark = self.fack_mark
        if mark is not None and aof.last_fsync > mark[1] and idle:
            self.fsynced_off = max(self.fsynced_off, mark[0])
            mark = self.fack_mark = None
        if not aof.buf and mark is None and self.fsynced_off < off:
            self.fack_mark = (off, time.monotonic())
        return self.fsynced_off

    # ------------------------------------------------------------------
    async def _line(self, reader, timeout) -> bytes:
        line = await asyncio.wait_for(reader.readline(), timeout)
        if not line:
            raise LinkError("Primary %s:%d closed the connection during the handshake"
                            % (self.host, self.port))
        self.last_io = time.time()
        return line.rstrip(b"\r\n")

    async def _command(self, reader, timeout, *args) -> bytes:
        self.writer.write(_encode(*args))
        return await self._line(reader, timeout)

    async def _session(self):
        server = self.server
        values = server.config.values
        timeout = values.get("repl-timeout", 60)
        self.state = "connecting"
        log.info("Connecting to PRIMARY %s:%d", self.host, self.port)
        ctx = _tls_context(values) if values.get("tls-replication") else None
        source = values.get("bind-source-addr") or None     # the link's own address
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=CHUNK * 4, ssl=ctx,
                                    server_hostname="" if ctx is not None else None,
                                    local_addr=(source, 0) if source else None), timeout)
        if self.stopped:
            writer.close()
            return
        self.writer = writer
        log.info("PRIMARY <-> REPLICA sync started")
        self.state = "handshake"
        reply = await self._command(reader, timeout, "PING")
        if not reply.startswith((b"+", b"-NOAUTH", b"-NOPERM", b"-ERR operation not permitted")):
            raise LinkError("Error reply to PING from primary: '%s'" % _text(reply))
        log.info("Primary replied to PING, replication can continue...")
        auth = values.get("primaryauth") or ""
        if auth:
            user = values.get("primaryuser") or ""
            args = ("AUTH", user, auth) if user else ("AUTH", auth)
            reply = await self._command(reader, timeout, *args)
            if reply.startswith(b"-"):
                raise LinkError("Unable to AUTH to PRIMARY: %s" % _text(reply))
        port = values.get("replica-announce-port") or values.get("port") or 0
        reply = await self._command(reader, timeout, "REPLCONF", "listening-port", port)
        if reply.startswith(b"-"):
            log.info("(Non critical) Primary does not understand REPLCONF listening-port: %s",
                     _text(reply))
        ip = values.get("replica-announce-ip") or ""
        if ip:
            reply = await self._command(reader, timeout, "REPLCONF", "ip-address", ip)
            if reply.startswith(b"-"):
                log.info("(Non critical) Primary does not understand REPLCONF ip-address: %s",
                         _text(reply))
        reply = await self._command(reader, timeout, "REPLCONF", "capa", "eof", "capa", "psync2")
        if reply.startswith(b"-"):
            log.info("(Non critical) Primary does not understand REPLCONF capa: %s",
                     _text(reply))
        if self.cached is not None and self.cached[0]:
            psync_id, psync_off = self.cached[0], self.cached[1] + 1
            log.info("Trying a partial resynchronization (request %s:%d).", psync_id, psync_off)
        else:
            psync_id, psync_off = "?", -1
            log.info("Partial resynchronization not possible (no cached primary)")
        writer.write(_encode("PSYNC", psync_id, psync_off))
        while True:
            reply = await self._line(reader, timeout)
            if reply:
                break    # a primary may send newlines before its answer
        if reply.startswith(b"+FULLRESYNC"):
            words = reply.split()
            if len(words) != 3 or len(words[1]) != 40 or not words[2].lstrip(b"-").isdigit():
                raise LinkError("Primary replied with wrong +FULLRESYNC syntax.")
            replid, offset = words[1].decode(), int(words[2])
            log.info("Full resync from primary: %s:%d", replid, offset)
            await self._full_sync(reader, replid, offset, timeout)
        elif reply.startswith(b"+CONTINUE"):
            log.info("Successful partial resynchronization with primary.")
            words = reply.split()
            self._continue(words[1].decode() if len(words) > 1 and len(words[1]) == 40
                           else None)
        elif reply.startswith((b"-NOMASTERLINK", b"-LOADING")):
            raise LinkError("Primary is currently unable to PSYNC but should be in the "
                            "future: %s" % _text(reply))
        elif reply.startswith(b"-"):
            raise LinkError("Primary does not support PSYNC or is in error state (reply: %s)"
                            % _text(reply))
        else:
            raise LinkError("Unexpected reply to PSYNC from primary: %s" % _text(reply))
        await self._stream(reader)

    # ------------------------------------------------------------------
    async def _full_sync(self, reader, replid: str, offset: int, timeout):
        self.state = "sync"
        self.transfer_read = 0
        self.transfer_lastio = time.time()
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if not line:
                raise LinkError("Primary closed the connection before the RDB payload")
            self.transfer_lastio = self.last_io = time.time()
            if line in (b"\n", b"\r\n"):
                continue      # keep-alive newlines while the primary prepares the RDB
            break
        if line[:1] == b"-":
            raise LinkError("PRIMARY aborted replication with an error: %s"
                            % _text(line.rstrip(b"\r\n")))
        if line[:1] != b"$":
            raise LinkError("Bad protocol from PRIMARY, the first byte is not '$' (we "
                            "received '%s'), are you sure the host and port are right?"
                            % _text(line.rstrip(b"\r\n")))
        chunks = []
        head = line.rstrip(b"\r\n")
        if head[1:5] == b"EOF:" and len(head) >= 5 + EOF_MARK_SIZE:
            mark = bytes(head[5:5 + EOF_MARK_SIZE])
            self.transfer_size = 0
            log.info("PRIMARY <-> REPLICA sync: receiving streamed RDB from primary with EOF "
                     "to disk")
            tail = b""
            while tail != mark:
                data = await reader.read(CHUNK)
                if not data:
                    raise LinkError("I/O error trying to sync with PRIMARY: connection lost")
                chunks.append(data)
                tail = (tail + data)[-EOF_MARK_SIZE:]
                self.transfer_read += len(data)
                self.transfer_lastio = self.last_io = time.time()
            cut = EOF_MARK_SIZE       # the mark ends the payload
        else:
            if not head[1:].isdigit():
                raise LinkError("Bad protocol from PRIMARY, bad bulk length '%s'"
                                % _text(head))
            size = int(head[1:])
            self.transfer_size = size
            log.info("PRIMARY <-> REPLICA sync: receiving %d bytes from primary to disk", size)
            while self.transfer_read < size:
                data = await reader.read(min(CHUNK, size - self.transfer_read))
                if not data:
                    raise LinkError("I/O error trying to sync with PRIMARY: connection lost")
                chunks.append(data)
                self.transfer_read += len(data)
                self.transfer_lastio = self.last_io = time.time()
            cut = 0
        log.info("PRIMARY <-> REPLICA sync: Loading DB in memory")
        server = self.server
        values = server.config.values
        loop = asyncio.get_running_loop()
        try:
            # Parsed, checked and indexed in a worker thread (its Python loops
            # let the event loop run between them); nothing is touched yet.
            loaded = await loop.run_in_executor(
                None, _parse_rdb, chunks, cut, len(server.dbs),
                values.get("zset-max-listpack-entries", 128),
                values.get("zset-max-listpack-value", 64), [db.clock for db in server.dbs])
        except rdbfile.RDBLoadError as e:
            # Nothing was touched: the old dataset stays, the sync is retried.
            raise LinkError("Failed trying to load the PRIMARY synchronization DB from "
                            "socket: %s" % e) from None
        del chunks
        if self.stopped:
            return
        log.info("PRIMARY <-> REPLICA sync: Flushing old data")
        # Replicas of this replica hold the old history (Valkey's
        # replicationAttachToNewPrimary); the old backlog goes with it.
        _drop_replicas(server)
        server.repl.backlog = None
        try:
            old = _install(server, loaded)
        except rdbfile.RDBLoadError as e:
            server.empty_data(functions=True)
            raise LinkError("Failed trying to load the PRIMARY synchronization DB from "
                            "socket: %s" % e) from None
        if old:
            loop.run_in_executor(None, _drop, old)     # the old keys freed off the loop
        server.dirty += loaded.keys_loaded
        self.full_syncs += 1
        self.replid = replid
        self.reploff = self.read_reploff = offset
        self.pending_bytes = 0
        self.client = self._new_client()
        repl = server.repl
        repl.replid = replid
        repl.clear_replid2()
        repl.master_repl_offset = offset
        # The stream continues in the db the primary's stream had selected
        # at its fork (the RDB's repl-stream-db; a chained primary sends no
        # SELECT before its next command).
        db = loaded.aux.get(b"repl-stream-db", b"")
        if db.isdigit() and int(db) < len(server.dbs):
            self.client.db = server.dbs[int(db)]
        # A new history: the stream from the primary's offset on, for
        # sub-replicas' PSYNCs and for a promotion.
        repl.backlog = Backlog(values.get("repl-backlog-size", 1 << 20), offset + 1)
        log.info("PRIMARY <-> REPLICA sync: Finished with success")
        # An AOF that is on is rewritten from the new dataset (as Valkey
        # restarts it after a full sync), so a restart finds this data.
        aof = server.aof_manager
        if values.get("appendonly"):
            if aof.rewriting:
                aof.kill_rewrite()    # it was writing the old dataset
            aof.rw_scheduled = True   # the cron starts it (one child at a time)
            aof.rw_failures = 0

    def _continue(self, new_replid):
        c = self.client
        if c is None:    # pragma: no cover - +CONTINUE only answers a cached PSYNC
            raise LinkError("+CONTINUE without a cached primary")
        repl = self.server.repl
        if new_replid is not None and new_replid != self.replid:
            log.info("Primary replication ID changed to %s", new_replid)
            repl.replid2 = self.replid
            repl.second_replid_offset = self.reploff + 1
            self.replid = new_replid
            repl.replid = new_replid
            # Sub-replicas learn the new id by reconnecting (+CONTINUE).
            _drop_replicas(self.server)
        if repl.backlog is None:
            # A primary turned replica that had no backlog (Valkey creates
            # it on a successful PSYNC).
            repl.backlog = Backlog(self.server.config.values.get("repl-backlog-size", 1 << 20),
                                   self.reploff + 1)
        repl.master_repl_offset = self.reploff
        self.read_reploff = self.reploff
        self.partial_syncs += 1

    def _new_client(self):
        c = PrimaryClient(self.server, fake=True)
        c.id = self.server.next_client_id()   # listed: CLIENT LIST / KILL TYPE master
        c.link = self
        c.kind = "primary"
        c.authenticated = True
        return c

    def _list_client(self, writer):
        """The master client shows in CLIENT LIST while the link is up."""
        c = self.client
        c.link = self
        c.addr = "%s:%d" % (self.host, self.port)
        sock = writer.get_extra_info("sockname")
        c.laddr = "%s:%d" % sock[:2] if sock else ""
        c.last_interaction = time.time()
        self.server.clients[c.id] = c

    def _unlist_client(self):
        c = self.client
        if c is not None:
            self.server.clients.pop(c.id, None)

    # ------------------------------------------------------------------
    async def _stream(self, reader):
        server = self.server
        self.state = "connected"
        self.failures = 0
        self.last_io = time.time()
        log.info("PRIMARY <-> REPLICA sync: Primary accepted a Partial Resynchronization."
                 if self.partial_syncs and self.cached else "Replica is online")
        self.cached = None
        self.send_ack()
        self._list_client(self.writer)
        c = self.client
        parser = hiredis.Reader()
        apply = self._apply
        # Read, not yet applied (a command's tail, a MULTI, what a pause holds).
        raw = self.raw = bytearray()
        while True:
            data = await reader.read(CHUNK)
            if not data:
                raise LinkError("Connection with primary lost (%s:%d)." % (self.host, self.port))
            if self.stopped:
                return
            c.last_interaction = self.last_io = time.time()   # (never idle: `timeout`)
            c.net_in += len(data)
            self.read_reploff += len(data)
            applied = self.reploff
            raw += data
            parser.feed(data)
            while True:
                try:
                    argv = parser.gets()
                except hiredis.ProtocolError as e:
                    raise LinkError("Protocol error from PRIMARY %s:%d: %s"
                                    % (self.host, self.port, e)) from None
                if argv is False:
                    break
                if type(argv) is not list or not argv or \
                        any(type(a) is not bytes for a in argv):
                    raise LinkError("Protocol error from PRIMARY %s:%d: %r"
                                    % (self.host, self.port, argv))
                if (c.pending or server.pause_check is not None) and \
                        hold_primary_command(c, argv):
                    continue      # CLIENT PAUSE: read, applied when it ends (resume_held)
                apply(c, argv)
            self._pass_on(applied)


def _tls_context(values) -> ssl.SSLContext:
    """The replica's side of a TLS link (``tls-replication yes``), as Valkey
    makes it: the client certificate (``tls-client-cert-file``, else
    ``tls-cert-file``), the primary's certificate checked against
    ``tls-ca-cert-file`` (no host name check)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ca = values.get("tls-ca-cert-file") or ""
    try:
        if ca:
            ctx.load_verify_locations(cafile=ca)
        else:
            ctx.verify_mode = ssl.CERT_NONE
        cert = values.get("tls-client-cert-file") or values.get("tls-cert-file") or ""
        key = (values.get("tls-client-key-file") if values.get("tls-client-cert-file")
               else values.get("tls-key-file")) or None
        if cert:
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise LinkError("Failed to configure TLS for the link with the PRIMARY: %s" % e) \
            from None
    return ctx


def _error_to_primary(out, argv):
    """A command of the primary failed here: the datasets may now differ.
    Logged as Valkey logs it (the error is not sent back)."""
    err = next(bytes(chunk) for chunk in out if chunk[:1] == b"-")
    log.warning("== CRITICAL == This replica is sending an error to its primary: '%s' after "
                "processing the command '%s'", _text(err[1:].rstrip(b"\r\n"))[:128],
                _text(argv[0])[:64])


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# ----------------------------------------------------------------------
# REPLICAOF, and what ROLE, INFO and the dispatcher ask of a replica
# ----------------------------------------------------------------------

def become_replica(server, host: str, port: int):
    """Follow host:port (Valkey's replicationSetPrimary)."""
    old = server.replica_link
    repl = server.repl
    cached = None
    if old is not None:
        old.stop()
        if old.client is not None and old.replid:
            cached = (old.replid, old.reploff)
    else:
        # A primary turning replica offers its own history (Valkey's
        # replicationCachePrimaryUsingMyself): a PSYNC may continue it.
        if repl.primary is not None:
            repl.primary.flush()        # this turn's writes are in the backlog
        cached = (repl.replid, repl.master_repl_offset)
    # Our replicas resync with us, to learn of the change (Valkey's
    # disconnectReplicas); the backlog stays: a +CONTINUE extends it.
    _drop_replicas(server)
    link = ReplicaLink(server, host, port)
    link.cached = cached
    if old is not None and old.client is not None:
        link.client = old.client
        link.replid, link.reploff = old.replid, old.reploff
    elif cached is not None:
        link.client = link._new_client()
        link.replid, link.reploff = cached
    link.read_reploff = link.reploff
    repl.role = "slave"
    server.replica_link = link
    server.repl_check = repl_check     # the dispatcher's gate (hotkv.server._gate)
    server.relink_propagation()        # nothing of ours goes into the stream now
    limits.oom_role_changed(server)    # the replica class of oom-score-adj-values
    if server.loop is not None:
        link.start()
    return link


def become_primary(server):
    """REPLICAOF NO ONE (Valkey's replicationUnsetPrimary): every key stays,
    a new replid starts and the primary's becomes replid2."""
    link = server.replica_link
    if link is None:
        return
    link.stop()
    repl = server.repl
    if link.reploff >= 0:
        repl.master_repl_offset = link.reploff
    if link.replid:
        repl.replid = link.replid
    repl.shift_replid()
    repl.role = "master"
    server.replica_link = None
    server.repl_check = None
    # Sub-replicas reconnect to learn the new id; they continue with
    # +CONTINUE from the backlog (Valkey's replicationUnsetPrimary).
    _drop_replicas(server)
    if repl.backlog is not None:
        # The primary side serves PSYNCs from the stream this replica applied
        # (Valkey keeps its backlog when promoted); its own stream starts
        # with a SELECT (Valkey's replicas_eldb = -1).
        repl.get_primary().seldb = -1
    server.relink_propagation()
    limits.oom_role_changed(server)


def _drop_replicas(server):
    """Our replicas' connections closed, so that they resync (Valkey's
    disconnectReplicas): they learn a new replid or a new dataset."""
    repl = server.repl
    for link in list(repl.replicas):
        link.client.close()
        if repl.primary is not None:
            repl.primary.gone(link.client)


def sync_refusal(server):
    """SYNC/PSYNC on a replica whose link is not up (Valkey's syncCommand)."""
    link = server.replica_link
    if link is not None and link.state != "connected":
        return "NOMASTERLINK Can't SYNC while not connected with my master"
    return None


def repl_check(client, cmd, argv, phase: int) -> bool:
    """The dispatcher's gate on a replica: True when the command was refused.
    Phase 0 sits where Valkey checks READONLY (after MISCONF), phase 1 where
    it checks MASTERDOWN (after the RESP2 pub/sub check)."""
    server = client.server
    link = server.replica_link
    if link is None or client is link.client:
        return False
    if phase == 0:
        if server.config.values.get("replica-read-only", True) and (
                cmd.write or (cmd.name == "exec" and client.multi_flags & 2)):
            reject(client, READONLY, cmd)
            return True
        return False
    if link.state != "connected" and not server.config.values.get(
            "replica-serve-stale-data", True) and _denies_stale(client, cmd):
        reject(client, MASTERDOWN, cmd)
        return True
    return False


def _denies_stale(client, cmd) -> bool:
    if "stale" not in cmd.flags:
        return True
    if cmd.name == "exec":
        return any("stale" not in qc.flags for qc, _ in client.multi_queue)
    return False


def role_reply(server) -> list:
    """ROLE on a replica: ["slave", host, port, state, offset]."""
    link = server.replica_link
    state = link.state
    if state in ("handshake",):
        state = "handshake"
    offset = link.reploff if link.state == "connected" else -1
    return [b"slave", link.host.encode(), link.port, state.encode(), offset]


def info_fields(server) -> list:
    """INFO replication's fields on a replica, in valkey-server 8.1.8's order."""
    link = server.replica_link
    values = server.config.values
    now = time.time()
    up = link.state == "connected"
    off = link.reploff if link.reploff >= 0 else 1
    read_off = link.read_reploff if link.read_reploff >= 0 else 1
    if link.client is None:
        off = read_off = 1
    out = [
        ("role", "slave"),
        ("master_host", link.host),
        ("master_port", link.port),
        ("master_link_status", "up" if up else "down"),
        ("master_last_io_seconds_ago", int(now - link.last_io) if up else -1),
        ("master_sync_in_progress", 1 if link.state == "sync" else 0),
        ("slave_read_repl_offset", read_off),
        ("slave_repl_offset", off),
        ("replicas_repl_buffer_size", 0),
        ("replicas_repl_buffer_peak", 0),
    ]
    if link.state == "sync":
        size = max(link.transfer_size, 0)
        perc = (link.transfer_read / size * 100) if size else 0.0
        out += [
            ("master_sync_total_bytes", size),
            ("master_sync_read_bytes", link.transfer_read),
            ("master_sync_left_bytes", size - link.transfer_read),
            ("master_sync_perc", "%.2f" % perc),
            ("master_sync_last_io_seconds_ago", int(now - link.transfer_lastio)),
        ]
    if not up:
        out.append(("master_link_down_since_seconds",
                    int(now - link.down_since) if link.down_since else -1))
    out += [
        ("slave_priority", values.get("replica-priority", 100)),
        ("slave_read_only", 1 if values.get("replica-read-only", True) else 0),
        ("replica_announced", 1 if values.get("replica-announced", True) else 0),
    ]
    return out + primary_info_fields(server, now)


def start_from_config(server):
    """``replicaof host port`` given at start: follow it once the data is loaded."""
    text = server.config.values.get("replicaof") or ""
    if text and server.replica_link is None:
        host, port = text.rsplit(" ", 1)
        link = become_replica(server, host, int(port))
        db = server.repl.loaded_stream_db
        if link is not None and link.client is not None and 0 <= db < len(server.dbs):
            # The restored history continues in the db its stream had selected.
            link.client.db = server.dbs[db]


__all__ = ["ReplicaLink", "become_replica", "become_primary", "repl_check", "role_reply",
           "info_fields", "start_from_config", "READONLY", "MASTERDOWN", "command_size",
           "sync_refusal",
           "refuses_writes", "running_stale"]
