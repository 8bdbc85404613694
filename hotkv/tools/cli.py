"""The ``hotkv`` command line: ``hotkv serve`` and ``hotkv --version``.

``hotkv serve [path/to/hotkv.conf] [--name value ...]`` runs a server in the
foreground.  Settings are redis.conf's: a config file is read with
``hotkv.core.config.parse_config_file`` (``include other.conf`` lines are
followed) and any parameter of ``hotkv.core.config`` can
be given as ``--name value`` (or ``--name=value``); a value runs up to the
next ``--option``, so ``--save 900 1 300 10`` works as with redis-server.
Options given on the command line win over the file.

Once the server accepts connections it prints exactly one line on stdout
saying where it listens (``hotkv 0.1.0 listening on 127.0.0.1:6379``; when stdout
is the log itself -- ``2>&1``, a terminal -- it is a log line in the log's
format instead); logs go to stderr (or ``--logfile``) in valkey-server's
line format (``log-format``, ``log-timestamp-format``, ``loglevel`` read live;
the role S on a replica, M otherwise), starting with Valkey's startup lines
and one line naming the inert settings given.  ``--help-config`` lists every
setting and marks the inert ones.  A bad config-file line is reported as
valkey-server does (the line number and the line) with hotkv's reason, and an
unknown setting or option with the closest name (``did_you_mean``).
``CONFIG GET dir`` is the absolute working directory, as Valkey's.
``daemonize yes`` forks (the parent exits 0); ``supervised systemd`` sends
sd_notify's STATUS/READY=1/STOPPING=1 (``Systemd``, examples/hotkv.service).
Directives valkey-server accepts and ignores (``config_table.DEPRECATED``) are
ignored with a warning; ``loadmodule`` is refused.  SIGINT and SIGTERM shut it
down as valkey-server does (``SignalShutdown``): the flags of
``shutdown-on-sigint``/``shutdown-on-sigterm`` decide the final save, a failed
save without ``force`` keeps the server running, otherwise exit code 0 with the
AOF flushed by ``Server.shutdown`` (the listener's stop calls it).
``shutdown-timeout`` is inert: it bounds a wait for replicas hotkv never has.

``logfile`` is opened for every line, as Valkey's, so logrotate can move it
away with no signal.  ``syslog-enabled yes`` also sends each line to syslog as
glibc's syslog(3) would (``Syslog``: ``syslog-ident``, ``syslog-facility``, the
socket /dev/log or the platform's; the environment variable
``HOTKV_SYSLOG_SOCKET`` names another datagram socket -- the tests' knob).
``hotkv valkey-server [CONFIG_FILE] [--name value ...]`` is valkey-server's own
command line (``valkey_server``; compat/valkey-server-shim runs it for Valkey's
Tcl harness): the log on stdout, the banner of ``always-show-logo`` (with the
``PID:`` line the harness waits for) before "Server initialized", Valkey's
"FATAL CONFIG FILE ERROR" and "Failed listening on port" exits.
``hotkv cli`` (a redis-cli) and ``hotkv queues`` (the queues in a terminal)
are hotkv/tools/cli_tool.py's and hotkv/tools/queues_tui.py's; ``hotkv --help`` lists
every subcommand.
``python -m hotkv`` is the same command (``hotkv/__main__.py``).  It runs on
uvloop when installed.

Exit codes: 0 after a clean shutdown, 1 when the server cannot start (port
in use, unreadable config file), 2 for bad command-line usage or an invalid
setting.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time

from ..core.config import (
    ALIASES,
    PARAMS,
    Config,
    ConfigError,
    bind_addresses,
    did_you_mean,
    parse_config_file,
)
from ..core.config_table import DEPRECATED
from ..net.listeners import Listener, close_loop, new_event_loop
from ..persistence import rdbfile
from ..persistence.aof import AOFLoadError
from ..protocol.resp import split_inline_args
from ..server import Server
from ..version import __version__
from . import checks, cli_tool

USAGE = """usage: hotkv serve [CONFIG_FILE] [--name value ...]
       hotkv serve --help-config
       hotkv cli [-h HOST] [-p PORT] [-a PASS] [-u URL] [--resp3] [cmd [arg ...]]
       hotkv queues [--url URL] [--once]
       hotkv check-rdb FILE
       hotkv check-aof [--fix|--truncate-to-timestamp TS] FILE.manifest|FILE.aof
       hotkv valkey-server [CONFIG_FILE] [--name value ...]
       hotkv --version

  serve          run a server (--http-port N adds the dashboard and /metrics);
                 --help-config lists every setting, its default and what hotkv ignores
  cli            a redis-cli: interactive, or one command (hotkv cli -p 6379 LPUSH q job)
  queues         the queues of a server (hotkv or Valkey) in the terminal, refreshing
  check-rdb      check an RDB file
  check-aof      check (or fix) an AOF
  valkey-server  valkey-server's own command line (for Valkey's test harness)

Any redis.conf parameter hotkv knows can be given as --name value, e.g.
  hotkv serve --port 6379 --bind 127.0.0.1 --requirepass secret --appendonly yes
  hotkv serve /etc/hotkv.conf --loglevel warning
"""

_LOGLEVELS = {"debug": logging.DEBUG, "verbose": logging.INFO, "notice": logging.INFO,
              "warning": logging.WARNING, "nothing": logging.CRITICAL + 10}


class UsageError(Exception):
    pass


def parse_serve_args(args: list[str]) -> tuple[str | None, list]:
    """``[config-file] [--name value ...]`` -> (path or None, [(name, value)]);
    value is None for a bare ``--flag``."""
    path = None
    settings: list[tuple[str, str]] = []
    i = 0
    if args and not args[0].startswith("--"):
        path = args[0]
        i = 1
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or arg == "--":
            raise UsageError("unexpected argument '%s' (options are --name value)" % arg)
        name = arg[2:]
        if "=" in name:
            name, value = name.split("=", 1)
            settings.append((name.lower(), value))
            i += 1
            continue
        j = i + 1
        values = []
        while j < len(args) and not (args[j].startswith("--") and len(args[j]) > 2):
            values.append(args[j])
            j += 1
        # A bare flag (--appendonly) is "yes" for a boolean, else an error.
        settings.append((name.lower(), " ".join(values) if values else None))
        i = j
    return path, settings


SERVE_DEFAULT_SAVE = "3600 1 300 100 60 10000"   # valkey-server's default save points


class ConfigFileError(UsageError):
    """A config file line hotkv cannot take, reported as valkey-server reports it
    (``*** FATAL CONFIG FILE ERROR ***``, the file and line number, ``>>> 'the
    line'``), then hotkv's reason."""

    def __init__(self, file_path: str, lineno: int, line: str, why: str):
        super().__init__(
            "\n*** FATAL CONFIG FILE ERROR (hotkv %s) ***\n"
            "Reading the configuration file %s, at line %d\n>>> '%s'\n%s"
            % (__version__, file_path, lineno, line, why))


def _unknown(name: str, option: bool) -> str:
    """"unknown setting 'x'", with the closest setting when one is close."""
    guess = did_you_mean(name, DEPRECATED)
    text = "unknown setting '%s'" % name
    if guess is not None:
        text += " (did you mean %s?)" % ("--" + guess if option else "'%s'" % guess)
    return text


def build_config(path: str | None, cli: list):
    """A ``Config`` from a config file and command-line settings, applied in
    order (the command line last, so it wins); every name and value is
    checked and an error names where it came from: the option, or the file,
    line number and line (``ConfigFileError``)."""
    pairs: list = []   # (name, value, where, (file, line number, line) or None)

    def read(file_path: str, depth: int):
        try:
            with open(file_path) as f:
                text = f.read()
        except OSError as e:
            raise UsageError("cannot read config file '%s': %s" % (file_path, e.strerror or e))
        try:
            file_pairs = parse_config_file(text, numbered=True)
        except ConfigError as e:
            if getattr(e, "lineno", None) is None:
                raise UsageError("config file '%s': %s" % (file_path, e))
            raise ConfigFileError(file_path, e.lineno, e.line,
                                  "Unbalanced quotes in configuration line") from None
        for name, value, lineno, line in file_pairs:
            if name == "include":   # redis.conf's include: the other file's lines, here
                if depth >= 10:
                    raise ConfigFileError(file_path, lineno, line, "includes nested too deeply")
                read(value, depth + 1)
            else:
                pairs.append((name, value, "config file '%s'" % file_path,
                              (file_path, lineno, line)))

    if path is not None:
        read(path, 0)
    pairs.extend((name, value, "option --%s" % name, None) for name, value in cli)
    config = Config()
    # `hotkv serve` keeps Valkey's default save points (EmbeddedServer has
    # none); a first "save" setting replaces them, as in redis.conf.
    config.set_from_text("save", SERVE_DEFAULT_SAVE, startup=True)
    config.given = set()   # the settings the file or the command line set
    config.deprecated = []
    seen_save = False
    for name, value, where, loc in pairs:
        try:
            canon = _apply_setting(config, name, value, where, seen_save)
        except UsageError as e:
            if loc is None:
                raise
            raise ConfigFileError(*loc, str(e).replace(" (%s)" % where, "")) from None
        seen_save = seen_save or canon == "save"
    return config


def _apply_setting(config, name: str, value, where: str, seen_save: bool):
    """One setting of build_config; its canonical name (None when ignored)."""
    canon = name if name in PARAMS else ALIASES.get(name)
    if canon is None and name in DEPRECATED and value and len(value.split()) == 1:
        config.deprecated.append(name)   # accepted and ignored, as valkey-server does
        return None
    if canon is None and name == "loadmodule":
        raise UsageError("'loadmodule' (%s): hotkv does not load Valkey modules" % where)
    if canon is None:
        raise UsageError("%s (%s)" % (_unknown(name, where.startswith("option")), where))
    if value is None:
        if PARAMS[canon].kind != "bool":
            raise UsageError("option --%s needs a value" % name)
        value = "yes"
    if canon == "save" and seen_save and value and where.startswith("config"):
        # redis.conf lists one "save <seconds> <changes>" rule a line.
        value = config.values["save"] + " " + value
    config.given.add(canon)
    try:
        config.set_from_text(canon, value, startup=True)
    except ConfigError as e:
        raise UsageError("invalid value '%s' for '%s' (%s): %s" % (value, name, where, e))
    return canon


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


def _log_stream():
    return sys.stdout if _LOG_TO_STDOUT else sys.stderr


def _setup_logging(values):
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


def _startup_lines(config, log):
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


def _daemonize() -> bool:
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


# Why an inert setting has no effect, where the name alone does not say it.
INERT_WHY = {
    "shutdown-timeout": "it bounds the wait for replicas to catch up at shutdown; hotkv "
                        "does no replication wait at shutdown: it never waits for replicas",
}


def help_config() -> str:
    """``hotkv serve --help-config``: every setting, its default, and whether
    hotkv acts on it ("(inert)": accepted, kept, reported, no effect)."""
    out = ["Settings of valkey.conf / redis.conf (--name value, or a config file line).",
           "(inert): accepted, kept, reported by CONFIG GET and written by CONFIG REWRITE,",
           "but with no effect in hotkv.  (immutable): not changed by CONFIG SET.", ""]
    for name in sorted(PARAMS):
        p = PARAMS[name]
        try:
            default = p.conf_text(p.default) if p.default is not None else ""
        except (TypeError, ValueError):
            default = str(p.default)
        if name == "save":   # hotkv serve's, as valkey-server's (EmbeddedServer has none)
            default = SERVE_DEFAULT_SAVE
        marks = ("  (immutable)" if not p.mutable else "") + ("  (inert)" if p.inert else "")
        out.append("%-40s %s%s" % (name, default if default != "" else '""', marks))
        if p.inert and name in INERT_WHY:
            out.append("    inert: %s" % INERT_WHY[name])
        if p.aliases:
            out.append("    alias: %s" % ", ".join(p.aliases))
    return "\n".join(out) + "\n"


def _stdout_is_log(values) -> bool:
    """Whether stdout is where the log goes (``2>&1``, a terminal, ``logfile
    /dev/stdout``): then the "listening" line is written as a log line."""
    target = values["logfile"]
    try:
        out = os.fstat(sys.stdout.fileno())
        log = os.stat(target) if target else os.fstat(_log_stream().fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (out.st_dev, out.st_ino) == (log.st_dev, log.st_ino)


def _notice_logged(values) -> bool:
    return _LEVEL_ORDER.index(values.get("loglevel", "notice")) <= _LEVEL_ORDER.index("notice")


def _where(listener, values) -> str:
    parts = []
    for host, port in listener.bound:
        parts.append("[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port))
    if values["unixsocket"]:
        parts.append("unix:%s" % values["unixsocket"])
    return ", ".join(dict.fromkeys(parts))


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
        if getattr(server, "cron_paused", False):   # Valkey shuts down from its cron
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


async def _serve(server, ready_line: bool = True, systemd=None, running_line=True) -> int:
    loop = asyncio.get_running_loop()
    listener = Listener(server)
    await listener.start(loop)
    on_signal = SignalShutdown(server, listener)
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on a main thread
            pass
    values = server.config.values
    log = logging.getLogger("hotkv")
    if running_line:
        log.info("Running mode=%s, port=%d.",
                 "standalone" if server.cluster is None else "cluster", values["port"])
    for kind, on in (("tcp", True), ("unix", values["unixsocket"]), ("tls", values["tls-port"])):
        if on:
            log.info("Ready to accept connections %s", kind)
    if systemd is not None and systemd.on:
        systemd.notify("STATUS=Ready to accept connections\n")
        systemd.notify("READY=1\n")
    if ready_line:
        line = "hotkv %s listening on %s" % (__version__, _where(listener, values))
        if _stdout_is_log(values) and _notice_logged(values):
            log.info("%s", line)   # in the log's format, not a foreign line inside it
        else:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
    try:
        await listener.closed
    finally:
        if systemd is not None and systemd.on:
            systemd.notify("STOPPING=1\n")
        await listener.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):  # pragma: no cover
                pass
        if values["pidfile"]:
            log.info("Removing the pid file.")
        log.warning("hotkv is now ready to exit, bye bye...")
    return 0


def serve(args: list[str]) -> int:
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if args and args[0] == "--help-config":
        sys.stdout.write(help_config())
        return 0
    try:
        path, cli = parse_serve_args(args)
        if path is not None:
            path = os.path.abspath(path)
        config = build_config(path, cli)
    except UsageError as e:
        sys.stderr.write("hotkv serve: %s\n" % e)
        if not isinstance(e, ConfigFileError):
            sys.stderr.write("(hotkv serve --help: usage; --help-config: every setting)\n")
        return 2
    problem = check_logfile(config.values["logfile"])
    if problem:
        sys.stderr.write("hotkv serve: %s\n" % problem)
        return 2
    return _run(config, path, valkey=False)


def valkey_server(args: list[str]) -> int:
    """valkey-server's command line, ``[CONFIG_FILE] [--name value ...] [-]``,
    as Valkey's test harness spawns it (compat/valkey-server-shim): the options
    become config lines appended to the file (``valkey_options``), read by the
    file's rules (``build_valkey_config``); the log goes to stdout without a
    ``logfile`` and no "listening" line is printed; a bad line is Valkey's
    "FATAL CONFIG FILE ERROR" on stderr, exit 1; a port in use is logged as
    "Failed listening on port N (tcp), aborting.", exit 1; the banner
    (``always-show-logo``) or "Running mode=" comes before "Server
    initialized", and the data loads after it, as in valkey-server."""
    global _LOG_TO_STDOUT
    if args and args[0] in ("-v", "--version"):
        sys.stdout.write("hotkv %s (valkey-server 8.1.8 command line)\n" % __version__)
        return 0
    path, from_stdin, options = valkey_options(args)
    if path is not None:   # CONFIG REWRITE writes it after the chdir to ``dir``
        path = os.path.abspath(path)
    try:
        config = build_valkey_config(path, sys.stdin.read() if from_stdin else None, options)
    except FatalConfigError as e:
        sys.stderr.write(str(e))
        return 1
    except UsageError as e:   # the config file cannot be read: Valkey logs it (stdout)
        sys.stdout.write("%d:M %s # Fatal error, %s\n" % (
            os.getpid(), ValkeyLogFormat({})._stamp(time.time()), e))
        return 1
    problem = check_logfile(config.values["logfile"])
    if problem:
        sys.stderr.write("%s\n" % problem)
        return 1
    _LOG_TO_STDOUT = True
    return _run(config, path, valkey=True)


def _sds_repr(text: str) -> str:
    """Valkey's sdscatrepr: a double-quoted string its config parser reads back."""
    out = ['"']
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch in "\n\r\t\a\b":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a",
                        "\b": "\\b"}[ch])
        elif ch.isprintable() and ord(ch) < 128:
            out.append(ch)
        else:
            out.extend("\\x%02x" % b for b in ch.encode("utf-8", "surrogateescape"))
    out.append('"')
    return "".join(out)


def valkey_options(args: list[str]) -> tuple:
    """valkey-server's argv -> (config file or None, read stdin?, options text).
    As Valkey's main(): a first argument not starting with "-" is the file;
    "--name" starts a config line, the arguments after it are appended quoted,
    "--name value" in one argument is a whole line; an option name followed by
    nothing is waiting for its value, so a following "--x" is that value
    (``--proc-title-template --my--title``), except that ``--save`` followed by
    an option or nothing is ``save ""``; a lone "-" first or last reads stdin."""
    path, from_stdin, options = None, False, ""
    j, n = 0, len(args)
    if args and not args[0].startswith("-"):
        path, j = args[0], 1
    handled_last = True
    while j < n:
        arg = args[j]
        if arg == "-" and (j == 0 or j == n - 1):
            from_stdin = True
        elif handled_last and arg.startswith("--"):
            if options:
                options += "\n"
            options += arg[2:] + " "
            words = split_inline_args(arg.encode("utf-8", "surrogateescape"))
            if words is not None and len(words) == 1:
                handled_last = False
                if arg.lower() == "--save" and (j == n - 1 or args[j + 1].startswith("--")):
                    options += '""'
                    handled_last = j != n - 1
            else:
                handled_last = True
        else:
            options += _sds_repr(arg) + " "
            handled_last = True
        j += 1
    return path, from_stdin, options


class FatalConfigError(Exception):
    """valkey-server's report of a config line it cannot take."""

    def __init__(self, message: str, lineno: int | None = None, line: str | None = None):
        text = "\n*** FATAL CONFIG FILE ERROR (Version 8.1.8) ***\n"
        if lineno is not None:
            text += "Reading the configuration file, at line %d\n>>> '%s'\n" % (lineno, line)
        super().__init__(text + message + "\n")


def build_valkey_config(path: str | None, stdin_text: str | None, options: str):
    """A ``Config`` from the file, stdin and the options text (in that order,
    one text as Valkey joins them), line by line by Valkey's rules: a setting
    takes exactly one argument unless it is multi-argument (flag M: save,
    bind, client-output-buffer-limit...), where one argument is split on
    spaces; the first ``save`` line replaces the default save points, later
    ones add to them and ``save ""`` clears them; ``include`` reads another
    file in place; an unknown directive is "Bad directive or wrong number of
    arguments"."""
    text = ""
    if path is not None:
        text = _read_conf(path)
    if stdin_text is not None:
        text += stdin_text   # no separator: Valkey appends stdin as it reads it
    if options:
        text += "\n" + options
    config = Config()
    config.set_from_text("save", SERVE_DEFAULT_SAVE, startup=True)
    # valkey-server's default bind (hotkv's own is 127.0.0.1): a file without a
    # bind line listens on every address, protected mode guarding it.
    config.set_from_text("bind", "* -::*", startup=True)
    config.given = set()
    config.deprecated = []
    state = {"save_loaded": False}
    _valkey_lines(config, text, state, 0)
    return config


def _read_conf(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise UsageError("can't open config file '%s': %s" % (path, e.strerror or e))


def _valkey_lines(config, text: str, state: dict, depth: int):
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.strip(" \t\r\n")
        if not line or line.startswith("#"):
            continue
        words = split_inline_args(line.encode("utf-8", "surrogateescape"))
        if words is None:
            raise FatalConfigError("Unbalanced quotes in configuration line", lineno, line)
        if not words:
            continue
        argv = [w.decode("utf-8", "surrogateescape") for w in words]
        name, args = argv[0].lower(), argv[1:]
        try:
            _valkey_directive(config, name, args, state, depth)
        except ConfigError as e:
            raise FatalConfigError(str(e), lineno, line) from None


def _valkey_directive(config, name: str, args: list, state: dict, depth: int):
    canon = name if name in PARAMS else ALIASES.get(name)
    if canon is None:
        if name == "include" and len(args) == 1:
            if depth >= 10:
                raise ConfigError("includes nested too deeply")
            try:
                _valkey_lines(config, _read_conf(args[0]), state, depth + 1)
            except UsageError as e:
                raise ConfigError(str(e)) from None
            return
        if name in DEPRECATED and len(args) == 1:
            config.deprecated.append(name)   # accepted and ignored, as valkey-server does
            return
        if name == "loadmodule":
            raise ConfigError("hotkv does not load Valkey modules")
        raise ConfigError("Bad directive or wrong number of arguments")
    p = PARAMS[canon]
    if p.multi:   # repeatable directives (user, rename-command): one line each
        value = " ".join(_sds_repr(a) if not a or " " in a else a for a in args)
    elif "M" not in p.flags:
        if len(args) != 1:
            raise ConfigError("wrong number of arguments")
        value = args[0]
    elif len(args) == 1 and args[0]:
        value = args[0]   # one argument: split on spaces by the setting's parser
    else:
        value = " ".join(args)
    if canon == "save":
        if value == "" or not state["save_loaded"]:
            state["save_loaded"] = True
        elif config.values["save"]:
            value = config.values["save"] + " " + value
    config.given.add(canon)
    config.set_from_text(canon, value, startup=True)


def _port_in_use(values) -> str | None:
    """The valkey-server command line binds before "Server initialized": a
    port taken is found here, with Valkey's warning, before that line."""
    import socket
    port = values["port"]
    if not port:
        return None
    for host in bind_addresses(values["bind"]):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as e:
                return "Could not create server TCP listening socket %s:%d: bind: %s" % (
                    host, port, e.strerror or e)
    return None


def _run(config, path, valkey: bool) -> int:
    _setup_logging(config.values)
    if config.values["daemonize"] and _daemonize():
        return 0   # the parent, as valkey-server's: the daemon goes on alone
    log = logging.getLogger("hotkv")
    _startup_lines(config, log)
    systemd = Systemd(config.values, log)
    try:
        server = Server(config)
    except Exception as e:  # an aclfile with errors, say: say why, no traceback
        if valkey:
            log.warning("%s", e)
        sys.stderr.write("hotkv serve: cannot start: %s\n" % e)
        return 1
    values = server.config.values
    for handler in log.handlers:
        if isinstance(handler.formatter, ValkeyLogFormat):
            handler.formatter.replica = lambda: server.repl.role == "slave"
    if server.cluster is not None and not valkey:
        server.cluster.own_every_slot()   # hotkv serve's ready single node (README, Cluster mode)
    if valkey:
        problem = _port_in_use(values)
        if problem:
            log.warning("Warning: %s", problem)
            log.warning("Failed listening on port %d (tcp), aborting.", values["port"])
            return 1
    if values["always-show-logo"]:
        log.info(banner(values), extra={"raw": True})
    elif valkey:
        log.info("Running mode=%s, port=%d.",
                 "standalone" if server.cluster is None else "cluster", values["port"])
    log.info("Server initialized")
    server.config_file = path
    if values["dir"] and values["dir"] != ".":
        try:
            os.chdir(values["dir"])
        except OSError as e:
            sys.stderr.write("hotkv serve: can't chdir to '%s': %s\n" % (values["dir"], e.strerror))
            return 1
    values["dir"] = os.getcwd()   # as valkey-server's CONFIG GET dir: its working directory
    if values["pidfile"]:
        try:
            with open(values["pidfile"], "w") as f:
                f.write("%d\n" % os.getpid())
        except OSError as e:
            log.warning("failed to write the pidfile '%s': %s", values["pidfile"], e)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(_serve(server, ready_line=not valkey, systemd=systemd,
                                              running_line=not valkey))
    except OSError as e:
        if valkey:
            log.warning("Failed listening on port %d (tcp), aborting.", values["port"])
        sys.stderr.write("hotkv serve: cannot listen: %s\n" % (e.strerror or e))
        return 1
    except Exception as e:  # the start failed (AOF unreadable, TLS files...)
        if isinstance(e, ConfigError):   # a setting refused at start (http-port): no traceback
            log.warning("%s", e)
        elif not isinstance(e, (rdbfile.RDBLoadError, AOFLoadError)):
            # A damaged file was logged with its reason and offset by
            # Server.load_data: no traceback for bad input.
            log.exception("start-up failed")
        sys.stderr.write("hotkv serve: cannot start: %s\n" % e)
        return 1
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during shutdown
        return 0
    finally:
        try:
            close_loop(loop)
        finally:
            if values["pidfile"]:
                try:
                    os.unlink(values["pidfile"])
                except OSError:
                    pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    if argv[0] in ("--version", "-v", "version"):
        sys.stdout.write("hotkv %s\n" % __version__)
        return 0
    if argv[0] == "serve":
        return serve(argv[1:])
    if argv[0] in ("check-rdb", "check-aof"):
        run = checks.check_rdb if argv[0] == "check-rdb" else checks.check_aof
        return run(argv[1:])
    if argv[0] == "valkey-server":
        return valkey_server(argv[1:])
    if argv[0] == "cli":   # hotkv/tools/cli_tool.py
        return cli_tool.main(argv[1:])
    if argv[0] == "queues":   # hotkv/tools/queues_tui.py
        from . import queues_tui
        return queues_tui.main(argv[1:])
    sys.stderr.write("hotkv: unknown command '%s'\n%s" % (argv[0], USAGE))
    return 2


if __name__ == "__main__":
    sys.exit(main())
