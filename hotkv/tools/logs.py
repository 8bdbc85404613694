"""The server's log, as valkey-server writes it.

Valkey's line format (``ValkeyLogFormat``: ``log-format``,
``log-timestamp-format``; the role S on a replica, M otherwise), ``loglevel``
read live (``_Verbosity``), ``logfile`` opened for every line so logrotate can
move it (``LogFile``), syslog as glibc's syslog(3) sends it (``Syslog``;
``HOTKV_SYSLOG_SOCKET`` names another datagram socket, the tests' knob), the
signal handler's raw line (``raw_log_line``), the startup lines and the
``always-show-logo`` banner.  Where the log goes without a logfile is the
process's one choice (``log_to_stdout``): stderr for ``hotkv serve`` (its
stdout carries the "listening" line), stdout for ``hotkv valkey-server``.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from ..core.config import (
    PARAMS,
)
from ..version import __version__


class ValkeyLogFormat(logging.Formatter):
    """valkey-server's log lines: ``log-format`` legacy (``pid:M 01 Dec 2026
    12:14:37.643 * message``) or logfmt, the timestamp as ``log-timestamp-format``
    says (legacy, iso8601, milliseconds); both read live, as CONFIG SET changes them."""

    _CHAR = {"debug": ".", "verbose": "-", "notice": "*", "warning": "#"}
    _LOGFMT = {"debug": "debug", "verbose": "info", "notice": "notice", "warning": "warning"}

    def __init__(self, values):
        super().__init__()
        self.values = values
        self.replica = None   # set by _run once the server exists: is it a replica now?

    def format(self, record) -> str:
        level = _valkey_level(record.levelno)
        msg = record.getMessage()
        if getattr(record, "raw", False):   # the banner: no prefix (Valkey's serverLogRaw)
            return msg
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        stamp = self._stamp(record.created)
        # Valkey's role: S on a replica (server.primary_host set), else M.
        replica = self.replica is not None and self.replica()
        if self.values.get("log-format") == "logfmt":
            safe = msg.replace('"', "'").replace("\n", " ").replace("\r", " ")
            return 'pid=%d role=%s timestamp="%s" level=%s message="%s"' % (
                os.getpid(), "replica" if replica else "primary", stamp, self._LOGFMT[level],
                safe)
        return "%d:%s %s %s %s" % (os.getpid(), "S" if replica else "M", stamp,
                                   self._CHAR[level], msg)

    def _stamp(self, created: float) -> str:
        kind = self.values.get("log-timestamp-format", "legacy")
        if kind == "milliseconds":
            return "%d" % int(created * 1000)
        t = time.localtime(created)
        ms = int(created * 1000) % 1000
        if kind == "iso8601":
            off = t.tm_gmtoff // 60
            return "%s.%03d%s%02d:%02d" % (time.strftime("%Y-%m-%dT%H:%M:%S", t), ms,
                                           "-" if off < 0 else "+", abs(off) // 60, abs(off) % 60)
        return "%s.%03d" % (time.strftime("%d %b %Y %H:%M:%S", t), ms)


_LEVEL_ORDER = ("debug", "verbose", "notice", "warning", "nothing")


def _valkey_level(levelno: int) -> str:
    if levelno <= logging.DEBUG:
        return "debug"
    return "notice" if levelno < logging.WARNING else "warning"


class _Verbosity(logging.Filter):
    """``loglevel`` read at each record, so CONFIG SET loglevel takes effect."""

    def __init__(self, values):
        super().__init__()
        self.values = values

    def filter(self, record) -> bool:
        want = _LEVEL_ORDER.index(self.values.get("loglevel", "notice"))
        return _LEVEL_ORDER.index(_valkey_level(record.levelno)) >= want


class LogFile(logging.Handler):
    """``logfile``: opened in append mode, written and closed for every line, as
    valkey-server does, so logrotate's move-and-create (no copytruncate, no
    signal) works; a line that cannot be written is dropped, as Valkey's."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def emit(self, record):
        try:
            line = self.format(record) + "\n"
            with open(self.path, "a") as f:
                f.write(line)
        except OSError:
            pass
        except Exception:  # pragma: no cover - a formatting bug
            self.handleError(record)


# syslog(3) priorities of Valkey's levels (debug, verbose/notice, warning) and the
# facilities of ``syslog-facility``.
_SYSLOG_PRIORITY = {"debug": 7, "notice": 5, "warning": 4}
_SYSLOG_FACILITY = {"user": 1, **{"local%d" % i: 16 + i for i in range(8)}}
# Where the syslog daemon listens; HOTKV_SYSLOG_SOCKET overrides it (tests use
# their own datagram socket instead of the machine's /dev/log).
SYSLOG_PATHS = ("/dev/log", "/var/run/syslog", "/var/run/log")


def syslog_path() -> str:
    env = os.environ.get("HOTKV_SYSLOG_SOCKET")
    if env:
        return env
    return next((p for p in SYSLOG_PATHS if os.path.exists(p)), SYSLOG_PATHS[0])


class Syslog(logging.Handler):
    """``syslog-enabled yes``: every line the log gets (same ``loglevel``) also
    goes to syslog as glibc's syslog(3) with ``openlog(syslog-ident, LOG_PID,
    syslog-facility)`` sends it: ``<PRI>Mmm dd hh:mm:ss ident[pid]: message``
    (the bare message, no Valkey prefix) in one datagram to the syslog socket.
    The socket is (re)connected when a send fails, as glibc does; when there is
    no syslog daemon the lines are dropped and the log says so once (Valkey's
    syslog(3) drops them silently)."""

    def __init__(self, values, address: str):
        super().__init__()
        self.values = values
        self.address = address
        self.sock = None
        self.warned = False

    def _send(self, data: bytes):
        import socket
        if self.sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.connect(self.address)
            except OSError:
                sock.close()
                raise
            self.sock = sock
        self.sock.send(data)

    def emit(self, record):
        facility = _SYSLOG_FACILITY[self.values.get("syslog-facility", "local0")]
        pri = facility * 8 + _SYSLOG_PRIORITY[_valkey_level(record.levelno)]
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + logging.Formatter().formatException(record.exc_info)
        t = time.localtime(record.created)
        stamp = "%s %2d %s" % (time.strftime("%b", t), t.tm_mday, time.strftime("%H:%M:%S", t))
        data = ("<%d>%s %s[%d]: %s" % (pri, stamp, self.values.get("syslog-ident", "valkey"),
                                        os.getpid(), msg)).encode("utf-8", "replace")
        for _attempt in range(2):   # a dead socket (syslogd restarted): reconnect once
            try:
                self._send(data)
                return
            except OSError as e:
                error = e
                if self.sock is not None:
                    self.sock.close()
                    self.sock = None
        if not self.warned:
            self.warned = True   # before logging: this warning must not come back here
            logging.getLogger("hotkv").warning(
                "syslog-enabled: cannot send to the syslog socket %s (%s): log lines go to "
                "the log only", self.address, error.strerror or error)

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        super().close()


def check_logfile(path: str) -> str | None:
    """Valkey's check of ``logfile`` at start: None, or why it cannot be opened."""
    if not path:
        return None
    try:
        with open(path, "a"):
            return None
    except OSError as e:
        return "Can't open the log file: %s" % (e.strerror or e)


# Where the log goes without a logfile: stderr for ``hotkv serve`` (its stdout
# carries the one "listening" line), stdout for the valkey-server command line.
_LOG_TO_STDOUT = False


def log_to_stdout():
    """``hotkv valkey-server``: without a logfile the log goes to stdout."""
    global _LOG_TO_STDOUT
    _LOG_TO_STDOUT = True


def _log_stream():
    return sys.stdout if _LOG_TO_STDOUT else sys.stderr


def setup_logging(values):
    logger = logging.getLogger("hotkv")
    logger.setLevel(logging.DEBUG)
    if values["logfile"]:
        handler = LogFile(values["logfile"])
    else:
        handler = logging.StreamHandler(_log_stream())
    handler.setFormatter(ValkeyLogFormat(values))
    handler.addFilter(_Verbosity(values))
    logger.addHandler(handler)
    if values["syslog-enabled"]:
        sys_handler = Syslog(values, syslog_path())
        sys_handler.addFilter(_Verbosity(values))
        logger.addHandler(sys_handler)
    logger.propagate = False
    return handler


def raw_log_line(values, text: str):
    """What Valkey's signal handler logs (serverLogRawFromHandler, warning level):
    ``pid:signal-handler (unix time) text``, straight to the log file (or
    stderr, hotkv's stdout), in every log-format, never to syslog, not at all
    when daemonized without a logfile."""
    if _LEVEL_ORDER.index(values.get("loglevel", "notice")) > _LEVEL_ORDER.index("warning"):
        return
    line = "%d:signal-handler (%d) %s\n" % (os.getpid(), int(time.time()), text)
    try:
        if values["logfile"]:
            with open(values["logfile"], "a") as f:
                f.write(line)
        elif not values["daemonize"]:
            _log_stream().write(line)
            _log_stream().flush()
    except OSError:
        pass


def startup_lines(config, log):
    """The lines valkey-server prints as it starts (with hotkv's name), and one
    line naming the settings given that hotkv accepts but does not act on."""
    log.info("oO0OoO0OoO0Oo hotkv is starting oO0OoO0OoO0Oo")
    log.info("hotkv version=%s, bits=64, commit=00000000, modified=0, pid=%d, just started",
             __version__, os.getpid())
    log.info("Configuration loaded")
    inert = sorted({PARAMS[n].name for n in getattr(config, "given", ()) if PARAMS[n].inert})
    for name in getattr(config, "deprecated", ()):
        log.warning("Ignoring the deprecated directive '%s'", name)
    if inert:
        log.warning("Settings accepted and kept but with no effect in hotkv: %s",
                    ", ".join(inert))


def banner(values) -> str:
    """What ``always-show-logo yes`` logs before "Server initialized" (Valkey's
    logo stands there): the mode, the configured port and the pid, in the
    ``Port: N`` / ``PID: N`` lines Valkey's test harness looks for."""
    return ("\n    hotkv %s (Redis protocol, valkey-server 8.1.8 semantics) 64 bit\n"
            "    Running in standalone mode\n    Port: %d\n    PID: %d\n"
            % (__version__, values["port"], os.getpid()))


def stdout_is_log(values) -> bool:
    """Whether stdout is where the log goes (``2>&1``, a terminal, ``logfile
    /dev/stdout``): then the "listening" line is written as a log line."""
    target = values["logfile"]
    try:
        out = os.fstat(sys.stdout.fileno())
        log = os.stat(target) if target else os.fstat(_log_stream().fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (out.st_dev, out.st_ino) == (log.st_dev, log.st_ino)


def notice_logged(values) -> bool:
    return _LEVEL_ORDER.index(values.get("loglevel", "notice")) <= _LEVEL_ORDER.index("notice")
