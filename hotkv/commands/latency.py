"""LATENCY: the latency monitor's and the latency histograms' command.

Owns LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR / HISTOGRAM / HELP
with Valkey 8.1's replies.  The state (events, samples, histograms) and how
it is fed are ``hotkv.core.latency``'s; this module only reads and resets it.

Invariants: LATEST lists the events in the order they first happened;
HISTORY oldest sample first; HISTOGRAM names commands by full name
("client|id") and skips unknown names and commands without calls.
"""

from __future__ import annotations

from ..core import latency
from ..core.registry import all_commands, command, container, lookup
from ..protocol.errors import CommandError
from ..protocol.replies import help_reply
from ..protocol.resp import Verbatim

container("latency", group="server", summary="A container for latency diagnostics commands.",
          since="2.8.13", complexity="Depends on subcommand.")

_FLAGS = "admin noscript loading stale"


@command("latency|doctor", 2, _FLAGS, group="server", since="2.8.13", complexity="O(1)")
def latency_doctor(c, argv):
    """Returns a human-readable latency analysis report."""
    return Verbatim(_doctor(c.server).encode())


@command("latency|graph", 3, _FLAGS, group="server", since="2.8.13", args="event",
         complexity="O(1)")
def latency_graph(c, argv):
    """Returns a latency graph for an event."""
    name = argv[2].decode("utf-8", "surrogateescape")
    ts = c.server.latency_events.get(name)
    if ts is None:
        raise CommandError("ERR No samples available for event '%s'" % name)
    return Verbatim(latency.graph(name, ts, c.server.clock.time()).encode())


@command("latency|help", 2, "loading stale", group="server", since="2.8.13", complexity="O(1)")
def latency_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply("LATENCY", [
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for"
        " the specified command names.",
        "    If no commands are specified then all histograms are replied.",
    ])


def _cdf_map(hist) -> dict:
    calls, points = latency.cdf(hist)
    buckets = {}
    for i in range(0, len(points), 2):
        buckets[points[i]] = points[i + 1]
    return {b"calls": calls, b"histogram_usec": buckets}


@command("latency|histogram", -2, _FLAGS, group="server", since="7.0.0", args="[command]...",
         complexity="O(N) where N is the number of commands with latency information being "
                    "retrieved.")
def latency_histogram(c, argv):
    """Returns the cumulative distribution of latencies of a subset or all commands."""
    out = {}
    if len(argv) == 2:
        for cmd in all_commands():
            hist = latency.histogram(c.server, cmd)
            if hist:
                out[cmd.name.encode()] = _cdf_map(hist)
        return out
    for name in argv[2:]:
        cmd = _by_full_name(c, name)
        if cmd is None:
            continue
        for one in [cmd] + _subcommands(cmd):
            hist = latency.histogram(c.server, one)
            if hist:
                out[one.name.encode()] = _cdf_map(hist)
    return out


def _by_full_name(c, name: bytes):
    """A command by its full name ("get", "client|id"), as lookupCommandBySds."""
    parts = name.lower().split(b"|")
    if len(parts) > 2:
        return None
    cmd = lookup(parts[0])
    if cmd is None or len(parts) == 1:
        return cmd
    if not cmd.subcommands:
        return None
    return cmd.subcommands.get(parts[1])


def _subcommands(cmd) -> list:
    if not cmd.subcommands:
        return []
    seen, out = set(), []
    for sub in cmd.subcommands.values():
        if sub.name not in seen:
            seen.add(sub.name)
            out.append(sub)
    return out


@command("latency|history", 3, _FLAGS, group="server", since="2.8.13", args="event",
         complexity="O(1)")
def latency_history(c, argv):
    """Returns timestamp-latency samples for an event."""
    ts = c.server.latency_events.get(argv[2].decode("utf-8", "surrogateescape"))
    if ts is None:
        return []
    return [[t, ms] for t, ms in ts.samples]


@command("latency|latest", 2, _FLAGS, group="server", since="2.8.13", complexity="O(1)")
def latency_latest(c, argv):
    """Returns the latest latency samples for all events."""
    out = []
    for name, ts in c.server.latency_events.items():
        t, ms = ts.samples[-1] if ts.samples else (0, 0)
        out.append([name.encode(), t, ms, ts.max])
    return out


@command("latency|reset", -2, _FLAGS, group="server", since="2.8.13", args="[event]...",
         complexity="O(1)")
def latency_reset(c, argv):
    """Resets the latency data for one or more events."""
    if len(argv) == 2:
        return latency.reset(c.server)
    return latency.reset(c.server, [a.decode("utf-8", "surrogateescape") for a in argv[2:]])


# -- DOCTOR ------------------------------------------------------------------
# The report's sentences are Valkey's (a client may parse them); what
# triggers each piece of advice is data: event -> advice keys.

_DISABLED = ("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Valkey "
             "instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in "
             "order to enable it.\n")

_EVENT_ADVICE = {
    "fast-command": ("scheduler",),
    "aof-write-pending-fsync": ("local_disk", "disk_contention", "ssd", "data_writeback"),
    "aof-write-active-child": ("no_appendfsync", "data_writeback", "ssd"),
    "aof-write-alone": ("local_disk", "data_writeback", "ssd"),
    "aof-fsync-always": ("relax_fsync_policy",),
    "aof-fstat": ("disk_contention", "local_disk"),
    "rdb-unlink-temp-file": ("disk_contention", "local_disk"),
    "aof-rewrite-diff-write": ("write_load_info", "data_writeback", "ssd", "local_disk"),
    "aof-rename": ("write_load_info", "data_writeback", "ssd", "local_disk"),
    "expire-cycle": ("hz", "large_objects"),
    "eviction-del": ("large_objects",),
    "eviction-cycle": ("mass_eviction",),
}

_ADVICE = [
    ("better_vm", "- If you are using a virtual machine, consider upgrading it with a faster one "
     "using a hypervisior that provides less latency during fork() calls. Xen is known to have "
     "poor fork() performance. Even in the context of the same VM provider, certain kinds of "
     "instances can execute fork faster than others.\n"),
    ("slowlog_enabled", "- There are latency issues with potentially slow commands you are "
     "using. Try to enable the Slow Log Valkey feature using the command 'CONFIG SET "
     "slowlog-log-slower-than %d'. If the Slow log is disabled Valkey is not able to log slow "
     "commands execution for you.\n"),
    ("slowlog_tuning", "- Your current Slow Log configuration only logs events that are slower "
     "than your configured latency monitor threshold. Please use 'CONFIG SET "
     "slowlog-log-slower-than %d'.\n"),
    ("slowlog_inspect", "- Check your Slow Log to understand what are the commands you are "
     "running which are too slow to execute. Please check https://valkey.io/commands/slowlog "
     "for more information.\n"),
    ("scheduler", "- The system is slow to execute Valkey code paths not containing system "
     "calls. This usually means the system does not provide Valkey CPU time to run for long "
     "periods. You should try to:\n"
     "  1) Lower the system load.\n"
     "  2) Use a computer / VM just for Valkey if you are running other software in the same "
     "system.\n"
     "  3) Check if you have a \"noisy neighbour\" problem.\n"
     "  4) Check with 'valkey-cli --intrinsic-latency 100' what is the intrinsic latency in your "
     "system.\n"
     "  5) Check if the problem is allocator-related by recompiling Valkey with MALLOC=libc, if "
     "you are using Jemalloc. However this may create fragmentation problems.\n"),
    ("local_disk", "- It is strongly advised to use local disks for persistence, especially if "
     "you are using AOF. Remote disks provided by platform-as-a-service providers are known to "
     "be slow.\n"),
    ("ssd", "- SSD disks are able to reduce fsync latency, and total time needed for "
     "snapshotting and AOF log rewriting (resulting in smaller memory usage). With extremely "
     "high write load SSD disks can be a good option. However Valkey should perform reasonably "
     "with high load using normal disks. Use this advice as a last resort.\n"),
    ("data_writeback", "- Mounting ext3/4 filesystems with data=writeback can provide a "
     "performance boost compared to data=ordered, however this mode of operation provides less "
     "guarantees, and sometimes it can happen that after a hard crash the AOF file will have a "
     "half-written command at the end and will require to be repaired before Valkey restarts.\n"),
    ("disk_contention", "- Try to lower the disk contention. This is often caused by other disk "
     "intensive processes running in the same computer (including other Valkey instances).\n"),
    ("no_appendfsync", "- Assuming from the point of view of data safety this is viable in your "
     "environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that "
     "fsync will not be performed while there is a child rewriting the AOF file or producing "
     "an RDB file (the moment where there is high disk contention).\n"),
    ("relax_fsync_policy", "- Your fsync policy is set to 'always'. It is very hard to get good "
     "performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n"),
    ("write_load_info", "- Latency during the AOF atomic rename operation or when the final "
     "difference is flushed to the AOF file at the end of the rewrite, sometimes is caused by "
     "very high write load, causing the AOF buffer to get very large. If possible try to send "
     "less commands to accomplish the same work, or use Lua scripts to group multiple "
     "operations into a single EVALSHA call.\n"),
    ("hz", "- In order to make the Valkey keys expiring process more incremental, try to set "
     "the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n"),
    ("large_objects", "- Deleting, expiring or evicting (because of maxmemory policy) large "
     "objects is a blocking operation. If you have very large objects that are often deleted, "
     "expired, or evicted, try to fragment those objects into multiple smaller objects.\n"),
    ("mass_eviction", "- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or "
     "allocation of large objects via sets or sorted sets intersections, STORE option of SORT, "
     "Valkey Cluster large keys migrations (RESTORE command), may create sudden memory pressure "
     "forcing the server to block trying to evict keys. \n"),
]


def _doctor(server) -> str:
    events = server.latency_events
    threshold = server.latency_threshold_ms
    if not events and threshold == 0:
        return _DISABLED
    values = server.config.values
    advice: set = set()
    count = 0      # Valkey counts advice per event, repeats included
    report = ""
    for num, (name, ts) in enumerate(events.items(), 1):
        if num == 1:
            report += "Latency spikes are observed in this Valkey instance.\n\n"
        st = latency.analyze(ts, server.clock.time())
        period = st["period"] / st["samples"] if st["samples"] else float("nan")
        report += ("%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f "
                   "sec). Worst all time event %dms." % (num, name, st["samples"], st["avg"],
                                                        st["mad"], period, ts.max))
        low = name.lower()
        if low == "command":
            slower = values.get("slowlog-log-slower-than", 10000)
            if slower < 0 or values.get("slowlog-max-len", 128) == 0:
                advice.add("slowlog_enabled")
                count += 1
            elif slower // 1000 > threshold:
                advice.add("slowlog_tuning")
                count += 1
            advice.update(("slowlog_inspect", "large_objects"))
            count += 2
        for key in _EVENT_ADVICE.get(low, ()):
            advice.add(key)
            count += 1
        report += "\n"
    if not events and not count:
        return report + ("No latency spike was observed during the lifetime of this Valkey "
                         "instance, not in the slightest bit.\n")
    if events and not count:
        return report + ("\nThere are latency events logged that are not easy to fix. Please "
                         "get some help from Valkey community, providing this report in your "
                         "help request.\n")
    report += "\nHere is some advice for you:\n\n"
    for key, text in _ADVICE:
        if key not in advice:
            continue
        if key == "relax_fsync_policy" and values.get("appendfsync") != "always":
            continue
        if key == "hz" and values.get("hz", 10) >= 100:
            continue
        if "%d" in text:
            text = text % (threshold * 1000)
        report += text
    return report
