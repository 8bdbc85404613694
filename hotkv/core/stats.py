"""A server's statistics: its command counters and error stats, the samples
behind INFO's instantaneous metrics, and the process's memory readings.

``CommandStats`` (``server.cmdstats``, made in ``Server.__init__``) owns one
server's per-command counters (INFO commandstats' calls, usec,
rejected_calls, failed_calls; the latency histograms' pending durations and
folded histograms, hotkv.core.latency), its INFO errorstats and
total_error_replies.  ``count_call`` is the one place a command's calls, usec
and failed_calls grow (Valkey's call()): a run counted by dispatch.call, a
blocked command ending in blocking.unblock, a held reply in
hotkv.testing.faults, SHUTDOWN refused under a busy script (hotkv.lua.engine);
a blocked command's earlier runs' time (dispatch); a failure alone (a script
whose reply is an error, PFDEBUG SIMD's).  A refusal is
``count_rejected`` (dispatch.reject, a cluster redirect, a script's refused
call), an error reply ``count_error``.
CONFIG RESETSTAT empties it (``reset``); the AOF loader hides what loading
counted (``save`` / ``restore``).  Nothing of it lives on the process-wide
``hotkv.core.registry.Command`` objects: two servers in one process count apart
(tests/test_two_servers.py).

Also owns the samples behind ``instantaneous_ops_per_sec``,
``instantaneous_input_kbps`` and ``instantaneous_output_kbps`` (Valkey's
trackInstantaneousMetric): the server's cron calls ``track_instantaneous``,
INFO reads ``instantaneous``, CONFIG RESETSTAT calls
``reset_instantaneous``; and the process's memory readings that INFO,
MEMORY, maxmemory eviction (hotkv.core.eviction) and the RDB's aux fields use.
Below ``commands/`` because the cron calls it.

Memory: ``used_memory`` is what the allocators hold *in use* (Valkey's
zmalloc_used_memory, jemalloc's allocated bytes), not the RSS, which
freeing Python objects seldom lowers.  CPython has two allocators:

* glibc malloc (objects over 512 bytes: big strings, dict/set tables, deque
  blocks, output buffers): its in-use bytes are exact, ``mallinfo2()``'s
  ``uordblks + hblkhd`` through ctypes;
* pymalloc (objects up to 512 bytes, in 1 MiB arenas mmap'd directly, so
  invisible to malloc): CPython 3.11 counts only the *number* of blocks in
  use, ``sys.getallocatedblocks()``.  ``calibrate`` reads their exact
  bytes from ``sys._debugmallocstats``'s "bytes in allocated blocks"
  (about 5 ms per 100 MB: at most once a second for the cron while
  maxmemory is set, ten times a second for INFO memory and while an
  eviction runs); between two readings, the blocks allocated or freed
  since count at the size the blocks of the last interval had on average
  (64 bytes until an interval says).

Both counts drop as soon as an object is freed, so the figure falls when keys
are deleted or evicted, and RSS / used_memory (``mem_fragmentation_ratio``)
shows what the process keeps but no longer uses.  Measured on a
``hotkv serve`` process (tests/test_eviction.py's docstring has the
command): after loading 100 MB of 100-byte strings (806k keys), lists
(1,747 x 1,000 items) or hashes (2,621 x 500 fields) the growth of
used_memory over the growth of RSS was 0.99, 1.00 and 1.00; deleting half
the keys, used_memory fell to 67%, 43% and 24% of its growth while RSS did
not move (a Python dict keeps its table after deletions: strings fall least).
A ``maxmemory 100mb`` allkeys-lru cache written 300 MB of 1 KB values holds
used_memory at 104.2 MB (100mb is 104.9 MB) with an RSS growth of 113.9 MB
(1.09x); with 100-byte values 1.35x (270k keys: ~390 bytes a key).
The figure is process-wide (as the RSS was): servers embedded in one process
share it.  A server reports what was allocated since it started
(``mark`` / ``used_since``, hotkv.core.eviction), not the interpreter's own
memory.

Cost: mallinfo2 walks malloc's free lists (about 1 us, up to a few hundred
us on a heap fragmented by thousands of freed big values) and
getallocatedblocks walks pymalloc's pools (a few us per 100 MB): the
dispatcher never reads it per command, the eviction gate (hotkv.core.eviction)
reads it only when its cheap bound says the limit may be near.  Where ctypes
or mallinfo2 is missing (not glibc) the RSS is used as before.

Invariants: at most ``_SAMPLES`` samples per metric; samples closer than
0.1 s are not taken (a rate over a tiny interval is noise); after a reset
the rates read 0 until two samples exist.  The block size is within
[16, 512] (pymalloc's block sizes); ``peak_used`` never decreases.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
import threading
import time

_SAMPLES = 16


class Discard(list):
    """Where a server's durations go while latency-tracking is off: folding
    empties it without recording anything (hotkv.core.latency.fold)."""
    __slots__ = ()


class CommandStat:
    """One command's counters on one server."""
    __slots__ = ("calls", "seconds", "rejected_calls", "failed_calls", "lat_pending", "lat_hist")

    def __init__(self, pending: list):
        self.calls = self.rejected_calls = self.failed_calls = 0
        self.seconds = 0.0
        # Durations not yet in the latency histogram, and the histogram
        # (hotkv.core.latency: us -> calls; None until the command runs).
        self.lat_pending = pending
        self.lat_hist = None


class CommandStats(dict):
    """One server's command statistics: ``Command -> CommandStat``, an entry
    made the first time a command is counted (``cmdstats[cmd]``; ``get``
    does not make one), plus ``errors`` (INFO errorstats: code -> count) and
    ``error_replies`` (total_error_replies)."""
    __slots__ = ("errors", "error_replies", "discard", "tracking")

    def __init__(self):
        super().__init__()
        self.errors: dict = {}
        self.error_replies = 0
        self.discard = Discard()        # lat_pending of every entry while tracking is off
        self.tracking = True            # latency-tracking (hotkv.core.latency.set_tracking)

    def __missing__(self, cmd) -> CommandStat:
        st = self[cmd] = CommandStat([] if self.tracking else self.discard)
        return st

    def count_error(self, message: str, custom: bool = False):
        """INFO errorstats: the code is the text up to a space within its first
        31 bytes (after Valkey's dash), else ERR.  ``custom``: an error a script
        returned (its own code); past 128 codes a new one of those counts as
        ERRORSTATS_OVERFLOW (Valkey's ERRORSTATS_LIMIT), the server's always count."""
        self.error_replies += 1
        space = message.find(" ", 0, 31)
        prefix = message[:space] if space >= 0 else "ERR"
        errors = self.errors
        if custom and len(errors) >= 128 and prefix not in errors:
            prefix = "ERRORSTATS_OVERFLOW"
        errors[prefix] = errors.get(prefix, 0) + 1

    def reset(self):
        """CONFIG RESETSTAT: every counter, histogram and error stat goes."""
        self.clear()
        self.errors = {}
        self.error_replies = 0
        self.discard.clear()

    def save(self) -> tuple:
        """The counters now (not the histograms), for ``restore``."""
        return (self.error_replies, dict(self.errors),
                {cmd: (st.calls, st.seconds, st.failed_calls, st.rejected_calls)
                 for cmd, st in self.items()})

    def restore(self, saved: tuple):
        """Put back the counters ``save`` returned; a command counted since
        goes back to none (its histogram stays, as before)."""
        self.error_replies, errors, per = saved
        self.errors = errors
        for cmd, st in self.items():
            st.calls, st.seconds, st.failed_calls, st.rejected_calls = per.get(cmd, (0, 0.0, 0, 0))


def count_call(server, cmd, duration: float = 0.0, client=None, failed: bool = False):
    """The one place ``cmd``'s calls, usec and failed_calls grow on ``server``.

    With ``client``: one run of ``cmd`` that took ``duration`` seconds -- its
    calls, usec and latency histogram, the server's total_commands_processed
    and ``client``'s tot-cmds (the script's caller for a script's command);
    ``failed``: the run failed too (failed_calls).
    Without ``client`` no run is counted: ``duration`` is more time of the
    run counted last (a blocked command's runs before the one that served
    it: into its usec and its latest histogram entry), ``failed`` a failure
    of the run under way (a script's error reply; call() counts the run).
    Returns the command's entry (a nested caller folds its latencies)."""
    st = server.cmdstats[cmd]
    if failed:
        st.failed_calls += 1
    if client is None:
        if duration:
            st.seconds += duration
            if st.lat_pending:
                st.lat_pending[-1] += duration
        return st
    st.calls += 1
    st.seconds += duration
    st.lat_pending.append(duration)
    server.stat_numcommands += 1
    client.ncmds += 1
    return st


def count_rejected(server, cmd) -> None:
    """The one place ``cmd``'s rejected_calls grows on ``server``: refused
    before it ran (Valkey's rejectCommand; a script's call refused by the
    checks scriptCall makes)."""
    server.cmdstats[cmd].rejected_calls += 1


def track_instantaneous(server):
    """One sample per cron tick (at least 0.1 s apart) of commands and network bytes."""
    now = time.monotonic()
    state = server.inst_samples
    if state is None:
        state = server.inst_samples = {"last": None, "ops": [], "in": [], "out": []}
    cur = (now, server.stat_numcommands, server.stat_net_input_bytes,
           server.stat_net_output_bytes)
    last = state["last"]
    if last is not None and now - last[0] >= 0.1:
        dt = now - last[0]
        for key, i in (("ops", 1), ("in", 2), ("out", 3)):
            samples = state[key]
            samples.append((cur[i] - last[i]) / dt)
            if len(samples) > _SAMPLES:
                del samples[0]
        state["last"] = cur
    elif last is None:
        state["last"] = cur


def instantaneous(server):
    """(ops/sec, input kbps, output kbps), averaged over the last samples."""
    state = server.inst_samples
    if not state or not state["ops"]:
        return 0, 0.0, 0.0

    def avg(xs):
        return sum(xs) / len(xs)
    return int(avg(state["ops"])), avg(state["in"]) / 1024, avg(state["out"]) / 1024


def reset_instantaneous(server):
    """Forget the samples (CONFIG RESETSTAT): the rates restart from 0."""
    server.inst_samples = None


def rss() -> int:
    """Resident memory of this process, in bytes."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # not Linux
        return peak_rss()


# -- the allocators' in-use bytes -------------------------------------------

class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _load_mallinfo2():
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):   # not glibc, or glibc < 2.33
        return None
    fn.restype = _MallInfo2
    fn.argtypes = []
    return fn


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_mallinfo2 = _load_mallinfo2()
_blocks = sys.getallocatedblocks
_DEFAULT_BLOCK = 64
_CALIBRATE_EVERY = 1.0              # seconds between two measurements of the block size
_MARGINAL_MIN = 2000                # blocks: fewer tell too little of the size of new ones
_redirect_lock = threading.Lock()
_ALLOCATED = re.compile(rb"# bytes in allocated blocks\s*=\s*([\d,]+)")


class _Calibration:
    """The last exact reading of pymalloc (bytes and blocks in use) and the
    size blocks allocated or freed since count at (until the next one)."""
    __slots__ = ("block_bytes", "at", "peak_used", "bytes_at", "blocks_at", "exact")

    def __init__(self):
        self.block_bytes = float(_DEFAULT_BLOCK)
        self.at = -_CALIBRATE_EVERY
        self.peak_used = 0
        self.blocks_at = _blocks()
        self.bytes_at = self.blocks_at * _DEFAULT_BLOCK
        self.exact = False          # bytes_at is a guess until the first reading


_cal = _Calibration() if _mallinfo2 is not None else None


def _pymalloc_now() -> int:
    # Exact at the last measurement; the blocks since at the marginal size.
    cal = _cal
    return cal.bytes_at + int((_blocks() - cal.blocks_at) * cal.block_bytes)


def used_memory() -> int:
    """Bytes the process's allocators hold in use (see the module docstring)."""
    if _cal is None:
        return rss()
    m = _mallinfo2()
    used = m.uordblks + m.hblkhd + _pymalloc_now()
    if used > _cal.peak_used:
        _cal.peak_used = used
    return used


def mark() -> tuple:
    """The allocators' state now, for ``used_since`` (a server's start):
    from an exact reading at most a second old (servers made one after the
    other in a test process share one: about 5 ms per 100 MB each)."""
    if _cal is None:
        return (rss(), 0)
    calibrate(1.0)
    m = _mallinfo2()
    return (m.uordblks + m.hblkhd, _pymalloc_now())


def used_since(start: tuple) -> int:
    """Bytes allocated since ``start`` (``mark()``) and still in use."""
    if _cal is None:
        return rss() - start[0]
    m = _mallinfo2()
    return (m.uordblks + m.hblkhd - start[0]) + (_pymalloc_now() - start[1])


def _pymalloc_bytes():
    """pymalloc's "bytes in allocated blocks" (sys._debugmallocstats, which
    prints to the C stderr: fd 2 is pointed at a file for the call, and
    anything else written there meanwhile is passed on), or None.  One
    thread at a time (servers embedded in one process each have a loop
    thread): two interleaved redirections would leave fd 2 on a file."""
    with _redirect_lock:
        return _pymalloc_bytes_locked()


def _pymalloc_bytes_locked():
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        return None
    try:
        with tempfile.TemporaryFile() as f:
            os.dup2(f.fileno(), 2)
            try:
                blocks = _blocks()
                sys._debugmallocstats()
            finally:
                os.dup2(saved, 2)
            f.seek(0)
            out = f.read()
    except OSError:
        return None
    finally:
        os.close(saved)
    m = _ALLOCATED.search(out)
    if m is None:
        return None
    # Another thread's output that landed in the file goes where it was going.
    start = out.find(b"Small block threshold")
    if start > 0:
        os.write(2, out[:start])
    return int(m.group(1).replace(b",", b"")), blocks


def calibrate(max_age: float = _CALIBRATE_EVERY) -> None:
    """Measure pymalloc's bytes per block unless the last measurement is
    younger than ``max_age`` seconds (about 5 ms per 100 MB of small
    objects)."""
    cal = _cal
    if cal is None:
        return
    now = time.monotonic()
    # Until a marginal size is known the blocks since the last reading count
    # at the default 64 bytes, and a fresh process's first few thousand
    # (its first commands' code paths: ~130 bytes each) made INFO's first
    # used_memory read ~150 KB low, within 0.1 s of the server's start mark:
    # so many blocks are measured then, whatever the reading's age.
    if now - cal.at >= max_age or (
            cal.block_bytes == _DEFAULT_BLOCK and cal.exact
            and abs(_blocks() - cal.blocks_at) >= _MARGINAL_MIN):
        cal.at = now
        got = _pymalloc_bytes()
        if got is not None and got[1] > 0:
            nbytes, blocks = got
            grown = blocks - cal.blocks_at
            marginal = (nbytes - cal.bytes_at) / grown \
                if cal.exact and abs(grown) >= _MARGINAL_MIN else 0
            # New blocks count at what the blocks since the last measurement
            # cost on average when that says something; else as before (64
            # at first: the process-wide average, ~90-140 with the code
            # objects, overstates what keys and short values take).
            if 16 <= marginal <= 512:
                cal.block_bytes = marginal
            cal.bytes_at, cal.blocks_at, cal.exact = nbytes, blocks, True


def peak_used() -> int:
    """The highest used_memory read so far (INFO used_memory_peak)."""
    return max(_cal.peak_used, used_memory()) if _cal is not None else peak_rss()


def block_bytes() -> int:
    """The per-block size used for pymalloc's blocks (INFO/MEMORY STATS)."""
    return _cal.block_bytes if _cal is not None else 0


def peak_rss() -> int:
    """The process's peak resident memory, in bytes."""
    import resource  # Unix only; imported where it is needed
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024
