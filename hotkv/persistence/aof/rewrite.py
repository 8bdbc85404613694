"""The AOF rewrite: a new base file written by a forked child while the
parent keeps serving.

As Valkey 7+ does it (multi-part AOF, hotkv/persistence/aof/manifest.py).  At the fork
the parent writes what it buffered to the current incr file and opens a new
one (``_open_new_incr``): with the AOF on it joins the manifest at once
(persisted before the fork); while the AOF is being turned on
(WAIT_REWRITE) it is a temp incr file that joins only if the rewrite
succeeds.  Everything fed from then on goes to that file, so no rewrite
buffer is needed.  The child sees a copy-on-write snapshot and writes it to
``<dir>/temp-rewriteaof-bg-<pid>.aof`` (``write_base``), then fsyncs it.
With ``aof-use-rdb-preamble yes`` (the default, as Valkey's) that is an RDB
file (hotkv/persistence/rdbfile.py ``write_dataset``, aux ``aof-base`` 1), which keeps
what commands cannot say: a stream's node layout, tombstones included, and
the NACKs of entries no longer in the stream.  With ``no`` it is the
smallest command set rebuilding it (``write_snapshot``: each type's
``rewrite`` through the type table hotkv/types/table.py:
SET/RPUSH/HSET/SADD/ZADD batches, XADD... for streams; then PEXPIREAT).
When the child exits the parent (``_finish_rewrite``) renames the file to
the next base name (``.base.rdb`` / ``.base.aof``), the temp incr file (if
any) to the next incr name, marks the previous base and the incr files
older than the one opened at the fork as history, persists the manifest
and unlinks the history files on the fsync thread.  A failed rewrite leaves
the manifest as it was plus the incr file opened at the fork (as Valkey);
after three failures in a row automatic and scheduled rewrites are spaced
out (``_rewrite_limited``, Valkey's aofRewriteLimited).

The fork costs the event loop ~15-30 ms for a million keys; no slice of the
rewrite runs on the loop.  The child closes every inherited socket and dies
with the server (PR_SET_PDEATHSIG), so a killed server frees its port.
Without fork (not POSIX) the rewrite runs synchronously.  Cost: the child's
reads touch reference counts, so its pages are copied as it goes -- up to
the dataset's size in extra memory during a rewrite.

Invariants: at every instant the manifest on disk names complete files
only: the new base and incr are renamed into place before the manifest
naming them replaces the old one, and history files are unlinked only
after; every record fed after the fork is in the incr file opened at the
fork (or a later one), every record before it in an older incr file and in
the new base; the child imports nothing after the fork
(``forkchild.fork`` loads what it needs before it).
"""

from __future__ import annotations

import logging
import os
import signal
import time

from ...types.table import BY_CLASS
from .. import forkchild
from ..rdbfile import write_dataset
from .files import OFF, ON, WAIT_REWRITE, _select, _unlink, _write_all, encode_into
from .manifest import ManifestError, persist, temp_incr_name

log = logging.getLogger("hotkv")

WRITE_CHUNK = 1 << 20         # child: write to the file every MiB


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
    # The function libraries first, as Valkey's rewriteFunctions.
    functions = server.functions     # None until a function is loaded (hotkv.lua)
    for code in functions.codes() if functions is not None else ():
        encode_into(out, [b"FUNCTION", b"LOAD", code])
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


def write_file(server, path: str, now_ms: int, preamble: bool) -> int:
    """write_base into a new file at path, fsynced; returns bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n = write_base(server, fd, now_ms, preamble)
        os.fsync(fd)
    finally:
        os.close(fd)
    return n


# ----------------------------------------------------------------------
# The parent's side
# ----------------------------------------------------------------------

LIMIT_THRESHOLD = 3           # consecutive failures before rewrites are spaced out
LIMIT_MAX_MINUTES = 60


class RewriteMixin:
    """The parent's side of a rewrite, mixed into ``AOF`` (its state: the
    ``rw_*`` fields, ``state``, ``fd``, ``buf``, ``bio``, ``manifest``)."""

    def cron_rewrite(self):
        if self.rewriting or self.loading:
            return
        if self.server.snapshots.in_progress:
            return      # one child at a time, as Valkey: a scheduled rewrite waits
        if self.rw_scheduled:
            if not self._rewrite_limited():
                self.start_rewrite()
            return
        if self.state != ON:
            return
        values = self.server.config.values
        perc = values["auto-aof-rewrite-percentage"]
        if perc and self.current_size > values["auto-aof-rewrite-min-size"]:
            base = self.base_size or 1
            growth = self.current_size * 100 // base - 100
            if growth >= perc and not self._rewrite_limited():
                log.info("Starting automatic rewriting of AOF on %d%% growth", growth)
                self.start_rewrite()

    def _rewrite_limited(self) -> bool:
        """Valkey's aofRewriteLimited: every failed rewrite leaves an incr
        file behind, so after LIMIT_THRESHOLD failures in a row automatic
        and scheduled rewrites wait 1, 2, 4 ... 60 minutes (BGREWRITEAOF
        still runs at once)."""
        if self.rw_failures < LIMIT_THRESHOLD:
            self.rw_limit_delay = 0
            self.rw_limit_until = 0.0
            return False
        if self.rw_limit_until:
            if time.time() < self.rw_limit_until:
                return True
            self.rw_limit_until = 0.0
            return False
        self.rw_limit_delay = min(LIMIT_MAX_MINUTES, self.rw_limit_delay * 2 or 1)
        self.rw_limit_until = time.time() + self.rw_limit_delay * 60
        log.warning("Background AOF rewrite has repeatedly failed and triggered the limit, "
                    "will retry in %d minutes", self.rw_limit_delay)
        return True

    def start_rewrite(self) -> bool:
        """Fork the rewrite child; False if it could not start."""
        if self.rewriting:
            return False
        server = self.server
        self.rw_scheduled = False
        if server.prop_pending:
            # Entries of the running call are in memory but not fed yet:
            # they would land in both the new base and the new incr file.
            self.rw_scheduled = True
            return True
        directory = self.dir_path()
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            log.warning("Can't open or create append-only dir %s: %s", directory, e.strerror)
            return self._start_failed()
        try:
            self.ensure_manifest()
        except ManifestError as e:
            log.warning("Can't rewrite the AOF: its manifest is unreadable: %s", e)
            return self._start_failed()
        # Everything fed so far goes to the current incr file (the new base
        # has it too); the new incr file starts with a SELECT.
        if self.buf and self.fd is not None and not self._flush_for_switch():
            log.warning("Can't rewrite the AOF while its file cannot be written")
            return self._start_failed()
        self.cur_db = -1
        if not self._open_new_incr():
            return self._start_failed()
        now_ms = server.clock.ms()     # keys expired on hotkv.core.clock are left out
        # Read in the parent: the child must see the setting as of the fork.
        preamble = bool(server.config.values["aof-use-rdb-preamble"])
        self.rw_preamble = preamble
        self.rw_start = time.monotonic()
        self.rw_count += 1
        tmp_dir = self.server_dir()
        if not hasattr(os, "fork"):
            return self._rewrite_sync(tmp_dir, now_ms, preamble)
        parent = os.getpid()
        try:
            # GC frozen while the child runs, the fork timed and counted for
            # INFO (latest_fork_usec, total_forks), as BGSAVE's (hotkv.persistence.forkchild).
            pid = forkchild.fork(server)
        except OSError as e:
            log.warning("Can't rewrite append only file in background: fork: %s", e.strerror)
            self._cleanup_failed_rewrite()
            return self._start_failed()
        if pid == 0:  # pragma: no cover - the child
            def work():
                tmp = os.path.join(tmp_dir, "temp-rewriteaof-bg-%d.aof" % os.getpid())
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                write_base(server, fd, now_ms, preamble)
                os.fsync(fd)
                os.close(fd)
            forkchild.run_child(parent, work, "AOF rewrite child", lower_priority=True)
        self.rw_pid = pid
        self.rw_tmp = os.path.join(tmp_dir, "temp-rewriteaof-bg-%d.aof" % pid)
        self._attach()
        log.info("Background append only file rewriting started by pid %d", pid)
        return True

    def _start_failed(self) -> bool:
        self.rw_last_ok = False
        if self.state == WAIT_REWRITE:
            self.rw_scheduled = True        # cron tries again
        return False

    def _flush_for_switch(self) -> bool:
        """Write (and under appendfsync always, fsync) the buffer into the
        incr file being left: its records must be there before replies go."""
        saved = self.write_errno
        self.write_errno = 0
        ok = self._write_buf()
        if not ok:
            self.write_errno = self.write_errno or saved
            return False
        if self.fsync_mode == "always":
            return self._fsync_now()
        return True

    def _open_new_incr(self) -> bool:
        """Valkey's openNewIncrAofForAppend: with the AOF on, a new incr file
        joins the manifest (persisted before it is used); while the AOF is
        being turned on, a temp incr file that joins it only on success."""
        if self.state == OFF:
            return True
        directory = self.dir_path()
        filename = self.filename()
        new_manifest = None
        if self.state == WAIT_REWRITE:
            name = temp_incr_name(filename)
        else:
            new_manifest = self.manifest.copy()
            name = new_manifest.new_incr(filename)
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            log.warning("Can't open the append-only file %s: %s", name, e.strerror)
            return False
        if new_manifest is not None:
            try:
                persist(directory, filename, new_manifest)
            except OSError as e:
                log.warning("Can't write the AOF manifest in %s: %s", directory, e.strerror)
                os.close(fd)
                return False
            self.manifest = new_manifest
        log.info("Creating AOF incr file %s on background rewrite", name)
        old = self.fd
        if old is not None:
            # Under 'always' it is synced already (_flush_for_switch); else
            # the fsync thread syncs it, then closes it.
            if self.fsync_mode != "always" and self.unsynced:
                self._ensure_bio()
                self.bio.submit("fsync", old)
            self._close_fd(old)
        self.fd = fd
        self.path = path
        self.last_incr_size = 0
        self.unsynced = False
        self._ensure_bio()           # everysec fsyncs the temp incr file too
        return True

    def _rewrite_sync(self, tmp_dir, now_ms, preamble) -> bool:
        tmp = os.path.join(tmp_dir, "temp-rewriteaof-%d.aof" % os.getpid())
        try:
            write_file(self.server, tmp, now_ms, preamble)
        except Exception as e:
            log.warning("AOF rewrite failed: %s", e)
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
        forkchild.reaped()
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            log.info("Background AOF rewrite terminated with success")
            self._finish_rewrite()
        else:
            if os.WIFSIGNALED(status):
                log.warning("Background AOF rewrite terminated by signal %d", os.WTERMSIG(status))
            else:
                log.warning("Background AOF rewrite terminated with error")
            self._rewrite_failed()

    def _finish_rewrite(self) -> bool:
        """Valkey's backgroundRewriteDoneHandler: the temp file becomes the
        next base, a temp incr file (AOF being turned on) the next incr, the
        incr files the base covers become history; one manifest write makes
        it all current, then the history files go."""
        tmp, self.rw_tmp = self.rw_tmp, None
        directory = self.dir_path()
        filename = self.filename()
        new_manifest = self.manifest.copy()
        base = new_manifest.new_base(filename, self.rw_preamble)
        base_path = os.path.join(directory, base)
        try:
            os.rename(tmp, base_path)
        except OSError as e:
            log.warning("Error trying to rename the temporary AOF base file %s into %s: %s",
                        os.path.basename(tmp), base_path, e.strerror)
            return self._rewrite_failed()
        log.info("Successfully renamed the temporary AOF base file %s into %s",
                 os.path.basename(tmp), base)
        incr_path = None
        if self.state == WAIT_REWRITE:
            temp_incr = os.path.join(directory, temp_incr_name(filename))
            incr_path = os.path.join(directory, new_manifest.new_incr(filename))
            try:
                os.rename(temp_incr, incr_path)
            except OSError as e:
                log.warning("Error trying to rename the temporary AOF incr file %s into %s: %s",
                            temp_incr, incr_path, e.strerror)
                self._unlink_bg(base_path)
                return self._rewrite_failed()
            self.path = incr_path
        new_manifest.incr_to_history(keep_last=self.fd is not None)
        try:
            persist(directory, filename, new_manifest)
        except OSError as e:
            log.warning("Can't write the AOF manifest in %s: %s", directory, e.strerror)
            self._unlink_bg(base_path)
            if incr_path is not None:
                self._unlink_bg(incr_path)
            return self._rewrite_failed()
        self.manifest = new_manifest
        if self.state != OFF:
            try:
                base_size = os.path.getsize(base_path)
            except OSError:
                base_size = 0
            self.current_size = base_size + self.last_incr_size
            self.base_size = self.current_size
        self.delete_history()
        self.rw_last_time = int(time.monotonic() - self.rw_start)
        self.rw_last_ok = True
        self.rw_failures = 0
        log.info("Background AOF rewrite finished successfully")
        if self.state == WAIT_REWRITE:
            self.state = ON
            self._ensure_bio()
            log.info("AOF rewrite done: append only file enabled")
        self._attach()
        return True

    def _cleanup_failed_rewrite(self):
        """What a rewrite that did not finish leaves: its temp file; while
        the AOF is being turned on, the temp incr file and its records."""
        if self.rw_tmp:
            _unlink(self.rw_tmp)
            self.rw_tmp = None
        if self.state == WAIT_REWRITE:
            self.buf = bytearray()
            if self.fd is not None:
                self._close_fd(self.fd)
                self.fd = None
                self.path = None
            _unlink(os.path.join(self.dir_path(), temp_incr_name(self.filename())))
            # The AOF is not on yet: replies held by a write error on the
            # temp file wait for nothing any more (the next rewrite's
            # snapshot has their writes).
            self._clear_errors()
        self._attach()

    def _rewrite_failed(self) -> bool:
        self._cleanup_failed_rewrite()
        self.rw_last_ok = False
        self.rw_failures += 1
        self.rw_last_time = int(time.monotonic() - self.rw_start) if self.rw_start else -1
        if self.state == WAIT_REWRITE:
            self.rw_scheduled = True       # the AOF is not on until a rewrite succeeds
        return False

    def kill_rewrite(self):
        if self.rw_pid:
            log.info("Killing running AOF rewrite child: %d", self.rw_pid)
            try:
                os.kill(self.rw_pid, signal.SIGKILL)
                os.waitpid(self.rw_pid, 0)
            except OSError:
                pass
            self.rw_pid = 0
            forkchild.reaped()
        self._cleanup_failed_rewrite()
        self.rw_scheduled = False
