"""The BGSAVE child and the parent around it (hotkv/persistence/forkchild.py,
hotkv/persistence/snapshots.py), on a real server in this process (so its GC state
and its child's /proc entry can be read):

* the parent's cyclic GC objects are frozen while a child runs and
  unfrozen once it is reaped -- after a success, and after SHUTDOWN-style
  kill (``kill_child``) -- and a fork that fails leaves nothing frozen;
* the child runs ``CHILD_NICE`` below the parent's priority;
* INFO stats ``latest_fork_usec`` and ``total_forks`` count the forks, as
  valkey-server 8.1.8 does (zero before the first, then one per BGSAVE:
  checked side by side with the reference).

The save is held open with ``rdb-key-save-delay`` (microseconds a key) so
the child can be looked at; every wait is bounded (support.wait_for).
"""

from __future__ import annotations

import gc
import os

import pytest
import valkey

from hotkv.persistence import forkchild
from support import ReferenceValkey, wait_for


def _info(r, section: str) -> dict:
    return r.info(section)


def _held_save(hotkv_server_factory, keys: int = 10):
    srv = hotkv_server_factory(**{"rdb-key-save-delay": "100000"})
    r = valkey.Valkey(port=srv.port)
    for i in range(keys):
        r.set(f"k{i}", "v")
    return srv, r


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_gc_frozen_while_the_child_runs_and_after_it_is_reaped(hotkv_server_factory):
    # (an earlier test's server in this process may still be reaping its child)
    assert wait_for(lambda: gc.get_freeze_count() == 0, timeout=30)
    srv, r = _held_save(hotkv_server_factory)
    assert r.bgsave()
    snaps = srv.server.snapshots
    assert snaps.child_pid
    assert gc.get_freeze_count() > 0
    with open(f"/proc/{snaps.child_pid}/stat") as f:
        child_nice = int(f.read().rsplit(")", 1)[1].split()[16])
    assert child_nice == min(os.nice(0) + forkchild.CHILD_NICE, 19)
    # 10 keys x 0.1 s: the child ends by itself; the cron reaps it.
    assert wait_for(lambda: _info(r, "persistence")["rdb_bgsave_in_progress"] == 0, timeout=30)
    assert _info(r, "persistence")["rdb_last_bgsave_status"] == "ok"
    assert gc.get_freeze_count() == 0
    # Killed (what SHUTDOWN and FLUSHALL do): unfrozen too.
    assert r.bgsave()
    assert gc.get_freeze_count() > 0
    srv.server.loop.call_soon_threadsafe(snaps.kill_child)
    # (child_pid and the GC change on the server's thread: wait for both)
    assert wait_for(lambda: not snaps.child_pid and gc.get_freeze_count() == 0, timeout=10)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_failed_fork_leaves_nothing_frozen(hotkv_server_factory, monkeypatch):
    srv, r = _held_save(hotkv_server_factory, keys=1)

    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")
    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.raises(valkey.ResponseError):
        r.bgsave()
    assert gc.get_freeze_count() == 0
    assert _info(r, "persistence")["rdb_last_bgsave_status"] == "err"


def _fork_stats(port: int, bgsaves: int) -> list:
    """(latest_fork_usec > 0, total_forks) before and after ``bgsaves`` BGSAVEs."""
    r = valkey.Valkey(port=port)
    r.set("k", "v")
    out = []
    stats = _info(r, "stats")
    out.append((stats["latest_fork_usec"] > 0, stats["total_forks"]))
    for _ in range(bgsaves):
        r.bgsave()
        assert wait_for(lambda: _info(r, "persistence")["rdb_bgsave_in_progress"] == 0, timeout=30)
    stats = _info(r, "stats")
    out.append((stats["latest_fork_usec"] > 0, stats["total_forks"]))
    return out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_fork_stats_count_like_valkey(hotkv_server_factory):
    srv = hotkv_server_factory()
    with ReferenceValkey() as ref:
        want = _fork_stats(ref.port, 2)
    assert want == [(False, 0), (True, 2)]
    assert _fork_stats(srv.port, 2) == want
