"""``hotkv queues [--url URL] [--interval S] [--once] [--iterations N]``: the
dashboard's queue view in a terminal, refreshing in place (rich's Live), read
from any server -- hotkv or Valkey/Redis -- with commands both have: SCAN,
TYPE, LLEN, LINDEX, ZCARD, XINFO STREAM / GROUPS / CONSUMERS, INFO (and the
library reads of hotkv/tools/queues_remote.py).

Shown: every list (depth, age of the oldest item when the item is a job
record carrying a timestamp -- hotkv.http.state.item_time; the producer is
assumed to LPUSH, so the oldest is the tail; its enqueue and dequeue rates
and counters, see below), every stream with its groups
(lag, pending, consumers with their pending count and idle time),
the queues of RQ, Celery/kombu, dramatiq, BullMQ and taskiq-redis by their
own names with the dashboard's states (hotkv/tools/queues_remote.py: counts from
their key layouts, hotkv/observe/queues.py's constants, through this connection),
and the server's clients, blocked clients, memory and ops/s.

Enqueue and dequeue rates: real ones only from a hotkv whose dashboard is on
(``CONFIG GET http-port`` non-zero): its per-list counters
(hotkv.http.counts) are read from its ``/api/state`` (the same host, basic
auth with this connection's user and password -- never when the connection
is TLS: the dashboard is plain HTTP), and a queue's in/s and
out/s are the counters' change between two refreshes (in ``--once``, the
server's own latest rates); a drained queue (no key) with counters shows too.
Against Valkey/Redis, or a hotkv with http-port 0, there are no counters:
in/s and out/s show "-" and only net/s is there -- the change of depth
between refreshes, which is not a rate (a queue with 1,000 jobs/s in and out
shows 0), as the table's caption says.

Invariants: read-only (no command here writes); the work of one refresh is
bounded: at most ``MAX_KEYS`` keys are scanned and ``MAX_SHOWN`` lists and
streams are shown (deepest first); ``--once`` prints one frame and exits
(no terminal needed), ``--iterations`` bounds the refreshes.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import urllib.request

from ..http.state import item_time, kv_fields, parse_info
from .cli_tool import Options, _apply_url, _txt, connect
from .queues_remote import libraries, pipe

MAX_KEYS = 10_000
MAX_SHOWN = 30


def _pairs(r) -> dict:
    v = r.value or []
    return {_txt(v[i].value): v[i + 1] for i in range(0, len(v) - 1, 2)}


def _val(r):
    if r.kind in ("int",):
        return r.value
    if r.kind == "nil":
        return None
    if r.kind in ("bulk", "status"):
        return _txt(r.value)
    return r.value


NO_COUNTERS = ("in/s, out/s: no enqueue/dequeue counters on this server (they need hotkv "
               "with http-port on); net/s is the change of depth between refreshes, "
               "not a rate")


def counters(conn, o) -> tuple:
    """({key text: list view from /api/state} of the db this connection
    reads, caption) when the server is a hotkv with http-port on, else
    (None, NO_COUNTERS)."""
    r = conn.call("CONFIG", "GET", "http-port")
    # [name, value] (a RESP3 map is read flat too); Valkey: empty, no such setting
    pair = r.value if r.kind in ("array", "map") and r.value else []
    if len(pair) < 2:
        return None, NO_COUNTERS
    try:
        port = int(_txt(pair[1].value))
    except (TypeError, ValueError):
        return None, NO_COUNTERS
    if not port:
        return None, NO_COUNTERS
    if o.tls and o.password is not None:
        # The dashboard speaks plain HTTP: never send a TLS user's password there.
        return None, "%s (not read over plain HTTP from a TLS connection)" % NO_COUNTERS
    host = "[%s]" % o.host if ":" in o.host else o.host
    req = urllib.request.Request("http://%s:%d/api/state?fresh=1" % (host, port))
    if o.password is not None:
        cred = "%s:%s" % (o.user or "default", o.password)
        req.add_header("Authorization", "Basic " + base64.b64encode(cred.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            state = json.loads(resp.read())
    except (OSError, ValueError) as e:
        return None, "%s (http-port %d: %s)" % (NO_COUNTERS, port, e)
    found = {q["key"]: q for q in state.get("lists", ())
             if q.get("db") == o.db and q.get("enqueued") is not None}
    # Library queues by (library, name): their queue lists' counters.
    found.update({(q["library"], q["name"]): q for q in state.get("libraries", ())
                  if q.get("db") == o.db and q.get("enqueued") is not None})
    # When the counters were read: the snapshot may be a few ms older than
    # the request (the server's bound on fresh snapshots), so their rates
    # divide by the server's time between snapshots, not this process's.
    found[None] = state.get("time")
    return found, ("in/s, out/s: hotkv's enqueue/dequeue counters (http-port %d); net/s: "
                   "change of depth" % port)


def collect(conn, o=None) -> dict:
    """One view of the server's queues (see the module docstring); with
    ``o`` (the connection's Options), the counters of a hotkv that has them."""
    info = parse_info(_txt(conn.call("INFO").value))
    keys, cursor = [], b"0"
    while len(keys) < MAX_KEYS:
        r = conn.call("SCAN", cursor, "COUNT", "1000")
        cursor = r.value[0].value
        keys.extend(k.value for k in r.value[1].value)
        if cursor == b"0":
            break
    now = time.time()
    lists, streams, types = [], [], {}
    keys = keys[:MAX_KEYS]
    key_types = {k: _txt(r.value) for k, r in zip(keys, pipe(conn, [("TYPE", k) for k in keys]))}
    for k in keys:
        t = key_types[k]
        types[t] = types.get(t, 0) + 1
        if t == "list":
            depth = conn.call("LLEN", k).value
            tail = conn.call("LINDEX", k, "-1")
            when = item_time(tail.value) if tail.kind == "bulk" else None
            lists.append({"key": _txt(k), "depth": depth,
                          "oldest_age_s": None if when is None else max(0.0, now - when)})
        elif t == "stream":
            s = _pairs(conn.call("XINFO", "STREAM", k))
            groups = []
            for g in conn.call("XINFO", "GROUPS", k).value or ():
                gd = _pairs(g)
                cons = [{n: _val(v) for n, v in _pairs(c).items()}
                        for c in conn.call("XINFO", "CONSUMERS", k, gd["name"].value).value]
                groups.append({"name": _val(gd["name"]), "lag": _val(gd.get("lag")),
                               "pending": _val(gd["pending"]), "consumers": cons,
                               "last_delivered_id": _val(gd["last-delivered-id"])})
            streams.append({"key": _txt(k), "length": _val(s["length"]), "groups": groups})
    found = libraries(conn, keys, key_types)
    counted, caption = counters(conn, o) if o is not None else (None, NO_COUNTERS)
    counted_at = counted.pop(None, None) if counted is not None else None
    lists.sort(key=lambda q: -q["depth"])
    lists = lists[:MAX_SHOWN]
    if counted is not None:
        shown = {q["key"] for q in lists}
        for key, q in counted.items():   # a drained queue: counters, no key
            if isinstance(key, str) and key not in shown and len(lists) < MAX_SHOWN * 2:
                lists.append({"key": key, "depth": 0, "oldest_age_s": None})
        for q in lists:
            _attach(q, counted.get(q["key"]))
        for q in found:
            _attach(q, counted.get((q["library"], q["name"])))
    streams.sort(key=lambda s: -s["length"])
    return {"info": info, "types": types, "lists": lists, "counted": counted is not None,
            "caption": caption, "time": time.monotonic(), "counted_at": counted_at,
            "streams": streams[:MAX_SHOWN], "libraries": found, "scanned": len(keys)}


def _attach(q: dict, c):
    """A row's counters from /api/state's entry ``c`` (None: not counted)."""
    if c is not None:
        q.update(enqueued=c["enqueued"], dequeued=c["dequeued"],
                 server_rates=(c["enqueue_rate"], c["dequeue_rate"]))


def _flow(q: dict, o, dt: float):
    """q's in/s and out/s: its counters' change since ``o`` (its row in the
    previous frame), else the server's latest rates; None without counters."""
    if q.get("enqueued") is None:
        q["in"] = q["out"] = None
    elif o is not None and o.get("enqueued") is not None and dt > 0:
        q["in"] = max(0, q["enqueued"] - o["enqueued"]) / dt
        q["out"] = max(0, q["dequeued"] - o["dequeued"]) / dt
    else:
        q["in"], q["out"] = q["server_rates"]


def rates(view: dict, prev: dict | None):
    """Each list's and library queue's in/s and out/s (``_flow``, over the
    server's time between the two snapshots the counters came from) and
    each list's net/s (depth change since ``prev``; None at the first
    frame)."""
    prev = prev or {}
    old = {q["key"]: q for q in prev.get("lists", ())}
    dt = view["time"] - prev["time"] if prev else 0.0
    ct = 0.0
    if view.get("counted_at") is not None and prev.get("counted_at") is not None:
        ct = view["counted_at"] - prev["counted_at"]
    for q in view["lists"]:
        o = old.get(q["key"])
        q["net"] = (q["depth"] - o["depth"]) / dt if o is not None and dt > 0 else None
        _flow(q, o, ct)
    old = {(q["library"], q["name"]): q for q in prev.get("libraries", ())}
    for q in view["libraries"]:
        _flow(q, old.get((q["library"], q["name"])), ct)
    return view


def _shown(name: str) -> str:
    """A key as text a terminal shows whole: control characters (kombu's
    priority lists are "<queue>\\x06\\x16<n>") and bytes that are not UTF-8
    (surrogate-escaped by _txt) as \\xNN, not dropped; rich's markup
    ("[bold]") escaped too, so a key shows as it is named."""
    from rich.markup import escape
    if not name.isprintable():
        out = []
        for c in name:
            o = ord(c)
            if c.isprintable():
                out.append(c)
            elif 0xDC80 <= o <= 0xDCFF:
                out.append("\\x%02x" % (o - 0xDC00))
            else:
                out.append("\\x%02x" % o if o < 256 else "\\u%04x" % o)
        name = "".join(out)
    return escape(name)


def _rate(v) -> str:
    return "-" if v is None else "%.1f" % v


def _count(v) -> str:
    return "-" if v is None else "{:,}".format(v)


def _age(s):
    if s is None:
        return "-"
    return "%.1f s" % s if s < 120 else "%.1f min" % (s / 60)


def render(view: dict, target: str):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text
    info = view["info"]
    cl, mem, st = info.get("clients", {}), info.get("memory", {}), info.get("stats", {})
    keys = sum(int(kv_fields(v).get("keys", 0)) for v in info.get("keyspace", {}).values())
    head = Text("hotkv queues  %s  clients %s  blocked %s  memory %s  ops/s %s  keys %d" % (
        target, cl.get("connected_clients"), cl.get("blocked_clients"),
        mem.get("used_memory_human"), st.get("instantaneous_ops_per_sec"), keys), style="bold")
    parts = [head]
    if view["libraries"]:
        t = Table(title="Library queues", title_justify="left")
        for c in ("library", "queue", "states"):
            t.add_column(c)
        for q in view["libraries"]:
            states = ", ".join("%s %d" % kv for kv in q["states"].items())
            if q.get("unread"):
                states += " (%d records unread: over the budget)" % q["unread"]
            t.add_row(q["library"], _shown(q["name"]), states)
        counted = [q for q in view["libraries"] if q.get("enqueued") is not None]
        if counted:
            # Only with hotkv's counters: the library's queue lists' flow.
            parts.append(t)
            t = Table(title="Library queues in and out (their queue lists' counters)",
                      title_justify="left")
            for c in ("library", "queue", "in/s", "out/s", "enqueued", "dequeued"):
                t.add_column(c, justify="left" if c in ("library", "queue") else "right")
            for q in counted:
                t.add_row(q["library"], _shown(q["name"]), _rate(q["in"]), _rate(q["out"]),
                          _count(q["enqueued"]), _count(q["dequeued"]))
        parts.append(t)
    t = Table(title="Lists", title_justify="left", caption=view.get("caption"),
              caption_justify="left")
    t.add_column("key")
    for c in ("depth", "in/s", "out/s", "net/s", "enqueued", "dequeued", "oldest item"):
        t.add_column(c, justify="right")
    for q in view["lists"]:
        t.add_row(_shown(q["key"]), str(q["depth"]), _rate(q.get("in")), _rate(q.get("out")),
                  _rate(q.get("net")), _count(q.get("enqueued")), _count(q.get("dequeued")),
                  _age(q["oldest_age_s"]))
    parts.append(t if view["lists"] else Text("No lists."))
    t = Table(title="Stream groups", title_justify="left")
    for c in ("stream", "length", "group", "lag", "pending", "consumers (pending, idle ms)"):
        t.add_column(c, justify="right" if c in ("length", "lag", "pending") else "left")
    for s in view["streams"]:
        for g in s["groups"] or [None]:
            if g is None:
                t.add_row(_shown(s["key"]), str(s["length"]), "-", "-", "-", "")
                continue
            cons = ", ".join("%s (%s, %s)" % (c.get("name"), c.get("pending"), c.get("idle"))
                             for c in g["consumers"])
            t.add_row(_shown(s["key"]), str(s["length"]), _shown(str(g["name"])), str(g["lag"]),
                      str(g["pending"]), cons)
    parts.append(t if view["streams"] else Text("No streams."))
    return Group(*parts)


USAGE = """usage: hotkv queues [--url redis://host:port/db] [-h HOST] [-p PORT] [-a PASSWORD]
                    [--interval SECONDS] [--once] [--iterations N]
"""


def main(argv: list[str]) -> int:
    if "--help" in argv:   # the help needs no rich
        sys.stdout.write(USAGE)
        return 0
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        sys.stderr.write("hotkv queues needs rich: pip install 'hotkv[dashboard]'\n")
        return 1
    o = Options()
    interval, once, iterations = 1.0, False, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--help":
            sys.stdout.write(USAGE)
            return 0
        if a == "--once":
            once, i = True, i + 1
            continue
        if i + 1 >= len(argv):
            sys.stderr.write(USAGE)
            return 2
        v = argv[i + 1]
        if a in ("--url", "-u"):
            _apply_url(o, v)
        elif a == "-h":
            o.host = v
        elif a == "-p":
            o.port = int(v)
        elif a == "-a":
            o.password = v
        elif a == "--interval":
            interval = float(v)
        elif a == "--iterations":
            iterations = int(v)
        else:
            sys.stderr.write(USAGE)
            return 2
        i += 2
    try:
        conn = connect(o)
    except (OSError, ConnectionError) as e:
        sys.stderr.write("Could not connect to %s:%d: %s\n" % (o.host, o.port, e))
        return 1
    target = "%s:%d" % (o.host, o.port)
    console = Console()
    view = rates(collect(conn, o), None)
    if once:
        console.print(render(view, target))
        return 0
    n = 0
    try:
        with Live(render(view, target), console=console, auto_refresh=False) as live:
            while iterations is None or n < iterations:
                time.sleep(interval)
                view = rates(collect(conn, o), view)
                live.update(render(view, target), refresh=True)
                n += 1
    except KeyboardInterrupt:
        pass
    return 0


__all__ = ["main", "collect", "render"]
