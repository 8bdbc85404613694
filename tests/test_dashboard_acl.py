"""The HTTP port under ACLs (security issue 28; hotkv/http/rights.py,
hotkv/http/auth.py): a logged-in user reads ``/``, ``/api/state`` and
``/metrics`` only if its ACL lets it run the commands that show the same
data over the Redis port (403 naming the first it may not run), sees only
the keys its patterns allow, and never the slowlog's arguments without
SLOWLOG; redis_exporter's documented user reads every page.  Without a
password, a request naming another host (DNS rebinding) is refused.
Everything over real sockets: a hotkv with http-port, valkey-py, http.client.
"""

from __future__ import annotations

import base64
import http.client
import json
import time

import pytest
import valkey

from support import free_port

pytest.importorskip("h11", reason="h11 (pip install 'hotkv[dashboard]') is not installed")

PAGES = ("/", "/api/state", "/metrics")
# oliver006/redis_exporter's README: the ACL of a dedicated exporter user.
EXPORTER = ("+client +ping +info +config|get +cluster|info +slowlog +latency +memory +select "
            "+get +scan +xinfo +type +pfcount +strlen +llen +scard +zcard +hlen +xlen +eval "
            "allkeys").split()


def get(port, path, auth=None, host=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    if host is not None:
        headers["Host"] = host
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def state(port, auth) -> dict:
    """/api/state taken after this call began (bounded retries)."""
    since = time.time()
    for _ in range(200):
        status, body = get(port, "/api/state?fresh=1", auth)
        assert status == 200, body
        s = json.loads(body)
        if s["time"] >= since:
            return s
        time.sleep(0.01)
    raise AssertionError("no snapshot newer than the request in 200 tries")


@pytest.fixture
def guarded(hotkv_server_factory):
    """A hotkv with requirepass and http-port, some queues and a slowlog
    entry carrying a secret; (server, admin client)."""
    port = free_port()
    server = hotkv_server_factory(http_port=port, requirepass="adm")
    server.http_port = port
    r = valkey.Valkey(host=server.host, port=server.port, password="adm")
    r.config_set("slowlog-log-slower-than", 0)
    r.set("secret", "TOPSECRET-VALUE")
    stamp = json.dumps({"timestamp": int(time.time() * 1000) - 60_000})
    r.lpush("q:jobs", stamp, stamp)
    r.lpush("hidden:jobs", stamp)
    for name in ("q:events", "hidden:events"):
        r.xadd(name, {"n": 1})
        r.xgroup_create(name, "workers", "0")
        r.xreadgroup("workers", "w1", {name: ">"})
    r.config_set("slowlog-log-slower-than", 10_000_000)
    return server, r


def _user(r, name, *rules):
    r.execute_command("ACL", "SETUSER", name, "reset", "on", ">pw", *rules)
    return name + ":pw"


def test_a_restricted_user_gets_403_naming_the_missing_right(guarded):
    server, r = guarded
    bob = _user(r, "bob", "+get", "~q:*")
    for path in PAGES:
        status, body = get(server.http_port, path, bob)
        assert status == 403, (path, body)
        assert body.startswith(b"user 'bob' may not run 'info'"), body
        assert b"TOPSECRET" not in body and b"hidden" not in body
    # INFO, SCAN and TYPE are /metrics' needs; the dashboard's also SLOWLOG GET.
    carol = _user(r, "carol", "+info", "+scan", "+type", "+latency", "+llen", "~q:*")
    assert get(server.http_port, "/metrics", carol)[0] == 200
    for path in ("/", "/api/state"):
        status, body = get(server.http_port, path, carol)
        assert status == 403 and body.startswith(b"user 'carol' may not run 'slowlog|get'")
    dave = _user(r, "dave", "+info", "+type", "allkeys")
    status, body = get(server.http_port, "/metrics", dave)
    assert status == 403 and body.startswith(b"user 'dave' may not run 'scan'")
    # The check reads the live ACL: granting the right opens the page.
    r.execute_command("ACL", "SETUSER", "carol", "+slowlog|get")
    assert get(server.http_port, "/api/state", carol)[0] == 200


def test_the_redis_exporter_user_reads_every_page(guarded):
    server, r = guarded
    exp = _user(r, "exporter", *EXPORTER)
    for path in PAGES:
        status, body = get(server.http_port, path, exp)
        assert status == 200, (path, body)
    s = state(server.http_port, exp)
    lists = {q["key"]: q for q in s["lists"]}
    assert lists["q:jobs"]["depth"] == 2 and "hidden:jobs" in lists
    # The oldest item's age is read from the item: LINDEX, which it may not run.
    assert lists["q:jobs"]["oldest_age_s"] is None
    streams = {st["key"]: st for st in s["streams"]}
    assert streams["q:events"]["groups"][0]["consumers"][0]["name"] == "w1"
    assert s["keyspace"][0]["types"]["list"] == 2 and s["lists_total"] == 2
    assert any("TOPSECRET-VALUE" in e["args"] for e in s["slowlog"])   # it has +slowlog
    # The same page for a user with every right shows the age.
    admin = state(server.http_port, "default:adm")
    assert {q["key"]: q for q in admin["lists"]}["q:jobs"]["oldest_age_s"] >= 59
    _, body = get(server.http_port, "/metrics", exp)
    assert b'hotkv_queue_depth{db="db0",key="q:jobs"} 2' in body


def test_slowlog_arguments_never_reach_a_user_without_slowlog(guarded):
    server, r = guarded
    admin = get(server.http_port, "/api/state", "default:adm")
    assert admin[0] == 200 and b"TOPSECRET-VALUE" in admin[1]   # it is there to leak
    eve = _user(r, "eve", *EXPORTER, "-slowlog")
    for path in PAGES:
        status, body = get(server.http_port, path, eve)
        assert b"TOPSECRET" not in body, path
        assert status == (200 if path == "/metrics" else 403), (path, body)
    assert get(server.http_port, "/api/state", eve)[1].startswith(
        b"user 'eve' may not run 'slowlog|get'")


def test_only_the_keys_the_user_may_read_are_listed(guarded):
    server, r = guarded
    rules = [x for x in EXPORTER if x != "allkeys"] + ["+lindex", "~q:*"]
    fred = _user(r, "fred", *rules)
    s = state(server.http_port, fred)
    assert [q["key"] for q in s["lists"]] == ["q:jobs"]
    assert [st["key"] for st in s["streams"]] == ["q:events"]
    assert s["lists"][0]["oldest_age_s"] >= 59   # +lindex on q:*
    history = s["history"]
    assert set(history["depths"]) <= {"0:q:jobs", "0:q:events"}
    assert set(history["flows"]) <= {"0:q:jobs", "0:q:events"}
    # Counting types needs TYPE on every key; library views read every key.
    assert s["keyspace"][0]["types"] == {} and s["lists_total"] is None
    assert s["libraries"] == []
    status, body = get(server.http_port, "/metrics", fred)
    assert status == 200 and b"q:jobs" in body and b"q:events" in body
    assert b"hidden" not in body
    # Only the slowlog names them: SLOWLOG GET shows every command's arguments
    # over the Redis port too, whatever the user's key patterns.
    shown = json.loads(get(server.http_port, "/api/state", fred)[1])
    assert any("hidden:jobs" in e["args"] for e in shown.pop("slowlog"))
    assert "hidden" not in json.dumps(shown)
    # Streams need XINFO on the key; without XINFO CONSUMERS, no consumers.
    r.execute_command("ACL", "SETUSER", "fred", "-xinfo|consumers")
    s = state(server.http_port, fred)
    assert s["streams"][0]["groups"][0]["consumers"] == []
    assert s["streams"][0]["groups"][0]["pending"] == 1
    r.execute_command("ACL", "SETUSER", "fred", "-xinfo|stream")
    assert state(server.http_port, fred)["streams"] == []


def test_a_restricted_default_user_without_a_password_is_checked_too(hotkv_server_factory):
    port = free_port()
    server = hotkv_server_factory(http_port=port)
    r = valkey.Valkey(host=server.host, port=server.port)
    r.execute_command("ACL", "SETUSER", "admin", "on", ">pw", "+@all", "~*", "&*")
    r.execute_command("ACL", "SETUSER", "default", "-info")
    status, body = get(port, "/metrics")
    assert status == 403 and body.startswith(b"user 'default' may not run 'info'")
    # Still no password needed: another user may log in by basic auth.
    assert get(port, "/metrics", "admin:pw")[0] == 200


def test_without_a_password_another_host_name_is_refused(hotkv_server_factory):
    port = free_port()
    server = hotkv_server_factory(http_port=port)
    for host in ("evil.example", "evil.example:%d" % port, "localhost.evil.example",
                 "127.0.0.1.evil.example", "[::1]x"):
        for path in PAGES:
            status, body = get(port, path, host=host)
            assert status == 403 and b"DNS rebinding" in body, (host, path, body)
    for host in ("localhost", "LOCALHOST:%d" % port, "127.0.0.1", "127.0.0.1:%d" % port,
                 "[::1]", "[::1]:%d" % port):
        assert get(port, "/metrics", host=host)[0] == 200, host
    assert get(port, "/api/state")[0] == 200   # http.client's own Host: 127.0.0.1:port
    # With a password the credentials guard the port, whatever the name.
    r = valkey.Valkey(host=server.host, port=server.port)
    r.config_set("requirepass", "pw")
    assert get(port, "/metrics", host="evil.example")[0] == 401
    assert get(port, "/metrics", auth=":pw", host="dashboard.example")[0] == 200


def test_metrics_leave_out_what_the_user_may_not_read(guarded):
    """/metrics' slow log, config and latency figures come from SLOWLOG,
    CONFIG GET and LATENCY: a user allowed INFO, SCAN and TYPE only gets the
    page without them (as redis_exporter goes without what its user may not
    read); the redis_exporter user gets them."""
    server, r = guarded
    narrow = _user(r, "narrow", "+info", "+scan", "+type", "+llen", "+xinfo", "~q:*")
    wide = _user(r, "exporter", *EXPORTER)
    status_n, body_n = get(server.http_port, "/metrics", narrow)
    status_w, body_w = get(server.http_port, "/metrics", wide)
    assert status_n == 200 and status_w == 200
    for name in (b"redis_slowlog_length", b"redis_config_maxmemory",
                 b"redis_config_maxclients"):
        assert name not in body_n, name
        assert name in body_w, name
