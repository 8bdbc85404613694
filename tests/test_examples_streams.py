"""The streams queue as users run it: examples/streams_queue.py in a
separate Python process pointed at a real hotkv by a redis:// URL, and the
reference document's Node.js (iovalkey) code, unchanged, over TLS."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import valkey

from support import make_pki, npm_packages_dir

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "streams_queue.py")


def run(url, *args, timeout=60):
    return subprocess.run([sys.executable, EXAMPLE, url, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_demo_flow_recovers_everything_and_dead_letters_the_poison_job(hotkv_server_factory):
    srv = hotkv_server_factory()
    url = f"redis://{srv.host}:{srv.port}/2"
    proc = run(url, "demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["produced"] == 20 and summary["processed"] == 19 and summary["pending"] == 0
    assert [(kind, n) for _, kind, n in summary["dead_letters"]] == [("poison", 3)]
    r = valkey.Valkey(host=srv.host, port=srv.port, db=2, decode_responses=True)
    assert r.xlen("jobs:emails:dead") == 1
    assert r.xpending("jobs:emails", "email-workers")["pending"] == 0
    groups = r.xinfo_groups("jobs:emails")
    assert groups[0]["name"] == "email-workers" and groups[0]["lag"] == 0
    r.close()


def test_commands_produce_work_recover(hotkv_server_factory):
    srv = hotkv_server_factory(requirepass="s3cret")
    url = f"redis://default:s3cret@{srv.host}:{srv.port}/0"
    proc = run(url, "produce", "5")
    assert proc.returncode == 0, proc.stderr
    ids = proc.stdout.split()
    assert len(ids) == 5
    proc = run(url, "work", "w1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("process message") == 5
    proc = run(url, "recover")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"dead_lettered": 0, "reclaimed": 0}
    r = valkey.Valkey(host=srv.host, port=srv.port, password="s3cret")
    assert r.xlen("jobs:emails") == 5 and r.xpending("jobs:emails", "email-workers")["pending"] == 0
    r.close()


# ----------------------------------------------------------------------
# The reference document's Node.js code, unchanged, over TLS
# ----------------------------------------------------------------------

REFERENCE_GLOBS = ["/work/shared/reference/001_*.txt",
                   os.path.join(os.path.dirname(os.path.dirname(EXAMPLE)), "..", "shared",
                                "reference", "001_*.txt")]


def _reference_node_example() -> str:
    import glob
    for pattern in REFERENCE_GLOBS:
        paths = sorted(glob.glob(pattern))
        if paths:
            text = open(paths[0]).read()
            start = text.index("import Redis from 'iovalkey'")
            end = text.index("await client.quit()", start) + len("await client.quit()")
            return text[start:end]
    pytest.skip("the reference document 001_*.txt is not present")


def test_reference_document_node_code_runs_unchanged_over_tls(hotkv_server_factory, tmp_path):
    """The iovalkey flow of the reference document, byte for byte as
    printed, against hotkv over TLS with a username and password; the test
    only supplies VALKEY_URL and NODE_EXTRA_CA_CERTS (the test CA)."""
    code = _reference_node_example()
    assert "tls: { servername: url.hostname }" in code
    node_dir = npm_packages_dir("iovalkey")
    pytest.importorskip("cryptography.x509", reason="needs the cryptography package")
    pki = make_pki(tmp_path, "hotkv streams test CA")
    (cert, key), ca = pki["server"], pki["ca"][0]
    srv = hotkv_server_factory(tls_port=0, tls_cert_file=cert, tls_key_file=key,
                               tls_ca_cert_file=ca,
                               tls_auth_clients="no", requirepass="admin-pw")
    admin = valkey.Valkey(host=srv.host, port=srv.port, password="admin-pw", decode_responses=True)
    admin.acl_setuser("app", enabled=True, passwords=["+app-s3cret"], keys=["jobs:*"],
                      commands=["+@all", "-@dangerous"])
    script = os.path.join(node_dir, "reference_%d.mjs" % os.getpid())
    with open(script, "w") as f:
        f.write(code)
    env = dict(os.environ, VALKEY_URL="rediss://app:app-s3cret@localhost:%d" % srv.tls_port,
               NODE_EXTRA_CA_CERTS=ca)
    try:
        proc = subprocess.run(["node", script], cwd=node_dir, env=env, capture_output=True,
                              text=True, timeout=60)
    finally:
        os.unlink(script)
    assert proc.returncode == 0, proc.stderr
    assert "process message [ 'type', 'welcome', 'user_id', '42' ]" in proc.stdout
    assert admin.xpending("jobs:emails", "email-workers")["pending"] == 0
    assert admin.xlen("jobs:emails") == 1
    assert admin.xinfo_groups("jobs:emails")[0]["entries-read"] == 1
    admin.close()
