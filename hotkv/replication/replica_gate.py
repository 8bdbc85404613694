"""What the rest of the server asks of a replica before running a command:
the refusal texts and the two conditions scripts check (Valkey's
scriptPrepareForRun / scriptVerifyWriteCommandAllow / scriptVerifyAllowStale).

Kept apart from ``hotkv.replication.replica`` (the link, which imports the
RDB loader) so that the Lua engine and FCALL can ask without an import
cycle.  Reads only ``server.replica_link`` (None on a primary), its
``client`` (the primary's connection) and ``state``, and the settings.
"""

from __future__ import annotations

READONLY = "READONLY You can't write against a read only replica."
MASTERDOWN = ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
              "set to 'no'.")


def refuses_writes(server, client) -> bool:
    """A read-only replica refuses this client's writes."""
    link = server.replica_link
    return link is not None and client is not link.client and \
        bool(server.config.values.get("replica-read-only", True))


def running_stale(server) -> bool:
    """The link is down and replica-serve-stale-data is no."""
    link = server.replica_link
    return link is not None and link.state != "connected" and \
        not server.config.values.get("replica-serve-stale-data", True)


__all__ = ["READONLY", "MASTERDOWN", "refuses_writes", "running_stale"]
