"""One node's cluster state and the routing of its commands.

``ClusterState`` is ``server.cluster`` when ``cluster-enabled yes`` (None
otherwise: the dispatcher's fast path then pays one attribute test).  It
holds the node's view -- the shared ``Topology``, which node ``myself`` is,
the slots this node imports or migrates -- and answers the questions
Valkey's cluster.c answers for the command path:

* ``refuse(client, cmd, argv)``: what the dispatcher calls for every
  command (after ACL, before OOM, as processCommand): True when the command
  got a redirection instead of running.  A one-key command of a slot this
  node serves, with nothing open and the cluster ok, is decided by a set
  test on keys already routed here; the rest goes to ``check``;
* ``check(client, cmd, argv)``: processCommand's redirection step
  (getNodeByQuery): the error a command gets instead of running --
  ``CROSSSLOT``, ``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN`` -- or
  None.  EXEC is checked over the whole queued transaction; a command
  without keys (and not EXEC) is never redirected;
* ``script_check(run, cmd, argv)``: scriptVerifyClusterState, for each
  command a script runs (non-local keys, undeclared cross-slot keys unless
  the script has ``allow-cross-slot-keys`` or no shebang);
* ``redirect_blocked()``: clusterRedirectBlockedClientIfNeeded, after every
  topology change: a client blocked on a key of a slot this node no longer
  serves is unblocked with ``-MOVED`` (or ``-CLUSTERDOWN``).

The ASKING flag lives on the client (``client.asking``) and lasts one
command (a whole MULTI/EXEC); READONLY is ``client.cluster_ro``.

A lone node (no topology given) starts as valkey-server's: the view of its
nodes.conf (hotkv.cluster.nodes_conf) when the file exists, else a fresh
node with no slot and epoch 0, written to that file at once; it rewrites
the file after each change (``save_config``) and releases its lock at
shutdown (``close``).  ``own_every_slot`` is the ready single node of
``hotkv serve`` and ``EmbeddedServer`` (a fresh node takes every slot).

Invariants: ``importing`` slots are not owned by myself, ``migrating``
slots are; the keys of a command are found through the command table's key
specs (``Command.key_indexes``), the shard channels of SSUBSCRIBE /
SUNSUBSCRIBE / SPUBLISH as keys.
"""

from __future__ import annotations

import logging

from ..core import config as _config
from ..core.blocking import unblock  # below this package; imported when used
from ..core.multi import discard_transaction
from ..core.stats import count_rejected
from . import nodes_conf
from .slots import key_slot
from .topology import Node, Topology, new_id

CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot"
DOWN_UNBOUND = "CLUSTERDOWN Hash slot not served"
DOWN_STATE = "CLUSTERDOWN The cluster is down"
DOWN_RO_STATE = "CLUSTERDOWN The cluster is down and only accepts read commands"
TRYAGAIN = "TRYAGAIN Multiple keys request during rehashing of slot"

log = logging.getLogger("hotkv")

# The cluster settings this package reads (the table marks Valkey's others inert).
for _name in ("cluster-enabled", "cluster-config-file", "cluster-port",
              "cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down"):
    _config.PARAMS[_name].inert = False
del _name

# Shard channels count as keys for routing (Valkey: CMD_CHANNEL_PUBLISH /
# CMD_CHANNEL_SUBSCRIBE commands); name -> (first, last) argv positions.
_SHARD_PUBSUB = {"spublish": (1, 1), "ssubscribe": (1, None), "sunsubscribe": (1, None)}


class ClusterState:
    def __init__(self, server, topology: Topology | None = None, myself: Node | None = None):
        self.server = server
        self.conf = None             # its nodes.conf (a lone node), or None
        self.loaded = False          # the view came from that file (a restart)
        importing: dict = {}
        migrating: dict = {}
        if topology is None:
            topology, myself, importing, migrating = self._lone_node(server)
        self.topology = topology
        self.myself = myself
        myself.server = server
        myself.state = self
        self.importing = importing   # slot -> source Node
        self.migrating = migrating   # slot -> target Node
        self._routed: dict = {}      # Command -> does processCommand route it?
        self._slots: dict = {}       # key -> its slot (bounded; CRC16 in Python is dear)
        self._script_run = None
        self._script_slot = -1
        # True while no slot is open here and the cluster is ok: then a
        # one-key command of a served slot is decided by ``refuse`` alone.
        # Anything that may change that sets it False (Topology.invalidate,
        # every CLUSTER command); the general path sets it again.
        self._simple = False
        self.refuse = self._make_refuse()

    def _lone_node(self, server):
        """A node of its own, as valkey-server starts one: the view its
        nodes.conf holds (a restart: its id, slots, epochs), else a fresh
        node -- a new id, no slot, epoch 0, known only to itself -- written
        to that file at once.  It has met nobody, so it knows no address of
        its own (Valkey prints ":port@cport")."""
        values = server.config.values
        port = values["port"]
        cport = values.get("cluster-port") or 0
        got = None
        if server.nodes_conf:
            self.conf = nodes_conf.NodesConf(nodes_conf.conf_path(server))
            self.conf.lock()
            try:
                got = self.conf.load()
            except nodes_conf.NodesConfError:
                self.conf.close()
                raise
        if got is not None:
            topology, myself, importing, migrating = got
            myself.port = port      # the ports are the configured ones, the rest the file's
            myself.cport = cport or port + 10000
            self.loaded = True
            log.info("Node configuration loaded, I'm %.40s", myself.id)
        else:
            topology = Topology()
            myself = topology.add(Node(port, "", cport=cport))
            importing, migrating = {}, {}
            if self.conf is not None:
                log.info("No cluster configuration found, I'm %.40s", myself.id)
        if port > 65535 - 10000 and not cport:
            # valkey-server's check: the bus port is the port + 10000.
            if self.conf is not None:
                self.conf.close()
            raise nodes_conf.NodesConfError(
                "Valkey port number too high. Cluster communication port is 10,000 port "
                "numbers higher than your Valkey port. Your Valkey port number must be "
                "55535 or less.")
        if self.conf is not None:
            self.conf.save(nodes_conf.render(topology, myself, importing, migrating))
        return topology, myself, importing, migrating

    def save_config(self) -> str | None:
        """Write nodes.conf (a lone node) after a change: None, or why not."""
        if self.conf is None:
            return None
        try:
            self.conf.save(nodes_conf.render(self.topology, self.myself, self.importing,
                                             self.migrating))
        except OSError as e:
            log.warning("Could not save the cluster configuration to %s: %s",
                        self.conf.path, e.strerror or e)
            return e.strerror or str(e)
        return None

    def close(self):
        """The server stops: the nodes.conf lock goes."""
        if self.conf is not None:
            self.conf.close()

    def own_every_slot(self):
        """The ready single node of ``hotkv serve`` and ``EmbeddedServer``: a
        fresh lone node takes the 16,384 slots, as ``CLUSTER ADDSLOTSRANGE 0
        16383`` would (its nodes.conf says so too).  A node restarted from its
        nodes.conf is left as the file says; valkey-server's command line
        (``hotkv valkey-server``, the Tcl harness) never calls this."""
        self.sync_address()
        topo = self.topology
        if self.loaded or len(topo.nodes) != 1 or topo.assigned():
            return
        me = self.myself
        for s in range(len(topo.slots)):     # in place: ``refuse`` holds this list
            topo.slots[s] = me
        self.topology_changed()
        self.save_config()

    # -- helpers --------------------------------------------------------
    def sync_address(self):
        """A lone node learns its port once bound (port 0: an ephemeral one)."""
        me = self.myself
        port = self.server.config.values["port"]
        if me.port != port and len(self.topology.nodes) == 1:
            me.port = port
            me.cport = self.server.config.values.get("cluster-port") or port + 10000
            self.save_config()

    @property
    def serving(self) -> Node:
        """The primary whose slots this node serves (itself, or its primary)."""
        return self.myself.shard_primary()

    def is_routed(self, cmd) -> bool:
        return self._route_kind(cmd) is not False

    def _route_kind(self, cmd):
        """False: never routed (no keys, not EXEC); the argv index of the one
        key of a command that always has exactly one (its arity guarantees
        the index); True: the general way."""
        r = self._routed.get(cmd)
        if r is None:
            first = cmd.first_key
            if cmd.name == "exec" or cmd.name in _SHARD_PUBSUB or cmd.keys_fn is not None:
                r = True
            elif first > 0:
                arity = cmd.arity
                one = cmd.last_key == first or (cmd.last_key == -1 and arity == first + 1)
                r = first if one and not cmd.spec_movable and (
                    arity > first or -arity > first) else True
            else:
                r = False
            self._routed[cmd] = r
        return r

    @staticmethod
    def command_keys(cmd, argv) -> list:
        shard = _SHARD_PUBSUB.get(cmd.name)
        if shard is not None:
            first, last = shard
            return list(argv[first:(last + 1) if last else None])
        try:
            return [argv[i] for i in cmd.key_indexes(argv) if i < len(argv)]
        except (IndexError, ValueError):
            return []

    def node_address(self, n: Node) -> str:
        return "%s:%d" % (n.host, n.port)

    # -- processCommand's redirection -------------------------------------
    def _make_refuse(self):
        """``refuse(client, cmd, argv)``, what the dispatcher calls for every
        command in cluster mode: True when the command was answered with a
        redirection (or CROSSSLOT...) instead of running.  A closure over
        what it reads, as the common case -- one key of a slot this node
        serves, nothing open, cluster ok -- must cost next to nothing."""
        kind_of = self._routed.get
        slots = self.topology.slots
        me = self.myself
        check = self.check
        simple = False
        # Keys of slots this node serves, met since ``simple`` last became
        # True (emptied whenever it is set): a set test is the whole check.
        served: set = set()

        def set_simple(value: bool):
            nonlocal simple
            simple = value
            served.clear()

        def refuse(client, cmd, argv) -> bool:
            kind = kind_of(cmd)
            if kind is False:
                if client.asking:
                    check(client, cmd, argv)    # clears a one-command ASKING
                return False
            if simple and kind.__class__ is int and not client.asking:
                key = argv[kind]
                if key in served:
                    return False
                message = check(client, cmd, argv)
                if message is None:
                    if simple and slots[self_slot(key)] is me:
                        if len(served) >= 65536:
                            served.clear()
                        served.add(key)
                    return False
            else:
                message = check(client, cmd, argv)
                if message is None:
                    return False
            _redirect(client, cmd, message)
            return True
        self_slot = self.slot_of
        self._set_simple = set_simple
        return refuse

    def slot_of(self, key: bytes) -> int:
        """key_slot through the bounded cache."""
        s = self._slots.get(key)
        if s is None:
            s = key_slot(key)
            if len(self._slots) >= 65536:
                self._slots.clear()
            self._slots[key] = s
        return s

    @property
    def simple(self) -> bool:
        return self._simple

    @simple.setter
    def simple(self, value: bool):
        """Kept in ``refuse``'s closure too (a cell is the cheapest read)."""
        self._simple = value
        setter = self.__dict__.get("_set_simple")
        if setter is not None:
            setter(value)

    def check(self, client, cmd, argv):
        """The redirection error for this command, or None to run it here.
        Clears a one-command ASKING flag (Valkey's resetClient)."""
        asking = client.asking
        name = cmd.name
        if asking and name != "asking" and name != "multi" and (
                not client.multi or name == "exec" or name == "discard"):
            # Valkey's resetClient, after the command: it lasts one command, or
            # from MULTI to the end of the transaction.
            client.asking = False
        kind = self._routed.get(cmd)
        if kind is None:
            kind = self._route_kind(cmd)
        if kind is False:
            return None
        simple = not self.importing and not self.migrating and self.topology.healthy()
        if simple is not self._simple:
            self.simple = simple     # (setting it empties refuse's set of served keys)
        if cmd.name == "exec":
            if not client.multi:
                return None
            entries = client.multi_queue
            write = any(c.write for c, _ in entries)
        else:
            entries = ((cmd, argv),)
            write = cmd.write
        # RESTORE-ASKING carries its ASKING in its flags (Valkey's CMD_ASKING).
        error, _ = self.route(entries, asking or "asking" in cmd.flags, client.cluster_ro,
                              write, cmd.name == "migrate")
        return error

    def route(self, entries, asking: bool, readonly: bool, write: bool, migrate=False):
        """getNodeByQuery over (cmd, argv) entries: (error or None, slot)."""
        topo = self.topology
        serving = self.serving
        slot = -1
        owner = None
        importing = migrating = multiple = pubsub = False
        missing = existing = 0
        db = self.server.dbs[0]
        cache = self._slots
        for cmd, argv in entries:
            if cmd.name in _SHARD_PUBSUB:
                pubsub = True
            for key in self.command_keys(cmd, argv):
                s = cache.get(key)
                if s is None:
                    s = key_slot(key)
                    if len(cache) >= 65536:
                        cache.clear()
                    cache[key] = s
                if owner is None and slot < 0:
                    slot = s
                    owner = topo.slots[s]
                    if owner is None:
                        return DOWN_UNBOUND, s
                    if self.myself.primary is None or readonly:
                        if owner is serving and s in self.migrating:
                            migrating = True
                        elif s in self.importing:
                            importing = True
                elif s != slot:
                    return CROSSSLOT, slot
                else:
                    multiple = True
                if (migrating or importing) and not pubsub:
                    if db.data.get(key) is None or (db.expires and db.is_expired(key)):
                        missing += 1
                    else:
                        existing += 1
        if owner is None:
            return None, -1
        if not topo.healthy():
            if pubsub:
                if not self.server.config.values.get("cluster-allow-pubsubshard-when-down",
                                                     True):
                    return DOWN_STATE, slot
            elif not self.server.config.values.get("cluster-allow-reads-when-down"):
                return DOWN_STATE, slot
            elif write:
                return DOWN_RO_STATE, slot
        if (migrating or importing) and migrate:
            return None, slot
        if migrating and missing:
            if existing:
                return TRYAGAIN, slot
            return "ASK %d %s" % (slot, self.node_address(self.migrating[slot])), slot
        if importing and asking:
            if multiple and missing:
                return TRYAGAIN, slot
            return None, slot
        if (readonly or pubsub) and not write and self.myself.primary is owner:
            return None, slot
        if owner is not self.myself:
            return "MOVED %d %s" % (slot, self.node_address(owner)), slot
        return None, slot

    # -- scripts ------------------------------------------------------------
    def script_check(self, run, cmd, argv):
        """scriptVerifyClusterState: the error text (without ERR) for a command
        a script may not run here, or None."""
        if self._script_run is not run:
            # The slot of the keys the script declared (EVAL/FCALL is still the
            # server's current command when the script's first command comes).
            self._script_run = run
            self._script_slot = -1
            outer, outer_argv = self.server.current_cmd, self.server.current_argv
            if outer is not None and outer_argv is not None:
                keys = self.command_keys(outer, outer_argv)
                if keys:
                    self._script_slot = key_slot(keys[0])
        if not self.is_routed(cmd):
            return None
        caller = run.caller
        error, slot = self.route(((cmd, argv),), caller.asking, caller.cluster_ro, cmd.write)
        if error is not None:
            if error == DOWN_RO_STATE:
                return ("Script attempted to execute a write command while the cluster is "
                        "down and readonly")
            if error == DOWN_STATE:
                return "Script attempted to execute a command while the cluster is down"
            if error == CROSSSLOT:
                return ("Command '%s' in script attempted to access keys that don't hash "
                        "to the same slot" % cmd.name)
            return "Script attempted to access a non local key in a cluster node"
        if slot != -1 and not (run.flags is None or "allow_cross_slot" in run.flags):
            if self._script_slot == -1:
                self._script_slot = slot
            elif self._script_slot != slot:
                return "Script attempted to access keys that do not hash to the same slot"
        return None

    # -- blocked clients -----------------------------------------------------
    def redirect_blocked(self):
        """Unblock the clients blocked on keys this node no longer serves."""
        topo = self.topology
        healthy = topo.healthy()
        for c in list(self.server.clients.values()):
            waiter = c.blocked
            if waiter is None or not waiter.keys or waiter.cmd is None:
                continue
            if not healthy:
                unblock(c, error=DOWN_STATE)
                continue
            s = key_slot(waiter.keys[0])
            owner = topo.slots[s]
            if c.cluster_ro and not waiter.cmd.write and self.myself.primary is owner \
                    and owner is not None:
                continue
            if owner is not self.myself and s not in self.importing:
                unblock(c, error=DOWN_UNBOUND if owner is None else "MOVED %d %s" % (
                    s, self.node_address(owner)))

    # -- role changes ---------------------------------------------------------
    def become_replica_of(self, primary: Node):
        """CLUSTER REPLICATE: serve primary's data (shared in process, see
        hotkv.embedded_cluster) and follow its slots."""
        me = self.myself
        me.primary = primary
        me.shard_id = primary.shard_id
        self.importing.clear()
        self.migrating.clear()
        if primary.server is not None:
            share_data(self.server, primary.server)
        self.topology_changed()

    def promote(self):
        """This replica takes its primary's slots (CLUSTER FAILOVER, or the
        failover after a primary was killed): a new config epoch, the old
        primary (when alive) and the other replicas follow it."""
        me = self.myself
        old = me.primary
        if old is None:
            return
        topo = self.topology
        for s in range(len(topo.slots)):
            if topo.slots[s] is old:
                topo.slots[s] = me
        me.primary = None
        for n in topo.nodes.values():
            if n.primary is old and n is not me:
                n.primary = me
        if not old.failed:
            old.primary = me
            if old.state is not None:
                old.state.importing.clear()
                old.state.migrating.clear()
        topo.bump_epoch(me)
        self.topology_changed()

    def reset(self, hard: bool):
        """CLUSTER RESET: this node alone again, owning no slot."""
        me = self.myself
        topo = self.topology
        for s in range(len(topo.slots)):
            if topo.slots[s] is me:
                topo.slots[s] = None
        self.importing.clear()
        self.migrating.clear()
        if len(topo.nodes) > 1:
            del topo.nodes[me.id]
            self.topology_changed()
            topo = self.topology = Topology()
            topo.add(me)
            self.refuse = self._make_refuse()     # it holds the topology's slot table
            self.simple = False
        me.primary = None
        if hard:
            del topo.nodes[me.id]
            me.id = new_id()
            me.shard_id = new_id()
            topo.add(me)
            me.config_epoch = 0
            topo.current_epoch = 0
        self.topology_changed()

    # -- pub/sub ----------------------------------------------------------------
    def publish_elsewhere(self, channel: bytes, message: bytes, shard: bool):
        """What the cluster bus carries for PUBLISH (to every node) and
        SPUBLISH (to the nodes of this shard): the other in-process nodes'
        subscribers get the message; the reply counts local receivers only,
        as Valkey's."""
        serving = self.serving
        for n in self.topology.nodes.values():
            if n is self.myself or n.failed or n.server is None:
                continue
            if shard and n.shard_primary() is not serving:
                continue
            n.server.pubsub.publish(channel, message, shard=shard)

    # -- INFO / CLUSTER INFO ------------------------------------------------
    def info_fields(self) -> list:
        topo = self.topology
        assigned = topo.assigned()
        failed = topo.failed_slots()
        me = self.myself
        return [
            ("cluster_state", "ok" if topo.healthy() else "fail"),
            ("cluster_slots_assigned", assigned),
            ("cluster_slots_ok", assigned - failed),
            ("cluster_slots_pfail", 0),
            ("cluster_slots_fail", failed),
            ("cluster_known_nodes", len(topo.nodes)),
            ("cluster_size", topo.size()),
            ("cluster_current_epoch", topo.current_epoch),
            ("cluster_my_epoch", me.shard_primary().config_epoch),
            ("cluster_stats_messages_sent", 0),
            ("cluster_stats_messages_received", 0),
            ("total_cluster_links_buffer_limit_exceeded", 0),
        ]

    def topology_changed(self):
        """After a change of slot owners or roles: every in-process node of
        this topology redirects its blocked clients, and forgets open slots
        it no longer has reason to keep."""
        self.topology.invalidate()
        for n in self.topology.nodes.values():
            st = n.state
            if st is None or n.failed:
                continue
            for s in [s for s, _ in st.migrating.items()
                      if self.topology.slots[s] is not n]:
                del st.migrating[s]
            for s in [s for s, _ in st.importing.items() if self.topology.slots[s] is n]:
                del st.importing[s]
            st.redirect_blocked()


def _redirect(client, cmd, message):
    """Valkey's clusterRedirectClient: EXEC discards the transaction and
    answers the bare error; a command queued in MULTI flags it."""
    if cmd.name == "exec":
        discard_transaction(client)
    elif client.multi:
        client.multi_error = True
    count_rejected(client.server, cmd)
    client.server.count_error(message)
    client.add_error(message)


def init_server(server):
    """server.cluster: a ClusterState when cluster-enabled, else None."""
    server.cluster = ClusterState(server) if server.config.values.get("cluster-enabled") \
        else None


def share_data(server, source):
    """server serves source's databases from now on (a replica in process:
    its reads see every write of its primary at once)."""
    server.dbs = source.dbs
    for c in server.clients.values():
        c.db = server.dbs[c.db.index] if c.db.index < len(server.dbs) else server.dbs[0]
