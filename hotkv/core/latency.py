"""The latency monitor and the per-command latency histograms.

Owns, for one server, the latency events (Valkey's latency monitor: a named
series of at most 160 samples of one second each, ``server.latency_events``,
fed by ``add_sample`` when a duration reaches latency-monitor-threshold ms),
the dispatcher's slow gate (``server.slow_gate``, the smaller of the
slowlog and latency thresholds in seconds, and ``server.on_slow``, which
feeds the slow log and the "command" / "fast-command" events), and the
per-command latency histograms behind LATENCY HISTOGRAM and INFO
latencystats (``latency-tracking``, ``latency-tracking-info-percentiles``).
The LATENCY command (``hotkv.commands.latency``) only reads and resets this.

Invariants:
* the dispatcher pays one comparison per command for both the slow log and
  the latency monitor (``duration >= server.slow_gate``) and one list append
  for the histogram (``st.lat_pending.append(duration)``, ``st`` the
  command's entry in ``server.cmdstats``, hotkv.core.stats); the pending
  durations are folded into ``st.lat_hist`` (microseconds -> count, the
  exact values, so the HDR report Valkey gives is computed from them on
  demand) by the cron, by every reader, and by a nested call that finds
  more than ``FOLD_AT`` pending (a script running a million commands);
* a fold counts at most FOLD_EXACT durations of a command one by one (a
  Python loop costs about what the command did): beyond, an even sample
  stands for the rest, so counts are exact for up to 2,560 calls a second
  of one command and the calls total is always exact;
* with latency-tracking off, ``st.lat_pending`` is the server's
  ``cmdstats.discard`` list, which folding empties without recording anything;
* the histograms are the server's (``server.cmdstats``), as its INFO
  commandstats counters are: two servers in one process keep their own, and
  each its own latency-tracking setting.
"""

from __future__ import annotations

import math
import time

from .registry import all_commands
from .stats import Discard

SERIES_LEN = 160          # samples kept per event (Valkey's LATENCY_TS_LEN)
FOLD_EXACT = 256          # pending durations of a command counted one by one per fold
FOLD_AT = 4096           # pending durations a nested call folds at

# HDR histogram geometry as Valkey builds it (1 ns .. 1 s, 2 significant
# digits): 256 sub-buckets, so a value v >= 256 ns is counted in a range
# of 2**(floor(log2 v) - 7) ns starting at v rounded down to that size.
_HDR_MAX_NS = 1_000_000_000


def _hdr_range(v: int) -> tuple:
    """(lowest, highest) equivalent value of v (ns) in Valkey's histogram."""
    if v < 256:
        return v, v
    size = 1 << (v.bit_length() - 8)
    lo = v - v % size
    return lo, lo + size - 1


def _ns(us: int) -> int:
    """A duration in microseconds as Valkey records it: ns clamped to 1 ns .. 1 s."""
    return min(max(us * 1000, 1), _HDR_MAX_NS)


class _Series:
    __slots__ = ("samples", "max")

    def __init__(self):
        self.samples: list = []     # [time (s), latency (ms)], oldest first
        self.max = 0


# -- the latency monitor ------------------------------------------------------

def add_sample(server, event: str, ms: int):
    """Record ``ms`` for ``event`` if it reaches latency-monitor-threshold."""
    threshold = server.latency_threshold_ms
    if threshold and ms >= threshold:
        record(server, event, ms)


def record(server, event: str, ms: int):
    """Valkey's latencyAddSample: one sample a second, the highest of that second."""
    ts = server.latency_events.get(event)
    if ts is None:
        ts = server.latency_events[event] = _Series()
    if ms > ts.max:
        ts.max = ms
    now = int(server.clock.time())     # the sample's timestamp: hotkv.core.clock
    samples = ts.samples
    if samples and samples[-1][0] == now:
        if ms > samples[-1][1]:
            samples[-1][1] = ms
        return
    samples.append([now, ms])
    if len(samples) > SERIES_LEN:
        del samples[0]


def reset(server, events=None) -> int:
    """Forget the named events (all of them when None); how many were dropped."""
    if events is None:
        n = len(server.latency_events)
        server.latency_events.clear()
        return n
    n = 0
    for name in events:
        low = name.lower()
        for key in [k for k in server.latency_events if k.lower() == low]:
            del server.latency_events[key]
            n += 1
    return n


def on_slow(client, cmd, argv, duration: float):
    """Called by the dispatcher when duration >= server.slow_gate."""
    server = client.server
    threshold = server.latency_threshold_ms
    if threshold:
        ms = int(duration * 1_000_000) // 1000
        if ms >= threshold:
            record(server, "fast-command" if "fast" in cmd.flags else "command", ms)
    if duration >= server.slowlog_threshold and client.blocked is None:
        outer = server.current_client
        if client.is_fake and outer is not None and outer is not client:
            # A script's command: logged with its caller's address and name.
            client = outer
        server.slowlog_push(client, cmd, argv, duration)


def _regate(server):
    lat = server.latency_threshold_ms
    gate = server.slowlog_threshold
    if lat:
        gate = min(gate, lat / 1000.0)
    server.slow_gate = gate


# -- histograms ---------------------------------------------------------------

def fold(st):
    """Move a command's pending durations (``st``, its entry in
    ``server.cmdstats``) into its histogram.  Up to FOLD_EXACT of
    them are counted one by one; more (a command run thousands of times
    between two cron ticks) are counted by an even sample, each standing
    for its share, so the cost of a tick stays bounded: the call count stays
    exact, the shape of the histogram is then an estimate."""
    pending = st.lat_pending
    if not pending:
        return
    if type(pending) is Discard:
        pending.clear()
        return
    st.lat_pending = []
    hist = st.lat_hist
    if hist is None:
        hist = st.lat_hist = {}
    n = len(pending)
    if n <= FOLD_EXACT:
        for d in pending:
            us = int(d * 1_000_000)
            hist[us] = hist.get(us, 0) + 1
        return
    sample = pending[::n // FOLD_EXACT]
    weight = n / len(sample)
    for d in sample:
        us = int(d * 1_000_000)
        hist[us] = hist.get(us, 0) + weight


def fold_all(cmdstats):
    """Fold every command's pending durations (``server.cmdstats``)."""
    for st in cmdstats.values():
        if st.lat_pending:
            fold(st)
    cmdstats.discard.clear()


def set_tracking(cmdstats, on: bool):
    """latency-tracking on or off for one server's commands."""
    cmdstats.tracking = on
    for st in cmdstats.values():
        if on:
            if st.lat_pending is cmdstats.discard:
                st.lat_pending = []
        else:
            fold(st)
            st.lat_pending = cmdstats.discard


def histogram(server, cmd):
    """The folded histogram of cmd on server (None when it has none)."""
    st = server.cmdstats.get(cmd)
    if st is None:
        return None
    fold(st)
    return st.lat_hist


def cdf(hist: dict) -> tuple:
    """(calls, [usec, cumulative count, ...]) as LATENCY HISTOGRAM reports a
    histogram: Valkey's logarithmic HDR walk from 1024 ns doubling, a bucket
    reported (as its highest equivalent value in us) when its count grew."""
    values = sorted((_ns(us), n) for us, n in hist.items())
    total = round(sum(n for _, n in values))
    out = []
    level = 1024
    pos = prev = 0
    cum = 0.0
    while prev < total and level <= (_HDR_MAX_NS << 1):
        lo, hi = _hdr_range(level)
        while pos < len(values) and values[pos][0] <= hi:
            cum += values[pos][1]
            pos += 1
        count = round(cum) if pos < len(values) else total
        if count > prev:
            out.append(hi // 1000)
            out.append(count)
            prev = count
        level <<= 1
    return total, out


def percentile(hist: dict, p: float) -> float:
    """hdr_value_at_percentile / 1000: the value (us) at percentile p, as the
    highest value equivalent to it (the lowest for p = 0)."""
    values = sorted((_ns(us), n) for us, n in hist.items())
    total = sum(n for _, n in values)
    wanted = max(1, int((min(p, 100.0) / 100.0) * total + 0.5))
    cum = 0
    for v, n in values:
        cum += n
        if cum >= wanted:
            lo, hi = _hdr_range(v)
            return (lo if p == 0.0 else hi) / 1000.0
    return 0.0


def _fmt_pct(p: float) -> str:
    text = "%f" % p
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def info_lines(server) -> list:
    """INFO latencystats: one line per command with a histogram."""
    if not server.config.values.get("latency-tracking", True):
        return []
    pcts = server.latency_percentiles
    out = []
    for cmd in all_commands():
        hist = histogram(server, cmd)
        if not hist:
            continue
        out.append(("latency_percentiles_usec_" + cmd.name,
                    ",".join("p%s=%.3f" % (_fmt_pct(p), percentile(hist, p)) for p in pcts)))
    return out


def parse_percentiles(text: str):
    """latency-tracking-info-percentiles: a list of numbers 0..100, or None if invalid."""
    out = []
    for word in text.split():
        try:
            v = float(word)
        except ValueError:
            return None
        if not 0.0 <= v <= 100.0 or math.isnan(v):
            return None
        out.append(v)
    return out


# -- LATENCY DOCTOR / GRAPH ---------------------------------------------------

def analyze(ts: _Series, now: float | None = None) -> dict:
    samples = [s for s in ts.samples if s[0]]
    n = len(samples)
    if not n:
        return {"samples": 0, "avg": 0, "mad": 0, "min": 0, "max": 0, "period": 0}
    lat = [s[1] for s in samples]
    avg = sum(lat) // n
    period = int(time.time() if now is None else now) - min(s[0] for s in samples) or 1
    mad = sum(abs(avg - x) for x in lat) // n
    return {"samples": n, "avg": avg, "mad": mad, "min": min(lat), "max": max(lat),
            "period": period}


def _elapsed_label(secs: int) -> str:
    if secs < 60:
        return "%ds" % secs
    if secs < 3600:
        return "%dm" % (secs // 60)
    if secs < 86400:
        return "%dh" % (secs // 3600)
    return "%dd" % (secs // 86400)


_CHARS_FILL = "_o#"


def _render_range(values, labels, rows, lo, hi_val) -> list:
    """Valkey's sparkline (filled): ``rows`` rows of bars, then the labels
    written downwards after one blank line."""
    relmax = hi_val - lo or 1
    steps = len(_CHARS_FILL) * rows
    lines = []
    row = 0
    n = len(values)
    while True:
        more = False
        chars = [" "] * n
        for j in range(n):
            step = int(int((values[j] - lo) * steps) / relmax)
            step = min(max(step, 0), steps - 1)
            if row < rows:
                idx = step - (rows - row - 1) * len(_CHARS_FILL)
                more = True
                if 0 <= idx < len(_CHARS_FILL):
                    chars[j] = _CHARS_FILL[idx]
                elif idx >= len(_CHARS_FILL):
                    chars[j] = "|"
            else:
                if row - rows < 1:      # the blank line above the labels
                    more = True
                    chars = [" "] * n
                    break
                label = labels[j]
                k = row - rows - 1
                if len(label) > k:
                    more = True
                    chars[j] = label[k]
        if not more:
            break
        row += 1
        lines.append("".join(chars))
    return lines


def graph(event: str, ts: _Series, now: float | None = None) -> str:
    now = int(time.time() if now is None else now)   # the server's clock (hotkv.core.clock)
    samples = [s for s in ts.samples if s[0]]
    lat = [s[1] for s in samples]
    low, high = (min(lat), max(lat)) if lat else (0, 0)
    out = "%s - high %d ms, low %d ms (all time high %d ms)\n" % (event, high, low, ts.max)
    out += "-" * 80 + "\n"
    labels = [_elapsed_label(now - s[0]) for s in samples]
    chunks = []
    for j in range(0, len(lat), 80):
        rows = _render_range(lat[j:j + 80], labels[j:j + 80], 4, low, high)
        chunks.append("\n".join(rows) + "\n")
    return out + "\n".join(chunks)


# -- wiring -------------------------------------------------------------------

def init_server(server):
    """Create the server's latency state and keep it in step with CONFIG SET."""
    server.latency_events = {}
    server.on_slow = on_slow
    # For the keyspace (hotkv.core.db: "expire-del"), which imports nothing above it.
    server.latency_sample = lambda event, ms: add_sample(server, event, ms)
    listeners = server.config.listeners
    values = server.config.values

    def set_threshold(ms):
        server.latency_threshold_ms = int(ms)
        _regate(server)
    server.latency_threshold_ms = int(values.get("latency-monitor-threshold", 0))

    prev = listeners.get("slowlog-log-slower-than")

    def set_slowlog(us):
        if prev is not None:
            prev(us)
        _regate(server)
    listeners["slowlog-log-slower-than"] = set_slowlog
    listeners["latency-monitor-threshold"] = set_threshold
    _regate(server)

    listeners["latency-tracking"] = lambda v: set_tracking(server.cmdstats, bool(v))
    set_tracking(server.cmdstats, bool(values.get("latency-tracking", True)))

    def set_pcts(v):
        parsed = parse_percentiles(v if isinstance(v, str) else " ".join(map(str, v)))
        server.latency_percentiles = parsed if parsed is not None else [50.0, 99.0, 99.9]
    set_pcts(values.get("latency-tracking-info-percentiles", "50 99 99.9"))
    listeners["latency-tracking-info-percentiles"] = set_pcts


def cron(server):
    """Fold pending durations (the cron keeps the lists short)."""
    fold_all(server.cmdstats)


def timed(server, event: str, start: float):
    """Record the time since ``start`` (time.time()) as event, if it reaches the threshold."""
    if server.latency_threshold_ms:
        add_sample(server, event, int((time.time() - start) * 1000))


__all__ = ["add_sample", "record", "reset", "on_slow", "fold", "fold_all", "histogram", "cdf",
           "percentile", "info_lines", "graph", "analyze", "init_server", "cron", "timed",
           "set_tracking", "SERIES_LEN"]
