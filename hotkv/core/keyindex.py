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
table doubles when the average bucket passes 8 keys (unless ``gate``, asked
first, holds it while the doubling would pass maxmemory: then up to 13)
and halves when it falls under 1/2.  Resizing is incremental, as Redis
rehashes: the previous table (``old``) is kept and each add/discard moves
a few of its buckets into the new one, so no single command pays for the
whole keyspace; a key is always in exactly one of the two tables
(``old[i]`` for ``i >= migrated``, else the current table).

The SCAN cursor is a position in the 64-bit hash space: 0 is the start (and,
returned, "done"), otherwise the first hash of the next bucket to visit.
Why a key present for the whole scan is returned at least once, whatever
happens between calls: its hash is fixed; a call only ever moves the cursor
past buckets it has returned in full; and a resize never changes which hash
range a bucket position means -- growing splits bucket ``i`` into ``2i`` and
``2i+1`` (the cursor's bucket becomes the first half, nothing after the
cursor moves before it), shrinking merges ``2i`` and ``2i+1`` into ``i``
(the cursor may fall inside the merged bucket: its first half is returned
again -- duplicates, which SCAN allows, never misses).  While both tables
exist a call visits, for each position, the finer table's bucket and the
coarser table's bucket that contains it, so a key is found wherever the
migration has put it.  This is Redis's reverse-binary dictScan cursor
seen from the other end: Redis buckets by the low hash bits and increments
the cursor bit-reversed; bucketing by the high bits makes the same visiting
order a plain increment.

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
HOLD_MAX = 13         # keys a bucket may average while the gate holds a doubling
GROW_BYTES = 80       # bytes a doubling costs per bucket (the table, split lists)
_randrange = random.randrange


class KeyIndex:
    __slots__ = ("buckets", "bits", "shift", "mask", "count",
                 "old", "old_shift", "old_mask", "migrated", "gate")

    def pristine(self) -> bool:
        """Empty, at the smallest table and not rehashing: as KeyIndex() makes it."""
        return not self.count and self.bits == MIN_BITS and self.old is None and self.gate is None

    def __init__(self, keys=()):
        self.count = 0
        # Asked before the table doubles, with the bytes that takes: False
        # holds it (up to HOLD_MAX keys a bucket), as Valkey's
        # dictExpandAllowed holds a dict that would pass maxmemory.  Set by
        # the owner (hotkv.core.db); None always grows.
        self.gate = None
        self.old = None
        self.old_shift = self.old_mask = self.migrated = 0
        n = len(keys) if hasattr(keys, "__len__") else 0
        self._set_table(max(MIN_BITS, (n // 4).bit_length()))
        buckets, shift, mask = self.buckets, self.shift, self.mask
        count = 0
        for key in keys:
            i = (hash(key) >> shift) & mask
            lst = buckets[i]
            if lst is None:
                buckets[i] = [key]
            else:
                lst.append(key)
            count += 1
        self.count = count
        if count > len(buckets) << 3:
            self._start(self.bits + 1)
            self._finish()

    def copy(self) -> "KeyIndex":
        """An index of the same keys, bucket for bucket (no resize pending
        in the copy; the owner sets its gate again)."""
        if self.old is not None:
            self._finish()
        new = KeyIndex.__new__(KeyIndex)
        new.bits, new.shift, new.mask = self.bits, self.shift, self.mask
        new.count = self.count
        new.old = None
        new.old_shift = new.old_mask = new.migrated = 0
        new.buckets = [b[:] if b else None for b in self.buckets]
        new.gate = None
        return new

    def _set_table(self, bits: int):
        self.bits = bits
        self.shift = 64 - bits
        self.mask = (1 << bits) - 1
        self.buckets = [None] * (1 << bits)

    def __len__(self):
        return self.count

    # -- incremental resize ------------------------------------------------
    def _start(self, bits: int):
        if self.old is not None:
            self._finish()
        self.old = self.buckets
        self.old_shift = self.shift
        self.old_mask = self.mask
        self.migrated = 0
        self._set_table(bits)

    def _step(self, n: int):
        """Move the next n buckets of the old table into the current one."""
        old = self.old
        pos = self.migrated
        end = min(pos + n, len(old))
        buckets, shift, mask = self.buckets, self.shift, self.mask
        while pos < end:
            lst = old[pos]
            if lst is not None:
                old[pos] = None
                for key in lst:
                    i = (hash(key) >> shift) & mask
                    b = buckets[i]
                    if b is None:
                        buckets[i] = [key]
                    else:
                        b.append(key)
            pos += 1
        self.migrated = pos
        if pos >= len(old):
            self.old = None

    def _finish(self):
        if self.old is not None:
            self._step(len(self.old))

    def rehash(self, n: int) -> bool:
        """Move up to n buckets of a pending resize (the server's cron, as
        Valkey's activerehashing: a table nobody writes to still finishes
        its resize, and SCAN then returns no duplicates); True while one is
        still pending."""
        if self.old is not None:
            self._step(n)
        return self.old is not None

    # -- changes -----------------------------------------------------------
    def add(self, key):
        """Index a key not already indexed."""
        if self.old is not None:
            self._step(1)
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
            gate = self.gate
            if gate is None or self.count > len(buckets) * HOLD_MAX or \
                    gate(len(buckets) * GROW_BYTES):
                self._start(self.bits + 1)

    def discard(self, key):
        if self.old is not None:
            self._step(4)
        h = hash(key)
        buckets = self.buckets
        i = (h >> self.shift) & self.mask
        lst = buckets[i]
        try:
            if lst is None:
                raise ValueError
            lst.remove(key)
            if not lst:
                buckets[i] = None
        except ValueError:
            old = self.old
            if old is None:
                return
            i = (h >> self.old_shift) & self.old_mask
            lst = old[i]
            if lst is None:
                return
            try:
                lst.remove(key)
            except ValueError:
                return
            if not lst:
                old[i] = None
        self.count -= 1
        if self.old is None and self.count < len(buckets) >> 1 and self.bits > MIN_BITS:
            self._start(self.bits - 1)

    # -- reads -------------------------------------------------------------
    def scan(self, cursor: int, count: int, out: list):
        """Append the keys of the buckets from ``cursor`` on to ``out``, until
        ``count`` keys were seen or ``10*count`` buckets visited; return the
        next cursor (0: the scan is complete)."""
        budget = count * 10
        seen = 0
        old = self.old
        if old is None:
            buckets = self.buckets
            n = len(buckets)
            shift = self.shift
            i = cursor >> shift
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
        # Mid-resize: walk the finer table; with each of its buckets, the
        # coarser table's bucket covering it (once per call).
        if self.shift <= self.old_shift:
            fine, fshift, coarse, cshift = self.buckets, self.shift, old, self.old_shift
        else:
            fine, fshift, coarse, cshift = old, self.old_shift, self.buckets, self.shift
        n = len(fine)
        j = cursor >> fshift
        last_c = -1
        while True:
            lst = fine[j]
            if lst is not None:
                out.extend(lst)
                seen += len(lst)
            ci = (j << fshift) >> cshift
            if ci != last_c:
                last_c = ci
                lst = coarse[ci]
                if lst is not None:
                    out.extend(lst)
                    seen += len(lst)
            j += 1
            if j >= n:
                return 0
            if seen >= count or budget <= 0:
                return j << fshift
            budget -= 1

    def random_key(self):
        """A random indexed key (None if empty): a random non-empty bucket,
        then a random key in it (Redis's dictGetFairRandomKey is as fair)."""
        if not self.count:
            return None
        tables = (self.buckets,) if self.old is None else (self.buckets, self.old)
        while True:
            t = tables[_randrange(len(tables))] if len(tables) > 1 else tables[0]
            lst = t[_randrange(len(t))]
            if lst is not None:
                return lst[_randrange(len(lst))] if len(lst) > 1 else lst[0]

    def keys(self):
        for table in (self.buckets, self.old):
            if table is not None:
                for lst in table:
                    if lst is not None:
                        yield from lst
