"""CLIENT subcommands (hotkv/commands/client_cmds.py), against Valkey byte for
byte where the reply is deterministic, by fields for CLIENT LIST/INFO."""

from __future__ import annotations

import time

import hiredis
import pytest

from support import RawClient, encode_command, wait_for


def parse(raw: bytes):
    reader = hiredis.Reader()
    reader.feed(raw)
    return reader.gets()


def client_id(c: RawClient) -> int:
    return int(c.call("CLIENT", "ID")[1:-2])


def fields(line: bytes) -> dict:
    out = {}
    for part in line.decode().strip().split(" "):
        k, _, v = part.partition("=")
        out[k] = v
    return out


def list_lines(c: RawClient, *args) -> list:
    text = parse(c.call("CLIENT", "LIST", *args))
    return [fields(line) for line in text.split(b"\n") if line]


def test_client_id_and_info(raw):
    cid = client_id(raw)
    assert cid > 0
    info = parse(raw.call("CLIENT", "INFO"))
    assert info.endswith(b"\n") and info.count(b"\n") == 1
    f = fields(info)
    assert int(f["id"]) == cid
    assert f["cmd"] == "client|info"
    assert f["resp"] == "2" and f["db"] == "0" and f["flags"] == "N"
    assert f["multi"] == "-1" and f["name"] == ""


def test_client_line_has_valkeys_fields_in_order(diff):
    ours = parse(diff.ours.call("CLIENT", "INFO"))
    theirs = parse(diff.theirs.call("CLIENT", "INFO"))
    assert list(fields(ours)) == list(fields(theirs))
    ours = parse(diff.ours.call("CLIENT", "LIST", "ID", client_id(diff.ours)))
    theirs = parse(diff.theirs.call("CLIENT", "LIST", "ID", client_id(diff.theirs)))
    assert list(fields(ours)) == list(fields(theirs))


def test_client_info_reflects_state(raw):
    raw.call("SELECT", "2")
    raw.call("CLIENT", "SETNAME", "worker-1")
    raw.call("CLIENT", "SETINFO", "LIB-NAME", "mylib")
    raw.call("CLIENT", "SETINFO", "lib-ver", "1.2.3")
    raw.call("CLIENT", "NO-EVICT", "on")
    raw.call("CLIENT", "NO-TOUCH", "on")
    raw.call("HELLO", "3")
    f = fields(parse(raw.call("CLIENT", "INFO")))
    assert f["db"] == "2" and f["name"] == "worker-1"
    assert f["lib-name"] == "mylib" and f["lib-ver"] == "1.2.3"
    assert f["resp"] == "3"
    assert f["flags"] == "eT"
    raw.call("HELLO", "2")
    raw.call("CLIENT", "NO-EVICT", "off")
    raw.call("CLIENT", "NO-TOUCH", "off")
    f = fields(parse(raw.call("CLIENT", "INFO")))
    assert f["flags"] == "N" and f["watch"] == "0" and f["multi"] == "-1"


def test_client_list_multi_and_watch_counts(raw, raw_factory):
    other = raw_factory()
    oid = client_id(other)
    other.call("WATCH", "a", "b")
    other.call("MULTI")
    other.call("SET", "a", "1")
    other.call("SET", "b", "1")
    [f] = list_lines(raw, "ID", oid)
    assert f["multi"] == "2" and f["watch"] == "2" and "x" in f["flags"]
    raw.call("SET", "a", "changed")
    [f] = list_lines(raw, "ID", oid)
    assert "d" in f["flags"]          # dirty CAS
    other.call("DISCARD")


def test_client_resp3_verbatim(raw):
    raw.call("HELLO", "3")
    assert raw.call("CLIENT", "INFO").startswith(b"=")
    assert raw.call("CLIENT", "LIST").startswith(b"=")


def test_client_list_filters(raw, raw_factory):
    other = raw_factory()
    oid = client_id(other)
    me = client_id(raw)
    ids = {int(f["id"]) for f in list_lines(raw)}
    assert {me, oid} <= ids
    assert [int(f["id"]) for f in list_lines(raw, "ID", oid)] == [oid]
    assert {int(f["id"]) for f in list_lines(raw, "ID", oid, me)} == {oid, me}
    assert list_lines(raw, "ID", 999999) == []
    assert {int(f["id"]) for f in list_lines(raw, "TYPE", "normal")} >= {me, oid}
    assert all(int(f["id"]) != me for f in list_lines(raw, "SKIPME", "yes"))
    assert [int(f["id"]) for f in list_lines(raw, "ID", oid, "TYPE", "NORMAL")] == [oid]
    other.send("SUBSCRIBE", "ch")
    other.read_reply()
    assert [int(f["id"]) for f in list_lines(raw, "TYPE", "pubsub")] == [oid]
    assert list_lines(raw, "TYPE", "pubsub")[0]["sub"] == "1"
    assert "P" in list_lines(raw, "ID", oid)[0]["flags"]
    addr = list_lines(raw, "ID", oid)[0]["addr"]
    assert [int(f["id"]) for f in list_lines(raw, "ADDR", addr)] == [oid]
    assert list_lines(raw, "USER", "default")


def test_client_list_errors(diff):
    for args in (("TYPE", "x"), ("ID", "x"), ("ID", "0"), ("ID", "-1"), ("ID",), ("TYPE",),
                 ("foo",), ("SKIPME", "maybe"), ("MAXAGE", "0"), ("USER", "nouser"),
                 ("ID", "9999999999999999999999"), ("ID", "3", "4", "x"),
                 ("TYPE", "master"), ("TYPE", "replica"), ("TYPE", "slave"),
                 ("ID", "99999", "TYPE", "normal")):
        diff("CLIENT", "LIST", *args)


def test_client_list_skipme(raw, raw_factory):
    """SKIPME yes lists every client but the caller (compared by content,
    not bytes: the session's server has other tests' clients too)."""
    other = raw_factory()
    me, them = client_id(raw), client_id(other)
    reply = raw.call("CLIENT", "LIST", "SKIPME", "yes")
    ids = {int(part[3:]) for part in reply.split() if part.startswith(b"id=")}
    assert them in ids and me not in ids
    reply = raw.call("CLIENT", "LIST", "SKIPME", "no", "ID", str(me))
    assert b"id=%d " % me in reply


def test_client_kill(raw, raw_factory, diff):
    victim = raw_factory()
    vid = client_id(victim)
    addr = list_lines(raw, "ID", vid)[0]["addr"]
    assert raw.call("CLIENT", "KILL", addr) == b"+OK\r\n"
    assert victim.is_closed()
    assert list_lines(raw, "ID", vid) == []

    victim = raw_factory()
    vid = client_id(victim)
    assert raw.call("CLIENT", "KILL", "ID", vid) == b":1\r\n"
    assert victim.is_closed()
    assert raw.call("CLIENT", "KILL", "ID", vid) == b":0\r\n"

    # SKIPME defaults to yes in the new form: killing by our own id kills no one.
    me = client_id(raw)
    assert raw.call("CLIENT", "KILL", "ID", me) == b":0\r\n"
    assert raw.call("PING") == b"+PONG\r\n"

    victim = raw_factory()
    laddr = list_lines(raw, "ID", client_id(victim))[0]["laddr"]
    victim.call("PING")
    killed = int(raw.call("CLIENT", "KILL", "LADDR", laddr, "TYPE", "normal", "USER", "default",
                          "ID", client_id(victim))[1:-2])
    assert killed == 1 and victim.is_closed()

    for args in (("1.2.3.4:5",), ("ID", "0"), ("ID", "x"), ("ID", "999999"),
                 ("USER", "nouser"), ("SKIPME", "maybe"), ("MAXAGE", "0"), ("MAXAGE", "x"),
                 ("TYPE", "x"), ("foo", "bar"), ("ID", "5", "foo"), ()):
        diff("CLIENT", "KILL", *args)


def test_client_kill_self(raw_factory):
    c = raw_factory()
    addr = fields(parse(c.call("CLIENT", "INFO")))["addr"]
    assert c.call("CLIENT", "KILL", addr) == b"+OK\r\n"   # the old form may kill itself
    assert c.is_closed()
    c = raw_factory()
    assert c.call("CLIENT", "KILL", "ID", client_id(c), "SKIPME", "no") == b":1\r\n"
    assert c.is_closed()


def test_client_kill_blocked_client_leaves_no_waiter(raw, raw_factory):
    waiter = raw_factory()
    wid = client_id(waiter)
    waiter.send("BLPOP", "kq", "0")
    assert wait_for(lambda: "b" in (list_lines(raw, "ID", wid) or [{"flags": ""}])[0]["flags"])
    assert raw.call("CLIENT", "KILL", "ID", wid) == b":1\r\n"
    info = parse(raw.call("INFO", "clients")).decode()
    assert "blocked_clients:0" in info and "total_blocking_keys:0" in info
    assert raw.call("RPUSH", "kq", "x") == b":1\r\n"
    assert raw.call("LLEN", "kq") == b":1\r\n"


@pytest.mark.parametrize("mode,expected", [(None, b"*-1\r\n"), ("TIMEOUT", b"*-1\r\n"),
                                           ("ERROR", b"-UNBLOCKED client unblocked via "
                                                     b"CLIENT UNBLOCK\r\n")])
def test_client_unblock(raw, raw_factory, mode, expected):
    waiter = raw_factory()
    wid = client_id(waiter)
    waiter.send("BLPOP", "uq", "0")
    assert wait_for(lambda: b"blocked_clients:1" in parse(raw.call("INFO", "clients")))
    args = ("CLIENT", "UNBLOCK", wid) + ((mode,) if mode else ())
    assert raw.call(*args) == b":1\r\n"
    assert waiter.read_reply() == expected
    assert waiter.call("PING") == b"+PONG\r\n"
    assert raw.call(*args) == b":0\r\n"     # no longer blocked


def test_client_unblock_errors(diff):
    for args in (("1", "foo"), ("x",), ("999999",), ("-1", "error"), ("1", "timeout", "x")):
        diff("CLIENT", "UNBLOCK", *args)


def test_client_reply_modes(diff):
    for c in (diff.ours, diff.theirs):
        c.send("CLIENT", "REPLY", "OFF")
        c.send("PING")
        c.send("SET", "k", "v")
        c.send("NOSUCHCOMMAND")
        c.send("CLIENT", "REPLY", "ON")
        c.send("ECHO", "after-on")
        c.send("CLIENT", "REPLY", "SKIP")
        c.send("ECHO", "skipped")
        c.send("ECHO", "shown")
        c.send("CLIENT", "REPLY", "SKIP")
        c.send("NOSUCHCOMMAND")
        c.send("ECHO", "shown-2")
        c.send("CLIENT", "REPLY", "OFF")
        c.send("CLIENT", "REPLY", "SKIP")
        c.send("PING")
        c.send("CLIENT", "REPLY", "ON")
    ours = diff.ours.read_available(0.3)
    theirs = diff.theirs.read_available(0.3)
    assert ours == theirs
    assert ours == b"+OK\r\n$8\r\nafter-on\r\n$5\r\nshown\r\n$7\r\nshown-2\r\n+OK\r\n"
    diff("CLIENT", "REPLY", "foo")
    diff("CLIENT", "REPLY")


def test_client_names_and_setinfo(diff, r):
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "my-conn")
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "a b")
    diff("CLIENT", "SETNAME", "a\nb")
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "")
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETINFO", "lib-name", "x")
    diff("CLIENT", "SETINFO", "LIB-VER", "1.0")
    diff("CLIENT", "SETINFO", "foo", "bar")
    diff("CLIENT", "SETINFO", "lib-name", "a b")
    diff("CLIENT", "SETINFO", "LIB-VER", "a b")
    diff("CLIENT", "SETINFO", "lib-name")
    diff.resp3()
    diff("CLIENT", "GETNAME")
    diff("CLIENT", "SETNAME", "n")
    diff("CLIENT", "GETNAME")
    assert r.client_setname("py") is True
    assert r.client_getname() in ("py", b"py")


def test_client_misc(diff):
    for args in (("NO-EVICT", "on"), ("NO-EVICT", "off"), ("NO-EVICT", "foo"),
                 ("NO-TOUCH", "ON"), ("NO-TOUCH", "off"), ("NO-TOUCH", "maybe"),
                 ("ID", "x"), ("INFO", "x"), ("FOO",), ()):
        diff("CLIENT", *args)
    help_lines = parse(diff.ours.call("CLIENT", "HELP"))
    assert help_lines[0] == b"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert b"UNBLOCK <clientid> [TIMEOUT|ERROR]" in help_lines
    assert help_lines[-2:] == [b"HELP", b"    Print this help."]


def test_valkey_py_client_helpers(r):
    info = r.client_info()
    assert info["id"] == r.client_id()
    assert any(str(c["id"]) == str(info["id"]) for c in r.client_list())
    assert r.client_list(_type="pubsub") == []


def test_client_traffic_counters(raw, raw_factory):
    def counters(c, cid):
        f = list_lines(c, "ID", cid)[0]
        return int(f["tot-net-in"]), int(f["tot-net-out"]), int(f["tot-cmds"])
    other = raw_factory()
    oid = client_id(other)          # 26 bytes in, 4 out (":N\r\n" for small ids)
    in1, out1, cmds1 = counters(raw, oid)
    assert cmds1 == 1 and in1 == len(b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n")
    assert other.call("SET", "k", "v") == b"+OK\r\n"
    set_len = len(encode_command("SET", "k", "v"))
    assert counters(raw, oid) == (in1 + set_len, out1 + 5, cmds1 + 1)
    # A blocked command is counted once, when it is served.
    other.send("BLPOP", "cq", "0")
    assert wait_for(lambda: "b" in list_lines(raw, "ID", oid)[0]["flags"])
    blpop_len = len(encode_command("BLPOP", "cq", "0"))
    assert counters(raw, oid) == (in1 + set_len + blpop_len, out1 + 5, cmds1 + 1)
    raw.call("LPUSH", "cq", "a")
    reply = other.read_reply()
    assert reply == b"*2\r\n$2\r\ncq\r\n$1\r\na\r\n"
    assert counters(raw, oid) == (in1 + set_len + blpop_len, out1 + 5 + len(reply), cmds1 + 2)


def test_client_pause_errors(diff):
    for args in (("x",), ("-1",), ("10", "foo"), ("x", "foo"), ()):
        diff("CLIENT", "PAUSE", *args)
    diff("CLIENT", "UNPAUSE", "x")
    diff("CLIENT", "UNPAUSE")


def test_client_pause_write_postpones_writes_only(raw, raw_factory):
    writer = raw_factory()
    try:
        assert raw.call("CLIENT", "PAUSE", "100000", "WRITE") == b"+OK\r\n"
        info = parse(raw.call("INFO", "clients")).decode()
        assert "paused_reason:client_pause" in info and "paused_actions:write" in info
        assert writer.call("GET", "pk") == b"$-1\r\n"        # reads go on
        writer.send("SET", "pk", "v")                         # postponed...
        writer.send("GET", "pk")                              # ...and so is what follows
        assert writer.read_available(0.2) == b""
        wid = client_id(raw_factory())  # noqa: F841  (new connections are accepted)
        f = [x for x in list_lines(raw) if x["cmd"] == "get" and "b" in x["flags"]]
        assert f, "the postponed client shows the b flag"
        assert "blocked_clients:1" in parse(raw.call("INFO", "clients")).decode()
        assert raw.call("CLIENT", "UNPAUSE") == b"+OK\r\n"
        assert writer.read_reply() == b"+OK\r\n"
        assert writer.read_reply() == b"$1\r\nv\r\n"
        assert "paused_reason:none" in parse(raw.call("INFO", "clients")).decode()
    finally:
        raw.call("CLIENT", "UNPAUSE")


def test_client_pause_all_ends_by_timeout(raw, raw_factory):
    other = raw_factory()
    assert raw.call("CLIENT", "PAUSE", "300", "ALL") == b"+OK\r\n"
    t = time.monotonic()
    other.send("PING")
    assert other.read_available(0.1) == b""
    assert other.read_reply() == b"+PONG\r\n"      # once the 300 ms are over
    assert time.monotonic() - t >= 0.25
    assert raw.call("PING") == b"+PONG\r\n"


def test_client_pause_postponed_client_can_be_killed(raw, raw_factory):
    victim = raw_factory()
    vid = client_id(victim)
    try:
        raw.call("CLIENT", "PAUSE", "100000", "WRITE")
        victim.send("SET", "killed", "1")
        assert wait_for(lambda: "b" in list_lines(raw, "ID", vid)[0]["flags"])
        assert raw.call("CLIENT", "UNBLOCK", vid) == b":0\r\n"   # not blocked on keys
        assert raw.call("CLIENT", "KILL", "ID", vid) == b":1\r\n"
    finally:
        raw.call("CLIENT", "UNPAUSE")
    assert raw.call("EXISTS", "killed") == b":0\r\n"
    assert "blocked_clients:0" in parse(raw.call("INFO", "clients")).decode()


def test_unix_socket_client_addr(tmp_path, hotkv_server_factory):
    import socket
    path = str(tmp_path / "hk.sock")
    hotkv_server_factory(unixsocket=path)
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n")
    data = b""
    while not data.endswith(b"\n\r\n"):
        data += s.recv(65536)
    f = fields(parse(data))
    assert f["addr"] == f["laddr"] == path + ":0"
    assert f["flags"] == "U"
    s2 = socket.socket(socket.AF_UNIX)
    s2.connect(path)
    s2.sendall(encode_command("CLIENT", "KILL", "ADDR", path + ":0", "SKIPME", "yes"))
    assert s2.recv(100) == b":1\r\n"
    s.settimeout(5)
    assert s.recv(100) == b""     # the first connection was closed
    s.close()
    s2.close()
