"""The first hour of a user (issue 31): what `hotkv serve` says must be true and helpful.

Each test here failed on the code before the change it names: the AOF loader's error
count (hotkv/persistence/aof/loader.py), the inert labels
(hotkv/core/config.py), --help-config's save
default, the "listening" line inside a logfmt log, config-file and option errors with
the line and a did-you-mean (hotkv/tools/cli.py), `hotkv serve --help` and `hotkv queues
--help`, the truncated-AOF hint, CONFIG GET dir, and a replica's role in its log.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

from hotkv.core.config import PARAMS
from support import RawClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOTKV = os.path.join(ROOT, "hotkv")


def _serve(*args, cwd, stderr=subprocess.PIPE):
    return subprocess.Popen([sys.executable, "-m", "hotkv.tools.cli", "serve", *args],
                            stdout=subprocess.PIPE, stderr=stderr, cwd=cwd, text=True)


def _ready(proc, wait=60) -> str:
    """The next line of proc's stdout, read from the pipe with os.read and
    kept in our own buffer (select() sees the pipe only: with the text
    wrapper's readline, a second line that came in the same read sat in the
    wrapper while select waited for it -- one loaded full run failed so)."""
    buf = getattr(proc, "_lines", b"")
    deadline = time.time() + wait
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
        assert ready, "no output"
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    line, nl, rest = buf.partition(b"\n")
    proc._lines = rest
    return (line + nl).decode()


def _stop(proc) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    left = getattr(proc, "_lines", b"").decode()    # what _ready read past its line
    return left + (out or "") + (err or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _resp(*argv: bytes) -> bytes:
    out = b"*%d\r\n" % len(argv)
    for a in argv:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


# -- the AOF's own errors ------------------------------------------------------------

def test_aof_error_count_is_the_files_own(tmp_path):
    """One command of the file fails (INCR of a non-number); a client polling PING gets
    -LOADING meanwhile.  Before: the count was the server-wide error counter's, so it
    included every -LOADING reply."""
    body = bytearray(_resp(b"SET", b"word", b"abc") + _resp(b"INCR", b"word"))
    body += b"".join(_resp(b"SET", b"k%d" % i, b"v") for i in range(300_000))
    (tmp_path / "appendonly.aof").write_bytes(bytes(body))
    port = _free_port()
    proc = _serve("--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes",
                  "--save", "", cwd=tmp_path)
    loading = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                    while True:
                        s.sendall(b"PING\r\n")
                        reply = s.recv(100)
                        if reply.startswith(b"-LOADING"):
                            loading += 1
                            continue
                        break
                    if reply == b"+PONG\r\n":
                        break
            except OSError:
                time.sleep(0.01)
    finally:
        log = _stop(proc)
    assert loading >= 1, "the load ended before the poller got in: make the file bigger"
    counts = re.findall(r"(\d+) commands of the AOF replied with an error", log)
    assert counts == ["1"], (loading, counts)


# -- inert means not read --------------------------------------------------------------

# Where an inert setting's name is written without being read: its declaration, the
# hidden settings of CONFIG GET, the redaction of passwords, advice text, the reason
# shutdown-timeout is inert, a value /metrics reports.
NOT_READS = {
    ("persistence/aof/writer.py", "aof-rewrite-incremental-fsync"),
    ("persistence/aof/writer.py", "aof-timestamp-enabled"),
    ("commands/config_cmds.py", "close-on-oom"),
    ("protocol/replies.py", "tls-key-file-pass"),
    ("protocol/replies.py", "tls-client-key-file-pass"),
    # hotkv cli keeps CONFIG SET of these out of its history (valkey-cli's isSensitiveCommand)
    ("tools/cli_repl.py", "tls-key-file-pass"),
    ("tools/cli_repl.py", "tls-client-key-file-pass"),
    ("commands/latency.py", "no-appendfsync-on-rewrite"),
    ("tools/serve_args.py", "shutdown-timeout"),
    # /metrics reports io-threads as redis_exporter's redis_config_io_threads:
    # shown, not acted on
    ("http/metrics.py", "io-threads"),
    ("http/state.py", "io-threads"),
}


def test_no_setting_marked_inert_is_read():
    """A setting marked inert (startup log "no effect in hotkv", --help-config's
    "(inert)") must not be named by any module of hotkv/ but the config table's.
    Before: repl-diskless-sync, repl-diskless-sync-delay and 28 more were read."""
    sources = {}
    for root, _, files in os.walk(HOTKV):
        for f in files:
            path = os.path.join(root, f)
            rel = os.path.relpath(path, HOTKV).replace(os.sep, "/")
            if f.endswith(".py") and rel not in ("core/config.py", "core/config_table.py"):
                with open(path) as fh:
                    sources[rel] = fh.read()
    read = []
    for p in PARAMS.values():
        if not p.inert:
            continue
        for name in (p.name, *p.aliases):
            quoted = re.compile(r"""["']%s["']""" % re.escape(name))
            for rel, text in sources.items():
                if (rel, name) not in NOT_READS and quoted.search(text):
                    read.append((p.name, rel))
    assert read == []


def test_help_config_shows_serves_save_default_and_no_stale_inert():
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", "--help-config"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln and not ln.startswith(" ")}
    assert lines["save"].split(None, 1)[1].strip() == "3600 1 300 100 60 10000"
    for name in ("repl-diskless-sync", "repl-diskless-sync-delay"):
        assert "(inert)" not in lines[name]
    assert "has no replication" not in out


# -- the "listening" line --------------------------------------------------------------

def test_listening_line_in_logfmt_when_stdout_is_the_log(tmp_path):
    """`2>&1` with log-format logfmt: every line is logfmt, the listening one too."""
    proc = _serve("--port", "0", "--save", "", "--log-format", "logfmt", cwd=tmp_path,
                  stderr=subprocess.STDOUT)
    lines = []
    try:
        while True:
            line = _ready(proc)
            assert line, lines
            lines.append(line)
            if "listening on" in line:
                break
        port = int(re.search(r"listening on [\d.]+:(\d+)", line).group(1))
        c = RawClient("127.0.0.1", port)
        assert c.call("PING") == b"+PONG\r\n"
        c.close()
    finally:
        lines += _stop(proc).splitlines(True)
    for ln in lines:   # (the signal handler's raw line is Valkey's in every format)
        assert ln.startswith("pid=") or ":signal-handler (" in ln, lines
    assert any('message="hotkv ' in ln and "listening on 127.0.0.1:" in ln for ln in lines)


def test_listening_line_stays_plain_on_its_own_stdout(tmp_path):
    """stdout apart from the log (tests/jobcount.py's HotkvProcess, test_cli): the bare
    line, as before."""
    proc = _serve("--port", "0", "--save", "", "--log-format", "logfmt", cwd=tmp_path)
    try:
        line = _ready(proc)
    finally:
        _stop(proc)
    assert re.match(r"^hotkv \S+ listening on 127\.0\.0\.1:\d+\n$", line), line


# -- config errors ---------------------------------------------------------------------

def test_config_file_error_names_the_line_and_a_guess(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("port 0\n# a comment\nmaxmemroy 100mb\n")
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", str(conf)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2
    assert "*** FATAL CONFIG FILE ERROR" in out.stderr
    assert "Reading the configuration file %s, at line 3" % conf in out.stderr
    assert ">>> 'maxmemroy 100mb'" in out.stderr
    assert "unknown setting 'maxmemroy' (did you mean 'maxmemory'?)" in out.stderr


def test_config_file_bad_value_names_the_line(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("port 0\nsave 60 1\nmaxmemory 12xb\n")
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", str(conf)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2
    assert "at line 3" in out.stderr and ">>> 'maxmemory 12xb'" in out.stderr
    assert "invalid value '12xb' for 'maxmemory'" in out.stderr


def test_misspelt_option_gets_a_guess(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", "--prot", "7000"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2
    assert "unknown setting 'prot' (did you mean --port?)" in out.stderr
    assert "--help-config" in out.stderr


# -- help ------------------------------------------------------------------------------

def test_serve_help_mentions_help_config():
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", "--help"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and "--help-config" in out.stdout


def test_queues_help_without_rich():
    code = ("import sys; sys.modules['rich'] = None; from hotkv.tools.queues_tui import main; "
            "sys.exit(main(['--help']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "hotkv queues" in out.stdout and "needs rich" not in out.stderr


# -- the truncated AOF, CONFIG GET dir, a replica's log -----------------------------------

def test_truncated_aof_points_to_hotkv_check_aof(tmp_path):
    (tmp_path / "appendonly.aof").write_bytes(_resp(b"SET", b"a", b"1") + b"*3\r\n$3\r\nSET")
    out = subprocess.run([sys.executable, "-m", "hotkv.tools.cli", "serve", "--port", "0",
                          "--appendonly", "yes", "--aof-load-truncated", "no", "--save", ""],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 1
    assert "hotkv check-aof --fix" in out.stderr, out.stderr


def test_config_get_dir_is_absolute(tmp_path):
    proc = _serve("--port", "0", "--save", "", cwd=tmp_path)
    try:
        port = int(_ready(proc).rsplit(":", 1)[1])
        c = RawClient("127.0.0.1", port)
        got = c.call("CONFIG", "GET", "dir")
        c.close()
    finally:
        _stop(proc)
    want = os.path.realpath(str(tmp_path)).encode()
    assert got == b"*2\r\n$3\r\ndir\r\n$%d\r\n%s\r\n" % (len(want), want)


def test_replica_logs_with_role_s(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = _serve("--port", "0", "--save", "", cwd=tmp_path / "p")
    log = tmp_path / "replica.log"
    replica = _serve("--port", "0", "--save", "", "--logfile", str(log), cwd=tmp_path / "r")
    try:
        pport = int(_ready(primary).rsplit(":", 1)[1])
        rport = int(_ready(replica).rsplit(":", 1)[1])
        c = RawClient("127.0.0.1", rport)
        assert c.call("REPLICAOF", "127.0.0.1", str(pport)) == b"+OK\r\n"
        deadline = time.monotonic() + 30
        while b"master_link_status:up" not in c.call("INFO", "replication"):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        c.close()
    finally:
        _stop(replica)
        _stop(primary)
    lines = log.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if "REPLICAOF 127.0.0.1:" in ln)
    roles = {ln.split()[0].split(":")[1] for ln in lines[start:] if ":signal-handler" not in ln}
    before = {ln.split()[0].split(":")[1] for ln in lines[:start]}
    assert before == {"M"} and roles == {"S"}, lines


def test_the_cli_loads_no_server_module():
    # `hotkv cli` and `hotkv --version` start without the server: importing
    # hotkv.server registers every command, about a second of a CLI's start.
    code = ("import sys; from hotkv.tools import cli; import hotkv.tools.cli_tool; "
            "cli.main(['--version']); "
            "print(sorted(m for m in sys.modules if m in ('hotkv.server', 'hotkv.commands', "
            "'hotkv.core.dispatch', 'hotkv.core.config')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["hotkv 0.1.0", "[]"], out.stdout
    # and the package still makes a full server on first use
    code = "import hotkv; print(len(hotkv.Server().command_table) > 200)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr
