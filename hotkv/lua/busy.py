"""A script past its time limit (Valkey's busy script): the other clients are
served from the Lua count hook and answered BUSY.

Owns ``BusyScript``, the part of ``hotkv.lua.engine.Engine`` that runs from
the prelude's count hook (every 100,000 instructions): once the run is past
``lua-time-limit`` (busy-reply-threshold) it logs the slow-script line,
installs the busy gate as ``server.pause_check`` and the SHUTDOWN hook, and
serves the other clients through ``hotkv.net.busy.ServeWhileBlocked`` (the
event loop cannot be re-entered); ``_leave_busy`` takes all of it back at
the script's end.  Also ``BUSY_SCRIPT`` and ``shutdown_saves``.

Invariants:
* the gate sits in Valkey's place, after the AUTH and ACL checks: commands
  without ``allow_busy`` get the engine's BUSY text; a SHUTDOWN that would
  save is refused as a failed call; SCRIPT KILL ends a script that has not
  written, SHUTDOWN NOSAVE ends any (``run.killed`` / ``run.shutdown``);
* the hook never raises a Python error into Lua (it logs and goes on);
* after ``_leave_busy`` the server's gates are what they were before, unless
  someone else replaced them meanwhile (then theirs stay).
"""

from __future__ import annotations

import logging
import time

from ..core.dispatch import reject
from ..core.stats import count_call
from ..net.busy import ServeWhileBlocked

log = logging.getLogger("hotkv")

BUSY_SCRIPT = ("BUSY Valkey is busy running a script. You can only call SCRIPT KILL or "
               "SHUTDOWN NOSAVE.")

_SHUTDOWN_OPTIONS = {b"nosave", b"save", b"now", b"force", b"abort"}


def shutdown_saves(argv) -> bool:
    """A well-formed SHUTDOWN that is neither NOSAVE nor ABORT: refused BUSY
    while a script is busy (Valkey checks after the syntax and ABORT, so
    those still get the command's own replies)."""
    opts = {a.lower() for a in argv[1:]}
    if not opts <= _SHUTDOWN_OPTIONS or b"abort" in opts:
        return False
    return b"nosave" not in opts


class BusyScript:
    """Engine's script-timeout half (mixed into hotkv.lua.engine.Engine)."""

    # Script timeout ----------------------------------------------------
    def _py_interrupt(self):
        run = self.run
        if run is None:
            return False
        try:
            if not run.busy:
                limit = self.server.config.values["lua-time-limit"]
                if limit <= 0 or (time.monotonic() - run.start) * 1000 < limit:
                    return False
                self._enter_busy(run)
            self._process_events(run)
        except Exception:   # the hook must never raise a Python error into Lua
            log.exception("scripting: busy-script event processing failed")
        return run.killed

    def _enter_busy(self, run):
        """Past the time limit: from now on other clients are served from the
        interrupt hook and answered BUSY, except for the commands flagged
        allow_busy (SCRIPT KILL, SHUTDOWN NOSAVE, AUTH, MULTI...)."""
        # (at call time: net is the event loop's side, and whether it leads
        # back to the command modules is its own business)
        server = self.server
        run.busy = True
        server.yielding = True     # blocked clients wait for the script's end (dispatch)
        log.warning("Slow script detected: still in execution after %d milliseconds. "
                    "You can try killing the script using the %s command. "
                    "Script name is: %s.", int((time.monotonic() - run.start) * 1000),
                    self.KILL, run.sha.decode())
        prev = server.pause_check
        busy_error = run.busy_error

        def busy_gate(client, cmd, argv):
            if "allow_busy" not in cmd.flags:
                reject(client, busy_error, cmd)
                return True
            if cmd.name == "shutdown" and shutdown_saves(argv):
                # Valkey refuses it inside the command (before any save):
                # counted as a call that failed, not as a rejected one.
                count_call(server, cmd, 0.0, client, failed=True)
                client.last_cmd = cmd.name
                server.count_error(busy_error)
                client.add_error(busy_error)
                return True
            return prev(client, cmd, argv) if prev is not None else False
        run.prev_gate = (prev, busy_gate)
        server.pause_check = busy_gate
        # SHUTDOWN NOSAVE ends the script even if it wrote, as the process
        # exit does in Valkey.
        down = server.shutdown_cb
        if down is not None:
            def shutdown_gate():
                run.killed = run.shutdown = True
                down()
            run.prev_shutdown = (down, shutdown_gate)
            server.shutdown_cb = shutdown_gate
        run.serving = ServeWhileBlocked(server)

    def _leave_busy(self, run):
        server = self.server
        server.yielding = False
        prev, gate = run.prev_gate
        if server.pause_check is gate:
            server.pause_check = prev
        if run.prev_shutdown is not None:
            down, gate = run.prev_shutdown
            if server.shutdown_cb is gate:
                server.shutdown_cb = down
        if run.serving is not None:
            serving, run.serving = run.serving, None
            serving.stop()   # new connections join the event loop

    def _process_events(self, run):
        """Serve the other clients while the script runs (Valkey's
        processEventsWhileBlocked): see hotkv.net.busy.ServeWhileBlocked."""
        run.serving.pump(skip=run.caller)
