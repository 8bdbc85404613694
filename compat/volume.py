"""The volume differential: seeded queue workloads at realistic sizes, hotkv vs Valkey.

Every other differential test works on streams and lists of a few entries,
which is how an XREADGROUP that stopped delivering past the first stream
node (4a32dcf) got through.  Here one seed draws a workload of thousands of
queue commands -- streams of thousands of entries over many nodes, lists of
thousands of items over many quicklist nodes, consumer groups reading,
acking, claiming and trimming them -- and node limits drawn per seed
(``stream-node-max-entries`` 1..100, ``stream-node-max-bytes``,
``list-max-listpack-size``), so node boundaries fall everywhere.

API (also imported by the persistence differential; keep the signatures):

* ``workload(seed, n_commands) -> (config, commands)``: the CONFIG SET
  settings drawn for the seed and ``n_commands`` argv's (lists of bytes).
  Pure: the same seed gives the same workload; the generator keeps a rough
  model of each stream (IDs added, what each group was delivered) only to
  pick arguments that hit something -- replies never feed back, so the
  same argv's go to both servers.
* ``snapshot(client) -> dict``: the whole current db as plain data, from
  anything with ``call(*args) -> raw reply bytes`` (support.RawClient), in
  RESP2 or RESP3: {key: {"type", "ttl" (has an expiry), "value"}}.  Streams
  carry all entries plus XINFO STREAM FULL (COUNT 0) without the entries
  and without the wall-clock fields (seen-time, active-time, delivery
  times), which are the only things left out.
* ``compare(seed, n_commands, resp3=False, *, hotkv_addr, valkey_addr)``:
  FLUSHALL both, CONFIG SET the drawn settings on both, run the workload on
  both (pipelined, in batches), compare every reply byte for byte, then the
  snapshots; restores the settings it changed.  A mismatch raises
  AssertionError naming the seed, the command's index, its argv and both
  replies.  Returns the number of commands compared.

Invariants of the workload, so that replies depend only on the commands:
explicit stream IDs only (never ``*``), no BLOCK, no commands whose reply
depends on the clock or on randomness (no TTL/PTTL, no XINFO CONSUMERS, no
SPOP/SRANDMEMBER); expiries are far in the future: relative ones (EXPIRE,
SET EX, only on ``str:*`` keys) are distinct multiples of 10,000 s so a GT/LT
comparison never hinges on the milliseconds between two commands, absolute
ones (EXPIREAT/PEXPIREAT, on the other families, which EXPIRETIME reads) are
past the year 2096.  Replies are normalised only where Redis leaves the
order open (SMEMBERS and friends, through differential.normalise) and in the
idle-time column of the extended XPENDING form, set to 0 on both sides.

Command line (the long run; CI runs a few seeds through test_volume.py):

    python compat/volume.py --seeds 0-999 --commands 5000 --both
    python compat/volume.py --seeds 7 --commands 5000 --resp3      # one seed
    python compat/volume.py --seeds 0-99 --hotkv 127.0.0.1:6390     # a served hotkv

It starts an embedded hotkv (unless --hotkv names a running one) and the
reference valkey-server 8.1.8, prints a line per seed and a summary line,
and exits 1 if any seed diverged (each divergence is printed in full).
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(_HERE, "..", "tests"), _HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from differential import normalise  # noqa: E402
from support import RawClient, encode_command  # noqa: E402

# ----------------------------------------------------------------------
# Keys.  A few per family so that commands collide on them; the first of
# each weighted list is the big one.
# ----------------------------------------------------------------------

STREAMS = [b"s:jobs", b"s:events", b"{q}s:retry"]
STREAM_WEIGHTS = [70, 20, 10]
STREAM_COPY = b"s:copy"          # only ever written by COPY / DEL
LISTS = [b"l:queue", b"l:processing", b"l:dead"]
LIST_WEIGHTS = [60, 25, 15]
HASHES = [b"h:job:1", b"h:job:2", b"h:stats"]
SETS = [b"set:workers", b"set:ids", b"set:tmp"]
ZSETS = [b"z:delayed", b"z:prio", b"z:tmp"]
STRS = [b"str:lock", b"str:cnt", b"str:tmp"]
GROUPS = [b"g1", b"g2", b"g3"]
CONSUMERS = [b"c1", b"c2", b"c3", b"c4"]
ALL_KEYS = STREAMS + [STREAM_COPY] + LISTS + HASHES + SETS + ZSETS + STRS

# The settings a seed draws from; every seed sets all three (the defaults
# explicitly), so nothing an earlier test left on a shared server leaks in.
NODE_ENTRIES = [1, 2, 3, 10, 100]            # 100 is the default
NODE_BYTES = [4096, 4096, 4096, 0, 256, 1024]  # 4096 is the default, 0 no limit
LIST_SIZES = [-2, -2, 1, 2, 4, 128]          # -2 (8 kB a node) is the default

MAX_SEQ = (1 << 64) - 1


def _fmt(i) -> bytes:
    return b"%d-%d" % i


class _Group:
    __slots__ = ("cursor", "pending")

    def __init__(self, cursor):
        self.cursor = cursor     # last delivered ID (as far as the model knows)
        self.pending = []        # IDs delivered and not acked (roughly)


class _Stream:
    __slots__ = ("last", "ids", "groups")

    def __init__(self):
        self.last = (0, 0)
        self.ids = []            # IDs added and not deleted or trimmed (roughly)
        self.groups = {}


class _Workload:
    """Draws the commands.  Each generator appends whole commands to
    self.out and updates the rough model; nothing here reads a reply."""

    def __init__(self, seed: int, n: int):
        self.rng = random.Random(seed)
        self.n = n
        self.out: list[list[bytes]] = []
        self.streams = {k: _Stream() for k in STREAMS}
        self.list_len = {k: 0 for k in LISTS}
        self.rel_hi = 100          # relative TTLs: distinct multiples of 10,000 s
        self.rel_ttls = []
        self.abs_ttl = 4_000_000_000 + self.rng.randrange(10**6)
        start = self.rng.choice([1, 1_700_000_000_000, 10**15])
        for i, k in enumerate(STREAMS):
            self.streams[k].last = (start + i, 0)
        self.in_multi = False

    # -- small draws --------------------------------------------------

    def value(self) -> bytes:
        r = self.rng.random()
        if r < 0.65:
            return b"job:%d" % self.rng.randrange(300)
        if r < 0.80:
            return b"%d" % self.rng.randrange(-1000, 100_000)
        if r < 0.93:
            n = self.rng.choice([40, 64, 65, 100, 300, 700, 3000])
            return (b"payload:%d:" % self.rng.randrange(300)).ljust(n, b"x")
        return self.rng.choice([b"", b"9223372036854775807", b"-9223372036854775808",
                                b"1.5", b"\x00\xff", b"job:0"])

    def small_value(self) -> bytes:
        """A value for hashes: short, so hashes stay listpacks (HGETALL in
        insertion order, comparable without sorting)."""
        if self.rng.random() < 0.5:
            return b"%d" % self.rng.randrange(-50, 1000)
        return b"v:%d" % self.rng.randrange(100)

    def skey(self) -> bytes:
        return self.rng.choices(STREAMS, STREAM_WEIGHTS)[0]

    def lkey(self) -> bytes:
        return self.rng.choices(LISTS, LIST_WEIGHTS)[0]

    def emit(self, *argv):
        self.out.append([a if isinstance(a, bytes) else b"%d" % a for a in argv])

    def next_id(self, s: _Stream):
        """(id argument, id) for an XADD: monotone, often several in one
        millisecond, sometimes far jumps, once in a while the last sequence."""
        ms, seq = s.last
        r = self.rng.random()
        if r < 0.55 and seq < MAX_SEQ:
            new = (ms, seq + 1)
            arg = b"%d-*" % ms if self.rng.random() < 0.1 else _fmt(new)
            return arg, new
        if r < 0.90:
            new = (ms + self.rng.randint(1, 3), self.rng.choice([0, 0, 1, 5]))
        elif r < 0.985:
            new = (ms + self.rng.randint(1000, 10**6), self.rng.randrange(3))
        elif r < 0.995:
            new = (ms + self.rng.randint(10**9, 10**11), 0)
        else:
            new = (ms + 1, MAX_SEQ)
        if new[1] == 0 and self.rng.random() < 0.2:
            return b"%d-*" % new[0], new
        return _fmt(new), new

    def some_id(self, s: _Stream, where: float | None = None, stray: float = 0.05) -> bytes:
        """An ID of the stream (as the model knows it), or (with probability
        stray) one at its ends."""
        if not s.ids or self.rng.random() < stray:
            return self.rng.choice([b"0-0", b"0", _fmt(s.last), b"%d" % s.last[0]])
        if where is None:
            where = self.rng.random()
        i = min(int(where * len(s.ids)), len(s.ids) - 1)
        ms, seq = s.ids[i]
        if self.rng.random() < 0.1:
            return b"%d" % ms
        return _fmt((ms, seq))

    # -- streams ------------------------------------------------------

    def fields(self) -> list[bytes]:
        r = self.rng.random()
        if r < 0.6:
            return [b"job", self.value()]
        if r < 0.8:
            return [b"job", self.value(), b"attempt", b"%d" % self.rng.randrange(5)]
        if r < 0.9:
            return [b"type", self.rng.choice([b"email", b"sms"]), b"payload", self.value()]
        n = self.rng.randint(3, 10)
        out = []
        for i in range(n):
            out += [b"f%d" % i, self.value()]
        return out

    def xadd(self, key=None):
        key = key or self.skey()
        s = self.streams[key]
        args = [b"XADD", key]
        if self.rng.random() < 0.04:
            args.append(b"NOMKSTREAM")
        trim = self.rng.random() < 0.15
        if trim:
            args += self.trim_args(s)
        if self.rng.random() < 0.01:   # an ID not above the last: an error
            args += [self.rng.choice([_fmt(s.last), b"0-0", b"0"])] + self.fields()
            self.out.append(args)
            return
        arg, new = self.next_id(s)
        args.append(arg)
        args += self.fields()
        self.out.append(args)
        s.last = new
        s.ids.append(new)
        if trim:
            self.apply_trim(s, args)

    def trim_args(self, s: _Stream, small: bool = False) -> list[bytes]:
        """MAXLEN/MINID arguments that mostly keep thousands of entries (a
        busy queue's cap); ``small`` lets an XTRIM now and then cut deep."""
        approx = self.rng.random() < 0.6
        if self.rng.random() < 0.7:
            if small and self.rng.random() < 0.08:
                n = self.rng.choice([0, 1, 7, 50, 200])
            else:
                n = self.rng.choice([1000, 1500, 2000, 3000, 5000])
            args = [b"MAXLEN", b"~" if approx else b"=", b"%d" % n]
        else:
            where = self.rng.random() * (0.3 if small else 0.05)
            args = [b"MINID", b"~" if approx else b"=", self.some_id(s, where, 0.01 * small)]
        if approx and self.rng.random() < 0.3:
            args += [b"LIMIT", b"%d" % self.rng.choice([0, 1, 10, 100, 1000])]
        return args

    def apply_trim(self, s: _Stream, args):
        """Exact trims shrink the model; approximate ones leave it stale
        (which only makes some later arguments miss)."""
        for j, a in enumerate(args):
            if a in (b"MAXLEN", b"MINID") and args[j + 1] == b"=":
                if a == b"MAXLEN":
                    n = int(args[j + 2])
                    s.ids = s.ids[len(s.ids) - n:] if n < len(s.ids) else s.ids
                    if n == 0:
                        s.ids = []
                else:
                    lo = args[j + 2]
                    lo = tuple(int(x) for x in lo.split(b"-")) if b"-" in lo else (int(lo), 0)
                    s.ids = s.ids[bisect.bisect_left(s.ids, lo):]
                return

    def group_for(self, key):
        """A group of the stream that the model thinks exists (else create one)."""
        s = self.streams[key]
        if not s.groups or self.rng.random() < 0.02:
            self.xgroup_create(key)
        if s.groups and self.rng.random() < 0.97:
            return self.rng.choice(sorted(s.groups))
        return self.rng.choice(GROUPS)

    def xgroup_create(self, key=None):
        key = key or self.skey()
        s = self.streams[key]
        g = self.rng.choice(GROUPS)
        r = self.rng.random()
        if r < 0.45:
            arg, cursor = b"0", (0, 0)
        elif r < 0.75:
            arg, cursor = b"$", s.last
        else:
            arg = self.some_id(s)
            ms, _, seq = arg.partition(b"-")
            cursor = (int(ms), int(seq or 0))
        args = [b"XGROUP", b"CREATE", key, g, arg]
        if self.rng.random() < 0.2:
            args.append(b"MKSTREAM")
        if self.rng.random() < 0.1:
            args += [b"ENTRIESREAD", b"%d" % self.rng.choice([0, 1, 10, len(s.ids)])]
        self.out.append(args)
        if g not in s.groups:
            s.groups[g] = _Group(cursor)

    def xreadgroup(self):
        key = self.skey()
        g = self.group_for(key)
        c = self.rng.choice(CONSUMERS)
        args = [b"XREADGROUP", b"GROUP", g, c]
        count = None
        if self.rng.random() < 0.6:
            count = self.rng.choice([1, 1, 2, 10, 100, 500, 0])
            args += [b"COUNT", b"%d" % count]
        noack = self.rng.random() < 0.1
        if noack:
            args.append(b"NOACK")
        keys = [key]
        if self.rng.random() < 0.1:
            other = self.rng.choice([k for k in STREAMS if k != key])
            if g in self.streams[other].groups or self.rng.random() < 0.1:
                keys.append(other)
        history = self.rng.random() < 0.15
        ids = []
        for k in keys:
            if history:
                ids.append(b"0" if self.rng.random() < 0.7 else self.some_id(self.streams[k]))
            else:
                ids.append(b">")
        self.out.append(args + [b"STREAMS"] + keys + ids)
        if history:
            return
        for k in keys:
            grp = self.streams[k].groups.get(g)
            if grp is None:
                continue
            ks = self.streams[k]
            i = bisect.bisect_right(ks.ids, grp.cursor)
            new = ks.ids[i:i + count] if count else ks.ids[i:]
            if new:
                grp.cursor = new[-1]
                if not noack:
                    grp.pending.extend(new)

    def pick_pending(self, grp: _Group, s: _Stream, most: int) -> list[bytes]:
        """Some delivered IDs, mostly the oldest (workers ack in order), with
        a stray unknown or repeated one now and then."""
        out = []
        if grp is not None and grp.pending:
            n = min(len(grp.pending), self.rng.randint(1, most))
            if self.rng.random() < 0.7:
                chosen = grp.pending[:n]
            else:
                chosen = self.rng.sample(grp.pending, n)
            out = [_fmt(i) for i in chosen]
        if not out or self.rng.random() < 0.1:
            out.append(self.some_id(s))
        return out

    def xack(self):
        key = self.skey()
        s = self.streams[key]
        g = self.group_for(key)
        grp = s.groups.get(g)
        ids = self.pick_pending(grp, s, 30)
        self.out.append([b"XACK", key, g] + ids)
        if grp is not None:
            acked = set(ids)
            grp.pending = [i for i in grp.pending if _fmt(i) not in acked]

    def xclaim(self):
        key = self.skey()
        s = self.streams[key]
        g = self.group_for(key)
        ids = self.pick_pending(s.groups.get(g), s, 10)
        args = [b"XCLAIM", key, g, self.rng.choice(CONSUMERS), b"0"] + ids
        for opt in (b"IDLE", b"RETRYCOUNT", b"FORCE", b"JUSTID", b"LASTID"):
            if self.rng.random() < 0.15:
                args.append(opt)
                if opt == b"IDLE":
                    args.append(b"%d" % self.rng.choice([0, 1000, 60000]))
                elif opt == b"RETRYCOUNT":
                    args.append(b"%d" % self.rng.randrange(10))
                elif opt == b"LASTID":
                    args.append(self.some_id(s))
        self.out.append(args)

    def xautoclaim(self):
        key = self.skey()
        s = self.streams[key]
        g = self.group_for(key)
        start = b"0-0" if self.rng.random() < 0.5 else self.some_id(s)
        args = [b"XAUTOCLAIM", key, g, self.rng.choice(CONSUMERS), b"0", start]
        if self.rng.random() < 0.7:
            args += [b"COUNT", b"%d" % self.rng.choice([1, 5, 10, 100, 1000])]
        if self.rng.random() < 0.3:
            args.append(b"JUSTID")
        self.out.append(args)

    def xpending(self):
        key = self.skey()
        s = self.streams[key]
        g = self.group_for(key)
        if self.rng.random() < 0.4 or self.in_multi:
            self.out.append([b"XPENDING", key, g])
            return
        args = [b"XPENDING", key, g]
        if self.rng.random() < 0.3:
            args += [b"IDLE", b"0"]
        lo = b"-" if self.rng.random() < 0.5 else self.some_id(s, self.rng.random() * 0.5)
        hi = b"+" if self.rng.random() < 0.6 else self.some_id(s, 0.5 + self.rng.random() / 2)
        if self.rng.random() < 0.1:
            lo = b"(" + lo if lo != b"-" else lo
        args += [lo, hi, b"%d" % self.rng.choice([1, 10, 100, 1000])]
        if self.rng.random() < 0.4:
            args.append(self.rng.choice(CONSUMERS))
        self.out.append(args)

    def xgroup_other(self):
        key = self.skey()
        s = self.streams[key]
        r = self.rng.random()
        if r < 0.35:
            g = self.group_for(key)
            arg = self.rng.choice([b"0", b"$", self.some_id(s)])
            args = [b"XGROUP", b"SETID", key, g, arg]
            if self.rng.random() < 0.2:
                args += [b"ENTRIESREAD", b"%d" % self.rng.choice([0, 5, len(s.ids)])]
            self.out.append(args)
            grp = s.groups.get(g)
            if grp is not None:
                if arg == b"0":
                    grp.cursor = (0, 0)
                elif arg == b"$":
                    grp.cursor = s.last
                else:
                    ms, _, seq = arg.partition(b"-")
                    grp.cursor = (int(ms), int(seq or 0))
        elif r < 0.65:
            self.out.append([b"XGROUP", b"CREATECONSUMER", key, self.group_for(key),
                             self.rng.choice(CONSUMERS)])
        elif r < 0.9:
            self.out.append([b"XGROUP", b"DELCONSUMER", key, self.group_for(key),
                             self.rng.choice(CONSUMERS)])
        elif r < 0.95:
            g = self.group_for(key)
            self.out.append([b"XGROUP", b"DESTROY", key, g])
            s.groups.pop(g, None)
        else:
            self.xgroup_create(key)

    def xtrim(self):
        key = self.skey()
        s = self.streams[key]
        args = [b"XTRIM", key] + self.trim_args(s, small=True)
        self.out.append(args)
        self.apply_trim(s, args)

    def xdel(self):
        key = self.skey()
        s = self.streams[key]
        ids = [self.some_id(s) for _ in range(self.rng.randint(1, 8))]
        self.out.append([b"XDEL", key] + ids)
        gone = set(ids)
        s.ids = [i for i in s.ids if _fmt(i) not in gone]

    def xrange(self):
        key = self.skey()
        s = self.streams[key]
        rev = self.rng.random() < 0.35
        lo = b"-" if self.rng.random() < 0.3 else self.some_id(s)
        hi = b"+" if self.rng.random() < 0.3 else self.some_id(s)
        if self.rng.random() < 0.1 and lo != b"-":
            lo = b"(" + lo
        if lo > hi and lo not in (b"-",) and hi != b"+" and self.rng.random() < 0.8:
            lo, hi = hi, lo
        args = [b"XREVRANGE", key, hi, lo] if rev else [b"XRANGE", key, lo, hi]
        if self.rng.random() < 0.85:
            args += [b"COUNT", b"%d" % self.rng.choice([0, 1, 3, 10, 100, 1000])]
        self.out.append(args)

    def xread(self):
        keys = [self.skey()]
        if self.rng.random() < 0.3:
            keys.append(self.rng.choice([k for k in STREAMS if k != keys[0]]))
        args = [b"XREAD"]
        if self.rng.random() < 0.8:
            args += [b"COUNT", b"%d" % self.rng.choice([1, 10, 100])]
        ids = [self.some_id(self.streams[k]) for k in keys]
        self.out.append(args + [b"STREAMS"] + keys + ids)

    def xinfo(self):
        key = self.rng.choice(STREAMS + [STREAM_COPY])
        sub = self.rng.choice([b"STREAM", b"STREAM", b"GROUPS"])
        self.out.append([b"XINFO", sub, key])

    def stream_step(self):
        r = self.rng.random()
        if r < 0.42:
            self.xadd()
        elif r < 0.58:
            self.xreadgroup()
        elif r < 0.68:
            self.xack()
        elif r < 0.72:
            self.xclaim()
        elif r < 0.75:
            self.xautoclaim()
        elif r < 0.79:
            self.xpending()
        elif r < 0.82:
            self.xgroup_other()
        elif r < 0.835:
            self.xtrim()
        elif r < 0.85:
            self.xdel()
        elif r < 0.92:
            self.xrange()
        elif r < 0.94:
            self.xread()
        elif r < 0.97:
            self.xinfo()
        else:
            self.out.append([b"XLEN", self.skey()])

    # -- lists --------------------------------------------------------

    def index(self, key) -> int:
        n = max(self.list_len[key], 1)
        r = self.rng.random()
        if r < 0.4:
            return self.rng.randrange(-n - 2, n + 2)
        if r < 0.7:
            return self.rng.randrange(min(n, 50))
        return -1 - self.rng.randrange(min(n, 50))

    def list_step(self):
        key = self.lkey()
        n = self.list_len[key]
        r = self.rng.random()
        rng = self.rng
        if r < 0.25:
            cmd = rng.choice([b"LPUSH", b"RPUSH", b"RPUSH"])
            k = 1 if rng.random() < 0.6 else rng.choice([2, 10, 50, 200, 500])
            if rng.random() < 0.03:
                cmd = cmd + b"X"
            self.emit(cmd, key, *[self.value() for _ in range(k)])
            self.list_len[key] += k
        elif r < 0.37:
            cmd = rng.choice([b"LPOP", b"RPOP"])
            if rng.random() < 0.5:
                self.emit(cmd, key)
                self.list_len[key] = max(n - 1, 0)
            else:
                k = rng.choice([0, 1, 5, 50, 300])
                self.emit(cmd, key, k)
                self.list_len[key] = max(n - k, 0)
        elif r < 0.47:
            dst = self.lkey()
            self.emit(b"LMOVE", key, dst, rng.choice([b"LEFT", b"RIGHT"]),
                      rng.choice([b"LEFT", b"RIGHT"]))
            if n:
                self.list_len[key] -= 1
                self.list_len[dst] += 1
        elif r < 0.50:
            dst = self.lkey()
            self.emit(b"RPOPLPUSH", key, dst)
            if n:
                self.list_len[key] -= 1
                self.list_len[dst] += 1
        elif r < 0.53:
            k = rng.choice([1, 3, 100])
            self.emit(b"LMPOP", 2, key, self.lkey(), rng.choice([b"LEFT", b"RIGHT"]),
                      b"COUNT", k)
        elif r < 0.58:
            self.emit(b"LREM", key, rng.choice([1, -1, 2, -3, 0, 5]), self.value())
        elif r < 0.62:
            self.emit(b"LINSERT", key, rng.choice([b"BEFORE", b"AFTER"]), self.value(),
                      self.value())
            self.list_len[key] += 1
        elif r < 0.66:
            self.emit(b"LSET", key, self.index(key), self.value())
        elif r < 0.68:
            if rng.random() < 0.7:
                keep = rng.randrange(max(n, 1) + 1)
                start = rng.randrange(min(max(n, 1), 100))
                self.emit(b"LTRIM", key, start, start + max(keep, 1000) - 1)
            else:
                self.emit(b"LTRIM", key, self.index(key), self.index(key))
        elif r < 0.76:
            args = [b"LPOS", key, self.value()]
            if rng.random() < 0.4:
                args += [b"RANK", b"%d" % rng.choice([1, 2, -1, -3, 5])]
            if rng.random() < 0.4:
                args += [b"COUNT", b"%d" % rng.choice([0, 1, 3, 10])]
            if rng.random() < 0.3:
                args += [b"MAXLEN", b"%d" % rng.choice([0, 1, 10, 100, 1000])]
            self.out.append(args)
        elif r < 0.86:
            if rng.random() < 0.05:
                self.emit(b"LRANGE", key, 0, -1)
            else:
                start = self.index(key)
                self.emit(b"LRANGE", key, start, start + rng.choice([0, 1, 10, 100, 300]))
        elif r < 0.92:
            self.emit(b"LINDEX", key, self.index(key))
        elif r < 0.97 or self.in_multi:
            self.emit(b"LLEN", key)
        else:
            self.emit(b"OBJECT", b"ENCODING", key)

    # -- hashes, sets, sorted sets, strings, keyspace -----------------

    def hash_step(self):
        rng = self.rng
        key = rng.choice(HASHES)
        f = b"f%d" % rng.randrange(40)
        r = rng.random()
        if r < 0.3:
            args = [b"HSET", key]
            for _ in range(rng.randint(1, 5)):
                args += [b"f%d" % rng.randrange(40), self.small_value()]
            self.out.append(args)
        elif r < 0.45:
            self.emit(b"HINCRBY", key, f, rng.randrange(-5, 10))
        elif r < 0.55:
            self.emit(b"HGET", key, f)
        elif r < 0.62:
            self.emit(b"HMGET", key, f, b"f%d" % rng.randrange(40))
        elif r < 0.72:
            self.emit(b"HDEL", key, f, b"f%d" % rng.randrange(40))
        elif r < 0.80:
            self.emit(b"HGETALL", key)
        elif r < 0.85:
            self.emit(b"HSETNX", key, f, self.small_value())
        elif r < 0.92:
            self.emit(b"HLEN", key)
        else:
            self.emit(b"HEXISTS", key, f)

    def member(self) -> bytes:
        i = self.rng.randrange(200)
        return b"%d" % i if self.rng.random() < 0.4 else b"w:%d" % i

    def set_step(self):
        rng = self.rng
        key = rng.choice(SETS)
        r = rng.random()
        if r < 0.3:
            self.emit(b"SADD", key, *[self.member() for _ in range(rng.randint(1, 20))])
        elif r < 0.45:
            self.emit(b"SREM", key, self.member(), self.member())
        elif r < 0.55:
            self.emit(b"SISMEMBER", key, self.member())
        elif r < 0.6:
            self.emit(b"SMISMEMBER", key, self.member(), self.member())
        elif r < 0.7:
            self.emit(b"SCARD", key)
        elif r < 0.75 and not self.in_multi:
            self.emit(b"SMEMBERS", key)
        elif r < 0.8:
            self.emit(b"SMOVE", key, rng.choice(SETS), self.member())
        elif r < 0.9:
            self.emit(b"SINTERCARD", 2, key, rng.choice(SETS))
        elif not self.in_multi:
            self.emit(rng.choice([b"SINTER", b"SUNION", b"SDIFF"]), key, rng.choice(SETS))
        else:
            self.emit(b"SCARD", key)

    def score(self) -> bytes:
        r = self.rng.random()
        if r < 0.6:
            return b"%d" % self.rng.randrange(-100, 10**13)
        return self.rng.choice([b"1.5", b"-0.25", b"1e10", b"3.14159", b"0", b"-inf",
                                b"+inf", b"1.7976931348623157e308"])

    def zset_step(self):
        rng = self.rng
        key = rng.choice(ZSETS)
        r = rng.random()
        if r < 0.3:
            args = [b"ZADD", key]
            if rng.random() < 0.2:
                args.append(rng.choice([b"NX", b"XX", b"GT", b"LT", b"CH"]))
            for _ in range(rng.randint(1, 10)):
                args += [self.score(), self.member()]
            self.out.append(args)
        elif r < 0.4:
            self.emit(b"ZRANGEBYSCORE", key, b"-inf", self.score(), b"WITHSCORES", b"LIMIT", 0,
                      rng.choice([1, 10, 100]))
        elif r < 0.5:
            args = [b"ZRANGE", key, rng.randrange(-20, 20), rng.randrange(-20, 50)]
            if rng.random() < 0.5:
                args.append(b"WITHSCORES")
            self.emit(*args)
        elif r < 0.58:
            self.emit(rng.choice([b"ZPOPMIN", b"ZPOPMAX"]), key, rng.choice([1, 3, 20]))
        elif r < 0.66:
            self.emit(b"ZREM", key, self.member(), self.member())
        elif r < 0.74:
            self.emit(b"ZSCORE", key, self.member())
        elif r < 0.8:
            self.emit(b"ZINCRBY", key, rng.choice([b"1", b"-2.5", b"0.1", b"100"]), self.member())
        elif r < 0.86:
            self.emit(rng.choice([b"ZRANK", b"ZREVRANK"]), key, self.member())
        elif r < 0.92:
            self.emit(b"ZCOUNT", key, b"-inf", self.score())
        else:
            self.emit(b"ZCARD", key)

    def rel_ttl(self) -> bytes:
        if not self.rel_ttls:
            self.rel_ttls = self.rng.sample(range(self.rel_hi, self.rel_hi + 1000), 1000)
            self.rel_hi += 1000
        return b"%d" % (self.rel_ttls.pop() * 10_000)

    def string_step(self):
        rng = self.rng
        key = rng.choice(STRS)
        r = rng.random()
        if r < 0.2:
            args = [b"SET", key, self.value()]
            if rng.random() < 0.3:
                args += [b"EX", self.rel_ttl()]
            if rng.random() < 0.3:
                args.append(rng.choice([b"NX", b"XX", b"GET", b"KEEPTTL"]))
            self.out.append(args)
        elif r < 0.35:
            self.emit(rng.choice([b"INCR", b"DECR"]), b"str:cnt")
        elif r < 0.45:
            self.emit(b"INCRBY", b"str:cnt", rng.randrange(-100, 1000))
        elif r < 0.55:
            self.emit(b"GET", key)
        elif r < 0.62:
            self.emit(b"APPEND", key, self.value())
        elif r < 0.67:
            self.emit(b"STRLEN", key)
        elif r < 0.72:
            self.emit(b"MGET", *STRS)
        elif r < 0.76:
            self.emit(b"GETDEL", b"str:tmp")
        elif r < 0.9:
            args = [b"EXPIRE", key, self.rel_ttl()]
            if rng.random() < 0.4:
                args.append(rng.choice([b"NX", b"XX", b"GT", b"LT"]))
            self.out.append(args)
        else:
            self.emit(b"PERSIST", key)

    def keyspace_step(self):
        """Expiry on the non-string keys (absolute, far future), reads of it,
        and whole-key operations that keep each key within its family."""
        rng = self.rng
        r = rng.random()
        fam = rng.choice([HASHES, SETS, ZSETS, STREAMS, LISTS])
        key = rng.choice(fam)
        if r < 0.25:
            self.abs_ttl += rng.randint(1, 10**6)
            cmd = rng.choice([b"EXPIREAT", b"PEXPIREAT"])
            when = self.abs_ttl * (1000 if cmd == b"PEXPIREAT" else 1)
            args = [cmd, key, b"%d" % when]
            if rng.random() < 0.4:
                args.append(rng.choice([b"NX", b"XX", b"GT", b"LT"]))
            self.out.append(args)
        elif r < 0.4:
            self.emit(rng.choice([b"EXPIRETIME", b"PEXPIRETIME"]), key)
        elif r < 0.45:
            self.emit(b"PERSIST", key)
        elif r < 0.55:
            self.emit(b"EXISTS", *rng.sample(ALL_KEYS, 3))
        elif r < 0.65:
            self.emit(b"TYPE", rng.choice(ALL_KEYS))
        elif r < 0.7:
            self.emit(b"DBSIZE")
        elif r < 0.75 and fam in (HASHES, SETS, ZSETS):
            self.emit(rng.choice([b"DEL", b"UNLINK"]), fam[-1])
        elif r < 0.8 and fam in (HASHES, SETS, ZSETS):
            self.emit(b"RENAME" if rng.random() < 0.5 else b"RENAMENX", key, fam[-1])
        elif r < 0.86 and fam in (HASHES, SETS, ZSETS):
            self.emit(b"COPY", key, fam[-1], *([b"REPLACE"] if rng.random() < 0.5 else []))
        elif r < 0.9:
            # a copy of a whole stream with its groups and PELs
            self.emit(b"COPY", self.skey(), STREAM_COPY, b"REPLACE")
        elif r < 0.92:
            self.emit(b"DEL", STREAM_COPY)
        else:
            # a command of one family on a key of another: WRONGTYPE, nothing changes
            cmd = rng.choice([[b"LLEN"], [b"XLEN"], [b"HLEN"], [b"SCARD"], [b"ZCARD"],
                              [b"GET"], [b"LRANGE", b"0", b"1"], [b"XRANGE", b"-", b"+"]])
            self.out.append([cmd[0], rng.choice(ALL_KEYS)] + cmd[1:])

    def step(self):
        r = self.rng.random()
        if r < 0.55:
            self.stream_step()
        elif r < 0.80:
            self.list_step()
        elif r < 0.84:
            self.hash_step()
        elif r < 0.88:
            self.set_step()
        elif r < 0.92:
            self.zset_step()
        elif r < 0.95:
            self.string_step()
        else:
            self.keyspace_step()

    def multi(self, room: int):
        """MULTI, a body of queue commands (none whose reply is unordered or
        masked: inside EXEC's array the runner does not reach them), EXEC."""
        body = self.rng.randint(1, min(6, room - 2))
        self.out.append([b"MULTI"])
        self.in_multi = True
        target = len(self.out) + body
        while len(self.out) < target:
            if self.rng.random() < 0.01:
                self.out.append([b"NOSUCHCOMMAND"])   # EXECABORT
            else:
                self.step()
        self.in_multi = False
        del self.out[target:]
        self.out.append([b"EXEC"])

    def worker_burst(self):
        """The shape of issue 12: a producer adds, a worker reads right after."""
        key = self.skey()
        for _ in range(self.rng.randint(5, 40)):
            self.xadd(key)
            if self.rng.random() < 0.5:
                g = self.group_for(key)
                args = [b"XREADGROUP", b"GROUP", g, self.rng.choice(CONSUMERS)]
                if self.rng.random() < 0.3:
                    args += [b"COUNT", b"1"]
                self.out.append(args + [b"STREAMS", key, b">"])
                grp = self.streams[key].groups.get(g)
                if grp is not None:
                    s = self.streams[key]
                    i = bisect.bisect_right(s.ids, grp.cursor)
                    new = s.ids[i:i + 1] if b"COUNT" in args else s.ids[i:]
                    if new:
                        grp.cursor = new[-1]
                        grp.pending.extend(new)

    def build(self) -> list[list[bytes]]:
        n = self.n
        # A backlog first: the big stream and the big list grow before the
        # mix starts, so reads and trims start out crossing many nodes.
        backlog = n // 6
        while len(self.out) < backlog:
            if self.rng.random() < 0.85:
                self.xadd(STREAMS[0])
            else:
                self.emit(b"RPUSH", LISTS[0], *[self.value() for _ in range(100)])
                self.list_len[LISTS[0]] += 100
        while len(self.out) < n:
            room = n - len(self.out)
            r = self.rng.random()
            if r < 0.02 and room >= 3:
                self.multi(room)
            elif r < 0.035:
                self.worker_burst()
            else:
                self.step()
        del self.out[n:]
        if self.out and self.out[-1] == [b"MULTI"]:
            self.out[-1] = [b"PING"]
        # a body cut short by the end: close it so the servers are not left in MULTI
        depth = 0
        for argv in self.out:
            if argv[0] == b"MULTI":
                depth = 1
            elif argv[0] == b"EXEC":
                depth = 0
        if depth:
            self.out[-1] = [b"EXEC"]
        return self.out


def workload(seed: int, n_commands: int) -> tuple[dict, list[list[bytes]]]:
    """The config settings and the commands of a seed (see the module doc)."""
    rng = random.Random(seed ^ 0x5EED)
    config = {"stream-node-max-entries": str(rng.choice(NODE_ENTRIES)),
              "stream-node-max-bytes": str(rng.choice(NODE_BYTES)),
              "list-max-listpack-size": str(rng.choice(LIST_SIZES))}
    return config, _Workload(seed, n_commands).build()


# ----------------------------------------------------------------------
# Replies: a RESP parser (to mask idle times and to read snapshots)
# ----------------------------------------------------------------------

def parse(buf: bytes, pos: int = 0):
    """(node, end) for the reply at pos: node is (type byte, payload), the
    payload bytes for scalars, a list of nodes for aggregates (a map's keys
    and values alternate), None for a null bulk/array."""
    nl = buf.index(b"\r\n", pos)
    kind = buf[pos:pos + 1]
    head = buf[pos + 1:nl]
    pos = nl + 2
    if kind in (b"$", b"=", b"!"):
        n = int(head)
        if n < 0:
            return (kind, None), pos
        return (kind, buf[pos:pos + n]), pos + n + 2
    if kind in (b"*", b"~", b">", b"%", b"|"):
        n = int(head)
        if n < 0:
            return (kind, None), pos
        if kind in (b"%", b"|"):
            n *= 2
        items = []
        for _ in range(n):
            item, pos = parse(buf, pos)
            items.append(item)
        if kind == b"|":            # an attribute precedes the real reply
            item, pos = parse(buf, pos)
            return item, pos
        return (kind, items), pos
    return (kind, head), pos


def encode(node) -> bytes:
    kind, payload = node
    if payload is None:
        return kind + b"-1\r\n"
    if kind in (b"$", b"=", b"!"):
        return b"%b%d\r\n%b\r\n" % (kind, len(payload), payload)
    if isinstance(payload, list):
        n = len(payload) // 2 if kind == b"%" else len(payload)
        return b"%b%d\r\n" % (kind, n) + b"".join(encode(x) for x in payload)
    return kind + payload + b"\r\n"


def mask(argv: list[bytes], raw: bytes) -> bytes:
    """The reply as compared: unordered replies sorted (differential), and
    the idle column of the extended XPENDING form (wall clock) set to 0."""
    raw = normalise(argv, raw)
    if argv[0].upper() == b"XPENDING" and len(argv) > 3 and raw[:1] == b"*":
        node, _ = parse(raw)
        for entry in node[1] or ():
            if entry[0] == b"*" and entry[1] and len(entry[1]) == 4:
                entry[1][2] = (b":", b"0")
        raw = encode(node)
    return raw


# Known divergences: reply differences recognised exactly (not by command
# alone), counted and reported instead of failing a run, each one open in
# hotkv with a strict-xfail reproduction in test_volume.py.  ``strict=True``
# (``--strict``) tolerates none of them.
_LISTPACK, _QUICKLIST = b"$8\r\nlistpack\r\n", b"$9\r\nquicklist\r\n"


def known_divergence(argv: list[bytes], ours: bytes, theirs: bytes) -> str | None:
    """The name of the known divergence these replies show, or None.

    "list-encoding": OBJECT ENCODING of a list, listpack on one side and
    quicklist on the other.  hotkv derives a list's encoding from its
    contents alone (hotkv.types.encodings.object_encoding); Valkey's
    depends on history: a quicklist turns back into a listpack only when it
    is a single node holding at most half the limit, and with a count limit
    (list-max-listpack-size > 0) a node over 8 kB is a quicklist too.
    """
    if (len(argv) == 3 and argv[0].upper() == b"OBJECT" and argv[1].upper() == b"ENCODING"
            and {ours, theirs} == {_LISTPACK, _QUICKLIST}):
        return "list-encoding"
    return None


def to_py(node):
    """Plain Python data for a reply node (errors raise)."""
    kind, payload = node
    if payload is None or kind == b"_":
        return None
    if kind == b"-" or kind == b"!":
        raise RuntimeError("error reply: %r" % payload)
    if kind in (b":", b"("):
        return int(payload)
    if kind == b"#":
        return payload == b"t"
    if kind == b"%":
        return {to_py(k): to_py(v) for k, v in zip(payload[::2], payload[1::2])}
    if isinstance(payload, list):
        return [to_py(x) for x in payload]
    return payload               # bulk, simple, verbatim, double text


def _call(client, *args):
    return to_py(parse(client.call(*args))[0])


def _as_map(x) -> dict:
    if isinstance(x, dict):
        return x
    return dict(zip(x[::2], x[1::2]))


def _pairs(x) -> list:
    """[(a, b)...] from a flat RESP2 list or RESP3's nested pairs."""
    if x and isinstance(x[0], list):
        return [tuple(p) for p in x]
    return list(zip(x[::2], x[1::2]))


def _stream_state(client, key) -> dict:
    entries = [(e[0], tuple(e[1])) for e in _call(client, "XRANGE", key, "-", "+")]
    info = _as_map(_call(client, "XINFO", "STREAM", key, "FULL", "COUNT", "0"))
    info.pop(b"entries", None)
    groups = []
    for g in info.pop(b"groups") or ():
        g = _as_map(g)
        # group PEL rows: id, consumer, delivery time (clock), delivery count
        g[b"pending"] = [(p[0], p[1], p[3]) for p in g[b"pending"]]
        consumers = []
        for c in g[b"consumers"]:
            c = _as_map(c)
            c.pop(b"seen-time", None)
            c.pop(b"active-time", None)
            # consumer PEL rows: id, delivery time (clock), delivery count
            c[b"pending"] = [(p[0], p[2]) for p in c[b"pending"]]
            consumers.append(c)
        g[b"consumers"] = consumers
        groups.append(g)
    info[b"groups"] = groups
    return {"entries": entries, "info": info}


def snapshot(client) -> dict:
    """The current db of the server behind client, as plain data: {key:
    {"type": b"list"..., "ttl": has an expiry, "value": ...}}."""
    out = {}
    for key in sorted(_call(client, "KEYS", "*")):
        t = client.call("TYPE", key)[1:-2]
        if t == b"string":
            value = _call(client, "GET", key)
        elif t == b"list":
            value = _call(client, "LRANGE", key, "0", "-1")
        elif t == b"hash":
            value = dict(_pairs(_call(client, "HGETALL", key)))
        elif t == b"set":
            value = set(_call(client, "SMEMBERS", key))
        elif t == b"zset":
            value = _pairs(_call(client, "ZRANGE", key, "0", "-1", "WITHSCORES"))
        elif t == b"stream":
            value = _stream_state(client, key)
        else:
            raise AssertionError("snapshot: key %r has type %r" % (key, t))
        out[key] = {"type": t, "ttl": _call(client, "PTTL", key) >= 0, "value": value}
    return out


# ----------------------------------------------------------------------
# The comparison
# ----------------------------------------------------------------------

BATCH = 64


def _short(b: bytes, at: int = 0, width: int = 600) -> str:
    if len(b) <= width:
        return repr(b)
    lo = max(at - width // 2, 0)
    return "%s...[%d bytes; from %d:] %r" % (repr(b[:80]), len(b), lo, b[lo:lo + width])


def _first_diff(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _argv_text(argv) -> str:
    shown = [a if len(a) <= 60 else a[:40] + b"...(%d bytes)" % len(a) for a in argv[:24]]
    more = " ... (%d args)" % len(argv) if len(argv) > 24 else ""
    return repr(shown) + more


def _snap_diff(a: dict, b: dict) -> str:
    if a.keys() != b.keys():
        return "keys differ: hotkv only %r, valkey only %r" % (
            sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys()))
    for key in a:
        if a[key] != b[key]:
            x, y = a[key], b[key]
            for part in ("type", "ttl"):
                if x[part] != y[part]:
                    return "key %r: %s %r vs %r" % (key, part, x[part], y[part])
            xv, yv = x["value"], y["value"]
            if isinstance(xv, dict) and "entries" in xv:
                if xv["entries"] != yv["entries"]:
                    i = next((i for i, (p, q) in enumerate(zip(xv["entries"], yv["entries"]))
                              if p != q), min(len(xv["entries"]), len(yv["entries"])))
                    return "stream %r: entries differ at %d (%d vs %d entries): %r vs %r" % (
                        key, i, len(xv["entries"]), len(yv["entries"]),
                        xv["entries"][i:i + 2], yv["entries"][i:i + 2])
                for f in xv["info"]:
                    if xv["info"][f] != yv["info"].get(f):
                        return "stream %r: XINFO FULL %r:\n hotkv:  %.1500r\n valkey: %.1500r" % (
                            key, f, xv["info"][f], yv["info"].get(f))
            return "key %r (%s):\n hotkv:  %.1500r\n valkey: %.1500r" % (key, x["type"], xv, yv)
    return "?"


def _configure(clients, config: dict) -> dict:
    """CONFIG SET config on every client; returns hotkv's (the first
    client's) previous values, to restore."""
    old = {}
    for name in config:
        reply = _call(clients[0], "CONFIG", "GET", name)
        old.update(_as_map(reply) if reply else {})
    for c in clients:
        for name, value in config.items():
            reply = c.call("CONFIG", "SET", name, value)
            assert reply == b"+OK\r\n", "CONFIG SET %s %s: %r" % (name, value, reply)
    return {k.decode(): v for k, v in old.items()}


def _run_batch(client, batch) -> list[bytes]:
    client.send_raw(b"".join(encode_command(*argv) for argv in batch))
    return [client.read_reply() for _ in batch]


def compare(seed: int, n_commands: int, resp3: bool = False, *, hotkv_addr, valkey_addr,
            commands=None, known: dict | None = None, strict: bool = False) -> int:
    """Run seed's workload on hotkv and Valkey ((host, port) each); raise
    AssertionError at the first reply or final-state difference.  Returns
    the number of commands compared.  ``commands`` replaces the drawn
    commands (to replay a cut-down failing case with the seed's config).
    A known divergence (known_divergence) is counted in ``known`` (name ->
    count) instead of failing, unless ``strict``."""
    config, script = workload(seed, n_commands)
    if commands is not None:
        script = commands
    ours = RawClient(*hotkv_addr, timeout=60)
    theirs = RawClient(*valkey_addr, timeout=60)
    admin = [RawClient(*hotkv_addr, timeout=60), RawClient(*valkey_addr, timeout=60)]
    restore = {}
    try:
        for c in admin:
            assert c.call("FLUSHALL") == b"+OK\r\n"
        restore = _configure(admin, config)
        if resp3:
            for c in (ours, theirs):
                assert c.call("HELLO", "3")[:1] == b"%"
        where = "seed %d (%s, config %r)" % (seed, "RESP3" if resp3 else "RESP2", config)
        for start in range(0, len(script), BATCH):
            batch = script[start:start + BATCH]
            a_replies = _run_batch(ours, batch)
            b_replies = _run_batch(theirs, batch)
            for j, (argv, a, b) in enumerate(zip(batch, a_replies, b_replies)):
                a, b = mask(argv, a), mask(argv, b)
                if a != b and not strict:
                    name = known_divergence(argv, a, b)
                    if name is not None:
                        if known is not None:
                            known[name] = known.get(name, 0) + 1
                        continue
                if a != b:
                    at = _first_diff(a, b)
                    raise AssertionError(
                        "%s: command %d of %d differs: %s\n first difference at byte %d\n"
                        " hotkv:  %s\n valkey: %s\n replay: python compat/volume.py --seeds %d"
                        " --commands %d%s" % (
                            where, start + j, len(script), _argv_text(argv), at,
                            _short(a, at), _short(b, at), seed, n_commands,
                            " --resp3" if resp3 else ""))
        snap_a, snap_b = snapshot(admin[0]), snapshot(admin[1])
        if snap_a != snap_b:
            raise AssertionError("%s: every reply matched but the final state differs: %s"
                                 % (where, _snap_diff(snap_a, snap_b)))
        return len(script)
    finally:
        try:
            for c in admin:
                c.call("FLUSHALL")
            for name, value in restore.items():
                for c in admin:
                    c.call("CONFIG", "SET", name, value)
        finally:
            for c in (ours, theirs, *admin):
                c.close()


# ----------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------

def parse_seeds(text: str) -> list[int]:
    """"0-999" or "3,7,10-20" -> the seeds (the CLIs' --seeds, the tests' env vars)."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0-99", help="e.g. 0-999 or 3,7,10-20")
    p.add_argument("--commands", type=int, default=5000)
    proto = p.add_mutually_exclusive_group()
    proto.add_argument("--resp3", action="store_true", help="RESP3 only")
    proto.add_argument("--both", action="store_true", help="each seed in RESP2 and RESP3")
    p.add_argument("--hotkv", help="host:port of a running hotkv (default: start one embedded)")
    p.add_argument("--stop", action="store_true", help="stop at the first divergence")
    p.add_argument("--strict", action="store_true",
                   help="fail on the known divergences too (see known_divergence)")
    args = p.parse_args(argv)
    protocols = [False, True] if args.both else [args.resp3]

    from support import ReferenceValkey
    embedded = None
    if args.hotkv:
        host, _, port = args.hotkv.rpartition(":")
        hotkv_addr = (host, int(port))
    else:
        from hotkv import EmbeddedServer
        embedded = EmbeddedServer().start()
        hotkv_addr = (embedded.host, embedded.port)
    ref = ReferenceValkey().start()
    failures = []
    known: dict = {}
    total = 0
    t0 = time.time()
    try:
        for seed in parse_seeds(args.seeds):
            for resp3 in protocols:
                t = time.time()
                name = "seed %d %s" % (seed, "RESP3" if resp3 else "RESP2")
                try:
                    total += compare(seed, args.commands, resp3, hotkv_addr=hotkv_addr,
                                     valkey_addr=(ref.host, ref.port), known=known,
                                     strict=args.strict)
                    print("%s: %d commands equal (%.1fs)" % (name, args.commands,
                                                            time.time() - t), flush=True)
                except AssertionError as e:
                    failures.append(name)
                    print("%s: DIVERGED\n%s" % (name, e), flush=True)
                    if args.stop:
                        raise SystemExit(1)
    finally:
        ref.stop()
        if embedded is not None:
            embedded.stop()
        print("summary: %d runs (%s seeds x %d protocol(s)), %d commands compared in the "
              "runs that matched, %d diverged%s; known divergences tolerated: %s; %.0fs" % (
                  len(parse_seeds(args.seeds)) * len(protocols), args.seeds, len(protocols), total,
                  len(failures), (": " + ", ".join(failures)) if failures else "",
                  known or "none", time.time() - t0), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
