"""EVAL / EVALSHA / EVAL_RO / EVALSHA_RO and SCRIPT.

The Lua runtime, the sandbox and the conversions live in hotkv.lua
(``hotkv.lua.engine``); this module parses the commands and hands the
reply over.

Invariants:
* a script's effects are propagated command by command (each redis.call that
  wrote went through ``dispatch.call`` and was collected as a nested call);
  the EVAL itself never is (``prop_override = []``, as EXEC), so the AOF
  logs a script that wrote several commands as one MULTI/EXEC unit;
* the reply is written once, complete (``add_raw``), and the handler returns
  ``BLOCKED`` to say so, as EXEC does.
* a client after SCRIPT DEBUG YES/SYNC runs EVAL in a debugging session
  (``hotkv.lua.ldb``: the session, its fork in YES mode, the close at its
  end); EVALSHA is refused for it, as Valkey refuses it;
* a queued EVAL brings its script's declared flags to the transaction
  (``queued_flags``, read by the dispatcher's MULTI queue).
"""

from __future__ import annotations

import hashlib

from ..core.blocking import BLOCKED
from ..core.registry import command, container, spec
from ..core.stats import count_call
from ..lua import ldb
from ..lua.calls import feed_monitors
from ..lua.engine import ScriptError, engine, parse_shebang
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.replies import help_reply
from ..protocol.resp import OK
from ..protocol.util import string2ll

NOSCRIPT = "NOSCRIPT No matching script."


def _eval_keys(argv):
    if len(argv) < 3:
        return []
    n = string2ll(argv[2])
    if n is None or n <= 0 or n > len(argv) - 3:
        return []
    return list(range(3, 3 + n))


def _run(c, argv, evalsha: bool, ro: bool):
    eng = engine(c.server)
    if eng.ldb_clients and c.id in eng.ldb_clients:
        # SCRIPT DEBUG YES/SYNC: the debugger's session (hotkv.lua.ldb)
        return _run_debugged(c, argv, evalsha, ro)
    return _run_plain(c, argv, evalsha, ro, eng)


def _run_debugged(c, argv, evalsha: bool, ro: bool):
    if evalsha:
        # As Valkey: a sha of the wrong length is NOSCRIPT first.
        if len(argv[1]) != 40:
            raise CommandError(NOSCRIPT)
        raise CommandError("ERR Please use EVAL instead of EVALSHA for debugging")
    if c.tls():
        raise CommandError("ERR SCRIPT DEBUG over TLS is not supported by hotkv")
    if c.fd < 0:
        raise CommandError("ERR SCRIPT DEBUG needs a client connection")
    ldb.debug_eval(c, argv, lambda: _run_plain(c, argv, evalsha, ro))
    return BLOCKED


def _run_plain(c, argv, evalsha: bool, ro: bool, eng=None):
    count = argv[2]
    if len(count) == 1 and 48 <= count[0] <= 57:     # (one digit: the common case)
        n = count[0] - 48
    else:
        n = string2ll(count)
    if n is None:
        raise CommandError(errors.NOT_INTEGER)
    if n > len(argv) - 3:
        raise CommandError("ERR Number of keys can't be greater than number of args")
    if n < 0:
        raise CommandError("ERR Number of keys can't be negative")
    if eng is None:
        eng = engine(c.server)
    server = c.server
    if server.monitors:
        origin = (b"unix:%s" % server.config.values["unixsocket"].encode()
                  if c.addr == c.laddr else c.addr.encode())
        feed_monitors(server, c.db.index, origin, c.server.current_cmd, argv)
    if evalsha:
        sha = argv[1].lower()
        script = eng.scripts.get(sha) if len(sha) == 40 else None
        if script is None:
            raise CommandError(NOSCRIPT)
    else:
        try:
            sha = eng.create(argv[1])
        except ScriptError as e:
            raise CommandError(e.message)
        script = eng.scripts[sha]
    if sha in eng.lru:    # both EVAL and EVALSHA make a script recently used (touch)
        eng.lru.move_to_end(sha)
    try:
        out = eng.execute(c, script, sha, argv[3:3 + n], argv[3 + n:], ro)
    except ScriptError as e:
        if e.counted:
            raise CommandError(e.message)
        # An error already counted in the error stats (the script's command's
        # own): the script's call still failed, as Valkey counts it.
        count_call(server, server.current_cmd, failed=True)
        c.add_error(e.message)
        out = None
    finally:
        # The script's commands were propagated one by one, never the EVAL.
        server.prop_override = []
    deliver_script_reply(c, out)
    return BLOCKED


def deliver_script_reply(c, out):
    """Hand a finished script's (or function's) reply to its caller; an
    error reply the script returned counts as a failed call, as in Valkey.
    ``out`` is None when the run raised (the error is already added)."""
    if out is not None:
        data = out[0] if len(out) == 1 else b"".join(out)
        if data[:1] == b"-":
            count_call(c.server, c.server.current_cmd, failed=True)
        c.add_raw(data)


def _queued_flags(c, argv) -> int:
    """The flags a queued EVAL adds to its transaction (Valkey's
    evalGetCommandFlags): a script that declares flags (a shebang) is a
    write unless ``no-writes`` (bit 2 of ``multi_flags``) and may grow memory
    unless ``no-writes`` or ``allow-oom`` (bit 1), so EXEC meets the replica's
    READONLY and the OOM gates as the script would; a script without a
    shebang keeps EVAL's own flags."""
    if len(argv) < 2:
        return 0
    eng = engine(c.server)
    if argv[0].lower().startswith(b"evalsha"):
        script = eng.scripts.get(argv[1].lower()) if len(argv[1]) == 40 else None
        if script is None:
            return 0
        flags = script.flags
    else:
        script = eng.scripts.get(hashlib.sha1(argv[1]).hexdigest().encode())
        if script is not None:
            flags = script.flags
        else:
            try:
                flags = parse_shebang(argv[1])[0]
            except ValueError:
                return 0
    if flags is None or "no_writes" in flags:
        return 0
    return 2 if "allow_oom" in flags else 3


_EVAL_FLAGS = "noscript skip_monitor may_replicate no_mandatory_keys stale"
_EVAL_RO_FLAGS = "noscript skip_monitor no_mandatory_keys stale readonly"
# Valkey's key specs: numkeys at argv[2], the keys after it; a script's use
# of them is unknown, so EVAL assumes the worst.
_RW_NOTES = "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"
_RO_NOTES = "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"


@command("eval", -3, _EVAL_FLAGS, keys_fn=_eval_keys, group="scripting", since="2.6.0",
         key_specs=(spec("RW access update", "index 2", "keynum 0 1 1", _RW_NOTES),),
         args="script numkeys:i [key:k]... [arg]...",
         complexity="Depends on the script that is executed.")
def eval_(c, argv):
    """Executes a server-side Lua script."""
    return _run(c, argv, False, False)


@command("evalsha", -3, _EVAL_FLAGS, keys_fn=_eval_keys, group="scripting", since="2.6.0",
         key_specs=(spec("RW access update", "index 2", "keynum 0 1 1"),),
         args="sha1 numkeys:i [key:k]... [arg]...",
         complexity="Depends on the script that is executed.")
def evalsha(c, argv):
    """Executes a server-side Lua script by SHA1 digest."""
    return _run(c, argv, True, False)


@command("eval_ro", -3, _EVAL_RO_FLAGS, keys_fn=_eval_keys, group="scripting", since="7.0.0",
         key_specs=(spec("RO access", "index 2", "keynum 0 1 1", _RO_NOTES),),
         args="script numkeys:i [key:k]... [arg]...",
         complexity="Depends on the script that is executed.")
def eval_ro(c, argv):
    """Executes a read-only server-side Lua script."""
    return _run(c, argv, False, True)


@command("evalsha_ro", -3, _EVAL_RO_FLAGS, keys_fn=_eval_keys, group="scripting",
         since="7.0.0", key_specs=(spec("RO access", "index 2", "keynum 0 1 1"),),
         args="sha1 numkeys:i [key:k]... [arg]...",
         complexity="Depends on the script that is executed.")
def evalsha_ro(c, argv):
    """Executes a read-only server-side Lua script by SHA1 digest."""
    return _run(c, argv, True, True)


container("script", group="scripting", summary="A container for Lua scripts management commands.",
          since="2.6.0", complexity="Depends on subcommand.")

_HELP = [
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined",
    "     by the lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "SHOW <sha1>",
    "    Show a script from the scripts cache.",
]


@command("script|debug", 3, "noscript", group="scripting", since="3.2.0",
         args="mode(YES | SYNC | NO)", complexity="O(1)")
def script_debug(c, argv):
    """Sets the debug mode of server-side Lua scripts."""
    if ldb.has_pending_replies(c):
        raise CommandError("ERR SCRIPT DEBUG must be called outside a pipeline")
    mode = argv[2].lower()
    if mode == b"no":
        ldb.set_mode(c, None)
        return OK
    if mode in (b"yes", b"sync"):
        ldb.set_mode(c, mode)
        return OK
    raise CommandError("ERR Use SCRIPT DEBUG YES/SYNC/NO")


@command("script|exists", -3, "noscript", group="scripting", since="2.6.0", args="sha1...",
         complexity="O(N) with N being the number of scripts to check (so checking a single "
                    "script is an O(1) operation).")
def script_exists(c, argv):
    """Determines whether server-side Lua scripts exist in the script cache."""
    scripts = engine(c.server).scripts
    return [1 if a in scripts else 0 for a in argv[2:]]


@command("script|flush", -2, "noscript may_replicate", group="scripting", since="2.6.0",
         args="flush-type[ASYNC | SYNC]@6.2.0",
         complexity="O(N) with N being the number of scripts in cache",
         history=(("6.2.0", "Added the `ASYNC` and `SYNC` flushing mode modifiers."),))
def script_flush(c, argv):
    """Removes all server-side Lua scripts from the script cache."""
    if len(argv) == 3 and argv[2].lower() in (b"sync", b"async"):
        pass
    elif len(argv) != 2:
        raise CommandError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    engine(c.server).flush()
    return OK


@command("script|help", 2, "loading stale", group="scripting", since="5.0.0", complexity="O(1)")
def script_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply("SCRIPT", _HELP)


def kill_running(server, is_eval: bool):
    """SCRIPT KILL (is_eval) / FUNCTION KILL: end the running script or
    function, with Valkey's refusals (scriptKill) as CommandError."""
    run = engine(server).run
    running_eval = run is not None
    if run is None:
        functions = server.functions
        run = functions.engine.run if functions is not None else None
    if run is None:
        raise CommandError("NOTBUSY No scripts in execution right now.")
    if run.write_dirty:
        raise CommandError(
            "UNKILLABLE Sorry the script already executed write commands against the "
            "dataset. You can either wait the script termination or kill the server in a "
            "hard way using the SHUTDOWN NOSAVE command.")
    if is_eval and not running_eval:
        raise CommandError(run.busy_error)       # a function: FUNCTION KILL's
    if not is_eval and running_eval:
        raise CommandError(run.busy_error)       # a script: SCRIPT KILL's
    run.killed = True


@command("script|kill", 2, "noscript allow_busy", group="scripting", since="2.6.0",
         complexity="O(1)")
def script_kill(c, argv):
    """Terminates a server-side Lua script during execution."""
    kill_running(c.server, True)
    return OK


@command("script|load", 3, "noscript stale", group="scripting", since="2.6.0", args="script",
         complexity="O(N) with N being the length in bytes of the script body.")
def script_load(c, argv):
    """Loads a server-side Lua script to the script cache."""
    try:
        return engine(c.server).create(argv[2], load=True)
    except ScriptError as e:
        raise CommandError(e.message)


@command("script|show", 3, "noscript", group="scripting", since="8.0.0", args="sha1",
         complexity="O(1).")
def script_show(c, argv):
    """Show server-side Lua script in the script cache."""
    script = engine(c.server).scripts.get(argv[2]) if len(argv[2]) == 40 else None
    if script is None:
        raise CommandError(NOSCRIPT)
    return script.body


def _command_metadata():
    """COMMAND INFO as Valkey shows it: the _RO forms list no @read category."""
    for fn in (eval_ro, evalsha_ro):
        fn.command.acl_categories = fn.command.acl_categories - {"read"}


_command_metadata()
for _fn in (eval_, evalsha, eval_ro, evalsha_ro):
    _fn.queued_flags = _queued_flags
