"""MODULE for a server that loads no modules.

hotkv loads no modules, but clients, test harnesses and tools ask which
are loaded (MODULE LIST): this module owns that answer, an empty list.
(FUNCTION is real: hotkv.commands.functions.)

Invariant: the container is registered only if no module before this one
registered it, so a real MODULE implementation listed earlier in
``hotkv.commands.MODULES`` replaces these answers without a conflict.
"""

from __future__ import annotations

from ..core.registry import COMMANDS, command, container
from ..protocol.replies import help_reply

# ==========================================================================
# MODULE (hotkv loads no modules; clients and tools ask which are there)
# ==========================================================================

if "module" not in COMMANDS:
    container("module", group="server", summary="A container for module commands.", since="4.0.0",
              complexity="Depends on subcommand.")

    @command("module|list", 2, "admin noscript", group="server", since="4.0.0",
             complexity="O(N) where N is the number of loaded modules.")
    def module_list(c, argv):
        """Returns all loaded modules."""
        return []

    @command("module|help", 2, "loading stale", group="server",
             summary="Returns helpful text about the different subcommands.", since="5.0.0",
             complexity="O(1)")
    def module_help(c, argv):
        """Show helpful text about the different subcommands."""
        return help_reply("MODULE", [
            "LIST",
            "    Return a list of loaded modules.",
        ])
