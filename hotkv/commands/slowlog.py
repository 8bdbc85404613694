"""SLOWLOG: the command that reads and clears the slow log.

Owns SLOWLOG GET / LEN / RESET / HELP.  The log itself (``server.slowlog``,
newest first, at most slowlog-max-len entries) and how an entry is made are
``hotkv.observe.cmdlog``'s: the dispatcher feeds it, and the server creates it.
"""

from __future__ import annotations

from ..core.registry import command, container
from ..protocol.errors import CommandError
from ..protocol.replies import cstr, help_reply
from ..protocol.resp import OK
from ..protocol.util import string2ll

container("slowlog", group="server", summary="A container for slow log commands.", since="2.2.12",
          deprecated=("8.1.0", "`COMMANDLOG`"), complexity="Depends on subcommand.")


@command("slowlog|get", -2, "admin loading stale", group="server", args="[count:i]",
         since="2.2.12", deprecated=("8.1.0", "`COMMANDLOG GET <count> SLOW`"),
         complexity="O(N) where N is the number of entries returned",
         history=(("4.0.0", "Added client IP address, port and name to the reply."),))
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


@command("slowlog|len", 2, "admin loading stale", group="server", since="2.2.12",
         deprecated=("8.1.0", "`COMMANDLOG LEN SLOW`"), complexity="O(1)")
def slowlog_len(c, argv):
    """Returns the number of entries in the slow log."""
    return len(c.server.slowlog)


@command("slowlog|reset", 2, "admin loading stale", group="server", since="2.2.12",
         deprecated=("8.1.0", "`COMMANDLOG RESET SLOW`"),
         complexity="O(N) where N is the number of entries in the slowlog")
def slowlog_reset(c, argv):
    """Clears all entries from the slow log."""
    c.server.slowlog.clear()
    return OK


@command("slowlog|help", 2, "loading stale", group="server",
         summary="Show helpful text about the different subcommands", since="6.2.0",
         deprecated=("8.1.0", "`COMMANDLOG HELP`"), complexity="O(1)")
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


