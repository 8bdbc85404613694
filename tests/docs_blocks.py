"""The code blocks of README.md and docs/**/*.md, and how each one runs
(tests/test_docs.py; the conventions are documented for writers in
docs/contributors/docs.md -- keep the two in step).

A fenced block's language tag says what it is:

* ``python`` -- run with this checkout's Python in a fresh process; a block
  defining ``def test_...`` functions is a pytest module and is run by
  pytest (every test must pass, none skipped);
* ``sh`` / ``bash`` / ``shell`` -- run by ``bash -e`` in a temporary
  directory holding ``examples/`` (a link to the repository's), with
  ``hotkv`` on PATH being this checkout's (``python -m hotkv``) and
  ``python`` this interpreter;
* ``conf`` -- a config file: ``hotkv serve FILE`` must start with it and
  answer PING;
* ``text`` / ``console`` -- output or a transcript: shown, not run.

Any other tag, or none, fails unless the line before the fence is an HTML
comment ``<!-- not-run: REASON -->`` (REASON is required); the same comment
also keeps a python/sh/conf block from running.

Ports: in a block that runs, the literal port numbers in ``PORTS`` are
replaced by ports the runner chose (``6379`` by the port of a hotkv the
runner started for the block, unless the block starts ``hotkv serve``
itself; each other number by a free port).  In shell blocks ``hotkv serve``
returns once the server accepts connections (its log is printed if it
exits first) and is stopped (SIGTERM) when the block ends; ``hotkv cli`` /
``hotkv queues`` without a port or URL are pointed at the block's 6379.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PYTHON_TAGS = {"python", "py"}
SHELL_TAGS = {"sh", "bash", "shell"}
CONF_TAGS = {"conf"}
SHOWN_TAGS = {"text", "console"}
# The port numbers substituted in blocks that run (6379: the block's hotkv).
PORTS = ("6379", "6380", "7000", "7001", "8080")

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
PORT_RE = re.compile(r"(?<![\d.])(%s)(?!\d)" % "|".join(PORTS))


@dataclasses.dataclass
class Block:
    path: str            # relative to the repository root
    line: int            # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked <!-- not-run: ... -->

    @property
    def id(self) -> str:
        return "%s:%d" % (self.path, self.line)

    @property
    def kind(self) -> str:
        """python, pytest, shell, conf, shown, not-run or unknown."""
        if self.not_run is not None:
            return "not-run"
        if self.lang in PYTHON_TAGS:
            if re.search(r"^(async\s+)?def test_", self.code, re.M):
                return "pytest"
            return "python"
        if self.lang in SHELL_TAGS:
            return "shell"
        if self.lang in CONF_TAGS:
            return "conf"
        if self.lang in SHOWN_TAGS:
            return "shown"
        return "unknown"

    def source_for_python(self) -> str:
        """The code, preceded by blank lines so tracebacks give the .md's line numbers."""
        return "\n" * self.line + self.code


def markdown_files() -> list[str]:
    files = [os.path.join(ROOT, "README.md")]
    files += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return files


def blocks_of(path: str) -> list[Block]:
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m["indent"]), m["fence"], m["info"].lower()
        start = i
        body = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            i += 1
        i += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        not_run = None
        if prev >= 0:
            nm = NOT_RUN.match(lines[prev])
            if nm:
                not_run = nm["reason"]
        blocks.append(Block(rel, start + 1, lang, "\n".join(body) + "\n", not_run))
    return blocks


def all_blocks() -> list[Block]:
    out = []
    for path in markdown_files():
        out.extend(blocks_of(path))
    return out


def substitute_ports(code: str, mapping: dict) -> str:
    return PORT_RE.sub(lambda m: str(mapping[m.group(1)]), code)


def starts_server(code: str) -> bool:
    return re.search(r"(^|[\s;&|(])hotkv\s+serve\b", code) is not None


# The `hotkv` on PATH in shell blocks: this checkout's, with `serve` run in
# the background until it is ready, and the block's port as the default.
SHIM = r'''#!{python}
import os, subprocess, sys, time
import socket
args = sys.argv[1:]
port = os.environ["HOTKV_DOCS_PORT"]


def answers(listen):
    try:
        with socket.create_connection(("127.0.0.1", int(listen)), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH", b"-ERR"))
    except (OSError, ValueError, TypeError):
        return False


cmd = [sys.executable, "-m", "hotkv"]
info = {{"--help", "-h", "--help-config", "--version", "-v"}}
if args[:1] == ["serve"] and not info.intersection(args):
    has_file = len(args) > 1 and not args[1].startswith("-")
    if "--port" not in args and not has_file:
        args += ["--port", port]
    logname = os.path.join(os.environ["HOTKV_DOCS_TMP"], "serve-%d.log" % len(os.listdir(
        os.environ["HOTKV_DOCS_TMP"])))
    log = open(logname, "wb")
    proc = subprocess.Popen(cmd + args, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    with open(os.environ["HOTKV_DOCS_PIDS"], "a") as f:
        f.write("%d\n" % proc.pid)
    # Ready: the log says so, or (a quieter loglevel) the port answers PING.
    listen = args[args.index("--port") + 1] if "--port" in args else None
    if listen is None and has_file:
        with open(args[1]) as f:
            found = [ln.split()[1] for ln in f if ln.split()[:1] == ["port"]]
        listen = found[-1] if found else "6379"
    deadline = time.monotonic() + 60      # a bound for a server that hangs, not a timing check
    while True:
        with open(logname, "rb") as f:
            text = f.read()
        if b"Ready to accept connections" in text or answers(listen):
            sys.exit(0)
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.stderr.write(text.decode(errors="replace"))
            sys.stderr.write("hotkv serve did not become ready (exit %r)\n" % proc.poll())
            sys.exit(1)
        time.sleep(0.05)
if args[:1] == ["cli"] and not {{"-p", "-u", "--port"}}.intersection(args):
    args[1:1] = ["-p", port]
if args[:1] == ["queues"] and "--url" not in args:
    args[1:1] = ["--url", "redis://127.0.0.1:%s" % port]
os.execv(sys.executable, cmd + args)
'''
