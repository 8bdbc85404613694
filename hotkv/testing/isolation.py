"""Putting a shared test server back as it started: ``Baseline``.

The pytest fixtures share one server per session (``hotkv_server``) and
empty its keyspace before each test; the server-wide state a test can change
without a key survives FLUSHALL.  ``Baseline.take(server)`` records that
state once (the server as started); ``baseline.restore(server)`` puts back,
after each test, what changed:

* every configuration setting (CONFIG SET's: notify-keyspace-events,
  maxmemory-policy, requirepass...), set back with CONFIG SET so the
  setting's listener runs as it did on the way in;
* the ACL users (ACL SETUSER / DELUSER: users added are deleted -- their
  clients disconnected, as ACL DELUSER does --, changed ones set back to
  their rules) and the ACL LOG (emptied);
* the FUNCTION libraries (flushed, the baseline's restored) and the script
  cache (SCRIPT LOAD / EVAL's: flushed, the baseline's loaded again);
* client-side tracking: a client still connected with CLIENT TRACKING on is
  switched off (as CLIENT TRACKING OFF) and the tracking table emptied.

Not reset: the statistics (INFO's counters, SLOWLOG, LATENCY), connected
clients themselves, and anything a restart or a stop ends anyway.

Invariants: both run on the server's loop thread (``on_loop``); the common
case -- nothing changed -- reads and compares only (no command runs), and
each change goes through the dispatcher as a server-side client's command
(``snapshot.run_commands``) so the server reacts as to a client's.
"""

from __future__ import annotations

from ..core.config import PARAMS
from . import on_loop
from .snapshot import SeedError, run_commands


def _acl_rules(describe: bytes) -> list:
    """ACL LIST's rules as ACL SETUSER arguments (a selector "(...)" is one)."""
    out, depth, cur = [], 0, []
    for word in describe.split(b" "):
        if depth == 0 and not word.startswith(b"("):
            out.append(word)
            continue
        cur.append(word)
        depth += word.count(b"(") - word.count(b")")
        if depth <= 0:
            out.append(b" ".join(cur))
            cur, depth = [], 0
    return [w for w in out if w]


def _users(server) -> dict:
    return {name: user.describe() for name, user in server.acl.users.items()}


def _libraries(server):
    reg = server.functions
    return reg if reg is not None and reg.libraries else None


def _scripts(server) -> dict:
    eng = server.scripting
    return {} if eng is None else {sha: s.body for sha, s in eng.scripts.items()}


class Baseline:
    """The server-wide state of a server as it started (see the module docstring)."""

    def __init__(self, config: dict, users: dict, functions: bytes, scripts: dict):
        self.config = config
        self.users = users
        self.functions = functions
        self.scripts = scripts

    @classmethod
    def take(cls, server) -> "Baseline":
        def take():
            libs = _libraries(server)
            return cls(dict(server.config.values), _users(server),
                       libs.dump() if libs is not None else b"", _scripts(server))
        return on_loop(server, take)

    def restore(self, server) -> list:
        """Put back what changed; the list of what was reset (for a report)."""
        return on_loop(server, lambda: self._restore(server))

    def _restore(self, server) -> list:
        done: list = []
        cmds: list = []
        self._config(server, cmds, done)
        self._acl(server, cmds, done)
        libs = _libraries(server)
        if libs is not None and libs.dump() != self.functions or (
                libs is None and self.functions):
            cmds.append([b"FUNCTION", b"FLUSH", b"SYNC"])
            if self.functions:
                cmds.append([b"FUNCTION", b"RESTORE", self.functions])
            done.append("functions")
        if _scripts(server).keys() != self.scripts.keys():
            cmds.append([b"SCRIPT", b"FLUSH", b"SYNC"])
            cmds += [[b"SCRIPT", b"LOAD", body] for body in self.scripts.values()]
            done.append("scripts")
        errors = []
        for argv in cmds:
            try:
                run_commands(server, [argv])
            except SeedError as e:     # reported, the rest still reset
                errors.append(str(e))
        self._tracking(server, done)
        if errors:
            raise RuntimeError("hotkv could not reset the shared server after the test: %s"
                               % "; ".join(errors))
        return done

    def _config(self, server, cmds, done):
        values = server.config.values
        for name, base in self.config.items():
            if values.get(name) != base:
                p = PARAMS.get(name)
                if p is None or not p.mutable:
                    continue
                text = p.format(base)
                cmds.append([b"CONFIG", b"SET", name.encode(),
                             text.encode() if isinstance(text, str) else text])
                done.append("config " + name)

    def _acl(self, server, cmds, done):
        users = _users(server)
        if users != self.users:
            gone = [n for n in users if n not in self.users]
            if gone:
                cmds.append([b"ACL", b"DELUSER"] + gone)
            for name, rules in self.users.items():
                if users.get(name) != rules:
                    cmds.append([b"ACL", b"SETUSER", name, b"reset"] + _acl_rules(rules))
            done.append("acl users")
        if server.acl.log:
            cmds.append([b"ACL", b"LOG", b"RESET"])
            done.append("acl log")

    def _tracking(self, server, done):
        tracking = server.tracking
        if not tracking.clients and not tracking.table:
            return
        for client in list(server.clients.values()):
            if client.tracking:
                tracking.disable(client)
        if not tracking.clients:
            tracking.table.clear()
            tracking.total_items = 0
        done.append("tracking")


__all__ = ["Baseline"]
