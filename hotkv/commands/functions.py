"""FCALL / FCALL_RO and FUNCTION (LOAD, DELETE, LIST, FLUSH, DUMP, RESTORE,
STATS, KILL, HELP): Valkey functions, as valkey-server 8.1.8 answers them.

The registry, the Lua state the functions run in and the DUMP payload live
in hotkv.lua.functions; this module parses the commands, checks what
Valkey's processCommand checks from a function's flags (a function without
``no-writes`` counts as a write command, one without ``allow-oom`` as a
denyoom one) and hands the replies over.

Invariants (those of hotkv.commands.scripting):
* a function's effects are propagated command by command, never the FCALL
  (``prop_override = []``); FUNCTION LOAD / DELETE / FLUSH / RESTORE move
  ``dirty`` only when they changed the libraries, so they are propagated
  (the AOF logs them as they were sent) exactly when they succeeded;
* the FCALL reply is written once, complete (``add_raw``), and the handler
  returns ``BLOCKED`` to say so.
"""

from __future__ import annotations

import time

from ..core.blocking import BLOCKED
from ..core.registry import command, container, spec
from ..core.stats import count_call
from ..lua.busy import BUSY_SCRIPT
from ..lua.calls import NOREPLICAS, feed_monitors, no_good_replicas
from ..lua.engine import ScriptError, engine
from ..lua.functions import ENGINE_NAME, LOAD_TIMEOUT_MS, FunctionError, registry
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.replies import cstr, help_reply
from ..protocol.resp import OK, SetReply, Simple
from ..protocol.util import string2ll, stringmatch
from ..replication import replica_gate as replica
from .scripting import _RO_NOTES, _RW_NOTES, _eval_keys, deliver_script_reply, kill_running


def _fcall(c, argv, ro: bool):
    server = c.server
    reg = server.functions
    fn = reg.get(argv[1]) if reg is not None else None
    if fn is not None and "no_writes" not in fn.flags:
        # What processCommand refuses once the function's flags made FCALL
        # a write (and, without allow-oom, a denyoom) command.
        if server.maxmemory and "allow_oom" not in fn.flags and server.over_maxmemory():
            raise CommandError(errors.OOM)
        if server.disk_error is not None:
            raise CommandError(server.disk_error)
        if no_good_replicas(server):
            raise CommandError(NOREPLICAS)
        if server.replica_link is not None and replica.refuses_writes(server, c):
            raise CommandError(replica.READONLY)
    if server.monitors:
        origin = (b"unix:%s" % server.config.values["unixsocket"].encode()
                  if c.addr == c.laddr else c.addr.encode())
        feed_monitors(server, c.db.index, origin, server.current_cmd, argv)
    if fn is None:
        raise CommandError("ERR Function not found")
    count = argv[2]
    if len(count) == 1 and 48 <= count[0] <= 57:     # (one digit: the common case)
        n = count[0] - 48
    else:
        n = string2ll(count)
    if n is None:
        raise CommandError("ERR Bad number of keys provided")
    if n > len(argv) - 3:
        raise CommandError("ERR Number of keys can't be greater than number of args")
    if n < 0:
        raise CommandError("ERR Number of keys can't be negative")
    eng = reg.engine
    reg.running_argv = argv      # FUNCTION STATS shows the command
    try:
        out = eng.execute(c, fn, fn.name, argv[3:3 + n], argv[3 + n:], ro)
    except ScriptError as e:
        if e.counted:
            raise CommandError(e.message)
        # An error already counted in the error stats (the script's command's
        # own): the script's call still failed, as Valkey counts it.
        count_call(server, server.current_cmd, failed=True)
        c.add_error(e.message)
        out = None
    finally:
        reg.running_argv = None
        server.prop_override = []
    deliver_script_reply(c, out)
    return BLOCKED


_FCALL_FLAGS = "noscript skip_monitor may_replicate no_mandatory_keys stale"
_FCALL_RO_FLAGS = "noscript skip_monitor no_mandatory_keys stale readonly"


@command("fcall", -3, _FCALL_FLAGS, keys_fn=_eval_keys, group="scripting", since="7.0.0",
         key_specs=(spec("RW access update", "index 2", "keynum 0 1 1", _RW_NOTES),),
         args="function numkeys:i [key:k]... [arg]...",
         complexity="Depends on the function that is executed.")
def fcall(c, argv):
    """Invokes a function."""
    return _fcall(c, argv, False)


@command("fcall_ro", -3, _FCALL_RO_FLAGS, keys_fn=_eval_keys, group="scripting",
         since="7.0.0",
         key_specs=(spec("RO access", "index 2", "keynum 0 1 1", _RO_NOTES),),
         args="function numkeys:i [key:k]... [arg]...",
         complexity="Depends on the function that is executed.")
def fcall_ro(c, argv):
    """Invokes a read-only function."""
    return _fcall(c, argv, True)


# ==========================================================================
# FUNCTION
# ==========================================================================

container("function", group="scripting", summary="A container for function commands.",
          since="7.0.0", complexity="Depends on subcommand.")


def _syntax(argv):
    return CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                        "Try FUNCTION HELP." % cstr(argv[1]))


@command("function|load", -3, "write denyoom noscript", group="scripting", since="7.0.0",
         args="[REPLACE] function-code",
         complexity="O(1) (considering compilation time is redundant)")
def function_load(c, argv):
    """Creates a library."""
    replace = False
    pos = 2
    while pos < len(argv) - 1:
        arg = argv[pos]
        pos += 1
        if arg.lower() == b"replace":
            replace = True
            continue
        raise CommandError("ERR Unknown option given: %s" % cstr(arg))
    # The AOF loader (a fake client) loads with no time limit, as Valkey
    # loads what its primary or its AOF sends.
    timeout = 0 if c.is_fake else LOAD_TIMEOUT_MS
    try:
        name = registry(c.server).create(argv[pos], replace, timeout)
    except FunctionError as e:
        raise CommandError("ERR " + e.message)
    c.server.dirty += 1
    return name


@command("function|delete", 3, "write noscript", group="scripting", since="7.0.0",
         args="library-name", complexity="O(1)")
def function_delete(c, argv):
    """Deletes a library and its functions."""
    try:
        registry(c.server).delete(argv[2])
    except FunctionError as e:
        raise CommandError("ERR " + e.message)
    c.server.dirty += 1
    return OK


@command("function|flush", -2, "write noscript", group="scripting", since="7.0.0",
         args="flush-type[ASYNC | SYNC]",
         complexity="O(N) where N is the number of functions deleted")
def function_flush(c, argv):
    """Deletes all libraries and functions."""
    if len(argv) > 3:
        raise _syntax(argv)
    if len(argv) == 3 and argv[2].lower() not in (b"sync", b"async"):
        raise CommandError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    reg = c.server.functions   # (no Lua state made just to flush it)
    if reg is not None:
        reg.flush()
    c.server.dirty += 1
    return OK


def _flags_reply(fn):
    return SetReply([Simple(f) for f in fn.flag_names()])


@command("function|list", -2, "noscript", group="scripting", since="7.0.0",
         args="[LIBRARYNAME library-name-pattern] [WITHCODE]",
         complexity="O(N) where N is the number of functions")
def function_list(c, argv):
    """Returns information about all libraries."""
    with_code = False
    pattern = None
    i = 2
    while i < len(argv):
        arg = argv[i]
        low = arg.lower()
        if not with_code and low == b"withcode":
            with_code = True
        elif pattern is None and low == b"libraryname":
            if i >= len(argv) - 1:
                raise CommandError("ERR library name argument was not given")
            i += 1
            pattern = argv[i]
        else:
            raise CommandError("ERR Unknown argument %s" % cstr(arg))
        i += 1
    out = []
    reg = c.server.functions
    for lib in reg.libraries.values() if reg is not None else ():
        if pattern is not None and not stringmatch(pattern, lib.name, nocase=True):
            continue
        entry = {b"library_name": lib.name, b"engine": ENGINE_NAME,
                 b"functions": [{b"name": fn.name, b"description": fn.desc,
                                 b"flags": _flags_reply(fn)}
                                for fn in lib.functions.values()]}
        if with_code:
            entry[b"library_code"] = lib.code
        out.append(entry)
    return out


@command("function|dump", 2, "noscript", group="scripting", since="7.0.0",
         complexity="O(N) where N is the number of functions")
def function_dump(c, argv):
    """Dumps all libraries into a serialized binary payload."""
    return registry(c.server).dump()


@command("function|restore", -3, "write denyoom noscript", group="scripting", since="7.0.0",
         args="serialized-value policy[FLUSH | APPEND | REPLACE]",
         complexity="O(N) where N is the number of functions on the payload")
def function_restore(c, argv):
    """Restores all libraries from a payload."""
    if len(argv) > 4:
        raise _syntax(argv)
    policy = b"append"
    if len(argv) == 4:
        policy = argv[3].lower()
        if policy not in (b"append", b"replace", b"flush"):
            raise CommandError("ERR Wrong restore policy given, value should be either FLUSH, "
                               "APPEND or REPLACE.")
    try:
        registry(c.server).restore(argv[2], policy)
    except FunctionError as e:
        raise CommandError("ERR " + e.message)
    c.server.dirty += 1
    return OK


@command("function|stats", 2, "noscript allow_busy", group="scripting", since="7.0.0",
         complexity="O(1)")
def function_stats(c, argv):
    """Returns information about a function during execution."""
    server = c.server
    if engine(server).run is not None:
        raise CommandError(BUSY_SCRIPT)
    reg = server.functions
    run = reg.engine.run if reg is not None else None
    if run is None:
        running = None
    else:
        running = {b"name": run.sha, b"command": list(reg.running_argv or ()),
                   b"duration_ms": int((time.monotonic() - run.start) * 1000)}
    libs, fns = reg.stats() if reg is not None else (0, 0)
    return {b"running_script": running,
            b"engines": {ENGINE_NAME: {b"libraries_count": libs, b"functions_count": fns}}}


@command("function|kill", 2, "noscript allow_busy", group="scripting", since="7.0.0",
         complexity="O(1)")
def function_kill(c, argv):
    """Terminates a function during execution."""
    kill_running(c.server, False)
    return OK


_HELP = [
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME "
    "argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored "
    "using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a "
    "restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, "
    "abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
    "replace the old",
    "      libraries with the new libraries (notice that even on this option there is a "
    "chance of failure",
    "      in case of functions name collision with another library).",
]


@command("function|help", 2, "loading stale", group="scripting", since="7.0.0", complexity="O(1)")
def function_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return help_reply("FUNCTION", _HELP)


def _command_metadata():
    """COMMAND INFO as Valkey shows it: FCALL_RO lists no @read category."""
    fcall_ro.command.acl_categories = fcall_ro.command.acl_categories - {"read"}


_command_metadata()
