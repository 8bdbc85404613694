"""Fast paths in command handlers and the dispatcher, proven equal to their
general twins over real sockets, and both to valkey-server 8.1.8.

Pairs covered here:
* XREADGROUP's worker shape (``_xreadgroup_one``, batched delivery through
  ``range_entries`` / ``Group.deliver`` / ``advance_group_through``) vs
  ``_xread`` (the same read with two no-op ``COUNT`` options: 13 arguments,
  a shape the fast path does not take) vs the per-entry delivery a server
  with an AOF takes (``_serve_group`` with ``props``, over ``Stream.range``)
  vs Valkey (``test_xreadgroup_fast_general_aof_and_valkey_agree``);
* the list push/pop handlers' inlined ``Server.written`` (nobody watches,
  waits or listens) vs ``Server.written`` itself (a WATCHed key, keyspace
  notifications on), compared by replies and by the change counter
  (``rdb_changes_since_last_save``) against Valkey's
  (``test_list_handlers_count_changes_as_written_does``);
* the dispatcher's per-read loop (``process_commands``: table hit, the
  plain-command checks) vs ``_check`` (mixed-case command names miss the
  table) and vs one command per read, against Valkey
  (``test_dispatcher_fast_loop_equals_checks``).

Bounded: a few hundred commands per case; about ten seconds in all.
``HOTKV_FASTPATH_SCALE=10`` makes every loop ten times longer.
"""

from __future__ import annotations

import os
import random

import pytest

from support import RawClient, encode_command, start_aof_server

SCALE = max(1, int(os.environ.get("HOTKV_FASTPATH_SCALE", "1")))
TOP = (1 << 64) - 1


# ----------------------------------------------------------------------
# XREADGROUP: fast, general, AOF (per-entry) and Valkey
# ----------------------------------------------------------------------

def _group_script(seed: int):
    """A deterministic list of commands: explicit-ID XADDs (seq running
    into 2**64-1), reads by two groups of the same stream -- g1 in the
    worker's shape, g2 in a 13-argument shape -- acks, deletes, SETIDs."""
    rnd = random.Random(seed)
    ms, seq = 1, 0
    ids = []
    out = [("XGROUP", "CREATE", "s", "g1", "$", "MKSTREAM"),
           ("XGROUP", "CREATE", "s", "g2", "$")]
    for step in range(200 * SCALE):
        op = rnd.random()
        if op < 0.3:
            for _ in range(rnd.choice([1, 2, 5, 40, 150])):
                if rnd.random() < 0.1:
                    ms += rnd.choice([1, 4096])
                    seq = rnd.choice([0, TOP - 3])
                else:
                    seq += 1
                    if seq > TOP:
                        ms, seq = ms + 1, 0
                ids.append("%d-%d" % (ms, seq))
                out.append(("XADD", "s", ids[-1], "f", "v%d" % rnd.randint(0, 99)))
        elif op < 0.65:
            consumer = "c%d" % rnd.randint(0, 2)
            n = rnd.choice([None, 1, 2, 7, 100, 1000])
            fast = ["COUNT", str(n)] if n is not None else []
            out.append(("XREADGROUP", "GROUP", "g1", consumer, *fast, "STREAMS", "s", ">"))
            out.append(("XREADGROUP", "GROUP", "g2", consumer, "COUNT", "0", "COUNT", "0",
                        *(fast or ["COUNT", "0"]), "STREAMS", "s", ">"))
        elif op < 0.8 and ids:
            picks = rnd.sample(ids, min(len(ids), rnd.randint(1, 60)))
            out.append(("XACK", "s", "g1", *picks))
            out.append(("XACK", "s", "g2", *picks))
        elif op < 0.88 and ids:
            out.append(("XDEL", "s", *rnd.sample(ids, min(len(ids), rnd.randint(1, 30)))))
        elif op < 0.92 and ids:
            back = rnd.choice(ids[-300:])
            out.append(("XGROUP", "SETID", "s", "g1", back))
            out.append(("XGROUP", "SETID", "s", "g2", back))
        else:
            out.append(("XPENDING", "s", "g1"))
            out.append(("XPENDING", "s", "g2"))
            out.append(("XINFO", "GROUPS", "s"))
    out += [("XPENDING", "s", "g1"), ("XPENDING", "s", "g2"), ("XINFO", "GROUPS", "s"),
            ("XLEN", "s"), ("XINFO", "STREAM", "s")]
    return out


def _pairs_equal(script, replies):
    """Each g1 command's reply equals the g2 twin that follows it."""
    for k in range(len(script) - 1):
        a, b = script[k], script[k + 1]
        if "g1" in a and "g2" in b and a[0] == b[0]:
            assert replies[k] == replies[k + 1], (a, b)
        if a[:2] == ("XINFO", "GROUPS"):
            _, g1, g2 = replies[k].split(b"$4\r\nname\r\n")
            g1 = g1[:g1.rindex(b"*")]                 # less g2's array header
            assert g1.startswith(b"$2\r\ng1\r\n")
            assert g1.replace(b"g1", b"g2") == g2, replies[k]


@pytest.mark.parametrize("max_entries,max_bytes", [(1, 4096), (2, 4096), (3, 4096),
                                                   (100, 4096), (0, 90)])
def test_xreadgroup_fast_general_aof_and_valkey_agree(diff, hotkv_server_factory, tmp_path,
                                                      max_entries, max_bytes):
    script = _group_script(max_entries * 31 + max_bytes)
    aof = start_aof_server(hotkv_server_factory, tmp_path)
    other = RawClient(aof.host, aof.port)
    settings = [("CONFIG", "SET", "stream-node-max-entries", str(max_entries)),
                ("CONFIG", "SET", "stream-node-max-bytes", str(max_bytes))]
    try:
        for cmd in settings:
            diff(*cmd)
            other.call(*cmd)
        replies = [diff(*cmd) for cmd in script]
        assert sum(1 for r in replies if r.startswith(b"*1\r\n*2\r\n$1\r\ns")) > 20
        _pairs_equal(script, replies)
        assert [other.call(*cmd) for cmd in script] == replies
    finally:
        other.close()
        diff("CONFIG", "SET", "stream-node-max-entries", "100")
        diff("CONFIG", "SET", "stream-node-max-bytes", "4096")


# ----------------------------------------------------------------------
# Lists: the inlined Server.written vs Server.written
# ----------------------------------------------------------------------

def _changes(client) -> int:
    info = client.call("INFO", "persistence")
    for line in info.split(b"\r\n"):
        if line.startswith(b"rdb_changes_since_last_save:"):
            return int(line.split(b":")[1])
    raise AssertionError("no rdb_changes_since_last_save in INFO")


def _list_script(rnd, key):
    out = []
    for _ in range(220 * SCALE):
        op = rnd.random()
        vals = ["e%d" % rnd.randint(0, 9) for _ in range(rnd.choice([1, 1, 2, 5, 40]))]
        if op < 0.4:
            out.append((rnd.choice(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), key, *vals))
        elif op < 0.75:
            out.append((rnd.choice(["LPOP", "RPOP"]), key))
        elif op < 0.95:
            out.append((rnd.choice(["LPOP", "RPOP"]), key,
                        str(rnd.choice([0, 1, 2, 3, 50, 1000]))))
        else:
            out.append(("LLEN", key))
    return out


@pytest.mark.parametrize("how", ["plain", "watched", "notify", "blocked-elsewhere"])
def test_list_handlers_count_changes_as_written_does(diff, server, raw_factory, how):
    """Every push and pop: same reply and same change count as Valkey,
    whether the handler took its inlined branch (plain) or Server.written
    (a WATCHer on the key, notifications on)."""
    rnd = random.Random(how)
    watcher = raw_factory()
    ref_watcher = RawClient(diff.theirs.sock.getpeername()[0], diff.theirs.sock.getpeername()[1])
    try:
        if how == "watched":
            for w in (watcher, ref_watcher):
                assert w.call("WATCH", "k") == b"+OK\r\n"
        elif how == "notify":
            diff("CONFIG", "SET", "notify-keyspace-events", "KEA")
        elif how == "blocked-elsewhere":
            # a waiter on another key: the key is not in db.blocking
            for w in (watcher, ref_watcher):
                w.send("BLPOP", "other", "0")
        for cmd in _list_script(rnd, "k"):
            before = (_changes(diff.ours), _changes(diff.theirs))
            diff(*cmd)
            after = (_changes(diff.ours), _changes(diff.theirs))
            assert after[0] - before[0] == after[1] - before[1], cmd
        if how == "watched":
            diff("LRANGE", "k", "0", "-1")
            for w in (watcher, ref_watcher):
                assert w.call("MULTI") == b"+OK\r\n"
                assert w.call("EXEC") == b"*-1\r\n"
        if how == "blocked-elsewhere":
            diff("RPUSH", "other", "x")
            assert watcher.read_reply() == ref_watcher.read_reply() == \
                b"*2\r\n$5\r\nother\r\n$1\r\nx\r\n"
    finally:
        ref_watcher.close()
        diff("CONFIG", "SET", "notify-keyspace-events", "")


# ----------------------------------------------------------------------
# The dispatcher: the per-read loop vs the full checks vs Valkey
# ----------------------------------------------------------------------

def _batch(rnd):
    out = []
    for _ in range(120 * SCALE):
        k = rnd.random()
        if k < 0.3:
            out.append(("SET", "k%d" % rnd.randint(0, 5), "v"))
        elif k < 0.45:
            out.append(("GET", "k%d" % rnd.randint(0, 5)))
        elif k < 0.55:
            out.append(rnd.choice([("GET",), ("SET", "k"), ("GET", "a", "b"), ("LPUSH", "l"),
                                   ("PING", "a", "b"), ("XADD", "s", "*")]))   # arity
        elif k < 0.6:
            out.append(("NOSUCHCMD", "x"))
        elif k < 0.7:
            out.append(rnd.choice([("CONFIG", "GET", "maxmemory"), ("CONFIG", "NOPE"),
                                   ("OBJECT", "ENCODING", "nokey"), ("XINFO", "HELP", "x")]))
        elif k < 0.8:
            out.append(("INCR", "n"))
        elif k < 0.85:
            out.append(("MULTI",))
            out.append(("INCR", "n"))
            out.append(rnd.choice([("GET",), ("INCR", "n")]))
            out.append(("EXEC",))
        elif k < 0.9:
            out.append(("SUBSCRIBE", "ch"))
            out.append(rnd.choice([("GET", "k1"), ("PING",), ("SET", "a", "b")]))
            out.append(("UNSUBSCRIBE", "ch"))
        else:
            out.append(("LPUSH", "l", "a", "b"))
            out.append(("RPOP", "l"))
    return out


def _mixed_case(cmd, rnd):
    name = "".join(c.upper() if rnd.random() < 0.5 else c.lower() for c in cmd[0])
    if name == name.upper():
        name = name[0].lower() + name[1:]
    return (name, *cmd[1:])


def _run(client, cmds, pipelined: bool):
    if pipelined:
        client.send_raw(b"".join(encode_command(*c) for c in cmds))
        return [client.read_reply() for _ in cmds]
    return [client.call(*c) for c in cmds]


@pytest.mark.parametrize("resp", [2, 3])
def test_dispatcher_fast_loop_equals_checks(server, ref_server, resp):
    rnd = random.Random(resp)
    cmds = _batch(rnd)
    mixed = [_mixed_case(c, rnd) for c in cmds]
    results = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        for batch, pipelined in ((cmds, True), (mixed, True), (cmds, False)):
            c = RawClient(host, port)
            try:
                c.call("FLUSHALL")
                if resp == 3:
                    c.call("HELLO", "3")
                results.append(_run(c, batch, pipelined))
            finally:
                c.close()
    # Each way of sending equal to Valkey sent the same way (an unknown
    # command's error echoes the name as sent).
    for k in range(3):
        for cmd, a, b in zip(cmds, results[k], results[k + 3]):
            assert a == b, (k, cmd, a, b)
    assert results[0] == results[2]
