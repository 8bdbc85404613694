"""What one user may see of the dashboard (``/``, ``/api/state``) and of
``/metrics``: the server's own ACL (hotkv.clients.acl_rules ``User.check``, the
dispatcher's check) asked about the commands that would show the same data
over the Redis port, so a user sees over HTTP what its ACL would let it read
with redis-cli, and no more.

A page needs every command of its ``PAGES`` entry, else 403 with the first
one missing (``refusal``: "user 'bob' may not run 'slowlog|get'"):

* ``/metrics``: INFO (every redis_* series comes from ``INFO all``), SCAN
  and TYPE (its per-key series name the lists and streams a scan found);
* ``/api/state`` and the page ``/`` that draws it: the same, plus
  SLOWLOG GET (the slowlog with its arguments) and LATENCY LATEST.

Within a page, what depends on keys is filtered, never refused (``view``):
a list is shown only if the user may run LLEN on it, its oldest item's age
(read from the item) only if also LINDEX; a stream only if XINFO STREAM and
XINFO GROUPS on it, its consumers only if XINFO CONSUMERS; the plots'
history only for the keys shown (the lists and streams are the snapshot's
top ones, so a user with narrow key patterns may see fewer than
``http-metrics-top-keys``).  The slowlog is shown whole, as SLOWLOG GET
shows it whatever the key patterns.  What needs every key -- the per-db type
counts and the number of lists and streams (TYPE over the whole keyspace),
the queue libraries' views (their readers read job records: LRANGE,
HGETALL, ZRANGE, SMEMBERS) -- is shown only to a user who may run those
commands on every key (``~*`` or allkeys, hotkv.clients.acl ``all_keys_readable``);
otherwise the types are ``{}``, the totals ``null`` and the libraries ``[]``.
redis_exporter's documented user (``+client +ping +info +config|get
+cluster|info +slowlog +latency +memory +select +get +scan +xinfo +type
+pfcount +strlen +llen +scard +zcard +hlen +xlen +eval allkeys``) reads
every page; it sees no list item's age and no library queue (no LINDEX,
LRANGE or HGETALL).

Invariants: the shared snapshot (hotkv.http.state.Sampler) is never changed
here: ``view`` builds a filtered copy; a user with every right
(``User.unrestricted``) gets the snapshot as it is; the work is bounded by
the snapshot's own bound (twice ``http-metrics-top-keys`` lists and
top-keys streams).
"""

from __future__ import annotations

from ..clients.acl import all_keys_readable
from ..clients.acl_rules import lookup_command

# The commands alone: a line without its key is checked without keys.
_BASE = ((b"INFO", b"all"), (b"SCAN", b"0"), (b"TYPE",))
PAGES = {
    b"/metrics": _BASE,
    b"/api/state": _BASE + ((b"SLOWLOG", b"GET"), (b"LATENCY", b"LATEST")),
}
PAGES[b"/"] = PAGES[b"/api/state"]

# Read on every key: the type counts and totals, and the library views.
_EVERY_KEY_TYPES = ((b"TYPE", b"*"),)
_EVERY_KEY_LIBRARIES = ((b"TYPE", b"*"), (b"LRANGE", b"*", b"0", b"-1"),
                        (b"HGETALL", b"*"), (b"ZRANGE", b"*", b"0", b"-1"),
                        (b"SMEMBERS", b"*"))


class _AsClient:
    """What hotkv.clients.acl.all_keys_readable reads of a client: its user."""
    __slots__ = ("user",)

    def __init__(self, user):
        self.user = user


def _command(argv):
    """The registry's command (or subcommand) an argv names."""
    cmd = lookup_command(argv[0])
    if cmd is not None and cmd.subcommands and len(argv) > 1:
        cmd = lookup_command(argv[0] + b"|" + argv[1]) or cmd
    return cmd


def _name(argv) -> str:
    cmd = _command(argv)
    return cmd.name if cmd is not None else argv[0].decode().lower()


def may(user, *argv: bytes) -> bool:
    """Whether ``user`` may run this command line (keys included)."""
    if user.unrestricted:
        return True
    cmd = _command(argv)
    return cmd is not None and user.check(cmd, list(argv)) is None


def _every_key(user, lines) -> bool:
    if user.unrestricted:
        return True
    who = _AsClient(user)
    for argv in lines:
        cmd = _command(argv)
        if cmd is None or not all_keys_readable(who, cmd, list(argv)):
            return False
    return True


def refusal(user, path: bytes) -> str | None:
    """Why ``user`` may not read the page ``path`` (the first command it
    needs and may not run), or None."""
    if user.unrestricted:
        return None
    for argv in PAGES.get(path, ()):
        if not may(user, *argv):
            return "user '%s' may not run '%s' (this page needs %s)\n" % (
                user.name.decode("utf-8", "replace"), _name(argv),
                ", ".join(_name(a) for a in PAGES[path]))
    return None


def view(user, snap: dict, history: dict | None = None):
    """(the snapshot, the history) as ``user`` may see them: the same
    objects for a user with every right, else filtered copies."""
    if user.unrestricted:
        return snap, history
    out = dict(snap)
    raw = snap["raw_keys"]
    lists = []
    for q, key in zip(snap["lists"], raw["lists"]):
        if may(user, b"LLEN", key):
            if q["oldest_age_s"] is not None and not may(user, b"LINDEX", key, b"-1"):
                q = dict(q, oldest_age_s=None)
            lists.append(q)
    out["lists"] = lists
    streams = []
    for st, key in zip(snap["streams"], raw["streams"]):
        if may(user, b"XINFO", b"STREAM", key) and may(user, b"XINFO", b"GROUPS", key):
            if st["groups"] and not may(user, b"XINFO", b"CONSUMERS", key, b"g"):
                st = dict(st, groups=[dict(g, consumers=[]) for g in st["groups"]])
            streams.append(st)
    out["streams"] = streams
    if not _every_key(user, _EVERY_KEY_TYPES):
        out["keyspace"] = [dict(d, types={}) for d in snap["keyspace"]]
        out["lists_total"] = out["streams_total"] = None
    if not _every_key(user, _EVERY_KEY_LIBRARIES):
        out["libraries"] = []
    # /metrics' figures from other commands, each as its command shows it:
    # left out for a user who may not run that command (as redis_exporter
    # goes without a metric its user may not read).
    extra = snap.get("metrics")
    if extra:
        extra = dict(extra)
        if not (may(user, b"SLOWLOG", b"LEN") and may(user, b"SLOWLOG", b"GET")):
            extra.pop("slowlog_len", None)
            extra.pop("slowlog_last", None)
        if not may(user, b"CONFIG", b"GET", b"maxmemory"):
            extra["config"] = {}
        if not may(user, b"LATENCY", b"HISTOGRAM"):
            extra["latency_histograms"] = {}
        out["metrics"] = extra
    if not may(user, b"LATENCY", b"LATEST"):
        out["latency"] = []
    if history is not None:
        shown = {"%d:%s" % (q["db"], q["key"]) for q in lists + streams}
        history = dict(history,
                       depths={k: v for k, v in history["depths"].items() if k in shown},
                       flows={k: v for k, v in history["flows"].items() if k in shown})
    return out, history


__all__ = ["PAGES", "may", "refusal", "view"]
