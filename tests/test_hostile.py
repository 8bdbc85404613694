"""Hostile input: fuzzing (bounded, for CI), a corpus of malformed frames
against a live server, and a load test with many blocked clients coming and
going.  Longer fuzzing runs: tests/fuzz/README.md."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import resource
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import RawClient, encode_command

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fuzz"))
import targets  # noqa: E402

FUZZ_DIR = os.path.join(os.path.dirname(__file__), "fuzz")


# ----------------------------------------------------------------------
# Bounded fuzzing (hypothesis; atheris when installed)
# ----------------------------------------------------------------------

_args = st.one_of(st.sampled_from(targets.INTERESTING), st.binary(max_size=20))
_frames = st.lists(st.lists(_args, min_size=1, max_size=6), min_size=1, max_size=6).map(
    lambda cmds: b"".join(encode_command(*c) for c in cmds))
_junk = st.sampled_from([b"*", b"$", b"\r", b"\n", b"\r\n", b"-", b"0", b"9" * 20, b"*-1\r\n",
                         b"*2147483648\r\n", b"$-1\r\n", b"\x00", b"\"", b"'", b" ", b"*10\r\n",
                         b"$16385\r\n", b"*11\r\n", b"$9223372036854775808\r\n",
                         b"+0\r\n", b"~1\r\n", b"=5\r\ntxt:a\r\n", b"(1\r\n", b"|1\r\n",
                         b"%1\r\n", b">1\r\n", b":1\r\n", b"_\r\n"])


_ELEMENT_FORMS = [b"+%s\r\n", b":1\r\n", b"=%d\r\ntxt:%s\r\n", b"(12\r\n", b"_\r\n",
                  b",1.5\r\n", b"#t\r\n", b"~1\r\n$1\r\na\r\n", b"%%1\r\n+a\r\n+b\r\n",
                  b"*1\r\n$1\r\na\r\n", b"$-1\r\n"]


@st.composite
def _typed_frames(draw):
    """Multibulks whose elements are sometimes other RESP types (hiredis
    reads them all; Redis wants '$' bulks) or whose header is not '*'."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        args = draw(st.lists(st.sampled_from([b"PING", b"GET", b"k", b"ECHO", b"x"]),
                             min_size=1, max_size=3))
        head = draw(st.sampled_from([b"*", b"*", b"*", b"~", b">", b"|"]))
        out.append(head + b"%d\r\n" % len(args))
        for a in args:
            form = draw(st.sampled_from([None] * 6 + _ELEMENT_FORMS))
            if form is None:
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
            elif form.startswith(b"="):
                out.append(form % (len(a) + 4, a))
            elif b"%s" in form:
                out.append(form % a)
            else:
                out.append(form)
    return b"".join(out)


@st.composite
def _mutated(draw):
    data = bytearray(draw(st.one_of(_frames, _typed_frames(), st.binary(max_size=200))))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.integers(0, 2))
        pos = draw(st.integers(0, len(data)))
        if op == 0:
            data[pos:pos] = draw(_junk)
        elif op == 1 and data:
            del data[pos:pos + draw(st.integers(1, 4))]
        elif data:
            data[min(pos, len(data) - 1)] = draw(st.integers(0, 255))
    return bytes(data)


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=_mutated(), cuts=st.lists(st.integers(0, 400), max_size=8), auth=st.booleans())
def test_parser_fuzz_bounded(data, cuts, auth):
    targets.parse_check(data, cuts, auth)


def test_parser_accepts_what_it_should():
    """The property is not vacuous: valid frames come back whole."""
    frames = encode_command("SET", "k", b"\x00\xff\r\n") + b"PING\r\n" + encode_command("GET", "k")
    cmds = targets.parse_check(frames, range(0, 60, 3))
    assert cmds == [[b"SET", b"k", b"\x00\xff\r\n"], [b"PING"], [b"GET", b"k"]]
    with pytest.raises(targets.Malformed):
        targets.check_resp(b"$5\r\nabc\r\n")


@pytest.fixture(scope="module")
def dispatcher():
    return targets.Dispatcher()


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_dispatch_fuzz_bounded(dispatcher, data):
    name = data.draw(st.sampled_from(dispatcher.commands))
    argv = [p.encode() for p in name.split("|")]
    if data.draw(st.booleans()):
        argv[0] = argv[0].upper()
    argv += data.draw(st.lists(_args, max_size=8))
    dispatcher.run(argv, resp3=data.draw(st.booleans()))


def test_dispatch_fuzz_covers_real_commands(dispatcher):
    assert len(dispatcher.commands) > 50
    assert dispatcher.run([b"SET", b"k", b"v"]) == b"+OK\r\n"
    assert dispatcher.run([b"GET", b"k"]) == b"$1\r\nv\r\n"
    assert dispatcher.run([b"BLPOP", b"nolist", b"0.01"]).startswith(b"*-1")


def _atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _atheris_available(), reason="atheris is not installed "
                    "(pip install atheris); the hypothesis runs above still fuzz")
@pytest.mark.parametrize("target", ["fuzz_parser.py"])
def test_atheris_bounded(target, tmp_path):
    """A few seconds of coverage-guided parser fuzzing (fuzz_dispatch.py needs
    ~10 s just to instrument the command modules: run it by hand, README.md)."""
    proc = subprocess.run(
        [sys.executable, os.path.join(FUZZ_DIR, target), "-max_total_time=3", "-seed=1",
         "-artifact_prefix=%s/" % tmp_path],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "Done " in proc.stderr


# ----------------------------------------------------------------------
# Malformed input against a live server
# ----------------------------------------------------------------------

CORPUS = [
    b"*-1\r\n", b"*0\r\n", b"*-5\r\n", b"*-9223372036854775808\r\n",
    b"*1\r\n$-1\r\n", b"*1\r\n$-5\r\n", b"*1\r\n$9223372036854775808\r\n",
    b"*1\r\n$9223372036854775807\r\n", b"*9223372036854775807\r\n",
    b"*9223372036854775808\r\n", b"*2147483648\r\n", b"*2147483647\r\n$4\r\nPING\r\n",
    b"*1\r\n$18446744073709551616\r\n", b"*1\r\n$" + b"9" * 100 + b"\r\n",
    b"*" + b"9" * 70000, b"*1\r\n$" + b"9" * 70000,
    b"*1\r\n$1x\r\n", b"*1x\r\n", b"*\r\n", b"*1\r\n$\r\n", b"*1\r\nfoo\r\n",
    b"*1\r\n$3\r\nabcdef\r\n", b"*1\r\n$3\r\nabc", b"*2\r\n$3\r\nGET\r\n",
    b"*1\r\n$4\r\n\xff\xfe\x00\x01\r\n", b"*2\r\n$3\r\nGET\r\n$3\r\n\xc3\x28\x00\r\n",
    b"\xff\xfe\xfd\r\n", b"\x00\x00\x00\r\n", b"\x00", b"$5\r\nhello\r\n",
    b"\"unbalanced\r\n", b"'unbalanced\r\n", b"\"a\"b\r\n", b"x" * 70000,
    b"%1\r\n+a\r\n+b\r\n", b">1\r\n", b"#t\r\n", b"\r\n\r\n\r\n", b"\n\n",
    encode_command("SET", "\x00key\x00", "\x00") + encode_command("DEL", "\x00key\x00"),
    encode_command(*["MSET"] + ["canary:42", "v42"] * 1000),
    encode_command("PING") * 1000 + b"*1\r\n$-7\r\n",
    encode_command("\xff" * 1000, "\xff"), encode_command("ACL", "\xff\x00"),
    encode_command("CONFIG", "GET", "\x00*"), encode_command("DEBUG", "SEGFAULT"),
    encode_command("HELLO", "99"), encode_command("HELLO", "3", "AUTH", "\x00", "\x00"),
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000000\r\n",
    os.urandom(4096), bytes(range(256)) * 4,
]


def _read_all(c: RawClient, wait: float = 0.3) -> bytes:
    c.sock.settimeout(wait)
    out = b""
    try:
        while True:
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, OSError):
        pass
    return out


def _canary(s):
    c = RawClient(s.host, s.port)
    for i in range(100):
        c.call("SET", "canary:%d" % i, "v%d" % i)
    c.call("RPUSH", "canary:queue", *range(50))
    c.close()


def _check_canary(s):
    c = RawClient(s.host, s.port)
    assert c.call("PING") == b"+PONG\r\n"
    assert c.call("DBSIZE") == b":101\r\n"
    assert c.call("GET", "canary:42") == b"$3\r\nv42\r\n"
    assert c.call("LLEN", "canary:queue") == b":50\r\n"
    c.close()


def test_malformed_corpus_against_live_server(hotkv_server_factory):
    s = hotkv_server_factory()
    _canary(s)
    bystander = RawClient(s.host, s.port)
    for frame in CORPUS:
        c = RawClient(s.host, s.port)
        try:
            c.send_raw(frame)
        except OSError:
            pass    # closed while we were still sending: allowed
        got = _read_all(c, 0.15)
        targets.check_resp(got)     # whatever came back is well-formed RESP
        c.close()
        assert bystander.call("PING") == b"+PONG\r\n", frame[:60]
    _check_canary(s)
    assert not s.server.clients.get(0)


def test_corpus_when_unauthenticated(hotkv_server_factory):
    s = hotkv_server_factory(requirepass="pw")
    for frame in CORPUS[:40]:
        c = RawClient(s.host, s.port)
        try:
            c.send_raw(frame)
        except OSError:
            pass
        targets.check_resp(_read_all(c, 0.1))
        c.close()
    c = RawClient(s.host, s.port)
    assert c.call("AUTH", "pw") == b"+OK\r\n"


SPLIT_FRAMES = [
    encode_command("SET", "split", b"a\r\nb\x00c"),
    encode_command("HSET", "h", "f", "v" * 40),
    encode_command("RPUSH", "q", "1", "2", "3"),
    b"PING inline\r\n",
    encode_command("GET", "split"),
]
SPLIT_REPLIES = [b"+OK\r\n", b":1\r\n", b":3\r\n", b"$6\r\ninline\r\n", b"$6\r\na\r\nb\x00c\r\n"]


def test_frames_split_at_every_byte(hotkv_server_factory):
    s = hotkv_server_factory()
    stream = b"".join(SPLIT_FRAMES)
    expected = b"".join(SPLIT_REPLIES)
    c = RawClient(s.host, s.port)
    for cut in range(1, len(stream)):
        c.call("DEL", "split", "h", "q")
        c.send_raw(stream[:cut])
        time.sleep(0.0005 if cut % 16 else 0.005)
        c.send_raw(stream[cut:])
        got = b""
        while len(got) < len(expected):
            got += c.sock.recv(65536)
        assert got == expected, cut
    # One byte per send: every boundary in one pass.
    c.call("DEL", "split", "h", "q")
    for i in range(len(stream)):
        c.send_raw(stream[i:i + 1])
    got = b""
    while len(got) < len(expected):
        got += c.sock.recv(65536)
    assert got == expected


# ----------------------------------------------------------------------
# Load: many connections, many blocked waiters, random churn
# ----------------------------------------------------------------------

def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _blpop_client(host, port, keys):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(encode_command("BLPOP", *keys, "0"))
    return reader, writer, keys


async def _churn(s, conns=1000, keys_per=10, seconds=3.0):
    """conns clients each blocked in BLPOP on keys_per distinct keys; for
    ``seconds``, drop clients abruptly and reconnect them, serve some for
    real, and check the server answers a bystander throughout."""
    host, port = s.host, s.port
    rng = random.Random(7)
    seq = [0]

    def keys():
        seq[0] += 1
        return ["w:%d:%d" % (seq[0], j) for j in range(keys_per)]

    clients = []
    for start in range(0, conns, 100):
        clients += await asyncio.gather(*[_blpop_client(host, port, keys())
                                          for _ in range(min(100, conns - start))])
    server = s.server
    deadline = time.time() + 20
    while server.blocked_clients < conns and time.time() < deadline:
        await asyncio.sleep(0.02)
    assert server.blocked_clients == conns
    assert sum(len(db.blocking) for db in server.dbs) == conns * keys_per
    r, w = await asyncio.open_connection(host, port)
    served = dropped = 0
    end = time.time() + seconds
    while time.time() < end:
        for i in rng.sample(range(len(clients)), 50):
            clients[i][1].transport.abort()
            dropped += 1
            clients[i] = await _blpop_client(host, port, keys())
        w.write(encode_command("PING"))
        assert await asyncio.wait_for(r.readline(), 5) == b"+PONG\r\n"
        victim = rng.randrange(len(clients))
        rd, wr, ks = clients[victim]
        key = rng.choice(ks)
        w.write(encode_command("RPUSH", key, "job"))
        assert await asyncio.wait_for(r.readline(), 5) == b":1\r\n"
        reply = await asyncio.wait_for(rd.readuntil(b"job\r\n"), 5)
        assert reply == b"*2\r\n$%d\r\n%s\r\n$3\r\njob\r\n" % (len(key), key.encode())
        served += 1
        clients[victim] = await _blpop_client(host, port, keys())
        wr.close()
        await asyncio.sleep(0.005)
    for _, wr, _ in clients:
        wr.transport.abort()
    w.close()
    return served, dropped


def test_load_many_blocked_clients_with_churn(hotkv_server_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    s = hotkv_server_factory(maxclients=5000)
    server = s.server
    asyncio.run(_churn(s, conns=300, keys_per=10, seconds=0.5))   # warm-up round
    _wait_quiet(server)
    gc.collect()
    baseline = _rss()
    served, dropped = asyncio.run(_churn(s, conns=1000, keys_per=10, seconds=3.0))
    _wait_quiet(server)
    gc.collect()
    grown = _rss() - baseline
    print("load: served %d, dropped/reconnected %d, RSS baseline %d MB, grown %+d KB"
          % (served, dropped, baseline >> 20, grown >> 10))
    assert served > 0 and dropped > 0
    # Nothing left behind: no blocked client, no key queue, no stale timeout.
    assert server.blocked_clients == 0
    assert all(not db.blocking for db in server.dbs)
    assert server.blocking_keys_nokey == 0
    c = RawClient(s.host, s.port)
    info = c.call("INFO", "clients")
    assert info.startswith(b"$") and b"blocked_clients:0\r\n" in info, info
    assert c.call("PING") == b"+PONG\r\n"
    # Memory back near where it was after the warm-up round.
    assert grown < 48 * 1024 * 1024, "RSS grew by %d MB" % (grown >> 20)


def _wait_quiet(server, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not server.clients and server.blocked_clients == 0:
            return
        time.sleep(0.05)
    raise AssertionError("clients left: %d, blocked: %d" % (len(server.clients),
                                                           server.blocked_clients))


NON_BULK_FRAMES = [
    b"*1\r\n+0\r\n", b"*2\r\n$3\r\nGET\r\n(12\r\n", b"*1\r\n=5\r\ntxt:a\r\n",
    b"*1\r\n$4\r\nPING\r\n~1\r\n$4\r\nPING\r\n", b"*1\r\n$4\r\nPING\r\n|1\r\n",
    b"*1\r\n$4\r\nPING\r\n%1\r\n", b"*2\r\n$4\r\nECHO\r\n:1\r\n", b"*1\r\n_\r\n",
    b"*1\r\n,1.5\r\n", b"*1\r\n#t\r\n", b"*1\r\n*1\r\n$4\r\nPING\r\n",
    b"*1\r\n$4\r\nPING\r\n>1\r\n$4\r\nPING\r\n",
]


@pytest.mark.parametrize("frame", NON_BULK_FRAMES, ids=repr)
def test_non_bulk_elements_answered_like_valkey(server, ref_server, frame):
    """Found by fuzz_parser.py: hiredis reads simple strings, RESP3 types and
    sets where Redis expects '$' bulks; hotkv must answer as Valkey does."""
    got = []
    for host, port in ((server.host, server.port), (ref_server.host, ref_server.port)):
        c = RawClient(host, port)
        c.send_raw(frame)
        got.append(_read_all(c, 0.3))
        c.close()
    assert got[0] == got[1]


# ----------------------------------------------------------------------
# A handler bug: a reply the encoder cannot write
# ----------------------------------------------------------------------

BAD_REPLY_SERVER = """
import sys, threading, signal
import hotkv
from hotkv.core.registry import command

@command("testbadreply", 1, "readonly")
def testbadreply(c, argv):
    return [b"partial", object()]     # the second element cannot be encoded

srv = hotkv.EmbeddedServer(port=int(sys.argv[1]))
srv.start()
print("ready", flush=True)
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: done.set())
done.wait()
srv.stop()
"""


def test_unencodable_reply_is_an_error_not_silence():
    """A handler returning what RESP cannot say: the client gets an error
    (nothing of the half-written reply) in RESP2 and RESP3, and the server
    and the connection go on.  Before, the client never got a reply."""
    from support import free_port
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", BAD_REPLY_SERVER, str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert b"ready" in proc.stdout.readline()
        c = RawClient("127.0.0.1", port, timeout=10)
        for proto in ("2", "3"):
            c.call("HELLO", proto)
            assert c.call("TESTBADREPLY") == \
                b"-ERR internal error in 'testbadreply': unencodable reply\r\n"
            assert c.call("PING") == b"+PONG\r\n"
        c.close()
    finally:
        proc.terminate()
        proc.wait(10)
