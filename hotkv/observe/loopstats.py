"""Event-loop metrics: INFO stats' eventloop_* fields and the INFO DEBUG section.

Valkey counts each turn of its event loop (aeProcessEvents: from the return
of the poll to the next beforeSleep) as a cycle, with its duration, the
part of it spent in commands (outermost calls only), in the AOF write and
in the cron, and the most commands one cycle ran.  hotkv's turn ends in
``Server.before_sleep`` (the loop runs it once per turn that did anything;
the cron wakes it, so an idle server turns ``hz`` times a second as
Valkey's does): ``end_cycle`` closes the cycle there.  Its duration is what
the server measured of it -- the commands' time since the last cycle (the
dispatcher adds each outermost command's duration to ``el_cmd_sum``, a
float addition, no call), the cron's, and before_sleep's own -- not the
parser's or asyncio's, which no hook sees without a cost per read.

Owns ``server.loopstats`` (a ``LoopStats``) and ``server.el_cmd_sum``.
Invariants: durations are kept in seconds (floats) and shown in whole
microseconds; every counter only grows until CONFIG RESETSTAT (``reset``);
the instantaneous rates keep Valkey's 16 samples, one per cron tick at least
0.1 s apart, zeros until filled (getInstantaneousMetric averages all 16).
"""

from __future__ import annotations

from time import perf_counter

SAMPLES = 16       # Valkey's STATS_METRIC_SAMPLES


class LoopStats:
    __slots__ = ("cycles", "el_sum", "el_max", "cron_sum", "aof_sum", "cmd_max",
                 "pending", "cmd_mark", "ncmd_mark", "inst_cycles", "inst_duration",
                 "inst_idx", "inst_last", "cmd_base")

    def __init__(self):
        self.cycles = 0
        self.el_sum = 0.0         # seconds of every cycle
        self.el_max = 0.0
        self.cron_sum = 0.0
        self.aof_sum = 0.0
        self.cmd_max = 0          # most commands in one cycle
        self.pending = 0.0        # cron seconds of the cycle under way
        self.cmd_mark = 0.0       # server.el_cmd_sum when the last cycle ended
        self.ncmd_mark = 0        # server.stat_numcommands then
        self.inst_cycles = [0.0] * SAMPLES
        self.inst_duration = [0.0] * SAMPLES
        self.inst_idx = 0
        self.inst_last = None     # (monotonic time, cycles, el_sum) of the last sample
        self.cmd_base = 0.0       # server.el_cmd_sum at the last CONFIG RESETSTAT


def init_server(server) -> LoopStats:
    """The server's ``loopstats`` (its ``el_cmd_sum`` starts at 0 in Server.__init__)."""
    return LoopStats()


def end_cycle(server, started: float):
    """Server.before_sleep's end: close the cycle it ends (``started`` is
    before_sleep's perf_counter at entry)."""
    ls = server.loopstats
    cmd_sum = server.el_cmd_sum
    took = perf_counter() - started + ls.pending + (cmd_sum - ls.cmd_mark)
    ls.cmd_mark = cmd_sum
    ls.pending = 0.0
    ls.cycles += 1
    ls.el_sum += took
    if took > ls.el_max:
        ls.el_max = took
    n = server.stat_numcommands - ls.ncmd_mark
    if n:
        if n > ls.cmd_max:
            ls.cmd_max = n
        ls.ncmd_mark = server.stat_numcommands


def add_cron(server, seconds: float):
    """The cron's duration: part of the cycle that runs it."""
    ls = server.loopstats
    ls.pending += seconds
    ls.cron_sum += seconds


def add_aof(server, seconds: float):
    server.loopstats.aof_sum += seconds


def track(server, now: float):
    """A cron tick (``now``: time.monotonic()): one sample of the cycle rate
    and of the mean cycle duration, as Valkey's trackInstantaneousMetric."""
    ls = server.loopstats
    last = ls.inst_last
    cur = (now, ls.cycles, ls.el_sum)
    if last is None or ls.cycles < last[1]:
        ls.inst_last = cur
        return
    if now - last[0] < 0.1:
        return
    i = ls.inst_idx
    ls.inst_cycles[i] = (ls.cycles - last[1]) / (now - last[0])
    done = ls.cycles - last[1]
    ls.inst_duration[i] = (ls.el_sum - last[2]) * 1e6 / done if done else 0.0
    ls.inst_idx = (i + 1) % SAMPLES
    ls.inst_last = cur


def reset(server):
    """CONFIG RESETSTAT: Valkey zeroes the durations and the samples."""
    old = server.loopstats
    server.loopstats = ls = LoopStats()
    ls.cmd_mark = ls.cmd_base = server.el_cmd_sum
    ls.ncmd_mark = server.stat_numcommands
    ls.pending = old.pending


def _us(seconds: float) -> int:
    return int(seconds * 1e6)


def stats_fields(server) -> list:
    """INFO stats' eventloop_* fields (after reply_buffer_expands)."""
    ls = server.loopstats
    return [
        ("eventloop_cycles", ls.cycles),
        ("eventloop_duration_sum", _us(ls.el_sum)),
        ("eventloop_duration_cmd_sum", _us(server.el_cmd_sum - ls.cmd_base)),
        ("instantaneous_eventloop_cycles_per_sec", int(sum(ls.inst_cycles) / SAMPLES)),
        ("instantaneous_eventloop_duration_usec", int(sum(ls.inst_duration) / SAMPLES)),
    ]


def debug_fields(server) -> list:
    """INFO DEBUG (only when named: not in INFO all/everything)."""
    ls = server.loopstats
    return [
        ("eventloop_duration_aof_sum", _us(ls.aof_sum)),
        ("eventloop_duration_cron_sum", _us(ls.cron_sum)),
        ("eventloop_duration_max", _us(ls.el_max)),
        ("eventloop_cmd_per_cycle_max", ls.cmd_max),
    ]
