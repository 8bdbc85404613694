"""The AOF rewrite: the dataset written anew by a forked child while the
parent keeps serving.

As Redis does it, with fork(): the child sees a copy-on-write snapshot and
writes it to ``temp-rewriteaof-bg-<pid>.aof`` (``write_base``), then fsyncs
it.  With ``aof-use-rdb-preamble yes`` (the default, as Valkey's) that is an
RDB file (hotkv/rdbfile.py ``write_dataset``, aux ``aof-base`` 1), which
keeps what commands cannot say: a stream's node layout, tombstones
included, and the NACKs of entries no longer in the stream.  With ``no`` it
is the smallest command set rebuilding it (``write_snapshot``: each type's
``rewrite`` through the type table hotkv/types/table.py:
SET/RPUSH/HSET/SADD/ZADD batches, XADD... for streams; then PEXPIREAT).
Either way the rewrite buffer's commands follow it.  Meanwhile the parent
keeps serving and keeps everything it feeds in a rewrite buffer as well.
When the child exits, the parent appends that buffer (a big one is first
appended and fsynced by the fsync thread, so the loop only syncs the last
bit), fsyncs, renames over the AOF and fsyncs the directory.  The fork
costs the event loop ~15-30 ms for a million keys; no slice of the rewrite
runs on the loop.  The child closes every inherited socket and dies with
the server (PR_SET_PDEATHSIG), so a killed server frees its port.  Without
fork (not POSIX) the rewrite runs synchronously.  Cost: the child's reads
touch reference counts, so its pages are copied as it goes -- up to the
dataset's size in extra memory during a rewrite.

The parent's side (scheduling, the auto trigger, polling the child, the
catch-up, the rename, failures and their back-off) is ``RewriteMixin``,
whose methods run on the ``AOF`` (hotkv.aof.writer) and use its state.

Invariants: at every instant the AOF's name points at a complete file: the
old one until the rename, the new one after; everything fed after the fork
is in ``rw_buf`` until it is appended to the new file; the child imports
nothing after the fork (``forkchild.load_prctl`` runs before it).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time

from ..forkchild import die_with_parent, inherited_fds, load_prctl
from ..rdbfile import fsync_dir, write_dataset
from ..types.table import BY_CLASS
from .files import (
    OFF,
    ON,
    WAIT_REWRITE,
    _fsync,
    _select,
    _unlink,
    _write_all,
    encode_into,
)

log = logging.getLogger("hotkv")

WRITE_CHUNK = 1 << 20         # child: write to the file every MiB
CATCH_UP_MIN = 256 << 10      # a buffer this big is fsynced off the loop first


# ----------------------------------------------------------------------
# The child: the commands that rebuild a database
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


def write_base(server, fd: int, now_ms: int, preamble: bool) -> int:
    """The new AOF's start: an RDB preamble or the command form; returns bytes."""
    if preamble:
        return write_dataset(server, fd, aof_base=True)
    return write_snapshot(server, fd, now_ms)


# ----------------------------------------------------------------------
# The parent's side
# ----------------------------------------------------------------------

class RewriteMixin:
    """The parent's side of a rewrite, mixed into ``AOF`` (its state: the
    ``rw_*`` fields, ``state``, ``fd``, ``buf``, ``bio``)."""

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
        # Read in the parent: the child must see the setting as of the fork.
        preamble = bool(server.config.values["aof-use-rdb-preamble"])
        if not hasattr(os, "fork"):
            return self._rewrite_sync(path, now_ms, preamble)
        load_prctl()   # before fork: the child must not import anything
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
                die_with_parent(parent)
                tmp = os.path.join(directory, "temp-rewriteaof-bg-%d.aof" % os.getpid())
                # Listening and client sockets stay the parent's only: a
                # parent killed mid-rewrite must free its port at once.
                for fd in inherited_fds():
                    if fd > 2:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                write_base(server, fd, now_ms, preamble)
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

    def _rewrite_sync(self, path, now_ms, preamble) -> bool:
        tmp = os.path.join(os.path.dirname(path), "temp-rewriteaof-%d.aof" % os.getpid())
        self.cur_db = -1
        self.rw_buf = bytearray()
        self.rw_start = time.monotonic()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_base(self.server, fd, now_ms, preamble)
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
        fsync_dir(path)
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
