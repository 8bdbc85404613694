"""SLOWLOG: the log of commands that ran longer than slowlog-log-slower-than.

Owns the log (``server.slowlog``, newest first, at most slowlog-max-len
entries), how an entry is made (Redis's slowlogCreateEntry: at most 32
arguments and 128 bytes an argument, credentials redacted as MONITOR
redacts them) and the SLOWLOG command.

Invariants: the dispatcher compares each command's duration with
``server.slowlog_threshold`` (seconds, infinite when disabled) and calls
``server.slowlog_push`` only for the slow ones; config listeners keep the
threshold and the log's length in step with CONFIG SET at once.
"""

from __future__ import annotations

import time
from collections import deque

from ..errors import CommandError
from ..registry import command, container
from ..replies import cstr, help_reply, redacted
from ..resp import OK
from ..server import SERVER_INIT_HOOKS
from ..util import string2ll

SLOWLOG_MAX_ARGC = 32
SLOWLOG_MAX_ARGLEN = 128


class SlowlogEntry:
    __slots__ = ("id", "time", "usec", "argv", "peer", "name")


def slowlog_push(client, cmd, argv, duration: float):
    """Called by the dispatcher for a command that ran at least
    slowlog-log-slower-than microseconds (Redis's slowlogPushEntryIfNeeded)."""
    if "skip_slowlog" in cmd.flags or client.is_fake:
        return
    server = client.server
    args = redacted(cmd, argv)
    if len(args) > SLOWLOG_MAX_ARGC:
        args = args[:SLOWLOG_MAX_ARGC - 1] + [
            b"... (%d more arguments)" % (len(args) - SLOWLOG_MAX_ARGC + 1)]
    out = []
    for a in args:
        if len(a) > SLOWLOG_MAX_ARGLEN:
            a = a[:SLOWLOG_MAX_ARGLEN] + b"... (%d more bytes)" % (len(a) - SLOWLOG_MAX_ARGLEN)
        out.append(a)
    e = SlowlogEntry()
    e.id = server.slowlog_next_id
    server.slowlog_next_id += 1
    e.time = int(time.time())
    e.usec = int(duration * 1_000_000)
    e.argv = out
    e.peer = client.addr.encode()
    e.name = client.name
    log_ = server.slowlog
    log_.appendleft(e)
    limit = server.config.values["slowlog-max-len"]
    while len(log_) > limit:
        log_.pop()


def _slowlog_init(server):
    server.slowlog = deque()
    server.slowlog_next_id = 0
    server.slowlog_push = slowlog_push

    def set_threshold(us):
        server.slowlog_threshold = float("inf") if us < 0 else us / 1_000_000
    set_threshold(server.config.values["slowlog-log-slower-than"])
    server.config.listeners["slowlog-log-slower-than"] = set_threshold

    def set_max_len(n):
        while len(server.slowlog) > max(n, 0):
            server.slowlog.pop()
    server.config.listeners["slowlog-max-len"] = set_max_len


SERVER_INIT_HOOKS.append(_slowlog_init)
container("slowlog", group="server")


@command("slowlog|get", -2, "admin loading stale", group="server")
def slowlog_get(c, argv):
    """Returns the slow log's entries."""
    if len(argv) > 3:
        raise CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                           "Try SLOWLOG HELP." % cstr(argv[1]))
    count = 10
    if len(argv) == 3:
        count = string2ll(argv[2])
        if count is None or count < -1:
            raise CommandError("ERR count should be greater than or equal to -1")
    entries = list(c.server.slowlog)
    if count != -1:
        entries = entries[:count]
    return [[e.id, e.time, e.usec, list(e.argv), e.peer, e.name] for e in entries]


@command("slowlog|len", 2, "admin loading stale", group="server")
def slowlog_len(c, argv):
    """Returns the number of entries in the slow log."""
    return len(c.server.slowlog)


@command("slowlog|reset", 2, "admin loading stale", group="server")
def slowlog_reset(c, argv):
    """Clears all entries from the slow log."""
    c.server.slowlog.clear()
    return OK


@command("slowlog|help", 2, "loading stale", group="server")
def slowlog_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("SLOWLOG", [
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
    ])


