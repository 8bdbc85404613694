"""Every forked child goes through hotkv/persistence/forkchild.py: the AOF rewrite's as
BGSAVE's -- its fork timed and counted in INFO (latest_fork_usec,
total_forks), the GC frozen while it runs and unfrozen once it is reaped
(also when it is killed)."""

from __future__ import annotations

import gc

import valkey

from support import wait_for


def _idle(c):
    p = c.info("persistence")
    return p["aof_rewrite_in_progress"] == 0 and p["rdb_bgsave_in_progress"] == 0


def test_rewrite_child_is_timed_counted_and_unfreezes(hotkv_server_factory, tmp_path):
    srv = hotkv_server_factory(dir=str(tmp_path), appendonly="yes")
    c = valkey.Valkey(host=srv.host, port=srv.port)
    assert wait_for(lambda: _idle(c), timeout=10)
    assert c.info("stats")["latest_fork_usec"] == 0
    c.set("k", "v" * 100)
    forks = c.info("stats")["total_forks"]
    c.bgrewriteaof()
    assert wait_for(lambda: c.info("stats")["total_forks"] == forks + 1, timeout=10)
    assert wait_for(lambda: _idle(c), timeout=20)
    assert c.info("stats")["latest_fork_usec"] > 0
    assert wait_for(lambda: gc.get_freeze_count() == 0, timeout=10)
    assert c.info("persistence")["aof_last_bgrewrite_status"] == "ok"
    c.close()


def test_killed_rewrite_child_unfreezes(hotkv_server_factory, tmp_path):
    srv = hotkv_server_factory(dir=str(tmp_path), appendonly="yes")
    c = valkey.Valkey(host=srv.host, port=srv.port)
    assert wait_for(lambda: _idle(c), timeout=10)
    # Enough data that the child is still writing when the AOF is turned off.
    for i in range(5):
        c.rpush("big%d" % i, *[b"x%d" % j for j in range(20000)])
    c.bgrewriteaof()
    c.config_set("appendonly", "no")       # kills the rewrite child if it still runs
    assert wait_for(lambda: _idle(c), timeout=20)
    assert wait_for(lambda: gc.get_freeze_count() == 0, timeout=10)
    c.close()
