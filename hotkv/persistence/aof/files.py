"""What the AOF's writer, loader and rewrite share: the record encoding,
the file primitives and the AOF's states.

Records are RESP multibulk commands (``encode_into`` appends one to a
buffer; the canonical form: ``$<len>`` headers, no inline commands), with
``SELECT`` for a database change and ``MULTI`` / ``EXEC`` around a unit of
several commands.  ``_enc_len`` is the byte length of that encoding, which
the loader uses as offsets (its inlined copy in ``_Loader._run`` must agree).

Invariant: ``encode_into`` writes exactly ``_enc_len(argv)`` bytes for an
argv of bytes; every write of the AOF goes through ``_write_all`` (a short
write is retried, never dropped).
"""

from __future__ import annotations

import os

from ...protocol.resp import _BULK_HDR_CACHE

OFF, ON, WAIT_REWRITE = 0, 1, 2     # AOF.state


# ----------------------------------------------------------------------
# Encoding
# ----------------------------------------------------------------------

def _b(a) -> bytes:
    if type(a) is bytes:
        return a
    if isinstance(a, (bytes, bytearray, memoryview)):
        return bytes(a)
    if isinstance(a, int):
        return b"%d" % a
    if isinstance(a, float):
        return repr(a).encode()
    return str(a).encode()


def encode_into(out: bytearray, argv) -> None:
    out += b"*%d\r\n" % len(argv)
    for a in argv:
        if type(a) is not bytes:
            a = _b(a)
        n = len(a)
        out += _BULK_HDR_CACHE[n] if n < 1024 else b"$%d\r\n" % n
        out += a
        out += b"\r\n"


def encode_command(argv) -> bytes:
    out = bytearray()
    encode_into(out, argv)
    return bytes(out)


_SELECT = [b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(16)]
_MULTI = b"*1\r\n$5\r\nMULTI\r\n"
_EXEC = b"*1\r\n$4\r\nEXEC\r\n"


def _select(i: int) -> bytes:
    if i < 16:
        return _SELECT[i]
    s = b"%d" % i
    return b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%b\r\n" % (len(s), s)


def _enc_len(argv) -> int:
    """Bytes of argv's canonical RESP encoding (the loader's offsets), or -1
    when an element is not a bulk string."""
    n = 3 + len(str(len(argv)))
    for a in argv:
        if type(a) is not bytes:
            return -1
        m = len(a)
        n += m + 5 + (1 if m < 10 else 2 if m < 100 else len(str(m)))
    return n


# ----------------------------------------------------------------------
# File primitives
# ----------------------------------------------------------------------

def _write_all(fd: int, data) -> int:
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.write(fd, view[done:])
    return done


def _fsync(fd: int):
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)


def _unlink(path):
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
