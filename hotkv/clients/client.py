"""Client state: what the server knows about one connection.

A ``Client`` is independent of the transport: the network layer
(``hotkv.net.connection.Connection``) subclasses it, and the AOF loader uses a bare
``Client`` whose replies go nowhere.  Command handlers see only this class.

Invariants:
* ``out`` holds encoded reply chunks not yet handed to the transport; they
  are flushed once per read batch (or by the server's before-sleep pass for
  replies produced on behalf of other clients: unblocked waiters, pub/sub).
* ``blocked`` is the client's single ``Waiter`` while it waits on keys; a
  blocked client runs none of its later commands until it is unblocked.
* ``multi`` is True between MULTI and EXEC/DISCARD; ``multi_queue`` holds the
  queued (command, argv) pairs and ``multi_error`` records a rejected one.
"""

from __future__ import annotations

from collections import deque

from ..protocol import resp
from ..protocol.resp import encode, encode_error

REPLY_ON, REPLY_OFF, REPLY_SKIP = 0, 1, 2


class Client:
    __slots__ = (
        "server", "id", "db", "resp3", "name", "lib_name", "lib_ver", "user",
        "authenticated", "out", "multi", "multi_queue", "multi_error",
        "watched", "dirty_cas", "in_exec", "blocked", "pending", "pending_error",
        "channels", "patterns", "shard_channels", "reply_mode", "skip_this",
        "closing", "closed", "created", "last_interaction", "last_cmd",
        "addr", "laddr", "fd", "no_evict", "no_touch", "is_fake", "kind",
        "flush_scheduled", "reprocessing", "tracking", "multi_flags",
        "output_soft_since",
        "net_in", "net_out", "ncmds",   # CLIENT LIST tot-net-in / tot-net-out / tot-cmds
        "woff",   # the replication offset after its last write (WAIT, hotkv.replication)
        "asking", "cluster_ro",         # cluster mode: ASKING, READONLY (hotkv.cluster)
    )

    def __init__(self, server, addr: str = "", laddr: str = "", fake: bool = False):
        self.server = server
        self.id = server.next_client_id() if not fake else 0
        self.db = server.dbs[0]
        self.resp3 = False
        self.name = b""
        self.lib_name = b""
        self.lib_ver = b""
        self.user = server.default_user()
        self.authenticated = not server.auth_required()
        self.out: list = []
        self.multi = False
        self.multi_queue: list = []
        self.multi_error = False
        self.multi_flags = 0
        self.watched: dict = {}       # (db index, key) -> Database
        self.dirty_cas = False
        self.in_exec = False
        self.blocked = None
        self.pending: deque = deque()  # commands received while blocked
        self.pending_error = None
        self.channels: set = set()
        self.patterns: set = set()
        self.shard_channels: set = set()
        self.reply_mode = REPLY_ON
        self.skip_this = False
        self.closing = False
        self.closed = False
        now = server.clock.time()   # CLIENT LIST age/idle follow hotkv.core.clock
        self.created = now
        self.last_interaction = now
        self.last_cmd = "NULL"
        self.addr = addr
        self.laddr = laddr
        self.fd = -1
        self.no_evict = False
        self.no_touch = False
        self.is_fake = fake
        self.kind = "normal"
        self.flush_scheduled = False
        self.reprocessing = False
        self.asking = self.cluster_ro = False   # hotkv.cluster
        # a hotkv.clients.tracking.TrackingState while CLIENT TRACKING is on
        self.tracking = False
        self.output_soft_since = 0.0
        self.net_in = self.net_out = self.ncmds = 0
        self.woff = 0

    # ------------------------------------------------------------------
    @property
    def subscribed(self) -> bool:
        return bool(self.channels or self.patterns or self.shard_channels)

    def add_reply(self, value):
        if self.reply_mode == REPLY_ON and not self.skip_this:
            encode(value, self.out, self.resp3)

    def add_error(self, message: str):
        if self.reply_mode == REPLY_ON and not self.skip_this:
            self.out.append(encode_error(message))

    def add_raw(self, data: bytes):
        if self.reply_mode == REPLY_ON and not self.skip_this:
            self.out.append(data)

    def push(self, value: list):
        """An out-of-band message (pub/sub).  Delivered whatever the CLIENT
        REPLY mode, as Redis does; queued and flushed at the end of the loop
        turn."""
        encode(resp.Push(value), self.out, self.resp3)
        self.schedule_flush()

    def schedule_flush(self):
        if not self.flush_scheduled and not self.is_fake:
            self.flush_scheduled = True
            self.server.pending_flush.append(self)
            self.server.wake()

    def flush(self):
        """Hand queued output to the transport (overridden by the network layer)."""
        self.out.clear()

    def output_size(self) -> int:
        return 0

    def hold_sooner(self):
        """Keep less output in the transport, more in our counted buffer
        (a replica's link: hotkv.net.connection)."""

    # What the network layer knows of the connection: hotkv.net.connection
    # answers for a client on a transport; a client without one (a script's,
    # the AOF loader's, an in-process client) has no peer, no TLS, nothing
    # unsent.  Asked here, so that only net touches a transport.
    def on_transport(self) -> bool:
        """The client reads and writes a transport (CLIENT LIST's events)."""
        return False

    def peer(self):
        """The transport's peer address (a (host, port) tuple; a unix socket's
        path), or None."""
        return None

    def local(self):
        """The transport's own address (a (host, port) tuple), or None."""
        return None

    def tls(self) -> bool:
        """The transport is TLS."""
        return False

    def unsent(self) -> int:
        """Bytes handed to the transport and not yet sent."""
        return 0

    def close(self):
        """Close after pending output is flushed (overridden)."""
        self.closing = True
