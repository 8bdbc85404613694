"""The fast paths of the stream code (hotkv/types/stream*.py,
hotkv/commands/streams.py, stream_groups.py) against what they shortcut: XADD's ``*`` and
``MAXLEN|MINID ~|= n *`` shapes against the general option parser, the
batched XREADGROUP delivery and XACK against Valkey, the ``PEL`` against a
SortedDict, the written-out listpack size arithmetic against the encoder
(itself checked against Valkey's DUMP in test_streams.py), and
``range_entries`` against ``range``."""

from __future__ import annotations

import random

import pytest
from sortedcontainers import SortedDict

from hotkv.types.stream import Stream
from hotkv.types.stream_groups import NACK, PEL
from hotkv.types.stream_ids import MAX_ID, id_bytes
from hotkv.types.stream_persist import node_listpack as _node_listpack, rdb_load

# ----------------------------------------------------------------------
# XADD: the fast shapes leave what the general parser leaves
# ----------------------------------------------------------------------

def _general_twin(argv, entries):
    """The same XADD in a shape only the general parser takes: an explicit
    LIMIT equal to the default for ``~``, no operator for ``=``, and a
    no-op trim for a bare ``*``."""
    argv = list(argv)
    if argv[0] == "*":
        return ["MAXLEN", "~", str(10 ** 9), "LIMIT", "1"] + argv
    strategy, op, threshold = argv[:3]
    if op == "~":
        return [strategy, "~", threshold, "LIMIT", str(100 * entries)] + argv[3:]
    return [strategy, threshold] + argv[3:]


@pytest.mark.parametrize("entries,nbytes", [("100", "4096"), ("5", "4096"), ("0", "200")])
def test_xadd_fast_shapes_leave_what_the_general_parser_leaves(r, entries, nbytes):
    """Each pair runs in one MULTI, so both get the same time and so the
    same IDs; replies and the streams afterwards must be equal."""
    rnd = random.Random(int(entries) + int(nbytes))
    r.config_set("stream-node-max-entries", entries)
    r.config_set("stream-node-max-bytes", nbytes)
    try:
        for _ in range(400):
            fields = []
            for _ in range(rnd.choice([1, 1, 1, 2, 3])):
                fields += [rnd.choice(["f", "f", "12", "g"]),
                           rnd.choice(["1", "-7", "x" * rnd.choice([5, 63, 64, 125, 126, 300]),
                                       "9223372036854775808", ""])]
            k = rnd.random()
            if k < 0.3:
                shape = ["*"]
            elif k < 0.7:
                shape = ["MAXLEN", rnd.choice("~="), str(rnd.randint(0, 60)), "*"]
            else:
                last = r.xinfo_stream("fast")["last-generated-id"] if r.exists("fast") else b"0-0"
                ms = int(last.split(b"-")[0])
                shape = ["MINID", rnd.choice("~="), str(ms - rnd.randint(0, 3)), "*"]
            p = r.pipeline(transaction=True)
            p.execute_command("XADD", "fast", *shape, *fields)
            p.execute_command("XADD", "slow", *_general_twin(shape, int(entries)), *fields)
            a, b = p.execute()
            assert a == b
        fast = r.xinfo_stream("fast", full=True)
        slow = r.xinfo_stream("slow", full=True)
        assert fast == slow
        assert r.xrange("fast") == r.xrange("slow")
    finally:
        r.config_set("stream-node-max-entries", "100")
        r.config_set("stream-node-max-bytes", "4096")


def test_xadd_fast_shape_errors_match_valkey(diff):
    for cmd in [("XADD", "s", "MAXLEN", "~", "x", "*", "f", "v"),
                ("XADD", "s", "MAXLEN", "=", "-1", "*", "f", "v"),
                ("XADD", "s", "MAXLEN", "~", "01", "*", "f", "v"),
                ("XADD", "s", "MINID", "~", "+", "*", "f", "v"),
                ("XADD", "s", "MINID", "=", "x", "*", "f", "v"),
                ("XADD", "s", "maxlen", "~", "5", "*", "f", "v", "g"),
                ("XADD", "s", "*", "f", "v", "g"),
                ("SET", "str", "v"), ("XADD", "str", "*", "f", "v"),
                ("XADD", "str", "MAXLEN", "~", "5", "*", "f", "v"),
                ("XADD", "s", "LIMIT", "~", "5", "*", "f", "v"),
                ("XADD", "s", "MAXLEN", "~", "5", "1-1", "f", "v"),
                ("XADD", "s", "MINID", "~", "1", "2-1", "f", "v"), ("XLEN", "s")]:
        diff(*cmd)


def _same_layout(diff, server):
    """The stream Valkey DUMPs, loaded, has hotkv's nodes: the same master
    IDs, entry counts and listpack sizes."""
    reply = diff.theirs.call("DUMP", "q")               # raw RESP: $<n>\r\n<dump>\r\n
    payload = reply[reply.index(b"\r\n") + 2:-12]      # less version and CRC
    theirs, end = rdb_load(payload[0], payload, 1)
    assert end == len(payload)
    ours = server.server.dbs[0].data[b"q"]
    assert [(n.master, n.live, n.deleted, n.nbytes) for n in ours.nodes] == \
        [(n.master, n.live, n.deleted, n.nbytes) for n in theirs.nodes]
    assert ours.range(0, MAX_ID) == theirs.range(0, MAX_ID)


@pytest.mark.parametrize("max_bytes,max_entries", [(4096, 100), (300, 0), (517, 7), (0, 0)])
def test_queue_shaped_entries_split_nodes_as_valkey(diff, server, max_bytes, max_entries):
    """One field, IDs a few sequence numbers apart, values of 21..125 bytes:
    the shape Stream.append_one sizes and links without a call.  The nodes
    must end where Valkey's listpacks end (its DUMP shows them) and a ~
    trim, which only drops whole nodes, must leave as many entries."""
    rnd = random.Random(max_bytes + max_entries)
    diff("CONFIG", "SET", "stream-node-max-bytes", str(max_bytes))
    diff("CONFIG", "SET", "stream-node-max-entries", str(max_entries))
    try:
        ms, seq = 5, 0
        for _ in range(600):
            if rnd.random() < 0.03:
                ms += rnd.choice([1, 200])     # a new millisecond: deltas from the master grow
                seq = 0
            seq += rnd.choice([1, 1, 1, 2, 60])
            value = "v" * rnd.choice([21, 22, 62, 63, 64, 65, 100, 124, 125, rnd.randint(21, 125)])
            diff("XADD", "q", "%d-%d" % (ms, seq), rnd.choice(["f"] * 9 + ["g"]), value)
        _same_layout(diff, server)
        diff("XINFO", "STREAM", "q")
        for keep in (550, 300, 10):
            diff("XTRIM", "q", "MAXLEN", "~", str(keep))
            diff("XLEN", "q")
        _same_layout(diff, server)
    finally:
        diff("CONFIG", "SET", "stream-node-max-bytes", "4096")
        diff("CONFIG", "SET", "stream-node-max-entries", "100")


def test_parse_ids_is_parse_id_of_each():
    """XACK's parse_ids (the millisecond part shared by consecutive IDs
    converted once) gives what parse_id gives, or raises what it raises,
    whatever comes before an ID."""
    from hotkv.commands.streams.args import parse_id, parse_ids
    from hotkv.protocol.errors import CommandError
    cases = [b"1-1", b"1", b"0-0", b"00-01", b"1-2", b"2-1",
             b"18446744073709551615-18446744073709551615", b"18446744073709551616-0",
             b"1-18446744073709551616", b"-", b"+", b"1-", b"-1", b"1-*", b"abc", b"", b"1-2-3",
             b" 1-1", b"1-1 ", b"99999999999999999999-1", b"1--1", b"\xd9\xa1-1", b"1-+1"]

    def outcome(f, args):
        try:
            return f(args)
        except CommandError as e:
            return e.message

    for a in cases:
        for b in cases:
            for args in ([a], [a, b], [b"1-5", a, b], [a, a, b], [b, b"1-7", a]):
                assert outcome(parse_ids, args) == \
                    outcome(lambda xs: [parse_id(x, 0, strict=True)[0] for x in xs], args), args


# ----------------------------------------------------------------------
# Consumer groups: batched delivery and acks against Valkey
# ----------------------------------------------------------------------

def test_group_reads_and_acks_match_valkey(diff):
    """Deliveries in batches (above the PEL, and again after SETID moved
    the group back), acks anywhere in PELs longer than a chunk, tombstones
    in the way of the read counter: every deterministic reply equal."""
    rnd = random.Random(7)
    ms = 1
    delivered = []
    diff("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    for step in range(700):
        op = rnd.random()
        if op < 0.35:
            for _ in range(rnd.randint(1, 20)):
                ms += rnd.choice([0, 1, 1, 5000])
                fields = ["f", str(rnd.randint(0, 300))] if rnd.random() < 0.8 else \
                    ["a", "1", "b", "x" * rnd.randint(0, 80)]
                diff("XADD", "s", f"{ms}-*", *fields)
        elif op < 0.6:
            consumer = rnd.choice(["alice", "bob", "carol"])
            opts = rnd.choice([[], ["COUNT", str(rnd.randint(1, 60))],
                               ["COUNT", "5", "BLOCK", "1"], ["NOACK", "COUNT", "3"]])
            if "BLOCK" in opts and not rnd.random() < 0.5:
                opts = ["COUNT", "7"]
            raw = diff("XREADGROUP", "GROUP", "g", consumer, *opts, "STREAMS", "s", ">")
            delivered += [int(x) for x in _ids(raw)]
        elif op < 0.8 and delivered:
            picks = rnd.sample(delivered, min(len(delivered), rnd.randint(1, 30)))
            diff("XACK", "s", "g", *[id_bytes(i) for i in picks], "99999999-0")
        elif op < 0.85:
            diff("XDEL", "s", f"{ms - rnd.randint(0, 20000)}-0", f"{ms}-0")
        elif op < 0.88:
            diff("XGROUP", "SETID", "s", "g", f"{max(0, ms - rnd.randint(0, 50000))}-0")
        elif op < 0.9:
            diff("XTRIM", "s", "MAXLEN", "~", str(rnd.randint(0, 400)))
        elif op < 0.95:
            diff("XAUTOCLAIM", "s", "g", rnd.choice(["alice", "dave"]), "0",
                 f"{ms - rnd.randint(0, 50000)}-0", "COUNT", str(rnd.randint(1, 40)), "JUSTID")
        else:
            diff("XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", "0")
        if step % 25 == 0:
            diff("XPENDING", "s", "g")
            diff("XINFO", "GROUPS", "s")
    diff("XPENDING", "s", "g")
    diff("XINFO", "GROUPS", "s")


def _ids(raw: bytes):
    """The entry IDs in a raw XREADGROUP reply, as ints."""
    out = []
    for line in raw.split(b"\r\n"):
        if b"-" in line and line[:1].isdigit() and line.replace(b"-", b"").isdigit():
            a, b = line.split(b"-")
            out.append(int(a) << 64 | int(b))
    return out


# ----------------------------------------------------------------------
# Structures
# ----------------------------------------------------------------------

def test_pel_behaves_as_a_sorted_dict():
    rnd = random.Random(3)
    pel, model = PEL(), SortedDict()
    top = 0
    for step in range(6000):
        op = rnd.random()
        if op < 0.35:
            top += rnd.randint(1, 3)
            pel[top] = model[top] = NACK(step, None)
        elif op < 0.45:
            ids = list(range(top + 1, top + rnd.randint(2, 300)))
            top = ids[-1]
            nacks = [NACK(step, None) for _ in ids]
            pel.extend_above(ids, nacks)
            model.update(zip(ids, nacks))
        elif op < 0.55:
            i = rnd.randint(0, top + 2)
            pel[i] = model[i] = NACK(step, None)
            top = max(top, i)
        elif op < 0.85 and model:
            i = model.keys()[0] if rnd.random() < 0.5 else rnd.randint(0, top + 2)
            assert pel.pop(i) is model.pop(i, None)
        elif op < 0.9 and model:
            lo = rnd.randint(0, top + 2)
            hi = lo + rnd.randint(-5, 3000)
            assert list(pel.irange(lo, hi)) == list(model.irange(lo, hi))
        assert len(pel) == len(model)
        if step % 500 == 0:
            assert list(pel) == list(model)
            assert pel.items() == list(model.items())
            if model:
                assert (pel.first(), pel.last()) == (model.keys()[0], model.keys()[-1])
            assert all(pel.chunks) and pel.maxes == [c[-1] for c in pel.chunks]
    assert list(pel) == list(model)


def _random_value(rnd):
    return rnd.choice([
        b"", b"0", b"7", b"-1", b"99", b"100", b"127", b"128", b"999", b"1000", b"00", b"010",
        b"-4096", b"4095", b"4096", b"01", b"-0", str(rnd.randint(0, 1200)).encode(),
        b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
        b"123456789012345678", b"12345678901234567890",
        b"x" * rnd.choice([1, 20, 21, 63, 64, 125, 126, 127, 4095, 4096, 20000])])


def test_node_sizes_are_the_listpacks_sizes():
    """Nodes are split on lp_bytes(): it must be the exact size of the
    listpack the encoder (checked against Valkey's DUMP) writes."""
    rnd = random.Random(11)
    for trial in range(150):
        s = Stream()
        eid = rnd.choice([1, (1 << 64) - 3, 12345 << 64, ((1 << 64) - 2) << 64])
        nfields = rnd.choice([1, 1, 2, 3])
        names = [rnd.choice([b"f", b"12", b"x" * 70, b""]) for _ in range(nfields)]
        max_bytes, max_entries = rnd.choice([(4096, 100), (0, 0), (300, 0), (4096, 3)])
        for _ in range(rnd.randint(1, 200)):
            eid += rnd.choice([1, 1, 2, 130, 5000, 1 << 64, (1 << 64) - 1, (1 << 64) + 9000,
                               (4096 << 64) - 7, 1 << 90])
            if eid > MAX_ID:
                break
            if rnd.random() < 0.15:
                fv = [x for _ in range(rnd.randint(1, 3))
                      for x in (rnd.choice([b"f", b"g", b"1"]), _random_value(rnd))]
            else:
                fv = [x for name in names for x in (name, _random_value(rnd))]
            s.append(eid, [b"XADD", b"k", b"*", *fv], 3, max_bytes, max_entries)
        for node in s.nodes:
            assert node.lp_bytes() == len(_node_listpack(node))


def test_range_entries_are_range_formatted():
    rnd = random.Random(5)
    s = Stream()
    eid = 1 << 64
    for _ in range(2000):
        eid += rnd.choice([1, 1 << 64])
        fv = [b"f", b"v%d" % rnd.randint(0, 9)] if rnd.random() < 0.7 else [b"a", b"1", b"b", b"2"]
        s.append(eid, [b"XADD", b"k", b"*", *fv], 3, 500, 0)
    ids = [i for i, _ in s.range(0, MAX_ID)]
    for i in rnd.sample(ids, 300):
        assert s.delete(i)
    ids = [i for node in s.nodes for i in node.ids]
    for _ in range(300):
        a, b = sorted(rnd.choice(ids) + rnd.choice([-1, 0, 1]) for _ in range(2))
        a = rnd.choice([a, a, 0])
        b = rnd.choice([b, b, MAX_ID])
        count = rnd.choice([0, 1, 5, 100, 10 ** 6])
        got = []
        assert s.range_entries(a, b, count, got) == \
            [[id_bytes(i), items] for i, items in s.range(a, b, count)]
        assert got == [i for i, _ in s.range(a, b, count)]
        assert s.revrange_entries(a, b, count) == \
            [[id_bytes(i), items] for i, items in s.revrange(a, b, count)]
    assert s.range_entries(5, 4) == s.revrange_entries(5, 4) == []
    assert s.range_entries(MAX_ID, MAX_ID) == s.revrange_entries(0, 0) == []
