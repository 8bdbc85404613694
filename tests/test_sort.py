"""SORT / SORT_RO (hotkv/commands/sort.py): byte for byte against the
reference Valkey (``diff``) for every option and error, plus the side
effects a reply does not show: STORE wakes a blocked BLPOP, fails a WATCH
even when it deletes, emits ``sortstore``/``del`` and drops the TTL."""

from __future__ import annotations

import pytest

from test_sets import run

SETUP = [
    ("RPUSH", "l", "3", "1", "2", "10", "-5", "1.5"),
    ("RPUSH", "la", "banana", "apple", "cherry", "Apple", ""),
    ("SADD", "s", "5", "3", "9", "1"),
    ("SADD", "sa", "x", "b", "a", "zz"),
    ("ZADD", "z", "1", "c", "2", "a", "3", "b", "4", "d"),
    ("MSET", "w_3", "30", "w_1", "10", "w_2", "-1", "w_10", "5", "w_-5", "0x10",
     "w_1.5", " 7", "o_1", "one", "o_2", "two", "o_3", "three"),
    ("HSET", "h_1", "f", "9", "g", "x1"), ("HSET", "h_2", "f", "8"), ("HSET", "h_3", "f", "7"),
    ("MSET", "wa_a", "z", "wa_b", "y", "wa_c", "x", "wa_zz", "w"),
]

SCENARIOS = {
    "numeric": [("SORT", "l"), ("SORT", "l", "DESC"), ("SORT", "l", "ASC"),
                ("SORT", "s"), ("SORT", "s", "desc"), ("SORT", "z"), ("SORT", "nokey"),
                ("SORT_RO", "l"), ("SORT_RO", "z", "DESC")],
    "alpha": [("SORT", "la", "ALPHA"), ("SORT", "la", "ALPHA", "DESC"), ("SORT", "sa", "alpha"),
              ("SORT", "z", "ALPHA"), ("SORT", "z", "ALPHA", "desc"), ("SORT", "la")],
    "limit": [("SORT", "l", "LIMIT", "0", "2"), ("SORT", "l", "LIMIT", "2", "100"),
              ("SORT", "l", "LIMIT", "-3", "2"), ("SORT", "l", "LIMIT", "1", "-1"),
              ("SORT", "l", "LIMIT", "6", "1"), ("SORT", "l", "LIMIT", "100", "1"),
              ("SORT", "l", "LIMIT", "1", "0"), ("SORT", "l", "DESC", "LIMIT", "1", "3"),
              ("SORT", "nokey", "LIMIT", "0", "1"),
              ("SORT", "l", "LIMIT", "x", "1"), ("SORT", "l", "LIMIT", "1", "1.5"),
              ("SORT", "l", "LIMIT", "1")],
    "by": [("SORT", "l", "BY", "w_*"), ("SORT", "l", "BY", "w_*", "DESC"),
           ("SORT", "s", "BY", "w_*"), ("SORT", "l", "BY", "nosort"),
           ("SORT", "l", "BY", "nosort", "DESC"), ("SORT", "l", "BY", "nosort", "LIMIT", "1", "2"),
           ("SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"),
           ("SORT", "z", "BY", "nosort"), ("SORT", "z", "BY", "nosort", "DESC"),
           ("SORT", "z", "BY", "nosort", "LIMIT", "1", "2"),
           ("SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"),
           ("SORT", "z", "BY", "nosort", "LIMIT", "9", "2"),
           ("SORT", "s", "BY", "nosort"), ("SORT", "z", "BY", "h_*->f"),
           ("SORT", "sa", "BY", "wa_*", "ALPHA"), ("SORT", "sa", "BY", "wa_*", "ALPHA", "DESC"),
           ("SORT", "l", "BY", "missing_*"), ("SORT", "l", "BY", "#")],
    "get": [("SORT", "l", "GET", "o_*"), ("SORT", "l", "GET", "#", "GET", "o_*"),
            ("SORT", "l", "GET", "h_*->f", "GET", "h_*->g", "GET", "h_*->"),
            ("SORT", "l", "GET", "nostar"), ("SORT", "l", "GET", "#", "LIMIT", "0", "2"),
            ("SORT", "l", "BY", "nosort", "GET", "o_*", "GET", "#"),
            ("SORT", "l", "GET", "l"), ("SORT", "l", "GET", "h*"), ("SORT_RO", "l", "GET", "o_*")],
    "errors": [("SORT", "la"), ("SORT", "la", "BY", "o_*"), ("SORT", "l", "BY", "o_*"),
               ("SET", "str", "x"), ("SORT", "str"), ("SORT", "str", "LIMIT", "a", "b"),
               ("SORT", "str", "BOGUS"), ("SORT", "l", "BOGUS"), ("SORT", "l", "STORE"),
               ("SORT_RO", "l", "STORE", "dst"), ("SORT", "l", "GET"), ("SORT", "l", "BY"),
               ("HSET", "hh", "a", "b"), ("SORT", "hh"), ("SORT"), ("SORT_RO")],
    "weights": [("DEL", "l2"), ("RPUSH", "l2", "a", "b", "c", "d", "e", "f", "g", "h"),
                ("MSET", "v_a", " 12", "v_b", "1e2", "v_c", "-inf", "v_d", "inf",
                 "v_e", "0x1p3", "v_f", "", "v_g", "+3.", "v_h", ".5"),
                ("SORT", "l2", "BY", "v_*"), ("SORT", "l2", "BY", "v_*", "DESC"),
                ("SET", "v_a", "nan"), ("SORT", "l2", "BY", "v_*"),
                ("SET", "v_a", "1e400"), ("SORT", "l2", "BY", "v_*"),
                ("SET", "v_a", "12abc"), ("SORT", "l2", "BY", "v_*"),
                ("SET", "v_a", "  "), ("SORT", "l2", "BY", "v_*"),
                ("SET", "v_a", "1e-400"), ("SORT", "l2", "BY", "v_*"),
                ("SET", "v_a", "7"), ("SORT", "l2", "BY", "v_*", "STORE", "dst"),
                ("LRANGE", "dst", "0", "-1"), ("SET", "v_a", "x"),
                ("SORT", "l2", "BY", "v_*", "STORE", "dst"), ("LRANGE", "dst", "0", "-1")],
    "ties": [("DEL", "l3"), ("RPUSH", "l3", "b", "a", "c"),
             ("MSET", "t_a", "1", "t_b", "1", "t_c", "0"), ("SORT", "l3", "BY", "t_*"),
             ("SORT", "l3", "BY", "t_*", "DESC")],
    "store": [("SORT", "l", "STORE", "dst"), ("LRANGE", "dst", "0", "-1"), ("TYPE", "dst"),
              ("SORT", "l", "GET", "o_*", "STORE", "dst"), ("LRANGE", "dst", "0", "-1"),
              ("SORT", "s", "BY", "nosort", "STORE", "dst"), ("LRANGE", "dst", "0", "-1"),
              ("SORT", "sa", "BY", "nosort", "STORE", "dst", "DESC"), ("LRANGE", "dst", "0", "-1"),
              ("SORT", "l", "STORE", "a", "STORE", "b"), ("EXISTS", "a"), ("LLEN", "b"),
              ("SET", "str", "v"), ("SORT", "l", "STORE", "str"), ("TYPE", "str"),
              ("SORT", "nokey", "STORE", "dst"), ("EXISTS", "dst"),
              ("SORT", "nokey", "STORE", "dst"), ("SORT", "l", "LIMIT", "0", "0", "STORE", "b"),
              ("EXISTS", "b"), ("SET", "ttl", "x", "EX", "100"), ("SORT", "l", "STORE", "ttl"),
              ("TTL", "ttl")],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_sort_scenarios(diff, name):
    run(diff, SETUP)
    run(diff, SCENARIOS[name])


def test_sort_resp3(diff):
    diff.resp3()
    run(diff, SETUP)
    run(diff, [("SORT", "l"), ("SORT", "l", "GET", "o_*", "GET", "#"), ("SORT", "nokey"),
               ("SORT", "l", "STORE", "d")])


def test_sort_keys_and_info(diff):
    run(diff, [("COMMAND", "GETKEYS", "SORT", "k", "LIMIT", "0", "1", "STORE", "d1",
                "GET", "x", "STORE", "d2"),
               ("COMMAND", "GETKEYS", "SORT", "k", "BY", "store"),
               ("COMMAND", "GETKEYS", "SORT_RO", "k", "STORE", "x"),
               ("COMMAND", "GETKEYSANDFLAGS", "SORT", "k", "STORE", "d"),
               ("COMMAND", "GETKEYSANDFLAGS", "SORT_RO", "k", "GET", "x")])


def test_sort_categories(raw):
    # Valkey lists SORT's categories explicitly: not @keyspace
    for name, rw in ((b"sort", b"+@write"), (b"sort_ro", b"+@read")):
        info = raw.call("COMMAND", "INFO", name)
        cats = info.split(b"*6\r\n", 1)[1].split(b"\r\n*", 1)[0]
        assert cats == rw + b"\r\n+@set\r\n+@sortedset\r\n+@list\r\n+@slow\r\n+@dangerous"


def test_sort_store_wakes_blpop(r, raw_factory):
    waiter = raw_factory()
    waiter.send("BLPOP", "dst", "5")
    import time
    deadline = time.time() + 5
    while int(r.info("clients")["blocked_clients"]) != 1 and time.time() < deadline:
        time.sleep(0.01)
    r.rpush("src", "b", "c", "a")
    assert r.sort("src", alpha=True, store="dst") == 3
    assert waiter.read_reply() == b"*2\r\n$3\r\ndst\r\n$1\r\na\r\n"
    assert r.lrange("dst", 0, -1) == [b"b", b"c"]


def test_sort_store_empty_fails_watch(r):
    r.rpush("foo", "bar")
    p = r.pipeline(transaction=True)
    p.watch("foo")
    assert r.sort("emptylist", store="foo") == 0
    assert r.exists("foo") == 0
    p.multi()
    p.ping()
    import valkey
    with pytest.raises(valkey.WatchError):
        p.execute()


def test_sort_store_events(r, raw_factory):
    r.config_set("notify-keyspace-events", "KEA")
    try:
        sub = r.pubsub()
        sub.psubscribe("__keyspace@0__:dst")
        assert sub.get_message(timeout=1)["type"] == "psubscribe"
        r.rpush("src", "2", "1")
        r.sort("src", store="dst")
        r.sort("nokey", store="dst")
        events = []
        for _ in range(2):
            m = sub.get_message(timeout=1)
            events.append(m["data"])
        assert events == [b"sortstore", b"del"]
        sub.close()
    finally:
        r.config_set("notify-keyspace-events", "")


def test_sort_big_inputs(diff):
    members = [str((i * 7919) % 1000) for i in range(1000)]
    diff("SADD", "bigs", *members)
    diff("RPUSH", "bigl", *members)
    diff("SORT", "bigs")
    diff("SORT", "bigl", "DESC", "LIMIT", "10", "20")
    diff("SORT", "bigl", "ALPHA", "LIMIT", "990", "20")
    diff("ZADD", "bigz", *[x for i, m in enumerate(members[:300]) for x in (str(i % 17), m)])
    diff("SORT", "bigz", "BY", "nosort", "DESC", "LIMIT", "5", "7")
    diff("SORT", "bigz")


def test_sort_acl_patterns(diff):
    """BY with a pattern and GET need read access to every key."""
    run(diff, [("RPUSH", "mylist", "2", "1"), ("SET", "w_1", "5"),
               ("ACL", "SETUSER", "limited", "on", "nopass", "+@all", "~mylist", "~dst"),
               ("ACL", "SETUSER", "reader", "on", "nopass", "+@all", "%R~*", "~dst", "~mylist"),
               ("AUTH", "limited", "x"),
               ("SORT", "mylist"), ("SORT", "mylist", "BY", "nosort"),
               ("SORT", "mylist", "BY", "w_*"), ("SORT", "mylist", "GET", "#"),
               ("SORT_RO", "mylist", "GET", "w_*"), ("SORT", "mylist", "STORE", "dst"),
               ("AUTH", "reader", "x"),
               ("SORT", "mylist", "BY", "w_*", "GET", "#", "GET", "w_*"),
               ("SORT", "mylist", "BY", "w_*", "STORE", "dst"),
               ("AUTH", "default", "x"), ("ACL", "DELUSER", "limited", "reader")])
