"""The dispatcher: from argv to reply, with every cross-cutting rule in one place.

``process_commands`` runs a read's worth of commands, one after another, as
Redis's processInputBuffer does; for each, it is Redis's processCommand
(``process_command`` is the same for one command): look the command up, check
existence, arity, protected commands, authentication, MULTI restrictions,
ACL permission, OOM, disk errors, RESP2 subscribed mode and AOF loading --
in Redis's order and with Redis's texts -- then either queue it (inside
MULTI) or ``call`` it and serve blocked clients whose keys became ready.

``serve_ready_keys`` is Valkey's handleClientsBlockedOnKeys: it re-runs
the commands of clients whose keys became ready (the waiters' bookkeeping
is ``hotkv.core.blocking``'s, which runs no command and so sits below this
module).

``security_warning`` is Valkey's securityWarningCommand: a command named
POST or ``Host:`` (any case) is an HTTP request sent to us by a web page
(cross protocol scripting), not a command; the connection is dropped with
its replies not yet sent, and nothing after it in the read runs.  Checked in
``_check`` before the lookup (neither name is in the table), as Valkey's
processCommand does first, before authentication.

``call`` is Redis's call(): runs the handler, times it, counts it (on the
server's own ``server.cmdstats``, hotkv.core.stats.count_call), encodes
its reply, and -- if the data changed (``server.dirty`` moved) -- hands the
command, or the deterministic form the handler asked for, to propagation
(the AOF).  Nested calls (EXEC running its queue, a script's server.call)
propagate as one unit: the outermost call -- the one that finds no
``server.current_client`` -- flushes.

``script_call`` is call() as a script's command meets it (Valkey's
scriptCall -> call(), nested in the EVAL's own call): the same bookkeeping
as ``call``'s nested path -- its time, stats counted as a nested call's
(calls, usec, failed_calls, the histogram; tot-cmds for the script's
caller), the slow log's gate, client tracking of the caller, propagation
of what it changed -- but a reply of the common shapes (a string, an
integer, nil, a status, a flat array of those) is handed back as it is,
not encoded: the script turns it into Lua values itself (hotkv.lua.calls).
Used by the script path only; a client's command never comes here.

Fast path: ``process_commands``' plain-command branch (table hit, arity,
cluster mode's redirection -- one attribute test when it is off -- and
RESP2 subscribed checks only) vs ``_check``: tests/test_fastpaths_server.py::
test_dispatcher_fast_loop_equals_checks (mixed-case names take ``_check``).
"""

from __future__ import annotations

import logging
import time

from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import QUEUED, Simple, encode
from .blocking import BLOCKED, detach
from .latency import FOLD_AT, fold as fold_latency
from .multi import discard_transaction
from .pause import may_replicate
from .stats import count_call, count_rejected

_time = time.time
log = logging.getLogger("hotkv")


class JournalLog(list):
    """``server.test_hooks`` while the command journal alone records, without
    replies (hotkv.testing.journal owns it and its layout): ``call`` appends a
    command a client sent to it itself; any other command (EXEC's, a script's,
    a server-side client's, a served blocked one) goes to ``hook``."""

    __slots__ = ("hook",)

    def __call__(self, client, cmd, argv, func, outer):
        return self.hook(client, cmd, argv, func, outer)


def unknown_command_error(argv) -> str:
    name = _cstr(argv[0], 128)
    args = ""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += "'%s' " % _cstr(a, 128 - len(args))
    return errors.UNKNOWN_COMMAND % (name, args)


def _cstr(data: bytes, limit: int) -> str:
    """As C's %.Ns on a binary string: stops at NUL, at most limit bytes."""
    nul = data.find(b"\0")
    if nul >= 0:
        data = data[:nul]
    return data[:limit].decode("utf-8", "surrogateescape")


def reject(client, message: str, cmd=None):
    """Refuse a command before it runs (Redis's rejectCommand)."""
    if client.multi:
        client.multi_error = True
    if cmd is not None:
        count_rejected(client.server, cmd)
        if cmd.name == "exec":
            # A refused EXEC aborts the transaction (Redis's execCommandAbort).
            discard_transaction(client)
            message = "EXECABORT Transaction discarded because of: " + message
    client.server.count_error(message)
    client.add_error(message)
    if client.tracking and client.tracking.caching and not client.multi and (
            cmd is None or cmd.parent is None or cmd.parent.name != "client"):
        client.tracking.caching = False   # a refused command ends CLIENT CACHING too


def process_command(client, argv) -> None:
    process_commands(client, (argv,))


def process_commands(client, commands) -> int:
    """process_command for each of commands in turn (a read's worth), up to
    and including one that blocks or closes the client; returns how many
    ran.  One loop for the whole read keeps a function call and the table
    lookups out of every command."""
    server = client.server
    table = server.command_table    # rename-command makes it a copy of TABLE
    done = 0
    clock = 0.0
    for argv in commands:
        done += 1
        cmd = table.get(argv[0])
        if (cmd is not None and cmd.plain and client.authenticated and not client.multi
                and not client.reply_mode and not client.skip_this and not server.gated):
            # What most commands meet: none of the checks in _check but
            # these two can refuse them, and they come in this order there.
            n = len(argv)
            arity = cmd.arity
            if (arity > 0 and n != arity) or n < -arity:
                reject(client, errors.WRONG_ARGS % cmd.name, cmd)
                cmd = None
            elif server.cluster is not None and server.cluster.refuse(client, cmd, argv):
                cmd = None      # cluster mode's redirection (hotkv.cluster.state)
            elif not client.resp3 and (client.channels or client.patterns or
                                       client.shard_channels) and not cmd.pubsub_ok:
                reject(client, errors.SUBSCRIBED % cmd.name, cmd)
                cmd = None
        else:
            server.input_done = done
            cmd = _check(client, server, cmd, argv)
        if cmd is not None:
            # The clock read that ends one command starts the next.
            clock = call(client, cmd, argv, clock)
            if server.ready_keys:
                serve_ready_keys(server)
                clock = 0.0
        if client.blocked is not None or client.closing:
            break
    return done


def _check(client, server, cmd, argv):
    """Every check, in Redis's order; the command to run, or None when it was
    refused, postponed or queued (MULTI)."""
    if client.reply_mode:
        if client.reply_mode == 2:  # CLIENT REPLY SKIP: drop this command's reply
            client.reply_mode = 0
            client.skip_this = True
    elif client.skip_this:  # left over by a rejected command
        client.skip_this = False
    if cmd is None:
        name = argv[0].lower()
        if name == b"post" or name == b"host:":
            return security_warning(client)
        cmd = server.command_table.get(name)
        if cmd is None:
            return reject(client, unknown_command_error(argv))
    if cmd.subcommands is not None and len(argv) >= 2:
        sub = cmd.subcommands.get(argv[1])
        if sub is None:
            sub = cmd.subcommands.get(argv[1].lower())
            if sub is None:
                return reject(client, errors.UNKNOWN_SUBCOMMAND % (
                    _cstr(argv[1], 128), cmd.name.upper()))
        cmd = sub
    n = len(argv)
    arity = cmd.arity
    if (arity > 0 and n != arity) or n < -arity:
        return reject(client, errors.WRONG_ARGS % cmd.name, cmd)
    if cmd.admin and cmd.func is not None and server.protected_denied(client, cmd):
        return reject(client, server.protected_denied(client, cmd), cmd)
    if not client.authenticated and not cmd.noauth:
        return reject(client, errors.NOAUTH, cmd)
    if client.multi and cmd.no_multi:
        return reject(client, errors.NOT_IN_MULTI, cmd)
    if server.gated:   # one of the rare gates below is on (hotkv.server._gate)
        if _gates(client, server, cmd, argv):
            return None
    elif server.cluster is not None and server.cluster.refuse(client, cmd, argv):
        return None
    elif not client.resp3 and (client.channels or client.patterns or client.shard_channels) \
            and not cmd.pubsub_ok:
        return reject(client, errors.SUBSCRIBED % cmd.name, cmd)
    if client.multi and not cmd.multi_exempt:
        client.multi_queue.append((cmd, argv))
        if cmd.denyoom:
            client.multi_flags |= 1
        if cmd.write:
            client.multi_flags |= 2
        declared = getattr(cmd.func, "queued_flags", None)
        if declared is not None:   # EVAL: what its script declared (hotkv.commands.scripting)
            client.multi_flags |= declared(client, argv)
        if (cmd.write or "may_replicate" in cmd.flags) and may_replicate(server, cmd, argv):
            client.multi_flags |= 4     # CLIENT PAUSE WRITE holds the EXEC (hotkv.core.pause)
        client.add_reply(QUEUED)
        return None
    return cmd


# When security_warning last logged (wall clock, seconds): a function-static
# in Valkey, so one per process here too.  It logs at most once a minute, so
# a page that keeps posting cannot flood the log.
_security_logged = 0.0


def security_warning(client) -> None:
    """Valkey's securityWarningCommand: log (rate-limited) and drop the client
    without sending what it has queued (freeClientAsync)."""
    global _security_logged
    now = int(_time())
    if abs(now - _security_logged) > 60:
        _security_logged = now
        host, _, port = client.addr.rpartition(":")
        peer = "from %s:%s " % (host.strip("[]"), port) if host else ""
        log.warning("Possible SECURITY ATTACK detected. It looks like somebody is sending POST "
                    "or Host: commands to Redis. This is likely due to an attacker attempting "
                    "to use Cross Protocol Scripting to compromise your Redis instance. "
                    "Connection %saborted.", peer)
    client.out.clear()
    client.close()


def _gates(client, server, cmd, argv) -> bool:
    """The checks that only a server with a gate on needs, in Redis's order;
    True when the command was refused (or postponed)."""
    if server.acl_check is not None:
        message = server.acl_check(client, cmd, argv)
        if message is not None:
            reject(client, message, cmd)
            return True
    if server.cluster is not None and server.cluster.refuse(client, cmd, argv):
        return True    # Valkey's cluster redirection (hotkv.cluster.state)
    if server.clients_limit and server.client_evictor.before_command(client, argv):
        return True    # evicted itself (Valkey's evictClients, before performEvictions)
    if server.maxmemory and server.eviction.before_command() and (
            cmd.denyoom or (cmd.name == "exec" and client.multi_flags & 1)):
        # Evictions run before every command (Valkey's performEvictions);
        # when nothing more could be freed, what may grow memory is refused.
        reject(client, errors.OOM, cmd)
        return True
    if server.tracking_over:   # Valkey's trackingLimitUsedSlots, before the command
        server.tracking.limit_used_slots(client)
    if server.disk_error is not None and (cmd.write or cmd.name == "ping" or (
            cmd.name == "exec" and client.multi_flags & 2)):
        reject(client, server.disk_error, cmd)
        return True
    if server.repl_refuse and (cmd.write or (cmd.name == "exec" and client.multi_flags & 2)):
        reject(client, "NOREPLICAS Not enough good replicas to write.", cmd)
        return True
    repl_check = server.repl_check     # a replica (hotkv.replication.replica)
    if repl_check is not None and repl_check(client, cmd, argv, 0):
        return True    # READONLY
    if not client.resp3 and (client.channels or client.patterns or client.shard_channels) \
            and not cmd.pubsub_ok:
        reject(client, errors.SUBSCRIBED % cmd.name, cmd)
        return True
    if repl_check is not None and repl_check(client, cmd, argv, 1):
        return True    # MASTERDOWN
    if server.loading and "loading" not in cmd.flags:
        reject(client, errors.LOADING, cmd)
        return True
    if server.pause_check is not None and server.pause_check(client, cmd, argv):
        return True   # postponed by CLIENT PAUSE: it runs when the pause ends
    return False


def call(client, cmd, argv, start: float = 0.0) -> float:
    """Run one command: reply, stats, and propagation of what it changed.
    Returns the clock read that ended it; ``start``, when given, is a read
    taken just before (the end of the command before it in the same read)."""
    server = client.server
    outer = server.current_client
    if outer is None:
        # One clock read gives the command's time (expiry decisions) and the
        # start of its duration, as Redis's call() does.
        if not start:
            start = _time()
        if not server.cmd_time_lo <= start < server.cmd_time_next:
            # Another millisecond (most commands share the one before's;
            # a clock stepped back lands here too).  The float bounds may
            # sit a fraction of a microsecond off the real ones.
            if server.clock.time is _time:
                ms = int(start * 1000)
                server.cmd_time_ms = ms
                server.cmd_time_lo = ms / 1000
                server.cmd_time_next = (ms + 1) / 1000
            else:   # a test's clock (hotkv.core.clock): its ms and real-time bounds
                server.cmd_time_ms, server.cmd_time_lo, server.cmd_time_next = \
                    server.clock.window(start)
        server.current_client = client
    else:
        prev_cmd, prev_argv = server.current_cmd, server.current_argv
        start = _time()
    server.current_cmd = cmd
    server.current_argv = argv
    dirty = server.dirty
    func = cmd.func
    if server.test_hooks is not None:   # hotkv.testing: a fault or the journal is on
        hooks = server.test_hooks
        if (type(hooks) is JournalLog and outer is None and not client.reprocessing
                and not client.is_fake):
            # The journal alone, without replies: a command a client sent is
            # recorded here: a call was a quarter of the journal's cost (bench/journal.py).
            hooks.extend((len(argv), client.id, client.name, client.db.index, cmd,
                          server.cmd_time_ms))
            hooks.extend(argv)
        else:
            func = hooks(client, cmd, argv, func, outer)
    failed = False
    try:
        reply = func(client, argv)
    except CommandError as e:
        failed = True
        server.count_error(e.message)
        client.add_error(e.message)
    except Exception as e:  # a bug must cost one reply, never the server
        failed = True
        message = "ERR internal error in '%s': %s" % (cmd.name, type(e).__name__)
        server.count_error(message)
        client.add_error(message)
        server.log_exception(cmd, argv, e)
    else:
        # Client.add_reply, inlined: this is the path of every reply.
        if reply is not BLOCKED and not client.reply_mode and not client.skip_this:
            out = client.out
            mark = len(out)
            try:
                encode(reply, out, client.resp3)
            except TypeError as e:
                # A reply the encoder cannot write (a bug in a handler): what
                # it wrote of it goes, the client gets an error, never silence.
                del out[mark:]
                failed = True
                message = "ERR internal error in '%s': unencodable reply" % cmd.name
                server.count_error(message)
                client.add_error(message)
                server.log_exception(cmd, argv, e)
    # Client-side caching: the keys a read served, for the client on whose
    # behalf it ran (a script's or EXEC's caller); CLIENT CACHING's end.
    tracker = outer or client
    if tracker.tracking:
        server.tracking.after_call(tracker, cmd, argv, outer is None)
    end = _time()
    duration = end - start
    if duration >= server.slow_gate:
        # The slow log and the latency monitor (hotkv.core.latency.on_slow).
        server.on_slow(client, cmd, argv, duration)
    if client.blocked is None:
        # A command that blocked is counted once, when it is served or
        # times out (blocking.unblock), as Redis does.  tot-cmds: a script's
        # commands count for the client that ran the script.
        count_call(server, cmd, duration, client if outer is None else outer, failed)
    else:
        # Its time waits on the waiter, as Valkey's c->duration: added when it
        # is served or times out; nothing if it is rejected when re-run.
        client.blocked.duration += duration
        if failed:
            count_call(server, cmd, failed=True)
    if server.monitors:
        server.feed_monitors(client, cmd, argv)
    client.last_cmd = cmd.name
    if server.dirty != dirty and server.aof is not None:
        override = server.prop_override
        if override is not None:
            for entry in override:
                server.propagate(client.db.index if entry[0] is None else entry[0], entry[1])
        else:
            # Server.propagate inlined (its test is the one just made).
            server.prop_pending.append((client.db.index, argv))
    if server.prop_override is not None:
        server.prop_override = None
    if outer is not None:
        server.current_cmd, server.current_argv = prev_cmd, prev_argv
        st = server.cmdstats.get(cmd)
        if st is not None and len(st.lat_pending) > FOLD_AT:   # a script's millionth call
            fold_latency(st)
        return end
    # current_cmd / current_argv are left as they are: only the command that
    # runs reads them, and it has just set them.
    server.current_client = None
    server.el_cmd_sum += duration     # INFO's eventloop_duration_cmd_sum (hotkv.observe.loopstats)
    if server.pending_push:
        # Pub/sub messages to the client itself follow its reply (EXEC's whole array),
        # and then the invalidations of keys it changed (hotkv.clients.tracking).
        if server.tracking.pending:
            server.tracking.flush_pending(client)
        client.out.extend(server.pending_push)
        server.pending_push = []
        client.schedule_flush()
    if server.prop_pending:
        server.flush_propagation()
        client.woff = server.repl.master_repl_offset   # what WAIT waits for
    if client.skip_this:
        client.skip_this = False
    return end


# What script_call returns when the reply went to the client's output, as
# call() writes it (an error, an uncommon shape, no reply).
ENCODED = object()
# The replies script_call hands back as they are (a list: when its items are
# all of _RAW_ITEMS).
_RAW = frozenset((bytes, int, type(None), Simple, list))
_RAW_ITEMS = frozenset((bytes, int, type(None)))


def script_call(client, cmd, argv):
    """A script's command, run as ``call`` runs a nested command (the
    script's fake ``client``; its caller is ``server.current_client``), but
    its reply returned: the handler's value when it is a string, an integer,
    None, a status (Simple) or a list of strings, integers and Nones, else
    ENCODED with the reply in ``client.out`` as call() writes it (an error,
    other shapes, nothing under CLIENT REPLY OFF).  Outside a command (no
    current client) or with a test hook on, ``call`` runs it (ENCODED).

    Every effect is call()'s: the time and the stats of a nested command,
    the slow log's gate, the caller's client tracking, MONITOR (a fake
    client's command shows nothing here: the script path writes its "lua"
    line), last_cmd, propagation, the latency fold.
    tests/test_lua_script_call.py holds it to ``call``."""
    server = client.server
    outer = server.current_client
    if outer is None or server.test_hooks is not None:
        call(client, cmd, argv)
        return ENCODED
    prev_cmd, prev_argv = server.current_cmd, server.current_argv
    start = _time()
    server.current_cmd = cmd
    server.current_argv = argv
    dirty = server.dirty
    failed = False
    try:
        reply = cmd.func(client, argv)
    except CommandError as e:
        reply = ENCODED
        failed = True
        server.count_error(e.message)
        client.add_error(e.message)
    except Exception as e:  # a bug must cost one reply, never the server
        reply = ENCODED
        failed = True
        message = "ERR internal error in '%s': %s" % (cmd.name, type(e).__name__)
        server.count_error(message)
        client.add_error(message)
        server.log_exception(cmd, argv, e)
    else:
        t = type(reply)
        if reply is BLOCKED or client.reply_mode or client.skip_this:
            reply = ENCODED
        elif t not in _RAW or client.out or (
                t is list and not _RAW_ITEMS.issuperset(map(type, reply))):
            out = client.out
            mark = len(out)
            try:
                encode(reply, out, client.resp3)
            except TypeError as e:
                del out[mark:]
                failed = True
                message = "ERR internal error in '%s': unencodable reply" % cmd.name
                server.count_error(message)
                client.add_error(message)
                server.log_exception(cmd, argv, e)
            reply = ENCODED
    if outer.tracking:
        server.tracking.after_call(outer, cmd, argv, False)
    end = _time()
    duration = end - start
    if duration >= server.slow_gate:
        server.on_slow(client, cmd, argv, duration)
    if client.blocked is None:
        st = count_call(server, cmd, duration, outer, failed)
        if len(st.lat_pending) > FOLD_AT:      # a script's millionth call
            fold_latency(st)
    else:   # (a script's command cannot block: as call() does all the same)
        client.blocked.duration += duration
        if failed:
            count_call(server, cmd, failed=True)
    if server.monitors:
        server.feed_monitors(client, cmd, argv)
    client.last_cmd = cmd.name
    override = server.prop_override
    if server.dirty != dirty and server.aof is not None:
        if override is not None:
            for entry in override:
                server.propagate(client.db.index if entry[0] is None else entry[0], entry[1])
        else:
            server.prop_pending.append((client.db.index, argv))
    if override is not None:
        server.prop_override = None
    server.current_cmd, server.current_argv = prev_cmd, prev_argv
    return reply


def _carry_duration(client, waiter):
    """A re-run blocked command's earlier time: into its stats when it was
    served now, onto its new waiter when it blocked again."""
    again = client.blocked
    if again is None:   # into the entry call() just made
        count_call(client.server, waiter.cmd, waiter.duration)
    elif again is not waiter:
        again.duration += waiter.duration


def serve_ready_keys(server):
    """Serve waiters on every ready key, first come first served, until no
    key is ready (serving one key can make another ready)."""
    if server.yielding:
        # A busy script is running (a command allowed while BUSY got here):
        # its writes are served when it ends, as Valkey defers
        # handleClientsBlockedOnKeys inside a yielding command.
        return
    # Re-run commands change no ACL: one read of the gate (a property) per pass.
    acl_check = server.acl_check
    while server.ready_keys:
        ready = server.ready_keys
        server.ready_keys = []
        server.ready_set.clear()
        for db, key in ready:
            q = db.blocking.get(key)
            if not q:
                continue
            # Only the waiters present now (their seq is below the fence): a
            # re-blocked one goes to the tail and must not be served twice in
            # this pass.  Walked by position, not copied: a push to a queue
            # with thousands of workers serves the head and stops.
            fence = next(server.waiter_seq)
            pos = 0
            while pos < len(q):
                waiter = q[pos]
                if waiter.seq > fence:
                    break
                client = waiter.client
                if client.blocked is not waiter:   # pragma: no cover - invariant
                    pos += 1
                    continue
                if client.closed or client.closing:
                    # Going away (killed, aborted) before connection_lost ran:
                    # serving it would pop a job nobody receives.
                    detach(waiter)
                    continue
                value = db.data.get(key)
                if value is not None and db.expires and db.is_expired(key):
                    value = None
                if value is None:
                    if not waiter.unblock_on_nokey:
                        if not q.nokey:
                            break     # nobody left here wants a missing key
                        pos += 1
                        continue
                elif type(value) is not waiter.btype and not waiter.unblock_on_nokey:
                    pos += 1
                    continue
                # A command may say, cheaply, that re-running it would only
                # block again (XREAD/XREADGROUP woken by an unrelated write):
                # it then keeps its place, as re-blocking in order would.
                data = waiter.data
                if data is not None:
                    check = getattr(data, "still_waiting", None)
                    if check is not None and not (acl_check and acl_check(
                            client, waiter.cmd, waiter.argv)) and check(waiter):
                        pos += 1
                        continue
                detach(waiter)
                # Whatever runs now may change the queue anywhere: start again
                # from its head (waiters passed over are only checked again).
                pos = 0
                denied = acl_check and acl_check(client, waiter.cmd, waiter.argv)
                if denied:
                    # Its permissions changed while it waited: Redis re-checks.
                    reject(client, denied, waiter.cmd)
                    client.schedule_flush()
                    server.resume_client(client)
                    continue
                # A blocked client runs nothing else, so it is still on the
                # database it blocked in; re-run the command there.
                client.db = waiter.db
                client.reprocessing = waiter
                try:
                    call(client, waiter.cmd, waiter.argv)
                finally:
                    client.reprocessing = None
                if waiter.duration:
                    _carry_duration(client, waiter)
                if client.blocked is None:
                    # Redis counts the reply it writes as interaction: a worker
                    # blocked longer than `timeout` must not be dropped as idle
                    # right after getting its job.
                    client.last_interaction = server.clock.time()   # hotkv.core.clock
                    client.schedule_flush()
                    server.resume_client(client)
