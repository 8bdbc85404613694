"""The cluster's shape: its nodes, who owns each slot, the epochs.

``Topology`` is what every node of one cluster sees, shared by reference
between the nodes of an ``EmbeddedCluster`` (hotkv.embedded_cluster): a
change made through one node (CLUSTER SETSLOT ... NODE, a failover) is seen
by all at once, as if the gossip had already converged.  A lone node
(``cluster-enabled yes``) has a topology of its own with itself in it.

``Node`` is one member: id, shard id, address, role (``primary`` None for a
primary), config epoch, ``failed`` and, for an in-process member, the
``Server`` that answers for it.  The CLUSTER NODES / SLOTS / SHARDS bodies
are built here from that state, in Valkey 8.1's formats.

Invariants: ``slots[s]`` is a primary of this topology or None; a replica
owns no slot; ``current_epoch`` >= every node's ``config_epoch``; whoever
changes slot owners, roles or ``failed`` calls ``invalidate()`` (through
ClusterState.topology_changed) before the next command is routed.
"""

from __future__ import annotations

import os
import time

from .slots import SLOTS, ranges


def new_id() -> str:
    return os.urandom(20).hex()


class Node:
    __slots__ = ("id", "shard_id", "host", "port", "cport", "primary", "config_epoch",
                 "failed", "server", "created_ms", "state")

    def __init__(self, port: int, host: str = "", node_id: str | None = None,
                 shard_id: str | None = None, cport: int = 0):
        self.id = node_id or new_id()
        self.shard_id = shard_id or new_id()
        self.host = host
        self.port = port
        self.cport = cport or port + 10000
        self.primary: Node | None = None
        self.config_epoch = 0
        self.failed = False
        self.server = None          # the in-process Server answering for this node
        self.created_ms = int(time.time() * 1000)
        self.state = None           # that server's ClusterState

    @property
    def is_primary(self) -> bool:
        return self.primary is None

    def shard_primary(self) -> "Node":
        return self if self.primary is None else self.primary


class Topology:
    def __init__(self):
        self.nodes: dict[str, Node] = {}     # insertion order: the order nodes met
        self.slots: list = [None] * SLOTS
        self.current_epoch = 0
        self._healthy = None     # cached healthy(); invalidate() after any change

    def add(self, node: Node) -> Node:
        self.nodes[node.id] = node
        return node

    def replicas_of(self, node: Node) -> list:
        return [n for n in self.nodes.values() if n.primary is node]

    def owned(self, node: Node) -> list:
        return [s for s in range(SLOTS) if self.slots[s] is node]

    def slot_ranges(self, node: Node) -> list:
        return ranges(self.owned(node))

    def assigned(self) -> int:
        return sum(1 for n in self.slots if n is not None)

    def failed_slots(self) -> int:
        return sum(1 for n in self.slots if n is not None and n.failed)

    def healthy(self) -> bool:
        """cluster_state ok: every slot served by a live primary (the default
        cluster-require-full-coverage yes).  Cached: every command asks."""
        h = self._healthy
        if h is None:
            h = self._healthy = all(n is not None and not n.failed for n in self.slots)
        return h

    def invalidate(self):
        """Slot owners, roles or failures changed: the cached health goes, and
        every node routes its next command the general way."""
        self._healthy = None
        for n in self.nodes.values():
            if n.state is not None:
                n.state.simple = False

    def size(self) -> int:
        """Primaries serving at least one slot (cluster_size)."""
        return len({n.id for n in self.slots if n is not None})

    def bump_epoch(self, node: Node) -> int:
        self.current_epoch += 1
        node.config_epoch = self.current_epoch
        return self.current_epoch

    # -- replies --------------------------------------------------------
    def nodes_text(self, myself: Node, importing: dict, migrating: dict,
                   aux: bool = False) -> bytes:
        """CLUSTER NODES: one line per node, myself's open slots appended.
        ``aux``: the nodes.conf form (hotkv.cluster.nodes_conf), whose address
        carries the hostname and the auxiliary fields (``,,tls-port=0,shard-id=``)."""
        now = int(time.time() * 1000)
        owned: dict = {}
        for s, n in enumerate(self.slots):
            if n is not None:
                owned.setdefault(n.id, []).append(s)
        lines = []
        for n in self.nodes.values():
            flags = []
            if n is myself:
                flags.append("myself")
            flags.append("master" if n.primary is None else "slave")
            if n.failed:
                flags.append("fail")
            me = n is myself
            epoch = (n.config_epoch if n.primary is None else n.primary.config_epoch)
            address = "%s:%d@%d" % (n.host, n.port, n.cport)
            if aux:
                address += ",,tls-port=0,shard-id=" + n.shard_id
            parts = [n.id, address, ",".join(flags),
                     n.primary.id if n.primary is not None else "-",
                     "0", "0" if me else str(n.created_ms if not n.failed else now),
                     str(epoch), "disconnected" if n.failed else "connected"]
            for a, b in ranges(owned.get(n.id, ())):
                parts.append(str(a) if a == b else "%d-%d" % (a, b))
            if me:
                for s in sorted(migrating):
                    parts.append("[%d->-%s]" % (s, migrating[s].id))
                for s in sorted(importing):
                    parts.append("[%d-<-%s]" % (s, importing[s].id))
            lines.append(" ".join(parts) + "\n")
        return "".join(lines).encode()

    def _endpoint(self, n: Node) -> list:
        return [n.host.encode(), n.port, n.id.encode(), {}]

    def slots_reply(self) -> list:
        """CLUSTER SLOTS: each run of consecutive slots of one primary, in
        slot order, with the primary then its live replicas."""
        out = []
        s = 0
        slots = self.slots
        while s < SLOTS:
            n = slots[s]
            if n is None:
                s += 1
                continue
            e = s
            while e + 1 < SLOTS and slots[e + 1] is n:
                e += 1
            row = [s, e, self._endpoint(n)]
            row += [self._endpoint(r) for r in self.replicas_of(n) if not r.failed]
            out.append(row)
            s = e + 1
        return out

    def shards_reply(self) -> list:
        """CLUSTER SHARDS: one entry per shard, its slot ranges flat and
        each member's details (Valkey's addShardReplyForClusterShards)."""
        shards: dict = {}
        for n in self.nodes.values():
            shards.setdefault(n.shard_id, []).append(n)
        out = []
        for members in shards.values():
            members.sort(key=lambda m: m.primary is not None)   # the primary first
            primary = members[0] if members[0].primary is None else None
            flat = []
            if primary is not None:
                for a, b in self.slot_ranges(primary):
                    flat += [a, b]
            nodes = []
            for m in members:
                nodes.append({
                    b"id": m.id.encode(), b"port": m.port, b"ip": m.host.encode(),
                    b"endpoint": m.host.encode(),
                    b"role": b"master" if m.primary is None else b"replica",
                    b"replication-offset": 0,
                    b"health": b"fail" if m.failed else b"online"})
            out.append({b"slots": flat, b"nodes": nodes})
        return out
