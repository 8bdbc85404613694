"""FUNCTION and MODULE for a server that has neither.

hotkv runs no Valkey functions and loads no modules, but clients, test
harnesses and tools ask: they flush functions between tests (FUNCTION
FLUSH), list them (FUNCTION LIST) or list the loaded modules (MODULE LIST).
This module owns those answers: FUNCTION FLUSH validates its argument,
counts one change and succeeds; FUNCTION LIST validates its options and
lists nothing; MODULE LIST lists nothing.

Invariant: each container is registered only if no module before this one
registered it, so a real FUNCTION or MODULE implementation listed earlier
in ``hotkv.commands.MODULES`` replaces these answers without a conflict.
"""

from __future__ import annotations

from ..errors import CommandError
from ..registry import COMMANDS, command, container
from ..replies import cstr, help_reply
from ..resp import OK

if "function" not in COMMANDS:
    container("function", group="scripting")

    @command("function|flush", -2, "write noscript", group="scripting")
    def function_flush(c, argv):
        """Delete all libraries and functions."""
        if len(argv) == 3:
            if argv[2].lower() not in (b"async", b"sync"):
                raise CommandError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
        elif len(argv) > 3:
            raise CommandError("ERR unknown subcommand or wrong number of arguments for "
                               "'%s'. Try FUNCTION HELP." % cstr(argv[1]))
        c.server.dirty += 1
        return OK

    @command("function|list", -2, "noscript", group="scripting")
    def function_list(c, argv):
        """List information about all the functions."""
        i = 2
        while i < len(argv):
            opt = argv[i].lower()
            if opt == b"withcode":
                i += 1
            elif opt == b"libraryname" and i + 1 < len(argv):
                i += 2
            else:
                raise CommandError("ERR Unknown argument %s" % cstr(argv[i]))
        return []

    @command("function|help", 2, "loading stale", group="scripting")
    def function_help(c, argv):
        """Show helpful text about the different subcommands."""
        return help_reply("FUNCTION", [
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries (hotkv has none).",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
        ])


# ==========================================================================
# MODULE (hotkv loads no modules; clients and tools ask which are there)
# ==========================================================================

if "module" not in COMMANDS:
    container("module", group="server")

    @command("module|list", 2, "admin noscript", group="server")
    def module_list(c, argv):
        """Returns all loaded modules."""
        return []

    @command("module|help", 2, "loading stale", group="server")
    def module_help(c, argv):
        """Show helpful text about the different subcommands."""
        return help_reply("MODULE", [
            "LIST",
            "    Return a list of loaded modules.",
        ])
