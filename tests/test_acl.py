"""ACL and authentication (hotkv.clients.acl, hotkv.commands.acl_cmds), against the reference
Valkey where replies are deterministic, and behaviourally where they are not
(password hashes are deterministic; GENPASS, LOG timestamps and client info
are not)."""

from __future__ import annotations

import hashlib
import os
import time

import pytest
import valkey

from support import RawClient, ReferenceValkey


@pytest.fixture
def acl_diff(diff):
    """The ``diff`` helper, with every non-default user and the ACL log
    cleared on both servers afterwards."""
    yield diff
    for c in (diff.ours, diff.theirs):
        users = _bulk_list(c.call("ACL", "USERS"))
        others = [u for u in users if u != b"default"]
        if others:
            c.call("ACL", "DELUSER", *others)
        c.call("ACL", "LOG", "RESET")


def _bulk_list(reply: bytes) -> list[bytes]:
    lines = reply.split(b"\r\n")
    return [lines[i + 1] for i in range(1, len(lines) - 1, 2) if lines[i].startswith(b"$")]


@pytest.fixture
def fresh_pair(server, ref_server):
    """Two new connections (hotkv, Valkey) that can AUTH without affecting the
    ``diff`` connections."""
    made = []

    def make():
        a = RawClient(server.host, server.port)
        b = RawClient(ref_server.host, ref_server.port)
        made.append((a, b))
        return a, b
    yield make
    for a, b in made:
        a.close()
        b.close()


def both(pair, *args):
    a, b = pair
    x, y = a.call(*args), b.call(*args)
    assert x == y, f"{args!r}:\n hotkv:  {x!r}\n valkey: {y!r}"
    return x


# ----------------------------------------------------------------------
# ACL SETUSER / GETUSER / LIST: byte-for-byte
# ----------------------------------------------------------------------

SETUSER_CASES = [
    ["alice", "on", ">pw", "~foo*", "%R~r*", "%W~w*", "&ch*", "+get", "+set", "-@all",
     "+@string", "-set", "+config|get", "+select|0", "+lpush", "+exists", "+hset", "-hset"],
    ["u", "+@all", "-@dangerous", "+debug", "~a", "~b", "%R~c"],
    ["u", "-@all", "+@list", "-lpush", "+@hash", "-@write"],
    ["u", "+config", "-config|set", "+client|list", "-client"],
    ["v", "%RW~k", "%R~k2", "%W~k2", "~k3", "%R~k3", "&x", "&x", "&y"],
    ["v", "nopass", "on", ">a", "#" + "0123456789" * 6 + "0123",
     "!" + "0123456789" * 6 + "0123"],
    ["v", "skip-sanitize-payload", "off", ""],
    ["w", "allkeys", "allchannels", "allcommands", "resetchannels", "&a"],
    ["w", "reset"],
    ["w", "on", "nopass", "resetpass", ">x", ">x", ">y", "<x"],
    ["W", "+GET", "+@STRING", "-@String", "~K"],
]


@pytest.mark.parametrize("args", SETUSER_CASES, ids=lambda a: " ".join(a)[:40])
def test_setuser_getuser_list_match_valkey(acl_diff, args):
    acl_diff("ACL", "SETUSER", *args)
    acl_diff("ACL", "GETUSER", args[0])
    acl_diff("ACL", "LIST")
    acl_diff("ACL", "USERS")
    acl_diff.resp3()
    acl_diff("ACL", "GETUSER", args[0])


SETUSER_ERRORS = [
    ["x", "+nosuch"], ["x", "foo"], ["x", "~*", "~a"], ["x", "&*", "&a"], ["x", "#abc"],
    ["x", "#" + "A" * 64], ["x", "<nope"], ["x", "!" + "0" * 64], ["x", "+config|get|x"],
    ["x", "+config|"], ["x", "+config|nosuch"], ["x", "-select|0"], ["x", "%~a"],
    ["x", "%RR~a"], ["x", "%X~a"], ["x", "+@nosuch"], ["x y", "on"], ["x\0", "on"],
    ["x", "on", ">ok", "+get", "bogus"],
]


@pytest.mark.parametrize("args", SETUSER_ERRORS, ids=lambda a: " ".join(a)[:40])
def test_setuser_errors_match_valkey_and_change_nothing(acl_diff, args):
    acl_diff("ACL", "SETUSER", *args)
    acl_diff("ACL", "LIST")


def test_acl_subcommand_errors_and_help(acl_diff):
    for args in (["ACL", "CAT"], ["ACL", "CAT", "nope"], ["ACL", "CAT", "a", "b"],
                 ["ACL", "GENPASS", "0"], ["ACL", "GENPASS", "4097"], ["ACL", "GENPASS", "x"],
                 ["ACL", "LOG", "x"], ["ACL", "LOG", "-1"], ["ACL", "LOAD"], ["ACL", "SAVE"],
                 ["ACL", "DELUSER", "default"], ["ACL", "DELUSER", "nobody", "default"],
                 ["ACL", "FOO"], ["ACL", "HELP"], ["ACL"], ["ACL", "GETUSER", "nobody"],
                 ["ACL", "DELUSER", "nobody"], ["ACL", "WHOAMI"], ["ACL", "LIST", "x"],
                 ["ACL", "DRYRUN", "nobody", "get", "x"]):
        acl_diff(*args)


def test_acl_cat_category_lists_commands(r):
    cmds = r.acl_cat("list")
    assert "lpush" in cmds and "blpop" in cmds and "get" not in cmds
    assert "get" in r.acl_cat("read") and "get" not in r.acl_cat("write")


def test_genpass_lengths(r):
    assert len(r.acl_genpass()) == 64
    assert len(r.execute_command("ACL", "GENPASS", "5")) == 2
    assert len(r.execute_command("ACL", "GENPASS", "4096")) == 1024
    assert r.acl_genpass() != r.acl_genpass()


DRYRUN = [
    ["get", "foo"], ["get", "bar"], ["lpush", "foo", "a"], ["nosuch", "x"], ["get"],
    ["select", "0"], ["select", "1"], ["config|get", "x"], ["config", "get", "x"],
    ["config", "set", "x", "y"], ["config"], ["config", "nope"], ["set", "w1", "x"],
    ["get", "w1"], ["exists", "w1"], ["exists", "zz"], ["mget", "foo", "bar", "baz"],
    ["lpush", "r1", "x"], ["getdel", "w1"], ["hset", "h", "a", "b"],
]


@pytest.mark.parametrize("cmd", DRYRUN, ids=lambda a: " ".join(a))
def test_dryrun_matches_valkey(acl_diff, cmd):
    acl_diff(*(["ACL", "SETUSER"] + SETUSER_CASES[0]))
    acl_diff("ACL", "DRYRUN", "alice", *cmd)


# ----------------------------------------------------------------------
# AUTH, HELLO AUTH, NOPERM at run time
# ----------------------------------------------------------------------

RUNTIME = [
    ["ACL", "WHOAMI"], ["GET", "bar"], ["GET", "foo"], ["SET", "r1", "x"], ["LPUSH", "r1", "x"],
    ["GET", "r1"], ["LPUSH", "w1", "x"], ["MULTI"], ["GET", "bar"], ["EXEC"],
    ["HSET", "h", "a", "b"], ["CONFIG", "GET", "maxmemory"], ["SELECT", "0"], ["SELECT", "1"],
    ["CONFIG", "SET", "maxmemory", "0"], ["APPEND", "w1", "x"], ["DEL", "foo"],
]


def test_noperm_errors_match_valkey(acl_diff, fresh_pair):
    acl_diff(*(["ACL", "SETUSER"] + SETUSER_CASES[0]))
    pair = fresh_pair()
    both(pair, "AUTH", "alice", "pw")
    for cmd in RUNTIME:
        both(pair, *cmd)


def test_auth_failures_match_valkey(acl_diff, fresh_pair):
    acl_diff(*(["ACL", "SETUSER"] + SETUSER_CASES[0]))
    pair = fresh_pair()
    for cmd in (["AUTH", "nobody", "x"], ["AUTH", "x"], ["AUTH", "alice", "bad"],
                ["AUTH", "a", "b", "c"], ["HELLO", "3", "AUTH", "alice", "bad"],
                ["HELLO", "2", "AUTH", "alice"], ["ACL", "SETUSER", "off1", "off", ">p"],
                ["AUTH", "off1", "p"], ["AUTH", "alice", "pw"], ["ACL", "WHOAMI"]):
        both(pair, *cmd)


def test_requirepass_noauth_and_allowed_commands(hotkv_server_factory):
    s = hotkv_server_factory(requirepass="s3cret")
    c = RawClient(s.host, s.port)
    assert c.call("GET", "x") == b"-NOAUTH Authentication required.\r\n"
    assert c.call("ACL", "WHOAMI") == b"-NOAUTH Authentication required.\r\n"
    hello = c.call("HELLO", "3")
    assert hello.startswith(b"-NOAUTH HELLO must be called with the client already authenticated")
    assert c.call("AUTH", "nope") == (
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
    assert c.call("AUTH", "s3cret") == b"+OK\r\n"
    assert c.call("ACL", "WHOAMI") == b"$7\r\ndefault\r\n"
    assert c.call("RESET") == b"+RESET\r\n"
    assert c.call("GET", "x") == b"-NOAUTH Authentication required.\r\n"
    assert c.call("HELLO", "3", "AUTH", "default", "s3cret").startswith(b"%7\r\n")
    assert c.call("QUIT") == b"+OK\r\n"
    c.close()


def test_unauthenticated_clients_limited_to_small_frames(hotkv_server_factory):
    """Before AUTH, Redis refuses big multibulk counts and bulk lengths."""
    s = hotkv_server_factory(requirepass="pw")
    c = RawClient(s.host, s.port)
    c.send_raw(b"*11\r\n")
    assert c.read_reply() == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    assert c.is_closed()
    c = RawClient(s.host, s.port)
    c.send_raw(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n")
    assert c.read_reply() == b"-ERR Protocol error: unauthenticated bulk length\r\n"
    c = RawClient(s.host, s.port)
    assert c.call("AUTH", "pw") == b"+OK\r\n"
    assert c.call("SET", "k", "v" * 20000) == b"+OK\r\n"


def test_named_user_with_valkey_py(hotkv_server_factory):
    s = hotkv_server_factory(requirepass="adm")
    admin = valkey.Valkey(host=s.host, port=s.port, password="adm")
    assert admin.acl_setuser("worker", enabled=True, passwords=["+wpw"], keys=["jobs:*"],
                             channels=["events"], commands=["+@list", "+@connection",
                                                            "+publish", "-lpush"])
    w = valkey.Valkey(host=s.host, port=s.port, username="worker", password="wpw")
    assert w.rpush("jobs:1", "a") == 1
    with pytest.raises(valkey.exceptions.NoPermissionError,
                       match="No permissions to access a key"):
        w.rpush("other", "a")
    with pytest.raises(valkey.exceptions.NoPermissionError,
                       match="has no permissions to run the 'lpush' command"):
        w.lpush("jobs:1", "a")
    with pytest.raises(valkey.exceptions.NoPermissionError):
        w.set("jobs:1", "x")
    with pytest.raises(valkey.exceptions.AuthenticationError):
        valkey.Valkey(host=s.host, port=s.port, username="worker", password="bad").ping()
    # The denials and the failed AUTH are in the log, newest first.
    log = admin.acl_log()
    reasons = [e["reason"] for e in log]
    assert reasons[0] == "auth" and "command" in reasons and "key" in reasons
    auth = log[0]
    assert auth["username"] == "worker" and auth["object"] == "AUTH"
    assert auth["context"] == "toplevel" and auth["count"] == 1
    key = next(e for e in log if e["reason"] == "key")
    assert key["object"] == "other"
    assert admin.acl_log_reset()
    assert admin.acl_log() == []


def test_acl_log_groups_repeats(hotkv_server_factory):
    s = hotkv_server_factory()
    c = RawClient(s.host, s.port)
    for _ in range(3):
        c.call("AUTH", "ghost", "x")
    r = valkey.Valkey(host=s.host, port=s.port)
    log = r.acl_log()
    assert len(log) == 1 and log[0]["count"] == 3
    r.config_set("acllog-max-len", 2)
    for i in range(5):
        c.call("AUTH", "ghost%d" % i, "x")
    assert [e["username"] for e in r.acl_log()] == ["ghost4", "ghost3"]
    assert len(r.acl_log(count=1)) == 1


def test_multi_context_logged(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.acl_setuser("m", enabled=True, nopass=True, keys=["*"], commands=["+multi", "+exec",
                                                                        "+get"])
    c = RawClient(s.host, s.port)
    assert c.call("AUTH", "m", "any") == b"+OK\r\n"
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("SET", "k", "v").startswith(b"-NOPERM")
    assert c.call("EXEC").startswith(b"-EXECABORT")
    assert r.acl_log()[0]["context"] == "multi"


def test_passwords_stored_hashed(hotkv_server_factory):
    s = hotkv_server_factory(requirepass="plain-secret")
    r = valkey.Valkey(host=s.host, port=s.port, password="plain-secret")
    listing = b" ".join(x if isinstance(x, bytes) else x.encode() for x in r.acl_list())
    assert b"plain-secret" not in listing
    assert hashlib.sha256(b"plain-secret").hexdigest().encode() in listing
    user = s.server.acl.users[b"default"]
    assert user.passwords == [hashlib.sha256(b"plain-secret").hexdigest().encode()]


def test_config_set_requirepass_updates_default_user(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.config_set("requirepass", "newpw")
    c = RawClient(s.host, s.port)
    assert c.call("PING") == b"-NOAUTH Authentication required.\r\n"
    assert c.call("AUTH", "newpw") == b"+OK\r\n"
    r.config_set("requirepass", "")
    c2 = RawClient(s.host, s.port)
    assert c2.call("PING") == b"+PONG\r\n"


def test_deluser_disconnects_its_clients(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.acl_setuser("tmp", enabled=True, nopass=True, commands=["+@all"], keys=["*"])
    c = RawClient(s.host, s.port)
    assert c.call("AUTH", "tmp", "x") == b"+OK\r\n"
    assert r.acl_deluser("tmp") == 1
    assert c.is_closed()
    assert r.ping()


def test_setuser_changes_apply_to_connected_clients(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.acl_setuser("live", enabled=True, nopass=True, commands=["+@all"], keys=["*"])
    c = RawClient(s.host, s.port)
    c.call("AUTH", "live", "x")
    assert c.call("SET", "a", "1") == b"+OK\r\n"
    r.acl_setuser("live", commands=["-set"])
    assert c.call("SET", "a", "1") == (
        b"-NOPERM User live has no permissions to run the 'set' command\r\n")
    assert c.call("GET", "a") == b"$1\r\n1\r\n"


def test_unrestricted_default_costs_nothing(hotkv_server_factory):
    """With only +@all ~* &* users the dispatcher's check is not installed."""
    s = hotkv_server_factory(requirepass="x")
    assert s.server.acl_check is None
    r = valkey.Valkey(host=s.host, port=s.port, password="x")
    r.acl_setuser("limited", enabled=True, nopass=True, commands=["+get"])
    assert s.server.acl_check is not None
    r.acl_deluser("limited")
    assert s.server.acl_check is None


def test_first_arg_rule(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.execute_command("ACL", "SETUSER", "sel", "on", "nopass", "+select|0", "+ping")
    c = RawClient(s.host, s.port)
    c.call("AUTH", "sel", "x")
    assert c.call("SELECT", "0") == b"+OK\r\n"
    assert c.call("SELECT", "1").startswith(b"-NOPERM User sel has no permissions to run the "
                                             b"'select' command")


# ----------------------------------------------------------------------
# aclfile, ACL SAVE / LOAD
# ----------------------------------------------------------------------

def test_aclfile_loaded_at_start_saved_and_reloaded(hotkv_server_factory, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user default on nopass ~* &* +@all\n"
                    "user app on >apppw ~app:* resetchannels -@all +get +set\n")
    s = hotkv_server_factory(aclfile=str(path))
    app = valkey.Valkey(host=s.host, port=s.port, username="app", password="apppw")
    assert app.set("app:1", "v")
    with pytest.raises(valkey.exceptions.NoPermissionError):
        app.set("other", "v")
    r = valkey.Valkey(host=s.host, port=s.port)
    r.acl_setuser("extra", enabled=True, passwords=["+e"], commands=["+ping"])
    assert r.acl_save()
    saved = path.read_text()
    assert "user extra on sanitize-payload #" in saved and "apppw" not in saved
    assert hashlib.sha256(b"apppw").hexdigest() in saved
    # Edit the file and reload: the new rules apply to connected clients.
    path.write_text(saved.replace("+get +set", "+get"))
    assert r.acl_load()
    with pytest.raises(valkey.exceptions.NoPermissionError):
        app.set("app:1", "v")
    assert app.get("app:1") == b"v"


def test_acl_load_errors_change_nothing(hotkv_server_factory, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user default on nopass ~* &* +@all\n")
    s = hotkv_server_factory(aclfile=str(path))
    r = valkey.Valkey(host=s.host, port=s.port)
    r.acl_setuser("keep", enabled=True, nopass=True)
    path.write_text("user default on nopass ~* &* +@all\nuser bad +nosuch\nnot a user line\n"
                    "user dup on\nuser dup on\n")
    with pytest.raises(valkey.exceptions.ResponseError) as e:
        r.acl_load()
    text = str(e.value)
    assert "users.acl:2: Error in applying operation '+nosuch'" in text
    assert "users.acl:3 should start with user keyword" in text
    assert "Duplicate user 'dup' found on line 5" in text
    assert text.endswith("no change to the previously active ACL rules was performed")
    assert b"keep" in [u.encode() if isinstance(u, str) else u for u in r.acl_users()]


def test_bad_aclfile_refuses_to_start(hotkv_server_factory, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user x +nosuchcommand\n")
    with pytest.raises(Exception, match="ACL errors"):
        hotkv_server_factory(aclfile=str(path))
    with pytest.raises(Exception, match="opening file"):
        hotkv_server_factory(aclfile=str(tmp_path / "missing.acl"))


def test_acl_file_matches_valkey_format(tmp_path, hotkv_server_factory):
    """ACL SAVE writes what Valkey writes for the same users."""
    ours_path, ref_path = tmp_path / "ours.acl", tmp_path / "ref.acl"
    ours_path.write_text("")
    ref_path.write_text("")
    s = hotkv_server_factory(aclfile=str(ours_path))
    with ReferenceValkey("--aclfile", str(ref_path)) as ref:
        for host, port in ((s.host, s.port), (ref.host, ref.port)):
            c = RawClient(host, port)
            for case in SETUSER_CASES[:5]:
                assert c.call("ACL", "SETUSER", *case) == b"+OK\r\n"
            assert c.call("ACL", "SAVE") == b"+OK\r\n"
            c.close()
    assert ours_path.read_text() == ref_path.read_text()
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


# ----------------------------------------------------------------------
# Channels
# ----------------------------------------------------------------------

CHANNEL_CASES = [
    ["PUBLISH", "zz", "x"], ["PUBLISH", "chx", "x"], ["SPUBLISH", "zz", "x"],
    ["SUBSCRIBE", "cha", "zz"], ["PSUBSCRIBE", "ch*"], ["PSUBSCRIBE", "ch"],
    ["PSUBSCRIBE", "chx"], ["SSUBSCRIBE", "zz"], ["UNSUBSCRIBE", "zz"],
    ["PUNSUBSCRIBE", "zz*"], ["PUBSUB", "NUMSUB", "zz"],
]


@pytest.mark.parametrize("cmd", CHANNEL_CASES, ids=lambda a: " ".join(a))
def test_channel_permissions_match_valkey(acl_diff, fresh_pair, cmd):
    acl_diff("ACL", "SETUSER", "chan", "on", ">pw", "&ch*", "+@all", "~*")
    pair = fresh_pair()
    both(pair, "AUTH", "chan", "pw")
    for c in pair:
        c.call("HELLO", "3")    # server name and version differ; not compared
    both(pair, *cmd)
    both(pair, "ACL", "DRYRUN", "chan", *cmd)


def test_check_channels_helper(hotkv_server_factory):
    from hotkv.clients import acl
    s = hotkv_server_factory()
    s.server.acl.setuser(b"c", [b"on", b"nopass", b"&news.*", b"+@all"])
    c = RawClient(s.host, s.port)
    c.call("AUTH", "c", "x")
    conn = next(cl for cl in s.server.clients.values() if cl.user.name == b"c")
    assert acl.check_channels(conn, [b"news.1"], False) is None
    assert acl.check_channels(conn, [b"news.*"], True) is None
    assert acl.check_channels(conn, [b"news.1", b"sports"], False) == (
        "NOPERM No permissions to access a channel")
    assert acl.check_channels(conn, [b"news.1*"], True) is not None


def test_revoking_channels_disconnects_subscribers(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.execute_command("ACL", "SETUSER", "sub", "on", "nopass", "&news.*", "+@all")
    c = RawClient(s.host, s.port)
    c.call("AUTH", "sub", "x")
    assert c.call("SUBSCRIBE", "news.1").startswith(b"*3")
    other = RawClient(s.host, s.port)
    other.call("AUTH", "sub", "x")
    r.execute_command("ACL", "SETUSER", "sub", "resetchannels", "&other")
    assert c.is_closed()
    assert other.call("PING") == b"+PONG\r\n"     # not subscribed: kept


def test_acl_pubsub_default_allchannels(hotkv_server_factory):
    s = hotkv_server_factory(acl_pubsub_default="allchannels")
    r = valkey.Valkey(host=s.host, port=s.port)
    r.execute_command("ACL", "SETUSER", "n", "on")
    assert "user n on sanitize-payload &* -@all" in r.acl_list()
    r.execute_command("ACL", "SETUSER", "n", "reset")
    assert "user n off sanitize-payload &* -@all" in r.acl_list()


def test_user_directives_from_config(hotkv_server_factory, tmp_path):
    s = hotkv_server_factory(user="app on >pw ~app:* +@all")
    app = valkey.Valkey(host=s.host, port=s.port, username="app", password="pw")
    assert app.set("app:x", 1)
    with pytest.raises(valkey.exceptions.NoPermissionError):
        app.set("other", 1)
    path = tmp_path / "u.acl"
    path.write_text("")
    with pytest.raises(Exception, match="not both"):
        hotkv_server_factory(user="app on", aclfile=str(path))
    with pytest.raises(Exception, match="Error loading ACL rule"):
        hotkv_server_factory(user="app on +nosuch")


# ----------------------------------------------------------------------
# The fast key/channel matcher agrees with Redis's glob matcher
# ----------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=400, deadline=None, database=None)
@given(pattern=st.lists(st.sampled_from([b"a", b"b", b"*", b"?", b".", b"\n", b"(", b"["]),
                        max_size=6).map(b"".join),
       subject=st.lists(st.sampled_from([b"a", b"b", b".", b"\n", b"(", b"x"]),
                        max_size=6).map(b"".join))
def test_glob_matcher_agrees_with_stringmatch(pattern, subject):
    from hotkv.clients.acl_rules import glob_matcher
    from hotkv.protocol.util import stringmatch
    assert bool(glob_matcher(pattern)(subject)) == stringmatch(pattern, subject)


def test_blocked_client_rechecked_when_served(hotkv_server_factory):
    """Permissions revoked while a client waits: it gets NOPERM, not the job."""
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.execute_command("ACL", "SETUSER", "ps", "on", "nopass", "+@all", "allkeys")
    c = RawClient(s.host, s.port)
    c.call("AUTH", "ps", "x")
    c.send("BLPOP", "list1", "0")
    deadline = time.time() + 5
    while s.server.blocked_clients != 1 and time.time() < deadline:
        time.sleep(0.01)
    r.execute_command("ACL", "SETUSER", "ps", "resetkeys")
    assert r.lpush("list1", "foo") == 1
    assert c.read_reply() == b"-NOPERM No permissions to access a key\r\n"
    assert r.lrange("list1", 0, -1) == [b"foo"]
    assert s.server.blocked_clients == 0
    assert c.call("PING") == b"+PONG\r\n"


def test_exec_rechecks_permissions_like_valkey(acl_diff, fresh_pair):
    """ACLs changed between MULTI and EXEC: each queued command is re-checked."""
    acl_diff("ACL", "SETUSER", "tx", "on", "nopass", "+@all", "~*", "&*")
    pair = fresh_pair()
    for cmd in (["AUTH", "tx", "x"], ["MULTI"], ["SET", "k", "v"], ["GET", "k"],
                ["PUBLISH", "ch", "m"], ["PING"]):
        both(pair, *cmd)
    acl_diff("ACL", "SETUSER", "tx", "-set", "resetkeys", "~z*", "resetchannels")
    both(pair, "EXEC")
    for c in (acl_diff.ours, acl_diff.theirs):
        log = c.call("ACL", "LOG", "1")
        assert b"$7\r\ncontext\r\n$5\r\nmulti\r\n" in log and b"$6\r\npublish" not in log


# ----------------------------------------------------------------------
# Selectors
# ----------------------------------------------------------------------

SELECTOR_SETUP = ["sel", "on", "nopass", "+get", "~a*", "(+set ~b*)",
                  "(%R~c* &ch +@hash)", "(&a* +publish)", "(+subscribe &b)"]
SELECTOR_RUNS = [
    ["get", "a1"], ["get", "b1"], ["set", "b1", "x"], ["set", "a1", "x"], ["hget", "c1", "f"],
    ["hset", "c1", "f", "v"], ["lpush", "zz", "v"], ["mget", "a1", "b1"],
    ["publish", "a1", "x"], ["publish", "b", "x"], ["subscribe", "b"], ["subscribe", "a1"],
]


@pytest.mark.parametrize("cmd", SELECTOR_RUNS, ids=lambda a: " ".join(a))
def test_selectors_match_valkey(acl_diff, cmd):
    acl_diff("ACL", "SETUSER", *SELECTOR_SETUP)
    acl_diff("ACL", "DRYRUN", "sel", *cmd)


def test_selector_description_and_errors_match_valkey(acl_diff):
    for args in (SELECTOR_SETUP, ["sel", "(~x", "+get", "foo)"], ["sel", "(~x", "+get"],
                 ["sel", "(~x", "on)"], ["sel", "(~x)", "clearselectors", "(+ping)"],
                 ["sel2", "()", "(", "~a", ")", "(~*", "~b)"], ["sel2", "()", "(", "~a", ")"],
                 ["sel3", "on", "(+get ~x)"]):
        acl_diff("ACL", "SETUSER", *args)
        acl_diff("ACL", "LIST")
        acl_diff("ACL", "GETUSER", args[0])
    acl_diff.resp3()
    acl_diff("ACL", "GETUSER", "sel3")
    acl_diff("ACL", "SETUSER", "sel", "reset")
    acl_diff("ACL", "GETUSER", "sel")


def test_selectors_at_run_time(acl_diff, fresh_pair):
    acl_diff("ACL", "SETUSER", *SELECTOR_SETUP)
    pair = fresh_pair()
    both(pair, "AUTH", "sel", "x")
    for cmd in (["SET", "b1", "v"], ["GET", "b1"], ["SET", "a1", "v"], ["PUBLISH", "a1", "m"],
                ["PUBLISH", "zz", "m"], ["HSET", "c1", "f", "v"], ["SUBSCRIBE", "b"]):
        both(pair, *cmd)


def test_selectors_survive_acl_save_and_load(hotkv_server_factory, tmp_path):
    path = tmp_path / "sel.acl"
    path.write_text("")
    s = hotkv_server_factory(aclfile=str(path))
    r = valkey.Valkey(host=s.host, port=s.port)
    r.execute_command("ACL", "SETUSER", *SELECTOR_SETUP)
    before = r.acl_list()
    assert r.acl_save() and r.acl_load()
    assert r.acl_list() == before
    assert "(~b* resetchannels -@all +set)" in path.read_text()


SPLIT_KEY_CASES = [
    ["copy", "read", "write"], ["copy", "write", "read"],
    ["sunionstore", "write1", "read1", "read2"], ["sunionstore", "read1", "read1", "read2"],
    ["sunionstore", "write1", "read1", "write2"], ["lmove", "read1", "write1", "left", "right"],
    ["lmove", "rw1", "write1", "left", "right"], ["rename", "write1", "write2"],
    ["rename", "rw1", "write2"], ["smove", "write1", "write2", "m"],
    ["sort", "read1", "store", "write1"], ["sort", "read1", "store", "read2"],
    ["zrangestore", "write1", "read1", "0", "-1"],
]


@pytest.mark.parametrize("cmd", SPLIT_KEY_CASES, ids=lambda a: " ".join(a))
def test_read_write_key_permissions_per_key_match_valkey(acl_diff, cmd):
    """%R~ / %W~ are judged per key: a source needs read, a destination write."""
    acl_diff("ACL", "SETUSER", "rw", "on", "nopass", "~rw*", "%R~read*", "%W~write*", "+@all")
    acl_diff("ACL", "DRYRUN", "rw", *cmd)


def test_all_keys_readable_helper(hotkv_server_factory):
    from hotkv.clients import acl
    from hotkv.core.registry import TABLE
    s = hotkv_server_factory()
    sort = TABLE[b"sort"] if b"sort" in TABLE else TABLE[b"get"]
    s.server.acl.setuser(b"a", [b"on", b"nopass", b"(+@all ~mylist)", b"(+@all %R~*)"])
    s.server.acl.setuser(b"b", [b"on", b"nopass", b"+@all", b"~mylist", b"%W~*"])
    for name, expected in ((b"a", True), (b"b", False)):
        c = RawClient(s.host, s.port)
        c.call("AUTH", name.decode(), "x")
        conn = next(cl for cl in s.server.clients.values() if cl.user.name == name)
        assert acl.all_keys_readable(conn, sort, [b"sort", b"mylist"]) is expected
