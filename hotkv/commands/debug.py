"""DEBUG and MEMORY: the commands that look at the server's insides.

Owns DEBUG (a dispatcher over registered subcommands: HELP, LOG, SLEEP,
ERROR here, more from other modules) and MEMORY (USAGE, STATS, DOCTOR,
MALLOC-STATS, PURGE, HELP), as Valkey's debug.c and object.c.

* ``DEBUG_SUBCOMMANDS``: ``name -> (fn(c, argv), argc)``, filled with the
  ``debug_subcommand(name, argc)`` decorator (argc as Redis checks it: the
  exact count, or negative for "at least").  DEBUG itself is gated by
  ``enable-debug-command`` in the dispatcher (its ``protected`` flag).
* MEMORY USAGE is an estimate from ``sys.getsizeof``, sampling containers
  as Redis's objectComputeSize does; MEMORY STATS reports the process's
  memory (``hotkv.server.used_memory``) against the memory noted at startup
  by INFO's init hook.

Invariants: DEBUG HELP lists this module's subcommands and then every
other registered one, sorted; a wrong name or count gets Redis's
"unknown subcommand" error naming what was typed.
"""

from __future__ import annotations

import gc
import logging
import re
import sys
import time

from .. import errors
from ..digest import dataset_digest, value_digest
from ..errors import CommandError
from ..registry import command, container
from ..replies import cstr, help_reply
from ..resp import OK, Simple, Verbatim
from ..server import peak_rss, used_memory
from ..util import string2ll

log = logging.getLogger("hotkv")

DEBUG_SUBCOMMANDS: dict = {}


def debug_subcommand(name: str, argc: int):
    """Register ``fn(c, argv)`` as DEBUG <name>; argc counts the whole
    command (DEBUG LOG msg is 3), negative for "at least"."""
    def deco(fn):
        DEBUG_SUBCOMMANDS[name.lower().encode()] = (fn, argc)
        return fn
    return deco


@command("debug", -2, "admin noscript loading stale protected", group="server")
def debug(c, argv):
    """A container for debugging commands."""
    sub = argv[1].lower()
    entry = DEBUG_SUBCOMMANDS.get(sub)
    if entry is not None:
        fn, argc = entry
        if (argc >= 0 and len(argv) == argc) or (argc < 0 and len(argv) >= -argc):
            return fn(c, argv)
    raise CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                       "Try DEBUG HELP." % cstr(argv[1]))


@debug_subcommand("help", 2)
def debug_help(c, argv):
    return help_reply("DEBUG", [
        "ERROR <string>",
        "    Return a Redis protocol error with <string> as message.",
        "LOG <message>",
        "    Write <message> to the server log.",
        "SLEEP <seconds>",
        "    Stop the server for <seconds>. Decimals allowed.",
    ] + sorted(_extra_debug_help()))


def _extra_debug_help():
    own = {b"help", b"log", b"sleep", b"error"}
    return [n.decode().upper() for n in DEBUG_SUBCOMMANDS if n not in own]


@debug_subcommand("log", 3)
def debug_log(c, argv):
    log.warning("DEBUG LOG: %s", cstr(argv[2]))
    return OK


_ATOF = re.compile(rb"\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?)", re.IGNORECASE)


def _atof(data: bytes) -> float:
    """C's atof: the longest numeric prefix, 0 when there is none."""
    m = _ATOF.match(data)
    return float(m.group(0)) if m else 0.0


@debug_subcommand("sleep", 3)
def debug_sleep(c, argv):
    # Blocks the whole server on purpose, as Redis's does.
    seconds = _atof(argv[2])
    if seconds > 0:
        time.sleep(seconds)
    return OK


@debug_subcommand("error", 3)
def debug_error(c, argv):
    raise CommandError(cstr(argv[2]))


@debug_subcommand("digest", 2)
def debug_digest(c, argv):
    # Every database, logically expired keys included (hotkv.digest).
    return Simple(dataset_digest(c.server.dbs).hex().encode())


@debug_subcommand("digest-value", -2)
def debug_digest_value(c, argv):
    db = c.db
    return [Simple(value_digest(db, key).hex().encode()) for key in argv[2:]]


# ==========================================================================
# MEMORY
# ==========================================================================

container("memory", group="server")


def _sizeof(v) -> int:
    return sys.getsizeof(v)


def memory_usage_estimate(key: bytes, value, expires: bool, samples: int) -> int:
    """Bytes a key is estimated to take: the key, the value object and, for
    containers, the average of up to ``samples`` elements (all when 0) times
    their number -- the way Redis's objectComputeSize samples."""
    size = _sizeof(key) + _sizeof(value) + 16
    if expires:
        size += 40
    if isinstance(value, (bytes, bytearray)):
        return size
    n = len(value) if hasattr(value, "__len__") else 0
    if not n:
        return size
    total = 0
    count = 0
    if isinstance(value, dict):
        for k, v in value.items():
            total += _sizeof(k) + _sizeof(v)
            count += 1
            if samples and count >= samples:
                break
    else:
        try:
            it = iter(value)
        except TypeError:
            return size
        for item in it:
            if isinstance(item, (bytes, int, float, str, tuple)):
                total += _sizeof(item)
            count += 1
            if samples and count >= samples:
                break
    if count:
        size += int(total / count * n)
    return size


@command("memory|usage", -3, "readonly", keys=(2, 2, 1), group="server", key_flags="RO")
def memory_usage(c, argv):
    """Estimate the memory usage of a key."""
    samples = 5
    i = 3
    while i < len(argv):
        if argv[i].lower() == b"samples" and i + 1 < len(argv):
            samples = string2ll(argv[i + 1])
            if samples is None:
                raise CommandError(errors.NOT_INTEGER)
            if samples < 0:
                raise CommandError(errors.SYNTAX)
            i += 2
        else:
            raise CommandError(errors.SYNTAX)
    db = c.db
    value = db.lookup(argv[2])
    if value is None:
        return None
    return memory_usage_estimate(argv[2], value, argv[2] in db.expires, samples)


@command("memory|stats", 2, "", group="server")
def memory_stats(c, argv):
    """Show memory usage details."""
    server = c.server
    used = used_memory()
    startup = getattr(server, "startup_memory", used)
    out = {
        b"peak.allocated": max(peak_rss(), used),
        b"total.allocated": used,
        b"startup.allocated": startup,
        b"replication.backlog": 0,
        b"clients.slaves": 0,
        b"clients.normal": 0,
        b"aof.buffer": 0,
    }
    keys = 0
    for db in server.dbs:
        if db.data or db.expires:
            out[b"db.%d" % db.index] = {b"overhead.hashtable.main": 0,
                                        b"overhead.hashtable.expires": 0}
        keys += len(db.data)
    out[b"overhead.total"] = startup
    out[b"keys.count"] = keys
    out[b"keys.bytes-per-key"] = (max(0, used - startup) // keys) if keys else 0
    out[b"dataset.bytes"] = max(0, used - startup)
    return out


@command("memory|doctor", 2, "", group="server")
def memory_doctor(c, argv):
    """Outputs a memory problems report."""
    return Verbatim(b"Hi Sam, I can't find any memory issue in your instance. "
                    b"I can only account for what occurs on this base.\n")


@command("memory|malloc-stats", 2, "loading", group="server")
def memory_malloc_stats(c, argv):
    """Show allocator internal stats."""
    return Verbatim(b"Stats not supported for the current allocator")


@command("memory|purge", 2, "loading", group="server")
def memory_purge(c, argv):
    """Ask the allocator to release memory."""
    gc.collect()
    return OK


@command("memory|help", 2, "loading stale", group="server")
def memory_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("MEMORY", [
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
    ])
