"""``hotkv serve`` and ``hotkv valkey-server``: a server in the foreground.

What ``hotkv.tools.cli`` (the ``hotkv`` command's entry point) runs for
those two subcommands; see that module's docstring for the behaviour (the
settings, the ready line, the log, signals, exit codes).  Its own module so
that ``hotkv cli``, ``hotkv --version`` and ``hotkv check-*`` start without
loading the server (``import hotkv.server`` registers every command: about
a second of a CLI's start on this machine).

The pieces, one module each: ``serve_args`` (hotkv's command line and
config file, ``--help-config``), ``valkey_args`` (valkey-server's), ``logs``
(the log's format, files, syslog, startup lines), ``process`` (daemon,
systemd, signals); this module puts them together (``serve``,
``valkey_server``, ``_run``).
"""


from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time

from ..core.config import (
    ConfigError,
    bind_addresses,
)
from ..net.listeners import Listener, close_loop, new_event_loop
from ..persistence import rdbfile
from ..persistence.aof import AOFLoadError
from ..server import Server
from ..version import __version__
from .logs import (
    ValkeyLogFormat,
    banner,
    check_logfile,
    log_to_stdout,
    notice_logged,
    setup_logging,
    startup_lines,
    stdout_is_log,
)
from .process import SignalShutdown, Systemd, daemonize
from .serve_args import ConfigFileError, UsageError, build_config, help_config, parse_serve_args
from .usage import USAGE
from .valkey_args import FatalConfigError, build_valkey_config, valkey_options


def _where(listener, values) -> str:
    parts = []
    for host, port in listener.bound:
        parts.append("[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port))
    if values["unixsocket"]:
        parts.append("unix:%s" % values["unixsocket"])
    return ", ".join(dict.fromkeys(parts))


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
        if stdout_is_log(values) and notice_logged(values):
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
    log_to_stdout()
    return _run(config, path, valkey=True)


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
    setup_logging(config.values)
    if config.values["daemonize"] and daemonize():
        return 0   # the parent, as valkey-server's: the daemon goes on alone
    log = logging.getLogger("hotkv")
    startup_lines(config, log)
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
