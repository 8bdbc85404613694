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

This module is the entry point and loads nothing heavy: ``serve`` and
``valkey_server`` are hotkv/tools/serve.py's (which loads the server), and
each other subcommand's module is imported when that subcommand runs, so
``hotkv cli`` starts without the server's modules (0.1 s instead of about a
second: ``import hotkv.server`` registers every command).

Exit codes: 0 after a clean shutdown, 1 when the server cannot start (port
in use, unreadable config file), 2 for bad command-line usage or an invalid
setting.
"""


from __future__ import annotations

import sys

from ..version import __version__
from .usage import USAGE


def serve(args: list[str]) -> int:
    """``hotkv serve`` (hotkv/tools/serve.py)."""
    from . import serve as serving
    return serving.serve(args)


def valkey_server(args: list[str]) -> int:
    """``hotkv valkey-server``: valkey-server's own command line (hotkv/tools/serve.py)."""
    from . import serve as serving
    return serving.valkey_server(args)


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
        from . import checks
        run = checks.check_rdb if argv[0] == "check-rdb" else checks.check_aof
        return run(argv[1:])
    if argv[0] == "valkey-server":
        return valkey_server(argv[1:])
    if argv[0] == "cli":   # hotkv/tools/cli_tool.py
        # Here, not at the top: `hotkv serve` need not load hotkv cli's modules.
        from . import cli_tool
        return cli_tool.main(argv[1:])
    if argv[0] == "queues":   # hotkv/tools/queues_tui.py
        from . import queues_tui
        return queues_tui.main(argv[1:])
    sys.stderr.write("hotkv: unknown command '%s'\n%s" % (argv[0], USAGE))
    return 2


if __name__ == "__main__":
    sys.exit(main())
