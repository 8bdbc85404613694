"""TLS (hotkv.net.tls): a TLS listener next to the plain one, with certificates
from a test CA made here with the ``cryptography`` package.

The centrepiece runs the Python example of the reference document
(/work/shared/reference/001_*.txt) *unchanged*, in a subprocess, against
hotkv over TLS with a username and password from a ``rediss://`` URL; the
only thing the test supplies is the environment (VALKEY_URL, and
SSL_CERT_FILE so the client's default trust store holds the test CA)."""

from __future__ import annotations

import glob
import os
import socket
import ssl
import subprocess
import sys

import pytest
import valkey

from support import RawClient, make_pki

pytest.importorskip("cryptography.x509", reason="TLS tests need the cryptography package")

REFERENCE_GLOB = "/work/shared/reference/001_*.txt"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _tls_server(factory, pki, **extra):
    cert, key = pki["server"]
    settings = dict(tls_port=0, tls_cert_file=cert, tls_key_file=key,
                    tls_ca_cert_file=pki["ca"][0], tls_auth_clients="no")
    settings.update(extra)
    return factory(**settings)


def _client_ctx(pki, cert=True, **kw):
    ctx = ssl.create_default_context(cafile=pki["ca"][0])
    if cert:
        ctx.load_cert_chain(*pki["client"])
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def _tls_call(port, ctx, payload=b"PING\r\n", host="localhost"):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(payload)
            return s.recv(4096)


def _reference_python_example() -> str:
    paths = sorted(glob.glob(REFERENCE_GLOB))
    if not paths:
        pytest.skip("reference document 001_*.txt is not present")
    text = open(paths[0]).read()
    start = text.index("import os\nimport uuid")
    end = text.index("client.close()", start) + len("client.close()")
    return text[start:end]


def test_reference_document_python_code_runs_unchanged_over_tls(hotkv_server_factory, pki):
    s = _tls_server(hotkv_server_factory, pki, requirepass="admin-pw")
    admin = valkey.Valkey(host=s.host, port=s.port, password="admin-pw")
    assert admin.acl_setuser("app", enabled=True, passwords=["+app-s3cret"],
                             keys=["jobs:*"], commands=["+@all", "-@dangerous"])
    code = _reference_python_example()
    assert "ssl=True, ssl_check_hostname=True" in code
    url = "rediss://app:app-s3cret@localhost:%d" % s.tls_port
    env = dict(os.environ, VALKEY_URL=url, SSL_CERT_FILE=pki["ca"][0])
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "process message {'type': 'welcome', 'user_id': '42'}" in proc.stdout
    # The message was acknowledged and the stream trimmed as the code asked.
    pending = admin.xpending("jobs:emails", "email-workers")
    assert pending["pending"] == 0
    assert admin.xlen("jobs:emails") == 1
    # The same code with a wrong password is refused, over TLS.
    bad = dict(env, VALKEY_URL="rediss://app:wrong@localhost:%d" % s.tls_port)
    proc = subprocess.run([sys.executable, "-c", code], env=bad, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0
    assert "invalid username-password pair" in proc.stderr


def test_plain_and_tls_ports_serve_the_same_data(hotkv_server_factory, pki):
    s = _tls_server(hotkv_server_factory, pki, requirepass="pw")
    assert s.tls_port and s.tls_port != s.port
    assert s.url.startswith("rediss://")
    plain = valkey.Valkey(host=s.host, port=s.port, password="pw")
    tls = valkey.Valkey(host="localhost", port=s.tls_port, password="pw", ssl=True,
                        ssl_ca_certs=pki["ca"][0], ssl_check_hostname=True)
    assert tls.set("k", "over tls")
    assert plain.get("k") == b"over tls"
    assert tls.config_get("tls-port") == {"tls-port": str(s.tls_port)}
    assert tls.client_info()["laddr"].endswith(":%d" % s.tls_port)
    with pytest.raises(valkey.exceptions.AuthenticationError):
        valkey.Valkey(host="localhost", port=s.tls_port, password="bad", ssl=True,
                      ssl_ca_certs=pki["ca"][0]).ping()


def test_client_certificates_required_by_default(hotkv_server_factory, pki):
    s = _tls_server(hotkv_server_factory, pki, tls_auth_clients="yes")
    assert _tls_call(s.tls_port, _client_ctx(pki)) == b"+PONG\r\n"
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        reply = _tls_call(s.tls_port, _client_ctx(pki, cert=False))
        if not reply:          # TLS 1.3: the refusal arrives after the handshake
            raise ConnectionError("closed")
    assert RawClient(s.host, s.port).call("PING") == b"+PONG\r\n"


def test_optional_client_certificates(hotkv_server_factory, pki):
    s = _tls_server(hotkv_server_factory, pki, tls_auth_clients="optional")
    assert _tls_call(s.tls_port, _client_ctx(pki)) == b"+PONG\r\n"
    assert _tls_call(s.tls_port, _client_ctx(pki, cert=False)) == b"+PONG\r\n"


def test_tls_protocols_setting(hotkv_server_factory, pki):
    s = _tls_server(hotkv_server_factory, pki, tls_protocols="TLSv1.3")
    assert _tls_call(s.tls_port, _client_ctx(pki, cert=False)) == b"+PONG\r\n"
    old = _client_ctx(pki, cert=False, maximum_version=ssl.TLSVersion.TLSv1_2)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _tls_call(s.tls_port, old)


def test_plaintext_and_garbage_on_tls_port_harm_nothing(hotkv_server_factory, pki):
    s = _tls_server(hotkv_server_factory, pki)
    for junk in (b"PING\r\n", b"\x16\x03\x01\x00\x05hello", os.urandom(300), b""):
        with socket.create_connection(("127.0.0.1", s.tls_port), timeout=5) as c:
            c.sendall(junk)
            c.shutdown(socket.SHUT_WR)
            try:
                c.recv(100)
            except OSError:
                pass
    assert _tls_call(s.tls_port, _client_ctx(pki, cert=False)) == b"+PONG\r\n"
    assert RawClient(s.host, s.port).call("PING") == b"+PONG\r\n"


@pytest.mark.parametrize("settings, message", [
    (dict(tls_auth_clients="yes", tls_ca_cert_file=""), "tls-ca-cert-file"),
    (dict(tls_cert_file=""), "tls-cert-file"),
    (dict(tls_cert_file="/nonexistent.crt"), "certificate"),
    (dict(tls_protocols="SSLv3"), "unknown protocol"),
])
def test_bad_tls_configuration_refuses_to_start(hotkv_server_factory, pki, settings, message):
    with pytest.raises(Exception, match=message):
        _tls_server(hotkv_server_factory, pki, **settings)


def test_resp3_hello_auth_over_tls_with_redis_py(hotkv_server_factory, pki):
    """redis-py with protocol=3 authenticates with HELLO 3 AUTH user pass."""
    import redis
    s = _tls_server(hotkv_server_factory, pki, requirepass="adm")
    admin = valkey.Valkey(host=s.host, port=s.port, password="adm")
    admin.acl_setuser("r3", enabled=True, passwords=["+pw3"], keys=["*"], commands=["+@all"])
    c = redis.Redis(host="localhost", port=s.tls_port, username="r3", password="pw3",
                    protocol=3, ssl=True, ssl_ca_certs=pki["ca"][0])
    assert c.acl_whoami() == b"r3"
    assert c.hset("h", mapping={"a": "1"}) == 1
    assert c.hgetall("h") == {b"a": b"1"}
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    bad = redis.Redis(host="localhost", port=s.tls_port, username="r3", password="nope",
                      protocol=3, ssl=True, ssl_ca_certs=pki["ca"][0],
                      retry=Retry(NoBackoff(), 0))   # its default retries take seconds
    with pytest.raises(redis.exceptions.AuthenticationError):
        bad.ping()
    assert admin.acl_log()[0]["object"].lower() == "hello"
