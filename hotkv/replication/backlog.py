"""The replication backlog: the tail of the replication stream, for PSYNC.

``Backlog(size, start)`` keeps the last bytes of the stream as a deque of
16 KB blocks (as Valkey's shared replication buffer keeps blocks).
``start`` is the stream offset of the first byte it will hold (Valkey's
``repl_backlog->offset``: master_repl_offset + 1 when it is created).

Invariants: ``histlen`` is the bytes held; the first held byte is at stream
offset ``first_offset()`` and the last at ``first_offset() + histlen - 1``;
whole chunks are dropped from the front while what stays still covers
``size`` bytes (so ``histlen`` may pass ``size`` by less than one chunk, as
Valkey's block-wise trim does).  Appending is O(1) amortised, never a copy
of the history.
"""

from __future__ import annotations

from collections import deque

BLOCK = 16 * 1024       # Valkey's PROTO_REPLY_CHUNK_BYTES: the trim's unit


class Backlog:
    __slots__ = ("size", "chunks", "histlen", "start")

    def __init__(self, size: int, start: int):
        self.size = max(1, size)
        self.chunks: deque = deque()
        self.histlen = 0
        self.start = start          # stream offset of chunks[0][0]

    def first_offset(self) -> int:
        return self.start

    def append(self, data: bytes):
        chunks = self.chunks
        # Small writes (one LPUSH each) fill a block of BLOCK bytes, so the
        # deque holds blocks, not one entry per command.
        if chunks and len(chunks[-1]) < BLOCK:
            chunks[-1] += data
        else:
            chunks.append(bytearray(data))
        self.histlen += len(data)
        if self.histlen - len(chunks[0]) >= self.size:
            self._trim()

    def _trim(self):
        chunks = self.chunks
        while len(chunks) > 1 and self.histlen - len(chunks[0]) >= self.size:
            n = len(chunks.popleft())
            self.histlen -= n
            self.start += n

    def resize(self, size: int):
        self.size = max(1, size)
        self._trim()

    def covers(self, offset: int) -> bool:
        """True when the stream from ``offset`` (the next byte a replica
        wants) on is held (Valkey's psync_offset range check)."""
        return self.start <= offset <= self.start + self.histlen

    def since(self, offset: int) -> list:
        """The held bytes from stream offset ``offset`` to the end, as chunks."""
        skip = offset - self.start
        out = []
        for chunk in self.chunks:
            n = len(chunk)
            if skip >= n:
                skip -= n
                continue
            out.append(bytes(chunk[skip:]))
            skip = 0
        return out


__all__ = ["Backlog"]
