"""REPLICAOF / SLAVEOF (hotkv as a replica: hotkv.replication.replica), and
RESTORE-ASKING, the RESTORE a cluster node sends while moving keys.

* ``REPLICAOF host port`` follows that primary (the link runs on the loop;
  the reply does not wait for it); the same primary again answers Valkey's
  ``+OK Already connected to specified master``; ``REPLICAOF NO ONE``
  promotes, keeping every key.  The port is checked as Valkey checks it
  (``ERR Invalid master port``).  CONFIG GET replicaof follows.
* ``RESTORE-ASKING`` is RESTORE (hotkv.commands.dump) under Valkey's name for
  the one a cluster node sends during a slot migration.
  (ASKING is hotkv.commands.cluster's.)

Invariant: ``server.replica_link`` is not None exactly while
``server.repl.role == "slave"`` and ``config replicaof`` is "host port".
"""

from __future__ import annotations

import logging

from ..core.registry import command
from ..protocol.errors import CommandError
from ..protocol.resp import OK, Simple
from ..replication import replica
from .dump import RESTORE_DOCS, restore

log = logging.getLogger("hotkv")

_ALREADY = Simple(b"OK Already connected to specified master")


def _client_info(c) -> str:
    return "id=%d addr=%s laddr=%s name=%s" % (
        c.id, c.addr, c.laddr, c.name.decode("utf-8", "replace"))


def _replicaof(c, argv):
    server = c.server
    if server.config.values.get("cluster-enabled"):
        raise CommandError("ERR REPLICAOF not allowed in cluster mode.")
    host, port_arg = argv[1], argv[2]
    if host.lower() == b"no" and port_arg.lower() == b"one":
        if server.replica_link is not None:
            replica.become_primary(server)
            server.config.values["replicaof"] = ""
            log.info("PRIMARY MODE enabled (user request from '%s')", _client_info(c))
        return OK
    if c.kind in ("replica", "slave"):   # a replica connection of ours (replication.primary)
        raise CommandError("ERR Command is not valid when client is a replica.")
    text = port_arg.decode("latin-1")
    port = int(text) if text.lstrip("-").isdigit() and text == str(int(text)) else None
    if port is None or not 0 <= port <= 65535:
        raise CommandError("ERR Invalid master port")
    name = host.decode("utf-8", "surrogateescape")
    link = server.replica_link
    if link is not None and link.host.lower() == name.lower() and link.port == port:
        log.info("REPLICAOF would result into synchronization with the primary we are "
                 "already connected with. No operation performed.")
        return _ALREADY
    replica.become_replica(server, name, port)
    server.config.values["replicaof"] = "%s %d" % (name, port)
    log.info("REPLICAOF %s:%d enabled (user request from '%s')", name, port, _client_info(c))
    return OK


@command("replicaof", 3, "admin noscript stale no_async_loading", group="server",
         since="5.0.0", acl=("dangerous",), args="args(host-port(host port:i) | no-one(NO ONE))",
         complexity="O(1)")
def replicaof(c, argv):
    """Configures a server as replica of another, or promotes it to a primary."""
    return _replicaof(c, argv)


@command("slaveof", 3, "admin noscript stale no_async_loading", group="server",
         since="1.0.0", acl=("dangerous",), args="args(host-port(host port:i) | no-one(NO ONE))",
         deprecated=("5.0.0", "`REPLICAOF`"), complexity="O(1)")
def slaveof(c, argv):
    """Sets a server as a replica of another, or promotes it to being a primary."""
    return _replicaof(c, argv)


@command("restore-asking", -4, "write denyoom asking", (1, 1, 1), group="server",
         since="3.0.0", acl=("keyspace", "dangerous"), key_flags="OW update",
         doc_flags="syscmd", **RESTORE_DOCS)
def restore_asking(c, argv):
    """An internal command for migrating keys in a cluster."""
    return restore(c, argv)

