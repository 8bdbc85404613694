"""The volume differential in CI: a few seeds of compat/volume.py, RESP2 and RESP3.

Each seed runs thousands of queue commands (streams of a thousand and more
entries over many nodes, lists of thousands of items over many quicklist
nodes, consumer groups reading, acking, claiming and trimming them) on the
session's hotkv and the reference Valkey, every reply compared byte for byte
and then the whole final state (see volume.py).  With the fix of 4a32dcf
reverted, all 16 CI runs diverge, each at an XREADGROUP > (commands
1027-1429 of 6000).  One known divergence is tolerated and counted, not
hidden: OBJECT ENCODING of a list (volume.known_divergence), reproduced by
the strict xfail below.

CI runs HOTKV_VOLUME_SEEDS=8 seeds (0..7) of HOTKV_VOLUME_COMMANDS=6000
commands in each protocol (~30 s on 2 idle cores, ~21 s of CPU).  More:

    HOTKV_VOLUME_SEEDS=0-199 HOTKV_VOLUME_COMMANDS=10000 python -m pytest -q compat/test_volume.py

or, without pytest, ``python compat/volume.py --seeds 0-999 --commands 5000 --both``.
"""

from __future__ import annotations

import os

import pytest

from support import RawClient
from volume import LISTS, STREAMS, _run_batch, compare, parse_seeds, workload


def _seeds() -> list[int]:
    text = os.environ.get("HOTKV_VOLUME_SEEDS", "8")
    # a range or list names the seeds; a bare number N means the first N
    return parse_seeds(text) if "-" in text or "," in text else list(range(int(text)))


COMMANDS = int(os.environ.get("HOTKV_VOLUME_COMMANDS", "6000"))


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
@pytest.mark.parametrize("seed", _seeds())
def test_volume_differential(server, ref_server, seed, resp3):
    known: dict = {}
    n = compare(seed, COMMANDS, resp3, hotkv_addr=(server.host, server.port),
                valkey_addr=(ref_server.host, ref_server.port), known=known)
    assert n == COMMANDS
    if known:
        print("seed %d: known divergences tolerated: %r" % (seed, known))


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="open: hotkv's OBJECT ENCODING of a list follows its "
                   "contents, Valkey's its history (volume.known_divergence 'list-encoding')")
@pytest.mark.parametrize("case", ["shrinking", "big-element-count-limit"])
def test_list_encoding_follows_valkey(diff, case):
    """The divergence volume.py tolerates as "list-encoding", reproduced:
    Valkey turns a quicklist back into a listpack only once it is down to
    half the limit (5 items under a limit of 4 make a quicklist; popping one
    leaves it one), and under a count limit an element over 8 kB still makes
    a quicklist.  When hotkv follows, this XPASSes (strict: fails) -- then
    drop the tolerance in volume.known_divergence."""
    try:
        if case == "shrinking":
            diff("CONFIG", "SET", "list-max-listpack-size", "4")
            diff("RPUSH", "l", "a", "b", "c", "d", "e")
            assert diff("OBJECT", "ENCODING", "l") == b"$9\r\nquicklist\r\n"
            diff("RPOP", "l")
        else:
            diff("CONFIG", "SET", "list-max-listpack-size", "128")
            diff("RPUSH", "l", "x" * 9000)
        diff("OBJECT", "ENCODING", "l")
    finally:
        diff("CONFIG", "SET", "list-max-listpack-size", "-2")


def _chunks(script, size):
    """The script in chunks of about size commands, none ending inside MULTI."""
    chunk, in_multi = [], False
    for argv in script:
        chunk.append(argv)
        in_multi = argv[0] == b"MULTI" or (in_multi and argv[0] != b"EXEC")
        if len(chunk) >= size and not in_multi:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def test_workloads_reach_volume(ref_server):
    """The generator keeps its promise of size, measured on Valkey: the big
    stream passes 1,000 entries over dozens of nodes, the big list passes
    1,000 items, groups read without COUNT, and the seeds draw small node
    limits.  Guards the differential against a generator change that
    quietly shrinks it back to a few entries."""
    c = RawClient(ref_server.host, ref_server.port, timeout=60)
    try:
        nodes = []
        for seed in (0, 1):
            config, script = workload(seed, COMMANDS)
            assert c.call("FLUSHALL") == b"+OK\r\n"
            for name, value in config.items():
                assert c.call("CONFIG", "SET", name, value) == b"+OK\r\n"
            most_entries = most_items = 0
            for batch in _chunks(script, 200):
                _run_batch(c, batch)
                most_entries = max(most_entries, int(c.call("XLEN", STREAMS[0])[1:-2]))
                most_items = max(most_items, int(c.call("LLEN", LISTS[0])[1:-2]))
                info = c.call("XINFO", "STREAM", STREAMS[0])
                nodes.append(int(info.split(b"radix-tree-keys\r\n:")[1].split(b"\r\n")[0]))
            assert most_entries >= 1000, (seed, most_entries)
            assert most_items >= 1000, (seed, most_items)
            no_count = [a for a in script if a[0] == b"XREADGROUP" and b"COUNT" not in a
                        and a[-1] == b">"]
            assert len(no_count) >= 50, (seed, len(no_count))
        assert max(nodes) >= 50, max(nodes)
        limits = [int(workload(s, 1)[0]["stream-node-max-entries"]) for s in _seeds()]
        assert min(limits) <= 3, limits
    finally:
        c.call("FLUSHALL")
        for name, value in (("stream-node-max-entries", "100"),
                            ("stream-node-max-bytes", "4096"),
                            ("list-max-listpack-size", "-2")):
            c.call("CONFIG", "SET", name, value)
        c.close()
