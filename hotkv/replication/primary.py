"""hotkv as a replication primary: full sync, the live stream, ACKs, WAIT.

``Primary`` (``server.repl.primary``, made by the first SYNC/PSYNC) does
what Valkey's replication.c does on the primary's side:

* **Attach** -- ``sync(client, argv)`` (SYNC / PSYNC): a PSYNC whose
  replid is ours (or our replid2 up to ``second_replid_offset``) and whose
  offset the backlog still covers gets ``+CONTINUE <replid>`` and the
  backlog's tail; any other gets a full resync.  The first replica creates
  the backlog (with a fresh replid, as Valkey's createReplicationBacklog),
  which relinks ``server.aof`` so that every write from then on is fed
  here too (``Server.relink_propagation``).
* **Full sync** -- a forked child writes the dataset (``rdbfile.
  write_dataset``, BGSAVE's writer) into a pipe; the loop reads the pipe
  without ever blocking on it (``loop.add_reader``).  Replicas that said
  ``REPLCONF capa eof`` (with ``repl-diskless-sync yes``) get the payload
  as it comes, as ``$EOF:<40 chars>\\r\\n<rdb><40 chars>``; the others get
  ``$<len>\\r\\n<rdb>`` once the child is done.  ``+FULLRESYNC <replid>
  <offset>`` gives the offset at the fork; the stream from the fork point
  on is held per replica (``ReplicaLink.pending``) and sent after the
  payload -- for the EOF form only after the replica's first ``REPLCONF
  ACK`` (as Valkey: the replica finds the mark at the end of a read).
  ``repl-diskless-sync-delay`` holds a diskless sync that many seconds for
  more replicas to arrive.
* **Stream** -- ``feed(entries)`` gets what the AOF gets (one outermost
  call's ``(db, argv)`` records; several wrapped in MULTI/EXEC), emits
  SELECT when the db changes (``seldb``, reset to -1 at each fork so the
  stream after an RDB always starts with one), appends to the backlog and
  to every online replica's output.  A 2- to 4-argument command of bytes
  is encoded by one format operation, anything else by encode_into's loop
  (the same bytes: tests/test_replication_primary.py re-encodes a received
  stream with encode_into and compares).
* **Verbatim path** (fast path) -- a read the parser turned whole into its
  commands (``RequestParser.whole``) is bracketed by ``begin`` / ``end``
  (hotkv.net.connection, while ``server.raw_stream`` is this object): each command
  fed as it came (its own argv object, the next of the read, in the
  selected db; the read's first one may need a SELECT, written before) is
  only counted; at ``end``, when all of them were and ``_verbatim`` finds
  the read to be their canonical encoding, the read's own bytes are the
  stream -- one append instead of an encoding per command.  Anything else
  (a rewritten or wrapped command, one not propagated, another db, PING,
  INFO/ROLE/WAIT reading the offset within the read) first encodes what
  was held (``settle``) and the rest of the read goes the general way.
  While commands are held, ``master_repl_offset`` and the client's
  ``woff`` lag; ``settle`` / ``end`` set both.  Equivalence:
  tests/test_replication_primary.py::test_verbatim_stream_equals_the_general_path
  (replies, stream bytes and data against a primary with ``verbatim``
  off, seeded mixed reads, non-canonical ones included) and
  ::test_wait_within_a_verbatim_read_waits_for_its_writes.
* **Cron** -- ``cron()`` (the server's, hz times a second): PING into the
  stream every ``repl-ping-replica-period``; a newline each second to
  replicas waiting for their RDB (keepalive); replicas silent longer than
  ``repl-timeout`` dropped, and those whose output passes the replica class
  of ``client-output-buffer-limit``; the backlog freed (and the stream no
  longer fed) after ``repl-backlog-ttl`` seconds without a replica; the good-replica count for
  ``min-replicas-to-write`` (``server.repl_refuse``, a dispatch gate).
* **WAIT / WAITAOF** -- a waiting client is blocked with hotkv.core.blocking's
  ``block`` on no key; ``REPLCONF GETACK *`` goes into the stream after the
  loop turn; each ACK re-counts and unblocks who is satisfied; the timeout
  reply is kept equal to the current count so a timeout answers it.

Invariants: ``repl.master_repl_offset`` is the stream bytes produced
(outside a read whose commands the verbatim path holds);
``backlog`` plus ``buf`` (fed this loop turn, flushed by a call_soon and
before anything that reads the backlog or forks) end at it; a replica in
``ONLINE`` with ``live`` true gets every byte after its sync offset
exactly once and in order (first its ``pending``, then the live feed); at
most one sync child runs.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from itertools import chain as _chain

from ..clients import limits
from ..core.blocking import BLOCKED, block, unblock
from ..persistence import rdbfile
from ..persistence.aof.files import (
    _EXEC,
    _MULTI,
    ON as AOF_ON,
    _select,
    encode_into,
)
from ..persistence.forkchild import load_prctl, run_child
from .backlog import Backlog

log = logging.getLogger("hotkv")
_join = b"".join

WAIT_BGSAVE_START, WAIT_BGSAVE_END, SEND_BULK, ONLINE = range(4)
STATE_NAMES = ("wait_bgsave", "wait_bgsave", "send_bulk", "online")
_PING = b"*1\r\n$4\r\nPING\r\n"
_GETACK = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n"
WAITAOF_NO_AOF = ("ERR WAITAOF cannot be used when numlocal is set but appendonly is "
                  "disabled.")
UNBLOCKED_DEMOTED = ("UNBLOCKED force unblock from blocking operation, instance state "
                     "changed (master -> replica?)")
# A whole 2-, 3- or 4-argument command in one formatting operation (most
# writes: SET k v, LPUSH k v, HSET k f v): about 100 ns less than the
# loop's three appends per argument.  %b refuses anything but bytes-like
# objects (an int or str argument of a rewritten command): TypeError, and
# the general loop encodes it.
_CMD2 = b"*2\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
_CMD3 = b"*3\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
_CMD4 = b"*4\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
READ_CHUNK = 256 * 1024
READS_PER_TURN = 16          # at most 4 MB of RDB per loop turn
OUT_HIGH = 16 * 1024 * 1024  # stop reading the child while a replica holds this much


def _replica_limits(value) -> tuple:
    """(hard, soft, seconds) of the replica class of client-output-buffer-limit."""
    if isinstance(value, str):
        return limits.parse_output_limits(value).get("replica", (0, 0, 0))
    return next((tuple(e[1:4]) for e in value if e[0] in ("replica", "slave")), (0, 0, 0))


class ReplicaLink:
    """One replica connection, as Valkey's client fields repl_*."""
    __slots__ = ("client", "state", "port", "ip", "capa_eof", "capa_psync2", "ack_off",
                 "aof_off", "ack_time", "pending", "live", "eof_form", "sync_offset",
                 "wait_since", "pre_psync", "rdb_filter")

    def __init__(self, client, port: int, ip, capa_eof: bool, capa_psync2: bool,
                 rdb_filter: str | None = None):
        self.client = client
        self.state = WAIT_BGSAVE_START
        self.port = port
        self.ip = ip
        self.capa_eof = capa_eof
        self.capa_psync2 = capa_psync2
        self.ack_off = 0
        self.aof_off = 0
        self.ack_time = time.time()
        self.pending: list = []
        self.live = False
        self.eof_form = False
        self.sync_offset = 0
        self.wait_since = time.monotonic()
        self.pre_psync = False
        # REPLCONF rdb-filter-only: None (the whole dataset), "functions"
        # (the function libraries alone) or "" (an empty RDB); a sync job
        # serves replicas asking for the same RDB only.
        self.rdb_filter = rdb_filter

    def name(self) -> str:
        ip = self.ip or self.client.addr.rsplit(":", 1)[0].strip("[]")
        return "%s:%d" % (ip, self.port)


class _SyncJob:
    __slots__ = ("pid", "fd", "links", "eof_form", "mark", "chunks", "size", "reading",
                 "started")

    def __init__(self, pid, fd, links, eof_form, mark):
        self.pid = pid
        self.fd = fd
        self.links = links
        self.eof_form = eof_form
        self.mark = mark
        self.chunks: list = []
        self.size = 0
        self.reading = True
        self.started = time.monotonic()


class _Wait:
    __slots__ = ("client", "waiter", "offset", "numreplicas", "numlocal")

    def __init__(self, client, waiter, offset, numreplicas, numlocal):
        self.client = client
        self.waiter = waiter
        self.offset = offset
        self.numreplicas = numreplicas
        self.numlocal = numlocal      # -1: WAIT (no local part)


class Primary:
    # False: every command is encoded (tests compare the two paths' streams).
    verbatim = True

    def __init__(self, server):
        self.server = server
        self.repl = server.repl
        self.links: dict = {}          # client id -> ReplicaLink
        self.buf = bytearray()         # stream bytes not yet flushed (feed, flush)
        # The verbatim path: the read in progress (begin/end) and how many of
        # its commands were fed as they came, not encoded yet.
        self.raw = None
        self.raw_cmds = None
        self.raw_next = 0
        self.raw_client = None
        self.raw_reads = 0             # reads passed on verbatim (tests, bench)
        self.flush_scheduled = False
        self.seldb = -1
        self.job: _SyncJob | None = None
        self.waits: list = []
        self.getack_scheduled = False
        self.last_ping = time.monotonic()
        self.last_second = 0.0
        self.no_replicas_since = time.monotonic()
        self.good = 0
        self.sync_full = 0
        self.sync_partial_ok = 0
        self.sync_partial_err = 0

    # ------------------------------------------------------------------
    # The stream
    # ------------------------------------------------------------------
    def feed(self, entries):
        """One outermost call's (dbindex, argv) records (as the AOF's feed).
        They are encoded into ``buf`` at once (the offset moves now: WAIT
        reads it) and handed to the backlog and the replicas once per loop
        turn (``flush``): one copy and one write per turn, not per command."""
        cmds = self.raw_cmds
        if cmds is not None:
            # A read that may go verbatim (begin): its next command, fed
            # as it came, in the selected db, is only counted.
            if len(entries) == 1:
                dbindex, argv = entries[0]
                n = self.raw_next
                if n < len(cmds) and argv is cmds[n]:
                    if dbindex == self.seldb:
                        self.raw_next = n + 1
                        return
                    if not n:
                        # The read's first write, in another db: its SELECT
                        # goes before the read, as encoding would put it.
                        self.seldb = dbindex
                        sel = _select(dbindex)
                        self.buf += sel
                        self.repl.master_repl_offset += len(sel)
                        self.raw_next = 1
                        if not self.flush_scheduled:
                            self._schedule_flush()
                        return
            self.settle()
        buf = self.buf
        mark = len(buf)
        if len(entries) == 1:
            dbindex, argv = entries[0]
            if dbindex != self.seldb:
                buf += _select(dbindex)
                self.seldb = dbindex
            # encode_into, inlined for 2-4 arguments: this runs for every write.
            argc = len(argv)
            try:
                if argc == 3:
                    a0, a1, a2 = argv
                    buf += _CMD3 % (len(a0), a0, len(a1), a1, len(a2), a2)
                elif argc == 2:
                    a0, a1 = argv
                    buf += _CMD2 % (len(a0), a0, len(a1), a1)
                elif argc == 4:
                    a0, a1, a2, a3 = argv
                    buf += _CMD4 % (len(a0), a0, len(a1), a1, len(a2), a2, len(a3), a3)
                else:
                    argc = 0
            except TypeError:
                argc = 0
            if not argc:
                encode_into(buf, argv)     # other lengths, and arguments not bytes
        else:
            # MULTI goes out with no database (Valkey propagates it with
            # dbid -1): a SELECT the transaction needs follows it, inside.
            cur = self.seldb
            buf += _MULTI
            for dbindex, argv in entries:
                if dbindex != cur:
                    buf += _select(dbindex)
                    cur = dbindex
                encode_into(buf, argv)
            buf += _EXEC
            self.seldb = cur
        self.repl.master_repl_offset += len(buf) - mark
        if not self.flush_scheduled:
            self._schedule_flush()

    # ------------------------------------------------------------------
    # The verbatim path (see the module docstring)
    # ------------------------------------------------------------------
    def begin(self, client, data: bytes, commands: list):
        """A read the parser turned whole into ``commands`` (the network
        layer calls this before running them; ``end`` after)."""
        self.raw = data
        self.raw_cmds = commands
        self.raw_next = 0
        self.raw_client = client

    def end(self):
        """The read's commands ran: if every one of them was fed as it came,
        in order, and the read is the canonical encoding of them, the read
        itself is the stream (what encoding them gives, byte for byte);
        else what was held is encoded (``settle``)."""
        cmds = self.raw_cmds
        if cmds is None:
            return
        n = self.raw_next
        if n and n == len(cmds) and _verbatim(self.raw, cmds):
            data = self.raw
            self.raw = self.raw_cmds = None
            repl = self.repl
            repl.master_repl_offset += len(data)
            self.raw_client.woff = repl.master_repl_offset
            self.raw_client = None
            self.raw_reads += 1
            # Handed on at once, not copied into buf: the replicas' output
            # leaves in this turn's before_sleep with the replies.
            if self.buf:
                self.flush()
            self._distribute(data)
            return
        self.settle()

    def settle(self):
        """The commands held so far encoded (the general path), before
        anything else enters the stream or reads its offset; the rest of the
        read goes the general way."""
        cmds = self.raw_cmds
        if cmds is None:
            return
        n = self.raw_next
        client = self.raw_client
        self.raw = self.raw_cmds = self.raw_client = None
        if n:
            db = self.seldb
            for i in range(n):
                self.feed([(db, cmds[i])])
            client.woff = self.repl.master_repl_offset

    def append(self, data: bytes):
        """Raw stream bytes (PING, REPLCONF GETACK), in order with the feed."""
        if self.raw_cmds is not None:
            self.settle()
        self.buf += data
        self.repl.master_repl_offset += len(data)
        if not self.flush_scheduled:
            self._schedule_flush()

    def _schedule_flush(self):
        loop = self.server.loop
        if loop is None:
            self.flush()
            return
        self.flush_scheduled = True
        loop.call_soon(self.flush)

    def flush(self):
        """What was fed since the last flush: to the backlog, to every live
        replica's output, held for those whose RDB is on its way."""
        self.flush_scheduled = False
        if self.raw_cmds is not None:
            self.settle()          # (INFO within a read: the held commands first)
        buf = self.buf
        if not buf:
            return
        data = bytes(buf)
        self.buf = bytearray()
        self._distribute(data)

    def relay(self, data: bytes):
        """Chained replication: the stream this replica applied, as its
        primary sent it, to the backlog and the sub-replicas (Valkey's
        replicationFeedStreamFromPrimaryStream).  The offset is the
        replica side's (hotkv.replication.replica sets it)."""
        if self.buf:       # (never on a replica: its feed is not linked)
            self.flush()
        self._distribute(data)

    def _distribute(self, data: bytes):
        backlog = self.repl.backlog
        if backlog is None:          # freed (repl-backlog-ttl): nobody to send it to
            return
        backlog.append(data)
        for link in self.repl.replicas:
            if link.live:
                c = link.client
                c.out.append(data)
                if not c.flush_scheduled:
                    c.schedule_flush()
            elif link.state != WAIT_BGSAVE_START:
                link.pending.append(data)

    def _go_live(self, link):
        """Send what was held since the sync offset; the live feed follows."""
        c = link.client
        if link.pending:
            c.out.extend(link.pending)
            link.pending = []
            c.schedule_flush()
        link.live = True

    # ------------------------------------------------------------------
    # SYNC / PSYNC
    # ------------------------------------------------------------------
    def sync(self, c, argv, conf):
        """A replica asks to be synchronised; conf holds its REPLCONF
        (listening-port, ip-address, capa)."""
        repl = self.repl
        server = self.server
        psync = argv[0].lower() == b"psync"
        link = ReplicaLink(c, conf.get("port", 0), conf.get("ip"), conf.get("eof", False),
                           conf.get("psync2", False), conf.get("rdb_filter"))
        log.info("Replica %s asks for synchronization", link.name())
        # What the client was sent so far leaves before the stream; replies
        # to it stop here (Valkey never writes replies to a replica).
        c.flush()
        c.reply_mode = 1
        c.kind = "replica"
        c.hold_sooner()          # its buffer's memory counted as it is (hotkv.net.connection)
        if psync:
            if self._try_partial(link, argv[1].decode("latin-1"), int(argv[2])):
                self.sync_partial_ok += 1
                return
            if not argv[1].startswith(b"?"):
                self.sync_partial_err += 1
        else:
            link.pre_psync = True
        self.sync_full += 1
        self.links[c.id] = link
        repl.replicas.append(link)
        if repl.backlog is None:
            repl.replid = os.urandom(20).hex()
            repl.clear_replid2()
            self.create_backlog()
            log.info("Replication backlog created, my new replication IDs are '%s' and '%s'",
                     repl.replid, repl.replid2)
        values = server.config.values
        if self.job is None and not (values["repl-diskless-sync"] and link.capa_eof
                                     and values["repl-diskless-sync-delay"]):
            self.start_sync()
        elif self.job is None:
            log.info("Delay next BGSAVE for diskless SYNC")
        else:
            log.info("Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC")

    def create_backlog(self):
        repl = self.repl
        repl.backlog = Backlog(self.server.config.values["repl-backlog-size"],
                               repl.master_repl_offset + 1)
        self.server.relink_propagation()

    def _try_partial(self, link, replid: str, offset: int) -> bool:
        repl = self.repl
        if replid.lower() != repl.replid and (replid.lower() != repl.replid2
                                              or offset > repl.second_replid_offset):
            if replid.startswith("?"):
                log.info("Full resync requested by replica %s", link.name())
            elif replid.lower() not in (repl.replid, repl.replid2):
                log.info("Partial resynchronization not accepted: Replication ID mismatch "
                         "(Replica asked for '%s', my replication IDs are '%s' and '%s')",
                         replid, repl.replid, repl.replid2)
            else:
                log.info("Partial resynchronization not accepted: Requested offset for "
                         "second ID was %d, but I can reply up to %d",
                         offset, repl.second_replid_offset)
            return False
        self.flush()
        backlog = repl.backlog
        if backlog is None or not backlog.covers(offset):
            log.info("Unable to partial resync with replica %s for lack of backlog "
                     "(Replica request was: %d).", link.name(), offset)
            return False
        c = link.client
        link.state = ONLINE
        link.ack_time = time.time()
        self.links[c.id] = link
        repl.replicas.append(link)
        head = (b"+CONTINUE %s\r\n" % repl.replid.encode() if link.capa_psync2
                else b"+CONTINUE\r\n")
        tail = backlog.since(offset)
        c.out.append(head)
        c.out.extend(tail)
        c.schedule_flush()
        link.live = True
        log.info("Partial resynchronization request from %s accepted. Sending %d bytes of "
                 "backlog starting from offset %d.", link.name(), sum(map(len, tail)), offset)
        self.refresh_good()
        return True

    def start_sync(self):
        """Fork the child that writes the RDB for every replica waiting to start."""
        server = self.server
        links = [lk for lk in self.repl.replicas if lk.state == WAIT_BGSAVE_START
                 and not lk.client.closed]
        if not links or self.job is not None:
            return
        # One RDB for the replicas that want the same one (the whole dataset,
        # the functions alone, nothing); the others wait for the next job
        # (_next_sync).  A filtered RDB always goes over the socket.
        rdb_filter = links[0].rdb_filter
        links = [lk for lk in links if lk.rdb_filter == rdb_filter]
        values = server.config.values
        eof_form = (bool(values["repl-diskless-sync"]) or rdb_filter is not None) and \
            all(lk.capa_eof for lk in links)
        log.info("Starting BGSAVE for SYNC with target: %s",
                 "replicas sockets" if eof_form else "disk")
        load_prctl()
        rfd, wfd = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as e:
            os.close(rfd)
            os.close(wfd)
            log.warning("BGSAVE for replication failed: fork: %s", e.strerror)
            for lk in links:
                self._drop(lk, b"-ERR BGSAVE failed, replication can't continue\r\n")
            return
        if pid == 0:  # pragma: no cover - the child
            run_child(parent, lambda: rdbfile.write_dataset(server, wfd, rdb_filter=rdb_filter),
                      "Replication RDB child", keep=(wfd,))
        os.close(wfd)
        os.set_blocking(rfd, False)
        self.flush()       # what came before the fork is in the RDB, not in their stream
        mark = os.urandom(20).hex().encode() if eof_form else b""
        offset = self.repl.master_repl_offset
        self.seldb = -1          # the stream after the RDB starts with a SELECT
        self.job = job = _SyncJob(pid, rfd, links, eof_form, mark)
        for lk in links:
            lk.state = WAIT_BGSAVE_END
            lk.eof_form = eof_form
            lk.sync_offset = offset
            # An old SYNC (valkey-cli --replica) gets the payload alone.
            head = b"" if lk.pre_psync else \
                b"+FULLRESYNC %s %d\r\n" % (self.repl.replid.encode(), offset)
            if eof_form:
                head += b"$EOF:" + mark + b"\r\n"
            self._write(lk, head)
        log.info("Background RDB transfer started by pid %d", pid)
        server.loop.add_reader(rfd, self._readable)
        _ = job

    def _write(self, link, data):
        link.client.send_raw(data)   # counted as output (hotkv.net.connection)

    def _readable(self):
        job = self.job
        if job is None:
            return
        for _ in range(READS_PER_TURN):
            try:
                data = os.read(job.fd, READ_CHUNK)
            except BlockingIOError:
                return
            except OSError as e:
                log.warning("Reading the replication RDB child's pipe failed: %s", e)
                data = b""
            if not data:
                self._child_eof()
                return
            job.size += len(data)
            if job.eof_form:
                alive = False
                for lk in job.links:
                    if not lk.client.closed:
                        alive = True
                        self._write(lk, data)
                if not alive:
                    self._abort_job("no replica left")
                    return
                if any(not lk.client.closed
                       and lk.client.transport_backlog() > OUT_HIGH
                       for lk in job.links):
                    self._pause_reading()
                    return
            else:
                job.chunks.append(data)

    def _pause_reading(self):
        job = self.job
        job.reading = False
        self.server.loop.remove_reader(job.fd)
        self.server.loop.call_later(0.01, self._maybe_resume)

    def _maybe_resume(self):
        job = self.job
        if job is None or job.reading:
            return
        if any(not lk.client.closed and lk.client.transport_backlog() > OUT_HIGH
               for lk in job.links):
            self.server.loop.call_later(0.01, self._maybe_resume)
            return
        job.reading = True
        self.server.loop.add_reader(job.fd, self._readable)

    def _reap(self, job) -> int:
        try:
            _, status = os.waitpid(job.pid, 0)
        except ChildProcessError:
            return 1 << 8
        return status

    def _close_job(self, job):
        if job.reading:
            self.server.loop.remove_reader(job.fd)
        os.close(job.fd)
        self.job = None

    def _abort_job(self, why: str):
        job = self.job
        self._close_job(job)
        try:
            os.kill(job.pid, signal.SIGKILL)
        except OSError:
            pass
        self._reap(job)
        log.warning("Replication RDB child killed: %s", why)
        self._next_sync()

    def _child_eof(self):
        job = self.job
        self._close_job(job)
        status = self._reap(job)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if not ok:
            log.warning("Background transfer error (child status %d)", status)
            for lk in job.links:
                self._drop(lk, b"")
            self._next_sync()
            return
        log.info("Background RDB transfer terminated with success (%d bytes)", job.size)
        now = time.time()
        if not job.eof_form:
            head = b"$%d\r\n" % job.size
        for lk in job.links:
            if lk.client.closed:
                continue
            if job.eof_form:
                self._write(lk, job.mark)
                log.info("Streamed RDB transfer with replica %s succeeded (socket). "
                         "Waiting for REPLCONF ACK from replica to enable streaming",
                         lk.name())
            else:
                self._write(lk, head)
                for chunk in job.chunks:
                    self._write(lk, chunk)
                log.info("Synchronization with replica %s succeeded", lk.name())
            lk.state = ONLINE
            lk.ack_time = now
            if not job.eof_form:
                self._go_live(lk)
        job.chunks = []
        self.refresh_good()
        self._next_sync()

    def _next_sync(self):
        if any(lk.state == WAIT_BGSAVE_START for lk in self.repl.replicas):
            self.start_sync()

    def _drop(self, link, message: bytes):
        c = link.client
        if message and not c.closed:
            self._write(link, message)
        if not c.closed:
            c.close()
        self.gone(c)

    # ------------------------------------------------------------------
    # A replica's life
    # ------------------------------------------------------------------
    def gone(self, c):
        """The replica's connection closed (Server.client_gone)."""
        link = self.links.pop(c.id, None)
        if link is None:
            return
        try:
            self.repl.replicas.remove(link)
        except ValueError:
            pass
        log.info("Connection with replica %s lost.", link.name())
        job = self.job
        if job is not None and link in job.links and job.eof_form and \
                all(lk.client.closed for lk in job.links):
            self._abort_job("no replica left")
        self.refresh_good()
        self.check_waits()

    def ack(self, c, offset: int, aof_off: int | None):
        link = self.links.get(c.id)
        if link is None:
            return
        if offset > link.ack_off:
            link.ack_off = offset
        if aof_off is not None and aof_off > link.aof_off:
            link.aof_off = aof_off
        link.ack_time = time.time()
        if link.state == ONLINE and not link.live:
            log.info("Synchronization with replica %s succeeded", link.name())
            self._go_live(link)
            self.refresh_good()
        if self.waits:
            self.check_waits()

    def refresh_good(self):
        """Valkey's refreshGoodReplicasCount and the NOREPLICAS gate."""
        values = self.server.config.values
        max_lag = values["min-replicas-max-lag"]
        now = time.time()
        self.good = sum(1 for lk in self.repl.replicas
                        if lk.state == ONLINE and now - lk.ack_time <= max_lag)
        want = values["min-replicas-to-write"]
        refuse = bool(want and max_lag and self.good < want and self.repl.role == "master")
        if self.server.repl_refuse != refuse:
            self.server.repl_refuse = refuse

    # ------------------------------------------------------------------
    # WAIT / WAITAOF
    # ------------------------------------------------------------------
    def count_acks(self, offset: int, aof: bool = False) -> int:
        if aof:
            return sum(1 for lk in self.repl.replicas
                       if lk.state == ONLINE and lk.aof_off >= offset)
        return sum(1 for lk in self.repl.replicas if lk.state == ONLINE and lk.ack_off >= offset)

    def wait(self, c, offset: int, numreplicas: int, numlocal: int, deadline: int, reply):
        """Block c until enough replicas acked offset (WAIT: numlocal -1)."""
        result = block(c, (), deadline, "wait", reply)
        if result is not BLOCKED:
            return result
        self.waits.append(_Wait(c, c.blocked, offset, numreplicas, numlocal))
        self.request_acks()
        return BLOCKED

    def request_acks(self):
        if not self.getack_scheduled and self.server.loop is not None:
            self.getack_scheduled = True
            self.server.loop.call_soon(self._send_getack)

    def _send_getack(self):
        self.getack_scheduled = False
        if self.repl.replicas and self.repl.backlog is not None \
                and self.server.pause_check is None:
            self.append(_GETACK)

    def _reply_for(self, w):
        acked = self.count_acks(w.offset, aof=w.numlocal >= 0)
        if w.numlocal < 0:
            return acked, acked >= w.numreplicas
        local = 1 if self.local_synced() else 0
        return [local, acked], acked >= w.numreplicas and local >= w.numlocal

    def local_synced(self) -> bool:
        """WAITAOF's numlocal: every record the AOF was fed is written and
        fsynced (hotkv's AOF writes before replies leave; 'always' fsyncs
        then, 'everysec' within the second: the cron re-checks)."""
        w = self.server.aof_writer
        # While the AOF is being turned on (its first rewrite runs) nothing
        # counts as fsynced yet, as Valkey's fsynced_reploff.
        return w is not None and w.state == AOF_ON and not w.buf and not w.unsynced

    def check_waits(self):
        keep = []
        aof_off = not self.server.config.values["appendonly"]
        demoted = self.repl.role != "master"
        for w in self.waits:
            if w.client.blocked is not w.waiter:
                continue            # timed out, killed or unblocked
            if demoted:             # REPLICAOF: Valkey's disconnectAllBlockedClients
                unblock(w.client, error=UNBLOCKED_DEMOTED)
                continue
            if w.numlocal > 0 and aof_off:
                unblock(w.client, error=WAITAOF_NO_AOF)
                continue
            reply, done = self._reply_for(w)
            if done:
                unblock(w.client, reply)
            else:
                w.waiter.timeout_reply = reply
                keep.append(w)
        self.waits = keep

    # ------------------------------------------------------------------
    # Cron
    # ------------------------------------------------------------------
    def cron(self):
        server = self.server
        values = server.config.values
        repl = self.repl
        now_m = time.monotonic()
        if self.waits:
            self.check_waits()      # WAITAOF's local fsync; replicas gone
        if self.job is None:
            waiting = [lk for lk in repl.replicas if lk.state == WAIT_BGSAVE_START]
            if waiting:
                delay = values["repl-diskless-sync-delay"]
                most = values["repl-diskless-sync-max-replicas"]
                idle = now_m - min(lk.wait_since for lk in waiting)
                if (idle >= delay or (most and len(waiting) >= most)
                        or not values["repl-diskless-sync"]):
                    self.start_sync()
        if repl.backlog is not None and repl.replicas and repl.role == "master" and \
                now_m - self.last_ping >= values["repl-ping-replica-period"]:
            self.last_ping = now_m
            if server.pause_check is None:
                self.append(_PING)
        if now_m - self.last_second < 1.0:
            return
        self.last_second = now_m
        now = time.time()
        ttl = values["repl-backlog-ttl"]
        if repl.replicas or repl.backlog is None or repl.role != "master":
            self.no_replicas_since = now_m
        elif ttl and now_m - self.no_replicas_since > ttl:
            # Nobody can PSYNC from it any more: writes stop feeding it.
            self.flush()
            repl.backlog = None
            repl.replid = os.urandom(20).hex()
            repl.clear_replid2()
            server.relink_propagation()
            log.info("Replication backlog freed after %d seconds without connected replicas.",
                     ttl)
        timeout = values["repl-timeout"]
        hard, soft, secs = _replica_limits(values["client-output-buffer-limit"])
        for lk in list(repl.replicas):
            if lk.client.closed:
                self.gone(lk.client)
                continue
            if lk.live and (hard or soft) and self._over_limit(lk, hard, soft, secs, now):
                continue
            if lk.state == WAIT_BGSAVE_START or (lk.state == WAIT_BGSAVE_END
                                                 and not lk.eof_form):
                self._write(lk, b"\n")
            elif lk.state == ONLINE and not lk.pre_psync and now - lk.ack_time > timeout:
                log.warning("Disconnecting timedout replica (streaming sync): %s", lk.name())
                lk.client.close()
                self.gone(lk.client)
        self.refresh_good()

    def _over_limit(self, lk, hard, soft, secs, now) -> bool:
        """client-output-buffer-limit's replica class (checked once a second)."""
        c = lk.client
        size = c.output_size()
        if (hard and size >= hard) or (soft and size >= soft and c.output_soft_since
                                       and now - c.output_soft_since >= secs):
            limits.output_limit_reached(self.server, c, size)
            self.gone(c)
            return True
        if soft and size >= soft:
            if not c.output_soft_since:
                c.output_soft_since = now
        else:
            c.output_soft_since = 0.0
        return False

    def stop(self):
        """At shutdown: the sync child goes."""
        if self.job is not None:
            self._abort_job("shutdown")


def _verbatim(data: bytes, commands: list) -> bool:
    """Whether ``data`` (a read hiredis parsed whole into ``commands``, of
    bulk strings only) is their canonical encoding, as ``encode_into``
    writes it.  hiredis checks the headers' numbers as Valkey does (no sign,
    no leading zero) but skips the two bytes after each bulk string
    unchecked, and the parser's screen lets a non-``$`` element through
    when it follows such bytes.  So: no argument holds a CR, and the read
    holds exactly one CRLF per header and per argument's end -- each
    element holds at most its share of CRLFs (its header's, its end's: none
    inside without a CR), so the count is short if any end is not CRLF or
    any element is not a ``$`` bulk string.  Two C-level passes over the
    read, once per read."""
    nargs = sum(map(len, commands))
    if data.count(b"\r\n") != len(commands) + 2 * nargs:
        return False
    return b"\r" not in _join(_chain.from_iterable(commands))


def info_fields(server, now: float) -> list:
    """INFO replication's fields after the role's own (both roles): the
    replicas' lines, the replication ids and offsets, the backlog's."""
    repl = server.repl
    return replica_lines(server, now) + [
        ("replicas_waiting_psync", 0),
        ("master_failover_state", "no-failover"),
        ("master_replid", repl.replid),
        ("master_replid2", repl.replid2),
        ("master_repl_offset", repl.master_repl_offset),
        ("second_repl_offset", repl.second_replid_offset),
    ] + repl.backlog_fields()


def replica_lines(server, now: float) -> list:
    """INFO replication's connected_slaves, min_slaves_good_slaves and
    slaveN fields (both roles: a replica lists its sub-replicas)."""
    repl = server.repl
    lines = []
    for i, lk in enumerate(repl.replicas):
        ip = lk.ip or lk.client.addr.rsplit(":", 1)[0].strip("[]")
        lines.append(("slave%d" % i, "ip=%s,port=%d,state=%s,offset=%d,lag=%d,type=replica"
                      % (ip, lk.port, STATE_NAMES[lk.state], lk.ack_off,
                         int(now - lk.ack_time))))
    out = [("connected_slaves", len(lines))]
    values = server.config.values
    primary = repl.primary
    if primary is not None and values["min-replicas-to-write"] \
            and values["min-replicas-max-lag"]:
        out.append(("min_slaves_good_slaves", primary.good))
    return out + lines


__all__ = ["Primary", "ReplicaLink", "STATE_NAMES", "ONLINE", "replica_lines"]
