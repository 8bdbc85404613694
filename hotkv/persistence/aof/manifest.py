"""The multi-part AOF's manifest: which files make the AOF, in which order.

The AOF lives in ``<dir>/<appenddirname>/`` as Valkey 7+ keeps it: one base
file (``<appendfilename>.<seq>.base.rdb`` with an RDB preamble, ``.base.aof``
in command form), incremental files (``<appendfilename>.<seq>.incr.aof``)
replayed after it in sequence order, and history files (a replaced base,
rewritten incrs) waiting to be deleted.  The manifest
``<appendfilename>.manifest`` lists them, one line each, in Valkey's format:

    file appendonly.aof.2.base.rdb seq 2 type b
    file appendonly.aof.1.incr.aof seq 1 type h
    file appendonly.aof.2.incr.aof seq 2 type i

base first, then history, then incr.  A name that needs quoting (a space, a
quote, a byte that is not printable) is written as sdscatrepr does and read
back with sdssplitargs.  Reading follows Valkey's loader: ``#`` lines are
comments, a line must end in a newline and be at most 1024 bytes, every line
holds key/value pairs (at least file, seq and type; keys compared without
case; unknown keys are ignored, for forward compatibility), a name is a
bare file name (no ``/`` or ``\\``), one base at most, incr sequence numbers strictly rising.

Invariants: the manifest on disk is only ever replaced whole (``persist``:
a temp file, fsync, rename, fsync of the directory), so after a crash it is
the old one or the new one; a ``Manifest`` is changed on a ``copy`` that
replaces the live one only once it is on disk.
"""

from __future__ import annotations

import os

from ...protocol.replies import quoted
from ...protocol.resp import split_inline_args
from ..rdbfile import fsync_dir

BASE, HIST, INCR = "b", "h", "i"
MAX_LINE = 1024
TEMP_PREFIX = "temp-"


class ManifestError(Exception):
    """A manifest that cannot be used: the server must not start.  ``line``
    and ``linenum`` name the offending line when there is one."""

    def __init__(self, why: str, line: bytes | None = None, linenum: int = 0):
        super().__init__(why)
        self.why = why
        self.line = line
        self.linenum = linenum


class AofInfo:
    __slots__ = ("name", "seq", "type")

    def __init__(self, name: str, seq: int, type_: str):
        self.name = name
        self.seq = seq
        self.type = type_

    def copy(self) -> "AofInfo":
        return AofInfo(self.name, self.seq, self.type)

    def line(self) -> bytes:
        raw = os.fsencode(self.name)
        if _needs_repr(raw):
            raw = quoted(raw)
        return b"file %s seq %d type %s\n" % (raw, self.seq, self.type.encode())

    def __repr__(self):
        return "AofInfo(%r, %d, %r)" % (self.name, self.seq, self.type)


def _needs_repr(raw: bytes) -> bool:
    # sdsneedsrepr: a backslash, a quote, a space or a byte that is not
    # printable ASCII (bytes over 0x7f included, as a signed char is).
    return any(c in (0x5C, 0x22, 0x20) or not 0x20 < c < 0x7F for c in raw)


def base_name(filename: str, seq: int, preamble: bool) -> str:
    return "%s.%d.base.%s" % (filename, seq, "rdb" if preamble else "aof")


def incr_name(filename: str, seq: int) -> str:
    return "%s.%d.incr.aof" % (filename, seq)


def temp_incr_name(filename: str) -> str:
    """The incr file of a rewrite turning the AOF on: it joins the manifest
    under its real name only when the rewrite succeeds."""
    return "%s%s.incr" % (TEMP_PREFIX, filename)


def manifest_name(filename: str) -> str:
    return filename + ".manifest"


class Manifest:
    def __init__(self):
        self.base: AofInfo | None = None
        self.history: list[AofInfo] = []
        self.incr: list[AofInfo] = []
        self.base_seq = 0          # the last base sequence number used
        self.incr_seq = 0          # the last incr sequence number used
        self.dirty = False

    def copy(self) -> "Manifest":
        m = Manifest()
        m.base = self.base.copy() if self.base is not None else None
        m.history = [a.copy() for a in self.history]
        m.incr = [a.copy() for a in self.incr]
        m.base_seq, m.incr_seq, m.dirty = self.base_seq, self.incr_seq, self.dirty
        return m

    @property
    def empty(self) -> bool:
        return self.base is None and not self.incr

    def files(self) -> list[AofInfo]:
        """The files to load, in order: the base, then every incr."""
        return ([self.base] if self.base is not None else []) + self.incr

    def new_base(self, filename: str, preamble: bool) -> str:
        """The next base's name; the current base becomes history."""
        if self.base is not None:
            self.base.type = HIST
            self.history.insert(0, self.base)
        self.base_seq += 1
        self.base = AofInfo(base_name(filename, self.base_seq, preamble), self.base_seq, BASE)
        self.dirty = True
        return self.base.name

    def new_incr(self, filename: str) -> str:
        self.incr_seq += 1
        info = AofInfo(incr_name(filename, self.incr_seq), self.incr_seq, INCR)
        self.incr.append(info)
        self.dirty = True
        return info.name

    def last_incr(self, filename: str) -> str:
        """The incr file to append to at start: the last one, or a new one."""
        if not self.incr:
            return self.new_incr(filename)
        return self.incr[-1].name

    def incr_to_history(self, keep_last: bool):
        """After a rewrite: the incr files it covered become history (all
        of them, or all but the one being appended to)."""
        keep = self.incr[-1:] if keep_last and self.incr else []
        done = self.incr[:len(self.incr) - len(keep)]
        for info in reversed(done):
            info.type = HIST
            self.history.insert(0, info)
        self.incr = keep
        self.dirty = True

    def serialize(self) -> bytes:
        head = [self.base] if self.base is not None else []
        return b"".join(a.line() for a in head + self.history + self.incr)


def parse(data: bytes) -> Manifest:
    """A manifest's bytes as Valkey's aofLoadManifestFromFile reads them;
    ManifestError with Valkey's reason otherwise."""
    m = Manifest()
    maxseq = 0
    if not data:
        raise ManifestError("Found an empty AOF manifest")
    lines = data.split(b"\n")
    ended = data.endswith(b"\n")
    if ended:
        lines.pop()
    for num, raw in enumerate(lines, 1):
        # fgets reads at most MAX_LINE bytes: a longer line (or a last one
        # with no newline) is refused, unless it is a comment.
        if raw.startswith(b"#"):
            continue
        if len(raw) >= MAX_LINE or (num == len(lines) and not ended):
            raise ManifestError("The AOF manifest file contains too long line", None, num)
        line = raw.strip(b" \t\r\n")
        if not line:
            raise ManifestError("Invalid AOF manifest file format", line, num)
        argv = split_inline_args(line)
        if argv is None or len(argv) < 6 or len(argv) % 2:
            raise ManifestError("Invalid AOF manifest file format", line, num)
        name = None
        seq = 0
        type_ = ""
        for i in range(0, len(argv), 2):
            key, value = argv[i].lower(), argv[i + 1]
            if key == b"file":
                value = value.split(b"\0", 1)[0]
                name = os.fsdecode(value)
                if b"/" in value or b"\\" in value:
                    raise ManifestError("File can't be a path, just a filename", line, num)
            elif key == b"seq":
                seq = _atoll(value)
            elif key == b"type":
                type_ = chr(value[0]) if value else ""
        if name is None or not seq or not type_:
            raise ManifestError("Invalid AOF manifest file format", line, num)
        info = AofInfo(name, seq, type_)
        if type_ == BASE:
            if m.base is not None:
                raise ManifestError("Found duplicate base file information", line, num)
            m.base = info
            m.base_seq = seq
        elif type_ == HIST:
            m.history.append(info)
        elif type_ == INCR:
            if seq <= maxseq:
                raise ManifestError("Found a non-monotonic sequence number", line, num)
            m.incr.append(info)
            m.incr_seq = maxseq = seq
        else:
            raise ManifestError("Unknown AOF file type", line, num)
    return m


def _atoll(value: bytes) -> int:
    """C's atoll: leading blanks, a sign, then digits as far as they go."""
    s = value.lstrip(b" \t\n\v\f\r")
    sign = 1
    if s[:1] in (b"-", b"+"):
        sign = -1 if s[:1] == b"-" else 1
        s = s[1:]
    digits = b""
    for c in s:
        if not 48 <= c <= 57:
            break
        digits += bytes([c])
    return sign * int(digits) if digits else 0


def load(directory: str, filename: str) -> Manifest | None:
    """The manifest in directory, or None when there is none (no directory
    or no manifest file: an empty AOF, or an old single-file one)."""
    path = os.path.join(directory, manifest_name(filename))
    if not os.path.isdir(directory) or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ManifestError("can't open the AOF manifest file %s for reading: %s"
                            % (path, e.strerror)) from None
    return parse(data)


def persist(directory: str, filename: str, manifest: Manifest):
    """Replace the manifest on disk atomically; OSError when it failed (the
    old one is then still in place).  Clears ``dirty``."""
    data = manifest.serialize()
    path = os.path.join(directory, manifest_name(filename))
    tmp = os.path.join(directory, TEMP_PREFIX + manifest_name(filename))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        done = 0
        while done < len(view):
            done += os.write(fd, view[done:])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    fsync_dir(path)
    manifest.dirty = False
