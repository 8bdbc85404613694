"""The command journal: what each client had the server run, in order, for tests.

``server.journal`` (an ``EmbeddedServer``'s, or ``journal_of(hotkv_server)``)
is off until ``start(replies=False)``; ``stop()`` ends recording and keeps
what was recorded; ``clear()`` forgets it; as a context manager it records for
the block (``with server.journal as j:`` starts an empty recording without
replies; ``with server.journal.start(replies=True) as j:`` keeps that start).

Each ``Entry`` holds: ``seq`` (0, 1, ... in the order the commands ran),
``client_id`` and ``client_name`` (CLIENT SETNAME; for a script's commands,
the caller's), ``db``, ``argv`` (a tuple of bytes as sent), ``name`` (the
command, lower case; a subcommand as ``client|setname``), ``time`` (the
server's command time, seconds: the virtual clock's when it is set),
``origin`` ("client"; "exec" for a command EXEC ran; "script" for one a script
called; "internal" for a server-side client's: the AOF replayed by DEBUG
LOADAOF, a replica's stream from its primary, a fixture's FLUSHALL),
``fault`` (the kind of fault that fired on it, else None) and, with
``replies=True``, ``reply``: the exact bytes the client got (an error's
``-ERR ...`` line, EXEC's whole array, a blocked command's reply once it is
served; None while it is blocked).

Queries: ``entries()``, ``commands("XACK", ...)``, ``for_client(name)`` (a glob
on the client name, or a client id), ``keys()`` (every key the commands
named, first use first), ``len()``.  They leave out each connection's
handshake -- HELLO or AUTH, CLIENT SETNAME, SELECT and CLIENT SETINFO, which
redis-py and valkey-py send on connecting, before the test's first command
(``HANDSHAKE``; only as a new connection's opening run) -- so the counts are
the test's own commands; ``journal.show_handshake = True`` shows
them (they are always recorded).  The assertions hide their own frames from
pytest's tracebacks (``__tracebackhide__``).  Assertions, raising ``AssertionError`` whose text
shows what was seen: ``assert_called("XACK", "stream", "group", ...)`` (the
command with these arguments; ``...`` last accepts any rest, a bare name any
arguments; ``count=`` how many times), ``assert_not_called``, ``assert_order([...])`` (the given
calls occur in this order, others may come between), each with an optional
``client=``.

What is recorded: every command ``hotkv.core.dispatch.call`` runs -- what clients
sent (a command refused before it runs, by arity, ACL, OOM..., is not: it
never ran), what EXEC ran and what scripts called.  MULTI's queued commands
are recorded when EXEC runs them, after the EXEC entry.

Cost: off, nothing (``server.test_hooks`` is None unless a fault is set); on
without replies, ``hotkv.core.dispatch.call`` itself appends a command a client sent
to the log -- no call, no object made, the arguments not copied -- and
``bench/journal.py`` measures what that costs P1 LPUSH.  Recording runs on the
loop thread; queries copy the log on the loop thread, so a test may call them
at any time.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Iterable, Iterator, Union

from ..core.blocking import BLOCKED
from ..core.dispatch import JournalLog
from ..core.registry import lookup
from ..protocol.errors import CommandError
from ..protocol.resp import encode, encode_error
from ..protocol.util import compile_glob
from . import install_hooks, on_loop
from .faults import Handler, Injected

if TYPE_CHECKING:
    from ..clients.client import Client
    from ..core.registry import Command
    from ..server import Server

# Which client's entries: a glob on the client name (CLIENT SETNAME), or a client id.
ClientFilter = Union[str, bytes, int, None]
# A call to look for: "XACK", "SET k v", or ["XACK", "s", "g", ...] (``...`` last: any rest).
Call = Union[str, bytes, Iterable[object]]


def journal_of(server: Server) -> Journal:
    """The ``Journal`` of a hotkv ``Server`` (made on first use)."""
    journal = server.journal
    if journal is None:
        journal = server.journal = Journal(server)
    return journal


def _b(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()


def _show(argv: Iterable[bytes]) -> str:
    """A command as a person would type it."""
    parts = []
    for a in argv:
        s = a.decode("utf-8", "backslashreplace")
        if not s or any(ch.isspace() or ch in "\"'" for ch in s):
            s = '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(s)
    return " ".join(parts)


class Entry:
    """One recorded command (see the module docstring for each field)."""

    __slots__ = ("seq", "client_id", "client_name", "db", "argv", "name", "time",
                 "origin", "fault", "reply")

    seq: int
    client_id: int
    client_name: str
    db: int
    argv: tuple[bytes, ...]
    name: str
    time: float
    origin: str
    fault: str | None
    reply: bytes | None

    def __init__(self, seq: int, client_id: int, client_name: bytes, db: int,
                 argv: Iterable[object], name: str, ms: int, origin: str, fault: str | None,
                 reply: bytes | None = None) -> None:
        self.seq = seq
        self.client_id = client_id
        self.client_name = client_name.decode("utf-8", "replace")
        self.db = db
        self.argv = tuple(_b(a) for a in argv)
        self.name = name
        self.time = ms / 1000.0
        self.origin = origin
        self.fault = fault
        self.reply = reply

    @property
    def args(self) -> tuple[bytes, ...]:
        return self.argv[1:]

    def __repr__(self) -> str:
        who = "client %d" % self.client_id
        if self.client_name:
            who += " %r" % self.client_name
        extra = "" if self.origin == "client" else " [%s]" % self.origin
        if self.fault:
            extra += " [fault: %s]" % self.fault
        if self.reply is not None:
            extra += " -> %r" % self.reply
        return "#%d %s: %s%s" % (self.seq, who, _show(self.argv), extra)


class _Pattern:
    """A call to look for: name plus argument prefix, ``...`` for any rest."""

    def __init__(self, spec: Call) -> None:
        if isinstance(spec, (str, bytes)):
            spec = spec.split() if isinstance(spec, str) else spec.split()
        spec = list(spec)
        if not spec:
            raise ValueError("a call to look for needs at least a command name")
        self.rest = spec[-1] is Ellipsis
        if self.rest:
            spec = spec[:-1]
        self.name = _b(spec[0]).lower()
        self.args = [_b(a) for a in spec[1:]]
        self.rest = self.rest or not self.args    # a bare name: any arguments

    def same_command(self, entry: Entry) -> bool:
        return entry.argv[0].lower() == self.name or entry.name.encode() == self.name

    def matches(self, entry: Entry) -> bool:
        argv = entry.argv
        if argv[0].lower() != self.name and entry.name.encode() != self.name:
            return False
        args = list(argv[1:])
        if self.rest:
            return args[:len(self.args)] == self.args
        return args == self.args

    def show(self) -> str:
        return _show([self.name.upper()] + self.args) + (
            " ..." if self.rest and self.args else "")


_HEAD = 6     # fields of a record before its arguments (see Journal)

# What a client library sends on connecting, before the test's first command
# (redis-py, valkey-py: HELLO or AUTH, CLIENT SETNAME with client_name=,
# SELECT with db=, CLIENT SETINFO LIB-NAME / LIB-VER): recorded, but left out
# of the queries unless ``journal.show_handshake`` is True -- only as the
# opening run of a connection made while the journal records (the same
# command sent later, or by a connection older than start(), is the test's).
HANDSHAKE = frozenset({"hello", "auth", "client|setname", "client|setinfo", "select"})


class Journal:
    """The journal of one server (see the module docstring).

    ``_log`` (a ``hotkv.core.dispatch.JournalLog``: a list) is flat: a record is
    ``_HEAD`` fields, then the command's arguments as they came (the list the
    parser made is not kept, its items are): the head, client id, client
    name, db, command (the registry's ``Command``), ms.  The head is the
    number of arguments for a command a client sent (origin "client", no
    fault); else the tuple (that number, origin, fault kind).  ``dispatch.call``
    writes a client's records itself while the journal alone records without
    replies (``server.test_hooks`` is then the log); ``_full_hook`` the rest.
    No object per record for the garbage collector to walk again and again
    (a tuple per record made recording cost 3x more), no copy of the
    arguments (a tuple of them was a quarter of the cost, as was the call
    that dispatch.call now spares: bench/journal.py --instructions).
    Replies, when recorded, are in ``_replies`` by the record's position in
    ``_log``."""

    show_handshake: bool = False   # True: entries(), len()... include HANDSHAKE's commands

    def __init__(self, server: Server) -> None:
        self.server = server
        self.recording = False
        self.replies = False
        self._log = JournalLog()
        self._log.hook = self._full_hook   # what dispatch.call does not record itself
        self._replies: dict = {}    # record position -> the reply's bytes
        self._blocked: dict = {}    # client id -> its blocked command's record position
        self._older: set = set()    # ids of the clients connected when start() ran
        self.hook: Handler = self._full_hook   # start() sets the one for its mode

    # -- control ----------------------------------------------------------------
    def start(self, replies: bool = False) -> Journal:
        """Record from now on (what was recorded before is kept: see clear())."""
        def on():
            self.replies = bool(replies)
            self._older.update(self.server.clients)   # their handshakes are behind them
            self.recording = True
            self.hook = self._full_hook if replies else self._log
            install_hooks(self.server)
        on_loop(self.server, on)
        return self

    def stop(self) -> Journal:
        def off():
            self.recording = False
            self._blocked.clear()
            install_hooks(self.server)
        on_loop(self.server, off)
        return self

    def clear(self) -> None:
        def forget():
            del self._log[:]     # in place: it may be server.test_hooks
            self._replies.clear()
            self._blocked.clear()
            self._older = set(self.server.clients)   # handshakes gone with the log
        on_loop(self.server, forget)

    def __enter__(self) -> Journal:
        if not self.recording:     # ``with journal.start(replies=True):`` keeps its start
            self.clear()
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the dispatcher's hook (loop thread) ---------------------------------------
    def _full_hook(self, client: Client, cmd: Command, argv: list[bytes], func: Handler,
                   outer: Client | None) -> Handler:
        """Records what dispatch.call does not (see Journal), and replies."""
        fault = None
        if type(func) is Injected:
            if func.postpones:
                return func       # held by a delay fault: recorded when it runs
            fault = func.fault.kind
        if client.reprocessing:
            pos = self._blocked.pop(client.id, None)
            return func if pos is None else self._capture(pos, func)
        if outer is None:
            owner, origin = client, "client"
        else:
            owner, origin = outer, "exec" if client.in_exec else "script"
        if owner.is_fake:
            origin = "internal"
        log = self._log
        pos = len(log)
        n = len(argv)
        log.extend((n if origin == "client" and fault is None else (n, origin, fault),
                    owner.id, owner.name, client.db.index, cmd, self.server.cmd_time_ms))
        if client.is_fake:
            # A server-side client's arguments may be views (of an AOF being
            # loaded, say) that must not outlive what they show: copies.
            log.extend([a if type(a) is bytes else _b(a) for a in argv])
        else:
            log.extend(argv)      # as the parser made them
        return self._capture(pos, func) if self.replies else func

    def _capture(self, pos: int, func: Handler) -> Handler:
        replies = self._replies

        def run(c, argv):
            out = c.out
            mark = len(out)
            try:
                reply = func(c, argv)
            except CommandError as e:
                replies[pos] = encode_error(e.message)
                raise
            if reply is BLOCKED:
                if type(func) is Injected and func.held is not None:
                    replies[pos] = b"".join(func.held)   # sent when the delay ends
                    return reply
                if c.blocked is not None and not c.closing:
                    self._blocked[c.id] = pos      # its reply comes when it is served
                    return reply
                if len(out) > mark:
                    replies[pos] = b"".join(out[mark:])
                return reply
            buf = list(out[mark:])
            encode(reply, buf, c.resp3)
            replies[pos] = b"".join(buf)
            return reply
        return run

    # -- queries ----------------------------------------------------------------
    def _shown(self, log) -> list[int]:
        """The positions of the records the queries show: all but each
        connection's opening run of HANDSHAKE commands (a client's own, sent
        by a connection made while recording), unless ``show_handshake``."""
        shown = []
        pos, end = 0, len(log)
        past = set(self._older)     # clients whose handshake is over
        show_all = self.show_handshake
        while pos < end:
            head = log[pos]
            client_id = log[pos + 1]
            if show_all or client_id in past or type(head) is not int \
                    or log[pos + 4].name not in HANDSHAKE:
                shown.append(pos)
                past.add(client_id)
            pos += _HEAD + (head if type(head) is int else head[0])
        return shown

    def entries(self) -> list[Entry]:
        """Every entry, in order (the handshake's only with ``show_handshake``)."""
        log, replies, shown = on_loop(
            self.server, lambda: (list(self._log), dict(self._replies), self._shown(self._log)))
        out = []
        for pos in shown:
            head, client_id, client_name, db, cmd, ms = log[pos:pos + _HEAD]
            if type(head) is int:
                n, origin, fault = head, "client", None
            else:
                n, origin, fault = head
            out.append(Entry(len(out), client_id, client_name, db, log[pos + _HEAD:pos + _HEAD + n],
                             cmd.name, ms, origin, fault, replies.get(pos)))
        return out

    def __len__(self) -> int:
        return on_loop(self.server, lambda: len(self._shown(self._log)))

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())

    def commands(self, *names: str | bytes, client: ClientFilter = None) -> list[Entry]:
        """The entries of these commands (any case; all commands when none given)."""
        wanted = {n.lower() if isinstance(n, str) else n.decode().lower() for n in names}
        return [e for e in self._select(client)
                if not wanted or e.name in wanted or e.name.split("|")[0] in wanted]

    def for_client(self, client: str | bytes | int) -> list[Entry]:
        """The entries of the clients whose name matches the glob ``client``
        (or whose id is ``client``, an int)."""
        return self._select(client)

    def keys(self, client: ClientFilter = None) -> list[bytes]:
        """Every key the recorded commands named, in the order first named."""
        seen: dict[bytes, None] = {}
        for e in self._select(client):
            cmd = lookup(e.argv[0])
            if cmd is None:
                continue
            if cmd.subcommands is not None and len(e.argv) > 1:
                cmd = cmd.subcommands.get(e.argv[1].lower(), cmd)
            try:
                positions = cmd.key_indexes(list(e.argv))
            except Exception:   # a malformed call's keys cannot be read
                continue
            for i in positions:
                if i < len(e.argv):
                    seen.setdefault(e.argv[i], None)
        return list(seen)

    def _select(self, client: ClientFilter) -> list[Entry]:
        entries = self.entries()
        if client is None:
            return entries
        if isinstance(client, int):
            return [e for e in entries if e.client_id == client]
        match = compile_glob(_b(client), exact=True)
        return [e for e in entries if match(e.client_name.encode())]

    # -- assertions ---------------------------------------------------------------
    def assert_called(self, *call: object, count: int | None = None,
                      client: ClientFilter = None) -> list[Entry]:
        """The call was recorded (``count`` times, when given); returns its entries."""
        __tracebackhide__ = True
        pattern = _Pattern(call)
        entries = self._select(client)
        hits = [e for e in entries if pattern.matches(e)]
        if (count is None and hits) or (count is not None and len(hits) == count):
            return hits
        want = "%s%s" % (pattern.show(), "" if count is None else " %d time(s)" % count)
        raise AssertionError(self._report("expected a call: " + want, pattern, entries, hits))

    def assert_not_called(self, *call: object, client: ClientFilter = None) -> None:
        __tracebackhide__ = True
        pattern = _Pattern(call)
        entries = self._select(client)
        hits = [e for e in entries if pattern.matches(e)]
        if hits:
            raise AssertionError("expected no call: %s\nfound %d:\n%s" % (
                pattern.show(), len(hits), "\n".join("  %r" % e for e in hits)))

    def assert_order(self, calls: Iterable[Call], client: ClientFilter = None) -> list[Entry]:
        """Each of ``calls`` (a command name, ``"SET k v"``, or a list such as
        ``["XACK", "s", ...]``) was recorded, in this order (others may come
        between); returns the matched entries."""
        __tracebackhide__ = True
        patterns = [_Pattern(c) for c in calls]
        entries = self._select(client)
        found, pos = [], 0
        for p in patterns:
            while pos < len(entries) and not p.matches(entries[pos]):
                pos += 1
            if pos == len(entries):
                break
            found.append(entries[pos])
            pos += 1
        if len(found) == len(patterns):
            return found
        # The diff: the expected sequence against what was seen of the same
        # commands, in the order seen.
        seen = [e for e in entries if any(p.same_command(e) for p in patterns)]
        want = [p.show() for p in patterns]
        # A seen call a pattern matches is shown as the pattern is: the diff
        # is then about the order, not about arguments nobody asked for.
        got = [next((p.show() for p in patterns if p.matches(e)), _show(e.argv)) for e in seen]
        diff = "\n".join(difflib.unified_diff(want, got, "expected order", "seen", lineterm="",
                                              n=max(len(want), len(got))))
        raise AssertionError(
            "calls not in the expected order: %d of %d matched, the first missing: %s\n%s"
            % (len(found), len(patterns), patterns[len(found)].show(), diff or "(nothing seen)"))

    def _report(self, head: str, pattern: _Pattern, entries: list[Entry],
                hits: list[Entry]) -> str:
        lines = [head]
        same = [e for e in entries if pattern.same_command(e)]
        if hits:
            lines.append("seen %d time(s):" % len(hits))
            lines += ["  %r" % e for e in hits]
        elif same:
            lines.append("calls to %s seen (%d):" % (pattern.name.decode().upper(), len(same)))
            lines += ["  %r" % e for e in same[:20]]
            want = pattern.show()
            closest = max(same, key=lambda e: difflib.SequenceMatcher(
                None, want, _show(e.argv)).ratio())
            lines.append("closest, as a diff (- expected, + seen):")
            lines += ["  " + d.rstrip("\n") for d in difflib.ndiff([want], [_show(closest.argv)])]
        else:
            lines.append("no call to %s at all; the journal holds %d command(s)%s" % (
                pattern.name.decode().upper(), len(entries), ":" if entries else "."))
            lines += ["  %r" % e for e in entries[-20:]]
            if len(entries) > 20:
                lines.insert(-20, "  ... (the last 20)")
        return "\n".join(lines)

