"""Valkey's per-client query and reply buffers, as CLIENT LIST shows them.

hotkv reads into the parser's own buffer and queues replies as a list of
chunks, so neither has a size to resize; but clients and Valkey's own tests
read ``qbuf``/``qbuf-free`` and ``rbs``/``rbp`` in CLIENT LIST and expect
them to move as Valkey's buffers do.  This module keeps that model on each
connection (``net.Connection``'s ``qb_alloc``, ``qb_peak``, ``rb_size``,
``rb_peak``, ``rb_reset``) and resizes it in the cron as Valkey's
clientsCron does:

* query buffer (clientsCronResizeQueryBuffer): a client whose reads leave
  nothing behind uses the shared buffer (``qb_alloc`` 0: qbuf=0
  qbuf-free=0); a read that leaves part of a command makes the buffer the
  client's own, of PROTO_IOBUF_LEN's size, or of the bulk's when a bulk of
  32 KB or more is being read (PROTO_MBULK_BIG_ARG).  The cron frees it
  (back to the shared one) after 2 idle seconds with nothing pending, trims
  it to what is pending if something is, and trims a buffer over 32 KB
  that is more than twice the last period's peak down to that peak.
* reply buffer (clientsCronResizeOutputBuffer): ``rb_size`` starts at
  16 KB; the cron halves it down to the peak (at least 1 KB) when the peak
  of the last ``reply_buffer_peak_reset_time`` ms (DEBUG REPLYBUFFER) used
  less than half, and doubles it (up to 16 KB) when a turn's replies filled
  it; the peak is the most reply bytes one loop turn queued (net.flush),
  capped at the size.

Sizes are those valkey-server 8.1.8 shows on Linux (its allocator's usable
sizes: 16 KB asked is 16392 usable, 1 KB 1032).  Invariants: ``qb_alloc``
is 0 or at least the bytes the parser holds; ``rb_size`` stays within
[1032, 16392]; only the cron shrinks either.
"""

from __future__ import annotations

IOBUF = 16384             # PROTO_IOBUF_LEN: a read's size
QB_OWN = IOBUF + 2        # a private query buffer's free space after a partial read
BIG_ARG = 32 * 1024       # PROTO_MBULK_BIG_ARG
RESIZE_THRESHOLD = 32 * 1024   # PROTO_RESIZE_THRESHOLD
REPLY_CHUNK = 16 * 1024   # PROTO_REPLY_CHUNK_BYTES
REPLY_MIN = 1024          # PROTO_REPLY_MIN_BYTES
USABLE_EXTRA = 8          # the allocator's usable size over the size asked
RB_INITIAL = REPLY_CHUNK + USABLE_EXTRA
PEAK_RESET_MS = 5000      # reply_buffer_peak_reset_time's default


def init_client(cl):
    cl.qb_alloc = 0
    cl.qb_peak = 0
    cl.rb_size = RB_INITIAL
    cl.rb_peak = RB_INITIAL
    # Valkey stamps a new client's last peak reset in seconds and compares it
    # with milliseconds: the first cron resets the peak, the next shrinks an
    # idle client's buffer to 1 KB.  Kept: clients and tests see that.
    cl.rb_reset = 0


def on_read(cl, n: int):
    """After a read of n bytes was parsed (the network layer calls it only
    when the parser holds something or the buffer is the client's own)."""
    parser = cl.parser
    held = parser.held
    bulk = parser._bulklen
    alloc = cl.qb_alloc
    if bulk >= BIG_ARG and alloc < bulk + 2:
        alloc = bulk + 2                  # sized for the whole argument at once
    elif alloc == 0:
        alloc = held + QB_OWN             # the shared buffer becomes the client's
    elif alloc - held < IOBUF // 2:
        alloc = held + QB_OWN             # room made for the next read
    cl.qb_alloc = alloc
    if held + n > cl.qb_peak:
        cl.qb_peak = held + n


def query_fields(cl) -> tuple:
    """CLIENT LIST's (qbuf, qbuf-free)."""
    alloc = getattr(cl, "qb_alloc", 0)
    parser = getattr(cl, "parser", None)
    used = parser.pending if parser is not None else 0
    if not alloc:
        return used, 0
    return used, max(alloc - used, 0)


def reply_fields(cl) -> tuple:
    """CLIENT LIST's (rbs, rbp)."""
    size = getattr(cl, "rb_size", RB_INITIAL)
    return size, min(getattr(cl, "rb_peak", size), size)


def _resize_query(cl, now: float):
    alloc = cl.qb_alloc
    parser = cl.parser
    used = parser.held
    bulk = parser._bulklen
    if alloc and alloc - used > 4096:
        if now - cl.last_interaction > 2:
            if not used and cl.kind != "primary":
                alloc = 0                 # the next read uses the shared buffer
            else:
                alloc = used
        elif alloc > RESIZE_THRESHOLD and alloc // 2 > cl.qb_peak:
            alloc = max(used, cl.qb_peak)
            if bulk != -1 and alloc < bulk + 2:
                alloc = bulk + 2
        cl.qb_alloc = alloc
    peak = used if alloc else 0
    if bulk != -1 and bulk + 2 > peak:
        peak = bulk + 2
    cl.qb_peak = peak


def _resize_reply(cl, server, now_ms: int):
    size = cl.rb_size
    peak = min(cl.rb_peak, size)
    new = 0
    if server.reply_buffer_resizing:      # DEBUG REPLYBUFFER RESIZING
        shrink, expand = size // 2, size * 2
        if shrink >= REPLY_MIN and peak < shrink:
            new = max(REPLY_MIN, peak + 1)
        elif expand < REPLY_CHUNK * 2 and peak == size:
            new = min(REPLY_CHUNK, expand)
    reset = server.reply_buffer_peak_reset_time   # DEBUG REPLYBUFFER PEAK-RESET-TIME
    if reset >= 0 and now_ms - cl.rb_reset >= reset:
        cl.rb_peak = 0                    # nothing is queued between turns
        cl.rb_reset = now_ms
    if new:
        cl.rb_size = new + USABLE_EXTRA


def cron(server, now: float):
    """clientsCron's buffer part, every client each tick (a batch when
    there are many: at least 5, a 1/hz share, as Valkey's)."""
    clients = server.clients
    n = len(clients)
    if not n:
        return
    hz = max(1, server.config.values.get("hz", 10))
    batch = max(5, n // hz)
    if batch >= n:
        chosen = list(clients.values())
    else:
        state = server.clientbufs_order
        if not state:
            state = list(clients.values())
        chosen, rest = state[:batch], state[batch:]
        server.clientbufs_order = rest
    now_ms = int(now * 1000)
    for cl in chosen:
        if cl.closed or getattr(cl, "parser", None) is None \
                or not hasattr(cl, "qb_alloc"):
            continue
        _resize_query(cl, now)
        _resize_reply(cl, server, now_ms)
