"""Faults on demand: make a real hotkv fail the way a real Redis fails, from a test.

``server.faults`` (an ``EmbeddedServer``'s, or ``faults_of(hotkv_server)``) sets:

* per-command faults, each targeted by command name(s), a key glob (any key
  of the command matches), a client-name glob (CLIENT SETNAME) and the Nth
  matching call, firing once (``nth``), ``times`` times, or on every match:

  - ``error(...)``: the command does not run and replies the given error
    (``message="LOADING Redis is loading the dataset in memory"``); counted
    as Valkey counts a failed command (``errorstats``, ``failed_calls``);
  - ``delay(seconds, ...)``: the client's reply is held back ``seconds``
    (``at="reply"``: the command runs at once, its reply waits) or the
    command itself waits before it runs (``at="command"``); the client's
    later commands wait behind it, other clients are served meanwhile (real
    seconds: the virtual clock, hotkv.core.clock, does not move a delay);
  - ``drop(...)``: the connection is closed before the command runs
    (``when="before"``) or after it ran but before its reply is sent
    (``when="after"``: "EXEC applied, the client never heard").  Replies to
    the commands before it in the same pipeline are sent first.

  Each returns a ``Fault``: a context manager (removed on exit), with
  ``remove()``, ``matched`` (matching calls seen) and ``fired``.

  A command is named as the server knows it ("GET", "client|setname" or
  "CLIENT SETNAME" for a subcommand); a name it does not know ("LPSUH") is
  refused with ``ValueError``.  A fault matches the command the client
  *sends*, which is not always the client method's name: redis-py's and
  valkey-py's ``incr(k)`` send ``INCRBY k 1`` and ``decr(k)`` ``DECRBY k 1``,
  so set the fault on INCRBY / DECRBY (``SENT_AS`` lists these).  The
  pytest fixtures warn (``UnmatchedFaultWarning``) at the end of a test in
  which a fault never fired (``Faults.unfired()``), naming such a case.  Removing a
  delay hands the replies it holds over at once (a test ends a 60 s delay
  when it has seen what it wanted, without waiting for it).
* server-wide: ``pause()`` (no command runs until it ends: Valkey's CLIENT
  PAUSE ALL, so CLIENT UNPAUSE ends it too), ``refuse_connections()``
  (new connections are reset at once; open ones stay), ``drop_connections()``
  (every open connection is closed now), ``oom()`` / ``fill_memory()`` (the
  server acts as if used memory were over ``maxmemory``: commands that may
  add memory get Valkey's ``-OOM command not allowed when used memory >
  'maxmemory'.`` through the real maxmemory check; reads and deletes run;
  nothing is evicted: maxmemory-policy reads noeviction meanwhile),
  each a context manager or ended by ``.end()``; and ``restart(keep_data=True)``.
* ``clear()`` ends everything above; the pytest fixtures call it after each test.

What a per-command fault sees: the commands a client sends (a pipeline's
each, MULTI's queued ones when EXEC runs them -- an ``error`` there becomes
that command's entry in EXEC's reply, as a runtime error would), not the
commands a script calls, and not the re-run of a blocked command when it is
served (it was matched when it arrived), nor what the server runs itself (the
AOF replayed by DEBUG LOADAOF, a replica's stream from its primary).
``delay`` and ``drop`` act on what the client sent only (EXEC as a whole,
never a command inside it).  A fault on EXEC itself discards the
transaction, as an aborted EXEC does.

``restart(keep_data=True)``: stop and start on the same port (every client is
disconnected).  With ``appendonly`` on or save points set the new server
loads what the old one wrote at shutdown (a real restart); without
persistence the keyspace is carried over as an RDB image in memory.
``keep_data=False`` starts empty: FLUSHALL is the new server's first command
(run as its own client), so the AOF and a save say empty too; no file is
deleted.  Faults, the journal and CONFIG SET changes do not survive a
restart (a new server object); settings given to ``EmbeddedServer`` do.

Invariants: the rules are read by the dispatcher's hook on the loop thread
and replaced (never changed in place) there, through ``hotkv.testing.on_loop``;
with no rule set ``server.test_hooks`` carries no fault check at all; a held
client is marked blocked with a key-less waiter (``blocking.block_postponed``,
as CLIENT PAUSE's), so CLIENT LIST shows it and its later commands queue
behind, and it is released by a timer on the loop, never by sleeping.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Literal, Union

from ..core import blocking
from ..core.blocking import BLOCKED
from ..core.multi import discard_transaction
from ..core.pause import PAUSED, pause_clients, unpause_clients
from ..core.registry import COMMANDS
from ..core.stats import count_call
from ..persistence.rdbfile import install as put, read_bytes, write_dataset
from ..protocol.errors import CommandError
from ..protocol.resp import encode, encode_error
from ..protocol.util import compile_glob
from . import install_hooks, on_loop
from .snapshot import run_commands

if TYPE_CHECKING:
    from ..clients.client import Client
    from ..core.registry import Command
    from ..server import Server

# A fault's command(s): "GET", "client|setname", "CLIENT SETNAME", or several.
Commands = Union[str, bytes, Iterable[Union[str, bytes]], None]
# A key or client-name glob.
Glob = Union[str, bytes, None]
# A command handler as the dispatcher calls it, and what a fault puts in its place.
Handler = Callable[..., Any]

_FOREVER_MS = 1 << 62


def faults_of(server: Server) -> Faults:
    """The ``Faults`` of a hotkv ``Server`` (made on first use)."""
    faults = server.faults
    if faults is None:
        faults = server.faults = Faults(server)
    return faults


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


# redis-py / valkey-py methods that send another command than their name:
# a fault set on the name never sees them (the teardown warning says so).
SENT_AS = {"incr": "INCRBY key 1", "decr": "DECRBY key 1"}


class UnmatchedFaultWarning(UserWarning):
    """A fault set in a test never fired (the pytest fixtures warn at teardown)."""


def _command_name(name: str | bytes) -> str:
    """A command name as the faults match it ("get", "client|setname"); a
    name the server does not know is refused (a typo would never fire)."""
    text = (name.decode() if isinstance(name, (bytes, bytearray)) else str(name)).lower()
    text = "|".join(text.split()) if " " in text.strip() else text.strip()
    top, _, sub = text.partition("|")
    cmd = COMMANDS.get(top)
    if cmd is None:
        import difflib
        close = difflib.get_close_matches(top, COMMANDS, 3)
        raise ValueError("unknown command %r: a fault on it would never fire%s" % (
            name, " (did you mean %s?)" % ", ".join(c.upper() for c in close) if close else ""))
    if sub and (cmd.subcommands is None or sub.encode() not in cmd.subcommands):
        known = sorted({c.name for c in (cmd.subcommands or {}).values()})
        raise ValueError("unknown subcommand %r of %s%s" % (
            name, top.upper(), ": %s has %s" % (top.upper(), ", ".join(known))
            if known else ": it has no subcommands"))
    return text


def unmatched_report(fault: Fault) -> str:
    """Why a fault never fired, for the teardown warning."""
    if fault.matched:
        why = "matched %d call(s) but its nth=%d never came" % (fault.matched, fault.first)
    else:
        why = "no command matched it"
        hints = ["%s() sends %s" % (c, SENT_AS[c]) for c in sorted(fault.commands or ())
                 if c in SENT_AS]
        if hints:
            why += " (redis-py's %s: set the fault on that command)" % "; ".join(hints)
    return "%r never fired: %s" % (fault, why)


class Fault:
    """One per-command fault: what it matches, what it does, how often."""

    commands: frozenset[str] | None
    keys: bytes | None
    client: bytes | None
    nth: int | None
    times: int | None
    first: int
    matched: int
    fired: int
    action: dict[str, Any]

    def __init__(self, faults: Faults, kind: str, command: Commands, keys: Glob, client: Glob,
                 nth: int | None, times: int | None, **action: Any) -> None:
        self._faults = faults
        self.kind = kind
        if command is None:
            self.commands = None
        else:
            names = [command] if isinstance(command, (str, bytes)) else list(command)
            self.commands = frozenset(_command_name(n) for n in names)
        self.keys = None if keys is None else _as_bytes(keys)
        self._key_match = None if keys is None else compile_glob(self.keys, exact=True)
        self.client = None if client is None else _as_bytes(client)
        self._client_match = None if client is None else compile_glob(self.client, exact=True)
        if nth is not None and nth < 1:
            raise ValueError("nth counts from 1")
        if times is not None and times < 0:
            raise ValueError("times must be >= 0")
        self.nth = nth
        # nth alone fires once; times alone from the first match; neither: every match.
        self.times = times if times is not None else (1 if nth is not None else None)
        self.first = nth or 1
        self.matched = 0
        self.fired = 0
        self.action = action

    # -- matching (loop thread) ---------------------------------------------
    def matches(self, client: Client, cmd: Command, argv: list[bytes]) -> bool:
        if self.commands is not None:
            name = cmd.name
            if name not in self.commands and not (
                    "|" in name and name.split("|", 1)[0] in self.commands):
                return False
        if self._client_match is not None and not self._client_match(client.name):
            return False
        if self._key_match is not None:
            match = self._key_match
            for i in cmd.key_indexes(argv):
                if i < len(argv) and match(argv[i]):
                    break
            else:
                return False
        return True

    @property
    def active(self) -> bool:
        """Still set, and still to fire."""
        return self in self._faults.rules and (self.times is None or self.fired < self.times)

    def remove(self) -> None:
        self._faults.remove(self)

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        target = []
        if self.commands:
            target.append("command=%s" % "|".join(sorted(self.commands)))
        if self.keys is not None:
            target.append("keys=%r" % self.keys)
        if self.client is not None:
            target.append("client=%r" % self.client)
        if self.nth is not None:
            target.append("nth=%d" % self.nth)
        if self.times is not None:
            target.append("times=%d" % self.times)
        return "<Fault %s %s %s fired=%d>" % (
            self.kind, " ".join(target) or "every command", self.action, self.fired)


class Injected:
    """What runs instead of a command's handler when a fault fires: the
    journal tells it from a handler by its type and records ``fault.kind``."""
    __slots__ = ("run", "fault", "postpones", "held")

    def __init__(self, run: Handler | None, fault: Fault, postpones: bool = False) -> None:
        self.run = run
        self.fault = fault
        self.postpones = postpones
        self.held = None      # a delayed reply's chunks (the journal records them)

    def __call__(self, client: Client, argv: list[bytes]) -> Any:
        return self.run(client, argv)


class Switch:
    """A server-wide fault that stays on until ``end()`` (or the with-block ends)."""

    def __init__(self, faults: Faults, name: str, off: Callable[[], object]) -> None:
        self._faults = faults
        self.name = name
        self._off = off
        self.on = True

    def end(self) -> None:
        if self.on:
            self.on = False
            on_loop(self._faults.server, self._off)
            self._faults.switches.discard(self)

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    def __repr__(self) -> str:
        return "<%s %s>" % (self.name, "on" if self.on else "ended")


class Faults:
    """The faults of one server (see the module docstring)."""

    def __init__(self, server: Server, embedded: Any = None) -> None:
        self.server = server
        self.embedded = embedded
        self.rules: tuple[Fault, ...] = ()
        self.switches: set[Switch] = set()
        self._skip: set = set()    # ids of clients whose next command was matched already
        self._timers: dict = {}    # client id -> loop timer of a delay holding it
        self._removed_unfired: list = []   # removed before they fired (unfired())

    # -- per-command faults ---------------------------------------------------
    def error(self, command: Commands = None, *, keys: Glob = None, client: Glob = None,
              nth: int | None = None, times: int | None = None,
              message: str = "ERR injected fault") -> Fault:
        """The matching command replies ``message`` (an error; a leading '-' is
        dropped) instead of running."""
        message = message[1:] if message.startswith("-") else message
        if not message or "\r" in message or "\n" in message:
            raise ValueError("an error message is one non-empty line")
        return self._add(Fault(self, "error", command, keys, client, nth, times,
                               message=message))

    def delay(self, seconds: float, command: Commands = None, *, keys: Glob = None,
              client: Glob = None, nth: int | None = None, times: int | None = None,
              at: Literal["reply", "command"] = "reply") -> Fault:
        """The client waits ``seconds`` for the matching command's reply:
        ``at="reply"`` runs it at once and holds the reply, ``at="command"``
        holds the command and runs it when the time is up."""
        if at not in ("reply", "command"):
            raise ValueError("at is 'reply' or 'command'")
        if not seconds >= 0:
            raise ValueError("seconds must be >= 0")
        return self._add(Fault(self, "delay", command, keys, client, nth, times,
                               seconds=float(seconds), at=at))

    def drop(self, command: Commands = None, *, keys: Glob = None, client: Glob = None,
             nth: int | None = None, times: int | None = None,
             when: Literal["before", "after"] = "before") -> Fault:
        """Close the client's connection before the matching command runs
        (``when="before"``) or after it ran, before its reply is sent
        (``when="after"``)."""
        if when not in ("before", "after"):
            raise ValueError("when is 'before' or 'after'")
        return self._add(Fault(self, "drop", command, keys, client, nth, times, when=when))

    def _add(self, fault: Fault) -> Fault:
        def add():
            self.rules = self.rules + (fault,)
            install_hooks(self.server)
        on_loop(self.server, add)
        return fault

    def remove(self, fault: Fault) -> None:
        """Remove fault; the clients its delays hold get their replies now."""
        def rm():
            if fault in self.rules:
                if fault.fired == 0 and fault.times != 0:
                    self._removed_unfired.append(fault)
                self.rules = tuple(f for f in self.rules if f is not fault)
                install_hooks(self.server)
            self._release(lambda f: f is fault)
        on_loop(self.server, rm)

    def _release(self, which: Callable[[Fault], bool]) -> None:
        for cid, (timer, release, fault) in list(self._timers.items()):
            if which(fault):
                timer.cancel()
                release()

    @property
    def active(self) -> list[Fault | Switch]:
        """The per-command faults still to fire, and the switches on."""
        return [f for f in self.rules if f.active] + list(self.switches)

    def unfired(self) -> list[Fault]:
        """The per-command faults set since the last ``clear()`` that never
        fired (set, or removed, before a matching command came)."""
        return self._removed_unfired + [f for f in self.rules
                                        if f.fired == 0 and f.times != 0]

    def clear(self) -> None:
        """Remove every fault and end every switch (held clients are released now)."""
        self._removed_unfired = []
        for switch in list(self.switches):
            switch.end()

        def clear_rules():
            self.rules = ()
            install_hooks(self.server)
            self._release(lambda f: True)
            self._skip.clear()
        on_loop(self.server, clear_rules)

    # -- the dispatcher's hook (loop thread) -------------------------------------
    def hook(self, client: Client, cmd: Command, argv: list[bytes], func: Handler,
             outer: Client | None) -> Handler:
        """``func``, or what runs instead of it when a fault fires."""
        if client.reprocessing:
            return func        # a blocked command served: it was matched when sent
        if client.is_fake:
            return func        # a script's, or the server's own (AOF replay, a replica's stream)
        if outer is None:
            if self._skip and client.id in self._skip:
                self._skip.discard(client.id)   # a held command, now let through
                return func
        elif not client.in_exec:
            return func        # a script's command
        for fault in self.rules:
            if outer is not None and fault.kind != "error":
                continue
            if not fault.matches(client, cmd, argv):
                continue
            fault.matched += 1
            if fault.matched < fault.first or (
                    fault.times is not None and fault.fired >= fault.times):
                continue
            fault.fired += 1
            return getattr(self, "_" + fault.kind)(fault, client, cmd, func)
        return func

    def _error(self, fault, client, cmd, func):
        message = fault.action["message"]

        def fail(c, argv):
            if cmd.name == "exec" and c.multi:
                discard_transaction(c)
            raise CommandError(message)
        return Injected(fail, fault)

    def _drop(self, fault, client, cmd, func):
        after = fault.action["when"] == "after"

        def drop(c, argv):
            out = c.out
            mark = len(out)
            try:
                if after:
                    func(c, argv)
            except CommandError:
                pass           # its error reply is dropped with the connection
            finally:
                del out[mark:]       # this command's reply (EXEC writes its own)
                c.close()            # earlier replies go out, then the FIN
            return BLOCKED
        return Injected(drop, fault)

    def _delay(self, fault, client, cmd, func):
        seconds = fault.action["seconds"]
        server = self.server
        if fault.action["at"] == "command":
            def hold(c, argv):
                c.pending.appendleft(argv)     # runs first when the client resumes
                self._skip.add(c.id)
                self._hold(c, cmd, argv, seconds, None, fault)
                return BLOCKED
            # The journal records the command when it runs, not now.
            return Injected(hold, fault, postpones=True)

        injected = Injected(None, fault)

        def late(c, argv):
            out = c.out
            mark = len(out)
            failed = False
            try:
                reply = func(c, argv)
            except CommandError as e:
                failed = True
                server.count_error(e.message)
                reply = None
                held = out[mark:] + [encode_error(e.message)]
            else:
                if reply is BLOCKED and c.blocked is not None:
                    return reply     # it blocked: its reply comes when it is served
                held = out[mark:]
                if reply is not BLOCKED:
                    encode(reply, held, c.resp3)
            del out[mark:]
            # It ran: counted as call() counts a command that did not block.
            count_call(server, cmd, 0.0, c, failed)
            injected.held = held
            self._hold(c, cmd, argv, seconds, held, fault)
            return BLOCKED
        injected.run = late
        return injected

    def _hold(self, client, cmd, argv, seconds, held, fault):
        """Mark client blocked (key-less, as CLIENT PAUSE does) for seconds; then
        hand it its held reply bytes and let it run what it sent meanwhile."""
        server = self.server
        waiter = blocking.block_postponed(client, cmd, argv, PAUSED)

        def release():
            self._timers.pop(client.id, None)
            blocking.unblock_postponed(waiter)
            if client.closed:
                self._skip.discard(client.id)
                return
            if held:
                client.out.extend(held)
                client.schedule_flush()
            server.resume_client(client)
            server.wake()
        self._timers[client.id] = (server.loop.call_later(seconds, release), release, fault)

    # -- server-wide ------------------------------------------------------------
    def _switch(self, name: str, on: Callable[[], object], off: Callable[[], object]) -> Switch:
        on_loop(self.server, on)
        switch = Switch(self, name, off)
        self.switches.add(switch)
        return switch

    def pause(self) -> Switch:
        """No command runs until the switch ends (clients wait, as CLIENT PAUSE ALL)."""
        server = self.server
        return self._switch("pause", lambda: pause_clients(server, _FOREVER_MS, True),
                            lambda: (unpause_clients(server), server.wake()))

    def refuse_connections(self) -> Switch:
        """New connections are reset as soon as they are accepted."""
        server = self.server

        def on():
            server.refuse_all = True

        def off():
            server.refuse_all = False
        return self._switch("refuse_connections", on, off)

    def drop_connections(self) -> int:
        """Close every client connection now (without their pending replies);
        how many were closed."""
        def drop():
            n = 0
            for client in list(self.server.clients.values()):
                if not client.closed and hasattr(client, "kill"):
                    client.kill()
                    n += 1
            return n
        n = on_loop(self.server, drop)
        # asyncio's transports close their sockets on the loop's next turn
        # (the callbacks abort() queued): a round trip after them, so that a
        # client's next command already finds its connection gone.
        on_loop(self.server, lambda: None)
        return n

    def oom(self) -> Switch:
        """Commands that may grow memory (SET, LPUSH, EVAL...) get -OOM, as on a
        server past its maxmemory; the real check decides (hotkv.core.dispatch)."""
        server = self.server
        values = server.config.values
        policy = []

        def on():
            # Refuse, never evict: under an evicting policy a 1-byte limit
            # would empty the keyspace first.
            policy.append(values.get("maxmemory-policy"))
            values["maxmemory-policy"] = "noeviction"
            server.maxmemory = 1      # below any real figure: the gate says OOM
            # ... at the next command: not after the input an earlier, higher
            # limit left room for (the evictor's check_at).
            server.eviction.check_at = 0

        def off():
            if policy:
                values["maxmemory-policy"] = policy.pop()
            server._set_maxmemory(values["maxmemory"])
        return self._switch("oom", on, off)

    fill_memory = oom

    def restart(self, keep_data: bool = True) -> Faults:
        """Stop and start the embedded server on the same port (see the module
        docstring); returns the new server's ``Faults``."""
        if self.embedded is None:
            raise RuntimeError("restart needs the EmbeddedServer (use server.faults)")
        restart(self.embedded, keep_data)
        return self.embedded.faults


def _persistent(values: dict[str, Any]) -> bool:
    return bool(values["appendonly"]) or bool(str(values.get("save") or "").strip())


def _image(old: Server, keep_data: bool) -> bytes | None:
    """The keyspace as an RDB image in memory, when a restart must carry it
    (kept, and no file the new server would load); else None."""
    if not keep_data or _persistent(old.config.values):
        return None

    def dump():
        fd = os.memfd_create("hotkv-restart")
        try:
            write_dataset(old, fd)
            size = os.lseek(fd, 0, os.SEEK_CUR)
            return b"".join(_read_all(fd, size))
        finally:
            os.close(fd)
    return on_loop(old, dump)


def _after_start(embedded: Any, old: Server, image: bytes | None, keep_data: bool) -> None:
    """The new server takes the old one's clock, then its image or an empty keyspace."""
    new = embedded.server
    new.clock.adopt(old.clock)   # a test's frozen/advanced time lives on
    if image:
        loaded = read_bytes(image, len(new.dbs), old.clock.ms())

        def install():
            new.empty_data()
            put(new, loaded)
        on_loop(new, install)
    if not keep_data:
        on_loop(new, lambda: run_commands(new, [[b"FLUSHALL"]]))


def restart(embedded: Any, keep_data: bool = True) -> Any:
    """Stop ``embedded`` (an ``EmbeddedServer``) and start it again on the same
    port: see the module docstring."""
    old = embedded.server
    if old is None or embedded._thread is None:
        raise RuntimeError("restart: the server is not running: call start() first")
    image = _image(old, keep_data)
    port = old.config.values["port"]
    embedded.stop()
    if port:
        embedded.settings["port"] = port
    embedded.start()
    _after_start(embedded, old, image, keep_data)
    return embedded


async def restart_async(embedded: Any, keep_data: bool = True) -> Any:
    """``restart`` for an ``AsyncEmbeddedServer`` (in the caller's loop)."""
    old = embedded.server
    if old is None or embedded._stopped():
        raise RuntimeError("restart: the server is not running: await start() first")
    image = _image(old, keep_data)
    port = old.config.values["port"]
    await embedded.stop()
    if port:
        embedded.settings["port"] = port
    await embedded.start()
    _after_start(embedded, old, image, keep_data)
    return embedded


def _read_all(fd: int, size: int) -> Iterator[bytes]:
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(size - pos, 1 << 24), pos)
        if not chunk:
            raise OSError("short read of the restart image")
        pos += len(chunk)
        yield chunk
