"""Cluster mode: Valkey Cluster as its clients see it, emulated in process.

``cluster-enabled yes`` makes a server a cluster node (``server.cluster``,
hotkv.cluster.state; a lone node keeps its view in its nodes.conf,
hotkv.cluster.nodes_conf): key slots (hotkv.cluster.slots), CROSSSLOT / MOVED /
ASK / TRYAGAIN / CLUSTERDOWN on the command path, the CLUSTER commands
(hotkv/commands/cluster.py).  ``EmbeddedCluster`` (hotkv.embedded_cluster)
runs several such nodes in one process, each a real listener, sharing one
topology, so cluster clients discover, route, follow redirections and
recover from a failover exactly as against Valkey Cluster.

This is an emulation for clients, not a distributed store: there is no
cluster bus and no gossip (a topology change is seen by every node at once)
and a replica serves its primary's data in place (the same databases)
instead of receiving a replication stream.  The distributed engine is
Valkey Cluster; code tested here runs there unchanged.
"""

from __future__ import annotations
