"""Queues as hotkv holds them: the reads of lists, streams with their groups,
and the key layouts of the queue libraries hotkv runs (RQ 2-3, kombu 5 /
Celery 5, dramatiq 1-2, taskiq-redis 1, BullMQ 5-6), shared by the test
inspector (``hotkv.testing.inspect``, which documents the views) and the
dashboard (``hotkv.http``).

Invariants: every function here takes a ``hotkv.server.Server`` and must run
on its loop thread, between two commands; reading changes nothing (no lazy
expiry, no access-time stamp, no hit/miss count, no notification): a key past
its expiry time reads as absent and is left for the server to delete; the
views returned are copies sharing no mutable state with the server.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from ..protocol.util import compile_glob
from ..types.hashes import HashValue
from ..types.lists import ListValue
from ..types.sets import SetValue
from ..types.stream import Stream
from ..types.stream_ids import MAX_ID, id_bytes
from ..types.table import TYPE_NAMES
from ..types.zsets import ZSetValue


def now_ms(server) -> int:
    """The server's "now" in unix ms: its clock's (the virtual clock of issue 16)."""
    return server.clock.ms()


def _b(s) -> bytes:
    if isinstance(s, bytes):
        return s
    if isinstance(s, (bytearray, memoryview)):
        return bytes(s)
    return str(s).encode()


def sid(i: int) -> str:
    """A stream ID as its "ms-seq" text."""
    return id_bytes(i).decode()


def to_python(value):
    """A stored value as plain Python objects (see the module docstring)."""
    t = type(value)
    if t is bytes:
        return value
    if t is bytearray:
        return bytes(value)
    if t is ListValue:
        return list(value)
    if t is HashValue:
        return dict(value)
    if t is SetValue:
        return set(value)
    if t is ZSetValue:
        return [(m, s) for s, m in value.sl]
    if t is Stream:
        return [(sid(i), _fields(items)) for i, items in value.range(0, MAX_ID)]
    raise TypeError("no Python view of %r" % (t,))


def _fields(items) -> dict:
    return dict(zip(items[0::2], items[1::2]))


# ----------------------------------------------------------------------
# Views
# ----------------------------------------------------------------------

@dataclass(frozen=True)
class QueueInfo:
    """A list used as a queue.  ``head`` is index 0 (LPUSH's end), ``tail``
    index -1; ``oldest`` is the end a consumer takes next: the tail for a
    producer that pushes left (LPUSH + RPOP/BRPOP/BLMOVE RIGHT), the head
    for one that pushes right.  ``waiting_consumers``: clients blocked on
    the key (BLPOP, BRPOP, BLMOVE...).  ``processing``: the processing
    list's items when one was named (reliable-queue pattern)."""
    key: bytes
    depth: int
    head: bytes | None
    tail: bytes | None
    oldest: bytes | None
    items: list
    waiting_consumers: int
    processing: list | None = None


@dataclass(frozen=True)
class PendingEntry:
    id: str
    consumer: bytes
    idle_ms: int
    deliveries: int


@dataclass(frozen=True)
class ConsumerInfo:
    name: bytes
    pending: int
    idle_ms: int              # since the consumer was last seen (XINFO's idle)
    inactive_ms: int          # since its last successful read; -1 if never
    pending_entries: tuple    # PendingEntry, oldest first


@dataclass(frozen=True)
class GroupInfo:
    name: bytes
    last_delivered_id: str
    entries_read: int | None
    lag: int | None           # None when Valkey's XINFO would answer nil
    pending: int
    consumers: dict           # name -> ConsumerInfo
    oldest_pending: PendingEntry | None


@dataclass(frozen=True)
class StreamInfo:
    key: bytes
    length: int
    first_id: str | None
    last_id: str
    entries_added: int
    groups: dict              # name -> GroupInfo
    waiting_consumers: int    # clients blocked on the key (XREAD/XREADGROUP BLOCK)


@dataclass(frozen=True)
class Job:
    """One job of a queue library, as its key layout holds it."""
    id: str
    name: str | None = None
    queue: str | None = None
    args: object = None
    raw: object = None        # the library's own record (dict / decoded JSON)


@dataclass
class LibraryQueue:
    """One queue of a library, its jobs (ids, as the library names them) by
    state.  ``queued``: waiting to be taken, oldest first; ``delayed``:
    scheduled for later, with ``when[id]`` its due time in unix ms;
    ``in_flight``: taken, not finished; ``failed``: dead-lettered / failed.
    Other states a library names are in ``other`` under its own name (RQ's
    "finished", BullMQ's "completed"); ``states`` has every state under the
    library's own name (RQ: queued, scheduled, started, failed, finished,
    deferred, canceled, intermediate; Celery: queued, eta, unacked,
    FAILURE; dramatiq: queued, delayed, unacked, dead-lettered; taskiq:
    queued, pending; BullMQ: wait, paused, prioritized, active, delayed,
    failed, completed, waiting-children).  RQ 2-3's "intermediate": jobs a
    worker moved off the queue list and has not started (stuck there when
    the worker died in between), with ``first_seen[id]`` (unix ms) once
    RQ's maintenance has seen them there.  ``jobs[id]``: the job's record."""
    name: str
    queued: list = field(default_factory=list)
    delayed: list = field(default_factory=list)
    in_flight: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    other: dict = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    when: dict = field(default_factory=dict)
    jobs: dict = field(default_factory=dict)     # id -> Job
    first_seen: dict = field(default_factory=dict)


# ----------------------------------------------------------------------
# The reads (on the loop thread)
# ----------------------------------------------------------------------

def _live(server, db: int, key: bytes):
    d = server.dbs[db]
    value = d.data.get(key)
    if value is not None and d.expires:
        when = d.expires.get(key)
        if when is not None and when <= now_ms(server):
            return None
    return value


def _live_keys(server, db: int):
    d = server.dbs[db]
    if not d.expires:
        return list(d.data)
    now = now_ms(server)
    exp = d.expires
    return [k for k in d.data if exp.get(k, now + 1) > now]


def _keys(server, pattern: bytes, db: int):
    match = compile_glob(pattern)
    return sorted(k for k in _live_keys(server, db) if match(k))


def _type(server, key: bytes, db: int):
    value = _live(server, db, key)
    return None if value is None else TYPE_NAMES[type(value)].decode()


def _get(server, key: bytes, db: int):
    value = _live(server, db, key)
    return None if value is None else to_python(value)


def _pttl(server, key: bytes, db: int):
    if _live(server, db, key) is None:
        return None
    when = server.dbs[db].expires.get(key)
    return None if when is None else max(0, when - now_ms(server))


def _dump(server, db: int):
    return {k: to_python(server.dbs[db].data[k]) for k in _live_keys(server, db)}


def _waiting(server, db: int, key: bytes) -> int:
    return len(server.dbs[db].blocking.get(key) or ())


def _list_items(server, db, key):
    value = _live(server, db, key)
    if value is None:
        return None
    if type(value) is not ListValue:
        raise TypeError("%r is a %s, not a list" % (key, TYPE_NAMES[type(value)].decode()))
    return list(value)


def _queue(server, key, db, pushed, processing):
    items = _list_items(server, db, key)
    waiting = _waiting(server, db, key)
    if items is None:
        if not waiting:
            return None
        items = []     # an empty list has no key: consumers blocked on it still count
    head, tail = (items[0], items[-1]) if items else (None, None)
    proc = None
    if processing is not None:
        proc = _list_items(server, db, processing) or []
    return QueueInfo(key=key, depth=len(items), head=head, tail=tail,
                     oldest=tail if pushed == "left" else head, items=items,
                     waiting_consumers=waiting, processing=proc)


def _pending(s_now: int, i: int, nack) -> PendingEntry:
    return PendingEntry(id=sid(i), consumer=nack.consumer.name,
                        idle_ms=max(0, s_now - nack.delivery_time),
                        deliveries=nack.delivery_count)


def _stream(server, key, db):
    value = _live(server, db, key)
    if value is None:
        return None
    if type(value) is not Stream:
        raise TypeError("%r is a %s, not a stream" % (key, TYPE_NAMES[type(value)].decode()))
    now = now_ms(server)
    groups = {}
    for g in value.sorted_groups() if value.groups else ():
        consumers = {}
        for c in g.sorted_consumers():
            entries = tuple(_pending(now, i, n) for i, n in c.pel.items())
            consumers[c.name] = ConsumerInfo(
                name=c.name, pending=len(c.pel), idle_ms=max(0, now - c.seen_time),
                inactive_ms=-1 if c.active_time == -1 else max(0, now - c.active_time),
                pending_entries=entries)
        oldest = None
        for i, n in g.pel.items():
            oldest = _pending(now, i, n)
            break
        groups[g.name] = GroupInfo(
            name=g.name, last_delivered_id=sid(g.last_id),
            entries_read=None if g.entries_read < 0 else g.entries_read,
            lag=value.group_lag(g), pending=len(g.pel), consumers=consumers,
            oldest_pending=oldest)
    return StreamInfo(key=key, length=len(value),
                      first_id=sid(value.first_id) if len(value) else None,
                      last_id=sid(value.last_id), entries_added=value.entries_added,
                      groups=groups, waiting_consumers=_waiting(server, db, key))


# -- library layouts ------------------------------------------------------

def _text(b) -> str:
    return b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else str(b)


def _zmembers(server, db, key) -> list:
    value = _live(server, db, key)
    if value is None or type(value) is not ZSetValue:
        return []
    return [(_text(m), s) for s, m in value.sl]


def _json(raw):
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return None


RQ_QUEUE_PREFIX = b"rq:queue:"
RQ_INTERMEDIATE = b":intermediate"     # RQ 2-3: rq:queue:<q>:intermediate (a list)
RQ_FIRST_SEEN = b":intermediate:first_seen:"   # + job id: a string, unix seconds


def _rq_names(server, db) -> list:
    """RQ's queue names: the members of ``rq:queues`` (``rq:queue:<name>``
    keys), and any other ``rq:queue:<name>`` list that is not a queue's
    intermediate list (``<q>:intermediate``) nor one of its strings
    (``<q>:intermediate:first_seen:<job>``)."""
    names = set()
    queues_set = _live(server, db, b"rq:queues")
    if type(queues_set) is SetValue:
        names.update(_text(k[len(RQ_QUEUE_PREFIX):]) for k in queues_set
                     if k.startswith(RQ_QUEUE_PREFIX))
    listed = set(names)
    d = server.dbs[db]
    for k in _live_keys(server, db):
        if not k.startswith(RQ_QUEUE_PREFIX) or type(d.data.get(k)) is not ListValue:
            continue
        name = _text(k[len(RQ_QUEUE_PREFIX):])
        if k.endswith(RQ_INTERMEDIATE) and name not in listed:
            name = name[:-len(RQ_INTERMEDIATE)]     # a queue's intermediate list
        names.add(name)
    return sorted(names)


def _rq(server, db):
    d = server.dbs[db]
    out = {}
    for name in _rq_names(server, db):
        q = LibraryQueue(name=name)
        key = RQ_QUEUE_PREFIX + name.encode()
        q.queued = [_text(x) for x in _list_items(server, db, key) or ()]
        # RQ 2-3's workers LMOVE a job into the intermediate list, then add
        # it to the started registry: a job left there (a worker killed in
        # between) is the stuck state RQ's maintenance fails after a minute.
        inter = _live(server, db, key + RQ_INTERMEDIATE)
        intermediate = [_text(x) for x in inter] if type(inter) is ListValue else []
        first_seen = {}
        for jid in intermediate:
            seen = _live(server, db, key + RQ_FIRST_SEEN + jid.encode())
            if type(seen) is bytes:
                try:
                    first_seen[jid] = int(float(seen) * 1000)
                except ValueError:
                    pass
        reg = {}
        for state in ("scheduled", "wip", "failed", "finished", "deferred", "canceled"):
            reg[state] = _zmembers(server, db, b"rq:%s:%s" % (state.encode(), name.encode()))
        q.delayed = [m for m, _ in reg["scheduled"]]
        q.when = {m: int(s * 1000) for m, s in reg["scheduled"]}
        # Started-registry members are "<job id>:<execution id>" since RQ 2.
        q.in_flight = [m.split(":", 1)[0] for m, _ in reg["wip"]]
        q.failed = [m for m, _ in reg["failed"]]
        q.other = {"finished": [m for m, _ in reg["finished"]],
                   "deferred": [m for m, _ in reg["deferred"]],
                   "canceled": [m for m, _ in reg["canceled"]],
                   "intermediate": intermediate}
        q.first_seen = first_seen
        q.states = {"queued": q.queued, "scheduled": q.delayed, "started": q.in_flight,
                    "failed": q.failed, **q.other}
        for jid in {*q.queued, *q.delayed, *q.in_flight, *q.failed,
                    *(j for ids in q.other.values() for j in ids)}:
            h = d.data.get(b"rq:job:" + jid.encode())
            if type(h) is HashValue:
                raw = {_text(k): v for k, v in h.items()}
                desc = raw.get("description")
                q.jobs[jid] = Job(id=jid, name=_text(desc) if desc is not None else None,
                                  queue=_text(raw.get("origin", b"")), raw=raw)
        out[name] = q
    return out


# Key layouts, module-level so that hotkv/tools/queues_remote.py (``hotkv queues``,
# reading through a client connection) names the same keys.
_KOMBU_SEP = "\x06\x16"                      # kombu's field separator
KOMBU_SEP = _KOMBU_SEP
KOMBU_BINDING_PREFIX = b"_kombu.binding."      # set per exchange: rk SEP pattern SEP queue
KOMBU_PRIORITIES = range(1, 10)                # queue SEP p: kombu's priority lists
KOMBU_UNACKED = b"unacked"                     # hash: tag -> [message, exchange, routing key]
CELERY_RESULT_PREFIX = b"celery-task-meta-"    # the Redis result backend's records
DRAMATIQ_SUFFIXES = (".XQ.msgs", ".DQ.msgs", ".msgs", ".XQ", ".DQ")
DRAMATIQ_ACKS = b"__acks__."                   # <ns>:__acks__.<worker>.<queue>: sets of ids


def _celery_message(raw, queue: str):
    msg = _json(raw)
    if not isinstance(msg, dict):
        return None
    headers = msg.get("headers") or {}
    props = msg.get("properties") or {}
    body = msg.get("body")
    args = None
    if msg.get("content-type") == "application/json" and isinstance(body, str):
        try:
            data = base64.b64decode(body) if props.get("body_encoding") == "base64" else body
            args = json.loads(data)
        except (ValueError, TypeError):
            args = None
    return Job(id=str(headers.get("id") or props.get("correlation_id") or ""),
               name=headers.get("task"), queue=queue, args=args, raw=msg)


def _eta_ms(eta):
    """Celery's ETA header (ISO 8601) as unix ms; None if unreadable."""
    import datetime
    try:
        when = datetime.datetime.fromisoformat(str(eta))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


def _celery(server, db, backend_db):
    # Queues: from kombu's bindings (the routing table), plus bare lists
    # of Celery messages (a queue bound by another process).
    names = set()
    for k in _live_keys(server, db):
        if k.startswith(KOMBU_BINDING_PREFIX):
            members = _live(server, db, k)
            if type(members) is SetValue:
                for m in members:
                    parts = _text(m).split(_KOMBU_SEP)
                    if len(parts) == 3:
                        names.add(parts[2])
    out = {}
    for name in sorted(names):
        q = LibraryQueue(name=name)
        keys = [name.encode()] + [(name + _KOMBU_SEP + str(p)).encode() for p in KOMBU_PRIORITIES]
        for key in keys:
            # kombu LPUSHes and BRPOPs: the oldest is at the tail.
            for raw in reversed(_list_items(server, db, key) or ()):
                job = _celery_message(raw, name)
                if job is None:
                    continue
                q.jobs[job.id] = job
                if job.raw.get("headers", {}).get("eta"):
                    q.delayed.append(job.id)
                    q.when[job.id] = _eta_ms(job.raw["headers"]["eta"])
                else:
                    q.queued.append(job.id)
        out[name] = q
    unacked = _live(server, db, KOMBU_UNACKED)
    if type(unacked) is HashValue:
        for tag, raw in unacked.items():
            rec = _json(raw)
            if not isinstance(rec, list) or not rec:
                continue
            queue = rec[2] if len(rec) > 2 and rec[2] else "celery"
            q = out.setdefault(queue, LibraryQueue(name=queue))
            job = _celery_message(json.dumps(rec[0]), queue)
            if job is None:
                continue
            q.jobs[job.id] = job
            q.in_flight.append(job.id)
            eta = job.raw.get("headers", {}).get("eta")
            if eta:
                q.delayed.append(job.id)
                q.when[job.id] = _eta_ms(eta)
    prefix = CELERY_RESULT_PREFIX
    for k in _live_keys(server, backend_db):
        if k.startswith(prefix):
            meta = _json(_live(server, backend_db, k))
            if isinstance(meta, dict) and meta.get("status") == "FAILURE":
                tid = _text(k[len(prefix):])
                queue = next((n for n, q in out.items() if tid in q.jobs), None)
                q = out.setdefault(queue or "celery", LibraryQueue(name=queue or "celery"))
                q.failed.append(tid)
                q.jobs.setdefault(tid, Job(id=tid, queue=q.name, raw=meta))
    for q in out.values():
        q.states = {"queued": q.queued, "eta": q.delayed, "unacked": q.in_flight,
                    "FAILURE": q.failed}
    return out


def _dramatiq_job(raw, queue):
    msg = _json(raw)
    if not isinstance(msg, dict):
        return None
    return Job(id=str(msg.get("message_id") or (msg.get("options") or {})
                      .get("redis_message_id", "")),
               name=msg.get("actor_name"), queue=queue, args=msg.get("args"), raw=msg)


def _dramatiq(server, namespace, db):
    ns = namespace.encode() + b":"
    names = set()
    for k in _live_keys(server, db):
        if not k.startswith(ns) or k.startswith(ns + b"__"):
            continue
        rest = _text(k[len(ns):])
        for suffix in DRAMATIQ_SUFFIXES:
            if rest.endswith(suffix):
                rest = rest[:-len(suffix)]
                break
        names.add(rest)
    out = {}
    for name in sorted(names):
        q = LibraryQueue(name=name)
        base = ns + name.encode()
        for key, target in ((base, q.queued), (base + b".DQ", q.delayed)):
            msgs = _live(server, db, key + b".msgs")
            msgs = msgs if type(msgs) is HashValue else {}
            # dramatiq's enqueue RPUSHes, its fetch takes from the left.
            for rid in _list_items(server, db, key) or ():
                job = _dramatiq_job(msgs.get(rid), name)
                jid = _text(rid)
                target.append(jid)
                if job is not None:
                    q.jobs[jid] = job
                    eta = (job.raw.get("options") or {}).get("eta")
                    if target is q.delayed and eta is not None:
                        q.when[jid] = eta
        xmsgs = _live(server, db, base + b".XQ.msgs")
        xmsgs = xmsgs if type(xmsgs) is HashValue else {}
        for jid, _ in _zmembers(server, db, base + b".XQ"):
            q.failed.append(jid)
            job = _dramatiq_job(xmsgs.get(jid.encode()), name)
            if job is not None:
                q.jobs[jid] = job
        out[name] = q
    # In flight: <ns>:__acks__.<worker id>.<queue> sets of message ids
    # (messages fetched, not acked: their bodies stay in <queue>.msgs).
    acks = ns + DRAMATIQ_ACKS
    for k in _live_keys(server, db):
        if not k.startswith(acks):
            continue
        members = _live(server, db, k)
        if type(members) is not SetValue:
            continue
        queue = _text(k[len(acks):]).split(".", 1)[-1]
        delayed = queue.endswith(".DQ")
        name = queue[:-3] if delayed else queue
        q = out.setdefault(name, LibraryQueue(name=name))
        msgs = _live(server, db, ns + queue.encode() + b".msgs")
        for rid in sorted(members):
            jid = _text(rid)
            q.in_flight.append(jid)
            if type(msgs) is HashValue and jid not in q.jobs:
                job = _dramatiq_job(msgs.get(rid), name)
                if job is not None:
                    q.jobs[jid] = job
    for q in out.values():
        q.states = {"queued": q.queued, "delayed": q.delayed, "unacked": q.in_flight,
                    "dead-lettered": q.failed}
    return out


def _taskiq_job(raw, queue):
    msg = _json(raw)
    if isinstance(msg, dict):
        return Job(id=str(msg.get("task_id", "")), name=msg.get("task_name"), queue=queue,
                   args=msg.get("args"), raw=msg)
    return None


def _taskiq(server, key, db, group):
    value = _live(server, db, key)
    if value is None:
        return None
    name = _text(key)
    q = LibraryQueue(name=name)
    if type(value) is ListValue:
        # ListQueueBroker: LPUSH, BRPOP -- the oldest at the tail.
        for n, raw in enumerate(reversed(value)):
            job = _taskiq_job(raw, name)
            jid = job.id if job is not None else str(n)
            q.queued.append(jid)
            if job is not None:
                q.jobs[jid] = job
        q.states = {"queued": q.queued}
        return q
    if type(value) is not Stream:
        raise TypeError("%r is a %s, not a taskiq queue" % (key, TYPE_NAMES[type(value)].decode()))
    g = value.group(group) if value.groups else None
    after = g.last_id if g is not None else 0
    pending = g.pel if g is not None else {}
    for i, items in value.range(0, MAX_ID):
        data = _fields(items).get(b"data")
        job = _taskiq_job(data, name)
        eid = sid(i)
        if job is not None:
            q.jobs[eid] = job
        if i > after:
            q.queued.append(eid)
        elif i in pending:
            q.in_flight.append(eid)
    q.states = {"queued": q.queued, "pending": q.in_flight}
    return q


_BULL_STATES = ("wait", "paused", "prioritized", "active", "delayed", "failed", "completed",
                "waiting-children")


def _bullmq(server, prefix, db):
    pre = prefix.encode() + b":"
    names = set()
    for k in _live_keys(server, db):
        if k.startswith(pre) and (k.endswith(b":meta") or k.endswith(b":id")):
            names.add(_text(k[len(pre):k.rindex(b":")]))
    out = {}
    for name in sorted(names):
        base = pre + name.encode() + b":"
        q = LibraryQueue(name=name)
        lists = {}
        for state in _BULL_STATES:
            key = base + state.encode()
            value = _live(server, db, key)
            if type(value) is ListValue:
                # BullMQ LPUSHes and takes from the right: oldest at the tail.
                lists[state] = [_text(x) for x in reversed(value)]
            elif type(value) is ZSetValue:
                lists[state] = [m for m, _ in _zmembers(server, db, key)]
                if state == "delayed":
                    # score = due ms * 0x1000 + a counter (BullMQ's delayed key)
                    q.when = {m: int(s) >> 12 for m, s in _zmembers(server, db, key)}
            else:
                lists[state] = []
        q.queued = lists["wait"] + lists["paused"] + lists["prioritized"]
        q.delayed = lists["delayed"]
        q.in_flight = lists["active"]
        q.failed = lists["failed"]
        q.states = dict(lists)
        q.other = {"completed": lists["completed"],
                   "waiting-children": lists["waiting-children"],
                   "paused": lists["paused"], "prioritized": lists["prioritized"]}
        for jid in {j for ids in lists.values() for j in ids}:
            h = _live(server, db, base + jid.encode())
            if type(h) is HashValue:
                raw = {_text(k): _text(v) for k, v in h.items()}
                q.jobs[jid] = Job(id=jid, name=raw.get("name"), queue=name,
                                  args=_json(raw.get("data")), raw=raw)
        out[name] = q
    return out


__all__ = ["QueueInfo", "StreamInfo", "GroupInfo", "ConsumerInfo", "PendingEntry",
           "LibraryQueue", "Job", "now_ms", "to_python", "sid"]
