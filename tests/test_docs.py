"""The documentation runs: every fenced code block of README.md and
docs/**/*.md (tests/docs_blocks.py has the conventions, written up for
writers in docs/contributors/docs.md), the site builds with
``mkdocs build --strict``, the settings reference is hotkv's own list, and
every file in examples/ has a test that runs it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import docs_blocks
from docs_blocks import ROOT, Block

BLOCKS = docs_blocks.all_blocks()
RUNNABLE = [b for b in BLOCKS if b.kind in ("python", "pytest", "shell", "conf")]
# A bound for a block that hangs (a worker loop that never ends), not a timing check.
BLOCK_TIMEOUT = 180


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path, port: int) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    env["HOTKV_DOCS_PORT"] = str(port)
    env["HOTKV_DOCS_TMP"] = str(tmp_path / "logs")
    env["HOTKV_DOCS_PIDS"] = str(tmp_path / "pids")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    for name in ("REDIS_URL", "VALKEY_URL", "HOTKV_URL"):
        env.pop(name, None)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "logs").mkdir(exist_ok=True)
    shim = bindir / "hotkv"
    shim.write_text(docs_blocks.SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    if not (bindir / "python").exists():
        (bindir / "python").symlink_to(sys.executable)
    env["PATH"] = str(bindir) + os.pathsep + env["PATH"]
    return env


def _stop_servers(tmp_path):
    pids = tmp_path / "pids"
    if not pids.exists():
        return
    for line in pids.read_text().split():
        pid = int(line)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for line in pids.read_text().split():
        pid = int(line)
        try:                                  # our own children: reap them
            os.waitpid(pid, 0)
        except ChildProcessError:
            # the shim's child, not ours: wait for it to go (bounded)
            for _ in range(600):
                if not _alive(pid):
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """False once pid is gone or a zombie (an orphan whose reaper is slow)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory):
    """The hotkv that a block's port 6379 means (emptied before each block)."""
    import hotkv
    with hotkv.EmbeddedServer(dir=str(tmp_path_factory.mktemp("docs-server"))) as server:
        yield server


def _flush(server):
    import valkey
    client = valkey.Valkey(host=server.host, port=server.port)
    try:
        client.flushall()
        client.config_resetstat()
    finally:
        client.close()


def _ports(block: Block, server) -> dict:
    mapping = {p: _free_port() for p in docs_blocks.PORTS}
    if not (block.kind in ("shell", "conf") and
            (block.kind == "conf" or docs_blocks.starts_server(block.code))):
        mapping["6379"] = server.port
    return mapping


def _run(cmd, block, tmp_path, env, cwd):
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s did not finish: %s\n%s" % (block.id, e.stdout, e.stderr))
    finally:
        _stop_servers(tmp_path)
    return proc


def _describe(block, code, proc) -> str:
    return "%s (%s block) failed, exit %s\n--- code run ---\n%s\n--- stdout ---\n%s\n" \
        "--- stderr ---\n%s" % (block.id, block.kind, proc.returncode, code, proc.stdout,
                                proc.stderr)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_block_runs(block, docs_server, tmp_path):
    _flush(docs_server)
    ports = _ports(block, docs_server)
    code = docs_blocks.substitute_ports(block.code, ports)
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(os.path.join(ROOT, "examples"))
    env = _env(tmp_path, ports["6379"])
    name = re.sub(r"[^A-Za-z0-9]+", "_", block.path)
    if block.kind == "python":
        script = work / ("%s.py" % name)
        script.write_text("\n" * (block.line) + code)
        proc = _run([sys.executable, str(script)], block, tmp_path, env, work)
    elif block.kind == "pytest":
        script = work / ("test_%s.py" % name)
        script.write_text("\n" * (block.line) + code)
        # hotkv's plugin and the async ones its fixtures use; not every installed plugin
        # (hypothesis, celery's...: seconds of imports per block).
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        proc = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                     "-p", "pytest_asyncio.plugin", "-p", "anyio.pytest_plugin",
                     "-p", "hotkv.pytest_plugin", script.name], block, tmp_path, env, work)
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        assert proc.returncode == 0 and " passed" in last, _describe(block, code, proc)
        assert not re.search(r"skipped|xfail|deselected|warnings? ", last), \
            _describe(block, code, proc)
        return
    elif block.kind == "shell":
        script = work / "block.sh"
        script.write_text(code)
        proc = _run(["bash", "-e", "-o", "pipefail", str(script)], block, tmp_path, env, work)
    else:                                     # conf: hotkv must start with it and answer
        conf = work / "block.conf"
        conf.write_text(code)
        has_port = re.search(r"^\s*port\s+(\d+)", code, re.M)
        port = has_port.group(1) if has_port else str(ports["6379"])
        extra = "" if has_port else " --port %s" % port
        shell = "hotkv serve block.conf%s\nhotkv cli -p %s PING\n" % (extra, port)
        (work / "block.sh").write_text(shell)
        proc = _run(["bash", "-e", "-o", "pipefail", "block.sh"], block, tmp_path, env, work)
        assert proc.stdout.strip() == "PONG", _describe(block, code, proc)
    assert proc.returncode == 0, _describe(block, code, proc)


def test_every_block_runs_or_says_why():
    """A block with no runner and no <!-- not-run: REASON --> comment fails."""
    bad = ["%s: ```%s has no runner: tag it python/sh/conf/text/console, or put "
           "<!-- not-run: REASON --> on the line before it" % (b.id, b.lang or "(no tag)")
           for b in BLOCKS if b.kind == "unknown"]
    bad += ["%s: <!-- not-run: --> needs a reason" % b.id
            for b in BLOCKS if b.not_run is not None and not b.not_run.strip()]
    assert not bad, "\n".join(bad)
    assert len(RUNNABLE) >= 30, "the runner found only %d runnable blocks" % len(RUNNABLE)


def test_the_parser_finds_what_the_runner_must_fail(tmp_path, monkeypatch):
    """The conventions themselves: an untagged block and an unknown tag have no
    runner, a marker with a reason silences one, a test function makes a
    pytest block."""
    page = tmp_path / "page.md"
    page.write_text("a\n\n```\nx\n```\n\n```js\nx()\n```\n\n<!-- not-run: needs node -->\n"
                    "```js\nx()\n```\n\n```python\ndef test_x():\n    pass\n```\n"
                    "    ```sh\n    hotkv cli PING\n    ```\n")
    monkeypatch.setattr(docs_blocks, "ROOT", str(tmp_path))
    kinds = [(b.line, b.kind) for b in docs_blocks.blocks_of(str(page))]
    assert kinds == [(3, "unknown"), (7, "unknown"), (12, "not-run"), (16, "pytest"),
                     (20, "shell")]


def test_an_undefined_name_fails(docs_server, tmp_path):
    """What the issue asked for: a snippet calling an undefined name fails the run."""
    block = Block("docs/planted.md", 10, "python", "import json\nsend_email(json.dumps(1))\n",
                  None)
    with pytest.raises(AssertionError, match="NameError: name .send_email."):
        test_block_runs(block, docs_server, tmp_path)
    assert _undefined_names([block]), "the static check missed send_email"


def _undefined_names(blocks) -> list[str]:
    """pyflakes' undefined names (F821/F822/F823) in python blocks, also in code
    paths the run does not reach (an except branch, an uncalled function)."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is missing (it is in the test extra)")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        names = {}
        for i, b in enumerate(blocks):
            path = os.path.join(d, "b%03d.py" % i)
            with open(path, "w") as f:
                f.write(b.source_for_python())
            names[path] = b
        proc = subprocess.run([ruff, "check", "--isolated", "--no-cache", "--select",
                               "F821,F822,F823", "--output-format", "concise", d],
                              capture_output=True, text=True)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr   # 1: findings
        out = []
        for line in proc.stdout.splitlines():
            path = line.split(":", 1)[0]
            if path in names:
                out.append(line.replace(path, names[path].path))
        return out


def test_python_blocks_name_nothing_undefined():
    blocks = [b for b in BLOCKS if b.lang in docs_blocks.PYTHON_TAGS and b.not_run is None]
    problems = _undefined_names(blocks)
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------
# The site, the settings reference, the README's promises, examples/
# ----------------------------------------------------------------------

def test_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: a broken link, anchor, or a page missing from the
    nav fails (mkdocs.yml's validation settings make them warnings)."""
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.fail("mkdocs is missing: pip install -e '.[test]' (or '.[docs]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-f", os.path.join(ROOT, "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "search" / "search_index.json").exists()


def test_settings_reference_is_hotkvs_own_list():
    """docs/reference/settings.md's table is ``hotkv serve --help-config``'s, so it
    cannot drift: regenerate with ``python tests/docs_settings.py --write``."""
    import docs_settings
    expected = docs_settings.table()
    current = docs_settings.current()
    names = docs_settings.setting_names()
    assert len(names) > 200
    missing = [n for n in names if "`%s`" % n not in current]
    assert not missing, "settings missing from the page: %s" % missing
    assert current == expected, ("docs/reference/settings.md is out of date: "
                                 "python tests/docs_settings.py --write")


def test_readme_is_a_landing_page_with_the_two_commands():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert len(readme.splitlines()) <= 300
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = [ln.strip() for ln in f if re.match(r"(pip install|ruff|pytest)\b", ln.strip())]
    assert ci[-1] == "pytest", ci
    test_command = " && ".join(ci)
    assert test_command in readme, "README must hold .ci/run's command: " + test_command
    assert re.search(r"^pip install \S+ && hotkv serve", readme, re.M), \
        "README's install-and-serve one-liner"
    assert "git clone" in readme
    for target in re.findall(r"\]\(((?!https?:|#)[^)#]+)", readme):
        assert os.path.exists(os.path.join(ROOT, target)), "README links to missing " + target


# Each file of examples/ and the test that runs it (those tests live beside this one).
EXAMPLE_RUNNERS = {
    "migrate_to_valkey.py": "test_examples_migrate.py",
    "streams_queue.py": "test_examples_streams.py",
    "hotkv.service": "test_config_parity.py",
}


def test_every_example_has_a_test_that_runs_it():
    examples = sorted(os.listdir(os.path.join(ROOT, "examples")))
    unrun = [e for e in examples if e not in EXAMPLE_RUNNERS]
    assert not unrun, ("examples/ files with no test that runs them (add one and list it "
                       "in EXAMPLE_RUNNERS): %s" % unrun)
    for example, test_file in EXAMPLE_RUNNERS.items():
        if example not in examples:
            continue
        with open(os.path.join(ROOT, "tests", test_file)) as f:
            text = f.read()
        assert re.search(r'"examples",\s*"%s"' % re.escape(example), text), \
            "%s does not run examples/%s" % (test_file, example)
