"""Stream consumer groups: ``Group``, ``Consumer``, ``NACK`` and ``PEL``.

Owns what a consumer group holds (no sockets, no commands, no replies;
hotkv/commands/streams/ does those; the ``Stream`` that holds the groups
is hotkv/types/stream.py).  ``Group.pel`` and ``Consumer.pel`` are ``PEL``s
(a dict plus the IDs sorted in chunks; O(1) to add an ID above all pending
ones or to ack the oldest, O(log n) to find a range) from ID to the *same*
``NACK`` object (delivery time, delivery count, owner), so ownership
changes move one reference between consumers.

Invariants:
* every NACK in ``group.pel`` is in exactly its owner's ``consumer.pel``;
  delivery counts never go negative;
* a PEL's chunks hold exactly its dict's keys, ascending, none empty.

Fast paths (each with its general twin and the test proving them equal):
``PEL``'s ends (above-all insert, oldest pop, ``extend_above``) vs a
SortedDict: tests/test_fastpaths.py::test_pel_chunk_boundaries and
tests/test_streams_fastpaths.py::test_pel_behaves_as_a_sorted_dict;
``Group.deliver``'s batch vs the per-entry delivery an AOF server takes:
tests/test_fastpaths_server.py::test_xreadgroup_fast_general_aof_and_valkey_agree.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import chain

from .stream_ids import MAX_ID


class PEL:
    """A pending entries list: entry ID -> NACK, iterated in ID order.

    A dict holds the NACKs (get / contains / len in O(1)); the IDs are kept
    sorted in chunks of at most ``_CHUNK`` (``chunks``), with ``maxes[i]``
    the last ID of ``chunks[i]``, so an ID is found by bisecting ``maxes``
    then one chunk: O(log n) to find, a chunk's memmove to insert or
    remove.  Deliveries add IDs above every pending one and acks mostly
    take the oldest, so both ends have a fast path.  Invariants: the
    chunks hold exactly the dict's keys, ascending, none empty; no value
    is None (NACKs only)."""
    __slots__ = ("d", "chunks", "maxes")

    def __init__(self):
        self.d = {}
        self.chunks = []
        self.maxes = []

    def __len__(self):
        return len(self.d)

    def __contains__(self, i):
        return i in self.d

    def __getitem__(self, i):
        return self.d[i]

    def get(self, i, default=None):
        return self.d.get(i, default)

    def __setitem__(self, i: int, nack):
        maxes = self.maxes
        if maxes and i > maxes[-1]:         # above every pending ID: not in d
            self.d[i] = nack
            chunk = self.chunks[-1]
            if len(chunk) < _CHUNK:
                chunk.append(i)
                maxes[-1] = i
            else:
                self.chunks.append([i])
                maxes.append(i)
            return
        d = self.d
        if i in d:
            d[i] = nack
            return
        d[i] = nack
        chunks = self.chunks
        if not maxes:
            chunks.append([i])
            maxes.append(i)
            return
        k = bisect_left(maxes, i)          # i < maxes[k]: that max stays
        chunk = chunks[k]
        chunk.insert(bisect_left(chunk, i), i)
        if len(chunk) > _CHUNK:
            half = len(chunk) >> 1
            chunks.insert(k + 1, chunk[half:])
            del chunk[half:]
            maxes.insert(k, chunk[-1])

    def pop(self, i, default=None):
        nack = self.d.pop(i, None)
        if nack is None:
            return default
        chunks = self.chunks
        chunk = chunks[0]
        if chunk[0] == i:                   # the oldest
            del chunk[0]
            if not chunk:
                del chunks[0]
                del self.maxes[0]
            return nack
        self._unlink(i)
        return nack

    def _unlink(self, i: int):
        """Take i (not the oldest) out of the sorted chunks."""
        maxes = self.maxes
        k = bisect_left(maxes, i)
        chunk = self.chunks[k]
        del chunk[bisect_left(chunk, i)]
        if not chunk:
            del self.chunks[k]
            del maxes[k]
        elif maxes[k] == i:
            maxes[k] = chunk[-1]

    def extend_above(self, ids: list, nacks: list):
        """Add ids (ascending, each above every pending ID) with their nacks."""
        self.d.update(zip(ids, nacks))
        chunks = self.chunks
        maxes = self.maxes
        i = 0
        if chunks:
            chunk = chunks[-1]
            i = _CHUNK - len(chunk)
            if i > 0:
                chunk += ids[:i]
                maxes[-1] = chunk[-1]
        n = len(ids)
        while i < n:
            chunk = ids[i:i + _CHUNK]
            chunks.append(chunk)
            maxes.append(chunk[-1])
            i += _CHUNK

    def __iter__(self):
        return chain.from_iterable(self.chunks)

    def items(self):
        d = self.d
        return [(i, d[i]) for i in chain.from_iterable(self.chunks)]

    def values(self):
        return self.d.values()

    def first(self) -> int:
        return self.chunks[0][0]

    def last(self) -> int:
        return self.maxes[-1]

    def irange(self, minimum: int = 0, maximum: int = MAX_ID):
        """IDs in [minimum, maximum], ascending, lazily: the PEL must not
        change while this is walked (materialize it first)."""
        maxes = self.maxes
        k = bisect_left(maxes, minimum)
        chunks = self.chunks
        n = len(chunks)
        if k == n:
            return
        chunk = chunks[k]
        j = bisect_left(chunk, minimum)
        while True:
            if maxes[k] > maximum:
                yield from chunk[j:bisect_right(chunk, maximum)]
                return
            yield from chunk[j:] if j else chunk
            k += 1
            if k == n:
                return
            chunk = chunks[k]
            j = 0


_new = object.__new__
_CHUNK = 256     # a small chunk keeps acking the oldest (del chunk[0]) cheap


class NACK:
    """A pending entry: delivered, not yet acknowledged."""
    __slots__ = ("delivery_time", "delivery_count", "consumer")

    def __init__(self, delivery_time: int, consumer, delivery_count: int = 1):
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count
        self.consumer = consumer


class Consumer:
    __slots__ = ("name", "seen_time", "active_time", "pel")

    def __init__(self, name: bytes, now: int):
        self.name = name
        self.seen_time = now
        self.active_time = -1
        self.pel = PEL()


class Group:
    __slots__ = ("name", "last_id", "entries_read", "pel", "consumers")

    def __init__(self, name: bytes, last_id: int, entries_read: int):
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel = PEL()
        self.consumers: dict = {}

    def sorted_consumers(self):
        """Consumers in Redis's (radix tree, byte-wise) order."""
        return [self.consumers[k] for k in sorted(self.consumers)]

    def create_consumer(self, name: bytes, now: int):
        """The new consumer, or None if it exists."""
        if name in self.consumers:
            return None
        c = self.consumers[name] = Consumer(name, now)
        return c

    def delete_consumer(self, consumer) -> int:
        """Remove consumer and its pending entries; returns how many it had."""
        n = len(consumer.pel)
        pel = self.pel
        for i in consumer.pel:
            pel.pop(i, None)
        del self.consumers[consumer.name]
        return n

    def ack(self, i: int) -> bool:
        nack = self.pel.pop(i, None)
        if nack is None:
            return False
        nack.consumer.pel.pop(i, None)
        return True

    def ack_all(self, ids) -> int:
        """Acknowledge each of ids; returns how many were pending."""
        pop = self.pel.pop
        n = 0
        for i in ids:
            nack = pop(i)
            if nack is not None:
                n += 1
                nack.consumer.pel.pop(i)
        return n

    def deliver(self, ids: list, consumer, now: int):
        """ids (ascending) delivered to consumer: new ones get a NACK, one
        already pending (the group was moved back) changes hands with its
        delivery count reset."""
        pel = self.pel
        cpel = consumer.pel
        if (not pel.maxes or ids[0] > pel.maxes[-1]) and \
                (not cpel.maxes or ids[0] > cpel.maxes[-1]):
            nacks = []
            for _ in ids:
                # NACK(now, consumer) without the call into __init__
                nack = _new(NACK)
                nack.delivery_time = now
                nack.delivery_count = 1
                nack.consumer = consumer
                nacks.append(nack)
            pel.extend_above(ids, nacks)
            cpel.extend_above(ids, nacks)
        else:
            for i in ids:
                nack = pel.get(i)
                if nack is None:
                    nack = NACK(now, consumer)
                    pel[i] = nack
                    cpel[i] = nack
                else:
                    self.assign(i, nack, consumer)
                    nack.delivery_time = now
                    nack.delivery_count = 1
        consumer.active_time = now

    def assign(self, i: int, nack, consumer):
        """Move nack (of entry i) to consumer's PEL."""
        old = nack.consumer
        if old is not consumer:
            if old is not None:
                old.pel.pop(i, None)
            consumer.pel[i] = nack
            nack.consumer = consumer
