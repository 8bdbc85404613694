"""The queue libraries' queues read through a client connection, for
``hotkv queues`` (hotkv/tools/queues_tui.py): RQ, Celery/kombu, dramatiq, BullMQ
and taskiq-redis, named and counted by state as the dashboard names them
(hotkv/http/state.py over hotkv/observe/queues.py, in-process), but with commands
valkey-server has too (SMEMBERS, LLEN, LRANGE, HLEN, HSCAN, ZCARD, SCARD, GET,
TYPE, XLEN, XINFO GROUPS, XRANGE), so it works against any server.

The key layouts are hotkv/observe/queues.py's constants; the defaults are the
dashboard's: dramatiq's namespace "dramatiq", taskiq's queue "taskiq" with
group "taskiq", Celery's results in the broker's database.

Invariants: read-only; the work of one refresh is bounded: the key names come
from the caller's SCAN (at most MAX_KEYS of them), every count is one
LLEN / ZCARD / SCARD / XINFO, and the only records read are Celery's
(whether a message carries an ETA, which queue an unacked message is from,
whether a result is a FAILURE) and, when Valkey's XINFO has no lag for
taskiq's group (an entry was deleted), the stream entries after the group's
last delivered one: at most ``MAX_BODIES`` records in all per refresh.  When
that budget runs out, the messages not read count as queued (not eta) and
the row says how many went unread (``unread``), so a count is never silently
wrong.  A reply that is an error (a key of another type) counts 0.

Where the counts can differ from hotkv/observe/queues.py's (which reads every
record): records that do not parse count as queued when not read; taskiq's
pending is the group's PEL count (XINFO), entries deleted while pending
included.
"""

from __future__ import annotations

import json

from ..observe.queues import (
    _BULL_STATES,
    CELERY_RESULT_PREFIX,
    DRAMATIQ_ACKS,
    DRAMATIQ_SUFFIXES,
    KOMBU_BINDING_PREFIX,
    KOMBU_PRIORITIES,
    KOMBU_SEP,
    KOMBU_UNACKED,
)
from .cli_tool import _txt

MAX_BODIES = 1000          # Celery record bodies read per refresh
PIPELINE = 500             # commands sent before their replies are read
DRAMATIQ_NAMESPACE = "dramatiq"
TASKIQ_QUEUE = "taskiq"
TASKIQ_GROUP = "taskiq"
RQ_REGISTRIES = (("scheduled", "scheduled"), ("started", "wip"), ("failed", "failed"),
                 ("finished", "finished"), ("deferred", "deferred"), ("canceled", "canceled"))


def pipe(conn, cmds) -> list:
    """The replies to ``cmds``, sent PIPELINE at a time (one round trip each)."""
    out = []
    for i in range(0, len(cmds), PIPELINE):
        chunk = cmds[i:i + PIPELINE]
        for c in chunk:
            conn.send(c)
        out.extend(conn.read() for _ in chunk)
    return out


def _int(r) -> int:
    return r.value if r.kind == "int" else 0


def _members(r) -> list:
    return [m.value for m in r.value] if r.kind in ("array", "set") else []


def _json(raw):
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return None


class _Budget:
    def __init__(self, n: int):
        self.left = n

    def take(self, n: int) -> int:
        got = max(0, min(n, self.left))
        self.left -= got
        return got


def _row(library, name, states, unread=0) -> dict:
    return {"library": library, "name": name, "states": states, "unread": unread}


def _rq(conn, keys) -> list:
    names = {_txt(k)[len("rq:queue:"):] for k in keys if k.startswith(b"rq:queue:")}
    if b"rq:queues" in keys:
        names.update(_txt(m)[len("rq:queue:"):]
                     for m in _members(conn.call("SMEMBERS", "rq:queues")))
    names = sorted(names)
    cmds = []
    for name in names:
        cmds.append(("LLEN", "rq:queue:" + name))
        cmds.extend(("ZCARD", "rq:%s:%s" % (reg, name)) for _, reg in RQ_REGISTRIES)
    counts = [_int(r) for r in pipe(conn, cmds)]
    step = 1 + len(RQ_REGISTRIES)
    rows = []
    for i, name in enumerate(names):
        c = counts[i * step:(i + 1) * step]
        states = {"queued": c[0]}
        states.update((state, n) for (state, _), n in zip(RQ_REGISTRIES, c[1:]))
        rows.append(_row("rq", name, states))
    return rows


def _celery_headers(msg) -> dict | None:
    """A kombu message's headers, or None when it is not one (skipped, as
    hotkv/observe/queues.py skips it)."""
    if not isinstance(msg, dict):
        return None
    return msg.get("headers") or {}


def _celery(conn, keys, budget) -> list:
    names = set()
    bindings = sorted(k for k in keys if k.startswith(KOMBU_BINDING_PREFIX))
    for r in pipe(conn, [("SMEMBERS", k) for k in bindings]):
        for m in _members(r):
            parts = _txt(m).split(KOMBU_SEP)
            if len(parts) == 3:
                names.add(parts[2])
    rows, owner = {}, {}     # owner: task id -> queue, for FAILURE's row

    def row(name):
        if name not in rows:
            rows[name] = _row("celery", name, {"queued": 0, "eta": 0, "unacked": 0,
                                               "FAILURE": 0})
        return rows[name]

    for name in sorted(names):
        q = row(name)
        lists = [name] + [name + KOMBU_SEP + str(p) for p in KOMBU_PRIORITIES]
        lens = [_int(r) for r in pipe(conn, [("LLEN", k) for k in lists])]
        reads = [(k, n, budget.take(n)) for k, n in zip(lists, lens) if n]
        # kombu LPUSHes and BRPOPs: the tail is served next, so read from it.
        got = pipe(conn, [("LRANGE", k, -take, -1) for k, _, take in reads if take])
        for (k, n, take), r in zip([x for x in reads if x[2]], got):
            for m in _members(r):
                msg = _json(m)
                headers = _celery_headers(msg)
                if headers is None:
                    continue
                owner[str(headers.get("id") or (msg.get("properties") or {})
                          .get("correlation_id") or "")] = name
                q["states"]["eta" if headers.get("eta") else "queued"] += 1
        for _, n, take in reads:
            q["states"]["queued"] += n - take
            q["unread"] += n - take
    # In flight: kombu's unacked hash, [message, exchange, routing key].
    total = _int(conn.call("HLEN", KOMBU_UNACKED))
    seen, cursor = 0, b"0"
    while total and budget.left > 0:
        r = conn.call("HSCAN", KOMBU_UNACKED, cursor, "COUNT", str(min(budget.left, 1000)))
        if r.kind != "array":
            break
        cursor = r.value[0].value
        fields = r.value[1].value
        for v in fields[1::2][:budget.take(len(fields) // 2)]:
            seen += 1
            rec = _json(v.value)
            if not isinstance(rec, list) or not rec:
                continue
            queue = rec[2] if len(rec) > 2 and rec[2] else "celery"
            headers = _celery_headers(rec[0])
            if headers is None:
                continue
            q = row(queue)
            owner[str(headers.get("id") or "")] = queue
            q["states"]["unacked"] += 1
            if headers.get("eta"):
                q["states"]["eta"] += 1
        if cursor == b"0":
            break
    if total > seen:
        row("celery")["unread"] += total - seen
    # Failed: the result backend's records whose status is FAILURE.
    results = sorted(k for k in keys if k.startswith(CELERY_RESULT_PREFIX))
    readable = results[:budget.take(len(results))]
    for k, r in zip(readable, pipe(conn, [("GET", k) for k in readable])):
        meta = _json(r.value) if r.kind == "bulk" else None
        if isinstance(meta, dict) and meta.get("status") == "FAILURE":
            row(owner.get(_txt(k[len(CELERY_RESULT_PREFIX):]), "celery"))["states"][
                "FAILURE"] += 1
    if len(results) > len(readable):
        row("celery")["unread"] += len(results) - len(readable)
    return [rows[n] for n in sorted(rows)]


def _dramatiq(conn, keys, namespace) -> list:
    ns = namespace.encode() + b":"
    names = set()
    for k in keys:
        if not k.startswith(ns) or k.startswith(ns + b"__"):
            continue
        rest = _txt(k[len(ns):])
        for suffix in DRAMATIQ_SUFFIXES:
            if rest.endswith(suffix):
                rest = rest[:-len(suffix)]
                break
        names.add(rest)
    rows = {}
    cmds = []
    for name in sorted(names):
        base = namespace + ":" + name
        cmds += [("LLEN", base), ("LLEN", base + ".DQ"), ("ZCARD", base + ".XQ")]
    counts = [_int(r) for r in pipe(conn, cmds)]
    for i, name in enumerate(sorted(names)):
        queued, delayed, dead = counts[3 * i:3 * i + 3]
        rows[name] = _row("dramatiq", name, {"queued": queued, "delayed": delayed,
                                             "unacked": 0, "dead-lettered": dead})
    # In flight: <ns>:__acks__.<worker id>.<queue> sets of message ids.
    acks = sorted(k for k in keys if k.startswith(ns + DRAMATIQ_ACKS))
    for k, r in zip(acks, pipe(conn, [("SCARD", k) for k in acks])):
        if r.kind != "int":
            continue
        queue = _txt(k[len(ns + DRAMATIQ_ACKS):]).split(".", 1)[-1]
        name = queue[:-3] if queue.endswith(".DQ") else queue
        q = rows.setdefault(name, _row("dramatiq", name, {"queued": 0, "delayed": 0,
                                                          "unacked": 0, "dead-lettered": 0}))
        q["states"]["unacked"] += r.value
    return [rows[n] for n in sorted(rows)]


def _taskiq(conn, keys, types, key, group, budget) -> list:
    if key.encode() not in keys:
        return []
    t = types.get(key.encode()) or _txt(conn.call("TYPE", key).value)
    if t == "list":
        return [_row("taskiq", key, {"queued": _int(conn.call("LLEN", key))})]
    if t != "stream":
        return []
    groups = conn.call("XINFO", "GROUPS", key)
    g = None
    for gr in groups.value if groups.kind == "array" else ():
        v = gr.value or []
        d = {_txt(v[i].value): v[i + 1] for i in range(0, len(v) - 1, 2)}
        if d.get("name") is not None and _txt(d["name"].value) == group:
            g = d
    if g is None:
        return [_row("taskiq", key, {"queued": _int(conn.call("XLEN", key)), "pending": 0})]
    unread = 0
    lag = g.get("lag")
    if lag is not None and lag.kind == "int":
        queued = lag.value
    else:
        # No lag (entries deleted): count the entries after the group's last
        # delivered one, up to the budget.
        want = budget.take(budget.left)
        r = conn.call("XRANGE", key, "(" + _txt(g["last-delivered-id"].value), "+",
                      "COUNT", str(want + 1))
        queued = len(r.value) if r.kind == "array" else 0
        budget.left += max(0, want - queued)
        if queued > want:
            queued, unread = want, 1
    return [_row("taskiq", key, {"queued": queued, "pending": _int(g["pending"])}, unread)]


def _bullmq(conn, keys) -> list:
    names = sorted({_txt(k)[len("bull:"):k.rindex(b":")] for k in keys
                    if k.startswith(b"bull:") and (k.endswith(b":meta") or k.endswith(b":id"))})
    state_keys = ["bull:%s:%s" % (n, s) for n in names for s in _BULL_STATES]
    types = [_txt(r.value) for r in pipe(conn, [("TYPE", k) for k in state_keys])]
    cmds = [("LLEN" if t == "list" else "ZCARD", k) for k, t in zip(state_keys, types)
            if t in ("list", "zset")]
    counts = iter(_int(r) for r in pipe(conn, cmds))
    found = [next(counts) if t in ("list", "zset") else 0 for t in types]
    n = len(_BULL_STATES)
    return [_row("bullmq", name, dict(zip(_BULL_STATES, found[i * n:(i + 1) * n])))
            for i, name in enumerate(names)]


def libraries(conn, keys, types=None, dramatiq_namespace=DRAMATIQ_NAMESPACE,
              taskiq_queue=TASKIQ_QUEUE, taskiq_group=TASKIQ_GROUP) -> list:
    """Every library queue found among ``keys`` (bytes, from SCAN; ``types``:
    key -> TYPE name where known), as rows {library, name, states, unread},
    in the dashboard's order: RQ, Celery, dramatiq, BullMQ, taskiq."""
    keys = set(keys)
    types = types or {}
    budget = _Budget(MAX_BODIES)
    return (_rq(conn, keys) + _celery(conn, keys, budget)
            + _dramatiq(conn, keys, dramatiq_namespace) + _bullmq(conn, keys)
            + _taskiq(conn, keys, types, taskiq_queue, taskiq_group, budget))


__all__ = ["libraries", "pipe", "MAX_BODIES"]
