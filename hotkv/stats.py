"""Statistics the server samples over time: INFO's instantaneous metrics.

Owns the samples behind ``instantaneous_ops_per_sec``,
``instantaneous_input_kbps`` and ``instantaneous_output_kbps`` (Valkey's
trackInstantaneousMetric): the server's cron calls ``track_instantaneous``,
INFO reads ``instantaneous``, CONFIG RESETSTAT calls
``reset_instantaneous``; and the process's memory readings
(``used_memory``, ``peak_rss``) that INFO, MEMORY, maxmemory and the RDB's
aux fields use.  Below ``commands/`` because the cron calls it.

Invariants: at most ``_SAMPLES`` samples per metric; samples closer than
0.1 s are not taken (a rate over a tiny interval is noise); after a reset
the rates read 0 until two samples exist.
"""

from __future__ import annotations

import os
import sys
import time

_SAMPLES = 16


def track_instantaneous(server):
    """One sample per cron tick (at least 0.1 s apart) of commands and network bytes."""
    now = time.monotonic()
    state = getattr(server, "_inst_samples", None)
    if state is None:
        state = server._inst_samples = {"last": None, "ops": [], "in": [], "out": []}
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
    state = getattr(server, "_inst_samples", None)
    if not state or not state["ops"]:
        return 0, 0.0, 0.0

    def avg(xs):
        return sum(xs) / len(xs)
    return int(avg(state["ops"])), avg(state["in"]) / 1024, avg(state["out"]) / 1024


def reset_instantaneous(server):
    """Forget the samples (CONFIG RESETSTAT): the rates restart from 0."""
    server._inst_samples = None


def used_memory() -> int:
    """Resident memory of this process, in bytes."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux
        return peak_rss()


def peak_rss() -> int:
    """The process's peak resident memory, in bytes."""
    import resource  # Unix only; imported where it is needed
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024
