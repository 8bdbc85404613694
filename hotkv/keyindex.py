"""KeyIndex: a database's keys in hash order, for SCAN cursors and sampling.

A Python dict can neither resume an iteration after it changed nor pick a
random element without walking it, so every ``Database`` keeps two of these
beside its dicts: one over all keys (SCAN, RANDOMKEY) and one over the keys
with a TTL (active expiry's incremental sweep, as Redis scans its expires
dict).

Layout: ``2**bits`` buckets; a key lives in bucket ``top bits of hash(key)``
(the hash read as an unsigned 64-bit number), so bucket ``i`` holds exactly
the keys whose hash lies in ``[i << shift, (i + 1) << shift)`` with
``shift = 64 - bits``.  A bucket is a small list (or None when empty); the
table doubles when the average bucket passes 8 keys and halves when it
falls under 1/2, so both a bucket visit and an add/discard are O(1)
amortized (the O(n) resize is paid once per O(n) changes, like a dict's).

The SCAN cursor is a position in the 64-bit hash space: 0 is the start (and,
returned, "done"), otherwise the first hash of the next bucket to visit.
Why a key present for the whole scan is returned at least once, whatever
happens between calls: its hash is fixed; a call only ever moves the cursor
past buckets it has returned in full; and a resize never changes which hash
range a bucket position means -- growing splits bucket ``i`` into ``2i`` and
``2i+1`` (the cursor's bucket becomes the first half, nothing after the
cursor moves before it), shrinking merges ``2i`` and ``2i+1`` into ``i``
(the cursor may fall inside the merged bucket: its first half is returned
again -- duplicates, which SCAN allows, never misses).  This is Redis's
reverse-binary dictScan cursor seen from the other end: Redis buckets by
the low hash bits and increments the cursor bit-reversed; bucketing by the
high bits makes the same visiting order a plain increment.

Cost of one SCAN call: at most ``10 * COUNT`` bucket visits (Redis's
``maxiterations``) plus the keys in them -- never the whole keyspace.

Invariant: ``count`` equals the number of keys stored; the owning Database
keeps it equal to ``len`` of the dict it mirrors.  A writer that bypasses
``Database``'s methods breaks that equality, and users of the index rebuild
it when they see ``count != len(dict)`` (O(n) once, never on the normal path).
Cursors are meaningful only within one server process (``hash`` is salted
per process), as a Redis cursor is only meaningful for one table.
"""

from __future__ import annotations

import random

MIN_BITS = 4
_randrange = random.randrange


class KeyIndex:
    __slots__ = ("buckets", "bits", "shift", "mask", "count")

    def __init__(self, keys=()):
        self._reset(MIN_BITS)
        for key in keys:
            self.add(key)

    def _reset(self, bits: int):
        self.bits = bits
        self.shift = 64 - bits
        self.mask = (1 << bits) - 1
        self.buckets = [None] * (1 << bits)
        self.count = 0

    def __len__(self):
        return self.count

    def add(self, key):
        """Index a key not already indexed."""
        buckets = self.buckets
        # hash() is signed; >> then & gives the top bits of its unsigned form.
        i = (hash(key) >> self.shift) & self.mask
        lst = buckets[i]
        if lst is None:
            buckets[i] = [key]
        else:
            lst.append(key)
        self.count += 1
        if self.count > len(buckets) << 3:
            self._resize(self.bits + 1)

    def discard(self, key):
        buckets = self.buckets
        i = (hash(key) >> self.shift) & self.mask
        lst = buckets[i]
        if lst is None:
            return
        try:
            lst.remove(key)
        except ValueError:
            return
        if not lst:
            buckets[i] = None
        self.count -= 1
        if self.count < len(buckets) >> 1 and self.bits > MIN_BITS:
            self._resize(self.bits - 1)

    def _resize(self, bits: int):
        old = self.buckets
        count = self.count
        self._reset(bits)
        buckets = self.buckets
        shift, mask = self.shift, self.mask
        for lst in old:
            if lst is not None:
                for key in lst:
                    i = (hash(key) >> shift) & mask
                    b = buckets[i]
                    if b is None:
                        buckets[i] = [key]
                    else:
                        b.append(key)
        self.count = count

    def scan(self, cursor: int, count: int, out: list):
        """Append the keys of the buckets from ``cursor`` on to ``out``, until
        ``count`` keys were seen or ``10*count`` buckets visited; return the
        next cursor (0: the scan is complete)."""
        buckets = self.buckets
        n = len(buckets)
        shift = self.shift
        i = cursor >> shift
        budget = count * 10
        seen = 0
        while True:
            lst = buckets[i]
            if lst is not None:
                out.extend(lst)
                seen += len(lst)
            i += 1
            if i >= n:
                return 0
            if seen >= count or budget <= 0:
                return i << shift
            budget -= 1

    def random_key(self):
        """A random indexed key (None if empty): a random non-empty bucket,
        then a random key in it (Redis's dictGetFairRandomKey is as fair)."""
        if not self.count:
            return None
        buckets = self.buckets
        n = len(buckets)
        while True:
            lst = buckets[_randrange(n)]
            if lst is not None:
                return lst[_randrange(len(lst))] if len(lst) > 1 else lst[0]

    def keys(self):
        for lst in self.buckets:
            if lst is not None:
                yield from lst
