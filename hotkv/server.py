"""The server: its state, its subsystems, and the order they are called in.

``Server`` owns the databases, the configuration, the connected clients, the
statistics INFO reports, the ready-keys list of the blocking machinery and
the propagation buffer the AOF reads.  It knows no sockets: the network
layer (``hotkv.net.listeners``) gives it an event loop through ``attach_loop``, calls
``before_sleep`` once per loop turn through ``wake``, and tells it of every
connection's life: ``refusal`` (a new connection), ``client_gone``
(disconnection), ``load_data`` (at start) and ``shutdown`` (at stop).

Subsystems, made in this order by ``_make_subsystems`` (as uvicorn's Server
owns its parts) and then called by name, never through a registry a module
fills when imported:

====================  ============================  ==========================
subsystem             made as                       called by the server in
====================  ============================  ==========================
slow log, MONITOR     ``cmdlog.init_slowlog``       client_gone, reset_client
latency monitor       ``latency.init_server``       cron (expire-cycle events,
                                                    histogram folding)
access times          ``access.init_server``        cron (the LRU clock)
pub/sub               ``pubsub.init_server``        before_sleep, client_gone,
                                                    reset_client
keyspace events       ``notify.init_server``        (written, key_expired)
limits                ``limits.init_server``        refusal, cron
ACL                   ``acl.init_server``           auth_required, default_user
client-side caching   ``tracking.init_server``      written, key_expired,
                                                    before_sleep, cron,
                                                    client_gone, reset_client
RDB snapshots         ``snapshots.Snapshots``       cron, load_data, shutdown
cluster mode          ``cluster_state.init_server`` reset_client (the
                      (hotkv.cluster.state)         dispatcher: ``cluster``)
AOF                   ``aof.AOF``                   before_sleep, cron,
                                                    load_data, shutdown
====================  ============================  ==========================

The instantaneous metrics (``hotkv.core.stats``) are sampled by ``cron``; TLS
listeners are the network layer's (``Listener.start``).  Valkey's order is
kept where it shows: ``client_gone`` is freeClient (blocking queues, WATCH,
MONITOR, pub/sub), ``reset_client`` is clearClientConnectionState, ``cron``
is serverCron (active expiry, then the subsystems).  A new subsystem is one
line in ``_make_subsystems`` and one in each lifecycle method it needs.

The hooks every command module uses:
* ``written(db, key, event_class, event)`` after changing a key: bumps the
  dirty counter (so the change is propagated), touches WATCHers and blocked
  clients, and emits the keyspace notification;
* ``propagate_as(argv, ...)`` to log a deterministic form instead of the
  command as sent (a served BLMOVE as LMOVE, EX as PXAT);
* ``key_expired(db, key)`` (from Database) propagates a DEL.

Invariants: ``dirty`` only grows; ``prop_pending`` is flushed to the AOF at
the end of each outermost ``call``; ``ready_set`` mirrors ``ready_keys``;
every subsystem is declared once the constructor returns (a part that is off
or made at first use is None, and its users test that);
every command is registered once this module is imported (it imports
``hotkv.commands``: the only module besides the package that does, so that
``import hotkv`` alone -- ``hotkv cli`` -- loads no command);
every attribute any module stores on a server is declared in ``__init__`` or
``_make_subsystems`` with what it is and who uses it -- a part made later or
only while in use (the Lua engines, the dashboard, faults, the journal) is
None until then, a counter 0, a DEBUG switch its default -- so no module
probes a server with ``getattr`` / ``hasattr`` (tests/test_state_guard.py).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
import traceback
from collections import deque
from time import perf_counter as _perf_counter

from . import (
    commands,  # noqa: F401  (registers every command: a server needs them)
    http,
)
from .clients import acl, client_eviction, clientbufs, limits, pubsub, tracking
from .cluster import state as cluster_state
from .core import access, eviction, latency, lazyfree, notify, replica_keys, stats
from .core.blocking import drop as drop_blocked, expire_timeouts
from .core.clock import Clock
from .core.config import SHUTDOWN_FORCE, SHUTDOWN_NOSAVE, SHUTDOWN_SAVE, Config
from .core.db import Database
from .core.dispatch import serve_ready_keys
from .core.multi import discard_transaction, unwatch_all
from .core.pause import arm as arm_pause, unpause_clients
from .core.registry import TABLE as _COMMAND_TABLE
from .observe import cmdlog, loopstats, proctitle
from .persistence.aof import AOF, AOFLoadError, files as aof_files
from .persistence.rdbfile import RDBLoadError
from .persistence.snapshots import Snapshots
from .replication import CountedAOF, ReplState, replica
from .version import __version__

log = logging.getLogger("hotkv")

REHASH_BUCKETS = 1024    # key-index buckets moved per database per cron tick


def _gate(name: str):
    """A server attribute the dispatcher must check before running a command.
    Setting one recomputes ``gated``, so that an ordinary command (no ACL
    restriction, maxmemory, disk error, loading or CLIENT PAUSE) costs the
    dispatcher one attribute test instead of five."""
    slot = "_gate_" + name

    def fget(self):
        return self.__dict__[slot]

    def fset(self, value):
        d = self.__dict__
        d[slot] = value
        self.gated = bool(d.get("_gate_acl_check") is not None or d.get("_gate_maxmemory")
                          or d.get("_gate_disk_error") is not None or d.get("_gate_loading")
                          or d.get("_gate_pause_check") is not None
                          or d.get("_gate_tracking_over")
                          or d.get("_gate_repl_check") is not None
                          or d.get("_gate_repl_refuse")
                          or d.get("_gate_clients_limit"))
    return property(fget, fset)


class Server:
    # What every command reads or writes lives in slots (about half the cost
    # of a lookup in an instance dict this size); the rest in __dict__.
    __slots__ = (
        "gated", "dirty", "current_cmd", "current_argv", "current_client",
        "cmd_time_ms", "cmd_time_lo", "cmd_time_next", "prop_override", "prop_pending",
        "pending_push", "monitors",
        "feed_monitors", "slowlog_threshold", "slowlog_push", "stat_numcommands", "aof",
        "command_table", "ready_keys", "ready_set", "notify", "notify_new",
        "stat_net_input_bytes", "stat_net_output_bytes", "obuf_hard_normal",
        "pending_flush", "dbs", "config", "tracking_on", "slow_gate", "__dict__",
        "test_hooks",   # hotkv.testing: faults / the journal while on (dispatch.call)
        "cluster",      # cluster-enabled: hotkv.cluster.state, or None (one test per command)
        "cmdstats",     # hotkv.core.stats.CommandStats: this server's command and error stats
        "queue_counts",  # per-list enqueue/dequeue counters while http-port is on, else None
    )
    acl_check = _gate("acl_check")
    maxmemory = _gate("maxmemory")
    disk_error = _gate("disk_error")
    loading = _gate("loading")
    pause_check = _gate("pause_check")
    tracking_over = _gate("tracking_over")   # hotkv.clients.tracking: the table is over its limit
    repl_check = _gate("repl_check")   # a replica: READONLY / MASTERDOWN (replication.replica)
    repl_refuse = _gate("repl_refuse")   # min-replicas-to-write unmet (hotkv.replication)
    clients_limit = _gate("clients_limit")   # maxmemory-clients in bytes (client_eviction)

    def __init__(self, config: Config | dict | None = None, *, nodes_conf: bool = True):
        if not isinstance(config, Config):
            config = Config(config or {})
        self.config = config
        # False: a cluster node whose state is replaced at once (EmbeddedCluster's
        # nodes share an in-process topology) locks and writes no nodes.conf.
        self.nodes_conf = nodes_conf
        self.clock = Clock(self)      # the time the data lives in (hotkv.core.clock)
        # Cluster mode has database 0 only, as Valkey's.
        self.dbs = [Database(i, self) for i in range(
            1 if config.values["cluster-enabled"] else config.values["databases"])]
        self.clients: dict = {}
        self._client_ids = itertools.count(1)
        self.loop = None
        # A caller's thread while it runs one of this loop's turns under the
        # loop's lock (hotkv.inprocess), else None: see on_loop_thread.
        self.turn_thread = None
        self.start_time = time.time()
        self.run_id = os.urandom(20).hex()
        self.version = __version__
        # dispatcher state
        self.cmd_time_ms = self.clock.ms()
        # The clock readings (seconds) between which cmd_time_ms stays what
        # it is: call() recomputes it only outside them.
        self.cmd_time_lo = self.cmd_time_next = 0.0
        self.current_cmd = None
        self.current_argv = None
        self.dirty = 0
        self.dirty_at_save = 0
        self.prop_override = None
        self.prop_pending: list = []
        self.loading = False
        self.active_expire_enabled = True     # DEBUG SET-ACTIVE-EXPIRE
        self.disk_error = None          # MISCONF text while the AOF cannot be written
        self.maxmemory = 0
        self.clients_limit = 0          # hotkv.clients.client_eviction sets it
        self.acl_check = None           # set by the ACL module when users exist
        self.repl_refuse = False        # NOREPLICAS: fewer good replicas than wanted
        self.command_table = _COMMAND_TABLE   # a copy when rename-command is used
        self.obuf_hard_normal = 0       # client-output-buffer-limit normal hard (clients.limits)
        # blocking
        self.ready_keys: list = []
        self.ready_set: set = set()
        self.blocked_clients = 0
        # Waiters are numbered in the order they block: the ready-keys pass
        # serves a key only to waiters numbered below a fence (hotkv.core.dispatch).
        self.waiter_seq = itertools.count()
        self.blocking_keys_nokey = 0
        self.hll_simd = True            # PFDEBUG SIMD ON|OFF (Valkey's simd_enabled)
        self.block_timeouts: list = []
        self._block_timer = None
        self._block_timer_at = 0
        # output
        self.pending_flush: list = []
        self._wake_scheduled = False
        # hotkv.testing: call()'s hook (faults, the journal) and what runs at
        # the end of before_sleep (wait_until, wait_idle); off: None and [].
        self.test_hooks = None
        self.sleep_hooks: list = []
        self.queue_counts = None      # hotkv.http.counts, counted by the list commands
        # stats
        self.stat_numcommands = 0
        self.stat_numconnections = 0
        self.stat_rejected_conn = 0
        self.stat_expiredkeys = 0
        self.stat_keyspace_hits = 0
        self.stat_keyspace_misses = 0
        self.stat_net_input_bytes = 0
        self.stat_net_output_bytes = 0
        self.stat_unexpected_error_replies = 0
        self.stat_client_qbuf_limit_disconnections = 0
        self.stat_client_outbuf_limit_disconnections = 0
        self.stat_evictedkeys = 0         # keys maxmemory evicted (hotkv.core.eviction)
        self.stat_evictedclients = 0      # maxmemory-clients kills (hotkv.clients.client_eviction)
        self.latest_fork_usec = 0         # the last fork's duration (hotkv.persistence.forkchild)
        self.total_forks = 0              # forks: BGSAVE, rewrites, syncs, forked ldb sessions
        # Lazy freeing (hotkv.core.lazyfree, which sets them again at init):
        # objects queued to free after the reply, objects freed so, the queue.
        self.lazyfree_pending = 0
        self.lazyfreed_objects = 0
        self.lazyfree_queue: list = []
        self.slowlog: deque = deque()     # SLOWLOG entries, newest first (hotkv.observe.cmdlog)
        self.slowlog_next_id = 0          # the next entry's id (cmdlog; SLOWLOG RESET keeps it)
        # Per command (calls, usec, rejected/failed, latency histograms),
        # errorstats and total_error_replies: this server's, never the
        # process-wide command table's (hotkv.core.stats).
        self.cmdstats = stats.CommandStats()
        # REPLCONF values a connection sent, until its SYNC/PSYNC or its end
        # (client id -> dict; hotkv.commands.replication).
        self.replconf: dict = {}
        # Connections freed while a busy script held the loop, whose later
        # connection_lost is then a no-op (hotkv.net.busy.ServeWhileBlocked).
        self.ended_while_held: set = set()
        self.inst_samples = None      # INFO's instantaneous metrics (hotkv.core.stats)
        self.el_cmd_sum = 0.0         # eventloop_duration_cmd_sum (hotkv.observe.loopstats)
        # The latency monitor (hotkv.core.latency.init_server sets them).
        self.latency_events: dict = {}
        self.latency_threshold_ms = 0
        self.latency_percentiles: list = []
        self.on_slow = self.latency_sample = None
        self.client_pause = None      # CLIENT PAUSE while one is on (hotkv.core.pause)
        # Lua: the engine and the function registry, made at their first use
        # (hotkv.lua.engine.engine, hotkv.lua.functions.registry); ``yielding``
        # while a busy script holds the loop (the dispatcher defers serving
        # blocked clients then).
        self.scripting = None
        self.functions = None
        self.yielding = False
        self.shutdown_saved = False   # prepare_shutdown decided: shutdown() saves no more
        self.lastsave = int(time.time())
        self.notify = None          # fn(db, key, cls, event) for keyspace events (notify)
        self.notify_new = False     # the notify module: emit "new" when a key is created
        self.current_client = None  # the client whose command runs (outermost call)
        # The read whose commands run now (hotkv.net.connection): its size and command
        # count, and how many ran (set on the gated path only): maxmemory does
        # not count the input not yet run (hotkv.core.eviction.not_counted).
        self.input_bytes = self.input_total = self.input_done = 0
        self.monitors: list = []     # MONITOR clients (hotkv.observe.cmdlog feeds them)
        self.feed_monitors = cmdlog.feed_monitors
        self.pause_check = None      # set by hotkv.core.pause while a CLIENT PAUSE is on
        self.repl_check = None       # set while hotkv is a replica (hotkv.replication.replica)
        self.replica_link = None     # its link to the primary, then
        self.pending_push: list = []  # pushes to current_client, sent after its reply
        self.shutdown_cb = None     # set by the network layer
        # Parts made later, or only while in use (None / off until then):
        self.listener = None        # hotkv.net.listeners.Listener while serving (net.busy reads it)
        self.http = None            # the dashboard and /metrics while http-port is set (hotkv.http)
        self.faults = None          # hotkv.testing.faults.Faults, made by faults_of at first use
        self.journal = None         # hotkv.testing.journal.Journal, made by journal_of at first use
        self.refuse_all = False     # faults' refuse_connections: hotkv.net.connection resets them
        # ``hotkv serve`` (hotkv.tools): the configuration file (CONFIG REWRITE,
        # INFO config_file; set through the config_file property, which also
        # marks ``serving``: the process is this server's, hotkv.observe.proctitle
        # titles it) and SignalShutdown's abort while a signal shutdown waits
        # (SHUTDOWN ABORT; an AOF write error then ends the process).
        self._config_file = None
        self.serving = False
        self.abort_shutdown = None
        self.loading_progress = None  # an RDB start-up load's progress (persistence.rdbfile; INFO)
        self.notouch_used = False   # a CLIENT NO-TOUCH client exists (hotkv.core.access)
        self.replica_expire_keys = None   # a writable replica's own TTL keys (core.replica_keys)
        # MIGRATE's cached connections, "host:port" -> entry, and the timer
        # closing the idle ones (hotkv.commands.migrate).
        self.migrate_sockets: dict = {}
        self.migrate_timer = None
        self.clientbufs_order: list = []   # clients the buffer cron has yet to visit (clientbufs)
        # DEBUG's switches (hotkv.commands.debug): PAUSE-CRON (the network
        # layer's cron and a signal shutdown wait), SET-DISABLE-DENY-SCRIPTS
        # (hotkv.lua.engine), REPLYBUFFER (hotkv.clients.clientbufs);
        # QUICKLIST-PACKED-THRESHOLD and DICT-RESIZING are kept, not used.
        self.cron_paused = False
        self.script_disable_deny_script = False
        self.reply_buffer_peak_reset_time = clientbufs.PEAK_RESET_MS   # ms, -1: never
        self.reply_buffer_resizing = True
        self.quicklist_packed_threshold = 1 << 30
        self.dict_resizing = True
        self._apply_config()
        self._make_subsystems()

    def _make_subsystems(self):
        """Every subsystem, in this order: one that reads another's state at
        its start comes after it (limits reads the output-buffer limits
        pub/sub merged; the AOF, last, may replay into all of them)."""
        cmdlog.init_slowlog(self)                 # slowlog, slowlog_push, threshold
        latency.init_server(self)                 # LATENCY events, slow_gate, on_slow
        access.init_server(self)                  # OBJECT IDLETIME/FREQ (db.access kind)
        lazyfree.init_server(self)                # UNLINK / FLUSH ASYNC free after the reply
        self.loopstats = loopstats.init_server(self)  # INFO's eventloop_* (before_sleep, cron)
        proctitle.attach(self)                    # CONFIG SET proc-title-template (serve only)
        self.startup_memory = stats.used_memory()  # INFO used_memory_startup
        self.eviction = eviction.Evictor(self)    # maxmemory (the dispatcher's gate, cron)
        # maxmemory-clients (after the evictor: it chains maxmemory's hook)
        self.client_evictor = client_eviction.init_server(self)
        self.pubsub = pubsub.init_server(self)
        notify.init_server(self)                  # notify, notify_new (publishes via pubsub)
        # command_table (rename-command), obuf; the cron's state (idle timeouts, soft limits)
        self.limits_state = limits.init_server(self)
        self.acl = acl.AclState(self)             # users, ACL LOG, denials
        acl.init_server(self)                     # ... from the settings (may raise: aclfile)
        self.tracking = tracking.init_server(self)  # client-side caching (tracking_on)
        self.snapshots = Snapshots(self)          # SAVE/BGSAVE, save points (persistence.snapshots)
        cluster_state.init_server(self)           # cluster (None unless cluster-enabled)
        self.repl = ReplState(self)               # replication ids, offset, backlog, replicas
        self.aof_writer = None                    # the AOF while it is on (attach_aof)
        self.aof = None                           # the propagation sink (relink_propagation)
        self.raw_stream = None    # the primary side while it is fed (relink_propagation)
        self.aof_manager = AOF(self)
        # A setting two subsystems read: pub/sub merges a partial value over
        # the old one first, then limits reads the normal class from it.
        self.config.listeners["client-output-buffer-limit"] = self._set_obuf_limits

    def _set_obuf_limits(self, value):
        self.pubsub.set_obuf_limits(value)
        limits.obuf_changed(self)

    # ------------------------------------------------------------------
    # A client's life (called by the network layer and RESET)
    # ------------------------------------------------------------------
    def refusal(self, conn):
        """The error text a new connection is refused with, or None."""
        return limits.protected_mode_refusal(conn)

    def client_gone(self, c):
        """c disconnected (Valkey's freeClient): take it out of everything."""
        drop_blocked(c)
        unwatch_all(c)
        cmdlog.stop_monitoring(c)
        pubsub.client_gone(c)
        tracking.client_gone(c)
        if self.clients_limit:
            self.client_evictor.client_gone(c)
        if c.kind == "replica":
            self.repl.client_gone(c)
        if self.replconf:
            self.replconf.pop(c.id, None)

    def reset_client(self, c):
        """RESET (Valkey's clearClientConnectionState)."""
        cmdlog.stop_monitoring(c)
        pubsub.client_gone(c)
        tracking.client_gone(c)
        discard_transaction(c)
        c.db = self.dbs[0]
        c.resp3 = False
        c.name = b""
        c.reply_mode = 0
        c.no_evict = False
        c.no_touch = False
        c.asking = c.cluster_ro = False
        c.authenticated = not self.auth_required()
        c.user = self.default_user()

    # ------------------------------------------------------------------
    # Start and stop (called by the network layer)
    # ------------------------------------------------------------------
    async def load_data(self):
        """At start, before the cron: load the AOF (when appendonly is on)
        and start appending to it; else the RDB file, when there is one (as
        Valkey: with the AOF on, the AOF alone is the dataset).  AOFLoadError
        or RDBLoadError stops the start."""
        if not self.config.values["appendonly"]:
            try:
                await self.snapshots.load_at_start()
            except RDBLoadError as e:
                log.error("%s", e)
                raise
        else:
            aof = self.aof_manager
            try:
                await aof.load()
            except AOFLoadError as e:
                log.error("%s", e)
                raise
            aof.start()
        if self.config.values["replicaof"]:   # follow the primary once the data is in
            replica.start_from_config(self)

    def prepare_shutdown(self, flags: int) -> bool:
        """Valkey's prepareForShutdown, the one decision for SHUTDOWN and the
        signals (hotkv.tools.cli.SignalShutdown): True when the server may
        stop now.  A half-loaded dataset is never saved; an AOF turned on
        whose first rewrite still runs holds the shutdown unless FORCE; the
        final save (SAVE, or the save points) failing holds it unless FORCE;
        NOSAVE kills a BGSAVE child and saves nothing.  After True, ``shutdown``
        (at stop) does not save again."""
        if self.loading:
            flags = (flags & ~SHUTDOWN_SAVE) | SHUTDOWN_NOSAVE
        aof = self.aof_manager
        if aof.state == aof_files.WAIT_REWRITE and aof.rw_pid:
            # The AOF is on but its first rewrite has not finished: without it
            # the dataset is in no AOF yet.
            if not flags & SHUTDOWN_FORCE:
                log.warning("Writing initial AOF, can't exit.")
                return self._shutdown_failed()
            log.warning("Writing initial AOF. Exit anyway.")
        if flags & SHUTDOWN_NOSAVE:
            self.snapshots.kill_child()
        elif not self.snapshots.shutdown_save(bool(flags & SHUTDOWN_SAVE),
                                              bool(flags & SHUTDOWN_FORCE)):
            return self._shutdown_failed()
        self.shutdown_saved = True
        return True

    @staticmethod
    def _shutdown_failed() -> bool:
        log.warning("Errors trying to shut down the server. Check the logs for more information.")
        return False

    def shutdown(self):
        """At stop, after the clients' last output: when neither SHUTDOWN nor
        a signal decided already (an embedded server's stop, the loop ending),
        prepare_shutdown's decision as FORCE -- the stop goes on whatever
        fails, said in the log -- then the AOF's final write and fsync."""
        if not self.shutdown_saved:
            self.prepare_shutdown(SHUTDOWN_FORCE)
        self.aof_manager.stop(final=True)
        self.repl.shutdown()
        http.detach(self)
        if self.replica_link is not None:
            self.replica_link.stop()
        if self.cluster is not None:
            self.cluster.close()          # its nodes.conf lock

    @property
    def config_file(self):
        """The configuration file ``hotkv serve`` started with (None: none)."""
        return self._config_file

    @config_file.setter
    def config_file(self, path):
        # Only ``hotkv serve`` sets it (hotkv.tools), even to None: the
        # process is then this server's own.
        self._config_file = path
        self.serving = True

    # ------------------------------------------------------------------
    def _apply_config(self):
        self.maxmemory = self.config.values["maxmemory"]
        self.config.listeners["maxmemory"] = self._set_maxmemory

    def _set_maxmemory(self, v):
        self.maxmemory = v
        self.eviction.limit_changed()     # a lower limit evicts at once (hotkv.core.eviction)

    def next_client_id(self) -> int:
        return next(self._client_ids)

    def auth_required(self) -> bool:
        return bool(self.config.values["requirepass"]) or self.acl.auth_required()

    def default_user(self):
        return self.acl.default

    def protected_denied(self, client, cmd):
        if cmd.name == "debug" or cmd.name.startswith("debug|"):
            mode = self.config.values["enable-debug-command"]
            if mode == "yes" or (mode == "local" and _is_local(client)):
                return None
            return ('ERR DEBUG command not allowed. If the enable-debug-command option is '
                    'set to "local", you can run it from a local connection, otherwise you '
                    'need to set this option in the configuration file, and then restart the '
                    'server.')
        return None

    def over_maxmemory(self) -> bool:
        # The answer of the eviction run before the command (Valkey's
        # pre_command_oom_state): what scripts check before their first write.
        return self.maxmemory > 0 and self.eviction.oom

    # ------------------------------------------------------------------
    # Hooks for command modules
    # ------------------------------------------------------------------
    def written(self, db, key, cls: str = "", event: str = "", n: int = 1):
        """key in db was changed by the running command.

        The hottest handlers (lists._pusher and _popper, streams.xadd) inline
        the case where only the first line applies: an effect added here
        must be added to them too (tests/test_transactions.py checks
        them)."""
        self.dirty += n
        if key in db.watched:
            db.touch_watched(key)
        if key in db.blocking:
            self.signal_ready(db, key)
        if self.tracking_on:
            t = self.tracking   # a key nobody may cache costs a lookup, not a call
            if t.prefixes or key in t.table:
                t.invalidate(key)
        if self.notify is not None and event:
            self.notify(db, key, cls, event)

    def event(self, db, key, cls: str, event: str):
        """A keyspace notification without a data change of its own."""
        if self.notify is not None:
            self.notify(db, key, cls, event)

    def signal_ready(self, db, key):
        if key not in db.blocking:
            return
        token = (db.index, key)
        if token not in self.ready_set:
            self.ready_set.add(token)
            self.ready_keys.append((db, key))

    def key_expired(self, db, key):
        self.stat_expiredkeys += 1
        # No dirty++ (as Redis): the DEL is propagated on its own, and a
        # read that met an expired key must not be logged itself.
        if key in db.watched:
            db.touch_watched(key)
        if key in db.blocking:
            self.signal_ready(db, key)
        self.propagate(db.index, [b"UNLINK" if self.config.values.get("lazyfree-lazy-expire")
                                  else b"DEL", key])
        if self.current_client is None and self.prop_pending:
            # Outside a command (active expiry, a clock move) each deletion is its
            # own unit, never a MULTI around a batch (Valkey's exitExecutionUnit).
            self.flush_propagation()
        if self.notify is not None:
            self.notify(db, key, "x", "expired")
        if self.tracking_on:
            self.tracking.invalidate(key, None)

    def empty_data(self, db=None, lazy: bool = False, functions: bool = False) -> int:
        """Valkey's emptyData, the one way a dataset is emptied: every database
        (or just ``db``) cleared, transactions WATCHing a key that existed
        failed, client-side caches told once ("all keys"), the function
        libraries deleted with ``functions`` (a full sync, DEBUG RELOAD).  A
        ``lazy`` flush frees the old keys after the reply (hotkv.core.lazyfree),
        each key counted as one lazily freed object as Valkey counts them.
        Returns how many keys went; the dirty counter is the caller's (FLUSHALL
        counts them, a full sync does not).  ``replace_data`` is the same
        rule with a new dataset swapped in."""
        removed = 0
        for one in (self.dbs if db is None else (db,)):
            one.touch_all()
            old = (one.data, one.expires)
            n = one.clear()
            if lazy and n:
                lazyfree.free_later(self, old, n)
            del old
            removed += n
        self._data_gone(functions)
        return removed

    def replace_data(self, incoming, functions: bool = False, swapdb: bool = False) -> list:
        """emptyData followed by a load, done as one swap (Valkey's
        swapMainDbWithTempDb): ``incoming`` holds, per database in order, a
        ``(data, expires, keyindex, volatile, access)`` to take in place of
        its keys (``access`` may be None: hotkv.core.db.Database.take), or
        None to leave that database alone.  The WATCH, tracking and function
        rules are empty_data's; with ``swapdb`` a WATCHed key is judged
        against the incoming keys too, as SWAPDB judges it (a test's snapshot
        restored).  Returns the old ``(data, expires, access)`` of each
        database replaced, for the caller to free (a full sync frees them off
        the loop)."""
        old = []
        for one, new in zip(self.dbs, incoming):
            if new is None:
                continue
            one.touch_all(_Incoming(new[0]) if swapdb else None)
            old.append(one.take(*new))
        self._data_gone(functions)
        return old

    def _data_gone(self, functions: bool) -> None:
        """What emptying the dataset tells the rest (empty_data, replace_data)."""
        if self.tracking_on:
            self.tracking.flushed()
        if functions and self.functions is not None:   # made at first use (lua)
            self.functions.flush()

    def propagate_as(self, *argvs, db=None):
        """Log these argvs instead of the command as sent (when it wrote)."""
        if self.aof is None:
            return   # nothing logs (dispatch.call reads the override only for the AOF)
        entries = [(db, list(a)) for a in argvs]
        if self.prop_override is None:
            self.prop_override = entries
        else:
            self.prop_override.extend(entries)

    def attach_aof(self, writer):
        """The AOF writer while it wants records, or None (hotkv.persistence.aof.writer)."""
        self.aof_writer = writer
        self.relink_propagation()

    def relink_propagation(self):
        """``aof``, what propagation feeds and every "does anything log?"
        test reads: the AOF writer, the replication feed (while the backlog
        exists, hotkv.replication.primary), both, or None."""
        writer = self.aof_writer
        repl = self.repl
        feed = repl.primary if repl.backlog is not None and repl.role == "master" else None
        # A read may go to the stream verbatim (net.py; Primary.begin).
        self.raw_stream = feed if feed is not None and feed.verbatim else None
        if repl.role != "master":
            # A replica passes its primary's stream on as received (chained
            # replication, hotkv.replication.replica): nothing of its own.
            self.aof = writer
            return
        if feed is None:
            # No backlog: the offset still counts the AOF's commands (Valkey's).
            self.aof = None if writer is None else CountedAOF(writer, repl)
        elif writer is None:
            self.aof = feed
        else:
            self.aof = _Tee(writer, feed)

    def propagate(self, dbindex: int, argv):
        if self.aof is not None:
            self.prop_pending.append((dbindex, argv))

    def flush_propagation(self):
        pending = self.prop_pending
        if pending:
            self.prop_pending = []
            if len(pending) > 1 and self.current_cmd is not None \
                    and self.current_cmd.name in _ARBITRARY_KEYS:
                # SCAN / RANDOMKEY run directly: their lazy expiries go out one by
                # one, no MULTI (Valkey's CMD_TOUCHES_ARBITRARY_KEYS); inside EXEC
                # or a script the outer command is the one named here.
                for entry in pending:
                    self.aof.feed([entry])
            else:
                self.aof.feed(pending)

    def count_error(self, message: str, custom: bool = False):
        """An error reply, into INFO errorstats (``CommandStats.count_error``)."""
        self.cmdstats.count_error(message, custom)

    @property
    def errorstats(self) -> dict:
        """INFO errorstats: error code -> count (``cmdstats.errors``)."""
        return self.cmdstats.errors

    @property
    def stat_total_error_replies(self) -> int:
        """INFO total_error_replies (``cmdstats.error_replies``)."""
        return self.cmdstats.error_replies

    def log_exception(self, cmd, argv, exc):
        log.error("internal error running %s: %s\n%s", cmd.name, exc,
                  "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    # ------------------------------------------------------------------
    # Event loop integration
    # ------------------------------------------------------------------
    def attach_loop(self, loop):
        self.loop = loop
        http.attach(self)   # http-port: the dashboard and /metrics (hotkv.http)

    def on_loop_thread(self) -> bool:
        """Whether the calling thread runs this server's code now: the loop's
        own thread, or a caller running a loop turn under the loop's lock
        (hotkv.inprocess; asyncio's running loop is not swapped for such a
        turn: that cost 0.6 us a command)."""
        if self.turn_thread is not None and self.turn_thread == threading.get_ident():
            return True
        loop = self.loop
        if loop is None:
            return False
        try:
            return asyncio.get_running_loop() is loop
        except RuntimeError:
            return False

    def wake(self):
        """Make sure before_sleep runs at the end of this loop turn."""
        if not self._wake_scheduled and self.loop is not None:
            self._wake_scheduled = True
            self.loop.call_soon(self.before_sleep)

    def before_sleep(self):
        """Redis's beforeSleep: persistence first, then replies; it ends the
        loop turn's cycle (hotkv.observe.loopstats)."""
        started = _perf_counter()
        self._wake_scheduled = False
        if self.tracking.bcast_dirty:      # BCAST invalidations of this turn
            self.tracking.before_sleep()
        self.pubsub.new_turn()            # the flush below empties what it measured
        if self.aof is None:
            self.aof_manager.before_sleep()   # the AOF is written before any reply leaves
        else:
            aof_start = _perf_counter()
            self.aof_manager.before_sleep()
            loopstats.add_aof(self, _perf_counter() - aof_start)
        pending = self.pending_flush
        if pending:
            self.pending_flush = []
            for client in pending:
                client.flush_scheduled = False
                client.flush()
        if self.gated and self.clients_limit:   # after the flushes: output limits go first
            self.client_evictor.before_sleep(pending)
        if self.lazyfree_queue:   # freed after the replies (hotkv.core.lazyfree)
            lazyfree.drain(self)
        if self.sleep_hooks:   # hotkv.testing.waiting: conditions re-checked once per turn
            for hook in tuple(self.sleep_hooks):
                hook()
        loopstats.end_cycle(self, started)

    def resume_client(self, client):
        """An unblocked client may run the commands it sent meanwhile.  A
        worker that sent nothing while it waited (the usual one) has nothing
        to resume: no callback is scheduled for every job it takes."""
        if self.loop is not None and (client.pending or client.pending_error is not None) \
                and hasattr(client, "resume"):
            self.loop.call_soon(client.resume)

    def clock_moved(self):
        """The clock changed (``Clock``'s test API): act at once as if that time
        had passed -- Valkey's cron and blocked-client timeouts, run now rather
        than at the next tick."""
        clock = self.clock
        self.cmd_time_lo = self.cmd_time_next = 0.0   # the next command recomputes
        now = self.cmd_time_ms = clock.ms()
        access.refresh_clocks(self)     # OBJECT IDLETIME's LRU clock
        # Not on a replica: its primary's DELs expire keys (hotkv.replication.replica).
        if self.active_expire_enabled and self.pause_check is None and not self.loading \
                and self.replica_link is None:
            for db in self.dbs:
                if db.expires:
                    for key in [k for k, when in db.expires.items() if when <= now]:
                        db.expire_now(key)
        pause = self.client_pause
        if pause is not None:
            if pause.end_ms <= now:
                unpause_clients(self)
            else:
                arm_pause(self)   # its timer counted real time to the old end
        # Blocked clients: time out those whose deadline passed, re-arm the timer
        # for the next one (or none while frozen: only a move can reach it).
        if self._block_timer is not None:
            self._block_timer.cancel()
            self._block_timer = None
            self._block_timer_at = 0
        nxt = expire_timeouts(self, now)
        if nxt:
            self.arm_block_timer(nxt)
        if self.ready_keys and self.current_client is None:
            serve_ready_keys(self)   # waiters on keys that expired (XREADGROUP's nokey)
        if self.prop_pending and self.current_client is None:
            self.flush_propagation()   # the expirations' DELs reach the AOF
        self.wake()

    def arm_block_timer(self, deadline_ms: int):
        if self.loop is None or self.clock.frozen_at is not None:
            return    # frozen: only a move of the clock reaches it (Server.clock_moved)
        if self._block_timer is not None and self._block_timer_at <= deadline_ms:
            return
        if self._block_timer is not None:
            self._block_timer.cancel()
        self._block_timer_at = deadline_ms
        delay = max(0.0, deadline_ms / 1000.0 - self.clock.time())
        self._block_timer = self.loop.call_later(delay, self._block_timeout)

    def _block_timeout(self):
        self._block_timer = None
        self._block_timer_at = 0
        now = self.clock.ms()
        self.cmd_time_ms = now
        nxt = expire_timeouts(self, now)
        if nxt:
            self.arm_block_timer(nxt)
        self.wake()

    def cron(self):
        """Periodic work (hz times a second): active expiry, idle clients."""
        cron_start = _perf_counter()
        self.cmd_time_ms = self.clock.ms()
        self.eviction.cron()
        budget = 20 * self.config.values["active-expire-effort"]
        start = time.time()     # the expire-cycle's duration: real time
        # No active expiry while CLIENT PAUSE holds writes (Valkey's PAUSE_ACTION_EXPIRE).
        # Nor on a replica: its primary's DELs expire keys (Valkey's iAmPrimary()).
        for db in self.dbs if self.active_expire_enabled and self.pause_check is None \
                and self.replica_link is None else ():
            if db.expires:
                # Keep going while a quarter of the samples were expired, within bounds.
                for _ in range(16):
                    if db.active_expire(budget) * 4 < budget:
                        break
        if self.replica_link is not None and self.active_expire_enabled:
            replica_keys.cron(self)     # keys a writable replica's clients gave a TTL
        latency.timed(self, "expire-cycle", start)
        if self.config.values["activerehashing"]:
            # Valkey's databasesCron: a resize of a key index left half done
            # (no writes since) moves on, so SCAN stops returning duplicates.
            for db in self.dbs:
                if db.keyindex.old is not None:
                    db.keyindex.rehash(REHASH_BUCKETS)
                if db.volatile.old is not None:
                    db.volatile.rehash(REHASH_BUCKETS)
        latency.cron(self)
        access.refresh_clocks(self)
        if self.prop_pending and self.current_client is None:
            self.flush_propagation()
        stats.track_instantaneous(self)
        limits.cron(self)
        self.tracking.cron()
        self.aof_manager.cron()
        self.snapshots.cron()
        self.repl.cron()
        clientbufs.cron(self, self.clock.time())   # CLIENT LIST's buffer sizes, resized
        loopstats.track(self, time.monotonic())
        loopstats.add_cron(self, _perf_counter() - cron_start)
        self.wake()

    # ------------------------------------------------------------------
    def uptime(self) -> int:
        return int(time.time() - self.start_time)

# Commands whose lazy expiries are not wrapped in MULTI when run directly.
_ARBITRARY_KEYS = frozenset(("scan", "randomkey"))


class _Tee:
    """Propagation to the AOF and then to the replicas (Valkey's order)."""
    __slots__ = ("first", "second")

    def __init__(self, first, second):
        self.first = first
        self.second = second

    def feed(self, entries):
        self.first.feed(entries)
        self.second.feed(entries)


def _is_local(client) -> bool:
    return client.addr.startswith(("127.", "[::1]", "::1", "/")) or client.addr == ""


__all__ = ["Server"]


class _Incoming:
    """What Database.touch_all reads of "the database swapped in" (replace_data's swapdb)."""
    __slots__ = ("data",)

    def __init__(self, data: dict) -> None:
        self.data = data
