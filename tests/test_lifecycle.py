"""What a client's end and RESET take away, on hotkv and on valkey-server 8.1.8.

``Server.client_gone`` (disconnection, Valkey's freeClient) and
``Server.reset_client`` (RESET) call each subsystem by name; these tests
check, through INFO and PUBSUB as a client sees them, that every piece of a
client's state goes with it: its WATCHed keys (a disconnected watcher was
left in the keys' watcher tables before ``client_gone`` called
``hotkv.core.multi.unwatch_all``: INFO total_watched_keys stayed up, and the
dead client was kept alive), its subscriptions, its MONITOR.  Every poll is
bounded (``wait_for``: 5 s) and each test runs against both servers.
"""

from __future__ import annotations

from support import wait_for


def _info(admin, section: str) -> dict:
    reply = admin.call("INFO", section)
    out = {}
    for line in reply.decode().split("\r\n"):
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


def _clients(admin) -> int:
    return int(_info(admin, "clients")["connected_clients"])


def test_disconnect_forgets_watched_keys(target):
    admin = target.admin
    before = int(_info(admin, "clients")["total_watched_keys"])
    n = _clients(admin)
    c = target.client()
    assert c.call("WATCH", "lifecycle:w1", "lifecycle:w2") == b"+OK\r\n"
    assert int(_info(admin, "clients")["total_watched_keys"]) == before + 2
    c.close()
    assert wait_for(lambda: _clients(admin) == n), f"{target.name}: the client never left"
    assert int(_info(admin, "clients")["total_watched_keys"]) == before
    # The keys' watcher tables are gone too: a write to them touches nobody.
    assert admin.call("SET", "lifecycle:w1", "v") == b"+OK\r\n"
    assert int(_info(admin, "clients")["total_watched_keys"]) == before


def test_reset_forgets_watch_subscriptions_and_monitor(target):
    admin = target.admin
    before = int(_info(admin, "clients")["total_watched_keys"])
    c = target.client()
    c.call("WATCH", "lifecycle:r1")
    assert int(_info(admin, "clients")["watching_clients"]) >= 1
    assert c.call("RESET") == b"+RESET\r\n"
    assert int(_info(admin, "clients")["total_watched_keys"]) == before
    c.send("SUBSCRIBE", "lifecycle:ch")
    c.read_reply()
    assert admin.call("PUBSUB", "NUMSUB", "lifecycle:ch").endswith(b":1\r\n")
    assert c.call("RESET") == b"+RESET\r\n"
    assert admin.call("PUBSUB", "NUMSUB", "lifecycle:ch").endswith(b":0\r\n")
    assert c.call("MONITOR") == b"+OK\r\n"
    assert c.call("RESET") == b"+RESET\r\n"
    # No longer a monitor: the next reply it reads is its own PING's.
    admin.call("SET", "lifecycle:m", "1")
    assert c.call("PING") == b"+PONG\r\n"


def test_disconnect_forgets_subscriptions(target):
    admin = target.admin
    n = _clients(admin)
    c = target.client()
    c.send("SUBSCRIBE", "lifecycle:gone")
    c.read_reply()
    assert admin.call("PUBSUB", "NUMSUB", "lifecycle:gone").endswith(b":1\r\n")
    c.close()
    assert wait_for(lambda: _clients(admin) == n), f"{target.name}: the client never left"
    assert admin.call("PUBSUB", "NUMSUB", "lifecycle:gone").endswith(b":0\r\n")
