"""examples/streams_queue.py, run as a user would: a separate Python
process pointed at a real hotkv server by a redis:// URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import valkey

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
