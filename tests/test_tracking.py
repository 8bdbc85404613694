"""Client-side caching (CLIENT TRACKING and its invalidations) against the
reference valkey-server 8.1.8.

Most tests are scenarios: a list of steps, each one command on one of a few
named connections, played on hotkv and on Valkey with fresh connections;
the exact bytes every step returns -- and, on a ``DRAIN`` step, every push
or pub/sub message that connection received before the reply to a PING --
must be the same on both, in RESP2 and RESP3.  Client ids differ between
the servers, so a step names a connection's id as ``@name`` and the output
shows ``:<name>`` where an id was.  ``DRAIN`` is deterministic: a server
writes what a command raised for another connection (BCAST invalidations:
at the end of the event-loop turn) before it reads the PING sent after the
command's reply.

Then: the tracking table's size limit (which keys go is random in Valkey:
counts are compared), expiry (a bounded wait for the key to go), valkey-py's
and redis-py's own client-side caches end to end over RESP3, which keys
every write command invalidates and every read command tracks, and the
hooks of the hot write paths (LPUSH/RPOP/XADD inlined, XTRIM/XDEL).

Random sequences (three clients switching between every tracking mode,
REDIRECT to a RESP2 subscriber, reads, writes, MULTI, scripts, flushes,
RESET, HELLO) are played on both servers too: 2 seeds x 400 steps in CI
(a few seconds in all); the long run:

    HOTKV_TRACKING_SEEDS=0-999 HOTKV_TRACKING_STEPS=2000 \
        python -m pytest -q -n 2 tests/test_tracking.py -k random
"""

from __future__ import annotations

import re
import time

import pytest

from support import RawClient

PONG = (b"+PONG\r\n", b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")


def _drain(conn: RawClient) -> list:
    """What conn received before the reply to a PING sent now."""
    conn.send("PING")
    seen = []
    for _ in range(200):
        reply = conn.read_reply()
        if reply in PONG:
            return seen
        seen.append(reply)
    raise AssertionError("no PONG among 200 replies: %r" % seen[:5])


def _call(conn: RawClient, *args):
    """The reply to a command, after the RESP3 pushes that came before it
    (pushes another client's command raised arrive when they arrive: they
    are told apart, not taken for the reply)."""
    conn.send(*args)
    pushes = []
    for _ in range(200):
        reply = conn.read_reply()
        if not reply.startswith(b">"):
            return reply if not pushes else (pushes, reply)
        pushes.append(reply)
    raise AssertionError("no reply among 200 pushes")


def _info_line(conn: RawClient, field: str):
    info = conn.call("INFO", "everything")
    m = re.search(rb"\r\n%s:([^\r]*)\r\n" % field.encode(), info)
    return m.group(1) if m else None


def _norm(reply: bytes, ids: dict) -> bytes:
    """Client ids where the protocol puts them, as ``<name>``."""
    for name, cid in ids.items():
        for fmt in (b"redirect\r\n:%d\r\n", b"tracking-redir-broken\r\n:%d\r\n",
                    b"redir=%d"):
            reply = reply.replace(fmt % cid, fmt.replace(b"%d", b"<" + name.encode() + b">"))
    return reply


def play(host: str, port: int, steps) -> list:
    """Run steps on one server: (connection, step as written, what came back)."""
    conns: dict = {}
    ids: dict = {}
    out = []

    def conn(name):
        c = conns.get(name)
        if c is None:
            c = conns[name] = RawClient(host, port)
            ids[name] = int(c.call("CLIENT", "ID")[1:-2])
        return c

    admin = conn("admin")
    admin.call("FLUSHALL")
    try:
        for step in steps:
            name, *args = step
            c = conn(name)
            sent = [str(ids[a[1:]]) if a.startswith("@") and conn(a[1:]) else a
                    for a in args]
            if args[0] == "SEND":        # no reply expected (CLIENT REPLY OFF)
                c.send(*sent[1:])
                got = None
            elif args == ["DRAIN"]:
                got = [_norm(x, ids) for x in _drain(c)]
            elif args == ["FLAGS"]:
                # Asked on the admin connection: c may be in MULTI, or have pushes due.
                line = _norm(admin.call("CLIENT", "LIST", "ID", str(ids[name])), ids)
                got = re.search(rb" (flags=\S* ).*( redir=\S*)", line).group(1, 2)
            elif args[0] == "INFO?":
                got = [_info_line(c, f) for f in args[1:]]
            elif args[0] == "HELLO":
                # Only the protocol switch matters here (hotkv's HELLO names
                # itself as it chooses: tests/test_protocol.py's matter).
                got = _call(c, *sent)
                got = got[:1] if type(got) is bytes else (
                    [_norm(x, ids) for x in got[0]], got[1][:1])
            elif args == ["QUIT"]:
                # Messages due before the +OK are part of what it received.
                c.send("QUIT")
                got = []
                for _ in range(200):
                    got.append(_norm(c.read_reply(), ids))
                    if got[-1] == b"+OK\r\n":
                        break
                # Valkey frees a QUIT client after the reply: wait until it is
                # gone, so a later invalidation finds its redirect broken.
                assert c.is_closed(2.0)
                for _ in range(200):
                    if b"id=%d " % ids[name] not in admin.call("CLIENT", "LIST"):
                        break
                    time.sleep(0.01)
                c.close()
                del conns[name]
                # The name may connect again: the old id keeps a name of its own.
                ids["%s~%d" % (name, len(ids))] = ids.pop(name)
            elif args[:2] in (["CLIENT", "GETREDIR"], ["CLIENT", "ID"]):
                got = _call(c, *sent)
                pushes, reply = got if type(got) is tuple else ([], got)
                for other, cid in ids.items():
                    if reply == b":%d\r\n" % cid:
                        reply = b":<%s>\r\n" % other.encode()
                got = ([_norm(x, ids) for x in pushes], reply)
            else:
                got = _call(c, *sent)
                got = _norm(got, ids) if type(got) is bytes else (
                    [_norm(x, ids) for x in got[0]], _norm(got[1], ids))
            out.append((name, args, got))
    finally:
        for c in conns.values():
            c.close()
    return out


def same(server, ref_server, steps):
    ours = play(server.host, server.port, steps)
    theirs = play(ref_server.host, ref_server.port, steps)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, "step %d:\n hotkv:  %r\n valkey: %r" % (i, a, b)
    assert len(ours) == len(theirs)


# ----------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------

DEFAULT_RESP3 = [
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on"),
    ("a", "FLAGS"),
    ("b", "SET", "k", "1"),
    ("a", "GET", "k"),
    ("a", "GET", "k"),
    ("b", "SET", "k", "2"),          # one invalidation, however often it was read
    ("a", "DRAIN"),
    ("b", "SET", "k", "3"),          # no longer tracked: nothing
    ("a", "DRAIN"),
    ("a", "MGET", "k", "x", "y"),    # missing keys are tracked too
    ("b", "DEL", "x", "y", "k"),     # x and y do not exist: only k changed
    ("a", "DRAIN"),
    ("a", "HSET", "h", "f", "1"),
    ("a", "HGET", "h", "f"),
    ("a", "HDEL", "h", "f"),         # its own write: after the reply
    ("a", "DRAIN"),
    ("a", "GET", "s"),
    ("a", "SET", "s", "x"),
    ("a", "GET", "s"),
    ("a", "APPEND", "s", "y"),
    ("a", "GET", "wrong"),
    ("b", "LPUSH", "wrong", "x"),
    ("a", "GET", "wrong"),           # WRONGTYPE, still tracked (as Valkey)
    ("b", "RPUSH", "wrong", "y"),
    ("a", "DRAIN"),
    ("a", "SEND", "CLIENT", "REPLY", "OFF"),
    ("b", "SET", "s", "z"),          # pushes are not replies: still sent
    ("a", "SEND", "GET", "s"),
    ("a", "CLIENT", "REPLY", "ON"),
    ("a", "DRAIN"),
    ("a", "INFO?", "tracking_clients", "tracking_total_keys", "tracking_total_items",
     "tracking_total_prefixes"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "CLIENT", "GETREDIR"),
    ("a", "GET", "dbk"),
    ("b", "SELECT", "1"),
    ("b", "SET", "dbk", "1"),        # one key space for tracking, whatever the db
    ("b", "FLUSHDB"),
    ("b", "SELECT", "0"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "CLIENT", "GETREDIR"),
    ("a", "FLAGS"),
    ("b", "SET", "s", "zz"),
    ("a", "DRAIN"),
    ("a", "INFO?", "tracking_clients"),
]

NOLOOP_MULTI_LUA = [
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on", "NOLOOP"),
    ("a", "MSET", "a1", "1", "a2", "2", "a3", "3"),
    ("a", "MGET", "a1", "a2", "a3"),
    ("a", "SET", "a1", "x"),          # NOLOOP: not told of its own write
    ("b", "SET", "a2", "x"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "on"),   # without NOLOOP now
    ("a", "GET", "a1"),
    ("a", "MULTI"),
    ("a", "INCR", "a3"),              # a3: tracked before NOLOOP was dropped
    ("a", "GET", "a1"),
    ("a", "SET", "a1", "y"),
    ("a", "GET", "a9"),
    ("a", "EXEC"),                    # the whole EXEC reply, then the invalidations
    ("a", "DRAIN"),
    ("a", "EVAL", "redis.call('set', KEYS[1], 'v')", "1", "e1"),
    ("b", "SET", "e1", "w"),          # the script only wrote it: not tracked
    ("a", "DRAIN"),
    ("a", "EVAL", "return redis.call('get', KEYS[1])", "1", "e1"),
    ("b", "SET", "e1", "w2"),
    ("a", "DRAIN"),
    ("a", "EVAL_RO", "return redis.call('get', KEYS[1])", "1", "e2"),
    ("a", "EVAL", "return redis.call('set', KEYS[1], 'z')", "1", "e2"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "on", "NOLOOP"),
    ("a", "GET", "e3"),
    ("a", "EVAL", "return redis.call('set', KEYS[1], 'z')", "1", "e3"),   # NOLOOP
    ("a", "DRAIN"),
    ("a", "MULTI"),
    ("a", "FLUSHDB"),
    ("a", "EXEC"),                    # the flush null even with NOLOOP, after EXEC
    ("a", "DRAIN"),
]

REDIRECT_RESP2 = [
    ("r", "SUBSCRIBE", "__redis__:invalidate"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),
    ("a", "FLAGS"),
    ("a", "CLIENT", "GETREDIR"),
    ("a", "MGET", "k1", "k2", "k3"),
    ("b", "MSET", "k1", "1", "k2", "2"),
    ("r", "DRAIN"),
    ("a", "SET", "k3", "x"),          # its own write goes to the redirect client
    ("r", "DRAIN"),
    ("a", "GET", "k1"),
    ("b", "FLUSHALL"),                # a RESP2 tracking client: the null is $-1
    ("r", "DRAIN"),
    ("b", "FLUSHDB"),
    ("r", "DRAIN"),
    ("a", "INFO?", "tracking_total_keys", "tracking_total_items"),
    ("c", "HELLO", "3"),
    ("c", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),   # RESP3 tracker, RESP2 target
    ("c", "GET", "k1"),
    ("b", "SET", "k1", "v"),
    ("r", "DRAIN"),
    ("b", "FLUSHALL"),                # c's null is RESP3's, even to a RESP2 client
    ("r", "DRAIN"),
    ("c", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("r", "UNSUBSCRIBE"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),  # RESP2, not subscribed
    ("a", "GET", "k1"),
    ("b", "SET", "k1", "v"),
    ("r", "DRAIN"),                   # nothing can carry it
    ("a", "DRAIN"),
    ("t", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "@t"),  # to a RESP3 client: a push
    ("a", "GET", "k1"),
    ("b", "SET", "k1", "w"),
    ("t", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "on"),   # REDIRECT dropped when not given again
    ("a", "CLIENT", "GETREDIR"),
]

BROKEN_REDIRECT = [
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),
    ("a", "GET", "k"),
    ("a", "GET", "j"),
    ("r", "QUIT"),
    ("b", "SET", "k", "1"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "FLAGS"),
    ("a", "SET", "j", "1"),           # its own write: the broken notice after the reply
    ("a", "DRAIN"),
    ("b", "FLUSHALL"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "on"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("c", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),
]

BCAST = [
    ("r", "SUBSCRIBE", "__redis__:invalidate"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", "@r"),
    ("a", "FLAGS"),
    ("b", "MSET", "b1", "1", "a1", "2", "c1", "3"),
    ("r", "DRAIN"),                   # empty prefix: every key, sorted
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", "@r", "PREFIX", "b:",
     "PREFIX", "a:"),
    ("a", "MULTI"),
    ("a", "INCR", "a:2"),
    ("a", "INCR", "b:1"),
    ("a", "INCR", "a:1"),
    ("a", "INCR", "c:1"),
    ("a", "INCR", "a:2"),
    ("a", "EXEC"),
    ("r", "DRAIN"),                   # one message per prefix, prefixes in order
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", "@r", "PREFIX", "c:"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("b", "SET", "c:9", "1"),
    ("b", "SET", "cc", "1"),
    ("r", "DRAIN"),
    ("a", "INFO?", "tracking_clients", "tracking_total_prefixes"),
    ("n", "HELLO", "3"),
    ("n", "CLIENT", "TRACKING", "on", "BCAST", "NOLOOP", "PREFIX", "a:"),
    ("n", "SET", "a:own", "1"),
    ("b", "SET", "a:other", "1"),
    ("n", "DRAIN"),
    ("n", "SET", "a:own", "2"),       # only its own changes: no message at all
    ("n", "DRAIN"),
    ("b", "SET", "a:own", "3"),       # last changed by another client: sent
    ("n", "SET", "a:x", "1"),
    ("n", "DRAIN"),
    ("n", "EVAL", "return redis.call('set', KEYS[1], '1')", "1", "a:lua"),
    ("n", "DRAIN"),                   # a script's write is not "its own" in BCAST
    ("b", "FLUSHALL"),                # BCAST clients get the flush null too
    ("n", "DRAIN"),
    ("r", "DRAIN"),
    ("a", "INFO?", "tracking_total_prefixes"),
    ("n", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "INFO?", "tracking_clients", "tracking_total_prefixes"),
    # Keys tracked in default mode are forgotten by a switch to BCAST.
    ("d", "HELLO", "3"),
    ("d", "CLIENT", "TRACKING", "on"),
    ("d", "GET", "zz"),
    ("d", "CLIENT", "TRACKING", "off"),
    ("d", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "q"),
    ("b", "SET", "zz", "1"),
    ("d", "DRAIN"),
]

OPTIN_OPTOUT = [
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on", "OPTIN"),
    ("a", "GET", "k1"),               # not cached without CACHING yes
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "CLIENT", "ID"),            # CLIENT subcommands keep CACHING for later
    ("a", "GET", "k2"),
    ("a", "GET", "k3"),               # CACHING lasted one command
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "MULTI"),
    ("a", "GET", "k4"),
    ("a", "GET", "k5"),
    ("a", "EXEC"),                    # the whole transaction
    ("a", "GET", "k6"),
    ("a", "MULTI"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "GET", "k7"),
    ("a", "EXEC"),
    ("b", "MSET", "k1", "1", "k2", "1", "k3", "1", "k4", "1", "k5", "1", "k6", "1", "k7", "1"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "CACHING", "no"),
    ("a", "CLIENT", "TRACKING", "on", "OPTOUT"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKING", "on", "OPTOUT"),
    ("a", "GET", "k1"),
    ("a", "CLIENT", "CACHING", "no"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "GET", "k2"),               # not cached
    ("a", "GET", "k3"),
    ("b", "MSET", "k1", "2", "k2", "2", "k3", "2"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "CLIENT", "TRACKING", "on", "OPTIN"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST"),
    ("a", "CLIENT", "CACHING", "maybe"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "CLIENT", "CACHING", "no"),
]

# TRACKING OFF inside the EXEC that changed tracked keys: what the EXEC
# deferred still goes out after it, to the redirect client it had.
OFF_IN_EXEC = [
    ("r", "SUBSCRIBE", "__redis__:invalidate"),
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),
    ("a", "GET", "k"),
    ("a", "MULTI"),
    ("a", "SET", "k", "1"),
    ("a", "FLUSHDB"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "EXEC"),
    ("a", "DRAIN"),
    ("r", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "on"),
    ("a", "GET", "j"),
    ("a", "MULTI"),
    ("a", "SET", "j", "1"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "EXEC"),
    ("a", "DRAIN"),
    ("r", "DRAIN"),
]

_LIB = ("#!lua name=trackinglib\n"
        "redis.register_function('w', function(keys, args) "
        "return redis.call('set', keys[1], 'x') end)\n"
        "redis.register_function{function_name='r', callback=function(keys, args) "
        "return redis.call('get', keys[1]) end, flags={'no-writes'}}")

# Functions as scripts: FCALL_RO is not tracked itself, the reads it runs
# are; a function's write is not a BCAST NOLOOP client's own.
FUNCTIONS = [
    ("b", "FUNCTION", "LOAD", "REPLACE", _LIB),
    ("n", "HELLO", "3"),
    ("n", "CLIENT", "TRACKING", "on", "BCAST", "NOLOOP", "PREFIX", "f:"),
    ("n", "FCALL", "w", "1", "f:1"),
    ("n", "SET", "f:2", "1"),
    ("n", "DRAIN"),
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on"),
    ("a", "FCALL_RO", "r", "1", "g1"),
    ("a", "FCALL", "r", "2", "g2", "g3"),
    ("b", "MSET", "g1", "1", "g2", "2", "g3", "3"),
    ("a", "DRAIN"),
    ("a", "CLIENT", "TRACKING", "on", "NOLOOP"),
    ("a", "GET", "g4"),
    ("a", "FCALL", "w", "1", "g4"),
    ("a", "DRAIN"),
    ("b", "FUNCTION", "DELETE", "trackinglib"),
]

# A refused command ends CLIENT CACHING's effect as a command that ran,
# unless it was a CLIENT subcommand.
REFUSED = [
    ("a", "HELLO", "3"),
    ("a", "CLIENT", "TRACKING", "on", "OPTIN"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "FOO"),
    ("a", "GET", "k1"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "GET"),
    ("a", "GET", "k2"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "CLIENT", "FOO"),
    ("a", "GET", "k3"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "CLIENT", "CACHING"),
    ("a", "GET", "k4"),
    ("a", "CLIENT", "CACHING", "yes"),
    ("a", "MULTI"),
    ("a", "GET"),
    ("a", "GET", "k5"),
    ("a", "EXEC"),
    ("a", "GET", "k6"),
    ("b", "MSET", "k1", "1", "k2", "1", "k3", "1", "k4", "1", "k5", "1", "k6", "1"),
    ("a", "DRAIN"),
]

ERRORS = [
    ("a", "CLIENT", "TRACKING"),
    ("a", "CLIENT", "TRACKING", "maybe"),
    ("a", "CLIENT", "TRACKING", "on", "bogus"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT"),
    ("a", "CLIENT", "TRACKING", "on", "PREFIX"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "x"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "99999"),
    ("a", "CLIENT", "TRACKING", "on", "REDIRECT", "@b", "REDIRECT", "@b"),
    ("a", "CLIENT", "TRACKING", "on", "PREFIX", "x"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "OPTIN"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "OPTOUT"),
    ("a", "CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"),
    ("a", "CLIENT", "TRACKING", "off", "bogus"),
    ("a", "CLIENT", "TRACKING", "off", "PREFIX", "x"),    # options checked, then off
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "FO"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "BARB"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "BAR"),   # the same prefix
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "Z", "PREFIX", "B"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", ""),   # overlaps all: the first
    ("a", "CLIENT", "TRACKING", "on"),
    ("a", "CLIENT", "TRACKING", "off"),
    # An overlap inside the list past its first prefix: Valkey replies the
    # error and then +OK, with tracking on.
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "PREFIX", "bc"),
    ("a", "PING"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", ""),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "x"),
    ("a", "PING"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "CLIENT", "TRACKING", "off"),
    ("a", "CLIENT", "CACHING"),
    ("a", "CLIENT", "GETREDIR", "x"),
    ("a", "CLIENT", "TRACKINGINFO", "x"),
    ("a", "MULTI"),
    ("a", "CLIENT", "TRACKING", "on"),
    ("a", "EXEC"),
    ("a", "CLIENT", "TRACKINGINFO"),
    ("a", "EVAL", "return redis.call('client', 'tracking', 'on')", "0"),
    ("a", "CLIENT", "TRACKING", "off"),
]

@pytest.mark.parametrize("steps", [DEFAULT_RESP3, NOLOOP_MULTI_LUA, REDIRECT_RESP2,
                                   BROKEN_REDIRECT, BCAST, OPTIN_OPTOUT, REFUSED, OFF_IN_EXEC,
                                   FUNCTIONS, ERRORS],
                         ids=["default-resp3", "noloop-multi-lua", "redirect-resp2",
                              "broken-redirect", "bcast", "optin-optout", "refused",
                              "off-in-exec", "functions", "errors"])
def test_scenario_matches_valkey(server, ref_server, steps):
    same(server, ref_server, steps)


def _blmove_unblocked(host, port):
    """LIFECYCLE, then the blocked BLMOVE of w served by a push: its reply
    first, then the invalidation of the key it wrote (as Valkey)."""
    out = []
    b = RawClient(host, port)
    w = RawClient(host, port)
    a = RawClient(host, port)
    try:
        b.call("FLUSHALL")
        a.call("HELLO", "3")
        out.append(a.call("CLIENT", "TRACKING", "on"))
        out.append(a.call("GET", "k"))
        out.append(a.call("RESET"))
        out.append(a.call("CLIENT", "TRACKINGINFO"))
        out.append(_info_line(a, "tracking_clients"))
        a.call("HELLO", "3")
        b.call("SET", "k", "1")
        out.append(_drain(a))
        a.call("HELLO", "2")
        out.append(a.call("CLIENT", "TRACKING", "on"))   # RESP2, no REDIRECT: silent
        out.append(a.call("GET", "k"))
        b.call("SET", "k", "2")
        out.append(a.call("GET", "k"))
        a.call("HELLO", "3")              # what RESP2 tracked is still tracked
        b.call("SET", "k", "3")
        out.append(_drain(a))
        w.call("HELLO", "3")
        out.append(w.call("CLIENT", "TRACKING", "on"))
        out.append(w.call("LRANGE", "dst", "0", "-1"))
        w.send("BLMOVE", "src", "dst", "LEFT", "LEFT", "0")
        for _ in range(500):
            if _info_line(b, "blocked_clients") == b"1":
                break
            time.sleep(0.01)
        out.append(b.call("RPUSH", "src", "job"))
        out.append(w.read_reply())
        out.append(w.read_reply())
        out.append(_drain(w))
    finally:
        for c in (a, b, w):
            c.close()
    return out


def test_reset_resp2_and_unblocked_client_match_valkey(server, ref_server):
    ours = _blmove_unblocked(server.host, server.port)
    theirs = _blmove_unblocked(ref_server.host, ref_server.port)
    assert ours == theirs
    assert ours[-3:-1] == [b"$3\r\njob\r\n", b">2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\ndst\r\n"]


def test_client_list_flags_and_help_match_valkey(server, ref_server):
    steps = [
        ("r", "CLIENT", "ID"),
        ("a", "CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", "@r"),
        ("a", "FLAGS"),
        ("b", "HELLO", "3"),
        ("b", "CLIENT", "TRACKING", "on", "REDIRECT", "@r"),
        ("b", "GET", "x"),
        ("r", "QUIT"),
        ("c", "SET", "x", "1"),
        ("b", "DRAIN"),
        ("b", "FLAGS"),
        ("c", "CLIENT", "HELP"),
    ]
    ours = play(server.host, server.port, steps)
    theirs = play(ref_server.host, ref_server.port, steps)
    # CLIENT HELP: the tracking lines are compared (CAPA's and IMPORT-SOURCE's
    # text is another matter).
    help_ours, help_theirs = ours.pop()[2], theirs.pop()[2]
    for line in (b"+CACHING (YES|NO)\r\n", b"+GETREDIR\r\n", b"+TRACKINGINFO\r\n",
                 b"+         [OPTIN] [OPTOUT] [NOLOOP]\r\n",
                 b"+    Report tracking status for the current connection.\r\n"):
        assert line in help_theirs
        assert line in help_ours
    assert ours == theirs


# ----------------------------------------------------------------------
# The table's size limit
# ----------------------------------------------------------------------

def _limit_run(host, port) -> list:
    """Track 5 keys, lower tracking-table-max-keys to 2, run a command:
    how many invalidations arrived, and the INFO counts after."""
    a = RawClient(host, port)
    b = RawClient(host, port)
    try:
        b.call("FLUSHALL")
        a.call("HELLO", "3")
        a.call("CLIENT", "TRACKING", "on")
        a.call("MGET", "t1", "t2", "t3", "t4", "t5")
        a.call("GET", "t1")
        before = [_info_line(b, f) for f in ("tracking_total_keys", "tracking_total_items")]
        assert b.call("CONFIG", "SET", "tracking-table-max-keys", "2") == b"+OK\r\n"
        b.call("PING")      # before it runs (or the cron first), keys are dropped
        pushes = _drain(a)
        keys = sorted(re.findall(rb"\$2\r\n(t\d)\r\n", b"".join(pushes)))
        after = [_info_line(b, f) for f in ("tracking_total_keys", "tracking_total_items")]
        # The keys still tracked are still invalidated by a write.
        rest = sorted({b"t1", b"t2", b"t3", b"t4", b"t5"} - set(keys))
        b.call("MSET", *[x for k in rest for x in (k, b"v")])
        tail = sorted(re.findall(rb"\$2\r\n(t\d)\r\n", b"".join(_drain(a))))
        return [before, len(pushes), len(keys), len(set(keys)), after, tail == rest,
                b.call("CONFIG", "GET", "tracking-table-max-keys")]
    finally:
        b.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
        a.close()
        b.close()


def test_table_limit_invalidates_like_valkey(server, ref_server):
    ours = _limit_run(server.host, server.port)
    assert ours == _limit_run(ref_server.host, ref_server.port)
    assert ours[:5] == [[b"5", b"5"], 3, 3, 3, [b"2", b"2"]]


def _limit_idle_run(host, port) -> list:
    """The limit is enforced only while some client tracks; ids stay in the
    table after TRACKING off, so a client that turns it on again hears of
    the keys it read before."""
    a = RawClient(host, port)
    b = RawClient(host, port)
    try:
        b.call("FLUSHALL")
        a.call("HELLO", "3")
        a.call("CLIENT", "TRACKING", "on")
        a.call("MGET", "t1", "t2", "t3")
        a.call("CLIENT", "TRACKING", "off")
        b.call("CONFIG", "SET", "tracking-table-max-keys", "1")
        b.call("PING")
        out = [_info_line(b, "tracking_total_keys"), _info_line(b, "tracking_clients")]
        a.call("CLIENT", "TRACKING", "on")
        b.call("PING")
        pushes = _drain(a)
        out += [len(pushes), _info_line(b, "tracking_total_keys")]
        return out
    finally:
        b.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
        a.close()
        b.close()


def test_table_limit_only_while_clients_track(server, ref_server):
    ours = _limit_idle_run(server.host, server.port)
    assert ours == _limit_idle_run(ref_server.host, ref_server.port)
    assert ours == [b"3", b"0", 2, b"1"]


def _limit_noloop_run(host, port) -> list:
    """The limit reached before a NOLOOP client's own command: the keys
    dropped then are not told to it (Valkey's current client), the ones
    left still are.  CONFIG SET and PING go in one write, so no cron tick
    comes between them."""
    a = RawClient(host, port)
    b = RawClient(host, port)
    try:
        b.call("FLUSHALL")
        a.call("HELLO", "3")
        a.call("CLIENT", "TRACKING", "on", "NOLOOP")
        a.call("MGET", "t1", "t2", "t3", "t4", "t5")
        a.send_raw(b"CONFIG SET tracking-table-max-keys 2\r\nPING\r\n")
        out = [a.read_reply(), a.read_reply(), _drain(a), _info_line(b, "tracking_total_keys")]
        b.call("MSET", *[x for i in range(1, 6) for x in ("t%d" % i, "v")])
        out.append(len(_drain(a)))
        return out
    finally:
        b.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
        a.close()
        b.close()


def test_table_limit_before_a_noloop_clients_command(server, ref_server):
    ours = _limit_noloop_run(server.host, server.port)
    assert ours == _limit_noloop_run(ref_server.host, ref_server.port)
    assert ours == [b"+OK\r\n", b"+PONG\r\n", [], b"2", 2]


def test_table_limit_is_reached_with_growing_effort(hotkv_server_factory):
    """More keys over the limit than one pass's effort (100): the limit is
    still reached, every dropped key invalidated once (Valkey's test)."""
    srv = hotkv_server_factory()
    a = RawClient(srv.host, srv.port)
    b = RawClient(srv.host, srv.port)
    try:
        a.call("HELLO", "3")
        a.call("CLIENT", "TRACKING", "on")
        for i in range(0, 250, 50):
            a.call("MGET", *["key%d" % j for j in range(i, i + 50)])
        b.call("CONFIG", "SET", "tracking-table-max-keys", "1")
        seen = set()
        for _ in range(50):
            for push in _drain(a):
                seen.update(re.findall(rb"\$\d+\r\n(key\d+)\r\n", push))
            if len(seen) >= 249:
                break
            b.call("PING")
        assert len(seen) == 249
        assert _info_line(b, "tracking_total_keys") == b"1"
    finally:
        a.close()
        b.close()


# ----------------------------------------------------------------------
# Expiry: the invalidation of a key that expires (lazily or actively)
# ----------------------------------------------------------------------

def _expiry_run(host, port, active: bool) -> list:
    a = RawClient(host, port)
    b = RawClient(host, port)
    r = RawClient(host, port)
    try:
        b.call("FLUSHALL")
        if not active:
            assert b.call("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"+OK\r\n"
        rid = r.call("CLIENT", "ID")[1:-2].decode()
        r.call("SUBSCRIBE", "__redis__:invalidate")
        a.call("CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", rid, "PREFIX", "bc:")
        a3 = RawClient(host, port)
        a3.call("HELLO", "3")
        a3.call("CLIENT", "TRACKING", "on")
        got = None
        for attempt in range(3):   # the key must still be alive when a3 reads it
            key = "ex%d" % attempt
            b.call("SET", key, "v", "PX", "400")
            b.call("SET", "bc:" + key, "v", "PX", "400")
            got = a3.call("GET", key)
            if got == b"$1\r\nv\r\n":
                break
        assert got == b"$1\r\nv\r\n"
        bcast_set = _drain(r)     # the SETs themselves, broadcast
        deadline = time.time() + 10
        while time.time() < deadline:
            if active:
                gone = b.call("DBSIZE") == b":0\r\n"
            else:
                gone = b.call("EXISTS", key, "bc:" + key) == b":0\r\n"
            if gone:
                break
            time.sleep(0.02)
        assert gone
        out = [bcast_set, _drain(a3)]
        # BCAST: collected and sent at the end of the loop turn (a bounded wait
        # for the active cycle, which may have removed only one key before).
        seen = _drain(r)
        for _ in range(100):
            if len(seen) >= 1 and b"bc:" + key.encode() in b"".join(seen):
                break
            time.sleep(0.02)
            seen += _drain(r)
        out.append(seen)
        a3.close()
        return out
    finally:
        b.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        for c in (a, b, r):
            c.close()


@pytest.mark.parametrize("active", [False, True], ids=["lazy", "active"])
def test_expiry_invalidates_like_valkey(server, ref_server, hotkv_server_factory, active):
    if not active:   # DEBUG SET-ACTIVE-EXPIRE needs a server that allows DEBUG
        server = hotkv_server_factory(**{"enable-debug-command": "yes"})
    ours = _expiry_run(server.host, server.port, active)
    assert ours == _expiry_run(ref_server.host, ref_server.port, active)
    assert ours[1] and b"invalidate" in ours[1][0]


# ----------------------------------------------------------------------
# Write paths with their own bookkeeping must invalidate too
# ----------------------------------------------------------------------

HOT_WRITES = [
    (("RPUSH", "k", "x", "y"), ("LRANGE", "k", "0", "-1"), ("LPUSH", "k", "a")),
    (("RPUSH", "k", "x", "y"), ("LRANGE", "k", "0", "-1"), ("RPUSH", "k", "a")),
    (("RPUSH", "k", "x", "y"), ("LLEN", "k"), ("LPOP", "k")),
    (("RPUSH", "k", "x", "y"), ("LINDEX", "k", "0"), ("RPOP", "k")),
    (("XADD", "k", "1-1", "f", "v"), ("XLEN", "k"), ("XADD", "k", "*", "f", "v")),
    (("XADD", "k", "1-1", "f", "v"), ("XRANGE", "k", "-", "+"), ("XDEL", "k", "1-1")),
    (("XADD", "k", "1-1", "f", "v"), ("XLEN", "k"), ("XTRIM", "k", "MAXLEN", "0")),
]


@pytest.mark.parametrize("setup,read,write", HOT_WRITES, ids=lambda a: " ".join(a))
def test_hot_writes_invalidate(target, setup, read, write):
    a = target.admin
    a.call(*setup)
    t = target.client()
    t.call("HELLO", "3")
    assert t.call("CLIENT", "TRACKING", "on") == b"+OK\r\n"
    t.call(*read)
    a.call(*write)
    assert _drain(t) == [b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"]


# ----------------------------------------------------------------------
# redis-py's client-side cache, end to end
# ----------------------------------------------------------------------

def _cache_round_trip(client, writer, cached_count):
    """GET twice (the second from the local cache: the server counts one
    call), change the key elsewhere, GET until the new value shows (the
    invalidation push is read before the next command), FLUSHALL likewise."""
    writer.flushall()
    writer.set("user:1", "alice")
    calls = lambda: writer.info("commandstats").get("cmdstat_get", {}).get("calls", 0)  # noqa
    assert client.get("user:1") == b"alice"
    before = calls()
    assert client.get("user:1") == b"alice"      # served from the cache
    assert calls() == before
    assert cached_count() == 1
    writer.set("user:1", "bob")
    value = None
    for _ in range(100):
        value = client.get("user:1")
        if value == b"bob":
            break
        time.sleep(0.01)
    assert value == b"bob"
    assert client.get("user:1") == b"bob"
    writer.flushall()
    for _ in range(100):
        value = client.get("user:1")
        if value is None:
            break
        time.sleep(0.01)
    assert value is None


def test_valkey_py_client_side_cache(server):
    import valkey
    from valkey._cache import _LocalCache  # what cache_enabled=True makes, kept at hand
    cache = _LocalCache()
    client = valkey.Valkey(host=server.host, port=server.port, protocol=3, client_cache=cache)
    writer = valkey.Valkey(host=server.host, port=server.port)
    try:
        _cache_round_trip(client, writer, lambda: len(cache.cache))
        tracked = [line for line in writer.client_list() if "t" in line["flags"]]
        assert len(tracked) == 1
    finally:
        client.close()
        writer.close()


def test_redis_py_client_side_cache(server, monkeypatch):
    """redis-py's CacheProxyConnection serves only servers that call
    themselves Redis >= 7.4 in HELLO (hotkv, as valkey-server 8.1.8, says
    valkey 8.1.8; redis 7.2.4 under extended-redis-compatibility): the test
    turns that setting on and lowers the gate to 7.2; the caching machinery
    is redis-py's own."""
    redis = pytest.importorskip("redis")
    cache_mod = pytest.importorskip("redis.cache", reason="redis-py without client-side caching")
    monkeypatch.setattr(redis.connection.CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.2.0")
    writer = redis.Redis(host=server.host, port=server.port)
    writer.config_set("extended-redis-compatibility", "yes")
    client = redis.Redis(host=server.host, port=server.port, protocol=3,
                         cache_config=cache_mod.CacheConfig())
    try:
        _cache_round_trip(client, writer, lambda: client.get_cache().size)
    finally:
        client.close()
        writer.config_set("extended-redis-compatibility", "no")
        writer.close()


# ----------------------------------------------------------------------
# Every write path: which commands invalidate a key a client read
# ----------------------------------------------------------------------

# (setup, write): k is read (TYPE k, a read-only command: tracked) between
# them.  Writes that change nothing (SETNX on an existing key, SREM of a
# missing member...) must not invalidate either.
# A stream with a group and an entry that group delivered (in its PEL).
_GROUP = ("EVAL", "redis.call('xadd', KEYS[1], '1-1', 'f', 'v') "
          "redis.call('xgroup', 'create', KEYS[1], 'g', '0') "
          "redis.call('xreadgroup', 'group', 'g', 'c1', 'streams', KEYS[1], '>')", "1", "k")

SWEEP = [
    ((), ("SET", "k", "v")),
    (("SET", "k", "v"), ("SETNX", "k", "w")),
    ((), ("SETEX", "k", "100", "v")),
    ((), ("PSETEX", "k", "100000", "v")),
    (("SET", "k", "v"), ("GETSET", "k", "w")),
    (("SET", "k", "v"), ("GETDEL", "k")),
    (("SET", "k", "v"), ("GETEX", "k", "EX", "100")),
    (("SET", "k", "v"), ("GETEX", "k")),
    ((), ("APPEND", "k", "v")),
    ((), ("INCR", "k")),
    ((), ("INCRBYFLOAT", "k", "1.5")),
    ((), ("DECRBY", "k", "3")),
    ((), ("SETRANGE", "k", "3", "v")),
    ((), ("MSET", "j", "1", "k", "2")),
    (("SET", "k", "v"), ("MSETNX", "j", "1", "k", "2")),
    (("SET", "k", "v"), ("DEL", "k", "nope")),
    ((), ("DEL", "k")),
    (("SET", "k", "v"), ("UNLINK", "k")),
    (("SET", "k", "v"), ("EXPIRE", "k", "100")),
    (("SET", "k", "v"), ("PEXPIREAT", "k", "1")),
    (("SET", "k", "v", "EX", "100"), ("PERSIST", "k")),
    (("SET", "k", "v"), ("PERSIST", "k")),
    (("SET", "k", "v"), ("RENAME", "k", "k2")),
    (("SET", "k2", "v"), ("RENAME", "k2", "k")),
    (("SET", "k", "v"), ("RENAMENX", "k", "k2")),
    (("SET", "k", "v"), ("MOVE", "k", "1")),
    (("SET", "src", "v"), ("COPY", "src", "k")),
    (("SET", "k", "v"), ("COPY", "k", "dst")),
    (("RPUSH", "src", "b", "a"), ("SORT", "src", "ALPHA", "STORE", "k")),
    (("SET", "k", "v"), ("TOUCH", "k")),
    (("RPUSH", "k", "a"), ("LPUSHX", "k", "b")),
    (("RPUSH", "k", "a"), ("LINSERT", "k", "BEFORE", "a", "b")),
    (("RPUSH", "k", "a"), ("LSET", "k", "0", "b")),
    (("RPUSH", "k", "a", "b"), ("LREM", "k", "0", "a")),
    (("RPUSH", "k", "a", "b"), ("LREM", "k", "0", "z")),
    (("RPUSH", "k", "a", "b", "c"), ("LTRIM", "k", "0", "1")),
    (("RPUSH", "k", "a", "b"), ("LPOP", "k", "2")),
    (("RPUSH", "k", "a", "b"), ("RPOPLPUSH", "k", "k")),
    (("RPUSH", "src", "a"), ("LMOVE", "src", "k", "LEFT", "RIGHT")),
    (("RPUSH", "k", "a"), ("LMPOP", "1", "k", "LEFT")),
    (("RPUSH", "k", "a"), ("BLPOP", "k", "0")),
    ((), ("HSET", "k", "f", "v")),
    (("HSET", "k", "f", "v"), ("HSETNX", "k", "f", "w")),
    (("HSET", "k", "f", "v"), ("HDEL", "k", "f")),
    (("HSET", "k", "f", "v"), ("HDEL", "k", "g")),
    ((), ("HINCRBYFLOAT", "k", "f", "1.5")),
    ((), ("SADD", "k", "a")),
    (("SADD", "k", "a"), ("SADD", "k", "a")),
    (("SADD", "k", "a", "b"), ("SREM", "k", "a")),
    (("SADD", "k", "a", "b"), ("SREM", "k", "z")),
    (("SADD", "k", "a", "b"), ("SPOP", "k")),
    (("SADD", "src", "a"), ("SMOVE", "src", "k", "a")),
    (("SADD", "s1", "a"), ("SUNIONSTORE", "k", "s1")),
    (("SADD", "k", "a"), ("SINTERSTORE", "k", "nope")),
    ((), ("ZADD", "k", "1", "a")),
    (("ZADD", "k", "1", "a"), ("ZADD", "k", "1", "a")),
    (("ZADD", "k", "1", "a"), ("ZINCRBY", "k", "1", "a")),
    (("ZADD", "k", "1", "a", "2", "b"), ("ZPOPMIN", "k")),
    (("ZADD", "k", "1", "a", "2", "b"), ("ZREMRANGEBYSCORE", "k", "5", "6")),
    (("ZADD", "z1", "1", "a"), ("ZRANGESTORE", "k", "z1", "0", "-1")),
    (("ZADD", "k", "1", "a"), ("BZPOPMIN", "k", "0")),
    ((), ("XADD", "k", "*", "f", "v")),
    (("XADD", "k", "1-1", "f", "v"), ("XSETID", "k", "5-5")),
    (("XADD", "k", "1-1", "f", "v"), ("XGROUP", "CREATE", "k", "g", "0")),
    (("XADD", "k", "1-1", "f", "v"), ("XTRIM", "k", "MAXLEN", "5")),
    (("XADD", "k", "1-1", "f", "v"), ("XDEL", "k", "9-9")),
    (("XADD", "k", "1-1", "f", "v"), ("PFADD", "k", "a")),
    ((), ("PFADD", "k", "a")),
    (("PFADD", "k", "a"), ("PFADD", "k", "a")),
    (("PFADD", "src", "a"), ("PFMERGE", "k", "src")),
    (("PFADD", "k", "a"), ("PFCOUNT", "k")),
    ((), ("SETBIT", "k", "7", "1")),
    (("SETBIT", "k", "7", "1"), ("SETBIT", "k", "7", "1")),
    (("SET", "src", "v"), ("BITOP", "NOT", "k", "src")),
    ((), ("BITFIELD", "k", "SET", "u8", "0", "1")),
    (("SET", "k", "v"), ("BITFIELD", "k", "GET", "u8", "0")),
    ((), ("GEOADD", "k", "13.361389", "38.115556", "Palermo")),
    (("GEOADD", "src", "13.361389", "38.115556", "Palermo"),
     ("GEOSEARCHSTORE", "k", "src", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km")),
    (("SET", "src", "v"), ("RESTORE", "k", "0", "DUMP:src")),
    (_GROUP, ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "k", ">")),
    (_GROUP, ("XGROUP", "DESTROY", "k", "g")),
    (_GROUP, ("XGROUP", "CREATECONSUMER", "k", "g", "c2")),
    (_GROUP, ("XGROUP", "SETID", "k", "g", "0")),
    (_GROUP, ("XACK", "k", "g", "1-1")),
    (_GROUP, ("XCLAIM", "k", "g", "c2", "0", "1-1")),
    (_GROUP, ("XAUTOCLAIM", "k", "g", "c2", "0", "0")),
    (("SET", "k", "v"), ("SWAPDB", "0", "1")),
    (("SET", "k", "v"), ("SELECT", "0")),
]


def _sweep(host, port) -> list:
    out = []
    admin = RawClient(host, port)
    t = RawClient(host, port)
    try:
        t.call("HELLO", "3")
        t.call("CLIENT", "TRACKING", "on")
        for setup, write in SWEEP:
            admin.call("FLUSHALL")
            _drain(t)                       # the flush's own invalidation
            if setup:
                admin.call(*setup)
            t.call("TYPE", "k")
            if write[-1] == "DUMP:src":
                dump = admin.call("DUMP", "src")
                write = write[:-1] + (dump[dump.index(b"\r\n") + 2:-2],)
            reply = admin.call(*write)
            out.append((write[:3], reply[:1], _drain(t)))
        admin.call("FLUSHALL")
    finally:
        admin.close()
        t.close()
    return out


def test_every_write_path_invalidates_as_valkey(server, ref_server):
    ours = _sweep(server.host, server.port)
    theirs = _sweep(ref_server.host, ref_server.port)
    for a, b in zip(ours, theirs):
        assert a == b
    assert sum(1 for _, _, pushes in ours if pushes) > len(SWEEP) // 2


# ----------------------------------------------------------------------
# Which keys a read-only command makes tracked
# ----------------------------------------------------------------------

# (setup, read): every key the setup made is then deleted (DEL signals only
# keys that exist); the invalidations show which ones the read tracked.
READ_SWEEP = [
    (("MSET", "a", "1", "b", "2"), ("MGET", "a", "b", "c")),
    (("MSET", "a", "1", "b", "2"), ("EXISTS", "a", "b")),
    (("MSET", "a", "1", "b", "2"), ("STRLEN", "b")),
    (("MSET", "a", "1", "b", "2"), ("LCS", "a", "b")),
    (("MSET", "a", "1", "b", "2"), ("TTL", "a")),
    (("MSET", "a", "1", "b", "2"), ("DUMP", "a")),
    (("MSET", "a", "1", "b", "2"), ("OBJECT", "ENCODING", "a")),
    (("MSET", "a", "1", "b", "2"), ("GETRANGE", "a", "0", "1")),
    (("MSET", "a", "1", "b", "2"), ("SUBSTR", "a", "0", "1")),
    (("MSET", "a", "1", "b", "2"), ("DBSIZE",)),
    (("MSET", "a", "1", "b", "2"), ("SCAN", "0")),
    (("MSET", "a", "1", "b", "2"), ("RANDOMKEY",)),
    (("SADD", "a", "x"), ("SINTER", "a", "b")),
    (("SADD", "a", "x"), ("SINTERCARD", "2", "a", "b")),
    (("SADD", "a", "x"), ("SMISMEMBER", "a", "x")),
    (("ZADD", "a", "1", "x"), ("ZUNION", "2", "a", "b")),
    (("ZADD", "a", "1", "x"), ("ZRANGE", "a", "0", "-1")),
    (("HSET", "a", "f", "v"), ("HGETALL", "a")),
    (("RPUSH", "a", "x"), ("LRANGE", "a", "0", "-1")),
    (("RPUSH", "a", "3", "1"), ("SORT_RO", "a")),
    (("RPUSH", "a", "3", "1"), ("SORT", "a")),
    (("XADD", "a", "1-1", "f", "v"), ("XREAD", "STREAMS", "a", "b", "0", "0")),
    (("XADD", "a", "1-1", "f", "v"), ("XINFO", "STREAM", "a")),
    (("XADD", "a", "1-1", "f", "v"), ("XREVRANGE", "a", "+", "-")),
    (("SET", "a", "1"), ("EVAL_RO", "return redis.call('get', KEYS[1])", "2", "a", "b")),
    (("SET", "a", "1"), ("EVAL", "return 1", "2", "a", "b")),
    (("SET", "a", "1"), ("GET",)),                  # refused before it runs
    (("SET", "a", "1"), ("TYPE", "a")),
]


def _read_sweep(host, port) -> list:
    out = []
    admin = RawClient(host, port)
    t = RawClient(host, port)
    try:
        t.call("HELLO", "3")
        t.call("CLIENT", "TRACKING", "on")
        for setup, read in READ_SWEEP:
            admin.call("FLUSHALL")
            _drain(t)
            admin.call(*setup)
            reply = t.call(*read)
            admin.call("DEL", "a", "b", "c")
            out.append((read, reply[:1], _drain(t)))
        admin.call("FLUSHALL")
    finally:
        admin.close()
        t.close()
    return out


def test_read_commands_track_the_keys_valkey_tracks(server, ref_server):
    ours = _read_sweep(server.host, server.port)
    theirs = _read_sweep(ref_server.host, ref_server.port)
    for a, b in zip(ours, theirs):
        assert a == b
    assert sum(1 for _, _, pushes in ours if pushes) > len(READ_SWEEP) // 2


# ----------------------------------------------------------------------
# Random sequences: several tracking clients in every mode, reads, writes,
# transactions, scripts, flushes, mode switches -- the same transcript
# ----------------------------------------------------------------------

_KEYS = ["k0", "k1", "k2", "p:0", "p:1", "q:0"]


def _random_read(rnd) -> tuple:
    kind = rnd.randrange(5)
    if kind == 0:
        return ("MGET",) + tuple(rnd.sample(_KEYS, rnd.randint(1, 3)))
    if kind == 1:
        return ("TYPE", rnd.choice(_KEYS))
    if kind == 2:
        return ("EXISTS",) + tuple(rnd.sample(_KEYS, 2))
    if kind == 3:
        return ("EVAL", "return redis.call('exists', KEYS[1])", "1", rnd.choice(_KEYS))
    return ("GET", rnd.choice(_KEYS))


def _random_write(rnd) -> tuple:
    key = rnd.choice(_KEYS)
    return rnd.choice([
        ("SET", key, str(rnd.randrange(100))),
        ("DEL",) + tuple(rnd.sample(_KEYS, 2)),
        ("INCR", key),
        ("EXPIRE", key, "1000"),
        ("PEXPIREAT", key, "1"),
        ("EVAL", "return redis.call('set', KEYS[1], 'x')", "1", key),
        ("MSET", key, "1", rnd.choice(_KEYS), "2"),
    ])


def _random_tracking_on(rnd) -> tuple:
    mode = rnd.randrange(6)
    args = ["CLIENT", "TRACKING", "on"]
    if mode == 1:
        args.append("NOLOOP")
    elif mode == 2:
        args.append("OPTIN")
    elif mode == 3:
        args.append("OPTOUT")
    elif mode == 4:
        args += ["BCAST"] + [x for p in rnd.sample(["p:", "q:", "k"], rnd.randint(0, 2))
                             for x in ("PREFIX", p)]
        if rnd.random() < 0.5:
            args.append("NOLOOP")
    if rnd.random() < 0.3:
        args += ["REDIRECT", "@r"]
    return tuple(args)


def _random_steps(seed: int, n: int) -> list:
    import random
    rnd = random.Random(seed)
    clients = ["a", "b", "c"]
    steps = [("r", "SUBSCRIBE", "__redis__:invalidate"), ("a", "HELLO", "3"),
             ("c", "HELLO", "3")]
    for _ in range(n):
        c = rnd.choice(clients)
        roll = rnd.random()
        if roll < 0.35:
            steps.append((c,) + _random_read(rnd))
        elif roll < 0.65:
            steps.append((c,) + _random_write(rnd))
        elif roll < 0.72:
            steps.append((c,) + _random_tracking_on(rnd))
        elif roll < 0.75:
            steps.append((c, "CLIENT", "TRACKING", "off"))
        elif roll < 0.80:
            steps.append((c, "CLIENT", "CACHING", rnd.choice(["yes", "no"])))
        elif roll < 0.85:
            steps.append((c, "MULTI"))
            for _ in range(rnd.randint(1, 3)):
                steps.append((c,) + (_random_read(rnd) if rnd.random() < 0.5
                                     else _random_write(rnd)))
            steps.append((c, "EXEC"))
        elif roll < 0.87:
            steps.append((c, rnd.choice(["FLUSHDB", "FLUSHALL"])))
        elif roll < 0.89 and c != "c":
            steps.append((c, "HELLO", rnd.choice(["2", "3"])))
        elif roll < 0.90 and c != "c":
            steps.append((c, "RESET"))
        elif roll < 0.93:
            steps.append((c,) + rnd.choice([("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR"),
                                            ("FLAGS",)]))
        elif roll < 0.935:
            # The redirect client goes (redirects break) and a new one comes.
            steps += [("r", "QUIT"), ("r", "SUBSCRIBE", "__redis__:invalidate")]
        else:
            steps.append((rnd.choice(clients + ["r"]), "DRAIN"))
    steps += [(c, "DRAIN") for c in clients + ["r"]]
    steps.append(("a", "INFO?", "tracking_clients", "tracking_total_keys",
                  "tracking_total_items", "tracking_total_prefixes"))
    return steps


def _seeds():
    """HOTKV_TRACKING_SEEDS=0-199 HOTKV_TRACKING_STEPS=2000 for a long run."""
    import os
    spec = os.environ.get("HOTKV_TRACKING_SEEDS", "0-1")
    lo, _, hi = spec.partition("-")
    return range(int(lo), int(hi or lo) + 1)


@pytest.mark.parametrize("seed", _seeds())
def test_random_sequences_match_valkey(server, ref_server, seed):
    import os
    steps = _random_steps(seed, int(os.environ.get("HOTKV_TRACKING_STEPS", "400")))
    same(server, ref_server, steps)


def _blocked_reads(host, port) -> list:
    """XREAD BLOCK tracks its stream when it blocks: the XADD that serves it
    invalidates first, then the reply; a BCAST client hears of a list a
    push served to a blocked BLPOP (changed twice, told once)."""
    out = []
    a = RawClient(host, port)
    b = RawClient(host, port)
    c = RawClient(host, port)
    try:
        b.call("FLUSHALL")
        a.call("HELLO", "3")
        a.call("CLIENT", "TRACKING", "on")
        c.call("HELLO", "3")
        c.call("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "l")
        for blocker in (("XREAD", "BLOCK", "0", "STREAMS", "s", "$"), ("BLPOP", "l", "0")):
            a.send(*blocker)
            for _ in range(500):
                if _info_line(b, "blocked_clients") == b"1":
                    break
                time.sleep(0.01)
            out.append(b.call(*(("XADD", "s", "1-1", "f", "v") if blocker[0] == "XREAD"
                                 else ("RPUSH", "l", "x"))))
            out.append(a.read_reply())
            if blocker[0] == "XREAD":
                out.append(a.read_reply())
                b.call("XADD", "s", "2-1", "f", "v")
            out.append(_drain(a))
            out.append(_drain(c))
    finally:
        for conn in (a, b, c):
            conn.close()
    return out


def test_blocked_reads_match_valkey(server, ref_server):
    ours = _blocked_reads(server.host, server.port)
    assert ours == _blocked_reads(ref_server.host, ref_server.port)
    assert ours[1] == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ns\r\n"


def _watch_sweep(host, port) -> list:
    """The same writes against WATCH: an EXEC fails exactly where a tracked
    key is invalidated (both hang on Valkey's signalModifiedKey)."""
    out = []
    admin = RawClient(host, port)
    w = RawClient(host, port)
    try:
        for setup, write in SWEEP:
            admin.call("FLUSHALL")
            if setup:
                admin.call(*setup)
            w.call("WATCH", "k")
            if write[-1] == "DUMP:src":
                dump = admin.call("DUMP", "src")
                write = write[:-1] + (dump[dump.index(b"\r\n") + 2:-2],)
            admin.call(*write)
            w.call("MULTI")
            w.call("PING")
            out.append((write[:3], w.call("EXEC")))
        admin.call("FLUSHALL")
    finally:
        admin.close()
        w.close()
    return out


def test_every_write_path_touches_watchers_as_valkey(server, ref_server):
    ours = _watch_sweep(server.host, server.port)
    theirs = _watch_sweep(ref_server.host, ref_server.port)
    for a, b in zip(ours, theirs):
        assert a == b
    assert sum(1 for _, reply in ours if reply == b"*-1\r\n") > len(SWEEP) // 2
