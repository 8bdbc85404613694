"""The AOF writer: ``AOF``, the object the server feeds.

Owns the multi-part AOF (hotkv/persistence/aof/manifest.py: a base file and incr
files in ``<dir>/<appenddirname>/``), the descriptor and size of the incr
file being appended to, the buffer of records not yet written, the fsync
policies and their thread, the disk-error state, turning the AOF on and
off (``start``, ``stop``, CONFIG SET appendonly / appendfsync), cron and
the INFO persistence fields.  The rewrite's parent side comes from
``RewriteMixin`` (hotkv.persistence.aof.rewrite), loading from ``LoadMixin``
(hotkv.persistence.aof.loader).

How a write reaches the disk (the dispatcher hands us each outermost call's
deterministic ``(db, argv)`` entries through ``feed``):
* ``feed`` encodes them into ``buf``; replies wait for the server's
  before-sleep pass, as every reply does (hotkv.net.connection);
* the before-sleep hook writes ``buf`` with one write(2) -- and, with
  ``appendfsync always``, one fdatasync for every client of the loop turn
  (group commit) -- and only then does the server hand replies to sockets;
* ``everysec``: a thread fsyncs once a second, off the event loop;
  ``no``: the kernel decides.
So after a process crash every acknowledged write is in the file, and with
``always`` it also survives a machine crash.

Disk faults under ``everysec`` and ``no``: a failed write(2)/fsync sets
``server.disk_error`` to Redis's ``MISCONF`` text (the dispatcher then
refuses writes and serves reads) and ``aof_last_write_status:err``.  The
replies of that loop turn are *held*
(their output is taken off the clients and the barrier stays up, so no
flush path -- not even shutdown -- sends them): a write is never
acknowledged before its record reached the file.  Cron retries; when a
write succeeds again the error clears and the held replies go out.  A
partial write is cut back with ftruncate so the file never ends inside a
record we still hold (a short write counts as ENOSPC, as Valkey reports it).

With ``appendfsync always`` a failed write(2) or fdatasync is fatal, as in
Valkey's flushAppendOnlyFile: the server logs "Can't recover from AOF write
error when the AOF fsync policy is 'always'. Exiting..." (or, for the fsync,
"Can't persist AOF for fsync error ...") and exits with status 1.  The
replies of that turn -- the writes' and those of the reads that saw them --
are dropped, never sent, and nothing more is written: the process ends
instead of serving a dataset that is ahead of its file.  Run by the command
line (``hotkv serve``: the process is the server's, which its
``SignalShutdown`` marks by setting ``server.abort_shutdown``) that is
``os._exit(1)`` with no final save, as Valkey's exit(1); embedded in another
process, every client connection is closed at once and the server is
stopped through ``server.shutdown_cb`` (no final save either), so the host
process lives on.

Invariants:
* ``buf`` holds only complete records, appended in feed order; the file
  holds a prefix of the records fed (plus, briefly, a written part of one
  record that is cut back or completed);
* no reply leaves before the record it acknowledges: replies leave in the
  server's before-sleep pass, after this module's hook wrote ``buf``, and
  ``held`` keeps those whose records could not be written;
* records go to one file at a time, the last incr file of the manifest (or,
  while the AOF is being turned on, the rewrite's temp incr file); a new
  incr file starts with a SELECT (``cur_db`` is reset when it is opened);
* ``current_size`` is the base's and incr files' bytes (Valkey's
  aof_current_size), ``last_incr_size`` the bytes of the file appended to;
* ``server.aof_writer is self`` exactly when the AOF is on, or is being turned on
  while a rewrite runs, and is not loading (``_attach``).
"""

from __future__ import annotations

import collections
import errno as _errno
import logging
import os
import threading
import time

from ...clients.pubsub import ReplOnly
from ...core.config import PARAMS, param
from .files import (
    _EXEC,
    _MULTI,
    OFF,
    ON,
    WAIT_REWRITE,
    _fsync,
    _select,
    _unlink,
    encode_into,
)
from .loader import LoadMixin
from .manifest import Manifest, load, persist
from .rewrite import RewriteMixin, write_file

log = logging.getLogger("hotkv")

# Settings this module owns beyond those declared in hotkv/core/config.py.
param("aof-rewrite-incremental-fsync", "bool", True, inert=True)
param("aof-timestamp-enabled", "bool", False, inert=True)
# Declared inert in hotkv/core/config.py and its table; the multi-part AOF acts on them.
for _name in ("appenddirname", "aof-disable-auto-gc"):
    if _name in PARAMS:
        PARAMS[_name].inert = False

MISCONF = "MISCONF Errors writing to the AOF file: %s"
# Valkey's lines for a failed write / fsync under 'always', before exit(1).
FATAL_WRITE = "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."
FATAL_FSYNC = ("Can't persist AOF for fsync error when the AOF fsync policy is 'always': %s. "
               "Exiting...")
# Valkey's AOF_WRITE_LOG_ERROR_RATE: at most one write-error line in this many seconds.
_LOG_RATE = 30


# ----------------------------------------------------------------------
# The fsync thread (everysec), Redis's bio
# ----------------------------------------------------------------------

class _Bio(threading.Thread):
    def __init__(self):
        super().__init__(name="hotkv-aof-fsync", daemon=True)
        self.jobs = collections.deque()
        self.cond = threading.Condition()
        self.pending_fsync = 0
        self.error = 0           # errno of the last failed fsync, 0 when fine

    def submit(self, kind: str, fd: int, done=None, data=None):
        """kind: "fsync" (the AOF: counted, errors kept in ``error``),
        "close", or "unlink" (``data`` is the path: history files)."""
        with self.cond:
            if kind == "fsync":
                self.pending_fsync += 1
            self.jobs.append((kind, fd, done, data))
            self.cond.notify()

    def stop(self):
        with self.cond:
            self.jobs.append(None)
            self.cond.notify()

    def run(self):
        while True:
            with self.cond:
                while not self.jobs:
                    self.cond.wait()
                job = self.jobs.popleft()
            if job is None:
                return
            kind, fd, done, data = job
            if kind == "fsync":
                try:
                    _fsync(fd)
                    self.error = 0
                except OSError as e:
                    if e.errno != _errno.EBADF:
                        self.error = e.errno or _errno.EIO
                with self.cond:
                    self.pending_fsync -= 1
            elif kind == "unlink":
                try:
                    os.unlink(data)
                except OSError:
                    pass
            else:
                try:
                    os.close(fd)
                except OSError:
                    pass


# ----------------------------------------------------------------------
# The AOF
# ----------------------------------------------------------------------

class AOF(RewriteMixin, LoadMixin):
    def __init__(self, server):
        self.server = server
        values = server.config.values
        self.state = OFF
        self.start_cwd = os.getcwd()
        self.fsync_mode = values["appendfsync"]
        self.fd = None
        self.path = None
        self.buf = bytearray()
        self.cur_db = -1
        self.loading = False
        self.manifest = None         # hotkv.persistence.aof.manifest.Manifest, read on first need
        self.current_size = 0        # base + incr files (aof_current_size)
        self.last_incr_size = 0      # the incr file appended to
        self.base_size = 0           # current_size after the last rewrite
        self.unsynced = False        # written since the last fsync
        self.last_fsync = time.monotonic()
        self.bio = None
        # disk errors
        self.write_errno = 0
        self.fsync_errno = 0
        self.held: list = []
        self.last_error_log = 0.0
        self.fatal = False           # a failed write under 'always': the server is going
        # rewrite
        self.rw_pid = 0
        self.rw_tmp = None
        self.rw_preamble = True      # aof-use-rdb-preamble as of the fork
        self.rw_start = 0.0
        self.rw_scheduled = False
        self.rw_limit_delay = 0      # _rewrite_limited: minutes, 0 when not limited
        self.rw_limit_until = 0.0
        self.rw_last_time = -1
        self.rw_last_ok = True
        self.rw_count = 0
        self.rw_failures = 0
        # loading statistics
        self.loaded_commands = 0
        self.loaded_keys = 0
        self.load_seconds = 0.0
        self.load_truncated_at = None
        listeners = server.config.listeners
        listeners["appendonly"] = self._set_appendonly
        listeners["appendfsync"] = self._set_appendfsync

    # -- paths --------------------------------------------------------------
    def server_dir(self) -> str:
        # A relative dir means relative to where the server started: ``hotkv
        # serve`` chdirs into dir after the server (and this object) exist.
        return os.path.abspath(os.path.join(self.start_cwd,
                                            self.server.config.values["dir"] or "."))

    def dir_path(self) -> str:
        """``<dir>/<appenddirname>``: the manifest and the files it names."""
        return os.path.join(self.server_dir(), self.server.config.values["appenddirname"])

    def filename(self) -> str:
        return self.server.config.values["appendfilename"]

    def file_path(self) -> str:
        """``<dir>/<appendfilename>``: where an old single-file AOF is."""
        return os.path.join(self.server_dir(), self.filename())

    def ensure_manifest(self) -> Manifest:
        """The manifest, read from disk the first time (ManifestError)."""
        if self.manifest is None:
            self.manifest = load(self.dir_path(), self.filename()) or Manifest()
        return self.manifest

    @property
    def rewriting(self) -> bool:
        return bool(self.rw_pid)

    def _attach(self):
        """Propagation reaches us only while someone needs the records."""
        state = self.state
        needed = (state == ON or state == WAIT_REWRITE and self.fd is not None) \
            and not self.loading
        self.server.attach_aof(self if needed else None)

    # -- feeding ------------------------------------------------------------
    def feed(self, entries):
        """One outermost call's (dbindex, argv) entries: one atomic record."""
        if self.fd is None or self.loading or self.fatal:
            return
        if len(entries) == 1:
            # The usual record: one command, no rewrite running.
            dbindex, argv = entries[0]
            if argv.__class__ is ReplOnly:
                return      # PUBLISH: for the replicas only
            buf = self.buf
            if not buf:
                self.server.wake()
            if dbindex != self.cur_db:
                buf += _select(dbindex)
                self.cur_db = dbindex
            encode_into(buf, argv)
            return
        out = bytearray()
        cur = self.cur_db
        multi = len(entries) > 1
        if multi:
            out += _MULTI    # a SELECT goes inside, before the first command (as Valkey)
        for dbindex, argv in entries:
            if argv.__class__ is ReplOnly:
                continue    # the unit stays a MULTI/EXEC, as Valkey's AOF has it
            if dbindex != cur:
                out += _select(dbindex)
                cur = dbindex
            encode_into(out, argv)
        if multi:
            out += _EXEC
        self.cur_db = cur
        if not self.buf:
            self.server.wake()
        self.buf += out

    # -- writing ------------------------------------------------------------
    def before_sleep(self):
        """Before replies leave: write (and with 'always', fsync) the buffer."""
        if not self.buf:
            return
        if self.write_errno or self.fsync_errno:
            return       # cron retries; replies of this turn are held
        ok = self._write_buf()
        if ok and self.fsync_mode == "always":
            ok = self._fsync_now()
        if not ok:
            self._hold_pending()

    def _hold_pending(self):
        """Keep this turn's replies: their writes are not in the file.  The
        output is taken off the client too, so no flush at all (QUIT, server
        shutdown) can send it; flush_scheduled stays True, so the client is
        not queued again and its later replies wait behind the held ones."""
        server = self.server
        if server.pending_flush:
            for client in server.pending_flush:
                self.held.append((client, client.out))
                client.out = []
            server.pending_flush = []

    def _release_held(self):
        held, self.held = self.held, []
        for client, out in held:
            out.extend(client.out)
            client.out = out
            client.flush_scheduled = False
            client.schedule_flush()
        self.server.wake()

    def _write_buf(self) -> bool:
        buf = self.buf
        fd = self.fd
        if fd is None:
            return True
        total = len(buf)
        done = 0
        err = 0
        view = memoryview(buf)
        try:
            while done < total:
                done += os.write(fd, view[done:])
        except OSError as e:
            err = e.errno or _errno.EIO
        finally:
            view.release()
        if not err:
            self.buf = bytearray()
            self.current_size += total
            self.last_incr_size += total
            self.unsynced = True
            if self.write_errno:
                self._write_ok()
            return True
        self._write_failed(err, done, total)
        return False

    def _fsync_now(self) -> bool:
        try:
            _fsync(self.fd)
        except OSError as e:
            self._fsync_failed(e.errno or _errno.EIO)
            return False
        self.unsynced = False
        self.last_fsync = time.monotonic()
        if self.fsync_errno:
            self.fsync_errno = 0
            self._maybe_clear_error()
        return True

    def _can_log(self) -> bool:
        """Valkey's rate limit on the write-error lines."""
        now = time.monotonic()
        if self.last_error_log and now - self.last_error_log <= _LOG_RATE:
            return False
        self.last_error_log = now
        return True

    def _write_failed(self, err: int, done: int, total: int):
        """Valkey's flushAppendOnlyFile after a write that did not take it
        all: the log line, a short write cut back (and counted as ENOSPC),
        then exit under 'always' or the MISCONF state otherwise."""
        can_log = self._can_log()
        if done:
            if can_log:
                log.warning("Short write while writing to the AOF file: (nwritten=%d, "
                            "expected=%d)", done, total)
            try:
                os.ftruncate(self.fd, self.last_incr_size)
            except OSError as e:
                # Keep what was written and drop it from the buffer: the
                # rest completes it on the next try.
                if can_log:
                    log.warning("Could not remove short write from the append-only file. The "
                                "server may refuse to load the AOF the next time it starts.  "
                                "ftruncate: %s", e.strerror)
                del self.buf[:done]
                self.current_size += done
                self.last_incr_size += done
            err = _errno.ENOSPC
        elif can_log:
            log.warning("Error writing to the AOF file: %s", os.strerror(err))
        if self.fsync_mode == "always":
            self._fatal_exit(FATAL_WRITE, err)
            return
        self.write_errno = err
        self.server.disk_error = MISCONF % os.strerror(err)

    def _fsync_failed(self, err: int):
        if self.fsync_mode == "always":
            self._fatal_exit(FATAL_FSYNC % os.strerror(err), err)
            return
        self._fsync_error(err)

    def _fsync_error(self, err: int):
        """An fsync failed outside 'always' (or on the fsync thread): MISCONF."""
        first = not self.fsync_errno
        self.fsync_errno = err
        self.server.disk_error = MISCONF % os.strerror(err)
        if first:
            log.warning("Fail to fsync the AOF file: %s", os.strerror(err))

    def _fatal_exit(self, line: str, err: int):
        """Valkey's exit(1) under 'always' (see the module docstring): no
        reply of this turn leaves, nothing more is written, no final save."""
        log.warning("%s", line)
        server = self.server
        self.fatal = True
        self.buf = bytearray()
        self.held = []
        for client in server.pending_flush:
            client.out = []          # flush_scheduled stays set: never queued again
        server.pending_flush = []
        server.disk_error = MISCONF % os.strerror(err)   # until the stop: writes refused
        server.shutdown_saved = True     # Server.shutdown: no final save
        if self.fd is not None:
            self._close_fd(self.fd)
            self.fd = None
        self.state = OFF
        self._attach()
        if server.abort_shutdown is not None:
            # ``hotkv serve``: the process is the server's; end it as Valkey does.
            logger = log
            while logger is not None:
                for handler in logger.handlers:
                    try:
                        handler.flush()
                    except Exception:
                        pass
                logger = logger.parent
            os._exit(1)
        # Embedded: the host process lives on; the server stops, its
        # clients are cut off at once (their output dropped).
        for client in list(server.clients.values()):
            kill = getattr(client, "kill", None)
            if kill is not None:
                client.out = []
                kill()
        if server.shutdown_cb is not None:
            server.shutdown_cb()

    def _write_ok(self):
        self.write_errno = 0
        self._maybe_clear_error()

    def _maybe_clear_error(self):
        if not self.write_errno and not self.fsync_errno and not (
                self.bio is not None and self.bio.error):
            if self.server.disk_error is not None and self.server.disk_error.startswith(
                    "MISCONF Errors writing to the AOF"):
                self.server.disk_error = None
                log.warning("AOF write error looks solved. The server can write again.")

    def _clear_errors(self):
        self.write_errno = self.fsync_errno = 0
        if self.bio is not None:
            self.bio.error = 0
        self._maybe_clear_error()
        if self.held:
            self._release_held()

    def _retry(self):
        """Cron: try again after a disk error."""
        if self.fd is None:
            return
        ok = True
        if self.buf:
            saved, self.write_errno = self.write_errno, 0
            ok = self._write_buf()
            if not ok and not self.write_errno:
                self.write_errno = saved
        if ok and (self.fsync_errno or self.fsync_mode == "always"
                   or (self.bio is not None and self.bio.error)):
            ok = self._fsync_now()
            if ok and self.bio is not None:
                self.bio.error = 0
        if ok:
            self._clear_errors()

    # -- opening and closing ------------------------------------------------
    def _ensure_bio(self):
        if self.bio is None or not self.bio.is_alive():
            self.bio = _Bio()
            self.bio.start()

    def _close_fd(self, fd):
        if self.bio is not None and self.bio.is_alive():
            self.bio.submit("close", fd)
        else:
            try:
                os.close(fd)
            except OSError:
                pass

    def start(self):
        """After loading, Valkey's aofOpenIfNeededOnServerStart: an AOF with
        no file at all gets a base (the dataset, empty) at once; the last
        incr file (or a new one) is opened for appending; the manifest is
        persisted if that changed it; history files left by a crash go.
        OSError / ManifestError stop the start."""
        directory = self.dir_path()
        filename = self.filename()
        os.makedirs(directory, exist_ok=True)
        manifest = self.ensure_manifest()
        preamble = bool(self.server.config.values["aof-use-rdb-preamble"])
        if manifest.empty:
            name = manifest.new_base(filename, preamble)
            tmp = os.path.join(self.server_dir(), "temp-rewriteaof-%d.aof" % os.getpid())
            try:
                write_file(self.server, tmp, self.server.clock.ms(), preamble)
                os.rename(tmp, os.path.join(directory, name))
            finally:
                _unlink(tmp)
            log.info("Creating AOF base file %s on server start", name)
        created = not manifest.incr
        name = manifest.last_incr(filename)
        path = os.path.join(directory, name)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if manifest.dirty:
                persist(directory, filename, manifest)
        except OSError:
            os.close(fd)
            raise
        self.fd = fd
        self.path = path
        self.cur_db = -1
        self.last_incr_size = os.fstat(fd).st_size
        log.info("%s AOF incr file %s on server start", "Creating" if created else "Opening",
                 name)
        self.state = ON
        self._ensure_bio()
        self._attach()
        self.delete_history()

    def delete_history(self):
        """Unlink the history files on the fsync thread and drop them from
        the manifest (Valkey's aofDelHistoryFiles; aof-disable-auto-gc keeps
        them).  A failure here only leaves files behind."""
        manifest = self.manifest
        if manifest is None or not manifest.history or \
                self.server.config.values.get("aof-disable-auto-gc"):
            return
        directory = self.dir_path()
        self._ensure_bio()
        for info in manifest.history:
            log.info("Removing the history file %s in the background", info.name)
            self.bio.submit("unlink", -1, None, os.path.join(directory, info.name))
        manifest.history = []
        manifest.dirty = True
        try:
            persist(directory, self.filename(), manifest)
        except OSError as e:
            log.warning("Can't write the AOF manifest in %s: %s", directory, e.strerror)

    def stop(self, final: bool = False):
        """Flush, fsync and close; the AOF is off afterwards."""
        self.kill_rewrite()
        if self.fd is not None:
            if self.buf:
                self.write_errno = 0      # one last try (fatal under 'always', as Valkey's)
                self._write_buf()
        if self.fd is not None:
            try:
                _fsync(self.fd)
            except OSError:
                pass
            # Through the fsync thread: an fsync it still has queued must not
            # hit a reused descriptor number.
            self._close_fd(self.fd)
            self.fd = None
        self.state = OFF
        self.buf = bytearray()
        self.last_incr_size = 0
        self.write_errno = self.fsync_errno = 0
        if self.bio is not None:
            self.bio.error = 0
        self._maybe_clear_error()
        if final:
            self.held = []     # never acknowledged: those writes are not on disk
        elif self.held:
            self._release_held()   # AOF turned off: nothing to wait for any more
        self._attach()
        if final and self.bio is not None:
            self.bio.stop()
            self.bio.join(5)
            self.bio = None

    # -- config ---------------------------------------------------------------
    def _set_appendonly(self, value):
        if value and self.state == OFF:
            self.state = WAIT_REWRITE
            if self.rewriting:
                # It writes no incr file for this: start one that does.
                self.kill_rewrite()
            running = self.server.current_client
            if self.server.snapshots.in_progress:
                self.rw_scheduled = True     # one child at a time: cron starts it
            elif running is not None and running.in_exec:
                # No fork inside a transaction (as BGREWRITEAOF): cron starts it.
                self.rw_scheduled = True
                log.info("AOF enabled inside a transaction: the AOF background was "
                         "scheduled to start when possible.")
            else:
                self.start_rewrite()
        elif not value and self.state != OFF:
            self.stop()

    def _set_appendfsync(self, value):
        self.fsync_mode = value
        if value == "always" and self.fd is not None and self.unsynced:
            if self._fsync_now():
                pass

    # -- cron -----------------------------------------------------------------
    def cron(self):
        if self.rw_pid:
            self._poll_rewrite()
        if self.write_errno or self.fsync_errno or (self.bio is not None and self.bio.error):
            if self.bio is not None and self.bio.error and not self.fsync_errno:
                self._fsync_error(self.bio.error)    # the thread's: never fatal
            self._retry()
        # (the temp incr file of an enabling rewrite too, as Valkey)
        if self.fd is not None and self.fsync_mode == "everysec" \
                and self.unsynced and not self.fsync_errno:
            now = time.monotonic()
            if now - self.last_fsync >= 1.0 and self.bio is not None and \
                    self.bio.pending_fsync == 0:
                self.unsynced = False
                self.last_fsync = now
                self.bio.submit("fsync", self.fd)
        if not self.rewriting:
            self.cron_rewrite()

    # -- INFO ---------------------------------------------------------------------
    def info_fields(self) -> dict:
        ok = not (self.write_errno or self.fsync_errno or (self.bio is not None and self.bio.error))
        running = self.rewriting
        fields = {
            "aof_enabled": int(self.state != OFF),
            "aof_rewrite_in_progress": int(running),
            "aof_rewrite_scheduled": int(self.rw_scheduled),
            "aof_last_rewrite_time_sec": self.rw_last_time,
            "aof_current_rewrite_time_sec":
                int(time.monotonic() - self.rw_start) if running else -1,
            "aof_last_bgrewrite_status": "ok" if self.rw_last_ok else "err",
            "aof_rewrites": self.rw_count,
            "aof_rewrites_consecutive_failures": self.rw_failures,
            "aof_last_write_status": "ok" if ok else "err",
            "aof_last_cow_size": 0,
            "module_fork_in_progress": 0,
            "module_fork_last_cow_size": 0,
        }
        if self.state != OFF:
            fields.update({
                "aof_current_size": self.current_size,
                "aof_base_size": self.base_size,
                "aof_pending_rewrite": int(self.rw_scheduled),
                "aof_buffer_length": len(self.buf),
                "aof_pending_bio_fsync": self.bio.pending_fsync if self.bio is not None else 0,
                "aof_delayed_fsync": 0,
            })
        return fields
