"""redis.call / redis.pcall: a script's command from Lua to the dispatcher
and its reply back into Lua values (Valkey's script.c scriptCall and
script_lua.c luaRedisGenericCommand / the RESP -> Lua parser).

Owns ``CallPath``, the part of ``hotkv.lua.engine.Engine`` that the
prelude's ``redis.call`` / ``redis.pcall`` wrappers call: the arguments as
a command's argv (numbers as Valkey's double2ll / fpconv_dtoa), the
script-side checks with Valkey's texts (unknown command, arity, noscript,
stale replica, ACL, read-only script, READONLY replica, MISCONF, NOREPLICAS,
OOM, cluster), the run through ``hotkv.core.dispatch.script_call`` with
the engine's fake client (the script path's nested call: the handler's
value comes back as it is for the common shapes, turned into Lua values
here without a RESP encode and parse -- ``_raw_value``), and any other
reply parsed into Lua values (status ->
{ok=}, error -> {err=}, nil -> false in RESP2, RESP3's maps / sets /
doubles / big numbers as tables); ``redis.set_repl``'s retargeting of the
effects (``_call_retargeted``, ``feed_targeted`` at the script's end), and
``feed_monitors``.

The quick path (``_lua_call``): in a run where none of the per-call checks
but the dispatcher's gates can refuse a command (``run.quick``: no
debugger, replica link, disk error, cluster, min-replicas gate or set_repl)
and no gate is on (``server.gated``), a command already seen by name
(``run.quick``, filled by ``_lookup``) with its arity right runs at once,
and an integer, bulk string, nil, status or flat array reply goes straight
back.  tests/test_lua_quick.py holds it equal to the general path,
tests/test_lua_script_call.py their effects and script_call's to call's.

Invariants:
* no Python exception enters Lua: a failure comes back as a value
  (``FAIL, 1, error table`` for redis.call; the error table for pcall), a
  bug of ours as one error reply ("internal error in script call");
* the reply reaches Lua as Lua values: an integer or string as it is, a
  status or a flat array of up to FLAT_MAX items marked (STATUS / ARRAY)
  for the prelude to make the table, anything else built by ``_parse``;
* a refused call counts as Valkey counts it (error stats, rejected_calls),
  and the debugger logs what Valkey's luaPushError would.
"""

from __future__ import annotations

import logging
import math

from ..core.dispatch import ENCODED, script_call
from ..core.stats import count_rejected
from ..protocol import errors
from ..protocol.replies import quoted, redacted
from ..protocol.resp import encode, format_double
from ..replication import replica_gate as replica

log = logging.getLogger("hotkv")


def number_arg(n) -> bytes:
    """A Lua number as a command argument: integral values in full, others as
    the shortest round-trip form (Valkey's double2ll / fpconv_dtoa)."""
    if type(n) is int:
        return b"%d" % n
    if n == n and -9.2233720368547758e18 < n < 9.2233720368547758e18 and n == int(n):
        return b"%d" % int(n)
    return format_double(n)


NOREPLICAS = "NOREPLICAS Not enough good replicas to write."


def no_good_replicas(server) -> bool:
    """min-replicas-to-write is set (with a max lag) and not met: Valkey's
    checkGoodReplicasStatus failing (hotkv.replication keeps the gate)."""
    return server.repl_refuse


class CallPath:
    """Engine's redis.call half (mixed into hotkv.lua.engine.Engine)."""

    # ------------------------------------------------------------------
    # Callbacks from Lua: each returns (ok, value), never raises
    # ------------------------------------------------------------------
    def _py_call(self, raise_error, *args):
        """(ok, value) of one call (the debugger's redis command)."""
        try:
            return self._command(raise_error, args)
        except Exception as e:   # a bug costs one error reply, never the server
            log.exception("scripting: redis.call failed")
            return False, self._err_table("ERR internal error in script call: %s"
                                          % type(e).__name__)

    def _lua_call(self, *args):
        """redis.call: its reply as the prelude's wrapper takes it (see
        _command); an error table goes back after FAIL and the wrapper raises
        it -- no exception on this path (see guard).

        The quick path: a run where none of the per-call checks can refuse
        (``run.quick``: no debugger, no replica link, disk error, cluster
        or min-replicas gate, set_repl untouched), no ACL restriction (with
        no dispatcher gate on, ``server.gated``, none is; the other gates --
        maxmemory, pause, a busy script's -- refuse nothing on a script's
        call but the OOM check below), a command already seen by name that
        needs no script-side check (``_lookup``: no subcommands, not
        noscript; for a read-only run no write or may_replicate), its
        arity right, every argument a string or a number, and not a
        command the OOM check could refuse (a denyoom command before the
        script's first write while maxmemory is set): the command runs
        (``script_call``), and a string, integer, nil, status or flat array
        reply goes straight back; anything else takes the general path,
        which makes every check."""
        run = self.run
        if run is not None and run.quick is not None and (
                not self.server.gated or self.server.acl_check is None):
            for a in args:
                if type(a) is not bytes:    # (a number: converted; anything else: [])
                    argv = _quick_argv(args)
                    break
            else:
                argv = [*args]
            cmd = run.quick.get(argv[0]) if argv else None
            if cmd is not None:
                arity = cmd.arity
                if ((n := len(argv)) == arity or (arity < 0 and n >= -arity)) and not (
                        cmd.denyoom and not run.write_dirty and self.server.gated
                        and self.server.maxmemory):
                    try:
                        # (_command's end, its checks passed)
                        fake = run.fake
                        if cmd.write:
                            run.write_dirty = True
                        reply = script_call(fake, cmd, argv)
                        server = self.server
                        if server.monitors and not cmd.admin and \
                                "skip_monitor" not in cmd.flags:
                            feed_monitors(server, fake.db.index, b"lua", cmd, argv)
                        # The handler's value as it is (script_call), or ENCODED
                        t = type(reply)
                        if t is bytes or t is int:      # (the commonest, in line)
                            return reply
                        if reply is not ENCODED:
                            reply = self._raw_value(reply, fake)
                            if reply is not ENCODED:
                                return reply
                        out = fake.out
                        if not out:     # no reply (CLIENT REPLY OFF, say)
                            return None
                        data = out[0] if len(out) == 1 else b"".join(out)
                        fake.out = []
                        return self._quick_value(data, fake.resp3) if data else None
                    except Exception as e:   # a bug costs one error reply, never the server
                        log.exception("scripting: redis.call failed")
                        return self._fail, 1, self._err_table(
                            "ERR internal error in script call: %s" % type(e).__name__)
        try:
            ok, v = self._command(True, args)
        except Exception as e:   # a bug costs one error reply, never the server
            log.exception("scripting: redis.call failed")
            return self._fail, 1, self._err_table("ERR internal error in script call: %s"
                                                  % type(e).__name__)
        if not ok:
            return self._fail, 1, v
        return v

    def _quick_value(self, data: bytes, resp3: bool):
        """The quick path's reply as redis.call's wrapper takes it: the
        commonest shapes decoded here, the rest as _command decodes them
        (an error after FAIL, for the wrapper to raise)."""
        kind = data[0]
        if kind == 58:                      # ':'
            return int(data[1:-2])
        if kind == 36:                      # '$'
            if data[1] == 45:               # '$-1'
                return False
            return data[data.index(b"\r\n") + 2:-2]
        if kind == 43:                      # '+'
            return self._status, data[1:-2]
        if kind != 45:                      # '-': the general path's error table
            value = self._quick_reply(data, resp3)
            if value is not None:
                return value
        value, _ = self._parse(data, 0)
        if kind == 45:
            return self._fail, 1, value
        return value

    def _lua_pcall(self, *args):
        """redis.pcall: the same, an error table returned as a value."""
        try:
            return self._command(False, args)[1]
        except Exception as e:
            log.exception("scripting: redis.pcall failed")
            return self._err_table("ERR internal error in script call: %s" % type(e).__name__)

    def _err_table(self, text: str, ignore_stats: bool = False):
        t = self._table()
        t[b"err"] = text.encode("utf-8", "surrogateescape")
        if ignore_stats:
            t[b"ignore_error_stats_update"] = True
        return t

    def _rejected(self, text, cmd=None):
        """A command the script may not run: counted as Valkey counts it."""
        self._ldb_error(text)
        message = "ERR " + text
        self.server.count_error(message)
        if cmd is not None:
            count_rejected(self.server, cmd)
        return False, self._err_table(message, True)

    def _rejected_as_is(self, message, cmd):
        """A command the script may not run, refused with the server's own text."""
        self._ldb_error("-" + message + "\r\n")
        self.server.count_error(message)
        count_rejected(self.server, cmd)
        return False, self._err_table(message, True)

    def _lookup(self, run, argv):
        """The command a script's call names (a subcommand's own), or None;
        noted for the quick path (_lua_call) when none of _command's checks
        but arity and the dispatcher's gates can refuse it in this run's
        mode."""
        table = self.server.command_table
        cmd = table.get(argv[0])
        if cmd is None:
            cmd = table.get(argv[0].lower())
            if cmd is None:
                return None
        if cmd.subcommands is not None:
            if len(argv) < 2:
                return cmd      # (its arity refuses it)
            return cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
        if run.quick is not None and "noscript" not in cmd.flags \
                and not (run.readonly and (cmd.write or "may_replicate" in cmd.flags)):
            run.quick[argv[0]] = cmd
        return cmd

    def _command(self, raise_error, args):
        run = self.run
        server = self.server
        if run is None:
            return False, self._err_table("ERR redis.call is only valid inside a script")
        argv = self._argv(args)
        if type(argv) is tuple:
            return argv
        fake = run.fake
        ldb = self.ldb
        if ldb is not None:     # the debugger logs the call when stepping
            ldb.log_command(argv)

        cmd = self._lookup(run, argv)
        if cmd is None:
            return self._rejected("Unknown command called from script")
        n = len(argv)
        if (cmd.arity > 0 and n != cmd.arity) or n < -cmd.arity:
            return self._rejected("Wrong number of args calling command from script", cmd)
        if "noscript" in cmd.flags and not server.script_disable_deny_script:
            # DEBUG SET-DISABLE-DENY-SCRIPTS 1 lifts this (Valkey's tests use it)
            return self._rejected("This Redis command is not allowed from script", cmd)
        plain = run.plain
        if not plain and server.replica_link is not None and "stale" not in cmd.flags \
                and replica.running_stale(server):
            return self._rejected("Can not execute the command on a stale replica", cmd)
        if server.acl_check is not None:
            denied = server.acl_check(fake, cmd, argv)
            if denied is not None:
                if denied.startswith("NOPERM "):
                    denied = denied[7:]
                return self._rejected("ACL failure in script: " + denied, cmd)
        if run.readonly and (cmd.write or "may_replicate" in cmd.flags):
            return self._rejected("Write commands are not allowed from read-only scripts.", cmd)
        if not plain and cmd.write and not run.write_dirty:
            if server.replica_link is not None and replica.refuses_writes(server, run.caller):
                return self._rejected_as_is(replica.READONLY, cmd)
            if server.disk_error is not None:
                message = server.disk_error
                server.count_error(message)
                count_rejected(server, cmd)
                return False, self._err_table(message, True)
            if no_good_replicas(server):
                return self._rejected_as_is(NOREPLICAS, cmd)
        if server.maxmemory and cmd.denyoom and not run.write_dirty and \
                (run.flags is None or "allow_oom" not in run.flags) and server.over_maxmemory():
            self._ldb_error("-" + errors.OOM + "\r\n")
            server.count_error(errors.OOM)
            count_rejected(server, cmd)
            return False, self._err_table(errors.OOM, True)
        if cmd.write:
            run.write_dirty = True
        if not plain and server.cluster is not None:   # scriptVerifyClusterState
            message = server.cluster.script_check(run, cmd, argv)    # (hotkv.cluster.state)
            if message is not None:
                return self._rejected(message, cmd)
        fake.out = []
        # (_call_retargeted: redis.set_repl narrowed where the effects go)
        reply = (script_call if run.repl == 3 else self._call_retargeted)(fake, cmd, argv)
        if server.monitors and not cmd.admin and "skip_monitor" not in cmd.flags:
            feed_monitors(server, fake.db.index, b"lua", cmd, argv)
        if reply is not ENCODED:        # (the handler's value, as it is)
            if ldb is None:
                reply = self._raw_value(reply, fake)
                if reply is not ENCODED:
                    return True, reply
            else:                       # (the debugger shows the reply as sent)
                encode(reply, fake.out, fake.resp3)
        out = fake.out
        data = out[0] if len(out) == 1 else b"".join(out)
        fake.out = []
        if not data:    # the command replied nothing (CLIENT REPLY OFF, say)
            return True, None
        if ldb is None:
            value = self._quick_reply(data, fake.resp3)
            if value is not None:
                return True, value
        value, _ = self._parse(data, 0)
        if ldb is not None:
            ldb.log_reply(data)
        if raise_error and data[0] == 45:       # '-'
            return False, value
        return True, value

    def _raw_value(self, reply, fake):
        """script_call's value as the prelude's wrapper takes it (as
        _quick_reply reads the same reply encoded), or ENCODED with the
        reply written to ``fake.out`` (an array past FLAT_MAX)."""
        t = type(reply)
        if t is bytes or t is int:
            return reply
        if reply is None:
            return None if fake.resp3 else False
        if t is not list:                   # a status (Simple)
            return self._status, reply
        if len(reply) <= FLAT_MAX:
            if None in reply and not fake.resp3:
                return (self._array, *[False if x is None else x for x in reply])
            return (self._array, *reply)
        encode(reply, fake.out, fake.resp3)
        return ENCODED

    def _argv(self, args):
        """A call's arguments as a command's argv, or (False, error table)."""
        if not args:
            self._ldb_error("Please specify at least one argument for this call")
            return False, self._err_table("ERR Please specify at least one argument for this call")
        argv = []
        for a in args:
            t = type(a)
            if t is bytes:
                argv.append(a)
            elif (t is int or t is float):
                argv.append(number_arg(a))
            else:
                self._ldb_error("Command arguments must be strings or integers")
                return False, self._err_table("ERR Command arguments must be strings or integers")
        return argv

    def _quick_reply(self, data: bytes, resp3: bool):
        """The common replies as the prelude's wrapper takes them, or None:
        an integer or a bulk string as it is (false for a nil), STATUS and
        the text ({ok = text}), ARRAY and the items of a flat array ({...}):
        the wrapper makes the table in Lua, for a fraction of the cost of a
        table made from Python."""
        kind = data[0]
        if kind == 58:                      # ':'
            return int(data[1:-2])
        if kind == 36:                      # '$'
            if data[1] == 45:               # '$-1'
                return False
            return data[data.index(b"\r\n") + 2:-2]
        if kind == 43:                      # '+'
            return self._status, data[1:-2]
        if kind == 42:                      # '*'
            if resp3:
                items = _flat_array(data)
            elif b"\r\n+" in data:       # (a status item: hiredis reads it as a string)
                return None
            else:                           # RESP2: hiredis reads it, C-fast
                reader = self._reader
                reader.feed(data)
                items = reader.gets()
                if type(items) is not list or len(items) > FLAT_MAX or \
                        not _FLAT_TYPES.issuperset(map(type, items)):
                    return None
                if None in items:           # a nil bulk: false, as Valkey's Lua gets it
                    items = [False if x is None else x for x in items]
            if items is not None:
                return (self._array, *items)
        return None

    def _call_retargeted(self, fake, cmd, argv):
        """Run a script's command (script_call: its reply value or
        ENCODED); what it appends to ``prop_pending`` goes
        where redis.set_repl says: nowhere (dropped), or to the AOF or the
        replicas only (noted in ``run.targets``)."""
        server = self.server
        run = self.run
        mark = len(server.prop_pending)
        reply = script_call(fake, cmd, argv)
        pending = server.prop_pending
        if len(pending) <= mark:
            return reply
        if run.repl == 0:
            del pending[mark:]
            return reply
        if run.targets is None:
            run.targets = {}
        for i in range(mark, len(pending)):
            run.targets[i] = run.repl
        return reply

    # RESP -> Lua -------------------------------------------------------
    def _parse(self, data: bytes, pos: int):
        end = data.index(b"\r\n", pos)
        kind = data[pos:pos + 1]
        line = data[pos + 1:end]
        pos = end + 2
        if kind == b"$":
            n = int(line)
            if n < 0:
                return False, pos
            return data[pos:pos + n], pos + n + 2
        if kind == b":":
            return int(line), pos
        if kind == b"+":
            t = self._table()
            t[b"ok"] = line
            return t, pos
        if kind == b"-":
            if self.ldb is not None:
                self._ldb_error(data[pos - len(line) - 3:pos - 2])
            text = line
            sp = text.find(b" ")
            if sp < 0:
                text = b"ERR " + text
            t = self._table()
            t[b"err"] = text.rstrip(b"\r\n")
            t[b"ignore_error_stats_update"] = True
            return t, pos
        if kind == b"*" or kind == b">":
            n = int(line)
            if n < 0:
                return False, pos
            items = []
            for _ in range(n):
                v, pos = self._parse(data, pos)
                items.append(v)
            if n <= FLAT_MAX:
                # made in Lua ({...}): its array part holds a nil item as
                # Valkey's lua_createtable(n) does, so # counts the same
                return self._pack(*items), pos
            return self._table_from(items), pos
        if kind == b"%":
            n = int(line)
            inner = self._table()
            for _ in range(n):
                k, pos = self._parse(data, pos)
                v, pos = self._parse(data, pos)
                if k is not None:
                    inner[k] = v
            t = self._table()
            t[b"map"] = inner
            return t, pos
        if kind == b"~":
            n = int(line)
            inner = self._table()
            for _ in range(n):
                k, pos = self._parse(data, pos)
                if k is not None:
                    inner[k] = True
            t = self._table()
            t[b"set"] = inner
            return t, pos
        if kind == b"_":
            return None, pos
        if kind == b"#":
            return line == b"t", pos
        if kind == b",":
            t = self._table()
            t[b"double"] = _parse_double(line)
            return t, pos
        if kind == b"(":
            t = self._table()
            t[b"big_number"] = line
            return t, pos
        if kind == b"=":
            n = int(line)
            raw = data[pos:pos + n]
            inner = self._table()
            inner[b"string"] = raw[4:]
            inner[b"format"] = raw[:3]
            t = self._table()
            t[b"verbatim_string"] = inner
            return t, pos + n + 2
        if kind == b"|":
            n = int(line)
            for _ in range(2 * n):
                _, pos = self._parse(data, pos)
            return self._parse(data, pos)
        raise ValueError("unexpected reply type %r" % kind)


def feed_targeted(server, run):
    """At the script's end, when set_repl narrowed some of its commands:
    its propagated commands go out now, each to its sinks (the AOF writer,
    the replicas' stream), in order, as one unit per sink (a MULTI/EXEC when
    more than one), as Valkey's propagatePendingCommands feeds each op to
    its targets."""
    pending = server.prop_pending
    mark = run.prop_mark
    entries = pending[mark:]
    del pending[mark:]
    targets = run.targets
    run.targets = None
    sink = server.aof
    if sink is None or not entries:
        return
    aof_part = [e for i, e in enumerate(entries, mark) if targets.get(i, 3) & 1]
    repl_part = [e for i, e in enumerate(entries, mark) if targets.get(i, 3) & 2]
    writer = server.aof_writer
    if sink is writer:                          # a replica: its own AOF only
        feeds = ((writer, aof_part),)
    elif hasattr(sink, "first") and hasattr(sink, "second"):   # server._Tee
        feeds = ((sink.first, aof_part), (sink.second, repl_part))
    elif hasattr(sink, "writer") and hasattr(sink, "repl"):    # replication.CountedAOF
        feeds = ((sink.writer, aof_part),)
        if repl_part:
            n = len(repl_part)
            sink.repl.master_repl_offset += 1 if n == 1 else n + 2
    else:                                       # the replicas' stream only
        feeds = ((sink, repl_part),)
    for target, part in feeds:
        if part:
            target.feed(part)
    run.caller.woff = server.repl.master_repl_offset   # what WAIT waits for


def _quick_argv(args):
    """The quick path's argv when some arguments are numbers (converted as
    number_arg does), or [] when one is neither a string nor a number."""
    argv = []
    append = argv.append
    for a in args:
        t = type(a)
        if t is bytes:
            append(a)
        elif t is int:
            append(b"%d" % a)
        elif t is float:
            append(number_arg(a))
        else:
            return []
    return argv


FLAT_MAX = 7000       # items a reply passes to Lua as values (its stack takes 8,000)
_FLAT_TYPES = frozenset((bytes, int, type(None)))


def _flat_array(data: bytes):
    """The items of a RESP array of bulk strings, integers and RESP3 nulls
    (a nil bulk is false, as Valkey's Lua gets it; a null is nil), or None
    for any other array (nested, other RESP3 types, a null array, more than
    FLAT_MAX items)."""
    end = data.index(b"\r\n")
    n = int(data[1:end])
    if n < 0 or n > FLAT_MAX:
        return None
    items = []
    append = items.append
    pos = end + 2
    index = data.index
    for _ in range(n):
        kind = data[pos]
        end = index(b"\r\n", pos)
        if kind == 36:                  # '$'
            size = int(data[pos + 1:end])
            if size < 0:
                append(False)
                pos = end + 2
            else:
                pos = end + 2 + size
                append(data[end + 2:pos])
                pos += 2
        elif kind == 58:                # ':'
            append(int(data[pos + 1:end]))
            pos = end + 2
        elif kind == 95:                # '_': RESP3's null, nil in Lua
            append(None)
            pos = end + 2
        else:
            return None
    return items


def _parse_double(line: bytes) -> float:
    s = line.decode()
    if s in ("inf", "+inf"):
        return math.inf
    if s == "-inf":
        return -math.inf
    return float(s)


def feed_monitors(server, dbindex: int, origin: bytes, cmd, argv):
    """MONITOR lines the dispatcher does not write: the EVAL itself (flagged
    skip_monitor, shown before it runs, as Valkey does) and the script's
    commands, shown as coming from "lua"."""
    line = b"+%.6f [%d %s] %s\r\n" % (server.clock.time(), dbindex, origin,
                                        b" ".join([quoted(a) for a in redacted(cmd, argv)]))
    for mon in list(server.monitors):
        if not mon.closed:
            mon.add_raw(line)
            mon.schedule_flush()
