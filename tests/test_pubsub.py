"""Pub/Sub (hotkv/clients/pubsub.py, hotkv/commands/pubsub_cmds.py) and glob matching
(hotkv.protocol.util.stringmatch).

* Transcripts against the reference Valkey, byte for byte: confirmations,
  counts, messages, RESP2 subscribed-mode errors, RESP3 pushes interleaved
  with replies, MULTI, CLIENT REPLY, RESET, PUBSUB introspection.
* valkey-py's PubSub (listen() and get_message()) and redis-py RESP3.
* Slow subscribers: client-output-buffer-limit for the pubsub class drops a
  subscriber that does not read, and the server does not buffer without
  bound.
* stringmatch against Valkey's stringmatchlen, through PUBSUB CHANNELS and
  CONFIG GET on the reference.
"""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from hotkv.protocol.util import compile_glob, stringmatch
from support import RawClient


def bulk(v) -> bytes:
    if isinstance(v, str):
        v = v.encode()
    return b"$%d\r\n%b\r\n" % (len(v), v)


def push(kind: str, *items, resp3=False) -> bytes:
    head = b">" if resp3 else b"*"
    body = b"".join(x if isinstance(x, bytes) and x[:1] == b":" else bulk(x) for x in items)
    return head + b"%d\r\n" % (1 + len(items)) + bulk(kind) + body


def num(n: int) -> bytes:
    return b":%d\r\n" % n


class Dual:
    """One connection to hotkv and one to Valkey, driven in lockstep: every
    reply read must be the same bytes on both."""

    def __init__(self, ours: RawClient, theirs: RawClient):
        self.ours, self.theirs = ours, theirs

    def send(self, *args):
        self.ours.send(*args)
        self.theirs.send(*args)

    def read(self) -> bytes:
        a, b = self.ours.read_reply(), self.theirs.read_reply()
        assert a == b, f"\n hotkv:  {a!r}\n valkey: {b!r}"
        return a

    def call(self, *args) -> bytes:
        self.send(*args)
        try:
            return self.read()
        except AssertionError as e:
            raise AssertionError(f"{args!r}: {e}") from None

    def silent(self, wait: float = 0.05):
        a, b = self.ours.read_available(wait), self.theirs.read_available(wait)
        assert a == b == b"", (a, b)

    def close(self):
        self.ours.close()
        self.theirs.close()


@pytest.fixture
def duo(server, ref_server):
    made = []

    def make() -> Dual:
        d = Dual(RawClient(server.host, server.port), RawClient(ref_server.host, ref_server.port))
        made.append(d)
        return d

    first = make()
    first.call("FLUSHALL")
    yield make
    for d in made:
        d.close()


# ----------------------------------------------------------------------
# Transcripts against Valkey
# ----------------------------------------------------------------------

def test_subscribe_confirmations_and_counts(duo):
    a = duo()
    assert a.call("SUBSCRIBE", "c1", "c2") == push("subscribe", "c1", num(1))
    assert a.read() == push("subscribe", "c2", num(2))
    a.call("SUBSCRIBE", "c1")            # again: confirmed, count unchanged
    a.call("PSUBSCRIBE", "p*", "q?")
    a.read()
    a.call("SSUBSCRIBE", "s1")            # shard count is separate
    a.call("UNSUBSCRIBE", "nope")         # not subscribed: count, no error
    a.call("UNSUBSCRIBE", "c1")
    a.call("PUNSUBSCRIBE", "q?")
    a.call("SUNSUBSCRIBE", "s1")
    a.call("SUNSUBSCRIBE")                # nothing left: null name
    a.call("UNSUBSCRIBE", "c2")
    assert a.call("PUNSUBSCRIBE", "p*") == push("punsubscribe", "p*", num(0))
    assert a.call("PING") == b"+PONG\r\n"   # out of subscribed mode


@pytest.mark.parametrize("kind", ["UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"])
def test_unsubscribe_without_subscriptions(duo, kind):
    a = duo()
    assert a.call(kind).endswith(b"$-1\r\n:0\r\n")
    a.call(kind, "x", "y")
    a.read()
    a.silent()


def test_unsubscribe_all_counts_down(duo):
    a = duo()
    a.call("SUBSCRIBE", "a", "b", "c")
    a.read()
    a.read()
    # The order follows each server's hash table: compare the counts and
    # the set of channels, not the order.
    a.send("UNSUBSCRIBE")
    ours = [a.ours.read_reply() for _ in range(3)]
    theirs = [a.theirs.read_reply() for _ in range(3)]
    for n, (x, y) in enumerate(zip(ours, theirs)):
        assert x.endswith(num(2 - n)) and y.endswith(num(2 - n))
    assert sorted(x[:-4] for x in ours) == sorted(y[:-4] for y in theirs)
    a.call("PING")


def test_resp2_subscribed_mode_errors(duo):
    a = duo()
    a.call("SUBSCRIBE", "ch")
    for cmd in (("GET", "x"), ("SET", "k", "v"), ("PUBLISH", "ch", "m"), ("MULTI",),
                ("SPUBLISH", "ch", "m"), ("PUBSUB", "NUMPAT"), ("CLIENT", "ID"),
                ("HELLO",), ("select", "1"), ("nosuchcommand", "x")):
        a.call(*cmd)
    a.call("PING")
    a.call("PING", "hello")
    a.call("PING", "a", "b")
    a.call("SUBSCRIBE")
    a.call("PSUBSCRIBE", "x*")
    a.call("SSUBSCRIBE", "sh")
    a.call("RESET")
    a.call("GET", "x")


def test_resp2_pattern_only_and_shard_only_are_subscribed_mode(duo):
    a = duo()
    a.call("PSUBSCRIBE", "x*")
    a.call("GET", "k")
    a.call("PUNSUBSCRIBE")
    a.call("SSUBSCRIBE", "s")
    a.call("GET", "k")
    a.call("SUNSUBSCRIBE", "s")
    a.call("GET", "k")


def test_publish_counts_and_message_shapes(duo):
    sub, pub = duo(), duo()
    sub.call("SUBSCRIBE", "news.1")
    sub.call("PSUBSCRIBE", "news.*")
    sub.call("PSUBSCRIBE", "n[aeiou]ws.?")
    sub.call("PSUBSCRIBE", "other")
    assert pub.call("PUBLISH", "news.1", "hello") == num(3)
    sub.read()   # message
    # pmessages follow in each server's pattern-table order: compare as sets
    ours = {sub.ours.read_reply() for _ in range(2)}
    assert ours == {sub.theirs.read_reply() for _ in range(2)} == {
        push("pmessage", "news.*", "news.1", "hello"),
        push("pmessage", "n[aeiou]ws.?", "news.1", "hello")}
    assert pub.call("PUBLISH", "news.22", b"\x00bin\r\n") == num(1)
    sub.read()
    assert pub.call("PUBLISH", "nothing", "x") == num(0)
    assert pub.call("PUBLISH", "", "x") == num(0)     # '*' never matches ""
    sub.silent()


def test_channel_and_pattern_both_deliver_in_order(duo):
    sub, pub = duo(), duo()
    sub.call("SUBSCRIBE", "foo.bar")
    sub.call("PSUBSCRIBE", "foo.*")
    assert pub.call("PUBLISH", "foo.bar", "hello") == num(2)
    assert sub.read() == push("message", "foo.bar", "hello")
    assert sub.read() == push("pmessage", "foo.*", "foo.bar", "hello")


def test_shard_channels_are_their_own_namespace(duo):
    sub, pub = duo(), duo()
    sub.call("SSUBSCRIBE", "sch")
    psub = duo()
    psub.call("PSUBSCRIBE", "*")
    psub.call("SUBSCRIBE", "sch")
    assert pub.call("SPUBLISH", "sch", "m") == num(1)
    assert sub.read() == push("smessage", "sch", "m")
    assert pub.call("PUBLISH", "sch", "m2") == num(2)
    psub.read()
    psub.read()
    sub.silent()
    psub.silent()
    pub.call("PUBSUB", "SHARDCHANNELS")
    pub.call("PUBSUB", "SHARDCHANNELS", "s*")
    pub.call("PUBSUB", "SHARDCHANNELS", "x*")
    pub.call("PUBSUB", "SHARDNUMSUB", "sch", "nope")
    pub.call("PUBSUB", "NUMSUB", "sch")
    pub.call("PUBSUB", "CHANNELS", "sch")


def test_pubsub_introspection(duo):
    a, b, q = duo(), duo(), duo()
    q.call("PUBSUB", "CHANNELS")
    q.call("PUBSUB", "NUMPAT")
    a.call("SUBSCRIBE", "chan")
    b.call("SUBSCRIBE", "chan")
    a.call("PSUBSCRIBE", "p*")
    b.call("PSUBSCRIBE", "p*")
    b.call("PSUBSCRIBE", "z*")
    q.call("PUBSUB", "CHANNELS")
    q.call("PUBSUB", "CHANNELS", "ch*")
    q.call("PUBSUB", "CHANNELS", "x*")
    q.call("PUBSUB", "NUMSUB", "chan", "p*", "other")
    q.call("PUBSUB", "NUMSUB")
    q.call("PUBSUB", "NUMPAT")
    for bad in (("PUBSUB",), ("PUBSUB", "NUMPAT", "x"), ("PUBSUB", "CHANNELS", "a", "b"),
                ("PUBSUB", "shardchannels", "a", "b"), ("PUBSUB", "nosuch"), ("PUBSUB", "HELP"),
                ("pubsub", "help", "x"), ("PUBLISH", "c"), ("SPUBLISH", "c", "m", "x"),
                ("SUBSCRIBE",), ("PSUBSCRIBE",), ("SSUBSCRIBE",)):
        q.call(*bad)
    a.close()
    b.call("UNSUBSCRIBE", "chan")
    q.call("PUBSUB", "NUMSUB", "chan")
    q.call("PUBSUB", "NUMPAT")   # a's p* is gone, b still holds p* and z*


def test_multi_subscribe_and_deny_blocking_ssubscribe(duo):
    a = duo()
    a.call("MULTI")
    a.call("SUBSCRIBE", "a", "b")
    a.call("SSUBSCRIBE", "x")
    a.call("PING")
    a.call("EXEC")
    a.call("PING")
    a.call("RESET")


def test_publish_to_self_inside_multi_follows_exec(duo):
    a = duo()
    a.send("HELLO", "3")
    a.ours.read_reply()
    a.theirs.read_reply()   # server name/version differ by design
    a.call("SUBSCRIBE", "foo")
    a.call("MULTI")
    a.call("PING", "abc")
    a.call("PUBLISH", "foo", "bar")
    a.call("PUBLISH", "foo", "vaz")
    a.call("PING", "def")
    assert a.call("EXEC") == b"*4\r\n$3\r\nabc\r\n:1\r\n:1\r\n$3\r\ndef\r\n"
    assert a.read() == push("message", "foo", "bar", resp3=True)
    assert a.read() == push("message", "foo", "vaz", resp3=True)
    # Outside MULTI too: the reply first, then the message.
    assert a.call("PUBLISH", "foo", "x") == num(1)
    assert a.read() == push("message", "foo", "x", resp3=True)
    # UNSUBSCRIBE confirmations are part of EXEC's array.
    a.call("MULTI")
    a.call("UNSUBSCRIBE", "foo")
    a.call("PUBLISH", "foo", "gone")
    a.call("EXEC")
    a.silent()


def test_resp3_any_command_while_subscribed(duo):
    a, pub = duo(), duo()
    a.send("HELLO", "3")
    a.ours.read_reply()
    a.theirs.read_reply()
    a.call("SUBSCRIBE", "ch")
    a.call("PSUBSCRIBE", "c*")
    a.call("SET", "k", "v")
    a.call("GET", "k")
    assert a.call("PING") == b"+PONG\r\n"
    pub.call("PUBLISH", "ch", "one")
    a.read()
    a.read()
    a.call("GET", "k")
    a.call("UNSUBSCRIBE")
    a.call("PUNSUBSCRIBE")
    a.call("UNSUBSCRIBE")


def test_resp3_messages_interleave_with_pipelined_replies(server):
    """Messages produced while a RESP3 subscriber's pipeline runs come between
    whole replies, never inside one."""
    sub = RawClient(server.host, server.port)
    pub = RawClient(server.host, server.port)
    try:
        sub.call("HELLO", "3")
        sub.call("SUBSCRIBE", "ch")
        sub.call("RPUSH", "biglist", *[b"x" * 100] * 200)
        for i in range(50):
            sub.send("LRANGE", "biglist", "0", "-1")
            pub.call("PUBLISH", "ch", "m%d" % i)
        replies = [sub.read_reply() for _ in range(100)]
        messages = [r for r in replies if r.startswith(b">3")]
        assert messages == [push("message", "ch", "m%d" % i, resp3=True) for i in range(50)]
        assert sum(r.startswith(b"*200\r\n") for r in replies) == 50
    finally:
        sub.close()
        pub.close()


def test_client_reply_off_and_skip_do_not_silence_pushes(duo):
    a, pub = duo(), duo()
    a.send("HELLO", "3")
    a.ours.read_reply()
    a.theirs.read_reply()
    a.send("CLIENT", "REPLY", "OFF")
    assert a.call("SUBSCRIBE", "channel") == push("subscribe", "channel", num(1), resp3=True)
    a.call("PSUBSCRIBE", "ch*")
    a.send("SET", "k", "v")
    a.silent()
    pub.call("PUBLISH", "channel", "hello")
    a.read()
    a.read()
    a.send("CLIENT", "REPLY", "SKIP")
    a.call("UNSUBSCRIBE", "channel")
    a.call("PUNSUBSCRIBE", "ch*")


def test_reset_and_disconnect_drop_every_subscription(duo):
    a, b, q = duo(), duo(), duo()
    a.call("SUBSCRIBE", "x", "y")
    a.read()
    a.call("PSUBSCRIBE", "x*")
    a.call("SSUBSCRIBE", "sx")
    b.call("SUBSCRIBE", "x")
    b.call("PSUBSCRIBE", "y*")
    q.call("PUBSUB", "NUMSUB", "x", "y")
    q.call("PUBSUB", "SHARDNUMSUB", "sx")
    q.call("PUBSUB", "NUMPAT")
    assert a.call("RESET") == b"+RESET\r\n"
    a.call("GET", "k")                      # out of subscribed mode
    q.call("PUBSUB", "NUMSUB", "x", "y")
    q.call("PUBSUB", "SHARDNUMSUB", "sx")
    q.call("PUBSUB", "NUMPAT")
    assert q.call("PUBLISH", "x", "m") == num(1)
    b.read()
    b.close()
    for _ in range(100):   # disconnects are noticed asynchronously
        if q.ours.call("PUBSUB", "NUMPAT") == num(0):
            break
        time.sleep(0.01)
    q.call("PUBSUB", "NUMSUB", "x", "y")
    q.call("PUBSUB", "NUMPAT")
    q.call("PUBSUB", "CHANNELS")
    assert q.call("PUBLISH", "x", "m") == num(0)


def test_ping_in_subscribed_mode(duo):
    a = duo()
    a.call("SUBSCRIBE", "somechannel")
    a.call("PING")
    a.call("PING", "foo")
    a.call("UNSUBSCRIBE", "somechannel")
    a.call("PING")
    a.send("HELLO", "3")
    a.ours.read_reply()
    a.theirs.read_reply()
    a.call("SUBSCRIBE", "somechannel")
    a.call("PING")
    a.call("PING", "foo")


# ----------------------------------------------------------------------
# Client libraries
# ----------------------------------------------------------------------

def _wait_numsub(client, channel, n):
    for _ in range(200):
        if dict(client.pubsub_numsub(channel)).get(
                channel.encode() if isinstance(channel, str) else channel, 0) == n:
            return
        time.sleep(0.01)
    raise AssertionError("subscription did not show up")


def test_valkey_py_get_message(r):
    p = r.pubsub()
    p.subscribe("chan")
    p.psubscribe("ch*")
    assert p.get_message(timeout=1) == {"type": "subscribe", "pattern": None,
                                        "channel": b"chan", "data": 1}
    assert p.get_message(timeout=1)["type"] == "psubscribe"
    assert r.publish("chan", "hello") == 2
    assert p.get_message(timeout=1) == {"type": "message", "pattern": None,
                                        "channel": b"chan", "data": b"hello"}
    assert p.get_message(timeout=1) == {"type": "pmessage", "pattern": b"ch*",
                                        "channel": b"chan", "data": b"hello"}
    assert p.get_message(timeout=0.05) is None
    p.ping()
    assert p.get_message(timeout=1)["type"] == "pong"
    p.unsubscribe("chan")
    assert p.get_message(timeout=1) == {"type": "unsubscribe", "pattern": None,
                                        "channel": b"chan", "data": 1}
    p.punsubscribe()
    assert p.get_message(timeout=1)["data"] == 0
    assert r.publish("chan", "x") == 0
    p.close()


def test_valkey_py_listen_preserves_order(r):
    import valkey
    sub = valkey.Valkey(host=r.connection_pool.connection_kwargs["host"],
                        port=r.connection_pool.connection_kwargs["port"])
    p = sub.pubsub(ignore_subscribe_messages=True)
    p.subscribe("jobs")
    _wait_numsub(r, "jobs", 1)
    n = 500
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.publish("jobs", b"%d" % i)
    assert pipe.execute() == [1] * n
    r.publish("jobs", "stop")
    got = []
    for msg in p.listen():
        if msg["data"] == b"stop":
            break
        got.append(int(msg["data"]))
    assert got == list(range(n))
    p.close()
    sub.close()


def test_valkey_py_handlers_in_thread(r):
    received = []
    done = threading.Event()

    def handler(msg):
        received.append(msg["data"])
        if len(received) == 3:
            done.set()

    p = r.pubsub(ignore_subscribe_messages=True)
    p.subscribe(**{"events": handler})
    thread = p.run_in_thread(sleep_time=0.01, daemon=True)
    try:
        _wait_numsub(r, "events", 1)
        for m in (b"a", b"b", b"c"):
            r.publish("events", m)
        assert done.wait(5)
        assert received == [b"a", b"b", b"c"]
    finally:
        thread.stop()
        thread.join(2)
        p.close()


def test_redis_py_resp3_push_handler(r3):
    import redis
    kw = r3.connection_pool.connection_kwargs
    sub = redis.Redis(host=kw["host"], port=kw["port"], protocol=3)
    p = sub.pubsub()
    p.subscribe("r3chan")
    p.psubscribe("r3*")
    assert p.get_message(timeout=1)["type"] == "subscribe"
    assert p.get_message(timeout=1)["type"] == "psubscribe"
    assert r3.publish("r3chan", "payload") == 2
    assert p.get_message(timeout=1) == {"type": "message", "pattern": None,
                                        "channel": b"r3chan", "data": b"payload"}
    assert p.get_message(timeout=1) == {"type": "pmessage", "pattern": b"r3*",
                                        "channel": b"r3chan", "data": b"payload"}
    assert r3.pubsub_numpat() == 1
    assert r3.pubsub_channels() == [b"r3chan"]
    assert r3.pubsub_numsub("r3chan") == [(b"r3chan", 1)]
    p.close()
    sub.close()


def test_redis_py_resp3_commands_while_subscribed(r3):
    """A RESP3 connection keeps working as a normal one while subscribed."""
    import redis
    kw = r3.connection_pool.connection_kwargs
    sub = redis.Redis(host=kw["host"], port=kw["port"], protocol=3,
                      single_connection_client=True)
    conn = sub.connection
    conn.send_command("SUBSCRIBE", "mixed")
    assert conn.read_response(push_request=True) == [b"subscribe", b"mixed", 1]
    conn.send_command("SET", "k", "v")
    assert conn.read_response() == b"OK"
    r3.publish("mixed", "m1")
    conn.send_command("GET", "k")
    got = [conn.read_response(push_request=True), conn.read_response(push_request=True)]
    assert [b"message", b"mixed", b"m1"] in got and b"v" in got
    sub.close()


# ----------------------------------------------------------------------
# Slow and dead subscribers
# ----------------------------------------------------------------------

def _stalled_subscriber(host, port, channel: str, resp3: bool = False) -> socket.socket:
    """A subscriber that never reads again, with a tiny receive window."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    c = RawClient.__new__(RawClient)
    c.sock, c.buf = s, b""
    if resp3:
        c.call("HELLO", "3")
    c.call("SUBSCRIBE", channel)
    return s


def _publish_until_dropped(pub: RawClient, channel: str, payload: bytes, budget: int,
                           pause: float = 0.0) -> int:
    """Publish until nobody receives; returns the bytes published until then."""
    sent = 0
    while sent < budget:
        if pause:
            time.sleep(pause)
        pipe = 50
        for _ in range(pipe):
            pub.send("PUBLISH", channel, payload)
        replies = [pub.read_reply() for _ in range(pipe)]
        sent += pipe * len(payload)
        if replies[-1] == num(0):
            return sent
    return sent


@pytest.mark.parametrize("resp3", [False, True])
def test_slow_subscriber_hits_hard_limit_and_is_dropped(hotkv_server_factory, resp3):
    srv = hotkv_server_factory()
    pub = RawClient(srv.host, srv.port)
    assert pub.call("CONFIG", "SET", "client-output-buffer-limit",
                    "pubsub 256kb 0 0") == b"+OK\r\n"
    stalled = _stalled_subscriber(srv.host, srv.port, "firehose", resp3)
    healthy = RawClient(srv.host, srv.port)
    healthy.call("SUBSCRIBE", "other")
    payload = b"x" * 10_000
    sent = _publish_until_dropped(pub, "firehose", payload, 64 * 1024 * 1024)
    # Dropped long before the 64 MB budget: what the server held for it was
    # bounded by the limit plus what the kernel buffers.
    assert sent < 16 * 1024 * 1024
    server = srv.server
    assert server.stat_client_outbuf_limit_disconnections == 1
    assert pub.call("PUBSUB", "NUMSUB", "firehose") == b"*2\r\n" + bulk("firehose") + num(0)
    # Nothing big is left queued for anyone.
    assert sum(c.output_size() for c in list(server.clients.values())) < 1024 * 1024
    stalled.settimeout(5)
    data = b""
    try:
        while True:
            chunk = stalled.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    assert len(data) < 16 * 1024 * 1024
    # Other clients are untouched; the disconnection is counted in INFO.
    assert healthy.call("PING") == push("pong", "")
    info = pub.call("INFO", "stats")
    assert info.startswith(b"$") and b"client_output_buffer_limit_disconnections:1" in info, info
    stalled.close()
    healthy.close()
    pub.close()


def test_slow_subscriber_soft_limit_needs_time(hotkv_server_factory):
    srv = hotkv_server_factory(client_output_buffer_limit="pubsub 0 128kb 0")
    pub = RawClient(srv.host, srv.port)
    assert pub.call("CONFIG", "GET", "client-output-buffer-limit").endswith(
        b"pubsub 0 131072 0\r\n")
    stalled = _stalled_subscriber(srv.host, srv.port, "soft")
    payload = b"y" * 4000
    # Paced (about 10 MB/s): the soft limit only acts once it has been
    # exceeded for more than soft-seconds (0 here: from the next second on).
    sent = _publish_until_dropped(pub, "soft", payload, 64 * 1024 * 1024, pause=0.02)
    assert pub.call("PUBLISH", "soft", "x") == num(0)
    assert srv.server.stat_client_outbuf_limit_disconnections == 1
    assert sent < 64 * 1024 * 1024
    stalled.close()
    pub.close()


def test_soft_limit_within_its_window_keeps_the_subscriber(hotkv_server_factory):
    srv = hotkv_server_factory(client_output_buffer_limit="pubsub 0 64kb 100")
    pub = RawClient(srv.host, srv.port)
    stalled = _stalled_subscriber(srv.host, srv.port, "window")
    for _ in range(20):
        for _ in range(50):
            pub.send("PUBLISH", "window", b"w" * 2000)
        assert [pub.read_reply() for _ in range(50)] == [num(1)] * 50
    assert srv.server.stat_client_outbuf_limit_disconnections == 0
    # The hard limit still applies at once.
    pub.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 64kb 100")
    assert _publish_until_dropped(pub, "window", b"w" * 2000, 64 * 1024 * 1024) < 32 * 1024 * 1024
    assert srv.server.stat_client_outbuf_limit_disconnections == 1
    stalled.close()
    pub.close()


def test_reading_subscriber_under_limit_is_kept(hotkv_server_factory):
    srv = hotkv_server_factory(client_output_buffer_limit="pubsub 1mb 512kb 1")
    sub = RawClient(srv.host, srv.port)
    sub.call("SUBSCRIBE", "steady")
    pub = RawClient(srv.host, srv.port)
    n, payload = 400, b"z" * 2000
    got = []

    def reader():
        while len(got) < n:
            got.append(sub.read_reply())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    for i in range(n):
        assert pub.call("PUBLISH", "steady", payload + b"%d" % i) == num(1)
    t.join(10)
    assert len(got) == n and got[-1] == push("message", "steady", payload + b"%d" % (n - 1))
    assert srv.server.stat_client_outbuf_limit_disconnections == 0
    sub.close()
    pub.close()


def test_output_buffer_limit_config_errors(diff):
    try:
        for value in ("pubsub 1 2", "master 1 2 3", "pubsub -1 0 0", "pubsub 1 1 -1",
                      "pubsub 1 1 5x", "pubsub  1 1 1", "pubsub 1 1 2147483648", "bogus 1 1 1",
                      "pubsub 1 1 +5", "replica 1mb 2MB 03", "pubsub mb 1 1",
                      "pubsub 99999999999999999999gb 1 1", "pubsub 1 1 99999999999", ""):
            diff("CONFIG", "SET", "client-output-buffer-limit", value)
            diff("CONFIG", "GET", "client-output-buffer-limit")
    finally:
        diff("CONFIG", "SET", "client-output-buffer-limit",
             "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
    diff("CONFIG", "GET", "client-output-buffer-limit")


def test_output_buffer_limit_from_startup_settings(hotkv_server_factory):
    srv = hotkv_server_factory(client_output_buffer_limit="pubsub 64mb 16mb 90 normal 1mb 2mb 3")
    c = RawClient(srv.host, srv.port)
    assert c.call("CONFIG", "GET", "client-output-buffer-limit") == (
        b"*2\r\n" + bulk("client-output-buffer-limit")
        + bulk("normal 1048576 2097152 3 slave 268435456 67108864 60 pubsub 67108864 16777216 90"))
    c.close()
    from hotkv.core.config import ConfigError
    with pytest.raises(ConfigError):
        hotkv_server_factory(client_output_buffer_limit="pubsub 1 2")


# ----------------------------------------------------------------------
# Glob matching: hotkv.protocol.util.stringmatch == Valkey's stringmatchlen
# ----------------------------------------------------------------------

KNOWN = [
    (b"", b"", True), (b"", b"a", False), (b"*", b"", False), (b"*", b"a", True),
    (b"**", b"abc", True), (b"a*", b"a", True), (b"*a", b"a", True), (b"a*a", b"a", False),
    (b"h?llo", b"hello", True), (b"h?llo", b"hllo", False), (b"h*llo", b"hllo", True),
    (b"h[ae]llo", b"hallo", True), (b"h[ae]llo", b"hillo", False),
    (b"h[^e]llo", b"hallo", True), (b"h[^e]llo", b"hello", False),
    (b"h[a-b]llo", b"hbllo", True), (b"h[b-a]llo", b"hallo", True),
    (b"h\\*llo", b"h*llo", True), (b"h\\*llo", b"hello", False), (b"\\", b"\\", True),
    (b"a\\", b"a\\", True), (b"[", b"a", False), (b"[^", b"x", True), (b"[a", b"a", True),
    (b"[]", b"]", False), (b"[]a]", b"]a]", False), (b"[^]", b"x", True),
    (b"[a-]", b"]", True), (b"[a-]", b"b", False), (b"[\\]]", b"]", True),
    (b"[a\\-z]", b"-", True), (b"[a\\-z]", b"b", False), (b"*[", b"ab", False),
    (b"[\x80-\xff]", b"\x90", True), (b"[a-\xff]", b"\xff", True), (b"[a-\xff]", b"b", False),
    (b"[a-\xff]", b"A", True), (b"foo.*", b"foo.1", True), (b"foo.*", b"foo1", False),
    (b"*.*.*", b"a.b.c", True), (b"*.*.*", b"a.b", False), (b"a*b*c", b"aXbYc", True),
    (b"a*b*c", b"aXcYb", False), (b"*?", b"a", True), (b"?*", b"", False),
]


@pytest.mark.parametrize("pattern,string,expected", KNOWN)
def test_stringmatch_known_cases(pattern, string, expected):
    assert stringmatch(pattern, string) is expected
    assert compile_glob(pattern, exact=True)(string) is expected


def test_compile_glob_lone_star_matches_all_for_keyspace_callers():
    # KEYS * / SCAN MATCH * include the empty key in Redis; "**" does not.
    assert compile_glob(b"*")(b"") is True
    assert compile_glob(b"*", exact=True)(b"") is False
    assert compile_glob(b"**")(b"") is False
    assert compile_glob(b"*")(b"abc") is True


def test_stringmatch_nocase():
    assert stringmatch(b"HELLO", b"hello", nocase=True)
    assert not stringmatch(b"HELLO", b"hello")
    assert stringmatch(b"h[A-Z]llo", b"hello", nocase=True)
    assert stringmatch(b"[Z-a]", b"^")            # plain: 'Z'..'a' holds '^'
    assert not stringmatch(b"[Z-a]", b"^", nocase=True)   # folded: 'z'..'a' is empty
    assert not stringmatch(b"[\\A]", b"a", nocase=True)    # escaped: exact even so
    assert stringmatch(b"*max*", b"MAXMEMORY", nocase=True)


def _channels_reply(raw: bytes) -> set:
    assert raw[:1] == b"*"
    nl = raw.index(b"\r\n")
    out, pos = set(), nl + 2
    for _ in range(int(raw[1:nl])):
        nl = raw.index(b"\r\n", pos)
        n = int(raw[pos + 1:nl])
        out.add(raw[nl + 2:nl + 2 + n])
        pos = nl + 2 + n + 2
    return out


def test_stringmatch_matches_valkey_on_random_patterns(server, ref_server):
    """Subscribe to a few hundred awkward channel names on both servers and
    compare PUBSUB CHANNELS <pattern> for random patterns with our matcher."""
    rnd = random.Random(20240917)
    chars = b"ab*?[]^-\\zA\x80\xff"
    channels = {b"", b"a", b"ab", b"*", b"[", b"]", b"\\", b"-", b"A", b"\x80", b"\xff", b"^"}
    while len(channels) < 250:
        channels.add(bytes(rnd.choice(b"abzA-^]\x80\xff*?[\\") for _ in range(rnd.randint(1, 6))))
    patterns = [bytes(rnd.choice(chars) for _ in range(rnd.randint(0, 7))) for _ in range(600)]
    subs, queries = [], []
    for srv in (server, ref_server):
        s = RawClient(srv.host, srv.port)
        s.send("SUBSCRIBE", *channels)
        for _ in channels:
            s.read_reply()
        subs.append(s)
        queries.append(RawClient(srv.host, srv.port))
    try:
        ours, theirs = queries
        for pat in patterns:
            expected = _channels_reply(theirs.call("PUBSUB", "CHANNELS", pat))
            mine = {ch for ch in channels if stringmatch(pat, ch)}
            assert mine == expected, pat
            assert _channels_reply(ours.call("PUBSUB", "CHANNELS", pat)) == expected, pat
    finally:
        for c in subs + queries:
            c.close()


def test_stringmatch_nocase_matches_valkey_config_get(ref_server):
    c = RawClient(ref_server.host, ref_server.port)
    try:
        names = sorted(_config_names(c.call("CONFIG", "GET", "*")))
        rnd = random.Random(7)
        pats = [b"*max*", b"*MAX*", b"[A-C]*", b"*-[^a-m]*", b"?ppend*", b"*\\-*", b"[z-a]*",
                b"*TIME*OUT*", b"[^a-z]*", b"*s"]
        pats += [bytes(rnd.choice(b"aeimnstAEIMNS-*?[]^") for _ in range(rnd.randint(1, 6)))
                 for _ in range(150)]
        for pat in pats:
            if not any(ch in pat for ch in b"*?["):
                continue
            expected = _config_names(c.call("CONFIG", "GET", pat))
            mine = {n for n in names if stringmatch(pat, n, nocase=True)}
            assert mine == expected, pat
    finally:
        c.close()


def _config_names(raw: bytes) -> set:
    items = []
    nl = raw.index(b"\r\n")
    pos = nl + 2
    for _ in range(int(raw[1:nl])):
        nl = raw.index(b"\r\n", pos)
        n = int(raw[pos + 1:nl])
        items.append(raw[nl + 2:nl + 2 + n])
        pos = nl + 2 + n + 2
    return set(items[0::2])


@pytest.mark.parametrize("groups", [999, 1000, 1001, 1002])
def test_stringmatch_nesting_limit_as_valkey(server, ref_server, groups):
    """Redis gives up past 1000 nested stars; the result must agree."""
    channel = b"a" * 1200
    pattern = b"*a" * groups + b"*"
    results = []
    for srv in (server, ref_server):
        s = RawClient(srv.host, srv.port)
        q = RawClient(srv.host, srv.port)
        s.call("SUBSCRIBE", channel)
        results.append(q.call("PUBSUB", "CHANNELS", pattern))
        s.close()
        q.close()
    assert results[0] == results[1]
    assert stringmatch(pattern, channel) is (groups <= 1000)


def test_stringmatch_pathological_patterns_are_fast():
    s = b"a" * 5000
    assert not stringmatch(b"a*" * 40 + b"b", s)
    assert not stringmatch(b"*?" * 500 + b"b", s)
    assert stringmatch(b"*a" * 50, s)
    assert not stringmatch(b"[a]*[a]*[a]*c", s)


def test_output_buffer_limit_lines_accumulate_in_config_file(tmp_path):
    """redis.conf sets one class a line; every line counts, later ones win."""
    from hotkv.server import Server
    from hotkv.tools.serve_args import build_config
    conf = tmp_path / "hotkv.conf"
    conf.write_text("client-output-buffer-limit normal 0 0 0\n"
                    "client-output-buffer-limit replica 256mb 64mb 60\n"
                    "client-output-buffer-limit pubsub 64mb 16mb 90\n"
                    "client-output-buffer-limit normal 1mb 2mb 3\n")
    server = Server(build_config(str(conf), []))
    p = server.config
    from hotkv.core.config import PARAMS
    assert PARAMS["client-output-buffer-limit"].format(p.values["client-output-buffer-limit"]) == (
        "normal 1048576 2097152 3 slave 268435456 67108864 60 pubsub 67108864 16777216 90")
    assert server.pubsub.limit == (64 * 1024 * 1024, 16 * 1024 * 1024, 90)


def test_stringmatch_huge_segments_take_the_loop_matcher():
    seg = b"[ab]c" * 3000                      # too long to compile as a regex
    assert stringmatch(seg, b"ac" * 3000)
    assert not stringmatch(seg, b"ac" * 2999 + b"ad")
    assert not stringmatch(seg, b"ac" * 2999)
    assert stringmatch(b"*" + seg, b"zz" + b"bc" * 3000)
    assert stringmatch(seg + b"*", b"bc" * 3000 + b"zz")
    assert stringmatch(b"x*" + seg + b"*y", b"x" + b"q" * 10 + b"ac" * 3000 + b"y")
    assert not stringmatch(b"x*" + seg + b"*y", b"x" + b"q" * 10 + b"ac" * 3000)
    assert not stringmatch(b"x*" + seg + b"*y", b"x" + b"ac" * 2999 + b"y")


@pytest.mark.parametrize("name", ["subscribe", "unsubscribe", "psubscribe", "punsubscribe",
                                  "publish", "pubsub", "pubsub|help", "pubsub|numsub"])
def test_command_info_matches_valkey(diff, name):
    # SSUBSCRIBE/SUNSUBSCRIBE/SPUBLISH are left out: Valkey describes their
    # channel with a NOT_KEY key spec, which hotkv's registry cannot express
    # without making the channel a key for ACL checks and GETKEYS.
    diff("COMMAND", "INFO", name)


def _publish_stream(host, port) -> bytes:
    """What an old-protocol SYNC replica receives after the RDB for PUBLISH
    alone and inside a transaction with a write."""
    c = RawClient(host, port)
    c.call("CONFIG", "SET", "repl-ping-replica-period", "3600")
    c.call("FLUSHALL")
    sync = socket.create_connection((host, port), timeout=10)
    try:
        sync.sendall(b"SYNC\r\n")
        head = b""
        for _ in range(100):           # bounded: the payload's length line
            head += sync.recv(1)
            if head.endswith(b"\r\n") and head.strip():
                break
        size = int(head.strip()[1:])
        rdb = b""
        for _ in range(1000):           # bounded: the RDB payload
            if len(rdb) >= size:
                break
            rdb += sync.recv(size - len(rdb))
        c.call("PUBLISH", "a", "b")
        c.call("MULTI")
        c.call("SET", "k", "v")
        c.call("PUBLISH", "c", "d")
        c.call("EXEC")
        c.call("SPUBLISH", "s", "e")
        c.call("SET", "end", "1")
        stream = b""
        for _ in range(200):            # bounded: until the last SET arrived
            stream += sync.recv(4096)
            if stream.endswith(b"$3\r\nend\r\n$1\r\n1\r\n"):
                break
    finally:
        sync.close()
        c.close()
    return stream


def test_publish_is_replicated(server, ref_server):
    """PUBLISH reaches replicas (alone, and inside MULTI/EXEC with the
    transaction's writes), never the AOF -- the stream byte-equal to Valkey's."""
    ours = _publish_stream(server.host, server.port)
    theirs = _publish_stream(ref_server.host, ref_server.port)
    assert ours == theirs
    assert b"$7\r\nPUBLISH\r\n$1\r\nc\r\n" in ours
    assert b"$8\r\nSPUBLISH\r\n$1\r\ns\r\n" in ours


def test_publish_is_not_in_the_aof(hotkv_server_factory, tmp_path):
    """With a replica attached (so PUBLISH is propagated) the AOF still has
    no PUBLISH: as valkey-server's AOF, a transaction keeps its MULTI/EXEC."""
    import glob
    import os

    from support import ReferenceValkey, parse_aof
    ours = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always")
    logs = []
    with ReferenceValkey("--appendonly", "yes", "--appendfsync", "always") as ref:
        for host, port, directory in ((ours.host, ours.port, str(tmp_path)),
                                      (ref.host, ref.port, ref.dir)):
            _publish_stream(host, port)
            files = glob.glob(os.path.join(directory, "appendonlydir", "*.incr.aof"))
            assert len(files) == 1, files
            with open(files[0], "rb") as f:
                logs.append([[cmd[0].lower()] + cmd[1:] for cmd in parse_aof(f.read())])
    assert logs[0] == logs[1]
    assert [b"publish"] not in [cmd[:1] for cmd in logs[0]]
    assert [b"multi"] in logs[0]
