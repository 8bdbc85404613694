"""MONITOR: echo every command the server runs to the monitoring clients.

Owns the MONITOR command and the line each monitor receives (Redis's
replicationFeedMonitors).  The argument quoting and the redaction of
credentials are ``hotkv.replies``' (the scripting engine formats a script's
commands the same way).

Invariants: ``server.monitors`` lists the monitoring clients; the dispatcher
calls ``server.feed_monitors`` after each command only while that list is
non-empty, so MONITOR costs nothing when nobody watches.  A client leaves
the list when it disconnects or RESETs (hooks installed at import).  Admin
commands, replays of a blocked command and the AOF loader's fake client are
never shown.
"""

from __future__ import annotations

import time

from ..registry import command
from ..replies import quoted, redacted
from ..resp import OK


def feed_monitors(client, cmd, argv):
    """Called by the dispatcher after each command while a MONITOR exists:
    Redis's replicationFeedMonitors (admin commands are not shown, a blocked
    command is shown once, when it first runs)."""
    server = client.server
    if cmd.admin or client.reprocessing or server.loading or client.is_fake:
        return
    if "skip_monitor" in cmd.flags:
        return
    now = time.time()
    if client.addr == client.laddr:   # a unix socket (<path>:0 both ways)
        origin = b"unix:%s" % server.config.values["unixsocket"].encode()
    else:
        origin = client.addr.encode()
    line = b"+%.6f [%d %s] %s\r\n" % (now, client.db.index, origin,
                                        b" ".join([quoted(a) for a in redacted(cmd, argv)]))
    for mon in list(server.monitors):
        if mon.closed:
            continue
        mon.add_raw(line)
        mon.schedule_flush()


def _stop_monitoring(c):
    try:
        c.server.monitors.remove(c)
    except ValueError:
        pass


@command("monitor", 1, "admin noscript loading stale", group="server")
def monitor(c, argv):
    """Listen for all requests received by the server in real-time."""
    server = c.server
    if c not in server.monitors:
        server.monitors.append(c)
        server.feed_monitors = feed_monitors
    return OK


def _install_monitor_hooks():
    # A function-level import, as before the split: hotkv.net is in the
    # import cycle issue #13 lists (to go with the explicit wiring step).
    from .. import net
    from .connection import RESET_HOOKS
    RESET_HOOKS.append(_stop_monitoring)
    net.DISCONNECT_HOOKS.append(_stop_monitoring)


_install_monitor_hooks()


