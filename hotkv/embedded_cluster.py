"""EmbeddedCluster: a Valkey Cluster of hotkv nodes inside the calling process.

``EmbeddedCluster(masters=3, replicas_per_master=1)`` starts one event loop
thread and, on it, one hotkv ``Server`` per node, each with a real
listener on its own port of 127.0.0.1 and ``cluster-enabled yes``.  The
nodes share one ``Topology`` (hotkv.cluster.topology): the slots are split
as ``valkey-cli --cluster create`` splits them (16384 / masters, rounded,
the last master taking the rest), the primaries get config epochs 1..N as
valkey-cli gives them, every replica follows one primary.  Each node's
CLUSTER NODES / SLOTS / SHARDS is the same cluster seen from that node.

A replica serves its primary's databases in place (the same objects: one
thread, so no lock): READONLY reads on it see every write at once, and a
promoted replica has all the data.  MIGRATE between nodes runs in process
(hotkv.cluster.local).  ``CLUSTER SETSLOT ... NODE`` on any node changes
the owner for all nodes (there is no gossip to wait for).

Faults: ``kill_node(node)`` closes a node's listener and clients (its
clients see the connection drop, as with a killed process), marks it
failed and promotes its first live replica, so a cluster client's next
refresh finds the new primary; ``failover(replica)`` is CLUSTER FAILOVER.

Use: ``with EmbeddedCluster() as cluster: RedisCluster(host=cluster.host,
port=cluster.port)``; ``cluster.nodes`` lists ``ClusterNode`` (``port``,
``id``, ``role``, ``server``) in topology order, primaries first.

Settings are passed to every node (``EmbeddedCluster(appendonly=True)``);
without ``dir`` each node gets a temporary directory of its own, removed by
``stop()``.  The nodes write no nodes.conf (``cluster-config-file``): the
topology lives in process and is built anew by every start.

Invariants: ``start()`` returns once every node accepts connections;
``stop()`` leaves no thread, socket or directory behind; a killed node stays in the
topology, flagged ``fail``, and is never routed to.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading

from .cluster.slots import SLOTS
from .cluster.state import ClusterState, share_data
from .cluster.topology import Node, Topology
from .net.listeners import Listener, close_loop, new_event_loop
from .server import Server


def split_slots(masters: int) -> list[tuple[int, int]]:
    """valkey-cli --cluster create's split of the slots among masters."""
    per = SLOTS / masters
    out = []
    first = 0
    cursor = 0.0
    for i in range(masters):
        last = int(round(cursor + per - 1))
        if last > SLOTS - 1 or i == masters - 1:
            last = SLOTS - 1
        if last < first:
            last = first
        out.append((first, last))
        first = last + 1
        cursor += per
    return out


class ClusterNode:
    """One node of an EmbeddedCluster, as a test sees it."""

    def __init__(self, cluster, node: Node, server: Server, listener: Listener):
        self.cluster = cluster
        self.node = node
        self.server = server
        self.listener = listener

    @property
    def id(self) -> str:
        return self.node.id

    @property
    def port(self) -> int:
        return self.node.port

    @property
    def host(self) -> str:
        return self.node.host

    @property
    def role(self) -> str:
        return "master" if self.node.primary is None else "replica"

    @property
    def alive(self) -> bool:
        return not self.node.failed

    def __repr__(self):
        return "<ClusterNode %s %s:%d %s%s>" % (self.id[:8], self.host, self.port, self.role,
                                                "" if self.alive else " failed")


class EmbeddedCluster:
    def __init__(self, masters: int = 3, replicas_per_master: int = 1,
                 host: str = "127.0.0.1", **config):
        if masters < 1 or replicas_per_master < 0:
            raise ValueError("masters must be >= 1 and replicas_per_master >= 0")
        self.masters = masters
        self.replicas_per_master = replicas_per_master
        self.bind = host
        self.config = {k.replace("_", "-"): v for k, v in config.items()}
        self.topology = None
        self.nodes: list[ClusterNode] = []
        self._loop = None
        self._thread = None
        self._started = threading.Event()
        self._error = None
        self._stop = None
        self._tmp = None     # the nodes' directories when no dir was given

    # -- life ------------------------------------------------------------
    def start(self) -> "EmbeddedCluster":
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="hotkv-cluster", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
            raise self._error
        return self

    def _settings(self, i: int) -> dict:
        settings = {"port": 0, "bind": self.bind, "save": "", "cluster-enabled": "yes"}
        settings.update(self.config)
        if "dir" not in settings:
            # Each node its own directory (an AOF or a SAVE must not meet another's).
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix="hotkv-cluster-")
            settings["dir"] = os.path.join(self._tmp, "node%d" % i)
            os.makedirs(settings["dir"], exist_ok=True)
        return settings

    async def _build(self):
        topo = self.topology = Topology()
        count = self.masters * (1 + self.replicas_per_master)
        for i in range(count):
            # (no nodes.conf: the shared topology below replaces its own state)
            server = Server(self._settings(i), nodes_conf=False)
            listener = Listener(server)
            await listener.start(self._loop)
            node = Node(server.config.values["port"], self.bind)
            topo.add(node)
            state = ClusterState(server, topo, node)
            server.cluster = state
            self.nodes.append(ClusterNode(self, node, server, listener))
        primaries = self.nodes[:self.masters]
        for i, (first, last) in enumerate(split_slots(self.masters)):
            owner = primaries[i].node
            for s in range(first, last + 1):
                topo.slots[s] = owner
        for i, n in enumerate(self.nodes):
            n.node.config_epoch = i + 1      # valkey-cli's "assign a different config epoch"
        topo.current_epoch = count
        for i, n in enumerate(self.nodes[self.masters:]):
            primary = primaries[i % self.masters]
            n.node.primary = primary.node
            n.node.shard_id = primary.node.shard_id
            share_data(n.server, primary.server)
        topo.invalidate()

    def _run(self):
        loop = self._loop = new_event_loop()
        asyncio.set_event_loop(loop)
        self._stop = loop.create_future()
        try:
            loop.run_until_complete(self._build())
        except BaseException as e:   # report start-up failures to start()
            self._error = e
            self._started.set()
            for n in self.nodes:
                loop.run_until_complete(n.listener.stop())
            close_loop(loop)
            return
        for n in self.nodes:
            n.listener.closed.add_done_callback(lambda _f, n=n: self._node_closed(n))
        self._started.set()
        try:
            loop.run_until_complete(self._stop)
        finally:
            try:
                for n in self.nodes:
                    if n.listener.servers:
                        loop.run_until_complete(n.listener.stop())
            finally:
                close_loop(loop)

    def _node_closed(self, n: ClusterNode):
        """A node's listener was asked to stop (kill_node, or its SHUTDOWN)."""
        if self._stop.done():
            return
        self._loop.create_task(self._kill(n))

    async def _kill(self, n: ClusterNode):
        if n.node.failed:
            return
        n.node.failed = True
        self.topology.invalidate()
        await n.listener.stop()
        topo = self.topology
        if n.node.primary is None:
            for r in topo.replicas_of(n.node):
                if not r.failed:
                    r.state.promote()
                    break
            else:
                n.node.state.topology_changed()
        else:
            n.node.state.topology_changed()

    def stop(self):
        if self._thread is None:
            return
        loop = self._loop
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(lambda: self._stop.done() or self._stop.set_result(None))
            except RuntimeError:
                pass
        self._thread.join()
        self._thread = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- for tests ----------------------------------------------------------
    def _in_loop(self, fn):
        """Run fn() on the cluster's loop thread and return its result."""
        done = threading.Event()
        box = {}

        def run():
            try:
                box["value"] = fn()
            except BaseException as e:  # handed to the caller
                box["error"] = e
            done.set()
        self._loop.call_soon_threadsafe(run)
        done.wait(30)
        if "error" in box:
            raise box["error"]
        return box.get("value")

    @property
    def host(self) -> str:
        return self.bind

    @property
    def port(self) -> int:
        """A live primary's port: a cluster client's startup node."""
        return self.primaries()[0].port

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [(n.host, n.port) for n in self.nodes if n.alive]

    def primaries(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive and n.role == "master"
                and self.topology.owned(n.node)]

    def replicas(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive and n.role == "replica"]

    def node_for_slot(self, slot: int) -> ClusterNode:
        owner = self.topology.slots[slot]
        return next(n for n in self.nodes if n.node is owner)

    def node_by_id(self, node_id: str) -> ClusterNode:
        return next(n for n in self.nodes if n.id == node_id)

    def kill_node(self, node: ClusterNode):
        """Stop node as a killed process would stop: its connections drop;
        the cluster marks it failed and promotes a replica of it."""
        done = threading.Event()

        def kill():
            task = self._loop.create_task(self._kill(node))
            task.add_done_callback(lambda _t: done.set())
        self._loop.call_soon_threadsafe(kill)
        done.wait(30)

    def failover(self, replica: ClusterNode):
        """CLUSTER FAILOVER on replica (it becomes its shard's primary)."""
        self._in_loop(replica.node.state.promote)

    def __repr__(self):
        return "<EmbeddedCluster %s>" % (self.nodes,)
