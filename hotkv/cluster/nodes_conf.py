"""A cluster node's configuration file (``cluster-config-file``, nodes.conf).

Valkey keeps what a cluster node is -- its id and shard id, the nodes it
knows, who owns which slot, its open slots, the epochs -- in this file, in
``dir``: written at the node's first start (no slots, epoch 0, flagged
``myself,master``) and after every change of that view, read back at a
restart, so the node comes back as itself.  ``NodesConf`` does the same for
a hotkv node that runs alone (``cluster-enabled yes``; an ``EmbeddedCluster``
builds its shared topology in process and writes no file).

The format is Valkey 8.1's: one line per node as CLUSTER NODES prints it
(hotkv.cluster.topology.Topology.nodes_text), except that the address
carries the hostname and the auxiliary fields
(``ip:port@cport,hostname,tls-port=0,shard-id=<40 hex>``), then the line
``vars currentEpoch N lastVoteEpoch 0``.  A file written by valkey-server
8.1.8 loads here, and the reverse.

Invariants: while a node runs it holds an exclusive flock on its file (a
second node given the same file does not start: clusterLockConfig's intent;
valkey-server 8.1.8 loses its lock at its first save, whose rename replaces
the locked file, and would start that second node with the same id); a
save goes to a temporary file, locked, fsynced, renamed over the old one,
so the lock moves to the new file; a missing or empty file
means a fresh node; a file that does not parse stops the start
(``NodesConfError``) instead of inventing a node.
"""

from __future__ import annotations

import fcntl
import logging
import os

from .slots import SLOTS
from .topology import Node, Topology

log = logging.getLogger("hotkv")


class NodesConfError(Exception):
    pass


def conf_path(server) -> str:
    """The file's absolute path: ``cluster-config-file`` under ``dir``, as seen
    from where the server started (``hotkv serve`` chdirs into dir later)."""
    values = server.config.values
    start = server.snapshots.start_cwd
    return os.path.abspath(os.path.join(start, values["dir"] or ".",
                                        values["cluster-config-file"]))


class NodesConf:
    def __init__(self, path: str):
        self.path = path
        self._lock_fd = None

    # -- the lock -------------------------------------------------------
    def lock(self):
        """Take the file's lock (created empty when missing) or raise."""
        fd = self._open_locked(self.path)
        self.close()
        self._lock_fd = fd

    @staticmethod
    def _open_locked(path: str) -> int:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as e:
            raise NodesConfError("Can't open %s in order to acquire a lock: %s"
                                 % (path, e.strerror)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (11, 35):    # EWOULDBLOCK / EAGAIN
                raise NodesConfError(
                    "Sorry, the cluster configuration file %s is already used by a "
                    "different Cluster node. Please make sure that different nodes use "
                    "different cluster configuration files." % path) from None
            raise NodesConfError("Impossible to lock %s: %s" % (path, e.strerror)) from None
        return fd

    def close(self):
        """Release the lock (the server stops)."""
        if self._lock_fd is not None:
            try:
                os.close(self._lock_fd)
            except OSError:
                pass
            self._lock_fd = None

    # -- reading ---------------------------------------------------------
    def load(self):
        """(topology, myself, importing, migrating) from the file, or None
        when there is no file or it is empty (a fresh node)."""
        try:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise NodesConfError("Loading the cluster node config from %s: %s"
                                 % (self.path, e.strerror)) from None
        if not text.strip():
            return None
        try:
            return parse(text)
        except (ValueError, IndexError, KeyError) as e:
            raise NodesConfError("Unrecoverable error: corrupted cluster config file "
                                 "\"%s\" (%s)." % (self.path, e)) from None

    # -- writing ---------------------------------------------------------
    def save(self, text: bytes):
        """Write the whole file anew (temporary file, fsync, rename).  The
        temporary file is locked before the rename, so the lock passes to
        the new file with no moment where another node could take it."""
        tmp = "%s.tmp-%d" % (self.path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if self._lock_fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # a new file: free
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)
            raise
        if self._lock_fd is None:
            os.close(fd)
        else:
            self.close()
            self._lock_fd = fd


def render(topology: Topology, myself: Node, importing: dict, migrating: dict) -> bytes:
    return topology.nodes_text(myself, importing, migrating, aux=True) + (
        b"vars currentEpoch %d lastVoteEpoch 0\n" % topology.current_epoch)


def _address(field: str, node_id: str):
    """``ip:port@cport[,hostname[,aux=value...]]`` -> (host, port, cport, shard id)."""
    parts = field.split(",")
    hostport, _, cport = parts[0].partition("@")
    host, _, port = hostport.rpartition(":")
    shard = None
    for aux in parts[2:]:
        name, _, value = aux.partition("=")
        if name == "shard-id" and value:
            shard = value
    return host, int(port), int(cport or 0), shard


def parse(text: str):
    """nodes.conf text -> (topology, myself, importing, migrating)."""
    topo = Topology()
    myself = None
    primaries: dict = {}     # replica -> its primary's id
    owned: dict = {}         # node -> [(first, last)]
    open_slots: list = []    # (slot, "->" or "<-", node id) of myself
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "vars":
            for i in range(1, len(words) - 1, 2):
                if words[i] == "currentEpoch":
                    topo.current_epoch = int(words[i + 1])
            continue
        if len(words) < 8:
            raise ValueError("a node line with %d fields" % len(words))
        node_id = words[0]
        host, port, cport, shard = _address(words[1], node_id)
        n = Node(port, host, node_id=node_id, shard_id=shard, cport=cport)
        flags = words[2].split(",")
        n.config_epoch = int(words[6])
        n.failed = "fail" in flags
        topo.add(n)
        if "myself" in flags:
            myself = n
        if words[3] != "-":
            primaries[n] = words[3]
        for word in words[8:]:
            if word.startswith("["):
                slot, arrow, other = word[1:-1].partition("->-") if "->-" in word else \
                    word[1:-1].partition("-<-")
                open_slots.append((int(slot), arrow, other))
                continue
            first, _, last = word.partition("-")
            a, b = int(first), int(last or first)
            if not 0 <= a <= b < SLOTS:
                raise ValueError("slot range %s" % word)
            owned.setdefault(n, []).append((a, b))
    if myself is None:
        raise ValueError("no line flagged myself")
    for n, primary_id in primaries.items():
        n.primary = topo.nodes[primary_id]
        # A replica's epoch line repeats its primary's; its shard is the primary's.
        n.shard_id = n.primary.shard_id
    for n, spans in owned.items():
        for a, b in spans:
            for s in range(a, b + 1):
                topo.slots[s] = n
    importing: dict = {}
    migrating: dict = {}
    for slot, arrow, other in open_slots:
        (migrating if arrow == "->-" else importing)[slot] = topo.nodes[other]
    topo.current_epoch = max([topo.current_epoch] + [n.config_epoch for n in topo.nodes.values()])
    return topo, myself, importing, migrating
