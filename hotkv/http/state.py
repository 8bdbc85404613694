"""What the dashboard, ``/api/state`` and ``/metrics`` show: one snapshot of a
server (its INFO fields, keyspace, the lists and streams that look like
queues, the queue libraries' queues under their own names, slowlog, latency
events, and what /metrics reads besides INFO: ``_metrics_view``) and the
history the plots draw (``Sampler``).

Invariants:
* everything here runs on the server's loop thread, between two commands,
  and reads without changing anything (the readers of ``hotkv.observe.queues``: no
  lazy expiry, no hit/miss, no access time);
* the work of one snapshot is bounded: at most ``SCAN_LIMIT`` keys of a
  database are looked at to find lists and streams, the library layouts are
  read only in a database of at most ``LIBRARY_SCAN_LIMIT`` keys, only the
  ``http-metrics-top-keys`` deepest lists and streams are reported, and the
  snapshot is taken at most once a second -- less often when one is costly:
  sampling takes at most ~2 % of the loop's time (``Sampler.interval``),
  a request asking for fresh data at most ~10 % (``Sampler.current``);
* the history is in memory and bounded: ``HISTORY`` samples (5 minutes at
  one a second) of the server's rates and of each reported queue's depth
  and enqueue/dequeue rates;
* a list's enqueue and dequeue rates are real: the deltas per second of its
  counters (hotkv.http.counts: every element the list commands pushed or
  removed), not the net change of its depth -- a queue with 1,000 jobs/s
  in and 1,000 out shows 1,000 and 1,000, even when it is empty at every
  sample.  The lists reported are the ``http-metrics-top-keys`` deepest,
  plus up to as many of the counted keys most active since the previous
  sample (a queue drained as fast as it fills has depth 0, or no key at
  all): at most twice top-keys.  A stream's enqueue rate is its
  entries-added counter's, a group's dequeue rate its entries-read's
  (entries delivered); the server-wide rates add up every counted list and
  every stream of the scan.
"""

from __future__ import annotations

import datetime
import itertools
import json
import time
from collections import deque

from ..core import latency
from ..core.config import PARAMS
from ..core.registry import COMMANDS, all_commands
from ..observe import queues
from ..types.lists import ListValue
from ..types.stream import Stream
from . import counts

SCAN_LIMIT = 200_000          # keys of one db looked at to find lists and streams
# Library layouts are read in dbs no bigger than this: their readers
# (hotkv.observe.queues) load every job's record, so a snapshot stays short.
LIBRARY_SCAN_LIMIT = 20_000
HISTORY = 300                 # samples kept for the plots (one a second: 5 minutes)
MAX_INTERVAL = 60.0           # the longest wait between samples (a huge keyspace)
MAX_CONSUMERS = 50            # consumers listed per stream group
SLOWLOG_SHOWN = 10


class _InfoAsker:
    """What INFO's handler reads of its client: the server.  The dashboard
    asks INFO through the registry (hotkv.core.registry), as the dispatcher would, so the core
    (which starts hotkv.http) never imports a command module."""
    __slots__ = ("server",)

    def __init__(self, server):
        self.server = server


def _info_all(server) -> bytes:
    """``INFO all`` as the INFO command builds it."""
    return bytes(COMMANDS["info"].func(_InfoAsker(server), [b"INFO", b"all"]))


def parse_info(text: str) -> dict:
    """INFO's text -> {section: {field: value}} (values as text)."""
    out: dict = {}
    section = out.setdefault("", {})
    for line in text.splitlines():
        if line.startswith("# "):
            section = out.setdefault(line[2:].strip().lower(), {})
        elif ":" in line:
            k, v = line.split(":", 1)
            section[k] = v
    return out


def kv_fields(value: str) -> dict:
    """``a=1,b=2`` (INFO keyspace / commandstats values) -> dict of text."""
    return dict(p.split("=", 1) for p in value.split(",") if "=" in p)


def _num(v, default=0):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return int(f) if f.is_integer() else f


# -- job timestamps -------------------------------------------------------

def _iso_seconds(text) -> float | None:
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("ascii", "replace")
    try:
        when = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def _epoch(v) -> float | None:
    """A number of seconds or milliseconds since the epoch -> seconds."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return _iso_seconds(v) if isinstance(v, (str, bytes)) else None
    return f / 1000 if f > 1e11 else f


_TIME_FIELDS = ("enqueued_at", "timestamp", "message_timestamp", "created_at", "enqueued",
                "ts", "time")


def item_time(raw) -> float | None:
    """When a list item was made, if it is a JSON object carrying a time
    under a usual name (a job record); else None (unknown)."""
    if not isinstance(raw, (bytes, bytearray)) or len(raw) > 65536 or raw[:1] != b"{":
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    for name in _TIME_FIELDS:
        if name in obj:
            return _epoch(obj[name])
    return None


def _job_time(library: str, job) -> float | None:
    raw = job.raw if job is not None else None
    if not isinstance(raw, dict):
        return None
    if library == "rq":
        v = raw.get("enqueued_at") or raw.get("created_at")
        return _iso_seconds(v) if v else None
    if library == "bullmq":
        return _epoch(raw.get("timestamp"))
    if library == "dramatiq":
        return _epoch(raw.get("message_timestamp"))
    return None   # celery, taskiq: their messages carry no enqueue time


# -- the snapshot ---------------------------------------------------------

def _db_scan(server, db, now_ms: int):
    """(lists, streams, type counts, [entries added, entries delivered] of
    its streams) of one db: at most SCAN_LIMIT keys."""
    d = server.dbs[db]
    exp = d.expires
    lists, streams, types, flow = [], [], {}, [0, 0]
    for key, value in itertools.islice(d.data.items(), SCAN_LIMIT):
        if exp and exp.get(key, now_ms + 1) <= now_ms:
            continue
        t = type(value)
        name = t.__name__
        types[name] = types.get(name, 0) + 1
        if t is ListValue:
            lists.append((len(value), key))
        elif t is Stream:
            streams.append((len(value), key))
            flow[0] += value.entries_added
            if value.groups:
                # entries-read, where Valkey keeps it valid (XINFO's)
                flow[1] += sum(g.entries_read for g in value.groups.values()
                               if g.entries_read >= 0)
    return lists, streams, types, flow


_TYPE_LABELS = {"bytes": "string", "bytearray": "string", "ListValue": "list",
                "HashValue": "hash", "SetValue": "set", "ZSetValue": "zset",
                "Stream": "stream"}


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


def _list_view(server, db, key, now_s, counted, dt):
    """A list (or a counted key that holds none now: depth 0) with its
    counters (None when not counted) and their rates over ``dt`` s."""
    value = queues._live(server, db, key)
    if type(value) is not ListValue:
        value = ()
    # Producers LPUSH and consumers take from the right (BRPOP, BLMOVE
    # RIGHT): the oldest item is the tail, the usual Redis queue.
    when = item_time(value[-1]) if len(value) else None
    enq = deq = None
    in_rate = out_rate = 0.0
    if counted is not None:
        enq, deq, d_enq, d_deq = counted
        if dt:
            in_rate, out_rate = round(d_enq / dt, 2), round(d_deq / dt, 2)
    return {"db": db, "key": _text(key), "depth": len(value),
            "blocked": len(server.dbs[db].blocking.get(key) or ()),
            "oldest_age_s": None if when is None else max(0.0, round(now_s - when, 3)),
            "enqueued": enq, "dequeued": deq, "enqueue_rate": in_rate,
            "dequeue_rate": out_rate}


def _report_lists(server, found: list, sweep, top_n: int) -> list:
    """(db, key) of the lists to report: the top_n deepest of ``found``
    ((depth, db, key), sorted), then up to top_n counted keys, most active
    since the previous sample first, that hold a list or nothing."""
    chosen = [(db, k) for _, db, k in found[:top_n]]
    if not sweep:
        return chosen
    have = set(chosen)
    active = []
    for dk, v in sweep.items():
        if dk is None or dk in have:
            continue
        active.append((-(v[2] + v[3]), -(v[0] + v[1]), dk))
    active.sort(key=lambda t: t[:2])
    for _, _, (db, k) in active:
        if len(chosen) >= 2 * top_n:
            break
        value = queues._live(server, db, k)
        if value is None or type(value) is ListValue:
            chosen.append((db, k))
    return chosen


def _stream_view(server, db, key, now_ms: int):
    """A stream and its groups, in O(groups + consumers): counts and the
    oldest pending entry only -- unlike hotkv.observe.queues._stream, no list of
    every pending entry (a group may have millions)."""
    value = server.dbs[db].data[key]
    groups = []
    for g in value.sorted_groups():
        consumers = [{"name": _text(c.name), "pending": len(c.pel),
                      "idle_ms": max(0, now_ms - c.seen_time),
                      "inactive_ms": -1 if c.active_time == -1
                      else max(0, now_ms - c.active_time)}
                     for c in itertools.islice(g.sorted_consumers(), MAX_CONSUMERS)]
        oldest = None
        if g.pel.chunks:
            eid = g.pel.chunks[0][0]
            nack = g.pel[eid]
            oldest = {"id": queues.sid(eid), "consumer": _text(nack.consumer.name),
                      "idle_ms": max(0, now_ms - nack.delivery_time),
                      "deliveries": nack.delivery_count}
        groups.append({
            "name": _text(g.name), "lag": value.group_lag(g), "pending": len(g.pel),
            "last_delivered_id": queues.sid(g.last_id),
            "entries_read": None if g.entries_read < 0 else g.entries_read,
            "consumers": consumers, "consumer_count": len(g.consumers),
            "oldest_pending": oldest})
    return {"db": db, "key": _text(key), "length": len(value),
            "first_id": queues.sid(value.first_id) if len(value) else None,
            "last_id": queues.sid(value.last_id), "entries_added": value.entries_added,
            "blocked": len(server.dbs[db].blocking.get(key) or ()), "groups": groups}


_LIBRARIES = (
    ("rq", lambda s, db: queues._rq(s, db)),
    ("celery", lambda s, db: queues._celery(s, db, db)),
    ("dramatiq", lambda s, db: queues._dramatiq(s, "dramatiq", db)),
    ("bullmq", lambda s, db: queues._bullmq(s, "bull", db)),
    ("taskiq", lambda s, db: ({"taskiq": q} if (q := _taskiq(s, db)) is not None else {})),
)


def _taskiq(server, db):
    try:
        return queues._taskiq(server, b"taskiq", db, b"taskiq")
    except TypeError:   # a key named "taskiq" that is not a queue
        return None


def _queue_lists(library: str, name: str) -> tuple:
    """The list keys a library's queue takes jobs in by (its "queued"),
    whose counters give the queue's enqueue and dequeue rates."""
    if library == "rq":
        return (b"rq:queue:" + name.encode(),)
    if library == "celery":
        return (name.encode(),) + tuple((name + queues.KOMBU_SEP + str(p)).encode()
                                        for p in queues.KOMBU_PRIORITIES)
    if library == "dramatiq":
        return (b"dramatiq:" + name.encode(),)
    if library == "bullmq":
        return (b"bull:%s:wait" % name.encode(),)
    if library == "taskiq":
        return (name.encode(),)
    return ()


def _library_views(server, db, now_s, sweep=None, dt=None):
    out = []
    for library, read in _LIBRARIES:
        try:
            found = read(server, db)
        except Exception:   # a key layout half written by a client: shown next time
            continue
        for name, q in sorted(found.items()):
            oldest = q.queued[0] if q.queued else None
            when = _job_time(library, q.jobs.get(oldest)) if oldest is not None else None
            flow = None
            for key in _queue_lists(library, name) if sweep else ():
                c = sweep.get((db, key))
                if c is not None:
                    flow = [a + b for a, b in zip(flow, c)] if flow else list(c)
            out.append({
                "library": library, "db": db, "name": name,
                "enqueued": flow and flow[0], "dequeued": flow and flow[1],
                "enqueue_rate": round(flow[2] / dt, 2) if flow and dt else 0.0,
                "dequeue_rate": round(flow[3] / dt, 2) if flow and dt else 0.0,
                "queued": len(q.queued), "delayed": len(q.delayed),
                "in_flight": len(q.in_flight), "failed": len(q.failed),
                "states": {k: len(v) for k, v in q.states.items()},
                "oldest_age_s": None if when is None else max(0.0, round(now_s - when, 3))})
    return out


def _server_view(info: dict, server) -> dict:
    srv, cl, mem = info.get("server", {}), info.get("clients", {}), info.get("memory", {})
    st, per, repl = info.get("stats", {}), info.get("persistence", {}), info.get("replication", {})
    return {
        "version": srv.get("valkey_version") or srv.get("redis_version"),
        "hotkv_version": server.version,
        "uptime_s": _num(srv.get("uptime_in_seconds")), "port": _num(srv.get("tcp_port")),
        "role": repl.get("role"), "connected_replicas": _num(repl.get("connected_slaves")),
        "clients": _num(cl.get("connected_clients")),
        "blocked_clients": _num(cl.get("blocked_clients")),
        "used_memory": _num(mem.get("used_memory")),
        "used_memory_human": mem.get("used_memory_human"),
        "maxmemory": _num(mem.get("maxmemory")),
        "maxmemory_policy": mem.get("maxmemory_policy"),
        "ops_per_sec": _num(st.get("instantaneous_ops_per_sec")),
        "total_commands": _num(st.get("total_commands_processed")),
        "keyspace_hits": _num(st.get("keyspace_hits")),
        "keyspace_misses": _num(st.get("keyspace_misses")),
        "expired_keys": _num(st.get("expired_keys")),
        "evicted_keys": _num(st.get("evicted_keys")),
        "aof": {"enabled": per.get("aof_enabled") == "1",
                "rewrite_in_progress": per.get("aof_rewrite_in_progress") == "1",
                "last_write_status": per.get("aof_last_write_status"),
                "last_bgrewrite_status": per.get("aof_last_bgrewrite_status")},
        "rdb": {"changes_since_last_save": _num(per.get("rdb_changes_since_last_save")),
                "last_save_time": _num(per.get("rdb_last_save_time")),
                "bgsave_in_progress": per.get("rdb_bgsave_in_progress") == "1",
                "last_bgsave_status": per.get("rdb_last_bgsave_status")},
    }


def _slowlog(server) -> list:
    out = []
    for e in itertools.islice(server.slowlog, SLOWLOG_SHOWN):
        out.append({"id": e.id, "time": e.time, "usec": e.usec,
                    "args": [_text(a)[:80] for a in e.argv[:8]]})
    return out


def _latency(server) -> list:
    out = []
    for name, series in sorted(server.latency_events.items()):
        if series.samples:
            t, ms = series.samples[-1]
            out.append({"event": name, "time": t, "latest_ms": ms, "max_ms": series.max})
    return out


def _counters_view(server):
    """The counter table's size, bound and the operations it could not
    count (a key first seen while full); None while not counting."""
    qc = server.queue_counts
    if qc is None:
        return None
    return {"keys": qc.size, "max_keys": counts.MAX_KEYS, "refused": qc.refused}


# CONFIG GET parameters /metrics exports (redis_exporter's config_* gauges).
METRIC_CONFIG = ("maxmemory", "maxclients", "io-threads", "repl-backlog-size",
                 "client-output-buffer-limit")


def _metrics_view(server) -> dict:
    """What /metrics reads besides INFO, as redis_exporter reads it with
    other commands: the start time, SLOWLOG LEN and the newest entry's id
    and duration, some CONFIG GET values (as CONFIG GET prints them) and
    LATENCY HISTOGRAM (per command: calls and the cumulative
    [usec, count, ...] buckets).  Bounded by the command table."""
    slowlog = server.slowlog
    newest = next(iter(slowlog), None)
    values = server.config.values
    hists = {}
    for cmd in all_commands():
        hist = latency.histogram(server, cmd)
        if hist:
            hists[cmd.name] = latency.cdf(hist)
    return {
        "start_time": server.start_time,
        "slowlog_len": len(slowlog),
        "slowlog_last": None if newest is None else {"id": newest.id, "usec": newest.usec},
        "config": {k: PARAMS[k].format(values[k]) for k in METRIC_CONFIG if k in values},
        "latency_histograms": hists,
    }


def snapshot(server, top_n: int, sweep=None) -> dict:
    """One snapshot of ``server`` (see the module docstring); ``sweep``: the
    list counters (hotkv.http.counts.QueueCounts.sweep), None when off."""
    now_ms = queues.now_ms(server)
    now_s = now_ms / 1000
    info_raw = _info_all(server).decode("utf-8", "replace")
    info = parse_info(info_raw)
    keyspace, lists, streams, libraries = [], [], [], []
    flow = [0, 0]
    dt = sweep[None] if sweep else None
    for db in range(len(server.dbs)):
        if not server.dbs[db].data:
            continue
        found_lists, found_streams, types, db_flow = _db_scan(server, db, now_ms)
        flow[0] += db_flow[0]
        flow[1] += db_flow[1]
        ks = kv_fields(info.get("keyspace", {}).get("db%d" % db, ""))
        keyspace.append({"db": db, "keys": _num(ks.get("keys")),
                         "expires": _num(ks.get("expires")),
                         "types": {_TYPE_LABELS.get(k, k): v for k, v in types.items()}})
        lists.extend((n, db, k) for n, k in found_lists)
        streams.extend((n, db, k) for n, k in found_streams)
        if len(server.dbs[db].data) <= LIBRARY_SCAN_LIMIT:
            libraries.extend(_library_views(server, db, now_s, sweep, dt))
    lists.sort(key=lambda t: (-t[0], t[1], t[2]))
    streams.sort(key=lambda t: (-t[0], t[1], t[2]))
    sweep = sweep or {}
    shown_lists = _report_lists(server, lists, sweep, top_n)
    shown_streams = [(db, k) for _, db, k in streams[:top_n]]
    return {
        "time": now_s,
        "server": _server_view(info, server),
        "keyspace": keyspace,
        "lists": [_list_view(server, db, k, now_s, sweep.get((db, k)), dt)
                  for db, k in shown_lists],
        "lists_total": len(lists),
        "lists_counted": bool(sweep),
        "queue_counters": _counters_view(server),
        "streams": [_stream_view(server, db, k, now_ms) for db, k in shown_streams],
        "streams_total": len(streams),
        "libraries": libraries,
        "slowlog": _slowlog(server),
        "latency": _latency(server),
        # Only for /metrics (its redis_exporter series beyond INFO's fields).
        "metrics": _metrics_view(server),
        # Server-wide: the elements every counted list took in / gave out
        # since the previous sample, and every stream's totals.
        "lists_enqueued_since": sum(v[2] for k, v in sweep.items() if k is not None),
        "lists_dequeued_since": sum(v[3] for k, v in sweep.items() if k is not None),
        "streams_added": flow[0],
        "streams_delivered": flow[1],
        "info": info,
        # The keys of "lists" and "streams", in their order, as bytes (the
        # views' "key" is text): for the ACL checks of hotkv.http.rights.
        # Neither this nor "info" is part of /api/state.
        "raw_keys": {"lists": [k for _, k in shown_lists],
                     "streams": [k for _, k in shown_streams]},
    }


class Sampler:
    """The latest snapshot and the history of the plots: ``sample()`` once a
    second (the HTTP listener's timer, only while http-port is on) takes a
    snapshot and appends to bounded ring buffers; ``current()`` gives the
    latest (taking one if it is older than ``max_age``)."""

    def __init__(self, server):
        self.server = server
        self.last: dict | None = None
        self.last_at = 0.0
        self.times: deque = deque(maxlen=HISTORY)
        self.series = {name: deque(maxlen=HISTORY)
                       for name in ("ops", "enqueue", "dequeue", "memory", "clients")}
        self.depths: dict = {}       # "db:key" -> deque of depths (queues reported now)
        # "db:key" -> (deque of enqueue rates, deque of dequeue rates), per
        # sample: lists by their counters, streams by entries added/read.
        self.flows: dict = {}
        self.cost = 0.0              # seconds the last snapshot took
        self.interval = 1.0          # seconds between samples (longer when costly)

    def top_n(self) -> int:
        return self.server.config.values["http-metrics-top-keys"]

    def current(self, max_age: float = 1.0, fresh: bool = False) -> dict:
        """The latest snapshot, taken anew when older than ``max_age`` (and
        than ``interval``); ``fresh``: when older than ten times its own cost
        (so even requests that all ask for fresh data keep the server's
        share under ~10 %)."""
        age = time.monotonic() - self.last_at
        limit = self.cost * 10 if fresh else max(max_age, self.interval)
        if self.last is None or age > limit:
            self.sample()
        return self.last

    def due(self) -> bool:
        """Whether the once-a-second timer should sample now."""
        return time.monotonic() - self.last_at >= self.interval - 0.05

    def sample(self) -> dict:
        t0 = time.perf_counter()
        now = time.monotonic()
        counts = self.server.queue_counts
        sweep = counts.sweep(self.server, now) if counts is not None else None
        snap = snapshot(self.server, self.top_n(), sweep)
        # A costly snapshot (a big keyspace) is taken less often: at most
        # ~2 % of the loop's time goes to sampling.
        self.cost = time.perf_counter() - t0
        self.interval = min(MAX_INTERVAL, max(1.0, self.cost * 50))
        prev, prev_at = self.last, self.last_at
        dt = now - prev_at if prev is not None else 0.0
        self._rates(snap, prev, dt)
        self.times.append(round(snap["time"], 3))
        s = snap["server"]
        self.series["ops"].append(s["ops_per_sec"])
        self.series["enqueue"].append(snap["enqueue_rate"])
        self.series["dequeue"].append(snap["dequeue_rate"])
        self.series["memory"].append(s["used_memory"])
        self.series["clients"].append(s["clients"])
        keep, flows = {}, {}
        for q in snap["lists"]:
            name = "%d:%s" % (q["db"], q["key"])
            self._ring(self.depths, keep, name).append(q["depth"])
            ins, outs = self._flow(name, flows)
            ins.append(q["enqueue_rate"])
            outs.append(q["dequeue_rate"])
        for st in snap["streams"]:
            name = "%d:%s" % (st["db"], st["key"])
            self._ring(self.depths, keep, name).append(st["length"])
            ins, outs = self._flow(name, flows)
            ins.append(st["enqueue_rate"])
            outs.append(st["dequeue_rate"])
        self.depths, self.flows = keep, flows
        self.last, self.last_at = snap, now
        return snap

    def _blank(self) -> deque:
        """The ring of a queue new to the report: its past is unknown."""
        return deque([None] * (len(self.times) - 1), maxlen=HISTORY)

    def _ring(self, old: dict, new: dict, name: str) -> deque:
        ring = old.get(name)
        new[name] = ring = self._blank() if ring is None else ring
        return ring

    def _flow(self, name: str, new: dict):
        pair = self.flows.get(name)
        new[name] = pair = (self._blank(), self._blank()) if pair is None else pair
        return pair

    def _rates(self, snap, prev, dt):
        """Per second since the previous sample: the server's enqueued and
        dequeued elements and entries, each list's and library queue's net
        depth change, each stream's added entries and each group's
        delivered ones (the server's and the streams' totals; each list's
        own rates are its counters', taken by snapshot)."""
        ok = prev is not None and dt > 0

        def rate(new, old):
            return round(max(0.0, (new - old) / dt), 2) if ok and old is not None else 0.0
        snap["enqueue_rate"] = round(
            (snap["lists_enqueued_since"] / dt if ok else 0.0)
            + rate(snap["streams_added"], prev and prev["streams_added"]), 2)
        snap["dequeue_rate"] = round(
            (snap["lists_dequeued_since"] / dt if ok else 0.0)
            + rate(snap["streams_delivered"], prev and prev["streams_delivered"]), 2)
        old_lists = {(q["db"], q["key"]): q for q in (prev or {}).get("lists", ())}
        for q in snap["lists"]:
            old = old_lists.get((q["db"], q["key"]))
            q["net_rate"] = round((q["depth"] - old["depth"]) / dt, 2) if ok and old else 0.0
        old_libs = {(q["library"], q["db"], q["name"]): q for q in (prev or {}).get("libraries",
                                                                                     ())}
        for q in snap["libraries"]:
            old = old_libs.get((q["library"], q["db"], q["name"]))
            q["net_rate"] = round((q["queued"] - old["queued"]) / dt, 2) if ok and old else 0.0
        old_streams = {(s["db"], s["key"]): s for s in (prev or {}).get("streams", ())}
        for st in snap["streams"]:
            old = old_streams.get((st["db"], st["key"]))
            st["enqueue_rate"] = rate(st["entries_added"], old and old["entries_added"])
            old_groups = {g["name"]: g for g in (old or {}).get("groups", ())}
            for g in st["groups"]:
                read = _delivered(st, g)
                og = old_groups.get(g["name"])
                g["delivered"] = read
                g["dequeue_rate"] = rate(read, og.get("delivered") if og else None) \
                    if read is not None else None
            st["dequeue_rate"] = round(sum(g["dequeue_rate"] or 0.0 for g in st["groups"]), 2)

    def history(self) -> dict:
        return {"t": list(self.times), **{k: list(v) for k, v in self.series.items()},
                "depths": {k: list(v) for k, v in self.depths.items()},
                "flows": {k: {"in": list(i), "out": list(o)}
                          for k, (i, o) in self.flows.items()}}


def _delivered(stream: dict, group: dict):
    if group["entries_read"] is not None:
        return group["entries_read"]
    if group["lag"] is not None:
        return stream["entries_added"] - group["lag"]
    return None


__all__ = ["Sampler", "snapshot", "parse_info", "kv_fields", "item_time"]
