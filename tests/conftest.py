"""Shared fixtures.  Every test talks to a real server over a real socket.

* ``server``: the session's hotkv (from the hotkv pytest plugin);
* ``r`` / ``r3``: valkey-py (RESP2) and redis-py (RESP3) clients, with the
  server flushed before the test;
* ``raw``: a RawClient (exact reply bytes) on hotkv;
* ``ref``: the reference valkey-server 8.1.8 (session), and ``diff``: a
  helper that sends the same command to both and asserts identical bytes.
"""

from __future__ import annotations

import signal

import pytest

from support import RawClient, ReferenceValkey, Target

# A script that starts the suite in the background (``pytest &``) starts it
# with SIGINT ignored, and every child inherits that: the valkey-cli, hotkv
# cli and servers the tests stop with Ctrl-C would never stop (the streaming
# cli transcripts time out).  The suite takes Python's handler back, so its
# children start with the default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def server(hotkv_server):
    return hotkv_server


@pytest.fixture
def r(server):
    import valkey
    client = valkey.Valkey(host=server.host, port=server.port)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def r3(server):
    import redis
    client = redis.Redis(host=server.host, port=server.port, protocol=3)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def raw(server):
    client = RawClient(server.host, server.port)
    client.call("FLUSHALL")
    yield client
    client.close()


@pytest.fixture
def raw_factory(server):
    made = []

    def make():
        c = RawClient(server.host, server.port)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture(scope="session")
def ref_server():
    with ReferenceValkey() as ref:
        yield ref


@pytest.fixture(params=["hotkv", "valkey"])
def target(request, server):
    """The test runs twice: against hotkv and against the reference Valkey
    (a support.Target, its ``admin`` client connected, the data flushed)."""
    if request.param == "hotkv":
        t = Target("hotkv", server.host, server.port, server)
    else:
        ref = request.getfixturevalue("ref_server")
        t = Target("valkey", ref.host, ref.port)
    t.admin = t.client()
    t.admin.call("FLUSHALL")
    yield t
    t.close()


class Differ:
    """Sends each command to hotkv and to Valkey; asserts identical replies."""

    def __init__(self, ours: RawClient, theirs: RawClient):
        self.ours = ours
        self.theirs = theirs

    def __call__(self, *args) -> bytes:
        a = self.ours.call(*args)
        b = self.theirs.call(*args)
        assert a == b, f"{args!r}:\n hotkv:  {a!r}\n valkey: {b!r}"
        return a

    def resp3(self):
        self.ours.call("HELLO", "3")
        self.theirs.call("HELLO", "3")


@pytest.fixture
def diff(server, ref_server):
    ours = RawClient(server.host, server.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    ours.call("FLUSHALL")
    theirs.call("FLUSHALL")
    yield Differ(ours, theirs)
    ours.close()
    theirs.close()


@pytest.fixture(autouse=True)
def rq_short_pubsub_poll(monkeypatch):
    """RQ's worker polls its pubsub thread with sleep_time=60; at the end of a
    burst it unsubscribes, joins that thread for 1 s and closes the PubSub,
    which waits for the thread's pending get_message: up to 60 s when the
    thread had re-entered it (measured: the first burst of a process took
    60.0 s, the next ones 0.01 s; test_dashboard's RQ test took 60 s of a
    full run).  A short poll ends that wait at once; every test gets it (it
    changes nothing for a client that does not run a pubsub thread)."""
    try:
        import redis.client
    except ImportError:
        return
    orig = redis.client.PubSub.run_in_thread

    def run_in_thread(self, sleep_time=0.0, *args, **kwargs):
        return orig(self, min(sleep_time, 0.05), *args, **kwargs)
    monkeypatch.setattr(redis.client.PubSub, "run_in_thread", run_in_thread)
