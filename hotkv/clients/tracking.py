"""Client-side caching: the tracking table, BCAST prefixes and invalidations.

Owns ``Tracking`` (one per server, ``server.tracking``, made by
``init_server``), the per-client ``TrackingState`` (``client.tracking`` is
False or one of these, so the dispatcher's test stays one attribute), the
``tracking-table-max-keys`` setting, and every invalidation message: RESP3
pushes ``>2 invalidate [keys]``, RESP2 pub/sub messages on
``__redis__:invalidate`` to a REDIRECT client that is subscribed, and the
``tracking-redir-broken`` push when the redirect client is gone.

How the server feeds it (Valkey's tracking.c is the model):
* after a read-only command (``hotkv.core.dispatch.call``): ``after_call``
  remembers the command's keys for the client on whose behalf it ran (the
  caller of a script or of EXEC) -- default mode only, with OPTIN/OPTOUT
  and CLIENT CACHING as Valkey decides -- and ends CLIENT CACHING's effect
  after a top-level command outside MULTI that is not a CLIENT subcommand;
* every changed key (``Server.written``, ``Server.key_expired``, the
  inlined hot writes): ``invalidate``;
* FLUSHALL/FLUSHDB: ``flushed`` (a null "all keys" invalidation to every
  tracking client, the table emptied);
* once per loop turn (``Server.before_sleep``): ``before_sleep`` sends the
  BCAST invalidations collected since the last turn, one array per prefix;
* when the table holds more than tracking-table-max-keys keys while some
  client tracks, the gate ``server.tracking_over`` makes the dispatcher call
  ``limit_used_slots`` before the next command (and the cron calls it too),
  as Valkey's processCommand and serverCron do; a NOLOOP client whose
  command is about to run is not told of the keys dropped then (it is
  Valkey's current client).

Invariants:
* ``table`` maps a key to the ids of the clients that may cache it, across
  databases (one key space, as Valkey's); an entry is removed whole when
  the key is invalidated.  Ids of clients gone or no longer tracking are
  dropped lazily then, as Valkey does -- so a client that turns tracking
  off and on again still hears of keys it read before;
  ``total_items`` is the sum of the id sets' sizes.
* ``server.tracking_on`` turns True with the first CLIENT TRACKING ON and
  stays so (Valkey's TrackingTable, never freed): from then on every write
  is looked up in the table, and the inlined hot writes (lists, XADD) take
  ``Server.written``.
* ``prefixes[p].clients`` holds exactly the BCAST clients whose state lists
  p; a prefix with no client left is deleted.
* An invalidation for the client whose command is running waits in
  ``pending`` and is sent after the command's reply (after the whole EXEC
  or script), never inside it; ``server.pending_push`` then holds at least
  an empty chunk so the dispatcher's end-of-command flush runs.
* A tracking table key is dropped by ``limit_used_slots`` oldest first
  (Valkey walks its radix tree at random: which key goes is not part of
  the protocol, the invalidation that tells the client is).

Valkey behaviours kept on purpose: the RESP2/RESP3 null of a flush
invalidation follows the tracking client's protocol even when it is sent to
a redirect client; ``CLIENT TRACKING ON BCAST PREFIX a PREFIX b PREFIX bc``
answers the overlap error *and* +OK (tracking.c's checker returns the index
of the overlapping prefix, which is true unless it is the first one);
SWAPDB invalidates nothing.  hotkv has no maxmemory eviction, so there are
no eviction invalidations to send; an eviction added later calls
``invalidate(key, None)`` for each key it removes, before the command that
triggered it runs (Valkey sends those before that command's reply).
"""

from __future__ import annotations

from ..core import config as _config

_CHANNEL_MSG = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
_PUSH_HDR = b">2\r\n$10\r\ninvalidate\r\n"
_NULL2 = b"$-1\r\n"
_NULL3 = b"_\r\n"

# Read-only scripts are not tracked themselves: the commands they run are.
_NOT_TRACKED = frozenset(("eval_ro", "evalsha_ro", "fcall_ro"))

# The setting is in Valkey's table (hotkv.core.config_table); this module acts on it.
_config.PARAMS["tracking-table-max-keys"].inert = False


class TrackingState:
    """One client's tracking mode (``client.tracking`` while it is on)."""

    __slots__ = ("redirect", "bcast", "optin", "optout", "noloop", "caching",
                 "broken", "prefixes")

    def __init__(self):
        self.redirect = 0
        self.bcast = self.optin = self.optout = self.noloop = False
        self.caching = False
        self.broken = False
        self.prefixes: dict = {}    # BCAST prefix -> None


class _Prefix:
    __slots__ = ("keys", "clients")

    def __init__(self):
        self.keys: dict = {}      # key modified this turn -> client that last modified it
        self.clients: dict = {}   # BCAST client -> None


def _bulk_array(keys) -> bytes:
    parts = [b"*%d\r\n" % len(keys)]
    for k in keys:
        parts.append(b"$%d\r\n%b\r\n" % (len(k), k))
    return b"".join(parts)


class Tracking:
    def __init__(self, server):
        self.server = server
        self.table: dict = {}      # key -> {client id: None}
        self.total_items = 0
        self.prefixes: dict = {}   # prefix -> _Prefix
        self.clients = 0           # clients with tracking on (INFO tracking_clients)
        self.pending: list = []    # keys (None: a flush) for the running client
        self.bcast_dirty = False
        self.timeout_counter = 0
        self.flushing = None       # the client flush_pending sends for
        self.about_to_run = None   # the client whose command limit_used_slots runs before
        self.pending_redirect = 0  # the redirect of a client whose EXEC turned tracking off
        self.max_keys = server.config.values["tracking-table-max-keys"]
        server.config.listeners["tracking-table-max-keys"] = self._set_max_keys

    def _set_max_keys(self, value):
        self.max_keys = value
        self._check_limit()

    # -- enabling / disabling (CLIENT TRACKING, RESET, disconnect) ---------
    def enable(self, c, redirect: int, bcast: bool, optin: bool, optout: bool,
               noloop: bool, prefixes: list):
        st = c.tracking
        if not st:
            st = c.tracking = TrackingState()
            self.clients += 1
        st.broken = False
        st.redirect = redirect
        # The table exists from the first client on (Valkey's TrackingTable):
        # from now on every write is looked up in it.
        self.server.tracking_on = True
        st.bcast = bcast
        if bcast:
            for p in prefixes or (b"",):
                self._add_prefix(c, st, p)
        st.optin, st.optout, st.noloop = optin, optout, noloop
        self._check_limit()

    def _add_prefix(self, c, st, p: bytes):
        bs = self.prefixes.get(p)
        if bs is None:
            bs = self.prefixes[p] = _Prefix()
        if c not in bs.clients:
            bs.clients[c] = None
            st.prefixes[p] = None

    def disable(self, c):
        st = c.tracking
        if not st:
            return
        for p in st.prefixes:
            bs = self.prefixes[p]
            bs.clients.pop(c, None)
            if not bs.clients:
                del self.prefixes[p]
        c.tracking = False
        self.clients -= 1
        if self.pending and c is self.server.current_client:
            # Valkey keeps the redirect id after TRACKING OFF: what this
            # command (an EXEC) deferred still goes where it went.
            self.pending_redirect = st.redirect
        if not self.clients and self.server.tracking_over:
            self._check_limit()

    def prefix_collision(self, c, prefixes: list):
        """Valkey's checkPrefixCollisionsOrReply: (error text, stop) or None.
        ``stop`` is False where Valkey goes on to enable tracking after
        replying the error (an overlap inside the list past its first
        prefix)."""
        st = c.tracking
        existing = sorted(st.prefixes) if st else ()   # Valkey's radix tree order
        for i, p in enumerate(prefixes):
            for old in existing:
                if old.startswith(p) or p.startswith(old):
                    return ("ERR Prefix '%s' overlaps with an existing prefix '%s'. "
                            "Prefixes for a single client must not overlap."
                            % (_cstr(p), _cstr(old)), True)
            for q in prefixes[i + 1:]:
                if q.startswith(p) or p.startswith(q):
                    return ("ERR Prefix '%s' overlaps with another provided prefix '%s'. "
                            "Prefixes for a single client must not overlap."
                            % (_cstr(p), _cstr(q)), i == 0)
        return None

    # -- reads -------------------------------------------------------------
    def after_call(self, tracker, cmd, argv, top: bool):
        """``tracker`` (tracking on) had ``cmd`` run on its behalf."""
        st = tracker.tracking
        if cmd.readonly and not st.bcast and cmd.name not in _NOT_TRACKED:
            if not ((st.optin and not st.caching) or (st.optout and st.caching)):
                self._remember(tracker.id, cmd, argv)
        # Valkey's resetClient: CACHING lasts for the next command (or the
        # next transaction); CLIENT subcommands in between keep it.
        if top and st.caching and not tracker.multi and (
                cmd.parent is None or cmd.parent.name != "client"):
            st.caching = False

    def _remember(self, cid: int, cmd, argv):
        if "pubsub" in cmd.flags:
            return
        try:
            positions = cmd.key_indexes(argv)
        except Exception:   # arguments the command refused: no keys, as Valkey's getkeys
            return
        table = self.table
        for i in positions:
            key = argv[i]
            ids = table.get(key)
            if ids is None:
                ids = table[key] = {}
            if cid not in ids:
                ids[cid] = None
                self.total_items += 1
        self._check_limit()

    def _check_limit(self):
        # Valkey looks at the limit only while some client tracks.
        over = bool(self.clients and self.max_keys) and len(self.table) > self.max_keys
        if over != self.server.tracking_over:
            self.server.tracking_over = over

    # -- writes ------------------------------------------------------------
    def invalidate(self, key: bytes, modifier=..., bcast: bool = True):
        """key changed (Valkey's trackingInvalidateKey).  ``modifier`` is the
        client whose command changed it (None for expiry); by default the
        running one (a script's own client while a script runs, as Valkey's
        NOLOOP in BCAST mode compares with the executing client)."""
        server = self.server
        current = server.current_client
        if bcast and self.prefixes:
            if modifier is ...:
                modifier = _executing(server, current)
            self._remember_bcast(key, modifier)
        ids = self.table.pop(key, None)
        if ids is None:
            return
        self.total_items -= len(ids)
        clients = server.clients
        for cid in ids:
            target = clients.get(cid)
            if target is None:
                continue
            st = target.tracking
            if not st or st.bcast:
                continue
            if target is current:
                if st.noloop:
                    continue
                self._defer(key)
            elif st.noloop and target is self.about_to_run:
                continue
            else:
                self.send(target, b"*1\r\n$%d\r\n%b\r\n" % (len(key), key))
        if server.tracking_over:
            self._check_limit()

    def _remember_bcast(self, key: bytes, modifier):
        for p, bs in self.prefixes.items():
            if key.startswith(p):
                bs.keys[key] = modifier
                if not self.bcast_dirty:
                    self.bcast_dirty = True
                    self.server.wake()

    def _defer(self, key):
        self.pending.append(key)
        # Makes the dispatcher's end-of-command flush run (it calls flush_pending).
        self.server.pending_push.append(b"")

    def flushed(self):
        """FLUSHALL/FLUSHDB: every tracking client is told all keys are gone."""
        server = self.server
        if self.clients:
            current = server.current_client
            for c in list(server.clients.values()):
                if c.tracking:
                    if c is current:
                        self._defer(None)
                    else:
                        self.send(c, _NULL3 if c.resp3 else _NULL2)
        self.table = {}
        self.total_items = 0
        if server.tracking_over:
            self._check_limit()

    def flush_pending(self, client):
        """After the outermost command of ``client``: what was deferred."""
        pending = self.pending
        self.pending = []
        redirect = self.pending_redirect
        self.pending_redirect = 0
        # Frames for client itself join server.pending_push, after the
        # pub/sub messages the command raised (Valkey's afterCommand order).
        self.flushing = client
        try:
            for key in pending:
                if client.closed:
                    break
                if key is None:
                    self.send(client, _NULL3 if client.resp3 else _NULL2, redirect)
                else:
                    self.send(client, b"*1\r\n$%d\r\n%b\r\n" % (len(key), key), redirect)
        finally:
            self.flushing = None

    # -- sending -----------------------------------------------------------
    def send(self, c, body: bytes, redirect_if_off: int = 0):
        """One invalidation for tracking client c (Valkey's sendTrackingMessage);
        ``body`` is the RESP of its keys (an array, or a null for a flush)."""
        st = c.tracking
        redirect = st.redirect if st else redirect_if_off
        redirected = False
        if redirect:
            target = self.server.clients.get(redirect)
            if target is None or target.closed:
                if st:
                    st.broken = True
                if c.resp3:
                    self._deliver(c, b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % redirect)
                return
            c = target
            redirected = True
        if c.resp3:
            frame = _PUSH_HDR + body
        elif redirected and (c.channels or c.patterns or c.shard_channels):
            frame = _CHANNEL_MSG + body
        else:
            return   # RESP2 without a redirect: nothing can carry it
        self._deliver(c, frame)

    def _deliver(self, c, frame: bytes):
        if c.closed:
            return
        server = self.server
        if c is server.current_client or c is self.flushing:
            server.pending_push.append(frame)   # after the running command's reply
        else:
            c.out.append(frame)
            c.schedule_flush()

    # -- once per loop turn, and the table's size ----------------------------
    def before_sleep(self):
        """Send the BCAST invalidations collected this turn (Valkey's
        trackingBroadcastInvalidationMessages): per prefix, in prefix order,
        the keys in order; a NOLOOP client without its own changes."""
        self.bcast_dirty = False
        if not self.clients:
            for bs in self.prefixes.values():
                bs.keys = {}
            return
        for p in sorted(self.prefixes):
            bs = self.prefixes[p]
            if not bs.keys:
                continue
            keys = bs.keys
            bs.keys = {}
            order = sorted(keys)
            common = None
            for c in list(bs.clients):
                st = c.tracking
                if st and st.noloop:
                    mine = [k for k in order if keys[k] is not c]
                    if mine:
                        self.send(c, _bulk_array(mine))
                else:
                    if common is None:
                        common = _bulk_array(order)
                    self.send(c, common)

    def limit_used_slots(self, client=None):
        """Drop keys until the table is within tracking-table-max-keys, each
        with an invalidation to its clients (Valkey's trackingLimitUsedSlots:
        100 keys per try, 100 more for every try that did not suffice).
        ``client``: the one whose command is about to run (the dispatcher's
        call; Valkey's current_client then), which NOLOOP keeps unwarned."""
        self.about_to_run = client
        try:
            self._limit_used_slots()
        finally:
            self.about_to_run = None

    def _limit_used_slots(self):
        max_keys = self.max_keys
        table = self.table
        if not self.clients or not max_keys or len(table) <= max_keys:
            self.timeout_counter = 0
            self._check_limit()
            return
        effort = 100 * (self.timeout_counter + 1)
        while effort > 0 and table:
            effort -= 1
            self.invalidate(next(iter(table)), None, bcast=False)
            if len(table) <= max_keys:
                self.timeout_counter = 0
                self._check_limit()
                return
        self.timeout_counter += 1
        self._check_limit()

    def cron(self):
        if self.clients and self.max_keys and len(self.table) > self.max_keys:
            self.limit_used_slots()

    # -- introspection -------------------------------------------------------
    def info_fields(self) -> dict:
        return {"tracking_total_keys": len(self.table),
                "tracking_total_items": self.total_items,
                "tracking_total_prefixes": len(self.prefixes)}


def _executing(server, current):
    """The client executing the running command: a script's or a function's
    own client while one runs (hotkv.lua), else the one that sent it."""
    eng = server.scripting
    if eng is not None and eng.run is not None:
        return eng.run.fake
    reg = server.functions
    if reg is not None and reg.engine.run is not None:
        return reg.engine.run.fake
    return current


def _cstr(b: bytes) -> str:
    """As C's %s on an sds: up to the first NUL."""
    nul = b.find(b"\0")
    if nul >= 0:
        b = b[:nul]
    return b.decode("utf-8", "surrogateescape")


def init_server(server) -> Tracking:
    server.tracking_on = False
    server.tracking_over = False
    return Tracking(server)


def client_gone(c):
    """c disconnected or RESET: tracking off (its table entries go lazily)."""
    if c.tracking:
        c.server.tracking.disable(c)


__all__ = ["Tracking", "TrackingState", "init_server", "client_gone"]
