"""MONITOR: the command that makes a client a monitor.

Owns MONITOR: it adds the client to ``server.monitors``.  What a monitor
receives, and leaving the list on RESET or disconnection, are
``hotkv.observe.cmdlog``'s (the dispatcher and the server call it).
"""

from __future__ import annotations

from ..core.registry import command
from ..protocol.resp import OK


@command("monitor", 1, "admin noscript loading stale", group="server",
         summary="Listens for all requests received by the server in real-time.")
def monitor(c, argv):
    """Listen for all requests received by the server in real-time."""
    server = c.server
    if c not in server.monitors:
        server.monitors.append(c)
    return OK

