"""``hotkv check-rdb`` and ``hotkv check-aof``: what valkey-check-rdb and
valkey-check-aof do, for the files hotkv and Valkey write.

check-rdb reads a whole RDB file with the server's own reader
(hotkv/persistence/rdbfile.py ``read_bytes``, so it refuses exactly what a start-up
would refuse), reporting each AUX field and SELECTDB with its offset, then
the checksum and the key counts; on an error, the offset, what was wrong
and the key and type being read.  Exit code 0 when the file is sound, 1
otherwise (valkey-check-rdb's).

check-aof takes an old-style AOF (commands, or an RDB preamble and
commands) or a multi-part AOF's manifest (base then incr files, in the
manifest's order).  It walks the RESP records the way valkey-check-aof
does, so its ``AOF analyzed: filename=..., size=..., ok_up_to=...,
ok_up_to_line=..., diff=...`` line has the same numbers: ``ok_up_to`` is
where the last complete record (or complete MULTI ... EXEC) ends,
``ok_up_to_line`` the count of CRLF-terminated lines read when the walk
stopped (it carries over from file to file, as Valkey's counter does), and
``diff`` what follows ``ok_up_to``.  ``--fix`` truncates the file at
``ok_up_to`` after a ``y`` on standard input -- only the last file of a
multi-part AOF, as the server only tolerates a cut there -- and
``--truncate-to-timestamp T`` cuts the last file at the first ``#TS:``
annotation later than T.  Exit codes are valkey-check-aof's: 0 valid or
fixed, 1 invalid, refused or bad usage.

Invariant: nothing is written unless --fix was confirmed or
--truncate-to-timestamp found a cut; a file is only ever shortened.
"""

from __future__ import annotations

import os
import sys
import time

from ..persistence.aof import manifest
from ..persistence.rdbfile import RDBLoadError, read_bytes

# SELECTDB numbers accepted (the reader keeps a dictionary per database).
CHECK_DATABASES = 1024

# RDB value type names, as the RDB format documents them.
TYPE_NAMES = {0: "string", 1: "list", 2: "set", 3: "zset", 4: "hash", 5: "zset-v2",
              6: "module-pre-ga", 7: "module-v2", 9: "hash-zipmap", 10: "list-ziplist",
              11: "set-intset", 12: "zset-ziplist", 13: "hash-ziplist", 14: "quicklist",
              15: "stream", 16: "hash-listpack", 17: "zset-listpack", 18: "quicklist-v2",
              19: "stream-v2", 20: "set-listpack", 21: "stream-v3"}


# ----------------------------------------------------------------------
# check-rdb
# ----------------------------------------------------------------------

def check_rdb_bytes(buf: bytes, name: str, out, preamble: bool = False):
    """Report on the RDB in buf; returns (ok, end offset of the RDB)."""
    out.write("[offset 0] Checking RDB file %s\n" % name)
    state = {"key": None, "type": None, "keys": 0}

    def trace(offset, event, *args):
        if event == "aux":
            out.write("[offset %d] AUX FIELD %s = '%s'\n"
                      % (offset, args[0].decode("latin-1"), args[1].decode("latin-1")))
        elif event == "db":
            out.write("[offset %d] Selecting DB ID %d\n" % (offset, args[0]))
        else:
            state["key"], state["type"] = args
            state["keys"] += 1

    try:
        loaded = read_bytes(buf, databases=CHECK_DATABASES, now_ms=int(time.time() * 1000),
                            preamble=preamble, trace=trace)
    except RDBLoadError as e:
        out.write("--- RDB ERROR DETECTED ---\n")
        out.write("%s\n" % e)
        if state["key"] is not None:
            out.write("[additional info] Reading key '%s'\n" % state["key"].decode("latin-1"))
            t = state["type"]
            out.write("[additional info] Reading type %d (%s)\n" % (t, TYPE_NAMES.get(t, "?")))
        out.write("[info] %d keys read\n" % state["keys"])
        return False, 0
    expires = sum(len(e) for e in loaded.expires) + loaded.keys_expired
    out.write("[offset %d] Checksum OK\n" % loaded.end)
    out.write("[offset %d] \\o/ RDB looks OK! \\o/\n" % loaded.end)
    out.write("[info] %d keys read\n" % (loaded.keys_loaded + loaded.keys_expired))
    out.write("[info] %d expires\n" % expires)
    out.write("[info] %d already expired\n" % loaded.keys_expired)
    if loaded.functions_skipped:
        out.write("[info] %d function libraries\n" % loaded.functions_skipped)
    return True, loaded.end


def check_rdb(argv: list[str], out=sys.stdout) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        out.write("Usage: hotkv check-rdb <rdb-file-name>\n")
        return 1
    path = argv[0]
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        out.write("[offset 0] Checking RDB file %s\n" % path)
        out.write("--- RDB ERROR DETECTED ---\n")
        out.write("Cannot open the file: %s\n" % e.strerror)
        return 1
    ok, _ = check_rdb_bytes(buf, path, out)
    return 0 if ok else 1


# ----------------------------------------------------------------------
# check-aof
# ----------------------------------------------------------------------

class _Abort(Exception):
    """Stop with exit code 1 (the message is already written)."""


class _Walk:
    """valkey-check-aof's walk over the RESP records of one file."""

    def __init__(self, data: bytes, pos: int, line: int):
        self.data = data
        self.pos = pos
        self.line = line
        self.error = ""
        self.epos = pos          # where the last read began (error offsets)

    def fail(self, at: int, why: str) -> bool:
        self.error = "0x%16x: %s" % (at, why)
        return False

    def number(self, prefix: bytes):
        at = self.epos = self.pos
        end = self.data.find(b"\n", at)
        # A line is read at most 127 bytes at a time, as fgets into 128.
        chunk = self.data[at:end + 1 if end >= 0 and end - at < 127 else at + 127]
        if not chunk:
            return None
        self.pos = at + len(chunk)
        if chunk[:1] != prefix:
            return self.fail(at, "Expected prefix '%s', got: '%s'"
                             % (prefix.decode(), chunk[:1].decode("latin-1")))
        digits = chunk[1:]
        n = 0
        i = 0
        sign = 1
        if digits[:1] in (b"-", b"+"):
            sign = -1 if digits[:1] == b"-" else 1
            i = 1
        while i < len(digits) and 48 <= digits[i] <= 57:
            n = n * 10 + digits[i] - 48
            i += 1
        if digits[i:i + 2] != b"\r\n":
            rest = digits[i:i + 2] + b"\0\0"
            return self.fail(at, "Expected \\r\\n, got: %02x%02x" % (rest[0], rest[1]))
        self.line += 1
        return sign * n

    def record(self, multi: list) -> bool:
        argc = self.number(b"*")
        if argc is None or argc is False:
            return False
        for i in range(argc):
            n = self.number(b"$")
            if n is None or n is False:
                return False
            if n < 0:
                return self.fail(self.pos, "Expected to read string of %d bytes, which is not "
                                 "in the suitable range" % n)
            at = self.epos = self.pos
            got = len(self.data) - at
            if got < n + 2:
                self.pos = len(self.data)
                return self.fail(at, "Expected to read %d bytes, got %d bytes" % (n + 2, got))
            arg = self.data[at:at + n]
            self.pos = at + n + 2
            if self.data[at + n:at + n + 2] != b"\r\n":
                tail = self.data[at + n:at + n + 2]
                return self.fail(at, "Expected \\r\\n, got: %02x%02x" % (tail[0], tail[1]))
            self.line += 1
            if i == 0:
                word = arg.lower()
                if word == b"multi":
                    multi[0] += 1
                    if multi[0] > 1:
                        return self.fail(at, "Unexpected MULTI in AOF")
                elif word == b"exec":
                    multi[0] -= 1
                    if multi[0]:
                        return self.fail(at, "Unexpected EXEC in AOF")
        return True


OK, EMPTY, TRUNCATED, TS_TRUNCATED = range(4)


class _AofCheck:
    def __init__(self, out, fix: bool, to_timestamp: int, stdin):
        self.out = out
        self.fix = fix
        self.to_timestamp = to_timestamp
        self.stdin = stdin
        self.line = 1

    def single(self, name: str, path: str, last: bool, preamble: bool) -> int:
        out = self.out
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            out.write("Cannot open file %s: %s, aborting...\n" % (path, e.strerror))
            raise _Abort from None
        size = len(data)
        if size == 0:
            return EMPTY
        start = 0
        if preamble:
            ok, start = check_rdb_bytes(data, path, out, preamble=True)
            if not ok:
                out.write("RDB preamble of AOF file is not sane, aborting.\n")
                raise _Abort
            out.write("RDB preamble is OK, proceeding with AOF tail...\n")
        walk = _Walk(data, start, self.line)
        multi = [0]
        pos = start
        while True:
            if not multi[0]:
                pos = walk.pos
            if walk.pos >= size:
                break
            c = data[walk.pos:walk.pos + 1]
            if c == b"#":
                at = walk.pos
                end = data.find(b"\n", at)
                end = size if end < 0 else end + 1
                text = data[at:end]
                walk.pos = end
                if self.to_timestamp is not None and text.startswith(b"#TS:"):
                    digits = text[4:].rstrip(b"\r\n")
                    if not digits.lstrip(b"-").isdigit() or not text.endswith(b"\r\n"):
                        out.write("Invalid timestamp annotation\n")
                        raise _Abort
                    if int(digits) > self.to_timestamp:
                        return self._cut_at_timestamp(name, path, at, last)
            elif c == b"*":
                if not walk.record(multi):
                    break
            else:
                out.write("AOF %s format error\n" % name)
                break
        if walk.pos >= size and multi[0] and not walk.error:
            walk.fail(walk.epos, "Reached EOF before reading EXEC for MULTI")
        if walk.error:
            out.write(walk.error + "\n")
        self.line = walk.line
        diff = size - pos
        if diff == 0 and self.to_timestamp is not None:
            out.write("Truncate nothing in AOF %s to timestamp %d\n" % (name, self.to_timestamp))
            return OK
        out.write("AOF analyzed: filename=%s, size=%d, ok_up_to=%d, ok_up_to_line=%d, diff=%d\n"
                  % (name, size, pos, walk.line, diff))
        if diff > 0:
            if not self.fix:
                out.write("AOF %s is not valid. Use the --fix option to try fixing it.\n" % name)
                raise _Abort
            if not last:
                out.write("Failed to truncate AOF %s because it is not the last file\n" % name)
                raise _Abort
            out.write("This will shrink the AOF %s from %d bytes, with %d bytes, to %d bytes\n"
                      % (name, size, diff, pos))
            out.write("Continue? [y/N]: ")
            out.flush()
            answer = self.stdin.readline()
            if not answer[:1].lower() == "y":
                out.write("Aborting...\n")
                raise _Abort
            os.truncate(path, pos)
            return TRUNCATED
        return OK

    def _cut_at_timestamp(self, name, path, at, last) -> int:
        out = self.out
        if at == 0:
            out.write("AOF %s has nothing before timestamp %d, aborting...\n"
                      % (path, self.to_timestamp))
            raise _Abort
        if not last:
            out.write("Failed to truncate AOF %s to timestamp %d to offset %d because it is "
                      "not the last file.\n" % (path, self.to_timestamp, at))
            raise _Abort
        os.truncate(path, at)
        return TS_TRUNCATED

    def style(self, ret: int, name: str, kind: str):
        out = self.out
        if ret == OK:
            out.write("%s %s is valid\n" % (kind, name))
        elif ret == EMPTY:
            out.write("%s %s is empty\n" % (kind, name))
        elif ret == TS_TRUNCATED:
            out.write("Successfully truncated AOF %s to timestamp %d\n"
                      % (name, self.to_timestamp))
        else:
            out.write("Successfully truncated AOF %s\n" % name)


def _is_manifest(path: str) -> bool:
    with open(path, "rb") as f:
        for raw in f:
            if raw.startswith(b"#"):
                continue
            return raw.startswith(b"file")
    return False


def _is_rdb(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(8)
    return len(head) >= 8 and head[:5] == b"REDIS"


def check_aof(argv: list[str], out=sys.stdout, stdin=sys.stdin) -> int:
    fix = False
    to_timestamp = None
    usage = "Usage: hotkv check-aof [--fix|--truncate-to-timestamp $timestamp] " \
            "<file.manifest|file.aof>\n"
    if len(argv) == 1 and not argv[0].startswith("--"):
        path = argv[0]
    elif len(argv) == 2 and argv[0] == "--fix":
        fix, path = True, argv[1]
    elif len(argv) == 3 and argv[0] == "--truncate-to-timestamp":
        if not argv[1].lstrip("-").isdigit():
            out.write("Invalid timestamp, aborting...\n")
            return 1
        to_timestamp, path = int(argv[1]), argv[2]
    else:
        out.write(usage)
        return 1
    check = _AofCheck(out, fix, to_timestamp, stdin)
    try:
        try:
            multi_part = _is_manifest(path)
            rdb = not multi_part and _is_rdb(path)
        except OSError as e:
            out.write("Cannot open file %s: %s\n" % (path, e.strerror))
            return 1
        if not multi_part:
            out.write("Start checking Old-Style AOF\n")
            check.style(check.single(path, path, True, rdb), path, "AOF")
            return 0
        out.write("Start checking Multi Part AOF\n")
        try:
            with open(path, "rb") as f:
                parsed = manifest.parse(f.read())
        except (OSError, manifest.ManifestError) as e:
            out.write("%s\n" % (getattr(e, "why", None) or e))
            return 1
        base = parsed.base.name if parsed.base is not None else None
        incrs = [info.name for info in parsed.incr]
        directory = os.path.dirname(path)
        total = (base is not None) + len(incrs)
        n = 0
        if base is not None:
            n += 1
            full = os.path.join(directory, base)
            try:
                preamble = _is_rdb(full)
            except OSError as e:
                out.write("Cannot open file %s: %s\n" % (full, e.strerror))
                return 1
            out.write("Start to check BASE AOF (%s format).\n" % ("RDB" if preamble else "RESP"))
            check.style(check.single(base, full, n == total, preamble), base, "BASE AOF")
        if incrs:
            out.write("Start to check INCR files.\n")
            for name in incrs:
                n += 1
                ret = check.single(name, os.path.join(directory, name), n == total, False)
                check.style(ret, name, "INCR AOF")
        out.write("All AOF files and manifest are valid\n")
        return 0
    except _Abort:
        return 1
