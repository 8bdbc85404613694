"""Resource limits and protected defaults (hotkv.clients.limits, the parser's limits,
maxclients, maxmemory): each limit closes or refuses the offender and leaves
every other client and all data alone."""

from __future__ import annotations

import socket

import pytest
import valkey

from support import RawClient, ReferenceValkey, wait_for


def _closed(c: RawClient) -> bool:
    """True once the server closed c (reads and drops anything pending)."""
    c.sock.settimeout(0.2)
    try:
        while True:
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True
    finally:
        c.sock.settimeout(5.0)


def test_maxclients_refuses_with_redis_error(hotkv_server_factory):
    s = hotkv_server_factory(maxclients=2)
    a, b = RawClient(s.host, s.port), RawClient(s.host, s.port)
    assert a.call("PING") == b"+PONG\r\n" and b.call("PING") == b"+PONG\r\n"
    c = RawClient(s.host, s.port)
    assert c.read_reply() == b"-ERR max number of clients reached\r\n"
    assert c.is_closed()
    b.close()
    assert wait_for(lambda: len(s.server.clients) == 1)
    d = RawClient(s.host, s.port)
    assert d.call("PING") == b"+PONG\r\n"


def test_proto_max_bulk_len_matches_valkey(hotkv_server_factory):
    s = hotkv_server_factory(proto_max_bulk_len="1mb")
    with ReferenceValkey("--proto-max-bulk-len", "1mb") as ref:
        for host, port in ((s.host, s.port), (ref.host, ref.port)):
            c = RawClient(host, port)
            assert c.call("SET", "small", "x" * 1000) == b"+OK\r\n"
            c.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (1024 * 1024 + 1))
            assert c.read_reply() == b"-ERR Protocol error: invalid bulk length\r\n"
            assert c.is_closed()


def test_query_buffer_limit_drops_endless_bulk(hotkv_server_factory):
    s = hotkv_server_factory(client_query_buffer_limit="1mb")
    other = RawClient(s.host, s.port)
    other.call("SET", "kept", "yes")
    c = RawClient(s.host, s.port)
    c.send_raw(b"*2\r\n$3\r\nGET\r\n$100000000\r\n")
    chunk = b"z" * 65536
    try:
        for _ in range(64):       # 4 MB, four times the limit
            c.send_raw(chunk)
    except OSError:
        pass                      # closed under our feet: that is the point
    assert wait_for(lambda: _closed(c))
    assert s.server.stat_client_qbuf_limit_disconnections >= 1
    assert other.call("GET", "kept") == b"$3\r\nyes\r\n"


def test_query_buffer_limit_counts_split_off_arguments(hotkv_server_factory):
    """An endless multibulk of tiny arguments is bounded too."""
    s = hotkv_server_factory(client_query_buffer_limit="1mb")
    c = RawClient(s.host, s.port)
    c.send_raw(b"*2147483647\r\n")
    chunk = b"$1\r\na\r\n" * 10000
    try:
        for _ in range(100):       # a million arguments
            c.send_raw(chunk)
    except OSError:
        pass
    assert wait_for(lambda: _closed(c))
    assert RawClient(s.host, s.port).call("PING") == b"+PONG\r\n"


def test_endless_inline_line_is_refused(raw_factory):
    c = raw_factory()
    c.send_raw(b"x" * (64 * 1024 + 10))
    assert c.read_reply() == b"-ERR Protocol error: too big inline request\r\n"
    assert c.is_closed()


def test_output_buffer_hard_limit_normal_class(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    r.set("big", "x" * (8 * 1024 * 1024))
    slow = RawClient(s.host, s.port)
    try:
        for _ in range(8):
            slow.send("GET", "big")    # 64 MB of replies it never reads
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may drop it before the last request is even sent
    assert wait_for(lambda: s.server.stat_client_outbuf_limit_disconnections >= 1)
    assert wait_for(lambda: _closed(slow))
    assert r.strlen("big") == 8 * 1024 * 1024


def test_output_buffer_soft_limit_normal_class(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.config_set("client-output-buffer-limit", "normal 0 1mb 1")
    r.set("big", "x" * (8 * 1024 * 1024))
    slow = RawClient(s.host, s.port)
    try:
        for _ in range(4):
            slow.send("GET", "big")
    except (BrokenPipeError, ConnectionResetError):
        pass  # dropped before the last request was sent
    assert wait_for(lambda: s.server.stat_client_outbuf_limit_disconnections >= 1)
    # A client that reads its replies is never touched.
    assert len(r.get("big")) == 8 * 1024 * 1024


def test_idle_timeout_spares_blocked_and_subscribed(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    idle = RawClient(s.host, s.port)
    assert idle.call("PING") == b"+PONG\r\n"
    blocked = RawClient(s.host, s.port)
    blocked.send("BLPOP", "q", "0")
    subscribed = RawClient(s.host, s.port)
    assert subscribed.call("SUBSCRIBE", "ch").startswith(b"*3")
    r.config_set("timeout", 1)
    assert wait_for(lambda: _closed(idle), timeout=8)
    assert not _closed(blocked)
    assert not _closed(subscribed)
    r.config_set("timeout", 0)
    r.rpush("q", "job")
    assert blocked.read_reply() == b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n"


def test_maxmemory_noeviction_refuses_writes_and_keeps_data(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.rpush("queue", *range(100))
    r.set("k", "v")
    r.config_set("maxmemory", 1)
    c = RawClient(s.host, s.port)
    oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    assert c.call("SET", "k2", "v") == oom
    assert c.call("RPUSH", "queue", "x") == oom
    assert c.call("GET", "k") == b"$1\r\nv\r\n"
    assert c.call("LPOP", "queue") == b"$1\r\n0\r\n"      # not denyoom: frees memory
    assert c.call("MULTI") == b"+OK\r\n"
    assert c.call("SET", "k3", "v") == oom
    assert c.call("EXEC").startswith(b"-EXECABORT")
    assert r.llen("queue") == 99 and r.dbsize() == 2     # nothing evicted
    r.config_set("maxmemory", 0)
    assert c.call("SET", "k2", "v") == b"+OK\r\n"


def test_rename_command(hotkv_server_factory):
    s = hotkv_server_factory(rename_command="flushall '' config cfg-secret")
    c = RawClient(s.host, s.port)
    c.call("SET", "k", "v")
    assert c.call("FLUSHALL").startswith(b"-ERR unknown command 'FLUSHALL'")
    assert c.call("CONFIG", "GET", "port").startswith(b"-ERR unknown command 'CONFIG'")
    assert c.call("CFG-SECRET", "GET", "maxclients").startswith(b"*2\r\n")
    assert c.call("cfg-secret", "GET", "maxclients").startswith(b"*2\r\n")
    assert c.call("GET", "k") == b"$1\r\nv\r\n"
    # Other servers in this process keep the original names.
    other = hotkv_server_factory()
    assert RawClient(other.host, other.port).call("FLUSHALL") == b"+OK\r\n"
    with pytest.raises(Exception, match="rename-command"):
        hotkv_server_factory(rename_command="nosuchcommand x")


def test_rename_command_config_file_lines(tmp_path):
    """redis.conf spelling, one rename a line, "" to disable."""
    from hotkv.tools.serve_args import build_config
    conf = tmp_path / "hotkv.conf"
    conf.write_text('rename-command FLUSHALL ""\nrename-command DEBUG ""\n'
                    'rename-command KEYS list-keys\n')
    config = build_config(str(conf), [])
    assert config.values["rename-command"] == (("flushall", ""), ("debug", ""),
                                               ("keys", "list-keys"))


def test_dangerous_commands_are_acl_controllable(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.execute_command("ACL", "SETUSER", "ops", "on", ">pw", "~*", "&*", "+@all",
                      "-flushall", "-config|set", "-shutdown", "-debug")
    c = RawClient(s.host, s.port)
    c.call("AUTH", "ops", "pw")
    for cmd, name in ((["FLUSHALL"], "flushall"), (["CONFIG", "SET", "maxclients", "5"],
                                                    "config|set"), (["SHUTDOWN"], "shutdown")):
        assert c.call(*cmd) == (b"-NOPERM User ops has no permissions to run the '%s' command"
                                b"\r\n" % name.encode())
    assert c.call("CONFIG", "GET", "maxclients").startswith(b"*2")


def _non_loopback_ip():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.connect(("192.0.2.1", 9))     # TEST-NET: no packet is sent
            ip = u.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


def test_protected_mode(hotkv_server_factory):
    ip = _non_loopback_ip()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    s = hotkv_server_factory(host="0.0.0.0")
    c = RawClient(ip, s.port)
    reply = c.read_reply()
    assert reply.startswith(b"-DENIED Running in protected mode because protected mode is "
                            b"enabled and no password is set for the default user.")
    assert reply.endswith(b"the server to start accepting connections from the outside.\r\n")
    assert c.is_closed()
    local = RawClient("127.0.0.1", s.port)
    assert local.call("PING") == b"+PONG\r\n"
    local.call("CONFIG", "SET", "requirepass", "pw")
    c = RawClient(ip, s.port)
    assert c.call("PING") == b"-NOAUTH Authentication required.\r\n"
    assert c.call("AUTH", "pw") == b"+OK\r\n"
    local.call("AUTH", "pw")
    local.call("CONFIG", "SET", "requirepass", "")
    local.call("CONFIG", "SET", "protected-mode", "no")
    assert RawClient(ip, s.port).call("PING") == b"+PONG\r\n"


def test_client_kill_by_user(hotkv_server_factory):
    s = hotkv_server_factory()
    r = valkey.Valkey(host=s.host, port=s.port)
    r.acl_setuser("w", enabled=True, nopass=True, commands=["+@all"], keys=["*"])
    ws = [RawClient(s.host, s.port) for _ in range(3)]
    for w in ws:
        assert w.call("AUTH", "w", "x") == b"+OK\r\n"
    assert r.execute_command("CLIENT", "KILL", "USER", "w") == 3
    assert all(wait_for(lambda w=w: _closed(w)) for w in ws)
    assert r.ping()


def _stat(c: RawClient, name: bytes) -> int:
    info = c.call("INFO", "stats")
    line = next(ln for ln in info.split(b"\r\n") if ln.startswith(name + b":"))
    return int(line.split(b":")[1])


def test_buffer_limit_disconnections_like_valkey(hotkv_server_factory):
    """As Valkey's info.tcl: a 1 MB argument with a 1 MB query-buffer limit,
    and a 100 KB reply with a 10-byte output limit, each cost the client its
    connection and count in INFO stats; INFO passes the 10-byte limit, a KEYS
    array of 111 KB does not pass 100 KB."""
    s = hotkv_server_factory(enable_debug_command="yes")   # DEBUG POPULATE
    with ReferenceValkey() as ref:
        for host, port in ((s.host, s.port), (ref.host, ref.port)):
            admin = RawClient(host, port)
            admin.call("CONFIG", "SET", "client-query-buffer-limit", "1048576")
            c = RawClient(host, port)
            try:
                c.call("SET", "key", "a" * 1048576)
                closed = False
            except (ConnectionError, OSError):
                closed = True
            assert closed or _closed(c)
            assert _stat(admin, b"client_query_buffer_limit_disconnections") == 1
            admin.call("CONFIG", "SET", "client-query-buffer-limit", "1gb")
            admin.call("SET", "key", "a" * 100000)
            admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 10 0 0")
            c = RawClient(host, port)
            with pytest.raises((ConnectionError, OSError)):
                c.call("GET", "key")
            # A reply that fits the 16 KB reply buffer is not counted: INFO
            # passes a 10-byte limit on both (Valkey counts its reply list).
            fresh = RawClient(host, port)
            assert fresh.call("INFO", "stats").startswith(b"$")
            fresh.close()
            assert admin.call("CONFIG", "SET", "client-output-buffer-limit",
                              "normal 0 0 0") == b"+OK\r\n"
            assert _stat(admin, b"client_output_buffer_limit_disconnections") == 1
            assert admin.call("STRLEN", "key") == b":100000\r\n"
            # An array of 111 KB under a 100 KB limit: closed on both (Valkey
            # builds KEYS with a deferred length, all of it in its reply list).
            admin.call("CONFIG", "SET", "client-output-buffer-limit", "normal 100000 0 0")
            admin.call("DEBUG", "POPULATE", "1000", "long-key-name-prefix-of-100-chars" + "-" * 67)
            c = RawClient(host, port)
            with pytest.raises((ConnectionError, OSError)):
                c.call("KEYS", "*")
            assert admin.call("CONFIG", "SET", "client-output-buffer-limit",
                              "normal 0 0 0") == b"+OK\r\n"
