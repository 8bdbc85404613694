"""CLIENT PAUSE's state: which commands wait, until when, and who resumes them.

Owns ``server.client_pause`` and the dispatcher gate ``server.pause_check``
(set only while a pause is on, so an unpaused server pays one attribute
test per command), ``pause_info`` for INFO, and the timer that lifts the
pause.  The CLIENT PAUSE / UNPAUSE commands (``hotkv.commands.client_cmds``)
only call ``pause_clients`` / ``unpause_clients``; this sits below
``commands/`` because the dispatcher calls into it.

Invariants: a postponed command is never refused nor reordered: it goes
back to the head of its client's pending commands, and the client is marked
blocked with a key-less ``Waiter`` (``blocking.block_postponed``: reading
stops, CLIENT LIST shows "b", counted in blocked_clients as Valkey 8 counts
it); when the pause ends every postponed client is resumed
(``blocking.unblock_postponed``) in the order it was paused.  WRITE pauses
writes and may-replicate commands (``may_replicate``: a script by its own
flags; EXEC of a transaction that queued one: bit 4 of ``multi_flags``, set
by the dispatcher when it queues), ALL pauses everything.  While a pause is
on, keys past their time read as missing but are not deleted (no active or
lazy expiry: ``Database.lookup`` and the cron check ``pause_check``).
A replica's primary stream is paused too (``hold_primary_command``): what
waits is read (slave_read_repl_offset grows) but not applied.
"""

from __future__ import annotations

from . import blocking

# The data of a paused client's Waiter: CLIENT UNBLOCK leaves such clients alone.
PAUSED = "client-pause"


class _Pause:
    __slots__ = ("end_ms", "all", "postponed", "timer")

    def __init__(self, end_ms, all_mode):
        self.end_ms = end_ms
        self.all = all_mode
        self.postponed = []
        self.timer = None


def _now_ms(server) -> int:
    return server.clock.ms()     # CLIENT PAUSE ends on hotkv.core.clock's time


def pause_info(server) -> tuple:
    """(paused_reason, paused_actions, paused_timeout_milliseconds) for INFO."""
    p = server.client_pause
    if p is None:
        return "none", "none", 0
    return "client_pause", "all" if p.all else "write", max(0, p.end_ms - _now_ms(server))


def _pause_check(client, cmd, argv) -> bool:
    """server.pause_check while a pause is on: True when the command was postponed."""
    server = client.server
    p = server.client_pause
    if p is None or client.is_fake:
        return False
    return _postpone(server, p, client, cmd, argv)


def _postpone(server, p, client, cmd, argv) -> bool:
    """The pause's verdict on argv once a pause p is on: False when it has
    ended (it is lifted here) or does not hold this command; else argv goes
    back to the head of the client's pending commands and the client is
    marked blocked until the pause ends (True)."""
    if _now_ms(server) >= p.end_ms:
        unpause_clients(server)
        return False
    if not p.all and not (cmd.name == "exec" and client.multi_flags & 4) \
            and not may_replicate(server, cmd, argv):
        return False
    client.pending.appendleft(argv)
    p.postponed.append(blocking.block_postponed(client, cmd, argv, PAUSED))
    return True


def hold_primary_command(client, argv, at_head: bool = False) -> bool:
    """A replica's primary stream under CLIENT PAUSE (Valkey pauses its
    primary client as any other, so a paused replica's offset stays): True
    when argv waits in the primary client's pending commands -- behind any
    already waiting, or back at their head (``at_head``: the resume's own
    retry) -- the client marked blocked as ``_pause_check`` does.  The
    replica link (hotkv.replication.replica) applies them when it resumes."""
    if client.pending and not at_head:
        client.pending.append(argv)
        return True
    server = client.server
    p = server.client_pause
    cmd = server.command_table.get(argv[0])
    if p is None or cmd is None:
        return False
    return _postpone(server, p, client, cmd, argv)


def may_replicate(server, cmd, argv) -> bool:
    """Is this a command CLIENT PAUSE WRITE holds: a write or may-replicate
    command, with a script's own flags instead of EVAL's / FCALL's (Valkey's
    getCommandFlags: a ``no-writes`` script is a read; a script without a
    shebang, or not found, keeps the command's flags)."""
    if not (cmd.write or "may_replicate" in cmd.flags):
        return False
    name = cmd.name
    if len(argv) < 2 or name not in ("eval", "evalsha", "fcall"):
        return True
    if name == "fcall":
        reg = server.functions
        fn = reg.get(argv[1]) if reg is not None else None
        return fn is None or "no_writes" not in fn.flags
    if name == "eval":
        flags = _shebang_flags(argv[1])
    else:
        eng = server.scripting
        script = eng.scripts.get(argv[1].lower()) if eng is not None else None
        flags = script.flags if script is not None else None
    return flags is None or "no_writes" not in flags


def _shebang_flags(body: bytes):
    """The flags of an EVAL body's shebang, None without one or when it does
    not parse (the command's own flags then apply).  The engine's parser
    (hotkv.lua.engine.parse_shebang) sits above the dispatcher, which
    imports this module: this reads only the flags."""
    if not body.startswith(b"#!"):
        return None
    end = body.find(b"\n")
    parts = body[:end].split() if end > 0 else []
    if not parts or parts[0] != b"#!lua":
        return None
    flags = set()
    for part in parts[1:]:
        if not part.startswith(b"flags="):
            return None
        flags.update(f.replace(b"-", b"_").decode("latin-1") for f in part[6:].split(b","))
    return flags


def unpause_clients(server):
    """End the pause (CLIENT UNPAUSE, its timeout): resume the postponed clients in order."""
    p = server.client_pause
    server.client_pause = None
    server.pause_check = None
    if p is None:
        return
    if p.timer is not None:
        p.timer.cancel()
    for waiter in p.postponed:
        if blocking.unblock_postponed(waiter):
            server.resume_client(waiter.client)


def arm(server):
    p = server.client_pause
    if server.loop is None or p is None:
        return
    if p.timer is not None:
        p.timer.cancel()
    p.timer = server.loop.call_later(max(0, p.end_ms - _now_ms(server)) / 1000.0, _on_timer, server)


def _on_timer(server):
    p = server.client_pause
    if p is None:
        return
    p.timer = None
    if _now_ms(server) >= p.end_ms:
        unpause_clients(server)
        server.wake()
    else:
        arm(server)


def pause_clients(server, end_ms: int, all_mode: bool):
    """CLIENT PAUSE: pause until end_ms (absolute; 0 with a 0 timeout), writes
    only unless all_mode.  A second pause extends the first, never shortens it."""
    p = server.client_pause
    if p is None:
        server.client_pause = _Pause(end_ms, all_mode)
        server.pause_check = _pause_check
    else:
        p.end_ms = max(p.end_ms, end_ms)
        p.all = p.all or all_mode
    arm(server)
