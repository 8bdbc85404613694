"""Whole RDB files in Valkey 8.1's format: writing a dataset, reading one.

Owns the file layer around the per-value encoding (hotkv/persistence/rdb.py, the type
table hotkv/types/table.py): the ``REDIS0011`` header, the aux fields
valkey-server 8.1.8 writes (``valkey-ver``, ``redis-bits``, ``ctime``,
``used-mem``, ``aof-base``), per non-empty database ``SELECTDB`` +
``RESIZEDB``, per key an ``EXPIRETIME_MS`` opcode when it has a TTL, then
type, key and value; ``EOF`` and the CRC64 of everything before it (eight
zero bytes with ``rdbchecksum no``, as Valkey).  Strings > 20 bytes are
LZF-compressed with ``rdbcompression yes`` (hotkv.types.codec).

``write_file`` writes to ``temp-<pid>.rdb`` in the target's directory,
fsyncs it, renames it over the target and fsyncs the directory: at every
instant the target name is either the previous complete file or the new
complete one.  It runs in the BGSAVE child or, for SAVE, on the loop.

``read_file`` reads every opcode Valkey 7.x-9.x and Redis 7.x write (AUX,
RESIZEDB, SELECTDB, EXPIRETIME, EXPIRETIME_MS, FREQ, IDLE, SLOT_INFO, EOF;
FUNCTION2 libraries are kept for ``install``, which loads them into
hotkv.lua.functions; module data is refused) into fresh dictionaries,
checks the CRC, and only then does ``install`` put them in the server
(a library that does not load fails the file).  Anything wrong --
truncation, a bad length, an unknown type, a CRC mismatch, a duplicate
key -- raises ``RDBLoadError`` naming the byte offset and what was wrong: a server never
starts with half a file.  Keys already expired are dropped while loading,
as a Valkey primary does.  ``read_preamble`` is the AOF loader's entry
point (hotkv/persistence/aof/loader.py): the same checks on an AOF's RDB preamble, the
commands after its checksum left to the AOF loader, expired keys kept.
``load_at_start_async`` is the start-up load: the same reader in slices of
``loading-process-events-interval-bytes`` with a loop turn between two, so
clients connected meanwhile are answered (LOADING, INFO's ``loading:1`` and
``LoadProgress``'s loading_* fields); nothing is installed before the whole
file has been read and checked.
"""

from __future__ import annotations

import gc
import logging
import os
import struct
import time

from ..core.keyindex import KeyIndex
from ..core.stats import used_memory
from ..lua.functions import FunctionError, registry  # (lupa only when needed)
from ..types.codec import (
    RDBError,
    Reader,
    lzf_compression,
    lzf_decompress,
    put_len,
    put_string,
)
from ..types.encodings import object_encoding
from .rdb import RDB_VERSION, crc64, load_value, serialize

log = logging.getLogger("hotkv")

# Opcodes (Valkey's rdb.h).
OP_SLOT_INFO, OP_FUNCTION2, OP_FUNCTION_PRE_GA, OP_MODULE_AUX = 0xF4, 0xF5, 0xF6, 0xF7
OP_IDLE, OP_FREQ, OP_AUX, OP_RESIZEDB = 0xF8, 0xF9, 0xFA, 0xFB
OP_EXPIRETIME_MS, OP_EXPIRETIME, OP_SELECTDB, OP_EOF = 0xFC, 0xFD, 0xFE, 0xFF

# The Valkey release whose file layout this is (the reader logs it).
FORMAT_VALKEY_VERSION = b"8.1.8"
WRITE_CHUNK = 1 << 20
# Value types other servers write that hotkv cannot hold (Valkey 9 and
# Redis 7.4 give hash fields their own expiry), named in the refusal.
UNHELD = {22: " (a hash with per-field expiry: Valkey 9 / Redis 7.4+, not held by hotkv)",
          23: " (a listpack hash with per-field expiry: Redis 7.4+, not held by hotkv)",
          24: " (a hash with per-field expiry: Redis 7.4+, not held by hotkv)",
          25: " (a listpack hash with per-field expiry: Redis 7.4+, not held by hotkv)"}
# Versions read: Redis/Valkey up to 12 (Redis 7.4+), Valkey 9's 80.
READ_VERSIONS = set(range(1, 13)) | {80}


class RDBLoadError(Exception):
    """The file cannot be loaded: the server must not start with it."""


# ----------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------

class _Ctx:
    """What encodings.object_encoding reads of a client: its db and server."""
    __slots__ = ("db", "server")

    def __init__(self, db, server):
        self.db = db
        self.server = server


def _aux(out: bytearray, name: bytes, value: bytes):
    out.append(OP_AUX)
    put_string(name, out)
    put_string(value, out)


class _Sink:
    """Buffered writes to fd with a running CRC."""

    def __init__(self, fd: int, checksum: bool):
        self.fd = fd
        self.checksum = checksum
        self.crc = 0
        self.size = 0

    def write(self, buf):
        if self.checksum:
            self.crc = crc64(buf, self.crc)
        view = memoryview(buf)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.size += len(buf)


def write_dataset(server, fd: int, aof_base: bool = False, rdb_filter: str | None = None) -> int:
    """Write the whole dataset as an RDB file to fd; returns its size.
    ``rdb_filter`` (a replica's ``REPLCONF rdb-filter-only``): ``"functions"``
    writes the function libraries and no key, ``""`` neither."""
    values = server.config.values
    sink = _Sink(fd, values["rdbchecksum"])
    delay = values.get("rdb-key-save-delay", 0)
    delay_s = delay / 1e6 if delay > 0 else 0.0
    list_fill = values.get("list-max-listpack-size", -2)
    out = bytearray(b"REDIS%04d" % RDB_VERSION)
    _aux(out, b"valkey-ver", FORMAT_VALKEY_VERSION)
    _aux(out, b"redis-bits", b"64")
    _aux(out, b"ctime", b"%d" % int(time.time()))
    _aux(out, b"used-mem", b"%d" % used_memory())
    if not aof_base:
        # A replica's repl-stream-db / repl-id / repl-offset (hotkv.replication).
        for name, value in server.repl.rdb_aux():
            _aux(out, name, value)
    _aux(out, b"aof-base", b"1" if aof_base else b"0")
    with lzf_compression(values["rdbcompression"]):
        # The function libraries, before the keys (Valkey's rdbSaveFunctions).
        functions = server.functions     # None until a function is loaded (hotkv.lua)
        if rdb_filter == "":
            functions = None
        for code in functions.codes() if functions is not None else ():
            out.append(OP_FUNCTION2)
            put_string(code, out)
        for db in server.dbs if rdb_filter is None else ():
            data = db.data
            if not data:
                continue
            expires = db.expires
            out.append(OP_SELECTDB)
            put_len(db.index, out)
            out.append(OP_RESIZEDB)
            put_len(len(data), out)
            put_len(len(expires), out)
            ctx = _Ctx(db, server)
            for key, value in data.items():
                when = expires.get(key) if expires else None
                if when is not None:
                    out.append(OP_EXPIRETIME_MS)
                    out += struct.pack("<q", when)
                if type(value) is bytes:
                    # A string is its RDB string whatever OBJECT ENCODING says:
                    # the most common key skips the type table.
                    out.append(0)          # RDB_TYPE_STRING
                    put_string(key, out)
                    put_string(value, out)
                else:
                    body = serialize(value, object_encoding(ctx, key, value), list_fill)
                    out.append(body[0])
                    put_string(key, out)
                    out += memoryview(body)[1:]
                if len(out) >= WRITE_CHUNK:
                    sink.write(out)
                    out = bytearray()
                if delay_s:
                    time.sleep(delay_s)   # rdb-key-save-delay: tests hold a save open
    out.append(OP_EOF)
    sink.write(out)
    crc = sink.crc if sink.checksum else 0
    sink.write(crc.to_bytes(8, "little"))
    return sink.size


def temp_path(target: str, pid: int) -> str:
    return os.path.join(os.path.dirname(target) or ".", "temp-%d.rdb" % pid)


def write_file(server, target: str, pid: int | None = None) -> int:
    """Write the dataset to target atomically (temp file, fsync, rename,
    fsync of the directory); returns the size.  Raises OSError (the temp
    file removed) when any step fails."""
    tmp = temp_path(target, os.getpid() if pid is None else pid)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            size = write_dataset(server, fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(target)
    return size


def fsync_dir(path: str):
    """fsync the directory holding path, so a rename into it is durable."""
    try:
        dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# ----------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------

class Loaded:
    """A file's content, read in full and checked, not yet installed."""

    def __init__(self, databases: int):
        self.dbs = [dict() for _ in range(databases)]        # key -> value
        self.expires = [dict() for _ in range(databases)]    # key -> ms
        self.aux: dict = {}
        self.keys_loaded = 0
        self.keys_expired = 0
        self.version = 0
        self.functions_skipped = 0    # function libraries read (their count)
        self.functions: list = []     # their code, in file order
        self.end = 0              # offset after the checksum


def _header(buf: bytes) -> tuple[int, int]:
    """(RDB version, position after the magic)."""
    if buf[:5] == b"REDIS" and buf[5:9].isdigit():
        version, pos = int(buf[5:9]), 9
    elif buf[:6] == b"VALKEY" and buf[6:9].isdigit():
        version, pos = int(buf[6:9]), 9
    else:
        raise RDBLoadError("Wrong signature trying to load DB from file (offset 0)")
    if version not in READ_VERSIONS:
        raise RDBLoadError("Can't handle RDB format version %d (offset 5)" % version)
    return version, pos


def _plain_string(r: Reader) -> bytes:
    """``r.string()`` with the usual case -- a plain string under 16 kB
    (6- or 14-bit length) -- read inline: a million keys read their key
    and value through here."""
    buf = r.buf
    p = r.pos
    b = buf[p]
    if b < 0x40:
        n, p = b, p + 1
    elif b < 0x80:
        n, p = ((b & 0x3F) << 8) | buf[p + 1], p + 2
    elif b == 0xC3:
        # LZF: compressed and plain lengths, then the compressed bytes.
        r.pos = p + 1
        clen = r.num()
        ulen = r.num()
        p = r.pos
        end = p + clen
        if end > len(buf):
            raise RDBError("payload too short")
        r.pos = end
        return lzf_decompress(buf[p:end], ulen)
    else:
        return r.string()
    end = p + n
    if end > len(buf):
        raise RDBError("payload too short")
    r.pos = end
    return buf[p:end]


def _read_value(r: Reader, op: int, start: int, vpos: int, zset_entries: int,
                zset_value: int):
    """The value of RDB type op at r.pos (r moves past it)."""
    try:
        if op == 0:            # RDB_TYPE_STRING, the most common value
            return _plain_string(r)
        value, r.pos = load_value(op, r.buf, r.pos, zset_entries, zset_value)
        return value
    except RDBError as e:
        if str(e).startswith("unsupported RDB type"):
            raise RDBLoadError("Unknown RDB value type %d at offset %d%s"
                               % (op, start, UNHELD.get(op, ""))) from None
        raise RDBError("%s (value at offset %d)" % (e, vpos)) from None


def read_bytes(buf: bytes, databases: int = 16, now_ms: int | None = None,
               zset_entries: int = 128, zset_value: int = 64,
               preamble: bool = False, trace=None) -> Loaded:
    """Parse a whole RDB file held in buf; raises RDBLoadError.  With
    ``preamble`` (an AOF's RDB part) the AOF's commands may follow the
    checksum (``Loaded.end`` is where they start) and keys already expired
    are kept, as Valkey loads a preamble: the commands after it may still
    touch them.  ``trace(offset, event, *args)``, when given, hears "aux"
    (name, value), "db" (number) and "key" (key, type) as they are read
    (``hotkv check-rdb``'s report).

    The cyclic GC is paused meanwhile: the reader makes no cyclic garbage,
    and its collections would walk every object loaded so far again and
    again (a 1M-entry stream with a group: 1.7 -> 1.2 s)."""
    out = Loaded(databases)
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in _reader(buf, out, now_ms, zset_entries, zset_value, preamble, trace, 0):
            pass
    finally:
        if was:
            gc.enable()
    return out


def _reader(buf, out: Loaded, now_ms, zset_entries, zset_value, preamble, trace, step: int):
    """read_bytes as a generator filling ``out``: with ``step`` > 0 it
    yields the offset reached each time another ``step`` bytes are read
    (between two keys), so that a start-up load can let the loop answer
    clients meanwhile; with 0 it never yields."""
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    databases = len(out.dbs)
    out.version, pos = _header(buf)
    mark = pos + step if step > 0 else len(buf) + 1
    r = Reader(buf, pos)
    db = 0
    expire = None
    what = "an opcode"
    start = pos
    try:
        while True:
            start = r.pos
            what = "an opcode"
            op = r.take(1)[0]
            if op == OP_EOF:
                break
            if op == OP_EXPIRETIME_MS:
                what = "an expire time"
                expire = r.mstime()
            elif op == OP_EXPIRETIME:
                what = "an expire time"
                expire = int.from_bytes(r.take(4), "little", signed=True) * 1000
            elif op == OP_SELECTDB:
                what = "a database number"
                db = r.num()
                if db >= databases:
                    raise RDBLoadError(
                        "Data file was created with a server configured to handle more than "
                        "%d databases (SELECTDB %d at offset %d)" % (databases, db, start))
                if trace is not None:
                    trace(r.pos, "db", db)
            elif op == OP_RESIZEDB:
                what = "RESIZEDB sizes"
                r.num()
                r.num()
            elif op == OP_AUX:
                what = "an AUX field"
                name = r.string()
                out.aux[name] = r.string()
                if trace is not None:
                    trace(r.pos, "aux", name, out.aux[name])
            elif op == OP_FREQ:
                what = "an LFU frequency"
                r.take(1)
            elif op == OP_IDLE:
                what = "an LRU idle time"
                r.num()
            elif op == OP_SLOT_INFO:
                what = "slot info"
                r.num()
                r.num()
                r.num()
            elif op == OP_FUNCTION2:
                what = "a function library"
                out.functions.append(r.string())
                out.functions_skipped += 1
            elif op in (OP_MODULE_AUX, OP_FUNCTION_PRE_GA):
                raise RDBLoadError("%s at offset %d: hotkv has no modules or pre-GA functions"
                                   % ("Module aux data" if op == OP_MODULE_AUX
                                      else "A pre-GA function", start))
            else:
                what = "a key"
                key = _plain_string(r)
                vpos = r.pos
                if trace is not None:
                    trace(start, "key", key, op)
                what = "the value of type %d" % op
                value = _read_value(r, op, start, vpos, zset_entries, zset_value)
                keys = out.dbs[db]
                if key in keys:
                    raise RDBLoadError("RDB has duplicated key '%s' in DB %d (offset %d)"
                                       % (key.decode("latin-1"), db, start))
                if expire is not None and expire < now_ms:
                    out.keys_expired += 1
                else:
                    keys[key] = value
                    if expire is not None:
                        out.expires[db][key] = expire
                    out.keys_loaded += 1
                expire = None
                if r.pos >= mark:
                    mark = r.pos + step
                    yield r.pos
    except RDBLoadError:
        raise
    except (RDBError, IndexError, ValueError, OverflowError, struct.error) as e:
        if r.pos >= len(buf) or "too short" in str(e):
            raise RDBLoadError("Short read or truncated file: end of data while reading %s "
                               "at offset %d (file size %d)" % (what, start, len(buf))) from None
        raise RDBLoadError("Corrupt RDB: error reading %s at offset %d: %s"
                             % (what, start, e)) from None
    _check_tail(buf, r.pos, out, preamble)


def _check_tail(buf, eof: int, out: Loaded, preamble: bool):
    """After the EOF opcode at eof - 1: the CRC64 (version 5+), then the
    end of the file (or of the AOF's preamble): ``out.end``."""
    if out.version >= 5:
        if len(buf) < eof + 8:
            raise RDBLoadError("Short read or truncated file: the checksum after EOF at offset "
                               "%d is missing (file size %d)" % (eof - 1, len(buf)))
        stored = int.from_bytes(buf[eof:eof + 8], "little")
        if stored:
            got = crc64(memoryview(buf)[:eof])
            if got != stored:
                raise RDBLoadError("Wrong RDB checksum expected: (%x) got (%x) (checksum at "
                                   "offset %d)" % (stored, got, eof))
        eof += 8
    out.end = eof
    if eof != len(buf) and not preamble:
        raise RDBLoadError("Trailing data after the RDB's end at offset %d (file size %d)"
                           % (eof, len(buf)))


def read_preamble(buf: bytes, server) -> Loaded:
    """The RDB preamble at the start of an AOF held in buf (the AOF loader's
    entry point): checked like a file, expired keys kept, commands may
    follow from ``Loaded.end``."""
    values = server.config.values
    return read_bytes(buf, len(server.dbs), -(1 << 63),
                      values.get("zset-max-listpack-entries", 128),
                      values.get("zset-max-listpack-value", 64), preamble=True)


def read_file(path: str, server) -> Loaded:
    with open(path, "rb") as f:
        buf = f.read()
    values = server.config.values
    return read_bytes(buf, len(server.dbs), server.clock.ms(),
                      values.get("zset-max-listpack-entries", 128),
                      values.get("zset-max-listpack-value", 64))


def install(server, loaded: Loaded):
    """Put a checked file's function libraries and keys into the server's
    (empty) registry and databases; RDBLoadError when a library does not
    load (Valkey refuses the file then)."""
    if loaded.functions:
        try:
            registry(server).load_codes(loaded.functions)
        except FunctionError as e:
            raise RDBLoadError("Failed loading a function library from the RDB: %s"
                               % e.message) from None
    for db, keys, expires in zip(server.dbs, loaded.dbs, loaded.expires):
        if keys and not db.data and not db.expires and type(db.access) is dict \
                and not server.notify_new:
            # An empty database (start-up, DEBUG RELOAD): the loaded
            # dictionaries taken whole and the key indexes built once --
            # what add and set_expire would leave, key by key.
            db.take(keys, expires, KeyIndex(keys), KeyIndex(expires))
            continue
        for key, value in keys.items():
            db.add(key, value)
        for key, when in expires.items():
            db.set_expire(key, when)


class LoadProgress:
    """What INFO persistence shows while a start-up load runs (Valkey's
    loading_* fields): bytes read of the file, its size, when it began."""
    __slots__ = ("start_time", "total_bytes", "loaded_bytes", "rdb_used_mem")

    def __init__(self, total: int):
        self.start_time = int(time.time())
        self.total_bytes = total
        self.loaded_bytes = 0
        self.rdb_used_mem = 0

    def info_fields(self) -> list:
        elapsed = int(time.time()) - self.start_time
        remaining = self.total_bytes - self.loaded_bytes
        perc = self.loaded_bytes * 100.0 / self.total_bytes if self.total_bytes else 0.0
        # No rate known in the first second: a nominal 1 s, as Valkey says.
        eta = elapsed * remaining // (self.loaded_bytes + 1) if elapsed else 1
        return [("loading_start_time", self.start_time),
                ("loading_total_bytes", self.total_bytes),
                ("loading_rdb_used_mem", self.rdb_used_mem),
                ("loading_loaded_bytes", self.loaded_bytes),
                ("loading_loaded_perc", "%.2f" % perc),
                ("loading_eta_seconds", eta)]


def _log_loaded(loaded: Loaded):
    aux = loaded.aux
    ver = aux.get(b"valkey-ver") or aux.get(b"redis-ver")
    if ver:
        log.info("Loading RDB produced by %s version %s",
                 "valkey" if b"valkey-ver" in aux else "redis", ver.decode("latin-1"))
    ctime = aux.get(b"ctime")
    if ctime and ctime.lstrip(b"-").isdigit():
        log.info("RDB age %d seconds", int(time.time()) - int(ctime))


def load_at_start(server, path: str) -> Loaded:
    """Read, check and install path, logging as valkey-server does."""
    t0 = time.monotonic()
    loaded = read_file(path, server)
    _log_loaded(loaded)
    install(server, loaded)
    server.repl.loaded_aux(loaded.aux)     # a replica's PSYNC after a restart
    log.info("Done loading RDB, keys loaded: %d, keys expired: %d.",
             loaded.keys_loaded, loaded.keys_expired)
    log.info("DB loaded from disk: %.3f seconds", time.monotonic() - t0)
    return loaded


async def load_at_start_async(server, path: str) -> Loaded:
    """load_at_start on a running loop: the file is read in slices of
    ``loading-process-events-interval-bytes`` with a loop turn between two,
    so clients that connect meanwhile are answered (LOADING for what may
    not run while loading, as valkey-server) and INFO persistence shows
    ``loading:1`` and the progress (``server.loading_progress``).
    ``key-load-delay`` (microseconds a key, a test setting as in Valkey)
    slows it down key by key."""
    import asyncio
    t0 = time.monotonic()
    with open(path, "rb") as f:
        buf = f.read()
    values = server.config.values
    delay = values.get("key-load-delay", 0)
    step = 1 if delay > 0 else max(values.get("loading-process-events-interval-bytes",
                                              2 << 20), 1024)
    out = Loaded(len(server.dbs))
    progress = server.loading_progress = LoadProgress(len(buf))
    server.loading = True
    was = gc.isenabled()
    gc.disable()
    try:
        for pos in _reader(buf, out, server.clock.ms(),
                           values.get("zset-max-listpack-entries", 128),
                           values.get("zset-max-listpack-value", 64), False, None, step):
            progress.loaded_bytes = pos
            # INFO's rdb_last_load_keys_loaded counts up while loading, as Valkey's.
            server.snapshots.keys_loaded = out.keys_loaded
            if not progress.rdb_used_mem:
                used = out.aux.get(b"used-mem", b"")
                progress.rdb_used_mem = int(used) if used.isdigit() else 0
            await asyncio.sleep(delay / 1e6 if delay > 0 else 0)
        progress.loaded_bytes = len(buf)
        _log_loaded(out)
        install(server, out)
        server.repl.loaded_aux(out.aux)     # a replica's PSYNC after a restart
    finally:
        if was:
            gc.enable()
        server.loading = False
        server.loading_progress = None
    log.info("Done loading RDB, keys loaded: %d, keys expired: %d.",
             out.keys_loaded, out.keys_expired)
    log.info("DB loaded from disk: %.3f seconds", time.monotonic() - t0)
    return out
