"""Stream consumer groups (hotkv/commands/stream_groups.py, hotkv/types/stream*.py):
XGROUP, XREADGROUP (blocking too), XACK, XPENDING, XCLAIM, XAUTOCLAIM,
XINFO GROUPS / CONSUMERS -- byte for byte against the reference Valkey where
no clock is involved, the blocking wake-ups against both servers, the
queue flows workers depend on (crash recovery, dead letters, exactly one
consumer per delivery) and the AOF forms of group changes."""

from __future__ import annotations

import os
import threading
import time

import pytest
import valkey

from support import RawClient, aof_bytes, aof_files, scenario_tests

SCENARIOS = {
    "create_and_read": [
        *[("XADD", "s", f"{i}-0", "f", f"v{i}") for i in range(1, 8)],
        ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "3"),
        ("XGROUP", "CREATE", "s", "g3", "$", "ENTRIESREAD", "-2"),
        ("XGROUP", "CREATE", "s", "g3", "$", "ENTRIESREAD", "x"),
        ("XGROUP", "CREATE", "s", "g3", "+"), ("XGROUP", "CREATE", "s", "g3", "bad"),
        ("XGROUP", "CREATE", "s", "g3", "2", "MKSTREAM", "ENTRIESREAD", "1", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g3", "2", "FOO"), ("XGROUP", "CREATE", "nokey", "g", "$"),
        ("XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"), ("XINFO", "STREAM", "new"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "NOACK", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "1-0"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "(3"),
        ("XREADGROUP", "GROUP", "g", "nobody", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "$"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "+"),
        ("XREADGROUP", "GROUP", "nog", "alice", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "nokey", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "nokey", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "x", "y"),
        ("XREADGROUP", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "-1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "FOO", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s",
         "18446744073709551615-18446744073709551615"),
        ("XREAD", "STREAMS", "s", ">"), ("XINFO", "GROUPS", "s"), ("XPENDING", "s", "g"),
        ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "carol", "BLOCK", "10", "STREAMS", "s", ">"),
        ("XINFO", "GROUPS", "s"), ("XINFO", "GROUPS", "nokey"), ("SET", "str", "v"),
        ("XINFO", "GROUPS", "str"), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">"),
    ],
    "pending_ack": [
        *[("XADD", "s", f"{i}-0", "f", f"v{i}") for i in range(1, 8)],
        ("XGROUP", "CREATE", "s", "g", "0"), ("XPENDING", "s", "g"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"), ("XPENDING", "s", "nog"), ("XPENDING", "nokey", "g"),
        ("XPENDING", "s", "g", "-", "+"), ("XPENDING", "s", "g", "-", "+", "0"),
        ("XPENDING", "s", "g", "-", "+", "10", "nobody"), ("XPENDING", "s", "g", "-", "+", "x"),
        ("XPENDING", "s", "g", "IDLE", "x", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "5", "-", "+"),
        ("XPENDING", "s", "g", "IDLE", "99999999", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "99999999", "-", "+", "10", "alice"),
        ("XPENDING", "s", "g", "(18446744073709551615-18446744073709551615", "+", "10"),
        ("XPENDING", "s", "g", "-", "(0-0", "10"), ("XPENDING", "s", "g", "5", "1", "10"),
        ("XPENDING", "s", "g", "a", "b", "c", "d", "e", "f", "g"),
        ("XACK", "s", "g", "1-0", "1-0", "99-0"), ("XACK", "s", "g", "2-0", "bad"),
        ("XACK", "s", "g", "-"), ("XACK", "s", "nog", "2-0"), ("XACK", "nokey", "g", "2-0"),
        ("XACK", "s", "g", "2", "3", "4"), ("XPENDING", "s", "g"),
        ("XGROUP", "DELCONSUMER", "s", "g", "bob"), ("XPENDING", "s", "g"),
        ("XGROUP", "DELCONSUMER", "s", "g", "bob"), ("XGROUP", "DELCONSUMER", "s", "nog", "bob"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "dan"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "dan"),
        ("XGROUP", "CREATECONSUMER", "s", "nog", "dan"),
        ("XGROUP", "CREATECONSUMER", "nokey", "g", "dan"),
        ("XINFO", "GROUPS", "s"), ("SET", "str", "v"), ("XACK", "str", "g", "1"),
        ("XPENDING", "str", "g"),
    ],
    "claim": [
        *[("XADD", "s", f"{i}-0", "f", f"v{i}") for i in range(1, 8)],
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "STREAMS", "s", ">"),
        ("XCLAIM", "s", "g", "carol", "0", "2-0", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "2-0", "3-0", "99-0", "JUSTID", "RETRYCOUNT", "7"),
        ("XCLAIM", "s", "g", "carol", "0", "6-0", "FORCE", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "FORCE"),
        ("XCLAIM", "s", "g", "carol", "0", "99-0", "FORCE"),
        ("XCLAIM", "s", "g", "carol", "x", "7-0"),
        ("XCLAIM", "s", "g", "carol", "-5", "4-0", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "FOO"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "IDLE", "x"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "TIME", "x"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "RETRYCOUNT", "x"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "LASTID", "bad"),
        ("XCLAIM", "s", "g", "carol", "0", "7-0", "IDLE"),
        ("XCLAIM", "s", "nog", "carol", "0", "7-0"), ("XCLAIM", "nokey", "g", "carol", "x", "7-0"),
        ("XCLAIM", "s", "g", "carol", "0", "1-0", "LASTID", "50-0", "JUSTID"),
        ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "carol", "0", "77-0", "LASTID", "60-0"), ("XINFO", "GROUPS", "s"),
        ("XDEL", "s", "2-0", "5-0"), ("XCLAIM", "s", "g", "dave", "0", "2-0", "3-0", "5-0"),
        ("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"),
    ],
    "autoclaim": [
        *[("XADD", "s", f"{i}-0", "f", f"v{i}") for i in range(1, 8)],
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XDEL", "s", "2-0", "3-0"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "(4-0", "COUNT", "2", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "erin", "0", "-"),
        ("XAUTOCLAIM", "s", "g", "erin", "99999999", "-"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "0"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "x"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "8070450532247928833"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "(18446744073709551615-18446744073709551615"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "FOO"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT"),
        ("XAUTOCLAIM", "s", "nog", "dave", "0", "0"), ("XAUTOCLAIM", "s", "g", "dave", "x", "0"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "x"), ("XAUTOCLAIM", "nokey", "g", "dave", "0", "0"),
        ("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"),
    ],
    "setid_lag": [
        *[("XADD", "x", f"{i}-0", "data", c) for i, c in enumerate("abcde", 1)],
        ("XDEL", "x", "3-0"), ("XGROUP", "CREATE", "x", "g1", "0"),
        ("XGROUP", "CREATE", "x", "g2", "0"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c", "COUNT", "3", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"), ("XADD", "x", "6-0", "data", "f"), ("XINFO", "GROUPS", "x"),
        ("XTRIM", "x", "MINID", "=", "3-0"), ("XINFO", "GROUPS", "x"),
        ("XTRIM", "x", "MINID", "=", "5-0"), ("XINFO", "GROUPS", "x"),
        ("XGROUP", "SETID", "x", "g1", "0"), ("XINFO", "GROUPS", "x"),
        ("XGROUP", "SETID", "x", "g1", "$", "ENTRIESREAD", "6"), ("XINFO", "GROUPS", "x"),
        ("XGROUP", "SETID", "x", "g1", "-"), ("XGROUP", "SETID", "x", "g1", "+"),
        ("XGROUP", "SETID", "x", "g1", "bad"), ("XGROUP", "SETID", "x", "g1", "0", "ENTRIESREAD"),
        ("XGROUP", "SETID", "x", "g1", "0", "MKSTREAM"), ("XGROUP", "SETID", "x", "nog", "0"),
        ("XGROUP", "SETID", "nokey", "g1", "0"),
        ("XREADGROUP", "GROUP", "g1", "c2", "STREAMS", "x", ">"),
        ("XPENDING", "x", "g1"), ("XINFO", "GROUPS", "x"),
        ("XGROUP", "DESTROY", "x", "g2"), ("XGROUP", "DESTROY", "x", "g2"),
        ("XGROUP", "DESTROY", "nokey", "g2"),
        ("XGROUP", "HELP"), ("XGROUP", "FOO", "x", "g"), ("XGROUP", "CREATE", "x"),
        ("XINFO", "STREAM", "x", "FULL"),
        ("XGROUP", "CREATE", "e", "g", "$", "MKSTREAM"), ("XADD", "e", "1-0", "a", "b"),
        ("XDEL", "e", "1-0"),
        ("XINFO", "GROUPS", "e"),
    ],
}


def _drop_clock_fields(reply: bytes) -> bytes:
    """XINFO STREAM FULL carries seen-/active-/delivery times: blank them."""
    import re
    return re.sub(rb":1\d{12}\r\n", b":T\r\n", reply)


def _run(diff, commands):
    for cmd in commands:
        if cmd[:2] == ("XINFO", "STREAM"):
            a, b = diff.ours.call(*cmd), diff.theirs.call(*cmd)
            assert _drop_clock_fields(a) == _drop_clock_fields(b), cmd
        else:
            diff(*cmd)


test_matches_valkey_resp2, test_matches_valkey_resp3 = scenario_tests(SCENARIOS, run=_run)


def test_lag_and_entries_read_edge_cases(diff):
    """Valkey 8.1's read-counter rules: a counter is kept only while the
    group is past the first entry and no tombstone follows it; an ID before
    the last tombstone has no estimate."""
    for cmd in [
        *[("XADD", "x", f"{i}-0", "f", "v") for i in range(1, 6)], ("XDEL", "x", "1-0"),
        ("XGROUP", "CREATE", "x", "g", "0", "ENTRIESREAD", "0"), ("XINFO", "GROUPS", "x"),
        *[("XADD", "y", f"{i}-0", "f", "v") for i in range(1, 6)], ("XTRIM", "y", "MAXLEN", "3"),
        ("XGROUP", "CREATE", "y", "g", "1-0", "ENTRIESREAD", "1"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "y", ">"),
        ("XINFO", "GROUPS", "y"),
        *[("XADD", "z", f"{i}-0", "f", "v") for i in range(1, 8)], ("XDEL", "z", "3-0"),
        ("XGROUP", "CREATE", "z", "g", "1-0", "ENTRIESREAD", "1"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "z", ">"),
        ("XINFO", "GROUPS", "z"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "z", ">"),
        ("XINFO", "GROUPS", "z"),
        ("XGROUP", "SETID", "z", "g", "$"), ("XINFO", "GROUPS", "z"),
        ("XADD", "z", "8-0", "f", "v"),
        ("XINFO", "GROUPS", "z"),
    ]:
        diff(*cmd)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_group_operations_match_valkey(diff, seed):
    """Random XADD/XREADGROUP/XACK/XCLAIM/XAUTOCLAIM/XDEL/XTRIM/SETID/...
    sequences: every reply, the groups' counters, lag and PELs stay equal."""
    import random
    rnd = random.Random(seed)
    try:
        diff("CONFIG", "SET", "stream-node-max-entries", str(rnd.choice([2, 5])))
        nid = 1
        diff("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        diff("XGROUP", "CREATE", "s", "h", "0")

        def rid():
            return f"{rnd.randint(1, nid + 2)}-{rnd.choice([0, 0, 1])}"

        for step in range(400):
            op = rnd.random()
            g = rnd.choice(["g", "h"])
            c = rnd.choice(["c1", "c2", "c3"])
            if op < 0.25:
                diff("XADD", "s", f"{nid}-0", "f", str(nid))
                nid += 1
            elif op < 0.4:
                noack = ["NOACK"] if rnd.random() < 0.1 else []
                diff("XREADGROUP", "GROUP", g, c, "COUNT", str(rnd.randint(1, 4)), *noack,
                     "STREAMS", "s", ">")
            elif op < 0.45:
                diff("XREADGROUP", "GROUP", g, c, "COUNT", str(rnd.randint(0, 4)), "STREAMS", "s",
                     rid())
            elif op < 0.55:
                diff("XACK", "s", g, *[rid() for _ in range(rnd.randint(1, 3))])
            elif op < 0.62:
                opts = rnd.choice([[], ["JUSTID"], ["FORCE", "JUSTID"], ["RETRYCOUNT", "5"],
                                   ["LASTID", rid()]])
                diff("XCLAIM", "s", g, c, "0", *[rid() for _ in range(rnd.randint(1, 3))], *opts)
            elif op < 0.68:
                diff("XAUTOCLAIM", "s", g, c, "0", rid(), "COUNT", str(rnd.randint(1, 5)),
                     *rnd.choice([[], ["JUSTID"]]))
            elif op < 0.73:
                diff("XDEL", "s", rid(), rid())
            elif op < 0.76:
                arg = str(rnd.randint(0, nid)) if rnd.random() < 0.5 else rid()
                diff("XTRIM", "s", rnd.choice(["MAXLEN", "MINID"]), rnd.choice(["=", "~"]), arg)
            elif op < 0.78:
                diff("XGROUP", "SETID", "s", g, rnd.choice(["0", "$", rid()]),
                     *rnd.choice([[], ["ENTRIESREAD", str(rnd.randint(-1, nid))]]))
            elif op < 0.80:
                diff("XGROUP", "DELCONSUMER", "s", g, c)
            elif op < 0.82:
                diff("XGROUP", "CREATECONSUMER", "s", g, c)
            elif op < 0.84:
                diff("XSETID", "s", f"{nid + 5}-0")
                nid += 6
            else:
                diff("XPENDING", "s", g)
            diff("XINFO", "GROUPS", "s")
            if step % 40 == 0:
                diff("XPENDING", "s", g, "IDLE", "100000000", "-", "+", "100")
                diff("XRANGE", "s", "-", "+")
    finally:
        diff("CONFIG", "SET", "stream-node-max-entries", "100")


def test_arity_errors(diff):
    for cmd in [("XGROUP",), ("XGROUP", "CREATE", "s", "g"), ("XGROUP", "DESTROY", "s"),
                ("XGROUP", "CREATECONSUMER", "s", "g"),
                ("XGROUP", "DELCONSUMER", "s", "g", "c", "d"),
                ("XGROUP", "SETID", "s", "g"), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"),
                ("XACK", "s", "g"), ("XPENDING", "s"), ("XCLAIM", "s", "g", "c", "0"),
                ("XAUTOCLAIM", "s", "g", "c", "0"), ("XINFO", "CONSUMERS", "s"),
                ("XINFO", "GROUPS"),
                ("XINFO", "GROUPS", "s", "x")]:
        diff(*cmd)


# ----------------------------------------------------------------------
# The PEL in detail (clock-dependent fields checked by range)
# ----------------------------------------------------------------------

def test_pel_counts_times_and_owners(r):
    for i in range(1, 5):
        r.xadd("s", {"n": i}, id=f"{i}-0")
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "alice", {"s": ">"}, count=2)
    r.xreadgroup("g", "bob", {"s": ">"})
    time.sleep(0.5)
    rows = r.xpending_range("s", "g", "-", "+", 10)
    assert [(x["message_id"], x["consumer"], x["times_delivered"]) for x in rows] == [
        (b"1-0", b"alice", 1), (b"2-0", b"alice", 1), (b"3-0", b"bob", 1), (b"4-0", b"bob", 1)]
    assert all(500 <= x["time_since_delivered"] < 60_000 for x in rows)
    # A history read redelivers: the count grows, the idle time restarts.
    r.xreadgroup("g", "alice", {"s": "0"})
    rows = r.xpending_range("s", "g", "-", "+", 10, consumername="alice")
    assert [x["times_delivered"] for x in rows] == [2, 2]
    assert all(x["time_since_delivered"] < 400 for x in rows)
    assert r.xpending_range("s", "g", "-", "+", 10, idle=60_000) == []
    # XCLAIM with IDLE / TIME / RETRYCOUNT sets exactly what it is told.
    now = int(time.time() * 1000)
    r.xclaim("s", "g", "carol", 0, ["3-0"], idle=5000, retrycount=9)
    r.xclaim("s", "g", "carol", 0, ["4-0"], time=now - 7000, justid=True)
    rows = {x["message_id"]: x for x in r.xpending_range("s", "g", "-", "+", 10)}
    assert rows[b"3-0"]["consumer"] == b"carol" and rows[b"3-0"]["times_delivered"] == 9
    assert 5000 <= rows[b"3-0"]["time_since_delivered"] < 6000
    assert rows[b"4-0"]["times_delivered"] == 1
    assert 7000 <= rows[b"4-0"]["time_since_delivered"] < 8000
    summary = r.xpending("s", "g")
    assert summary["pending"] == 4 and summary["min"] == b"1-0" and summary["max"] == b"4-0"
    assert sorted((c["name"], c["pending"]) for c in summary["consumers"]) == [
        (b"alice", 2), (b"carol", 2)]
    consumers = {c["name"]: c for c in r.xinfo_consumers("s", "g")}
    assert consumers[b"bob"]["pending"] == 0 and consumers[b"carol"]["pending"] == 2
    assert consumers[b"bob"]["inactive"] >= 500


def test_ack_of_unknown_ids_and_counts_never_negative(r):
    r.xadd("s", {"f": "v"}, id="1-0")
    r.xgroup_create("s", "g", id="0")
    assert r.xack("s", "g", "1-0") == 0
    r.xreadgroup("g", "c", {"s": ">"})
    assert r.xack("s", "g", "1-0", "1-0", "9-9") == 1
    assert r.xack("s", "g", "1-0") == 0
    assert r.xpending("s", "g")["pending"] == 0
    assert r.xinfo_consumers("s", "g")[0]["pending"] == 0


def test_noack_skips_the_pel_but_moves_the_group(r):
    for i in range(1, 4):
        r.xadd("s", {"f": i}, id=f"{i}-0")
    r.xgroup_create("s", "g", id="0")
    got = r.xreadgroup("g", "c", {"s": ">"}, noack=True)
    assert [e[0] for e in got[0][1]] == [b"1-0", b"2-0", b"3-0"]
    assert r.xpending("s", "g")["pending"] == 0
    info = r.xinfo_groups("s")[0]
    assert info["last-delivered-id"] == b"3-0" and info["entries-read"] == 3 and info["lag"] == 0


def test_history_read_reports_deleted_entries_as_nil(raw):
    raw.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    raw.call("XADD", "s", "1", "field1", "A")
    raw.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    raw.call("XADD", "s", "MAXLEN", "1", "2", "field1", "B")
    raw.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert raw.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0-1") == (
        b"*1\r\n*2\r\n$1\r\ns\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*-1\r\n"
        b"*2\r\n$3\r\n2-0\r\n*2\r\n$6\r\nfield1\r\n$1\r\nB\r\n")


def test_each_entry_goes_to_exactly_one_consumer(server):
    """Eight consumers on eight connections race over 400 entries: every
    entry is delivered once, to one consumer, and is pending for it."""
    r = valkey.Valkey(host=server.host, port=server.port)
    r.flushall()
    r.xgroup_create("jobs", "g", id="$", mkstream=True)
    p = r.pipeline(transaction=False)
    for i in range(400):
        p.xadd("jobs", {"n": i})
    p.execute()
    got = {}
    lock = threading.Lock()

    def worker(name):
        c = valkey.Valkey(host=server.host, port=server.port)
        mine = []
        while True:
            batch = c.xreadgroup("g", name, {"jobs": ">"}, count=7)
            if not batch:
                break
            mine += [e[0] for e in batch[0][1]]
        with lock:
            got[name] = mine
        c.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    delivered = [i for ids in got.values() for i in ids]
    assert len(delivered) == 400 and len(set(delivered)) == 400
    for name, ids in got.items():
        pend = r.xpending_range("jobs", "g", "-", "+", 1000, consumername=name)
        assert [x["message_id"] for x in pend] == ids
    r.close()


# ----------------------------------------------------------------------
# Blocking XREADGROUP (against hotkv and the reference Valkey alike)
# ----------------------------------------------------------------------

ENTRY = b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$%d\r\n%b\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"


def entry(i: bytes) -> bytes:
    return ENTRY % (len(i), i)


def test_blocked_consumers_are_served_in_order_one_entry_each(target):
    a = target.admin
    a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    ws = [target.client() for _ in range(3)]
    for i, w in enumerate(ws):
        w.send("XREADGROUP", "GROUP", "g", f"c{i}", "BLOCK", "0", "STREAMS", "s", ">")
        target.wait_blocked(a, i + 1)
    for i in range(3):
        a.call("XADD", "s", f"{i + 1}-0", "f", "v")
        assert ws[i].read_reply() == entry(b"%d-0" % (i + 1))
    target.wait_blocked(a, 0)
    pend = a.call("XPENDING", "s", "g")
    assert pend.startswith(b"*4\r\n:3\r\n")


def test_waking_blocked_consumers_refreshes_their_seen_time(target):
    """Every blocked consumer of the group is re-checked when an entry
    arrives: the one served gets it, the others stay blocked, in order,
    with their seen-time refreshed (XINFO CONSUMERS idle), as in Valkey."""
    a = target.admin
    a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    ws = [target.client() for _ in range(4)]
    for i, w in enumerate(ws):
        w.send("XREADGROUP", "GROUP", "g", f"c{i}", "BLOCK", "0", "STREAMS", "s", ">")
        target.wait_blocked(a, i + 1)
    time.sleep(0.8)
    a.call("XADD", "s", "1-0", "f", "v")
    assert ws[0].read_reply() == entry(b"1-0")
    r = valkey.Valkey(host=target.host, port=target.port)
    idle = {c["name"]: c["idle"] for c in r.xinfo_consumers("s", "g")}
    assert all(idle[n] < 600 for n in (b"c1", b"c2", b"c3")), idle
    for i in (1, 2, 3):
        a.call("XADD", "s", f"{i + 1}-0", "f", "v")
        assert ws[i].read_reply() == entry(b"%d-0" % (i + 1))
    r.close()


def test_blocked_xreadgroup_errors_when_the_stream_goes(target):
    a = target.admin
    cases = [
        (("DEL", "s"),
         b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n"),
        (("SET", "s", "x"),
         b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (("XGROUP", "DESTROY", "s", "g"),
         b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n"),
        (("FLUSHALL",),
         b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n"),
    ]
    for change, error in cases:
        a.call("DEL", "s")
        a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        w = target.client()
        w.send("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">")
        target.wait_blocked(a, 1)
        a.call(*change)
        assert w.read_reply() == error, change
        target.wait_blocked(a, 0)


def test_rename_delivers_to_blocked_xreadgroup(target):
    a, w = target.admin, target.client()
    a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    w.send("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">")
    target.wait_blocked(a, 1)
    a.call("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM")
    a.call("XADD", "s2", "100", "f", "v")
    a.call("RENAME", "s2", "s")
    assert w.read_reply() == entry(b"100-0")


def test_writes_without_new_entries_keep_consumers_blocked(target):
    a, w = target.admin, target.client()
    a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    a.call("XADD", "s", "1-0", "f", "v")
    a.call("XGROUP", "SETID", "s", "g", "$")
    w.send("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">")
    target.wait_blocked(a, 1)
    a.call("XGROUP", "CREATECONSUMER", "s", "g", "bob")
    a.call("XGROUP", "SETID", "s", "g", "$")
    a.call("XACK", "s", "g", "1-0")
    assert w.read_available(0.05) == b""
    a.call("XADD", "s", "2-0", "f", "v")
    assert w.read_reply() == entry(b"2-0")


def test_woken_consumer_that_finds_nothing_keeps_its_deadline(target):
    """c2 is woken by the entry c1 takes: it blocks again with the deadline
    of its first read, not a new one."""
    a = target.admin
    a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    w1, w2 = target.client(), target.client()
    w1.send("XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">")
    target.wait_blocked(a, 1)
    start = time.time()
    w2.send("XREADGROUP", "GROUP", "g", "c2", "BLOCK", "500", "STREAMS", "s", ">")
    target.wait_blocked(a, 2)
    time.sleep(0.3)
    a.call("XADD", "s", "1-0", "f", "v")
    assert w1.read_reply() == entry(b"1-0")
    assert w2.read_reply() == b"*-1\r\n"
    # 0.5 s after its read; a new deadline would have meant 0.8 s.
    assert time.time() - start < 0.75
    target.wait_blocked(a, 0)


def test_blocked_xreadgroup_times_out_with_null(target):
    a, w = target.admin, target.client()
    a.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    assert w.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "30", "STREAMS", "s", ">") == b"*-1\r\n"
    a.call("XADD", "s", "1-0", "f", "v")
    a.call("XDEL", "s", "1-0")
    a.call("XADD", "s", "2-0", "f", "v")
    a.call("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    # History reads never block, even with BLOCK.
    assert w.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "3") == \
        b"*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"


def test_keyspace_events(target):
    a, sub = target.admin, target.client()
    a.call("CONFIG", "SET", "notify-keyspace-events", "Kt")
    try:
        sub.call("PSUBSCRIBE", "*")
        a.call("XGROUP", "CREATE", "ms", "g", "$", "MKSTREAM")
        a.call("XGROUP", "CREATECONSUMER", "ms", "g", "Bob")
        a.call("XADD", "ms", "1", "f", "A")
        a.call("XREADGROUP", "GROUP", "g", "Alice", "STREAMS", "ms", ">")
        a.call("XCLAIM", "ms", "g", "Mike", "0", "1", "FORCE")
        a.call("XGROUP", "DELCONSUMER", "ms", "g", "Lee")
        a.call("XAUTOCLAIM", "ms", "g", "Bob", "0", "1")
        a.call("XGROUP", "DELCONSUMER", "ms", "g", "Bob")
        a.call("XADD", "ms", "MAXLEN", "0", "2", "f", "B")
        a.call("XSETID", "ms", "5")
        a.call("XGROUP", "SETID", "ms", "g", "0")
        a.call("XDEL", "ms", "9")
        a.call("XADD", "ms", "6", "f", "B")
        a.call("XDEL", "ms", "6")
        a.call("XGROUP", "DESTROY", "ms", "g")
        events = []
        for _ in range(12):
            reply = sub.read_reply()
            events.append(reply.rsplit(b"\r\n", 2)[-2])
        assert events == [b"xgroup-create", b"xgroup-createconsumer", b"xadd",
                          b"xgroup-createconsumer",
                          b"xgroup-createconsumer", b"xgroup-delconsumer", b"xadd", b"xtrim",
                          b"xsetid",
                          b"xgroup-setid", b"xadd", b"xdel"]
        assert sub.read_reply().rsplit(b"\r\n", 2)[-2] == b"xgroup-destroy"
    finally:
        a.call("CONFIG", "SET", "notify-keyspace-events", "")


# ----------------------------------------------------------------------
# Queue flows (the reference document's worker / recovery / dead letters)
# ----------------------------------------------------------------------

def test_worker_crash_recovery_loses_nothing(server):
    url = dict(host=server.host, port=server.port, decode_responses=True)
    admin = valkey.Valkey(**url)
    admin.flushall()
    admin.xgroup_create("jobs", "workers", id="$", mkstream=True)
    ids = [admin.xadd("jobs", {"n": i}) for i in range(20)]
    processed = []

    # Worker A takes 10 jobs and dies before acknowledging any.
    dead = valkey.Valkey(**url)
    taken = dead.xreadgroup("workers", "A", {"jobs": ">"}, count=10)[0][1]
    dead.connection_pool.disconnect()
    # Worker B takes the other 10 and acknowledges them.
    b = valkey.Valkey(**url)
    for mid, fields in b.xreadgroup("workers", "B", {"jobs": ">"}, count=10)[0][1]:
        processed.append(mid)
        b.xack("jobs", "workers", mid)
    assert b.xreadgroup("workers", "B", {"jobs": ">"}, block=50) == []
    # Nothing is pending twice: A's 10 belong to A only.
    pend = admin.xpending_range("jobs", "workers", "-", "+", 100)
    assert [(p["message_id"], p["consumer"]) for p in pend] == [(m, "A") for m, _ in taken]
    # Too early for recovery: A's entries are not idle long enough.
    rec = valkey.Valkey(**url)
    cursor, claimed, deleted = rec.xautoclaim("jobs", "workers", "recovery", 1000, "0-0")
    assert claimed == [] and deleted == []
    time.sleep(1.05)
    cursor, claimed, deleted = rec.xautoclaim("jobs", "workers", "recovery", 1000, "0-0", count=100)
    assert cursor == "0-0" and deleted == []
    assert [m for m, _ in claimed] == [m for m, _ in taken]
    for mid, fields in claimed:
        processed.append(mid)
        rec.xack("jobs", "workers", mid)
    assert sorted(processed) == sorted(ids)
    assert admin.xpending("jobs", "workers")["pending"] == 0
    for c in (admin, b, rec):
        c.close()


def test_dead_letter_flow(server):
    """Entries redelivered more than MAX_DELIVERIES times move to a
    dead-letter stream and are acknowledged; the rest are processed."""
    MAX_DELIVERIES = 3
    r = valkey.Valkey(host=server.host, port=server.port, decode_responses=True)
    r.flushall()
    r.xgroup_create("jobs", "g", id="$", mkstream=True)
    poison = r.xadd("jobs", {"kind": "poison"})
    good = r.xadd("jobs", {"kind": "ok"})
    done, dead = [], []

    def attempt(entries):
        for mid, fields in entries:
            if fields["kind"] == "ok":
                done.append(mid)
                r.xack("jobs", "g", mid)
            # a poison job crashes the worker: never acknowledged

    attempt(r.xreadgroup("g", "w1", {"jobs": ">"})[0][1])
    for _ in range(10):
        for p in r.xpending_range("jobs", "g", "-", "+", 100):
            if p["times_delivered"] > MAX_DELIVERIES:
                mid = p["message_id"]
                fields = r.xrange("jobs", mid, mid)[0][1]
                r.xadd("jobs:dead", {**fields, "id": mid, "deliveries": p["times_delivered"]})
                r.xack("jobs", "g", mid)
                dead.append(mid)
        _, claimed, _ = r.xautoclaim("jobs", "g", "w2", 0, "0-0")
        attempt(claimed)
    assert done == [good] and dead == [poison]
    assert r.xpending("jobs", "g")["pending"] == 0
    dl = r.xrange("jobs:dead")
    assert len(dl) == 1 and dl[0][1] == {"kind": "poison", "id": poison, "deliveries": "4"}
    r.close()


# ----------------------------------------------------------------------
# Propagation: the AOF replays group state
# ----------------------------------------------------------------------

def _group_state(r):
    groups = r.xinfo_groups("s")
    pend = {g["name"]: [(p["message_id"], p["consumer"], p["times_delivered"])
                        for p in r.xpending_range("s", g["name"], "-", "+", 100)] for g in groups}
    consumers = {g["name"]: sorted((c["name"],
                                    c["pending"]) for c in r.xinfo_consumers("s", g["name"]))
                 for g in groups}
    return groups, pend, consumers, r.xrange("s"), r.xinfo_stream("s")["entries-added"]


def _mutate_groups(r):
    for i in range(1, 8):
        r.xadd("s", {"f": i}, id=f"{i}-0")
    r.xgroup_create("s", "g", id="0")
    r.xgroup_create("s", "g2", id="$")
    r.xreadgroup("g", "alice", {"s": ">"}, count=3)
    r.xreadgroup("g", "bob", {"s": ">"}, count=1, noack=True)
    r.xreadgroup("g", "carol", {"s": ">"}, count=2)
    r.xreadgroup("g", "alice", {"s": "0"})
    r.xgroup_createconsumer("s", "g", "dave")
    r.xclaim("s", "g", "dave", 0, ["5-0"], retrycount=4)
    r.xdel("s", "2-0")
    r.xautoclaim("s", "g", "erin", 0, "0-0", count=2)
    r.xack("s", "g", "3-0")
    r.xadd("s", {"f": 8}, id="8-0")
    r.xreadgroup("g2", "zed", {"s": ">"}, count=1)


def test_aof_replays_group_state(hotkv_server_factory, tmp_path):
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    r = valkey.Valkey(host=srv.host, port=srv.port)
    _mutate_groups(r)
    before = _group_state(r)
    r.close()
    text = aof_bytes(tmp_path)
    assert b"XREADGROUP" not in text and b"XAUTOCLAIM" not in text
    assert b"$6\r\nXCLAIM\r\n" in text and b"$5\r\nSETID\r\n" in text and b"CREATECONSUMER" in text
    srv.stop()
    srv2 = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    r2 = valkey.Valkey(host=srv2.host, port=srv2.port)
    assert _group_state(r2) == before
    r2.close()


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_rewrite_rebuilds_streams(hotkv_server_factory, tmp_path, preamble):
    """Groups, PELs, an empty stream with a group and a stream whose only
    entry was deleted survive a rewrite and a restart, in both forms of the
    rewrite: the RDB preamble (the default) and the commands."""
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path),
                               aof_use_rdb_preamble=preamble)
    r = valkey.Valkey(host=srv.host, port=srv.port)
    _mutate_groups(r)
    r.xgroup_create("empty", "g", id="$", mkstream=True)
    r.xadd("gone", {"f": "v"}, id="9-9")
    r.xdel("gone", "9-9")
    before = _group_state(r)
    extra = (r.xinfo_stream("empty"), r.xinfo_groups("empty"), r.xinfo_stream("gone"))
    r.bgrewriteaof()
    deadline = time.time() + 10
    while time.time() < deadline:
        info = r.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            break
        time.sleep(0.02)
    r.close()
    srv.stop()
    text = open(aof_files(tmp_path)[0], "rb").read()       # the new base
    if preamble == "yes":
        assert text.startswith(b"REDIS0011") and b"XSETID" not in text
    else:
        assert b"$6\r\nXSETID\r\n" in text and b"ENTRIESREAD" in text
    srv2 = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    r2 = valkey.Valkey(host=srv2.host, port=srv2.port)
    assert _group_state(r2) == before
    assert (r2.xinfo_stream("empty"), r2.xinfo_groups("empty"), r2.xinfo_stream("gone")) == extra
    r2.close()


def test_rewrite_commands_are_minimal():
    from hotkv.types.stream import Stream
    from hotkv.types.stream_groups import NACK, Group
    from hotkv.types.stream_persist import rewrite_commands
    s = Stream()
    s.append(1 << 64, [b"a", b"1"], 0, 4096, 100)
    s.append(2 << 64, [b"b", b"2", b"c", b"3"], 0, 4096, 100)
    g = s.create_group(b"g", 2 << 64, 2)
    assert isinstance(g, Group)
    alice = g.create_consumer(b"alice", 5)
    g.create_consumer(b"bob", 5)
    n = NACK(1234, alice, 3)
    g.pel[1 << 64] = n
    alice.pel[1 << 64] = n
    assert rewrite_commands(b"k", s) == [
        [b"XADD", b"k", b"1-0", b"a", b"1"],
        [b"XADD", b"k", b"2-0", b"b", b"2", b"c", b"3"],
        [b"XSETID", b"k", b"2-0", b"ENTRIESADDED", b"2", b"MAXDELETEDID", b"0-0"],
        [b"XGROUP", b"CREATE", b"k", b"g", b"2-0", b"ENTRIESREAD", b"2"],
        [b"XCLAIM", b"k", b"g", b"alice", b"0", b"1-0", b"TIME", b"1234", b"RETRYCOUNT", b"3",
         b"JUSTID", b"FORCE"],
        [b"XGROUP", b"CREATECONSUMER", b"k", b"g", b"bob"],
    ]
    assert rewrite_commands(b"k", Stream())[0] == [b"XADD", b"k", b"MAXLEN", b"0", b"0-1", b"x",
                                                   b"y"]


AOF_OPS = [
    ("XADD", "s", "1-0", "f", "v"), ("XADD", "s", "2-0", "f", "v"), ("XADD", "s", "3-0", "f", "v"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    ("XDEL", "s", "2-0"), ("XAUTOCLAIM", "s", "g", "dave", "0", "0"),
    ("XCLAIM", "s", "g", "erin", "0", "1-0", "LASTID", "9-0"),
    ("XCLAIM", "s", "g", "erin", "0", "5-0", "LASTID", "10-0"),
    ("XADD", "s", "MAXLEN", "~", "0", "11-*", "f", "v"), ("XTRIM", "s", "MINID", "~", "5"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "zz"), ("XACK", "s", "g", "1-0"),
    ("XGROUP", "SETID", "s", "g", "$"), ("XGROUP", "DELCONSUMER", "s", "g", "zz"),
    ("XSETID", "s", "20-0"), ("XTRIM", "s", "MAXLEN", "0"), ("XGROUP", "DESTROY", "s", "g"),
]


def _aof_commands(d) -> list:
    import hiredis
    out = []
    for root, _, files in sorted(os.walk(d)):
        for f in sorted(files):
            if f.endswith(".aof") and "base" not in f:
                reader = hiredis.Reader()
                with open(os.path.join(root, f), "rb") as fh:
                    reader.feed(fh.read())
                while (cmd := reader.gets()) is not False:
                    out.append([b"T" if len(a) == 13 and a.isdigit() else a for a in cmd])
    return out


def test_aof_forms_match_valkey(hotkv_server_factory, tmp_path):
    """The AOF records hotkv writes for group operations are the ones
    Valkey 8.1 writes (MULTI/EXEC units, XCLAIM ... LASTID, SETID ...
    ENTRIESREAD, exact trims), clock values aside."""
    from support import ReferenceValkey
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always")
    ours = RawClient(srv.host, srv.port)
    with ReferenceValkey("--appendonly", "yes", "--appendfsync", "always") as ref:
        theirs = RawClient(ref.host, ref.port)
        for cmd in AOF_OPS:
            assert ours.call(*cmd) == theirs.call(*cmd), cmd
        theirs.call("PING")
        expected = _aof_commands(ref.dir)
        theirs.close()
    ours.call("PING")
    ours.close()
    got = _aof_commands(str(tmp_path))
    assert len(expected) > 20 and got == expected


@pytest.mark.parametrize("node_entries", ["100", "2", "1"])
@pytest.mark.parametrize("count", [None, 1, 7])
def test_new_entries_read_one_by_one_cross_every_node(target, node_entries, count):
    """A worker that reads ``>`` after each XADD (with and without COUNT)
    gets every entry, also once the stream spans many nodes.  Without
    COUNT, range_entries once stopped at the first node that had nothing
    past the group's last ID: the read after the 100th entry (default
    node size) came back empty, forever (issue 12)."""
    c = target.admin
    old = c.call("CONFIG", "GET", "stream-node-max-entries").split(b"\r\n")[4]
    c.call("CONFIG", "SET", "stream-node-max-entries", node_entries)
    try:
        assert c.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM") == b"+OK\r\n"
        opt = [] if count is None else ["COUNT", count]
        got = []
        for n in range(1, 351):
            c.call("XADD", "s", f"{n}-1", "f", n)
            reply = c.call("XREADGROUP", "GROUP", "g", "c", *opt, "STREAMS", "s", ">")
            got.append(reply.count(b"\r\n$1\r\nf\r\n"))
        assert got == [1] * 350, f"{target.name}: first empty read after entry {got.index(0)}"
        assert c.call("XPENDING", "s", "g").startswith(b"*4\r\n:350\r\n")
        # and a history read without COUNT sees all 350 pending entries
        reply = c.call("XREADGROUP", "GROUP", "g", "c", *opt, "STREAMS", "s", "0")
        assert reply.count(b"\r\n$1\r\nf\r\n") == (350 if count is None else count)
    finally:
        c.call("CONFIG", "SET", "stream-node-max-entries", old)
