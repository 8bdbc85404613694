"""The server's RDB snapshots: SAVE, BGSAVE, save points, loading at start.

Owns the state Valkey keeps for ``INFO persistence``'s ``rdb_*`` fields and
what acts on it: ``save`` (SAVE, SHUTDOWN, SIGTERM: synchronous, on the
loop), ``bgsave`` (a forked child writes and renames the file, as the AOF
rewrite does: hotkv/persistence/aof/rewrite.py), ``cron`` (reaps the child, runs a
scheduled BGSAVE, and fires the ``save`` points: "<seconds> <changes>"
pairs, a BGSAVE when at least <changes> writes happened and more than
<seconds> passed since the last successful save), ``load_at_start`` (the
``dir``/``dbfilename`` file when the AOF is off), and the MISCONF state
of ``stop-writes-on-bgsave-error``.  The file format is hotkv/persistence/rdbfile.py.

Invariants:
* ``server.dirty_at_save`` and ``server.lastsave`` move only when a file
  has been renamed into place and fsynced (for BGSAVE: to the dirty count
  at the fork), so ``rdb_changes_since_last_save`` is what a crash would
  lose of the RDB;
* at most one BGSAVE child; it never runs beside an AOF rewrite child it
  started after (BGSAVE refuses or is scheduled, as in Valkey);
* the target name always holds a complete file: a child killed mid-write
  leaves only its ``temp-<pid>.rdb``, which the parent removes;
* writes are refused with Valkey's MISCONF while the last BGSAVE failed,
  ``stop-writes-on-bgsave-error`` is yes and save points are set; the
  MISCONF of the AOF (hotkv.persistence.aof.writer) is never overwritten or cleared here.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from . import forkchild, rdbfile

log = logging.getLogger("hotkv")

MISCONF = ("MISCONF Valkey is configured to save RDB snapshots, but it's currently unable to "
           "persist to disk. Commands that may modify the data set are disabled, because this "
           "instance is configured to report errors during writes if RDB snapshotting fails "
           "(stop-writes-on-bgsave-error option). Please check the Valkey logs for details "
           "about the RDB error.")
BGSAVE_RETRY_DELAY = 5        # seconds (Valkey's CONFIG_BGSAVE_RETRY_DELAY)


def save_points(text: str) -> list[tuple[int, int]]:
    parts = text.split()
    return [(int(parts[i]), int(parts[i + 1])) for i in range(0, len(parts) - 1, 2)]


class Snapshots:
    def __init__(self, server):
        self.server = server
        self.start_cwd = os.getcwd()   # `hotkv serve` chdirs into dir later
        self.child_pid = 0
        self.child_start = 0.0
        self.dirty_at_fork = 0
        self.scheduled = False
        self.last_ok = True
        self.last_try = 0             # time() of the last BGSAVE attempt
        self.last_time_sec = -1
        self.saves = 0
        self.keys_loaded = 0
        self.keys_expired = 0
        self.points = save_points(server.config.values["save"])
        server.config.listeners["save"] = self._set_points
        server.config.listeners["stop-writes-on-bgsave-error"] = lambda v: self._misconf()

    # ------------------------------------------------------------------
    def _set_points(self, value):
        self.points = save_points(value)
        self._misconf()

    def _misconf(self):
        server = self.server
        on = (not self.last_ok and self.points
              and server.config.values["stop-writes-on-bgsave-error"])
        if on and server.disk_error is None:
            server.disk_error = MISCONF
        elif not on and server.disk_error == MISCONF:
            server.disk_error = None

    def path(self) -> str:
        values = self.server.config.values
        return os.path.abspath(os.path.join(self.start_cwd, values["dir"] or ".",
                                            values["dbfilename"]))

    @property
    def in_progress(self) -> bool:
        return bool(self.child_pid)

    # ------------------------------------------------------------------
    # SAVE
    # ------------------------------------------------------------------
    def save(self) -> bool:
        """Write the file now, on the loop; True once it is renamed and fsynced."""
        server = self.server
        self.saves += 1
        dirty = server.dirty
        try:
            rdbfile.write_file(server, self.path())
        except Exception as e:
            log.warning("Failed opening the temp RDB file temp-%d.rdb (in server root dir %s) "
                        "for saving: %s", os.getpid(), os.path.dirname(self.path()), e)
            return False
        log.info("DB saved on disk")
        self._saved(dirty)
        return True

    def _saved(self, dirty: int):
        server = self.server
        server.dirty_at_save = dirty
        server.lastsave = int(time.time())
        self.last_ok = True
        self._misconf()

    # ------------------------------------------------------------------
    # BGSAVE
    # ------------------------------------------------------------------
    def other_child(self) -> bool:
        return self.server.aof_manager.rewriting

    def bgsave(self) -> bool:
        """Fork the child; False if it could not start."""
        if self.child_pid:
            return False
        server = self.server
        self.scheduled = False
        self.last_try = int(time.time())
        self.saves += 1
        target = self.path()
        if not hasattr(os, "fork"):  # pragma: no cover - not POSIX
            ok = self.save()
            self.last_ok = ok
            self._misconf()
            return ok
        parent = os.getpid()
        self.dirty_at_fork = server.dirty
        try:
            pid = forkchild.fork(server)
        except OSError as e:
            log.warning("Can't save in background: fork: %s", e.strerror)
            self.last_ok = False
            self._misconf()
            return False
        if pid == 0:  # pragma: no cover - the child
            forkchild.run_child(parent, lambda: rdbfile.write_file(server, target),
                                "Background RDB save child", lower_priority=True)
        self.child_pid = pid
        self.child_start = time.monotonic()
        log.info("Background saving started by pid %d", pid)
        return True

    def _reap(self):
        try:
            pid, status = os.waitpid(self.child_pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.child_pid, 1 << 8
        if pid == 0:
            return
        self._child_done(pid, status)

    def _child_done(self, pid: int, status: int):
        self.child_pid = 0
        forkchild.reaped()
        self.last_time_sec = int(time.monotonic() - self.child_start)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            log.info("Background saving terminated with success")
            self._saved(self.dirty_at_fork)
            return
        if os.WIFSIGNALED(status):
            log.warning("Background saving terminated by signal %d", os.WTERMSIG(status))
        else:
            log.warning("Background saving error")
        self._remove_temp(pid)
        self.last_ok = False
        self._misconf()

    def _remove_temp(self, pid: int):
        try:
            os.unlink(rdbfile.temp_path(self.path(), pid))
        except OSError:
            pass

    def kill_child(self):
        """Stop a running BGSAVE (SHUTDOWN, FLUSHALL...), removing its temp file."""
        pid = self.child_pid
        if not pid:
            return
        log.warning("There is a child saving an .rdb. Killing it!")
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        self.child_pid = 0
        forkchild.reaped()
        self._remove_temp(pid)

    # ------------------------------------------------------------------
    def cron(self):
        if self.child_pid:
            self._reap()
            return
        if self.other_child():
            return
        now = int(time.time())
        retry_ok = self.last_ok or now - self.last_try > BGSAVE_RETRY_DELAY
        if self.scheduled and retry_ok:
            self.bgsave()
            return
        server = self.server
        changes = server.dirty - server.dirty_at_save
        for seconds, want in self.points:
            if changes >= want and now - server.lastsave > seconds and retry_ok:
                log.info("%d changes in %d seconds. Saving...", want, seconds)
                self.bgsave()
                return

    # ------------------------------------------------------------------
    async def load_at_start(self):
        """The dump file, when there is one (the AOF, when on, wins: the
        caller), read with loop turns between its slices: clients get
        LOADING meanwhile (rdbfile.load_at_start_async)."""
        path = self.path()
        if not os.path.exists(path):
            return
        try:
            loaded = await rdbfile.load_at_start_async(self.server, path)
        except OSError as e:
            raise rdbfile.RDBLoadError("Can't read the RDB file %s: %s"
                                       % (path, e.strerror or e)) from None
        except rdbfile.RDBLoadError as e:
            raise rdbfile.RDBLoadError("%s: %s" % (path, e)) from None
        self.keys_loaded = loaded.keys_loaded
        self.keys_expired = loaded.keys_expired

    def shutdown_save(self, force_save: bool = False, force: bool = False) -> bool:
        """At shutdown: kill a BGSAVE child, then save when save points are
        set (or SHUTDOWN SAVE / a ``save`` shutdown-on-sig* flag); False when the
        save failed and the shutdown must not go on -- with ``force`` (FORCE) a
        failed save is logged and the shutdown goes on, as Valkey's."""
        self.kill_child()
        if not (self.points or force_save):
            return True
        log.info("Saving the final RDB snapshot before exiting.")
        if self.save():
            return True
        if force:
            log.warning("Error trying to save the DB. Exit anyway.")
            return True
        log.warning("Error trying to save the DB, can't exit.")
        return False

    def info_fields(self) -> list:
        server = self.server
        cur = int(time.monotonic() - self.child_start) if self.child_pid else -1
        return [
            ("rdb_changes_since_last_save", server.dirty - server.dirty_at_save),
            ("rdb_bgsave_in_progress", 1 if self.child_pid else 0),
            ("rdb_last_save_time", server.lastsave),
            ("rdb_last_bgsave_status", "ok" if self.last_ok else "err"),
            ("rdb_last_bgsave_time_sec", self.last_time_sec),
            ("rdb_current_bgsave_time_sec", cur),
            ("rdb_saves", self.saves),
            ("rdb_last_cow_size", 0),
            ("rdb_last_load_keys_expired", self.keys_expired),
            ("rdb_last_load_keys_loaded", self.keys_loaded),
        ]
