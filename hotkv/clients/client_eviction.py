"""Client eviction: ``maxmemory-clients``, Valkey's evictClients.

Owns ``client_memory`` (a client's memory as Valkey's getClientMemoryUsage
counts it, and what CLIENT LIST's tot-mem, INFO's mem_clients_* and DEBUG
CLIENT-EVICTION report), ``limit`` (the setting in bytes: a percentage is
of ``maxmemory``, 0 is off, anything under 128 KB counts as 128 KB as in
Valkey), and ``ClientEvictor`` (``server.client_evictor``, made by
``init_server``; ``server.stat_evictedclients`` counts its kills).

A client's memory: its reply buffer (hotkv.clients.clientbufs' size: 16 KB, less
once the cron shrinks an idle client's), the client structure (Valkey's 520
bytes), its query buffer (the parser's pending bytes), its output (queued
replies and the transport's backlog), the running command's arguments (their
bytes plus a pointer each), a transaction's queued arguments (plus Valkey's
per-command overhead), and Valkey's per-entry overheads of watched keys,
pub/sub subscriptions and tracking prefixes (the strings themselves are not
the client's: Valkey counts only the table entries).

When it runs (Valkey's call sites of evictClients and
updateClientMemUsageAndBucket): before each command, on the dispatcher's
gate (``before_command``: the client's memory with the arguments of the
command about to run); after a read (``after_read``: a big argument still
arriving, the replies of the commands it ran -- Valkey measures a client
after each command), while the dispatcher is gated or the read left over
32 KB pending in the parser; at the end of each
loop turn for the clients whose output was flushed (``before_sleep``:
replies, pub/sub messages, tracking redirections written to other
clients); and in the cron, for every client.  Each updates the figures of
the clients it looked at; the total of all figures is compared with the
limit, and only when it is over are all clients measured afresh
(``evict``) and the largest evicted first until the total is back under
it.  Valkey evicts from the largest of its power-of-two buckets; hotkv
sorts by the exact figure, an order Valkey's is a coarser version of.

Exempt, as in Valkey's clientEvictionAllowed: CLIENT NO-EVICT clients,
replicas and the primary's link (only normal and pub/sub clients go), and
a client whose output is over the normal class's hard limit
(client-output-buffer-limit): that limit closes it first, and what it holds
is not set against the others (Valkey frees it as the reply is queued).

Invariants: nothing runs while the limit is 0 (``server.clients_limit``
is a dispatcher gate: one attribute test when off); ``total`` is the sum
of ``mem``'s figures, which may include clients gone since (a full measure
drops them before anyone is evicted); a client is evicted only by
``evict``, which counts it in ``stat_evictedclients`` (INFO's
evicted_clients) and closes it at once, dropping its queued output.
"""

from __future__ import annotations

import logging

from .limits import REPLY_BUF_BYTES

log = logging.getLogger("hotkv")

CLIENT_STRUCT = 520         # zmalloc_size(client): an idle client's tot-mem is 16,938
MIN_LIMIT = 128 * 1024      # Valkey's floor: a tiny setting must not lock everyone out
BIG_ARG = 32 * 1024         # PROTO_MBULK_BIG_ARG: a read leaving more pending is checked
# Valkey's per-entry overheads (64-bit build), as 8.1.8's tot-mem shows them.
WATCHED_KEY = 80            # listNode + watchedKey (+ the dict entry of the key's list)
MULTI_CMD = 24              # multiCmd, per queued command
ARGV_PTR = 8                # robj * per argument
PUBSUB_ENTRY = 16           # a dict entry of the client's channel / pattern tables
PREFIX_NODE = 32            # rax nodes of the tracking prefixes (an underestimate there too)


def _dict_mem(n: int) -> int:
    """Valkey's dictMemUsage of a table of n entries: entries plus the buckets
    (a power of two, at least 4)."""
    if not n:
        return 0
    buckets = 4
    while buckets < n:
        buckets <<= 1
    return n * PUBSUB_ENTRY + buckets * 8


def client_memory(cl, argv=None) -> int:
    """The client's memory (CLIENT LIST's tot-mem); argv: the arguments of
    its command that runs now (None: the server's current one, if its)."""
    # The reply buffer as hotkv.clients.clientbufs sizes it (16 KB until the cron
    # shrinks an idle client's), the client structure itself.
    mem = getattr(cl, "rb_size", REPLY_BUF_BYTES) + CLIENT_STRUCT
    parser = getattr(cl, "parser", None)
    if parser is not None:
        # What the query buffer holds (not clientbufs' modelled allocation,
        # whose steps mid-read made clients of one size differ by 16 KB).
        mem += parser.pending
    try:
        mem += cl.output_size()
    except Exception:   # a transport already gone
        pass
    if argv is None and cl.server.current_client is cl:
        argv = cl.server.current_argv
    if argv:
        mem += sum(map(len, argv)) + ARGV_PTR * len(argv)
    if cl.multi:
        queue = cl.multi_queue
        mem += sum(len(a) for _, args in queue for a in args) + MULTI_CMD * len(queue)
    if cl.watched:
        mem += WATCHED_KEY * len(cl.watched)
    if cl.channels or cl.patterns or cl.shard_channels:
        mem += _dict_mem(len(cl.channels)) + _dict_mem(len(cl.patterns)) + \
            _dict_mem(len(cl.shard_channels))
    tracking = cl.tracking
    if tracking and tracking.prefixes:
        mem += PREFIX_NODE * len(tracking.prefixes)
    return mem


def argv_memory(cl) -> int:
    """CLIENT LIST's argv-mem: the bytes of the running command's arguments."""
    server = cl.server
    if server.current_client is cl and server.current_argv:
        return sum(map(len, server.current_argv))
    return 0


def limit(server) -> int:
    """maxmemory-clients in bytes (Valkey's getClientEvictionLimit), 0: off."""
    values = server.config.values
    setting = values.get("maxmemory-clients") or 0
    if setting < 0:
        maxmemory = values.get("maxmemory") or 0
        if not maxmemory:
            return 0
        n = int(maxmemory * -setting / 100)
    else:
        n = setting
    if not n:
        return 0
    return max(n, MIN_LIMIT)


def evictable(cl) -> bool:
    """Valkey's clientEvictionAllowed: normal and pub/sub clients not
    marked CLIENT NO-EVICT."""
    return not (cl.no_evict or cl.is_fake or cl.closed) and cl.kind == "normal"


def _over_output_limit(cl) -> bool:
    hard = cl.server.obuf_hard_normal
    if not hard or cl.subscribed:
        return False
    try:
        return cl.output_size() - REPLY_BUF_BYTES >= hard
    except Exception:   # a transport already gone
        return False


class ClientEvictor:
    __slots__ = ("server", "mem", "total", "remeasure")

    def __init__(self, server):
        self.server = server
        self.mem: dict = {}       # client id -> its last figure (0: exempt)
        self.total = 0
        self.remeasure = False    # the limit changed: measure everyone at the turn's end

    def _update(self, cl, argv=None) -> bool:
        """Measure cl; True when the total is over the limit."""
        m = client_memory(cl, argv) if evictable(cl) and not _over_output_limit(cl) else 0
        mem = self.mem
        self.total += m - mem.get(cl.id, 0)
        mem[cl.id] = m
        return self.total > self.server.clients_limit

    # -- the call sites ---------------------------------------------------------
    def before_command(self, cl, argv) -> bool:
        """processCommand's evictClients: True when cl itself was evicted
        (its command is not run)."""
        if self._update(cl, argv):
            self.evict(cl, argv)
            return cl.closed
        return False

    def after_read(self, cl) -> bool:
        """After a read and its commands: True when cl was evicted."""
        if self._update(cl):
            self.evict()
            return cl.closed
        return False

    def before_sleep(self, flushed):
        """The turn's end: the clients whose output was just flushed."""
        over = False
        for cl in flushed:
            over = self._update(cl)
        if over or self.remeasure or self.total > self.server.clients_limit:
            self.remeasure = False
            self.evict()

    def cron(self):
        self.evict()

    def limit_changed(self):
        server = self.server
        server.clients_limit = n = limit(server)
        if n:
            self.remeasure = True
            server.wake()
        else:
            self.mem.clear()
            self.total = 0

    def client_gone(self, cl):
        m = self.mem.pop(cl.id, None)
        if m:
            self.total -= m

    # -- evictClients -------------------------------------------------------------
    def evict(self, current=None, argv=None):
        """Measure every client; while the total is over the limit, evict
        the largest evictable one."""
        server = self.server
        lim = server.clients_limit
        if not lim:
            return
        mem = {}
        total = 0
        for cl in server.clients.values():
            m = 0
            if evictable(cl) and not _over_output_limit(cl):
                m = client_memory(cl, argv if cl is current else None)
            mem[cl.id] = m
            total += m
        self.mem, self.total = mem, total
        if total <= lim:
            return
        clients = server.clients
        for cid in sorted(mem, key=mem.__getitem__, reverse=True):
            m = mem[cid]
            if not m or total <= lim:
                break
            cl = clients.get(cid)
            if cl is None:
                continue
            self._evict_one(cl, m)
            total -= m
            mem[cid] = 0
        self.total = total

    def _evict_one(self, cl, m: int):
        server = self.server
        server.stat_evictedclients += 1
        if log.isEnabledFor(logging.INFO):
            # Who it was, from the client's own fields (CLIENT LIST's line is
            # hotkv.clients.clientinfo's, which imports this module: no cycle).
            name = getattr(cl, "name", b"") or b""
            log.info("Evicting client: id=%d addr=%s laddr=%s name=%s (tot-mem %d)",
                     getattr(cl, "id", 0), getattr(cl, "addr", ""), getattr(cl, "laddr", ""),
                     name.decode("utf-8", "replace"), m)
        kill = getattr(cl, "kill", None)
        if kill is not None:
            kill()
        else:
            cl.closed = True
        # A pipeline of its commands stops after the one running (dispatch
        # breaks on closing).
        cl.closing = True


def init_server(server) -> "ClientEvictor":
    """The server's ``client_evictor``, its limit kept current as
    maxmemory-clients or maxmemory (a percentage's base) change."""
    ev = ClientEvictor(server)
    listeners = server.config.listeners
    before = listeners.get("maxmemory")

    def maxmemory_changed(value):
        if before is not None:
            before(value)
        ev.limit_changed()

    listeners["maxmemory"] = maxmemory_changed
    listeners["maxmemory-clients"] = lambda _value: ev.limit_changed()
    server.clients_limit = limit(server)
    return ev
