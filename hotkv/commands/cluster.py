"""CLUSTER and the cluster connection commands (READONLY, READWRITE, ASKING).

With ``cluster-enabled no`` (the default) every CLUSTER subcommand answers
``ERR This instance has cluster support disabled`` after the usual existence
and arity checks, as valkey-server 8.1.8 does; READONLY / READWRITE answer
OK and ASKING the same error.  With ``cluster-enabled yes`` they act on
``server.cluster`` (hotkv.cluster.state.ClusterState) and its ``Topology``:
the replies are Valkey 8.1's, byte for byte where a lone node can be
compared (tests/test_cluster.py).

The subcommands are registered in Valkey's order with Valkey's arity and
flags, so COMMAND / COMMAND LIST describe the same table as Valkey's; this
module is imported by server_cmds at the place CLUSTER always had in the
table.

A lone node writes its nodes.conf (hotkv.cluster.nodes_conf) after each
subcommand of ``_SAVES`` and on SAVECONFIG.

What the emulation does not do: there is no cluster bus.  MEET answers OK
without joining anything (an ``EmbeddedCluster`` is built in process, its
nodes sharing one Topology, and writes no nodes.conf), FORGET drops only a
failed node, SLOT-STATS answers key counts only.

Invariants: a slot argument is checked as Valkey's getSlotOrReply; node ids
are looked up by their exact 40 characters.
"""

from __future__ import annotations

import functools

from ..cluster.slots import SLOTS, key_slot
from ..core.registry import command, container
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import OK, Simple, Verbatim
from ..protocol.util import string2ll

_CLUSTER_DISABLED = "ERR This instance has cluster support disabled"
_CLUSTER_ADMIN = "admin stale no_async_loading"
_CLUSTER_SUBCOMMANDS = (
    ("bumpepoch", 2, _CLUSTER_ADMIN), ("delslots", -3, _CLUSTER_ADMIN),
    ("getkeysinslot", 4, "stale"), ("help", 2, "loading stale"), ("keyslot", 3, "stale"),
    ("addslotsrange", -4, _CLUSTER_ADMIN), ("replicas", 3, "admin stale"),
    ("slots", 2, "loading stale"), ("addslots", -3, _CLUSTER_ADMIN),
    ("countkeysinslot", 3, "stale"), ("slot-stats", -4, "loading stale"),
    ("delslotsrange", -4, _CLUSTER_ADMIN), ("forget", 3, _CLUSTER_ADMIN),
    ("reset", -2, "admin noscript stale"), ("set-config-epoch", 3, _CLUSTER_ADMIN),
    ("failover", -2, _CLUSTER_ADMIN), ("setslot", -4, _CLUSTER_ADMIN),
    ("info", 2, "loading stale"), ("links", 2, "stale"), ("flushslots", 2, _CLUSTER_ADMIN),
    ("myid", 2, "loading stale"), ("myshardid", 2, "loading stale"),
    ("replicate", 3, _CLUSTER_ADMIN), ("saveconfig", 2, _CLUSTER_ADMIN),
    ("shards", 2, "loading stale"), ("count-failure-reports", 3, "admin stale"),
    ("meet", -4, _CLUSTER_ADMIN), ("nodes", 2, "loading stale"), ("slaves", 3, "admin stale"),
)

# Each subcommand's COMMAND DOCS (its arguments in hotkv.commands.docs_syntax's syntax).
_NODES = "O(N) where N is the total number of Cluster nodes"
_RANGES = ("O(N) where N is the total number of the slots between the start slot and end slot "
           "arguments.")
_CLUSTER_DOCS = {
    "addslots": dict(since="3.0.0", summary="Assigns new hash slots to a node.",
                     complexity="O(N) where N is the total number of hash slot arguments",
                     args="slot:i..."),
    "addslotsrange": dict(since="7.0.0", summary="Assigns new hash slot ranges to a node.",
                          complexity=_RANGES, args="range(start-slot:i end-slot:i)..."),
    "bumpepoch": dict(since="3.0.0", summary="Advances the cluster config epoch.",
                      complexity="O(1)"),
    "count-failure-reports": dict(
        since="3.0.0", summary="Returns the number of active failure reports active for a node.",
        complexity="O(N) where N is the number of failure reports", args="node-id"),
    "countkeysinslot": dict(since="3.0.0", summary="Returns the number of keys in a hash slot.",
                            complexity="O(1)", args="slot:i"),
    "delslots": dict(since="3.0.0", summary="Sets hash slots as unbound for a node.",
                     complexity="O(N) where N is the total number of hash slot arguments",
                     args="slot:i..."),
    "delslotsrange": dict(since="7.0.0", summary="Sets hash slot ranges as unbound for a node.",
                          complexity=_RANGES, args="range(start-slot:i end-slot:i)..."),
    "failover": dict(since="3.0.0",
                     summary="Forces a replica to perform a manual failover of its primary.",
                     complexity="O(1)", args="options[FORCE | TAKEOVER]"),
    "flushslots": dict(since="3.0.0", summary="Deletes all slots information from a node.",
                       complexity="O(1)"),
    "forget": dict(since="3.0.0", summary="Removes a node from the nodes table.",
                   complexity="O(1)", args="node-id"),
    "getkeysinslot": dict(since="3.0.0", summary="Returns the key names in a hash slot.",
                          complexity="O(N) where N is the number of requested keys",
                          args="slot:i count:i"),
    "help": dict(since="5.0.0", summary="Returns helpful text about the different subcommands.",
                 complexity="O(1)"),
    "info": dict(since="3.0.0", summary="Returns information about the state of a node.",
                 complexity="O(1)"),
    "keyslot": dict(since="3.0.0", summary="Returns the hash slot for a key.",
                    complexity="O(N) where N is the number of bytes in the key", args="key"),
    "links": dict(since="7.0.0", summary="Returns a list of all TCP links to and from peer nodes.",
                  complexity=_NODES),
    "meet": dict(since="3.0.0", summary="Forces a node to handshake with another node.",
                 complexity="O(1)", args="ip port:i [cluster-bus-port:i]@4.0.0",
                 history=(("4.0.0", "Added the optional `cluster_bus_port` argument."),)),
    "myid": dict(since="3.0.0", summary="Returns the ID of a node.", complexity="O(1)"),
    "myshardid": dict(since="7.2.0", summary="Returns the shard ID of a node.", complexity="O(1)"),
    "nodes": dict(since="3.0.0", summary="Returns the cluster configuration for a node.",
                  complexity=_NODES),
    "replicas": dict(since="5.0.0", summary="Lists the replica nodes of a primary node.",
                     complexity="O(N) where N is the number of replicas.", args="node-id"),
    "replicate": dict(since="3.0.0", summary="Configure a node as replica of a primary node.",
                      complexity="O(1)", args="node-id"),
    "reset": dict(since="3.0.0", summary="Resets a node.",
                  complexity="O(N) where N is the number of known nodes. The command may execute "
                             "a FLUSHALL as a side effect.", args="reset-type[HARD | SOFT]"),
    "saveconfig": dict(since="3.0.0",
                       summary="Forces a node to save the cluster configuration to disk.",
                       complexity="O(1)"),
    "set-config-epoch": dict(since="3.0.0", summary="Sets the configuration epoch for a new node.",
                             complexity="O(1)", args="config-epoch:i"),
    "setslot": dict(since="3.0.0", summary="Binds a hash slot to a node.", complexity="O(1)",
                    args="slot:i subcommand(importing(IMPORTING node-id) | migrating(MIGRATING "
                         "node-id) | node(NODE node-id) | STABLE) [TIMEOUT timeout:i]@8.0.0",
                    history=(("8.0.0", "Added the `TIMEOUT` option."),)),
    "shards": dict(since="7.0.0", summary="Returns the mapping of cluster slots to shards.",
                   complexity="O(N) where N is the total number of cluster nodes"),
    "slaves": dict(since="3.0.0", summary="Lists the replica nodes of a primary node.",
                   complexity="O(N) where N is the number of replicas.", args="node-id",
                   deprecated=("5.0.0", "`CLUSTER REPLICAS`")),
    "slot-stats": dict(since="8.0.0", summary="Return an array of slot usage statistics for slots "
                                              "assigned to the current node.",
                       complexity="O(N) where N is the total number of slots based on arguments. "
                                  "O(N*log(N)) with ORDERBY subcommand.",
                       args="filter(SLOTSRANGE start-slot:i end-slot:i | ORDERBY metric "
                            "[LIMIT limit:i] order[ASC | DESC])"),
    "slots": dict(since="3.0.0", summary="Returns the mapping of cluster slots to nodes.",
                  complexity=_NODES, history=(("4.0.0", "Added node IDs."),
                                              ("7.0.0", "Added additional networking metadata "
                                                        "field."))),
}

_HELP = (
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>", "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>", "    Return key names stored by current node in a slot.",
    "INFO", "    Return information about the cluster.",
    "KEYSLOT <key>", "    Return the hash slot for <key>.",
    "MYID", "    Return the node id.",
    "MYSHARDID", "    Return the node's shard id.",
    "NODES", "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <primary> <pings> <pongs> <epoch> "
    "<link> <slot> ...",
    "REPLICAS <node-id>", "    Return <node-id> replicas.",
    "SLOTS", "    Return information about slots range mappings. Each range is made of:",
    "    start, end, primary and replicas IP addresses, ports and ids",
    "SLOT-STATS",
    "    Return an array of slot usage statistics for slots assigned to the current node.",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "ADDSLOTS <slot> [<slot> ...]", "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH", "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>", "    Return number of failure reports for <node-id>.",
    "DELSLOTS <slot> [<slot> ...]", "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current "
    "node.",
    "FAILOVER [FORCE|TAKEOVER]", "    Promote current replica node to being a master.",
    "FORGET <node-id>", "    Remove a node from the cluster.",
    "FLUSHSLOTS", "    Delete current node own slots information.",
    "MEET <ip> <port> [<bus-port>]", "    Connect nodes into a working cluster.",
    "REPLICATE <node-id>", "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]", "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>", "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "SAVECONFIG", "    Force saving cluster configuration on disk.",
    "LINKS", "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes "
    "of a link",
    "HELP", "    Print this help.",
)

container("cluster", group="cluster", since="3.0.0", summary="A container for Cluster commands.",
          complexity="Depends on subcommand.")


def _state(c):
    st = c.server.cluster
    if st is None:
        raise CommandError(_CLUSTER_DISABLED)
    st.sync_address()
    st.simple = False     # whatever this CLUSTER command changes, routing re-reads it
    return st


def _sub_syntax(argv) -> CommandError:
    """Valkey's addReplySubcommandSyntaxError (the subcommand as sent)."""
    return CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                        "Try CLUSTER HELP." % argv[1][:128].decode("utf-8", "surrogateescape"))


def _int(arg) -> int:
    v = string2ll(arg)
    if v is None:
        raise CommandError(errors.NOT_INTEGER)
    return v


def _slot(arg) -> int:
    """Valkey's getSlotOrReply."""
    v = string2ll(arg)
    if v is None or v < 0 or v >= SLOTS:
        raise CommandError("ERR Invalid or out of range slot")
    return v


def _node(st, arg, unknown="ERR Unknown node %s"):
    n = st.topology.nodes.get(arg.decode("latin-1"))
    if n is None:
        raise CommandError(unknown % arg.decode("utf-8", "surrogateescape"))
    return n


def _keys_in_slot(st, slot: int) -> list:
    db = st.server.dbs[0]
    return [k for k in db.data if key_slot(k) == slot]


def _has_keys(st) -> bool:
    return any(len(db.data) for db in st.server.dbs)


def _info_text(st) -> bytes:
    return "".join("%s:%s\r\n" % kv for kv in st.info_fields()).encode()


def cluster_info(c, argv):
    return Verbatim(_info_text(_state(c)))


def cluster_myid(c, argv):
    return _state(c).myself.id.encode()


def cluster_myshardid(c, argv):
    return _state(c).myself.shard_id.encode()


def cluster_nodes(c, argv):
    st = _state(c)
    return Verbatim(st.topology.nodes_text(st.myself, st.importing, st.migrating))


def cluster_slots(c, argv):
    return _state(c).topology.slots_reply()


def cluster_shards(c, argv):
    return _state(c).topology.shards_reply()


def cluster_links(c, argv):
    st = _state(c)
    out = []
    for n in st.topology.nodes.values():
        if n is st.myself or n.failed:
            continue
        for direction in (b"to", b"from"):
            out.append({b"direction": direction, b"node": n.id.encode(),
                        b"create-time": n.created_ms, b"events": b"r",
                        b"send-buffer-allocated": 0, b"send-buffer-used": 0})
    return out


def cluster_keyslot(c, argv):
    _state(c)
    return key_slot(argv[2])


def cluster_countkeysinslot(c, argv):
    st = _state(c)
    slot = _int(argv[2])
    if slot < 0 or slot >= SLOTS:
        raise CommandError("ERR Invalid slot")
    return len(_keys_in_slot(st, slot))


def cluster_getkeysinslot(c, argv):
    st = _state(c)
    slot = _int(argv[2])
    count = _int(argv[3])
    if slot < 0 or slot >= SLOTS or count < 0:
        raise CommandError("ERR Invalid slot or number of keys")
    return _keys_in_slot(st, slot)[:count]


def cluster_count_failure_reports(c, argv):
    _node(_state(c), argv[2])
    return 0


def _slot_args(st, argv, ranged: bool) -> list:
    if ranged:
        if len(argv) % 2 == 1:
            raise CommandError(errors.WRONG_ARGS % ("cluster|" + argv[1].lower().decode()))
        slots = []
        for i in range(2, len(argv), 2):
            a, b = _slot(argv[i]), _slot(argv[i + 1])
            if a > b:
                raise CommandError("ERR start slot number %d is greater than end slot number %d"
                                   % (a, b))
            slots.extend(range(a, b + 1))
    else:
        slots = [_slot(a) for a in argv[2:]]
    return slots


def _check_slots(st, slots, adding: bool):
    """Slot by slot, as Valkey: its state first, then a repetition."""
    seen = set()
    topo = st.topology
    for s in slots:
        if adding and topo.slots[s] is not None:
            raise CommandError("ERR Slot %d is already busy" % s)
        if not adding and topo.slots[s] is None:
            raise CommandError("ERR Slot %d is already unassigned" % s)
        if s in seen:
            raise CommandError("ERR Slot %d specified multiple times" % s)
        seen.add(s)


def _addslots(c, argv, ranged: bool):
    st = _state(c)
    slots = _slot_args(st, argv, ranged)
    topo = st.topology
    _check_slots(st, slots, True)
    me = st.serving
    for s in slots:
        st.importing.pop(s, None)
        topo.slots[s] = me
    st.topology_changed()
    return OK


def _delslots(c, argv, ranged: bool):
    st = _state(c)
    slots = _slot_args(st, argv, ranged)
    topo = st.topology
    _check_slots(st, slots, False)
    for s in slots:
        topo.slots[s] = None
        st.importing.pop(s, None)
        st.migrating.pop(s, None)
    st.topology_changed()
    return OK


def cluster_addslots(c, argv):
    return _addslots(c, argv, False)


def cluster_addslotsrange(c, argv):
    return _addslots(c, argv, True)


def cluster_delslots(c, argv):
    return _delslots(c, argv, False)


def cluster_delslotsrange(c, argv):
    return _delslots(c, argv, True)


def cluster_flushslots(c, argv):
    st = _state(c)
    if len(st.server.dbs[0].data):
        raise CommandError("ERR DB must be empty to perform CLUSTER FLUSHSLOTS.")
    topo = st.topology
    for s in range(SLOTS):
        if topo.slots[s] is st.myself:
            topo.slots[s] = None
    st.topology_changed()
    return OK


def cluster_setslot(c, argv):
    """Valkey's clusterParseSetSlotCommand, then the change."""
    st = _state(c)
    me = st.myself
    if me.primary is not None:
        raise CommandError("ERR Please use SETSLOT only with masters.")
    slot = _slot(argv[2])
    topo = st.topology
    action = argv[3].lower()
    n = None
    opt = 0
    if action == b"migrating" and len(argv) >= 5:
        if topo.slots[slot] is not me:
            raise CommandError("ERR I'm not the owner of hash slot %d" % slot)
        n = _node(st, argv[4], "ERR I don't know about node %s")
        opt = 5
    elif action == b"importing" and len(argv) >= 5:
        if topo.slots[slot] is me:
            raise CommandError("ERR I'm already the owner of hash slot %d" % slot)
        n = _node(st, argv[4], "ERR I don't know about node %s")
        opt = 5
    elif action == b"stable" and len(argv) >= 4:
        opt = 4
    elif action == b"node" and len(argv) >= 5:
        n = _node(st, argv[4])
        opt = 5
    else:
        raise CommandError("ERR Invalid CLUSTER SETSLOT action or number of arguments. "
                           "Try CLUSTER HELP")
    if n is not None and n.primary is not None:
        raise CommandError("ERR Target node is not a master")
    if action == b"node" and topo.slots[slot] is me and n is not me \
            and _keys_in_slot(st, slot):
        raise CommandError("ERR Can't assign hashslot %d to a different node while I still "
                           "hold keys for this hash slot." % slot)
    i = opt
    while i < len(argv):   # TIMEOUT ms is checked; any other word is passed over
        if argv[i].lower() == b"timeout":
            if i + 1 >= len(argv):
                raise CommandError("ERR Missing timeout value")
            ms = string2ll(argv[i + 1])
            if ms is None:
                raise CommandError("ERR timeout is not an integer or out of range")
            if ms < 0:
                raise CommandError("ERR timeout is negative")
            i += 2
        else:
            i += 1
    if action == b"migrating":
        if n is me:
            st.migrating.pop(slot, None)
        else:
            st.migrating[slot] = n
    elif action == b"importing":
        st.importing[slot] = n
    elif action == b"stable":
        st.importing.pop(slot, None)
        st.migrating.pop(slot, None)
    else:
        if slot in st.migrating and not _keys_in_slot(st, slot):
            del st.migrating[slot]
        topo.slots[slot] = n
        target = n.state
        if target is not None and slot in target.importing:
            # The importing node takes the slot: a new epoch, as Valkey's
            # clusterBumpConfigEpochWithoutConsensus after a manual migration.
            del target.importing[slot]
            topo.bump_epoch(n)
        st.topology_changed()
    return OK


def cluster_bumpepoch(c, argv):
    st = _state(c)
    me = st.serving
    topo = st.topology
    top = max(n.config_epoch for n in topo.nodes.values())
    if me.config_epoch == 0 or me.config_epoch != top or sum(
            1 for n in topo.nodes.values() if n.config_epoch == top) > 1:
        topo.bump_epoch(me)
        return Simple(b"BUMPED %d" % me.config_epoch)
    return Simple(b"STILL %d" % me.config_epoch)


def cluster_set_config_epoch(c, argv):
    st = _state(c)
    epoch = _int(argv[2])
    if epoch < 0:
        raise CommandError("ERR Invalid config epoch specified: %d" % epoch)
    if len(st.topology.nodes) > 1:
        raise CommandError("ERR The user can assign a config epoch only when the node does "
                           "not know any other node.")
    if st.myself.config_epoch != 0:
        raise CommandError("ERR Node config epoch is already non-zero")
    st.myself.config_epoch = epoch
    st.topology.current_epoch = max(st.topology.current_epoch, epoch)
    return OK


def cluster_replicas(c, argv):
    st = _state(c)
    n = _node(st, argv[2])
    if n.primary is not None:
        raise CommandError("ERR The specified node is not a master")
    text = st.topology.nodes_text(st.myself, st.importing, st.migrating).decode()
    ids = {r.id for r in st.topology.replicas_of(n)}
    return [line.encode() for line in text.split("\n") if line.split(" ", 1)[0] in ids]


def cluster_forget(c, argv):
    st = _state(c)
    n = _node(st, argv[2])
    if n is st.myself:
        raise CommandError("ERR I tried hard but I can't forget myself...")
    if st.myself.primary is n:
        raise CommandError("ERR Can't forget my master!")
    if n.failed:
        del st.topology.nodes[n.id]
    return OK


def cluster_meet(c, argv):
    _state(c)
    host = argv[2].decode("utf-8", "surrogateescape")
    import ipaddress
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise CommandError("ERR Invalid node address specified: %s:%s"
                           % (host, argv[3].decode("utf-8", "surrogateescape"))) from None
    port = string2ll(argv[3])
    if port is None or not 0 <= port <= 65535:
        raise CommandError("ERR Invalid base port specified: %s"
                           % argv[3].decode("utf-8", "surrogateescape"))
    if len(argv) > 4:
        cport = string2ll(argv[4])
        if cport is None or not 0 <= cport <= 65535:
            raise CommandError("ERR Invalid bus port specified: %s"
                               % argv[4].decode("utf-8", "surrogateescape"))
    return OK


def cluster_replicate(c, argv):
    st = _state(c)
    n = _node(st, argv[2])
    me = st.myself
    if n is me:
        raise CommandError("ERR Can't replicate myself")
    if n.primary is not None:
        raise CommandError("ERR I can only replicate a master, not a replica.")
    if me.primary is None and (st.topology.owned(me) or _has_keys(st)):
        raise CommandError("ERR To set a master the node must be empty and without assigned "
                           "slots.")
    st.become_replica_of(n)
    return OK


def cluster_failover(c, argv):
    st = _state(c)
    force = takeover = False
    if len(argv) == 3:
        opt = argv[2].lower()
        if opt == b"force":
            force = True
        elif opt == b"takeover":
            takeover = True
        else:
            raise CommandError(errors.SYNTAX)
    elif len(argv) > 3:
        raise _sub_syntax(argv)
    me = st.myself
    if me.primary is None:
        raise CommandError("ERR You should send CLUSTER FAILOVER to a replica")
    if me.primary.failed and not (force or takeover):
        raise CommandError("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")
    st.promote()
    return OK


def cluster_reset(c, argv):
    st = _state(c)
    hard = False
    if len(argv) == 3:
        opt = argv[2].lower()
        if opt == b"hard":
            hard = True
        elif opt != b"soft":
            raise CommandError(errors.SYNTAX)
    elif len(argv) > 3:
        raise _sub_syntax(argv)
    if st.myself.primary is None and len(st.server.dbs[0].data):
        raise CommandError("ERR CLUSTER RESET can't be called with master nodes containing "
                           "keys")
    st.reset(hard)
    return OK


def cluster_saveconfig(c, argv):
    why = _state(c).save_config()
    if why is not None:
        raise CommandError("ERR error saving the cluster node config: %s" % why)
    return OK


def cluster_slot_stats(c, argv):
    """SLOT-STATS SLOTSRANGE a b: each slot's key-count (the CPU and network
    counters need cluster-slot-stats-enabled, which hotkv does not keep)."""
    st = _state(c)
    if argv[2].lower() == b"slotsrange" and len(argv) == 5:
        a, b = _int(argv[3]), _int(argv[4])
        if a < 0 or b >= SLOTS or a > b:
            raise CommandError("ERR Invalid slot range")
        counts: dict = {}
        for k in st.server.dbs[0].data:
            s = key_slot(k)
            counts[s] = counts.get(s, 0) + 1
        return [[s, {b"key-count": counts.get(s, 0)}] for s in range(a, b + 1)
                if st.topology.slots[s] is st.serving]
    raise CommandError(errors.SYNTAX)


def cluster_help(c, argv):
    _state(c)
    return [Simple(line.encode()) for line in _HELP]


_HANDLERS = {
    "info": cluster_info, "myid": cluster_myid, "myshardid": cluster_myshardid,
    "nodes": cluster_nodes, "slots": cluster_slots, "shards": cluster_shards,
    "links": cluster_links, "keyslot": cluster_keyslot,
    "countkeysinslot": cluster_countkeysinslot, "getkeysinslot": cluster_getkeysinslot,
    "count-failure-reports": cluster_count_failure_reports,
    "addslots": cluster_addslots, "addslotsrange": cluster_addslotsrange,
    "delslots": cluster_delslots, "delslotsrange": cluster_delslotsrange,
    "flushslots": cluster_flushslots, "setslot": cluster_setslot,
    "bumpepoch": cluster_bumpepoch, "set-config-epoch": cluster_set_config_epoch,
    "replicas": cluster_replicas, "slaves": cluster_replicas, "forget": cluster_forget,
    "meet": cluster_meet, "replicate": cluster_replicate, "failover": cluster_failover,
    "reset": cluster_reset, "saveconfig": cluster_saveconfig,
    "slot-stats": cluster_slot_stats, "help": cluster_help,
}

# The subcommands that may change what nodes.conf holds: a lone node writes
# the file after them (hotkv.cluster.nodes_conf), as Valkey saves its config.
_SAVES = {"addslots", "addslotsrange", "delslots", "delslotsrange", "flushslots", "setslot",
          "bumpepoch", "set-config-epoch", "forget", "replicate", "failover", "reset"}


def _saving(fn):
    @functools.wraps(fn)
    def handler(c, argv):
        reply = fn(c, argv)
        c.server.cluster.save_config()     # fn returned: cluster mode is on
        return reply
    return handler


for _name, _arity, _flags in _CLUSTER_SUBCOMMANDS:
    _fn = _HANDLERS[_name]
    command("cluster|" + _name, _arity, _flags, group="cluster",
            **_CLUSTER_DOCS[_name])(_saving(_fn) if _name in _SAVES else _fn)
del _name, _arity, _flags, _fn


# -- connection flags ------------------------------------------------------------

@command("readonly", 1, "loading stale fast", group="cluster", since="3.0.0",
         acl=("connection",), complexity="O(1)")
def readonly(c, argv):
    """Enables read-only queries for a connection to a Valkey replica node."""
    if c.server.cluster is not None:
        c.cluster_ro = True
    return OK


@command("readwrite", 1, "loading stale fast", group="cluster", since="3.0.0",
         acl=("connection",), complexity="O(1)")
def readwrite(c, argv):
    """Enables read-write queries for a connection to a Valkey replica node."""
    c.cluster_ro = False
    return OK


@command("asking", 1, "fast", group="cluster", since="3.0.0", acl=("connection",),
         complexity="O(1)")
def asking(c, argv):
    """Signals that a cluster client is following an -ASK redirect."""
    _state(c)
    c.asking = True
    return OK
