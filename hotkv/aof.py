"""The append-only file: nothing acknowledged is lost.

Owns the ``AOF`` object (``server.aof_manager``, always there): the file
``<dir>/<appendfilename>``, the buffer of records not yet written, the
everysec fsync thread, the background rewrite, loading at start-up, and the
disk-error state.  ``server.aof`` -- what the dispatcher propagates to -- is
the same object while the AOF is on or a rewrite runs, and None otherwise,
so a server without AOF pays nothing for propagation.

Format: a plain sequence of RESP multibulk commands, ``SELECT`` whenever the
database changes, a multi-command unit (a MULTI/EXEC that wrote more than
one command, a command plus the lazy-expiry DELs it caused) wrapped in
``MULTI`` ... ``EXEC`` -- exactly what ``valkey-check-aof`` and
``valkey-cli --pipe`` read, so the file can be replayed into Valkey/Redis.

How a write reaches the disk (the dispatcher hands us each outermost call's
deterministic ``(db, argv)`` entries through ``feed``):
* ``feed`` encodes them into ``buf``; replies wait for the server's
  before-sleep pass, as every reply does (hotkv.net);
* the before-sleep hook writes ``buf`` with one write(2) -- and, with
  ``appendfsync always``, one fdatasync for every client of the loop turn
  (group commit) -- and only then does the server hand replies to sockets;
* ``everysec``: a thread fsyncs once a second, off the event loop;
  ``no``: the kernel decides.
So after a process crash every acknowledged write is in the file, and with
``always`` it also survives a machine crash.

Disk faults: a failed write(2)/fsync sets ``server.disk_error`` to Redis's
``MISCONF`` text (the dispatcher then refuses writes and serves reads) and
``aof_last_write_status:err``.  The replies of that loop turn are *held*
(their output is taken off the clients and the barrier stays up, so no flush
path -- not even shutdown -- sends them): a write is never acknowledged
before its record reached the file.  Cron retries; when a write succeeds again the
error clears and the held replies go out.  A partial write is cut back with
ftruncate so the file never ends inside a record we still hold.

Rewrite (BGREWRITEAOF, the auto trigger, CONFIG SET appendonly yes): as
Redis does it, with fork(): the child sees a copy-on-write snapshot, writes
the smallest command set rebuilding it (each type's ``rewrite`` through the
type table hotkv/types/table.py: SET/RPUSH/HSET/SADD/ZADD batches, XADD...
for streams; then PEXPIREAT) to
``temp-rewriteaof-bg-<pid>.aof`` and fsyncs it.  Meanwhile the parent keeps
serving and keeps everything it feeds in a rewrite buffer as well.  When the
child exits, the parent appends that buffer (a big one is first appended and
fsynced by the fsync thread, so the loop only syncs the last bit), fsyncs,
renames over the AOF and fsyncs the directory.  At every instant the name
points at a complete file: the old one until the rename, the new one after.
The fork costs the event loop ~15-30 ms for a million keys; no slice of the
rewrite runs on the loop.  The child closes every inherited socket and dies
with the server (PR_SET_PDEATHSIG), so a killed server frees its port.
Without fork (not POSIX) the rewrite runs synchronously.  Cost: the child's
reads touch reference counts, so its pages are copied as it goes -- up to
the dataset's size in extra memory during a rewrite.

Loading (``Server.load_data``, before cron starts): the file is parsed with hiredis
and replayed by a fake client straight through the command handlers, as
Redis's loader does (no replies, stats or propagation; EXEC runs its queue
through ``dispatch.call``); ``server.loading`` makes the dispatcher answer
other clients LOADING, and blocking commands act non-blocking.  A record
cut by a crash is dropped (the file truncated to the last complete command,
or to before an unfinished MULTI) when ``aof-load-truncated yes``;
otherwise, and for corruption anywhere else, start-up fails with the offset
and a hint.  What looks like a cut record but is followed by complete
commands up to EOF (a corrupt length swallowing them) is corruption too:
Redis would truncate those commands away.

Invariants:
* ``buf`` holds only complete records, appended in feed order; the file
  holds a prefix of the records fed (plus, briefly, a written part of one
  record that is cut back or completed);
* no reply leaves before the record it acknowledges: replies leave in the
  server's before-sleep pass, after this module's hook wrote ``buf``, and
  ``held`` keeps those whose records could not be written;
* while a rewrite child runs, every record fed also goes to ``rw_buf``, and
  both streams start with a SELECT (``cur_db`` is reset at fork);
* ``server.aof is self`` exactly when ``state != OFF or rw_buf is not None``
  (``_attach``).
"""

from __future__ import annotations

import asyncio
import collections
import errno as _errno
import gc
import glob
import logging
import mmap
import os
import signal
import threading
import time

import hiredis

from .client import Client, REPLY_OFF
from .config import param
from .errors import CommandError
from .resp import _BULK_HDR_CACHE
from .types.table import BY_CLASS

log = logging.getLogger("hotkv")

# Settings this module owns beyond those declared in hotkv/config.py.
param("aof-rewrite-incremental-fsync", "bool", True, inert=True)
param("aof-timestamp-enabled", "bool", False, inert=True)

WRITE_CHUNK = 1 << 20         # child: write to the file every MiB
LOAD_CHUNK = 16 << 10         # loader: bytes fed to hiredis at a time (hiredis
                              # memmoves its buffer as it consumes: keep it small)
LOAD_SLICE = 0.05             # loader: seconds between event-loop yields
CATCH_UP_MIN = 256 << 10      # rewrite: a buffer this big is fsynced off the loop first
MISCONF = "MISCONF Errors writing to the AOF file: %s"

OFF, ON, WAIT_REWRITE = 0, 1, 2

class AOFLoadError(Exception):
    """The AOF cannot be loaded: the server must not start."""


# ----------------------------------------------------------------------
# Encoding
# ----------------------------------------------------------------------

def _b(a) -> bytes:
    if type(a) is bytes:
        return a
    if isinstance(a, (bytes, bytearray, memoryview)):
        return bytes(a)
    if isinstance(a, int):
        return b"%d" % a
    if isinstance(a, float):
        return repr(a).encode()
    return str(a).encode()


def encode_into(out: bytearray, argv) -> None:
    out += b"*%d\r\n" % len(argv)
    for a in argv:
        if type(a) is not bytes:
            a = _b(a)
        n = len(a)
        out += _BULK_HDR_CACHE[n] if n < 1024 else b"$%d\r\n" % n
        out += a
        out += b"\r\n"


def encode_command(argv) -> bytes:
    out = bytearray()
    encode_into(out, argv)
    return bytes(out)


_SELECT = [b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(16)]
_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"


def _select(i: int) -> bytes:
    if i < 16:
        return _SELECT[i]
    s = b"%d" % i
    return b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%b\r\n" % (len(s), s)


def _enc_len(argv) -> int:
    """Bytes of argv's canonical RESP encoding (the loader's offsets), or -1
    when an element is not a bulk string."""
    n = 3 + len(str(len(argv)))
    for a in argv:
        if type(a) is not bytes:
            return -1
        m = len(a)
        n += m + 5 + (1 if m < 10 else 2 if m < 100 else len(str(m)))
    return n


# ----------------------------------------------------------------------
# The rewrite: the commands that rebuild a database
# ----------------------------------------------------------------------

def rewrite_value(key: bytes, value):
    """The argv lists that recreate ``value`` at ``key`` (no expiry).  A
    type with no row in the type table fails the rewrite loudly rather than
    silently dropping keys."""
    t = BY_CLASS.get(type(value))
    if t is None:
        raise TypeError("no AOF rewrite for values of type %r" % (type(value),))
    return t.rewrite(key, value)


def write_snapshot(server, fd: int, now_ms: int) -> int:
    """Write the commands rebuilding every database to fd; returns bytes."""
    out = bytearray()
    total = 0
    for db in server.dbs:
        if not db.data:
            continue
        out += _select(db.index)
        expires = db.expires
        for key, value in db.data.items():
            when = expires.get(key) if expires else None
            if when is not None and when <= now_ms:
                continue
            for argv in rewrite_value(key, value):
                encode_into(out, argv)
            if when is not None:
                encode_into(out, [b"PEXPIREAT", key, b"%d" % when])
            if len(out) >= WRITE_CHUNK:
                total += _write_all(fd, out)
                out = bytearray()
    if out:
        total += _write_all(fd, out)
    return total


def _write_all(fd: int, data) -> int:
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.write(fd, view[done:])
    return done


def _fsync(fd: int):
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)


def _fsync_dir(path: str):
    try:
        dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


_prctl = None


def _load_prctl():
    global _prctl
    if _prctl is None:
        try:
            import ctypes
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except Exception:
            _prctl = False


def _die_with_parent(parent: int):
    """Linux: the rewrite child is killed when the server (thread) dies --
    also when it died before the child got here (then getppid changed)."""
    if _prctl:
        try:
            _prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != parent:
        os._exit(1)


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
        "sync" (append ``data`` if given, fsync, then ``done(errno or 0)``)
        or "close"."""
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
            elif kind == "sync":
                try:
                    if data:
                        _write_all(fd, data)
                    _fsync(fd)
                    done(0)
                except OSError as e:
                    done(e.errno or _errno.EIO)
            else:
                try:
                    os.close(fd)
                except OSError:
                    pass


# ----------------------------------------------------------------------
# The AOF
# ----------------------------------------------------------------------

class AOF:
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
        self.current_size = 0
        self.base_size = 0
        self.unsynced = False        # written since the last fsync
        self.last_fsync = time.monotonic()
        self.bio = None
        # disk errors
        self.write_errno = 0
        self.fsync_errno = 0
        self.held: list = []
        self.last_error_log = 0.0
        # rewrite
        self.rw_pid = 0
        self.rw_tmp = None
        self.rw_fd = None            # catch-up phase: the child's file, open
        self.rw_synced = None        # errno of its background fsync, None while pending
        self.rw_buf = None
        self.rw_start = 0.0
        self.rw_scheduled = False
        self.rw_retry_at = 0.0
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
    def file_path(self) -> str:
        # A relative dir means relative to where the server started: ``hotkv
        # serve`` chdirs into dir after the server (and this object) exist.
        values = self.server.config.values
        return os.path.abspath(os.path.join(self.start_cwd, values["dir"] or ".",
                                            values["appendfilename"]))

    @property
    def rewriting(self) -> bool:
        return bool(self.rw_pid) or self.rw_fd is not None

    def _attach(self):
        """Propagation reaches us only while someone needs the records."""
        needed = (self.state != OFF or self.rw_buf is not None) and not self.loading
        self.server.aof = self if needed else None

    # -- feeding ------------------------------------------------------------
    def feed(self, entries):
        """One outermost call's (dbindex, argv) entries: one atomic record."""
        state = self.state
        if state == OFF and self.rw_buf is None or self.loading:
            return
        if state == ON and self.rw_buf is None and len(entries) == 1:
            # The usual record: one command, no rewrite running.
            dbindex, argv = entries[0]
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
            first = entries[0][0]
            if first != cur:
                out += _select(first)
                cur = first
            out += _MULTI
        for dbindex, argv in entries:
            if dbindex != cur:
                out += _select(dbindex)
                cur = dbindex
            encode_into(out, argv)
        if multi:
            out += _EXEC
        self.cur_db = cur
        if self.rw_buf is not None:
            self.rw_buf += out
        if state == ON:
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
            self.unsynced = True
            if self.write_errno:
                self._write_ok()
            return True
        if done:
            # Cut the partial record back so the file ends on a record we
            # still hold; if that fails, keep what was written and drop it
            # from the buffer: the rest completes it on the next try.
            try:
                os.ftruncate(fd, self.current_size)
            except OSError:
                del buf[:done]
                self.current_size += done
        self._write_failed(err)
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

    def _write_failed(self, err: int):
        first = not self.write_errno
        self.write_errno = err
        self._set_disk_error(err, "Error writing to the AOF file", first)

    def _fsync_failed(self, err: int):
        first = not self.fsync_errno
        self.fsync_errno = err
        self._set_disk_error(err, "Error fsyncing the AOF file", first)

    def _set_disk_error(self, err, what, first):
        text = os.strerror(err)
        self.server.disk_error = MISCONF % text
        now = time.monotonic()
        if first or now - self.last_error_log > 30:
            self.last_error_log = now
            log.warning("%s: %s (writes are refused until it works again)", what, text)

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
    def _open(self, path: str, create_ok: bool = True):
        flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create_ok else 0)
        existed = os.path.exists(path)
        fd = os.open(path, flags, 0o644)
        if not existed:
            _fsync_dir(path)
        self.fd = fd
        self.path = path
        self.current_size = os.fstat(fd).st_size
        self.cur_db = -1

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
        """Open the AOF for appending (after loading it)."""
        path = self.file_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._open(path)
        self.base_size = self.current_size
        self.state = ON
        self._ensure_bio()
        self._attach()

    def stop(self, final: bool = False):
        """Flush, fsync and close; the AOF is off afterwards."""
        self.kill_rewrite()
        if self.fd is not None:
            if self.buf:
                self.write_errno = 0      # one last try
                self._write_buf()
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
                self.kill_rewrite()
            self.rw_scheduled = True
            self._attach()
            self.cron_rewrite()
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
        elif self.rw_fd is not None and self.rw_synced is not None:
            if self.rw_synced:
                log.warning("Error writing the rewritten AOF: %s", os.strerror(self.rw_synced))
                self._abort_catch_up()
            else:
                self._finish_rewrite()
        if self.write_errno or self.fsync_errno or (self.bio is not None and self.bio.error):
            if self.bio is not None and self.bio.error and not self.fsync_errno:
                self._fsync_failed(self.bio.error)
            self._retry()
        if self.state == ON and self.fd is not None and self.fsync_mode == "everysec" \
                and self.unsynced and not self.fsync_errno:
            now = time.monotonic()
            if now - self.last_fsync >= 1.0 and self.bio is not None and \
                    self.bio.pending_fsync == 0:
                self.unsynced = False
                self.last_fsync = now
                self.bio.submit("fsync", self.fd)
        if not self.rewriting:
            self.cron_rewrite()

    def cron_rewrite(self):
        if self.rewriting or self.loading:
            return
        if self.rw_scheduled:
            if time.monotonic() >= self.rw_retry_at:
                self.start_rewrite()
            return
        if self.state != ON:
            return
        values = self.server.config.values
        perc = values["auto-aof-rewrite-percentage"]
        if perc and self.current_size > values["auto-aof-rewrite-min-size"]:
            base = self.base_size or 1
            growth = self.current_size * 100 // base - 100
            if growth >= perc and time.monotonic() >= self.rw_retry_at:
                log.info("Starting automatic rewriting of AOF on %d%% growth", growth)
                self.start_rewrite()

    # -- rewrite --------------------------------------------------------------
    def start_rewrite(self) -> bool:
        """Fork the rewrite child; False if it could not start."""
        if self.rewriting:
            return False
        server = self.server
        self.rw_scheduled = False
        if server.prop_pending:
            # Entries of the running call are in memory but not fed yet:
            # they would land in both the snapshot and the rewrite buffer.
            self.rw_scheduled = True
            return True
        path = self.file_path()
        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            log.warning("Can't create the AOF directory %s: %s", directory, e.strerror)
            self._rewrite_failed()
            return False
        now_ms = int(time.time() * 1000)
        if not hasattr(os, "fork"):
            return self._rewrite_sync(path, now_ms)
        _load_prctl()   # before fork: the child must not import anything
        self.cur_db = -1
        self.rw_buf = bytearray()
        self.rw_start = time.monotonic()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as e:
            log.warning("Can't rewrite append only file in background: fork: %s", e.strerror)
            self.rw_buf = None
            self._rewrite_failed()
            return False
        if pid:
            self._attach()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                gc.disable()
                _die_with_parent(parent)
                tmp = os.path.join(directory, "temp-rewriteaof-bg-%d.aof" % os.getpid())
                # Listening and client sockets stay the parent's only: a
                # parent killed mid-rewrite must free its port at once.
                for fd in _inherited_fds():
                    if fd > 2:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                write_snapshot(server, fd, now_ms)
                os.fsync(fd)
                os.close(fd)
                code = 0
            except BaseException as e:
                code = 1
                try:
                    os.write(2, ("AOF rewrite child failed: %r\n" % (e,)).encode())
                except BaseException:
                    pass
            finally:
                os._exit(code)
        self.rw_pid = pid
        self.rw_tmp = os.path.join(directory, "temp-rewriteaof-bg-%d.aof" % pid)
        log.info("Background append only file rewriting started by pid %d", pid)
        return True

    def _rewrite_sync(self, path, now_ms) -> bool:
        tmp = os.path.join(os.path.dirname(path), "temp-rewriteaof-%d.aof" % os.getpid())
        self.cur_db = -1
        self.rw_buf = bytearray()
        self.rw_start = time.monotonic()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_snapshot(self.server, fd, now_ms)
                os.fsync(fd)
            finally:
                os.close(fd)
        except Exception as e:
            log.warning("AOF rewrite failed: %s", e)
            self.rw_buf = None
            _unlink(tmp)
            self._rewrite_failed()
            return False
        self.rw_tmp = tmp
        return self._finish_rewrite()

    def _poll_rewrite(self):
        try:
            pid, status = os.waitpid(self.rw_pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.rw_pid, 1 << 8
        if pid == 0:
            return
        self.rw_pid = 0
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            self._catch_up()
        else:
            if os.WIFSIGNALED(status):
                log.warning("Background AOF rewrite terminated by signal %d", os.WTERMSIG(status))
            else:
                log.warning("Background AOF rewrite terminated with error")
            self.rw_buf = None
            _unlink(self.rw_tmp)
            self.rw_tmp = None
            self._attach()
            self._rewrite_failed()

    def _catch_up(self):
        """The child is done.  A big rewrite buffer is appended and fsynced
        by the thread, so that the final step -- on the event loop -- only
        writes and fsyncs what arrived since."""
        diff = self.rw_buf
        if not diff or len(diff) < CATCH_UP_MIN:
            self._finish_rewrite()
            return
        try:
            fd = os.open(self.rw_tmp, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            log.warning("Error opening the rewritten AOF: %s", e.strerror)
            self._abort_catch_up()
            return
        self.rw_fd = fd
        log.info("AOF rewrite: %d bytes written meanwhile appended, fsync in background",
                 len(diff))
        self.rw_buf = bytearray()
        self.rw_synced = None
        self._ensure_bio()
        self.bio.submit("sync", fd, self._catch_up_synced, diff)

    def _catch_up_synced(self, err: int):
        self.rw_synced = err       # (fsync thread) cron finishes the rewrite

    def _abort_catch_up(self):
        if self.rw_fd is not None:
            self._close_fd(self.rw_fd)
            self.rw_fd = None
        self.rw_synced = None
        self.rw_buf = None
        _unlink(self.rw_tmp)
        self.rw_tmp = None
        self._attach()
        self._rewrite_failed()

    def _finish_rewrite(self) -> bool:
        """Append what was fed meanwhile, fsync, rename over the AOF."""
        tmp, diff = self.rw_tmp, self.rw_buf
        fd, self.rw_fd, self.rw_synced = self.rw_fd, None, None
        self.rw_tmp = None
        self.rw_buf = None
        self._attach()
        path = self.file_path()
        try:
            if fd is None:
                fd = os.open(tmp, os.O_WRONLY | os.O_APPEND)
            if diff:
                _write_all(fd, diff)
            _fsync(fd)
            os.rename(tmp, path)
        except OSError as e:
            log.warning("Error finishing the AOF rewrite: %s", e.strerror)
            if fd is not None:
                self._close_fd(fd)
            _unlink(tmp)
            self._rewrite_failed()
            return False
        _fsync_dir(path)
        size = os.fstat(fd).st_size
        old = self.fd
        if self.state == OFF:
            self._close_fd(fd)
        else:
            # Everything fed so far is in the new file: the buffer meant for
            # the old one is obsolete, and the held replies are on disk.
            self.fd = fd
            self.path = path
            self.buf = bytearray()
            self.current_size = size
            self.unsynced = False
            self.last_fsync = time.monotonic()
            if self.state == WAIT_REWRITE:
                self.state = ON
                self._ensure_bio()
                log.info("AOF rewrite done: append only file enabled")
            if old is not None:
                self._close_fd(old)
            self._clear_errors()
        self.base_size = size
        self.rw_last_time = int(time.monotonic() - self.rw_start)
        self.rw_last_ok = True
        self.rw_count += 1
        self.rw_failures = 0
        self.rw_retry_at = 0.0
        log.info("Background AOF rewrite finished successfully (%d bytes)", size)
        return True

    def _rewrite_failed(self):
        self.rw_last_ok = False
        self.rw_failures += 1
        self.rw_last_time = int(time.monotonic() - self.rw_start) if self.rw_start else -1
        # Back off: retry an enable (WAIT_REWRITE) or auto rewrite later.
        self.rw_retry_at = time.monotonic() + min(60.0, float(self.rw_failures))
        if self.state == WAIT_REWRITE:
            self.rw_scheduled = True

    def kill_rewrite(self):
        if self.rw_pid:
            try:
                os.kill(self.rw_pid, signal.SIGKILL)
                os.waitpid(self.rw_pid, 0)
            except OSError:
                pass
            self.rw_pid = 0
        if self.rw_fd is not None:
            self._close_fd(self.rw_fd)
            self.rw_fd = None
            self.rw_synced = None
        if self.rw_tmp:
            _unlink(self.rw_tmp)
            self.rw_tmp = None
        self.rw_buf = None
        self.rw_scheduled = False
        self._attach()

    # -- loading ----------------------------------------------------------------
    async def load(self, yield_to_loop: bool = True):
        """Replay the AOF into the databases (server start)."""
        path = self.file_path()
        directory = os.path.dirname(path)
        for tmp in glob.glob(os.path.join(glob.escape(directory), "temp-rewriteaof-*.aof")):
            _unlink(tmp)
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            log.info("No append only file at %s: starting empty", path)
            return
        if size == 0:
            return
        with open(path, "rb") as f:
            if f.read(5) == b"REDIS":
                raise AOFLoadError(
                    "The append only file %s starts with an RDB preamble, which hotkv "
                    "does not read: in Redis/Valkey run CONFIG SET aof-use-rdb-preamble "
                    "no and BGREWRITEAOF, then use the rewritten file" % path)
        server = self.server
        start = time.monotonic()
        self.loading = True
        server.loading = True
        self._attach()
        saved_stats = _save_stats(server)
        loader = None
        try:
            with open(path, "rb") as f:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                loader = _Loader(server, mm, size, path)
                try:
                    await loader.run(yield_to_loop)
                finally:
                    mm.close()
        finally:
            self.loading = False
            server.loading = False
            self._attach()
            errors = (loader.errors if loader else 0) + \
                server.stat_total_error_replies - saved_stats[1]
            _restore_stats(server, saved_stats)
        if loader.truncate_at is not None:
            os.truncate(path, loader.truncate_at)
            self.load_truncated_at = loader.truncate_at
        self.loaded_commands = loader.commands
        self.loaded_keys = sum(len(db.data) for db in server.dbs)
        self.load_seconds = time.monotonic() - start
        if errors:
            log.warning("%d commands of the AOF replied with an error while loading", errors)
        log.info("DB loaded from append only file %s: %d keys, %d commands, %.3f seconds",
                 path, self.loaded_keys, self.loaded_commands, self.load_seconds)

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


def _unlink(path):
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


def _inherited_fds():
    try:
        return [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        try:
            top = min(os.sysconf("SC_OPEN_MAX"), 65536)
        except (ValueError, OSError):
            top = 4096
        return range(3, top)


def _all_commands():
    from .registry import TABLE
    for cmd in TABLE.values():
        yield cmd
        if cmd.subcommands:
            yield from cmd.subcommands.values()


def _save_stats(server):
    per = {cmd: (cmd.calls, cmd.seconds, cmd.failed_calls, cmd.rejected_calls)
           for cmd in _all_commands()}
    return (server.stat_numcommands, server.stat_total_error_replies,
            dict(server.errorstats), per)


def _restore_stats(server, saved):
    server.stat_numcommands, server.stat_total_error_replies, errorstats, per = saved
    server.errorstats = errorstats
    for cmd, (calls, seconds, failed, rejected) in per.items():
        cmd.calls, cmd.seconds, cmd.failed_calls, cmd.rejected_calls = calls, seconds, failed, rejected


# ----------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------

_HINT = ("make a backup of the file, then repair it with valkey-check-aof --fix "
         "(or redis-check-aof --fix)")


class _Truncated(Exception):
    pass


class _Corrupt(Exception):
    def __init__(self, offset, why):
        super().__init__(why)
        self.offset = offset
        self.why = why


def _parse_one(mm, pos: int, size: int, max_bulk: int = 1 << 62):
    """Parse one record at pos the careful way: (argv or None for an
    annotation line, end offset).  Raises _Truncated or _Corrupt.  A length
    no client could have sent (over proto-max-bulk-len) is corruption, not a
    cut record: truncating there would drop everything after it."""
    if pos >= size:
        raise _Truncated()
    first = mm[pos:pos + 1]
    if first == b"#":
        nl = mm.find(b"\n", pos)
        if nl < 0:
            raise _Truncated()
        return None, nl + 1

    def line(p):
        nl = mm.find(b"\r\n", p, min(size, p + 64))
        if nl < 0:
            if size - p < 64 and b"\n" not in mm[p:size]:
                raise _Truncated()
            raise _Corrupt(p, "a header line is too long or not CRLF-terminated")
        return mm[p:nl], nl + 2

    if first != b"*":
        raise _Corrupt(pos, "expected '*' (a command), found %r" % first)
    head, p = line(pos + 1)
    if not head.isdigit() or not 1 <= int(head) < 1 << 31:
        raise _Corrupt(pos, "bad argument count %r" % head)
    argc = int(head)
    argv = []
    for _ in range(argc):
        if p >= size:
            raise _Truncated()
        if mm[p:p + 1] != b"$":
            raise _Corrupt(p, "expected '$' (an argument), found %r" % mm[p:p + 1])
        head, q = line(p + 1)
        if not head.isdigit():
            raise _Corrupt(p, "bad argument length %r" % head)
        n = int(head)
        if n > max_bulk:
            raise _Corrupt(p, "argument length %d over proto-max-bulk-len" % n)
        if q + n + 2 > size:
            raise _Truncated()
        if mm[q + n:q + n + 2] != b"\r\n":
            raise _Corrupt(q + n, "argument not followed by CRLF")
        argv.append(mm[q:q + n])
        p = q + n + 2
    return argv, p


def _intact_records_after(mm, pos, size, table, min_records=2,
                          max_candidates=1000, max_scan=16 << 20):
    """The offset of a run of at least ``min_records`` complete commands of
    known names, starting at a line start after pos and ending exactly at
    EOF; None if there is none.  A value that merely contains RESP would
    have to be cut exactly at the end of one of its embedded commands to
    look like this."""
    start = pos + 1
    limit = min(size, pos + max_scan)
    for _ in range(max_candidates):
        at = mm.find(b"\r\n*", start, limit)
        if at < 0:
            return None
        cand = at + 2
        start = cand
        p, n = cand, 0
        try:
            while p < size:
                argv, p = _parse_one(mm, p, size)
                if argv is None:
                    continue
                name = bytes(argv[0])
                if table.get(name) is None and table.get(name.lower()) is None:
                    break
                n += 1
            else:
                if n >= min_records:
                    return cand
        except (_Truncated, _Corrupt):
            pass
    return None


class _Loader:
    def __init__(self, server, mm, size, path):
        from .registry import TABLE
        self.table = TABLE
        self.server = server
        self.mm = mm
        self.size = size
        self.path = path
        self.client = Client(server, fake=True)
        self.client.reply_mode = REPLY_OFF
        self.commands = 0
        self.errors = 0
        # argv[0] as spelled in the file -> (command, arity check), for plain
        # commands (no subcommands, not MULTI/EXEC/DISCARD)
        self.cache: dict = {}
        self.truncate_at = None
        self.before_multi = 0

    def fail(self, offset, why, start=None):
        where = "offset %d" % offset
        if start is not None and start != offset:
            where += " (in the command starting at offset %d)" % start
        elif start is not None:
            where += " (the command starting at offset %d)" % start
        raise AOFLoadError(
            "Bad file format reading the append only file %s at %s: %s. "
            "The server will not start: %s; a truncated tail only is cut "
            "automatically with aof-load-truncated yes." % (self.path, where, why, _HINT))

    async def run(self, yield_to_loop):
        server = self.server
        # As Redis's loader, handlers run directly (no reply, no stats, no
        # propagation); a current client makes EXEC's own calls inner ones.
        saved = server.current_client
        server.current_client = self.client
        server.cmd_time_ms = int(time.time() * 1000)
        try:
            await self._run(yield_to_loop)
        finally:
            server.current_client = saved
            server.current_cmd = server.current_argv = server.prop_override = None
            server.prop_pending = []
            server.ready_keys = []
            server.ready_set.clear()

    async def _run(self, yield_to_loop):
        mm, size = self.mm, self.size
        client = self.client
        server = self.server
        cache = self.cache
        pos = 0
        deadline = time.monotonic() + LOAD_SLICE
        view = memoryview(mm)
        try:
            while pos < size:
                reader = hiredis.Reader()
                fed = pos
                while True:
                    try:
                        item = reader.gets()
                    except hiredis.ProtocolError:
                        break
                    if item is False:
                        if fed >= size:
                            break
                        end = min(size, fed + LOAD_CHUNK)
                        reader.feed(view[fed:end])
                        fed = end
                        server.cmd_time_ms = int(time.time() * 1000)
                        if yield_to_loop and time.monotonic() > deadline:
                            await asyncio.sleep(0)
                            deadline = time.monotonic() + LOAD_SLICE
                        continue
                    if type(item) is not list or not item:
                        break
                    # Inlined _enc_len and the common case of execute: this
                    # loop runs once per command of the file.
                    k = len(item)
                    n = 3 + (1 if k < 10 else len(str(k)))
                    for a in item:
                        if type(a) is not bytes:
                            n = -1
                            break
                        m = len(a)
                        n += m + (6 if m < 10 else 7 if m < 100 else 5 + len(str(m)))
                    if n < 0:
                        break
                    entry = cache.get(item[0])
                    if entry is None or client.multi or not entry[1](k):
                        self.execute(item, pos)
                    else:
                        self.commands += 1
                        self._apply(entry[0], item)
                    pos += n
                if pos >= size:
                    break
                # hiredis stopped short: settle what is at pos the careful way.
                try:
                    argv, end = _parse_one(mm, pos, size,
                                           server.config.values["proto-max-bulk-len"])
                except _Truncated:
                    self.truncated(pos)
                    return
                except _Corrupt as e:
                    self.fail(e.offset, e.why, pos)
                if argv is not None:
                    self.execute([bytes(a) for a in argv], pos)
                pos = end
        finally:
            view.release()
        if client.multi:
            log.warning("Revert incomplete MULTI/EXEC transaction in AOF file %s", self.path)
            self.truncated(self.before_multi, multi=True)

    def truncated(self, pos, multi=False):
        if not multi:
            # A crash cuts the last record only.  Complete records after the
            # cut mean a corrupt length swallowed them: truncating would
            # throw them away, so refuse instead.
            intact = _intact_records_after(self.mm, pos, self.size, self.table)
            if intact is not None:
                self.fail(pos, "a length in this command runs past the end of the file, yet "
                          "complete commands follow from offset %d: the length is corrupt"
                          % intact, pos)
        if self.client.multi and not multi:
            pos = self.before_multi
        if not self.server.config.values["aof-load-truncated"]:
            raise AOFLoadError(
                "Unexpected end of file reading the append only file %s: the last command, "
                "at offset %d of %d, is incomplete (a crash during a write). The server will "
                "not start: %s, or set aof-load-truncated yes to drop the incomplete "
                "command at start-up." % (self.path, pos, self.size, _HINT))
        log.warning("!!! Warning: short read while loading the AOF file %s !!!", self.path)
        log.warning("!!! Truncating the AOF %s at offset %d (%d bytes dropped) !!!",
                    self.path, pos, self.size - pos)
        self.truncate_at = pos

    def execute(self, argv, offset):
        name = argv[0]
        table = self.table
        cmd = table.get(name)
        if cmd is None:
            cmd = table.get(name.lower())
            if cmd is None:
                raise AOFLoadError(
                    "Unknown command '%s' reading the append only file %s at offset %d"
                    % (name.decode("utf-8", "replace")[:128], self.path, offset))
        plain = cmd.subcommands is None
        if not plain and len(argv) >= 2:
            sub = cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
            if sub is None:
                self.fail(offset, "unknown subcommand %r of %s" % (argv[1][:64], cmd.name),
                          offset)
            cmd = sub
        n = len(argv)
        if (cmd.arity > 0 and n != cmd.arity) or n < -cmd.arity:
            self.fail(offset, "wrong number of arguments for '%s'" % cmd.name, offset)
        self.commands += 1
        cname = cmd.name
        if cname == "select":
            idx = argv[1]
            if not idx.isdigit() or int(idx) >= len(self.server.dbs):
                raise AOFLoadError(
                    "The append only file %s selects database %r at offset %d but the "
                    "server has %d databases: raise 'databases' to load it"
                    % (self.path, idx.decode("utf-8", "replace")[:32], offset,
                       len(self.server.dbs)))
        elif plain and cname not in ("multi", "exec", "discard"):
            arity = cmd.arity
            self.cache[name] = (cmd, (lambda k, a=arity: k == a) if arity > 0
                                else (lambda k, a=-arity: k >= a))
        if cname == "multi":
            self.before_multi = offset
        client = self.client
        if client.multi and cname not in ("exec", "discard", "multi"):
            client.multi_queue.append((cmd, argv))
            return
        self._apply(cmd, argv)

    def _apply(self, cmd, argv):
        """Run one logged command's handler, as Redis's loader does: no
        reply, no stats, no propagation; an error is counted, not fatal."""
        server = self.server
        server.current_cmd = cmd
        server.current_argv = argv
        server.prop_override = None
        try:
            cmd.func(self.client, argv)
        except CommandError:
            self.errors += 1
        except Exception as e:
            self.errors += 1
            server.log_exception(cmd, argv, e)


__all__ = ["AOF", "AOFLoadError", "encode_command", "write_snapshot", "rewrite_value"]
