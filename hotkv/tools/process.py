"""The process around a server: daemon, systemd, and shutdown on a signal.

``Systemd`` sends sd_notify's STATUS/READY=1/STOPPING=1 (``supervised
systemd``, examples/hotkv.service); ``daemonize`` forks for ``daemonize yes``
(the parent exits 0); ``SignalShutdown`` handles SIGINT/SIGTERM as
valkey-server does, the decision itself being ``Server.prepare_shutdown``'s.
"""

from __future__ import annotations

import logging
import os
import signal

from ..persistence import rdbfile
from .logs import raw_log_line


class Systemd:
    """``supervised systemd`` (or ``auto`` with $NOTIFY_SOCKET set): the sd_notify
    datagrams valkey-server sends -- STATUS while loading, STATUS + READY=1 once it
    accepts connections, STOPPING=1 when the shutdown begins."""

    def __init__(self, values, log):
        mode = values.get("supervised", "no")
        self.path = os.environ.get("NOTIFY_SOCKET", "")
        self.log = log
        self.on = mode == "systemd" or (mode == "auto" and bool(self.path))
        if mode == "upstart" or (mode == "auto" and os.environ.get("UPSTART_JOB")):
            log.warning("upstart supervision requested: hotkv supports systemd only")
        if self.on and self.notify("STATUS=hotkv is loading...\n"):
            log.info("Supervised by systemd. Please make sure you set appropriate values for "
                     "TimeoutStartSec and TimeoutStopSec in your service unit.")

    def notify(self, message: str) -> bool:
        if not self.on:
            return False
        if not self.path:
            self.log.warning("systemd supervision error: NOTIFY_SOCKET not found!")
            return False
        import socket
        addr = "\0" + self.path[1:] if self.path.startswith("@") else self.path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(message.encode(), addr)
        except OSError as e:
            self.log.warning("systemd supervision error: sd_notify: %s", e)
            return False
        return True


def daemonize() -> bool:
    """``daemonize yes``: fork, the child leaves the session and its terminal
    (stdin/stdout/stderr on /dev/null: its log is ``logfile``); True in the parent.
    Runs before any thread or event loop exists."""
    if os.fork():
        return True
    os.setsid()
    fd = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(fd, target)
    if fd > 2:
        os.close(fd)
    return False


# The flags of shutdown-on-sigint / shutdown-on-sigterm (hotkv.core.config._SHUTDOWN_FLAGS).
class SignalShutdown:
    """SIGINT/SIGTERM as valkey-server handles them: the handler logs the raw
    "Received SIGTERM scheduling shutdown..." line and the shutdown runs on the
    next turn of the loop with the flags of ``shutdown-on-sigterm`` /
    ``shutdown-on-sigint`` (read then, so CONFIG SET counts): default saves when
    save points are set, ``save`` always, ``nosave`` never (a BGSAVE child is
    killed either way), ``force`` exits even when that save fails, ``now`` skips
    the wait for replicas (hotkv has none: nothing to skip).  Without force a
    failed save cancels the shutdown -- the server keeps serving and a later
    signal tries again -- as Valkey does; so does an AOF turned on whose first
    rewrite is still running ("Writing initial AOF, can't exit."), unless force.
    A second SIGINT while a shutdown is pending -- the final save can take a
    while -- exits at once with code 1 after removing the save's temp file
    (Valkey's "You insist... exiting now."); a second SIGTERM is ignored."""

    def __init__(self, server, listener):
        self.server = server
        self.listener = listener
        self.pending = False
        server.abort_shutdown = self.abort   # SHUTDOWN ABORT

    def abort(self) -> bool:
        """SHUTDOWN ABORT: cancel a signal shutdown not yet carried out (held
        by DEBUG PAUSE-CRON, as Valkey runs it from its cron)."""
        if not self.pending:
            return False
        self.pending = False
        logging.getLogger("hotkv").warning("Shutdown manually aborted.")
        return True

    def __call__(self, sig: int):
        if self.pending:
            if sig == signal.SIGINT:
                self._insist()
            return
        self.pending = True
        name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
        raw_log_line(self.server.config.values, "Received %s scheduling shutdown..." % name)
        self.server.loop.call_soon(self._shutdown, sig)

    def _insist(self):
        raw_log_line(self.server.config.values, "You insist... exiting now.")
        try:   # the final save's temp file (Valkey's rdbRemoveTempFile)
            os.unlink(rdbfile.temp_path(self.server.snapshots.path(), os.getpid()))
        except OSError:
            pass
        os._exit(1)

    def _during_save(self, signum, _frame):
        """Python-level handler while the final save blocks the loop (the
        loop's own handler would only run once the save is over)."""
        if signum == signal.SIGINT:
            self._insist()

    def _shutdown(self, sig: int):
        server = self.server
        if not self.pending:
            return   # SHUTDOWN ABORT came first
        if server.cron_paused:   # Valkey shuts down from its cron
            server.loop.call_later(1.0 / server.config.values["hz"], self._shutdown, sig)
            return
        values = server.config.values
        flags = values["shutdown-on-sigint" if sig == signal.SIGINT else "shutdown-on-sigterm"]
        log = logging.getLogger("hotkv")
        log.info("User requested shutdown...")
        # The final save can block the loop: meanwhile a second SIGINT must
        # still exit at once (a Python-level handler; the loop's runs later).
        previous = {s: signal.signal(s, self._during_save)
                    for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            ready = server.prepare_shutdown(flags)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if not ready:
            self.pending = False
            return
        self.listener.request_shutdown()
