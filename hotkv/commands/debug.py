"""DEBUG and MEMORY: the commands that look at the server's insides.

Owns DEBUG (a dispatcher over registered subcommands: HELP, LOG, SLEEP,
ERROR, DIGEST / DIGEST-VALUE (computed by hotkv.core.digest, Valkey's values),
OBJECT, SET-ACTIVE-EXPIRE, QUICKLIST-PACKED-THRESHOLD, CHANGE-REPL-ID,
STRINGMATCH-TEST, POPULATE, HTSTATS, HTSTATS-KEY, PROTOCOL,
SET-DISABLE-DENY-SCRIPTS, REPLYBUFFER, CLIENT-EVICTION, DICT-RESIZING here,
more from other modules) and MEMORY (USAGE, STATS, DOCTOR,
MALLOC-STATS, PURGE, HELP), as Valkey's debug.c and object.c.

* ``DEBUG_SUBCOMMANDS``: ``name -> (fn(c, argv), argc)``, filled with the
  ``debug_subcommand(name, argc)`` decorator (argc as Redis checks it: the
  exact count, or negative for "at least").  DEBUG itself is gated by
  ``enable-debug-command`` in the dispatcher (its ``protected`` flag).
* HTSTATS / HTSTATS-KEY print Valkey 8.1's text from hotkv's tables, which
  are CPython dicts and sets: "table size" is the table's slot count (read
  back from its size), and, open addressing having no chains, the ``full``
  form reports every slot top-level with no child buckets and chains of 0.
  Sizes therefore differ from Valkey's (its tables grow at a fill of 1 and
  hold 7 entries a bucket; CPython's at 2/3).  REPLYBUFFER and
  DICT-RESIZING are kept and change nothing (hotkv's reply buffer is never
  resized; CPython resizes its dicts itself); CLIENT-EVICTION tabulates
  clients' memory in Valkey's buckets but hotkv evicts no client.
  PROTOCOL writes bignum, attribute and push replies raw (the encoder has
  no class for them).
* MEMORY USAGE is an estimate from ``sys.getsizeof``, sampling containers
  as Redis's objectComputeSize does; MEMORY STATS reports the process's
  memory (INFO's used_memory, ``hotkv.core.eviction``) against the memory noted at startup
  by INFO's init hook.

Invariants: DEBUG HELP lists this module's subcommands and then every
other registered one, sorted; a wrong name or count gets Redis's
"unknown subcommand" error naming what was typed.
"""

from __future__ import annotations

import gc
import logging
import random
import re
import sys
import time

from ..clients import client_eviction
from ..core import access
from ..core.blocking import BLOCKED
from ..core.config import parse_memory
from ..core.digest import dataset_digest, value_digest
from ..core.eviction import STARTUP_USED
from ..core.registry import command, container
from ..lua.functions import FunctionError, registry as function_registry
from ..persistence import rdb, rdbfile
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.replies import cstr, help_reply
from ..protocol.resp import OK, Double, SetReply, Simple, Verbatim
from ..protocol.util import string2ll, stringmatch
from ..replication import new_replid
from ..types.encodings import object_encoding
from ..types.lists import ListValue, quicklist_nodes
from .config_cmds import rewrite_config_file

log = logging.getLogger("hotkv")

DEBUG_SUBCOMMANDS: dict = {}


def debug_subcommand(name: str, argc: int):
    """Register ``fn(c, argv)`` as DEBUG <name>; argc counts the whole
    command (DEBUG LOG msg is 3), negative for "at least"."""
    def deco(fn):
        DEBUG_SUBCOMMANDS[name.lower().encode()] = (fn, argc)
        return fn
    return deco


@command("debug", -2, "admin noscript loading stale protected", group="server", doc_flags="syscmd",
         complexity="Depends on subcommand.")
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


@debug_subcommand("pause-cron", 3)
def debug_pause_cron(c, argv):
    # The server's cron stops while set (Valkey's pause_cron); a signal
    # shutdown, which Valkey runs from the cron, waits for it too.
    value = string2ll(argv[2])
    c.server.cron_paused = bool(value)
    return OK


@debug_subcommand("config-rewrite-force-all", 2)
def debug_config_rewrite_force_all(c, argv):
    # CONFIG REWRITE writing every setting, at its default or not.
    path = c.server.config_file
    try:
        if not path:
            raise OSError(2, "No such file or directory")
        rewrite_config_file(c.server, path, force_all=True)
    except OSError as e:
        raise CommandError("ERR CONFIG-REWRITE-FORCE-ALL failed: %s" % (e.strerror or e))
    return OK


@debug_subcommand("error", 3)
def debug_error(c, argv):
    raise CommandError(cstr(argv[2]))


@debug_subcommand("digest", 2)
def debug_digest(c, argv):
    # Every database, logically expired keys included (hotkv.core.digest).
    return Simple(dataset_digest(c.server.dbs).hex().encode())


@debug_subcommand("digest-value", -2)
def debug_digest_value(c, argv):
    db = c.db
    return [Simple(value_digest(db, key).hex().encode()) for key in argv[2:]]


def _atoi(data: bytes) -> int:
    """C's atoi: the leading decimal digits (after blanks and a sign), else 0."""
    m = re.match(rb"\s*([+-]?\d+)", data)
    return int(m.group(1)) if m else 0


@debug_subcommand("set-active-expire", 3)
def debug_set_active_expire(c, argv):
    # Switches the cron's active expiry (Server.cron); lazy expiry stays.
    c.server.active_expire_enabled = _atoi(argv[2]) != 0
    return OK


# Valkey's quicklistSetPackedThreshold bounds: up to 4 GB less 1 MB; 0 is
# its 1 GB default.  hotkv keeps list elements in one representation, so
# the threshold is validated and kept (quicklist_packed_threshold) but
# changes no layout here.
_PACKED_MAX = (1 << 32) - (1 << 20)


@debug_subcommand("quicklist-packed-threshold", 3)
def debug_quicklist_packed_threshold(c, argv):
    # memtoull reads "" as 0 (the default), as Valkey accepts it.
    size = parse_memory(argv[2].decode("latin-1")) if argv[2] else 0
    if size is None or size > _PACKED_MAX:
        raise CommandError("ERR argument must be a memory value bigger than 1 and "
                           "smaller than 4gb")
    c.server.quicklist_packed_threshold = size or (1 << 30)
    return OK


@debug_subcommand("change-repl-id", 2)
def debug_change_repl_id(c, argv):
    # Valkey's changeReplicationId + clearReplicationId2: a new master_replid
    # (the replication state, hotkv.replication), no second one.
    log.warning("Changing replication IDs after receiving DEBUG change-repl-id")
    repl = c.server.repl
    repl.replid = new_replid()
    repl.clear_replid2()
    return OK


_FUZZ_ALPHABET = b"*?[]^-\\ab\x00\xff"


@debug_subcommand("stringmatch-test", 2)
def debug_stringmatch_test(c, argv):
    # Valkey fuzzes stringmatchlen with random patterns and strings; the
    # test is that nothing crashes.  Here: hotkv's glob matcher, bounded.
    rng = random.Random()
    for _ in range(200):
        pattern = bytes(rng.choice(_FUZZ_ALPHABET) for _ in range(rng.randrange(12)))
        string = bytes(rng.choice(_FUZZ_ALPHABET) for _ in range(rng.randrange(12)))
        stringmatch(pattern, string, rng.random() < 0.5)
    return Simple(b"Apparently the server did not crash: test passed")


def _lru_fields(c, key) -> tuple:
    """(lru, idle seconds, lfu freq, lfu minutes) as Valkey derives them from
    an object's 24-bit lru field, here the key's entry in db.access
    (hotkv.core.access): the LRU clock of its last access, or the LFU field."""
    db = c.db
    field = db.access.get(key)
    if field is None:     # never stamped: as just accessed
        field = access._minutes(c.server) << 8 | access.LFU_INIT_VAL \
            if access.is_lfu(c.server) else db.clock
    decay = c.server.config.values.get("lfu-decay-time", 1) or 0
    return field, access.idle_seconds(db, key), access.lfu_decr(field, decay, c.server), field >> 8


@debug_subcommand("object", -3)
def debug_object(c, argv):
    if len(argv) > 4:
        raise CommandError("ERR unknown subcommand or wrong number of arguments for "
                           "'%s'. Try DEBUG HELP." % cstr(argv[1]))
    fast = len(argv) == 4 and argv[3].lower() == b"fast"
    key = argv[2]
    value = c.db.data.get(key)      # as Valkey: logically expired keys too
    if value is None:
        raise CommandError("ERR no such key")
    encoding = object_encoding(c, key, value)
    fill = c.server.config.values.get("list-max-listpack-size", -2)
    # The address names the object.  Valkey's INCR changes an int-encoded
    # counter in place (its address stays); hotkv's counter is a new bytes
    # each time, so an int's address is its key's (in this db), not the bytes'.
    addr = id(value) if encoding != b"int" else id(c.db) ^ (hash(key) & 0xFFFFFFFF) << 4
    out = b"Value at:0x%x refcount:1 encoding:%s" % (addr, encoding)
    if not fast:
        # The RDB body's length (the DUMP payload less its type byte and
        # its 10-byte footer), as rdbSavedObjectLen.
        body = rdb.serialize(value, encoding, fill)
        out += b" serializedlength:%d" % (len(body) - 1)
    lru, idle, freq, minutes = _lru_fields(c, key)
    out += b" lru:%d lru_seconds_idle:%d lfu_freq:%d lfu_access_time_minutes:%d" % (
        lru, idle, freq, minutes)
    if encoding == b"quicklist" and type(value) is ListValue:
        # The nodes hotkv's RDB writes (a list grown at the tail).
        nodes = quicklist_nodes(value, fill)
        compress = c.server.config.values.get("list-compress-depth", 0)
        out += b" ql_nodes:%d ql_avg_node:%.2f ql_listpack_max:%d ql_compressed:%d" % (
            len(nodes), len(value) / len(nodes), fill, 1 if compress else 0)
        if not fast:
            out += b" ql_uncompressed_size:%d" % sum(len(blob) for _, blob in nodes)
    return Simple(out)


# ----------------------------------------------------------------------
# The subcommands Valkey's Tcl units call in spawn mode: POPULATE,
# HTSTATS / HTSTATS-KEY, PROTOCOL, SET-DISABLE-DENY-SCRIPTS, REPLYBUFFER,
# CLIENT-EVICTION, DICT-RESIZING
# ----------------------------------------------------------------------

_POSITIVE = "ERR value is out of range, must be positive"


def _positive(arg: bytes) -> int:
    # getPositiveLongFromObjectOrReply without a message: one text for both
    # a non-number and a negative one.
    n = string2ll(arg)
    if n is None or n < 0:
        raise CommandError(_POSITIVE)
    return n


@debug_subcommand("populate", -3)
def debug_populate(c, argv):
    """DEBUG POPULATE count [prefix] [size]: keys ``prefix:N`` (``key:N``)
    holding ``value:N``, cut or padded with zero bytes to ``size``; keys that
    exist are left alone.  As Valkey: a "new" event and WATCH/tracking
    invalidation per key, no dirty count (not propagated)."""
    if len(argv) > 5:
        raise CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                           "Try DEBUG HELP." % cstr(argv[1]))
    count = _positive(argv[2])
    size = _positive(argv[4]) if len(argv) == 5 else 0
    prefix = argv[3] if len(argv) >= 4 else b"key"
    db = c.db
    server = c.server
    for j in range(count):
        key = (b"%s:%d" % (prefix, j))[:127]     # Valkey's snprintf into 128 bytes
        if db.lookup(key) is not None:
            continue
        value = b"value:%d" % j
        if size:
            value = value[:size] + bytes(max(0, size - len(value)))
        db.add(key, value)
        if key in db.watched:
            db.touch_watched(key)
        if server.tracking_on:
            server.tracking.invalidate(key)
    return OK


# CPython's dicts with bytes keys: a table of n slots takes n index bytes
# of 1/2/4/8 bytes and 2n/3 entries of 24 bytes beside a fixed header.
def _ix(n: int) -> int:
    return 1 if n <= 0xFF else 2 if n <= 0xFFFF else 4 if n <= 0xFFFFFFFF else 8


_DICT_BASE = sys.getsizeof({b"a": 1}) - (8 * _ix(8) + (8 << 1) // 3 * 24)
_SET_BASE = sys.getsizeof(set())


def _dict_slots(d) -> int:
    """The slots of a dict's table, read back from its size."""
    size = sys.getsizeof(d)
    n = 8
    while n < (1 << 48):
        if _DICT_BASE + n * _ix(n) + (n << 1) // 3 * 24 >= size:
            return n
        n <<= 1
    return n


def _set_slots(s) -> int:
    return max(8, (sys.getsizeof(s) - _SET_BASE) // 16)


def _table_stats(slots: int, entries: int, full: bool) -> str:
    """Valkey's hashtable stats text for one of hotkv's tables.  CPython's
    dicts and sets are open-addressed: every entry sits in a top-level
    slot, so there are no child buckets and every chain is empty."""
    if not entries:
        return ""
    out = ("Hash table 0 stats (main hash table):\n table size: %d\n"
           " number of entries: %d\n" % (slots, entries))
    if full:
        out += (" top-level buckets: %d\n child buckets: 0\n max chain length: 0\n"
                " avg chain length: 0.00\n chain length distribution:\n"
                "   0: %d (100.00%%)\n" % (slots, slots))
    return out


@debug_subcommand("htstats", -3)
def debug_htstats(c, argv):
    """DEBUG HTSTATS dbid [full]: the keys' and the expires' tables (Python
    dicts here: their slot count, see _table_stats)."""
    dbid = string2ll(argv[2])
    if dbid is None:
        raise CommandError(errors.NOT_INTEGER)
    if not 0 <= dbid < len(c.server.dbs):
        raise CommandError("ERR Out of range database")
    full = len(argv) >= 4 and argv[3].lower() == b"full"
    db = c.server.dbs[dbid]
    text = "[Dictionary HT]\n" + _table_stats(_dict_slots(db.data), len(db.data), full)
    text += "[Expires HT]\n" + _table_stats(_dict_slots(db.expires), len(db.expires), full)
    return Verbatim(text.encode())


@debug_subcommand("htstats-key", -3)
def debug_htstats_key(c, argv):
    """DEBUG HTSTATS-KEY key [full]: a set in its hashtable encoding or a
    zset in its skiplist one (its member table); anything else is refused,
    as Valkey 8.1 does (hashes included)."""
    value = c.db.lookup(argv[2])
    if value is None:
        raise CommandError("ERR no such key")
    full = len(argv) >= 4 and argv[3].lower() == b"full"
    encoding = object_encoding(c, argv[2], value)
    if isinstance(value, set) and encoding == b"hashtable":
        return Verbatim(_table_stats(_set_slots(value), len(value), full).encode())
    members = getattr(value, "d", None) if encoding == b"skiplist" else None
    if isinstance(members, dict):
        return Verbatim(_table_stats(_dict_slots(members), len(members), full).encode())
    raise CommandError("ERR The value stored at the specified key is not represented "
                       "using an hash table")


class _Raw(bytes):
    """Bytes written to the reply as they are (see debug_protocol)."""


_PROTOCOL_TYPES = ("string|integer|double|bignum|null|array|set|map|attrib|push|"
                   "verbatim|true|false")


@debug_subcommand("protocol", 3)
def debug_protocol(c, argv):
    """DEBUG PROTOCOL <type>: one reply of each RESP3 type (Valkey's
    values), in RESP2 as Valkey downgrades them."""
    kind = argv[2].lower()
    if kind == b"string":
        return b"Hello World"
    if kind == b"integer":
        return 12345
    if kind == b"double":
        return Double(3.141)
    if kind == b"null":
        return None
    if kind == b"array":
        return [0, 1, 2]
    if kind == b"set":
        return SetReply([0, 1, 2])
    if kind == b"map":
        return {0: False, 1: True, 2: False}
    if kind == b"true":
        return True
    if kind == b"false":
        return False
    if kind == b"verbatim":
        return Verbatim(b"This is a verbatim\nstring")
    # The three types hotkv's encoder has no class for are written raw.
    big = b"1234567999999999999999999999999999999"
    if kind == b"bignum":
        raw = b"(%s\r\n" % big if c.resp3 else b"$%d\r\n%s\r\n" % (len(big), big)
    elif kind == b"attrib":
        text = b"Some real reply following the attribute"
        raw = (b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"
               if c.resp3 else b"") + b"$%d\r\n%s\r\n" % (len(text), text)
    elif kind == b"push":
        if not c.resp3:
            raise CommandError("ERR RESP2 is not supported by this command")
        text = b"Some real reply following the push reply"
        # Valkey 8 sends a push made while a command runs after its reply.
        raw = b"$%d\r\n%s\r\n>2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n" % (len(text), text)
    else:
        raise CommandError("ERR Wrong protocol type name. Please use one of the following: "
                           + _PROTOCOL_TYPES)
    if not c.reply_mode and not c.skip_this:
        c.out.append(raw)
    return BLOCKED      # "no reply to encode": the client is not blocked (dispatch.call)


@debug_subcommand("set-disable-deny-scripts", 3)
def debug_set_disable_deny_scripts(c, argv):
    # Scripts may then call commands flagged noscript (hotkv.lua.engine).
    c.server.script_disable_deny_script = _atoi(argv[2]) != 0
    return OK


@debug_subcommand("replybuffer", 4)
def debug_replybuffer(c, argv):
    """REPLYBUFFER PEAK-RESET-TIME <never|reset|ms> / RESIZING <0|1>: kept
    (hotkv's reply buffer is a list of chunks, never resized, so neither
    changes its behaviour); the errors are Valkey's."""
    what = argv[2].lower()
    server = c.server
    if what == b"peak-reset-time":
        arg = argv[3].lower()
        if arg == b"never":
            server.reply_buffer_peak_reset_time = -1
        elif arg == b"reset":
            server.reply_buffer_peak_reset_time = 5000
        else:
            ms = string2ll(argv[3])
            if ms is None:
                raise CommandError(errors.NOT_INTEGER)
            server.reply_buffer_peak_reset_time = ms
    elif what == b"resizing":
        server.reply_buffer_resizing = _atoi(argv[3]) != 0
    else:
        raise CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. "
                           "Try DEBUG HELP." % cstr(argv[1]))
    return OK


_BUCKET_MIN_LOG, _BUCKET_MAX_LOG = 15, 33      # CLIENT_MEM_USAGE_BUCKET_{MIN,MAX}_LOG


@debug_subcommand("client-eviction", 2)
def debug_client_eviction(c, argv):
    """The evictable clients by memory, in Valkey's buckets (hotkv.clients.client_eviction
    weighs the same figures)."""
    server = c.server
    if not server.config.values.get("maxmemory-clients"):
        raise CommandError("ERR maxmemory-clients is disabled.")
    n = 1 + _BUCKET_MAX_LOG - _BUCKET_MIN_LOG
    sums, counts = [0] * n, [0] * n
    for cl in server.clients.values():
        if not client_eviction.evictable(cl):
            continue
        mem = client_eviction.client_memory(cl)
        j = min(n - 1, max(0, mem.bit_length() - _BUCKET_MIN_LOG))
        sums[j] += mem
        counts[j] += 1
    lines = []
    for j in range(n):
        head = "bucket          0" if j == 0 else "bucket %10d" % (1 << (j - 1 + _BUCKET_MIN_LOG))
        head += "+            : " if j == n - 1 else " - %10d: " % (
            (1 << (j + _BUCKET_MIN_LOG)) - 1)
        lines.append(head + "tot-mem: %10d, clients: %d\n" % (sums[j], counts[j]))
    return Verbatim("".join(lines).encode())


@debug_subcommand("dict-resizing", 3)
def debug_dict_resizing(c, argv):
    # Kept: CPython resizes its dicts itself, hotkv cannot hold that off.
    c.server.dict_resizing = _atoi(argv[2]) != 0
    return OK


# ==========================================================================
# MEMORY
# ==========================================================================

container("memory", group="server", summary="A container for memory diagnostics commands.",
          since="4.0.0", complexity="Depends on subcommand.")


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


@command("memory|usage", -3, "readonly", keys=(2, 2, 1), group="server", key_flags="RO",
         args="key:k [SAMPLES count:i]", summary="Estimates the memory usage of a key.",
         since="4.0.0", complexity="O(N) where N is the number of samples.")
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
    value = db.lookup_notouch(argv[2], notify=False)    # (Valkey's objectCommandLookup)
    if value is None:
        return None
    return memory_usage_estimate(argv[2], value, argv[2] in db.expires, samples)


@command("memory|stats", 2, "", group="server", summary="Returns details about memory usage.",
         since="4.0.0", complexity="O(1)")
def memory_stats(c, argv):
    """Show memory usage details."""
    server = c.server
    used = server.eviction.used_memory()      # INFO's used_memory (hotkv.core.eviction)
    startup = STARTUP_USED
    out = {
        b"peak.allocated": server.eviction.peak,
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


@command("memory|doctor", 2, "", group="server", since="4.0.0", complexity="O(1)")
def memory_doctor(c, argv):
    """Outputs a memory problems report."""
    return Verbatim(b"Hi Sam, I can't find any memory issue in your instance. "
                    b"I can only account for what occurs on this base.\n")


@command("memory|malloc-stats", 2, "loading", group="server",
         summary="Returns the allocator statistics.", since="4.0.0",
         complexity="Depends on how much memory is allocated, could be slow")
def memory_malloc_stats(c, argv):
    """Show allocator internal stats."""
    return Verbatim(b"Stats not supported for the current allocator")


@command("memory|purge", 2, "loading", group="server",
         summary="Asks the allocator to release memory.", since="4.0.0",
         complexity="Depends on how much memory is allocated, could be slow")
def memory_purge(c, argv):
    """Ask the allocator to release memory."""
    gc.collect()
    return OK


@command("memory|help", 2, "loading stale", group="server",
         summary="Returns helpful text about the different subcommands.", since="4.0.0",
         complexity="O(1)")
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


# ----------------------------------------------------------------------
# RELOAD and LOADAOF: the dataset through its files and back (Valkey's
# suite calls RELOAD after a case to prove writer and reader agree)
# ----------------------------------------------------------------------

@debug_subcommand("reload", -2)
def debug_reload(c, argv):
    """DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: SAVE (unless NOSAVE), empty
    the databases (unless NOFLUSH), load the dump file.  With NOFLUSH a key
    in both places is an error unless MERGE (the file's value wins), checked
    before anything is installed: Valkey stops the server there."""
    merge = noflush = nosave = False
    for opt in argv[2:]:
        opt = opt.upper()
        if opt == b"MERGE":
            merge = True
        elif opt == b"NOFLUSH":
            noflush = True
        elif opt == b"NOSAVE":
            nosave = True
        else:
            raise CommandError("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE "
                               "options.")
    server = c.server
    snaps = server.snapshots
    if not nosave and not snaps.save():
        raise CommandError("ERR")
    if not noflush:
        server.empty_data(functions=True)
    failed = "ERR Error trying to load the RDB dump, check server logs."
    try:
        loaded = rdbfile.read_file(snaps.path(), server)
    except (OSError, rdbfile.RDBLoadError) as e:
        log.warning("DEBUG RELOAD: %s", getattr(e, "strerror", None) or e)
        raise CommandError(failed) from None
    if noflush and not merge:
        for db, keys in zip(server.dbs, loaded.dbs):
            for key in keys:
                if key in db.data:
                    log.warning("DEBUG RELOAD: duplicated key '%s' found in the RDB file",
                                key.decode("latin-1"))
                    raise CommandError(failed)
    if loaded.functions:
        # The libraries first, as they come first in the file: with NOFLUSH
        # one already loaded fails the reload unless MERGE (which replaces).
        try:
            function_registry(server).load_codes(loaded.functions, replace=merge)
        except FunctionError as e:
            log.warning("DEBUG RELOAD: %s", e.message)
            raise CommandError(failed) from None
        loaded.functions = []        # installed: rdbfile.install skips them
    for db, keys in zip(server.dbs, loaded.dbs):
        for key in keys:
            if key in db.data:
                db.delete(key)
    rdbfile.install(server, loaded)
    log.warning("DB reloaded by DEBUG RELOAD")
    return OK


@debug_subcommand("loadaof", 2)
def debug_loadaof(c, argv):
    """Write out the AOF buffer, empty the databases and replay the AOF
    (all its files, as they are on disk now)."""
    server = c.server
    aof = server.aof_manager
    failed = "ERR Error trying to load the AOF files, check server logs."
    if aof.state != 0:         # files.OFF
        aof.before_sleep()
    server.empty_data(functions=True)
    manifest = getattr(aof, "manifest", None)
    if aof.state == 0 and (manifest is None or manifest.empty):
        # The AOF is off and no rewrite made a base since: Valkey's manifest
        # is empty, and the load fails (after the databases were emptied,
        # as there).  A BGREWRITEAOF with the AOF off leaves a base, loaded.
        log.warning("DEBUG LOADAOF: the AOF is off and has no files")
        raise CommandError(failed)
    coro = aof.load(yield_to_loop=False)
    try:
        coro.send(None)        # never suspends without yield_to_loop
    except StopIteration:
        pass
    except Exception as e:
        log.warning("DEBUG LOADAOF: %s", e)
        raise CommandError(failed) from None
    else:
        coro.close()
        raise CommandError(failed)
    # Valkey zeroes its dirty counter: no save point fires for the replay
    # (rdb_changes_since_last_save 0) and the command is not logged -- a
    # LOADAOF in the AOF would replay itself.
    server.dirty_at_save = server.dirty
    server.prop_override = []
    log.warning("Append Only File loaded by DEBUG LOADAOF")
    return OK
