"""Loading the AOF at start-up: replaying its files into the databases.

``LoadMixin.load`` (``Server.load_data``, before cron starts) runs on the
``AOF`` (hotkv.persistence.aof.writer), as Valkey's loadAppendOnlyFiles: temp files a
crash left are removed; an old single-file ``<dir>/<appendfilename>`` with
no manifest (or a manifest of that file alone, not yet moved) is upgraded:
a manifest naming it as base 1 is written, then it is moved into the
directory; a manifest that cannot be read refuses to start with Valkey's
reason and line, one naming a missing file with Valkey's "Unable to
obtain the AOF file ... length" -- before anything is loaded.  Then the
base, then every incr file in order.  Each file is parsed with hiredis and
replayed by a fake client of its own straight through the command
handlers, as Redis's loader does (no replies, stats or propagation; EXEC
runs its queue through ``dispatch.call``); ``server.loading`` makes the
dispatcher answer other clients LOADING, and blocking commands act
non-blocking.  A record cut by a crash is dropped (the file truncated to
the last complete command, or to before an unfinished MULTI) when
``aof-load-truncated yes`` and the file is the last of the AOF (a crash
cuts only the file being appended to); otherwise, and for corruption
anywhere else, start-up fails (``AOFLoadError``) with the file, the offset
and a hint, and nothing is cut.  What looks like a cut record but is
followed by complete commands up to EOF (a corrupt length swallowing them)
is corruption too: Redis would truncate those commands away.

A file that starts with ``REDIS`` (what a rewrite writes with
``aof-use-rdb-preamble yes``, hotkv's or Valkey's) begins with an RDB
preamble: it is read and checked whole by hotkv/persistence/rdbfile.py
(``read_preamble``; a corrupt or truncated preamble refuses to start, with
the offset, as Valkey aborts loading), installed, and the commands after its
checksum are replayed as above (offsets stay the file's).  Its key counts
are INFO's ``rdb_last_load_keys_loaded`` / ``_expired``, as in Valkey.

After loading, ``current_size`` is the files' total size and
``base_size`` the base's, as Valkey sets them (before any cut).

Invariants: the command statistics (calls, errors) are as before loading
(``_save_stats`` / ``_restore_stats``); ``server.loading`` and the AOF's
``loading`` are set exactly while the replay runs; an offset in an error
is the byte offset in the named file of the record named.
"""

from __future__ import annotations

import asyncio
import glob
import logging
import mmap
import os
import time

import hiredis

from ...clients.client import REPLY_OFF, Client
from ...core.registry import TABLE
from ...protocol.errors import CommandError
from ..rdbfile import RDBLoadError, fsync_dir, install, read_preamble
from .files import OFF, _unlink
from .manifest import (
    BASE,
    TEMP_PREFIX,
    AofInfo,
    Manifest,
    ManifestError,
    load as load_manifest,
    manifest_name,
    persist,
    temp_incr_name,
)

log = logging.getLogger("hotkv")

LOAD_CHUNK = 16 << 10         # bytes fed to hiredis at a time (hiredis
                              # memmoves its buffer as it consumes: keep it small)
LOAD_SLICE = 0.05             # seconds between event-loop yields


class AOFLoadError(Exception):
    """The AOF cannot be loaded: the server must not start."""


class LoadMixin:
    """Loading at start-up, mixed into ``AOF``."""

    async def load(self, yield_to_loop: bool = True):
        """Replay the AOF into the databases (server start): Valkey's
        loadAppendOnlyFiles over the manifest, after the upgrade of an old
        single-file AOF."""
        directory = self.dir_path()
        filename = self.filename()
        if self.state == OFF and not self.rewriting:
            # At start-up only: DEBUG LOADAOF reloads a running AOF, whose
            # rewrite may be writing those very files.
            self._remove_leftovers(directory, filename)
        try:
            manifest = load_manifest(directory, filename)
        except ManifestError as e:
            raise AOFLoadError(_manifest_error(directory, filename, e)) from None
        self.manifest = manifest if manifest is not None else Manifest()
        if os.path.isfile(self.file_path()) and self._needs_upgrade(manifest):
            self._upgrade()
        manifest = self.manifest
        if manifest.empty:
            log.info("No append only file in %s: starting empty", directory)
            return
        files = manifest.files()
        sizes = []
        for info in files:
            try:
                sizes.append(os.stat(os.path.join(directory, info.name)).st_size)
            except OSError as e:
                raise AOFLoadError(
                    "Unable to obtain the AOF file %s length. stat: %s (the manifest %s names "
                    "it): the server will not start" % (
                        info.name, e.strerror, manifest_name(filename))) from None
        total = sum(sizes)
        if total == 0:
            return
        server = self.server
        start = time.monotonic()
        self.loading = True
        server.loading = True
        self._attach()
        saved_stats = _save_stats(server)
        errors = 0
        commands = 0
        try:
            for n, info in enumerate(files):
                last = n == len(files) - 1
                t0 = time.monotonic()
                loader = await self._load_file(os.path.join(directory, info.name), last,
                                               yield_to_loop)
                if loader is None:
                    continue
                errors += loader.errors
                commands += loader.commands
                kind = "base" if info is manifest.base else "incr"
                log.info("DB loaded from %s file %s: %.3f seconds", kind, info.name,
                         time.monotonic() - t0)
        finally:
            self.loading = False
            server.loading = False
            self._attach()
            _restore_stats(server, saved_stats)
        # As Valkey: the sizes as found (a truncation is not subtracted);
        # the base size stands in for the size after the last rewrite.
        self.current_size = total
        self.base_size = sizes[0] if manifest.base is not None else 0
        self.loaded_commands = commands
        self.loaded_keys = sum(len(db.data) for db in server.dbs)
        self.load_seconds = time.monotonic() - start
        if errors:
            log.warning("%d commands of the AOF replied with an error while loading", errors)
        log.info("DB loaded from append only file %s: %d keys, %d commands, %.3f seconds",
                 directory, self.loaded_keys, self.loaded_commands, self.load_seconds)

    def _remove_leftovers(self, directory, filename):
        """Temp files a killed server or rewrite child left: never loaded."""
        server_dir = self.server_dir()
        for tmp in glob.glob(os.path.join(glob.escape(server_dir), "temp-rewriteaof-*.aof")):
            _unlink(tmp)
        if os.path.isdir(directory):
            _unlink(os.path.join(directory, temp_incr_name(filename)))
            _unlink(os.path.join(directory, TEMP_PREFIX + manifest_name(filename)))

    def _needs_upgrade(self, manifest) -> bool:
        """Valkey's three cases of an old single-file AOF next to (or
        instead of) the directory: no directory, no (or an empty) manifest,
        or a manifest of that file alone whose move did not happen."""
        if manifest is None or manifest.empty:
            return True
        base = manifest.base
        return (base is not None and not manifest.incr and base.name == self.filename()
                and not os.path.exists(os.path.join(self.dir_path(), base.name)))

    def _upgrade(self):
        """Valkey's aofUpgradePrepare: the old file becomes the base of a new
        manifest and moves into the directory.  The manifest is written
        first: a crash in between is retried at the next start (case 3 of
        _needs_upgrade)."""
        directory = self.dir_path()
        filename = self.filename()
        os.makedirs(directory, exist_ok=True)
        manifest = Manifest()
        manifest.base = AofInfo(filename, 1, BASE)
        manifest.base_seq = 1
        persist(directory, filename, manifest)
        os.rename(self.file_path(), os.path.join(directory, filename))
        fsync_dir(self.file_path())
        self.manifest = manifest
        log.info("Successfully migrated an old-style AOF file (%s) into the AOF directory (%s).",
                 filename, directory)

    async def _load_file(self, path, last, yield_to_loop):
        """Replay one file of the AOF: an RDB preamble if it starts with one,
        then its commands.  A cut tail is dropped (with aof-load-truncated)
        only in the last file.  None for an empty file."""
        size = os.path.getsize(path)
        if size == 0:
            return None
        server = self.server
        with open(path, "rb") as f:
            preamble = f.read(5) == b"REDIS"
        rdb = None
        if preamble:
            with open(path, "rb") as f:
                buf = f.read()
            try:
                rdb = read_preamble(buf, server)
            except RDBLoadError as e:
                raise AOFLoadError(
                    "Bad RDB preamble in the append only file %s: %s. The server will not "
                    "start: make a backup of the file, then check it with "
                    "valkey-check-aof" % (path, e)) from None
            del buf
            log.info("Reading RDB preamble from AOF file %s", path)
            install(server, rdb)
            server.snapshots.keys_loaded = rdb.keys_loaded
            server.snapshots.keys_expired = rdb.keys_expired
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            loader = _Loader(server, mm, size, path, rdb.end if rdb is not None else 0, last)
            try:
                await loader.run(yield_to_loop)
            finally:
                mm.close()
        if loader.truncate_at is not None:
            os.truncate(path, loader.truncate_at)
            self.load_truncated_at = loader.truncate_at
        return loader


def _manifest_error(directory, filename, e) -> str:
    where = ""
    if e.linenum:
        where = ", at line %d" % e.linenum
        if e.line is not None:
            where += " ('%s')" % e.line.decode("utf-8", "replace")
    return ("Fatal AOF manifest file error reading %s%s: %s. The server will not start."
            % (os.path.join(directory, manifest_name(filename)), where, e.why))


def _save_stats(server):
    return (server.stat_numcommands, server.stat_total_error_replies, server.cmdstats.save())


def _restore_stats(server, saved):
    server.stat_numcommands, _, counted = saved
    server.cmdstats.restore(counted)     # the server's command and error stats (hotkv.core.stats)


# ----------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------

_HINT = ("make a backup of the file, then repair it with hotkv check-aof --fix "
         "(valkey-check-aof --fix and redis-check-aof --fix work too)")


class _Truncated(Exception):
    pass


class _Corrupt(Exception):
    def __init__(self, offset, why):
        super().__init__(why)
        self.offset = offset
        self.why = why


def _parse_one(mm, pos: int, size: int, max_bulk: int = 1 << 62):
    """Parse one record at pos the careful way: (argv or None for an
    annotation line, end offset).  Raises _Truncated or _Corrupt.  A length
    no client could have sent (over proto-max-bulk-len) is corruption, not a
    cut record: truncating there would drop everything after it."""
    if pos >= size:
        raise _Truncated()
    first = mm[pos:pos + 1]
    if first == b"#":
        nl = mm.find(b"\n", pos)
        if nl < 0:
            raise _Truncated()
        return None, nl + 1

    def line(p):
        nl = mm.find(b"\r\n", p, min(size, p + 64))
        if nl < 0:
            if size - p < 64 and b"\n" not in mm[p:size]:
                raise _Truncated()
            raise _Corrupt(p, "a header line is too long or not CRLF-terminated")
        return mm[p:nl], nl + 2

    if first != b"*":
        raise _Corrupt(pos, "expected '*' (a command), found %r" % first)
    head, p = line(pos + 1)
    if not head.isdigit() or not 1 <= int(head) < 1 << 31:
        raise _Corrupt(pos, "bad argument count %r" % head)
    argc = int(head)
    argv = []
    for _ in range(argc):
        if p >= size:
            raise _Truncated()
        if mm[p:p + 1] != b"$":
            raise _Corrupt(p, "expected '$' (an argument), found %r" % mm[p:p + 1])
        head, q = line(p + 1)
        if not head.isdigit():
            raise _Corrupt(p, "bad argument length %r" % head)
        n = int(head)
        if n > max_bulk:
            raise _Corrupt(p, "argument length %d over proto-max-bulk-len" % n)
        if q + n + 2 > size:
            raise _Truncated()
        if mm[q + n:q + n + 2] != b"\r\n":
            raise _Corrupt(q + n, "argument not followed by CRLF")
        argv.append(mm[q:q + n])
        p = q + n + 2
    return argv, p


def _intact_records_after(mm, pos, size, table, min_records=2,
                          max_candidates=1000, max_scan=16 << 20):
    """The offset of a run of at least ``min_records`` complete commands of
    known names, starting at a line start after pos and ending exactly at
    EOF; None if there is none.  A value that merely contains RESP would
    have to be cut exactly at the end of one of its embedded commands to
    look like this."""
    start = pos + 1
    limit = min(size, pos + max_scan)
    for _ in range(max_candidates):
        at = mm.find(b"\r\n*", start, limit)
        if at < 0:
            return None
        cand = at + 2
        start = cand
        p, n = cand, 0
        try:
            while p < size:
                argv, p = _parse_one(mm, p, size)
                if argv is None:
                    continue
                name = bytes(argv[0])
                if table.get(name) is None and table.get(name.lower()) is None:
                    break
                n += 1
            else:
                if n >= min_records:
                    return cand
        except (_Truncated, _Corrupt):
            pass
    return None


class _Loader:
    def __init__(self, server, mm, size, path, start=0, last=True):
        self.table = TABLE
        self.last = last          # the last file of the AOF: the only one a crash can cut
        self.start = start        # where the commands begin (after a preamble)
        self.server = server
        self.mm = mm
        self.size = size
        self.path = path
        self.client = Client(server, fake=True)
        self.client.reply_mode = REPLY_OFF
        self.commands = 0
        self.errors = 0
        # argv[0] as spelled in the file -> (command, arity check), for plain
        # commands (no subcommands, not MULTI/EXEC/DISCARD)
        self.cache: dict = {}
        self.truncate_at = None
        self.before_multi = start

    def fail(self, offset, why, start=None):
        where = "offset %d" % offset
        if start is not None and start != offset:
            where += " (in the command starting at offset %d)" % start
        elif start is not None:
            where += " (the command starting at offset %d)" % start
        raise AOFLoadError(
            "Bad file format reading the append only file %s at %s: %s. "
            "The server will not start: %s; a truncated tail only is cut "
            "automatically with aof-load-truncated yes." % (self.path, where, why, _HINT))

    async def run(self, yield_to_loop):
        server = self.server
        # As Redis's loader, handlers run directly (no reply, no stats, no
        # propagation); a current client makes EXEC's own calls inner ones.
        saved = server.current_client
        server.current_client = self.client
        server.cmd_time_ms = server.clock.ms()
        try:
            await self._run(yield_to_loop)
        finally:
            server.current_client = saved
            server.current_cmd = server.current_argv = server.prop_override = None
            server.prop_pending = []
            server.ready_keys = []
            server.ready_set.clear()

    async def _run(self, yield_to_loop):
        mm, size = self.mm, self.size
        client = self.client
        server = self.server
        cache = self.cache
        pos = self.start
        deadline = time.monotonic() + LOAD_SLICE
        view = memoryview(mm)
        try:
            while pos < size:
                reader = hiredis.Reader()
                fed = pos
                while True:
                    try:
                        item = reader.gets()
                    except hiredis.ProtocolError:
                        break
                    if item is False:
                        if fed >= size:
                            break
                        end = min(size, fed + LOAD_CHUNK)
                        reader.feed(view[fed:end])
                        fed = end
                        server.cmd_time_ms = server.clock.ms()
                        if yield_to_loop and time.monotonic() > deadline:
                            await asyncio.sleep(0)
                            deadline = time.monotonic() + LOAD_SLICE
                        continue
                    if type(item) is not list or not item:
                        break
                    # Inlined _enc_len and the common case of execute: this
                    # loop runs once per command of the file.
                    k = len(item)
                    n = 3 + (1 if k < 10 else len(str(k)))
                    for a in item:
                        if type(a) is not bytes:
                            n = -1
                            break
                        m = len(a)
                        n += m + (6 if m < 10 else 7 if m < 100 else 5 + len(str(m)))
                    if n < 0:
                        break
                    entry = cache.get(item[0])
                    if entry is None or client.multi or not entry[1](k):
                        self.execute(item, pos)
                    else:
                        self.commands += 1
                        self._apply(entry[0], item)
                    pos += n
                if pos >= size:
                    break
                # hiredis stopped short: settle what is at pos the careful way.
                try:
                    argv, end = _parse_one(mm, pos, size,
                                           server.config.values["proto-max-bulk-len"])
                except _Truncated:
                    self.truncated(pos)
                    return
                except _Corrupt as e:
                    self.fail(e.offset, e.why, pos)
                if argv is not None:
                    self.execute([bytes(a) for a in argv], pos)
                pos = end
        finally:
            view.release()
        if client.multi:
            log.warning("Revert incomplete MULTI/EXEC transaction in AOF file %s", self.path)
            self.truncated(self.before_multi, multi=True)

    def truncated(self, pos, multi=False):
        if not multi:
            # A crash cuts the last record only.  Complete records after the
            # cut mean a corrupt length swallowed them: truncating would
            # throw them away, so refuse instead.
            intact = _intact_records_after(self.mm, pos, self.size, self.table)
            if intact is not None:
                self.fail(pos, "a length in this command runs past the end of the file, yet "
                          "complete commands follow from offset %d: the length is corrupt"
                          % intact, pos)
        if self.client.multi and not multi:
            pos = self.before_multi
        if not self.last:
            raise AOFLoadError(
                "Unexpected end of file reading the append only file %s at offset %d of %d: "
                "it is not the last file of the AOF, so this is not a crash cutting the last "
                "write (Valkey: the truncated file is not the last file). The server will not "
                "start: %s." % (self.path, pos, self.size, _HINT))
        if not self.server.config.values["aof-load-truncated"]:
            raise AOFLoadError(
                "Unexpected end of file reading the append only file %s: the last command, "
                "at offset %d of %d, is incomplete (a crash during a write). The server will "
                "not start: %s, or set aof-load-truncated yes to drop the incomplete "
                "command at start-up." % (self.path, pos, self.size, _HINT))
        log.warning("!!! Warning: short read while loading the AOF file %s !!!", self.path)
        log.warning("!!! Truncating the AOF %s at offset %d (%d bytes dropped) !!!",
                    self.path, pos, self.size - pos)
        self.truncate_at = pos

    def execute(self, argv, offset):
        name = argv[0]
        table = self.table
        cmd = table.get(name)
        if cmd is None:
            cmd = table.get(name.lower())
            if cmd is None:
                raise AOFLoadError(
                    "Unknown command '%s' reading the append only file %s at offset %d"
                    % (name.decode("utf-8", "replace")[:128], self.path, offset))
        plain = cmd.subcommands is None
        if not plain and len(argv) >= 2:
            sub = cmd.subcommands.get(argv[1]) or cmd.subcommands.get(argv[1].lower())
            if sub is None:
                self.fail(offset, "unknown subcommand %r of %s" % (argv[1][:64], cmd.name),
                          offset)
            cmd = sub
        n = len(argv)
        if (cmd.arity > 0 and n != cmd.arity) or n < -cmd.arity:
            self.fail(offset, "wrong number of arguments for '%s'" % cmd.name, offset)
        self.commands += 1
        cname = cmd.name
        if cname == "select":
            idx = argv[1]
            if not idx.isdigit() or int(idx) >= len(self.server.dbs):
                raise AOFLoadError(
                    "The append only file %s selects database %r at offset %d but the "
                    "server has %d databases: raise 'databases' to load it"
                    % (self.path, idx.decode("utf-8", "replace")[:32], offset,
                       len(self.server.dbs)))
        elif plain and cname not in ("multi", "exec", "discard"):
            arity = cmd.arity
            self.cache[name] = (cmd, (lambda k, a=arity: k == a) if arity > 0
                                else (lambda k, a=-arity: k >= a))
        if cname == "multi":
            self.before_multi = offset
        client = self.client
        if client.multi and cname not in ("exec", "discard", "multi"):
            client.multi_queue.append((cmd, argv))
            return
        self._apply(cmd, argv)

    def _apply(self, cmd, argv):
        """Run one logged command's handler, as Redis's loader does: no
        reply, no stats, no propagation; an error is counted, not fatal."""
        server = self.server
        server.current_cmd = cmd
        server.current_argv = argv
        server.prop_override = None
        # Only this command's errors: the server-wide counter also counts the
        # -LOADING replies other clients get meanwhile.  An EXEC's inner errors
        # add to it during the call, as they do for a client.
        before = server.stat_total_error_replies
        try:
            cmd.func(self.client, argv)
        except CommandError:
            self.errors += 1
        except Exception as e:
            self.errors += 1
            server.log_exception(cmd, argv, e)
        self.errors += server.stat_total_error_replies - before
