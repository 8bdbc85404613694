"""``hotkv cli``'s other modes, as valkey-cli 8.1's: ``--hotkeys``
(findHotKeys), ``--latency-dist`` (latencyDistMode), ``--lru-test``
(LRUTestMode), ``--intrinsic-latency``
(intrinsicLatencyMode), ``--rdb`` / ``--functions-rdb`` (getRDB) and
``--replica`` / a typed SYNC or PSYNC (replicaMode), ``--eval``'s EVAL
(evalMode; the Lua debugger's prompt is cli_repl.py's) and the colours of
the debugger's lines.

Invariants: the same lines as valkey-cli, on the same stream (the
replication handshake's progress goes to stderr, the RDB or the replicated
commands to stdout); the replication modes read the connection's bytes
through ``Conn``'s own buffer, so nothing the reply reader already took is
lost; the timing figures are measured here (they are the only thing that
may differ from valkey-cli's run).
"""

from __future__ import annotations

import math
import os
import sys
import time

from .cli_modes import _Interrupt, _keyspace_preamble, _pct, _scan
from .cli_resp import ProtocolError, context_error, repr_bytes, txt, write


def _ustime() -> int:
    return time.time_ns() // 1000


# -- --hotkeys ---------------------------------------------------------------------

_HOTKEYS_SAMPLE = 16


def _freqs(s, keys):
    conn = s.conn
    conn.sock.sendall(b"".join(conn.encode(("OBJECT", "FREQ", k)) for k in keys))
    out = []
    for k in keys:
        try:
            r = conn.read()
        except (OSError, ConnectionError, ProtocolError) as e:
            sys.stderr.write("Error getting freq for key '%s' (1: %s)\n"
                             % (txt(repr_bytes(k)), e))
            raise SystemExit(1)
        if r.kind == "int":
            out.append(r.value)
        elif r.kind == "error":
            sys.stderr.write("Error: %s\n" % txt(r.value))
            raise SystemExit(1)
        else:
            sys.stderr.write("Warning: OBJECT freq on '%s' failed (may have been deleted)\n"
                             % txt(repr_bytes(k)))
            out.append(0)
    return out


def hot_keys(s) -> int:
    """valkey-cli --hotkeys: OBJECT FREQ over a SCAN of the keyspace, the
    16 hottest kept (needs an LFU maxmemory-policy)."""
    o = s.o
    stop = _Interrupt.install()
    total = _keyspace_preamble(s, b"hot keys")
    counters = [0] * _HOTKEYS_SAMPLE
    names = [b""] * _HOTKEYS_SAMPLE
    sampled = loops = cursor = 0
    pct = 0.0
    while True:
        pct = 100 * sampled / total if total else (float("nan") if sampled == 0
                                                   else float("inf"))
        cursor, keys = _scan(s, cursor)
        loops += 1
        out = []
        for key, freq in zip(keys, _freqs(s, keys) if keys else []):
            sampled += 1
            if sampled % 1000000 == 0:
                out.append(b"[%s%%] Sampled %d keys so far\n" % (_pct(pct), sampled))
            k = 0
            while k < _HOTKEYS_SAMPLE and freq > counters[k]:
                k += 1
            if k == 0:
                continue
            k -= 1
            if k != 0 and counters[k] != 0:
                del counters[0], names[0]
                counters.insert(k, 0)
                names.insert(k, b"")
            counters[k] = freq
            names[k] = repr_bytes(key)
            out.append(b"[%s%%] Hot key '%s' found so far with counter %d\n"
                       % (_pct(pct), names[k], freq))
        write(b"".join(out))
        if o.interval and loops % 100 == 0:
            time.sleep(o.interval)
        if stop.seen or cursor == 0:
            break
    out = [b"\n-------- summary -------\n\n"]
    if stop.seen:
        out.append(b"[%s%%] " % _pct(pct))
    out.append(b"Sampled %d keys in the keyspace!\n" % sampled)
    for k in range(_HOTKEYS_SAMPLE - 1, -1, -1):
        if counters[k] > 0:
            out.append(b"hot key found with counter: %d\tkeyname: %s\n"
                       % (counters[k], names[k]))
    write(b"".join(out))
    return 0


# -- --lru-test ---------------------------------------------------------------------------

def _lru_key(rng, keys: int) -> bytes:
    """lru:<n>, n from 1 to keys with a power law (alpha 6.2: 80-20)."""
    alpha = 6.2
    top = keys + 1
    r = rng.random()
    pl = ((top ** (alpha + 1) - 1) * r + 1) ** (1.0 / (alpha + 1))
    return b"lru:%d" % (top - 1 - int(pl) + 1)


def lru_test(s) -> int:
    """valkey-cli --lru-test KEYS: a cache workload (pipelines of 250 SETs
    then 250 GETs over an 80-20 key distribution), one line of hits and
    misses a second, until Ctrl-C."""
    import random
    rng = random.Random()
    keys = s.o.lru_test
    conn = s.conn
    letters = [bytes((c,)) for c in range(ord("A"), ord("z"))]
    while True:
        start = time.monotonic()
        hits = misses = 0
        while time.monotonic() - start < 1.0:
            try:
                conn.sock.sendall(b"".join(
                    conn.encode((b"SET", _lru_key(rng, keys),
                                 b"".join(rng.choice(letters) for _ in range(5))))
                    for _ in range(250)))
                for _ in range(250):
                    conn.read()
                conn.sock.sendall(b"".join(conn.encode((b"GET", _lru_key(rng, keys)))
                                           for _ in range(250)))
                for _ in range(250):
                    r = conn.read()
                    if r.kind == "error":
                        sys.stderr.write("%s\n" % txt(r.value))
                    elif r.kind == "nil":
                        misses += 1
                    else:
                        hits += 1
            except (OSError, ConnectionError, ProtocolError):
                sys.stderr.write("I/O error during LRU test\n")
                return 1
        total = hits + misses
        write(b"%d Gets/sec | Hits: %d (%.2f%%) | Misses: %d (%.2f%%)\n"
              % (total, hits, hits / total * 100, misses, misses / total * 100))


# -- --latency-dist ----------------------------------------------------------------

# (the bucket's upper bound in microseconds, 0 for the rest; its character)
_BUCKETS = [(10, "."), (125, "-"), (250, "*"), (500, "#")] + \
    [(1000 * n, str(n)) for n in range(1, 10)] + \
    [(10000 * n, c) for n, c in zip(range(1, 6), "ABCDE")] + \
    [(100000 * n, c) for n, c in zip(range(1, 6), "FGHIJ")] + \
    [(1000000 * n, c) for n, c in zip((1, 2, 4, 8, 16, 30, 60), "KLMNOPQ")] + [(0, "?")]

# xterm-256 colours, from 0% to 100% of the samples.
_PALETTE = (0, 233, 234, 235, 237, 239, 241, 243, 245, 247, 144, 143, 142, 184, 226, 214,
            208, 202, 196)
_MONO = (0, 233, 234, 235, 237, 239, 241, 243, 245, 247, 249, 251, 253)   # --mono


def _dist_legend(palette) -> bytes:
    colours = "".join("\033[48;5;%dm " % c for c in palette)
    return ("---------------------------------------------\n"
            ". - * #          .01 .125 .25 .5 milliseconds\n"
            "1,2,3,...,9      from 1 to 9     milliseconds\n"
            "A,B,C,D,E        10,20,30,40,50  milliseconds\n"
            "F,G,H,I,J        .1,.2,.3,.4,.5       seconds\n"
            "K,L,M,N,O,P,Q,?  1,2,4,8,16,30,60,>60 seconds\n"
            "From 0 to 100%: " + colours + "\033[0m\n"
            "---------------------------------------------\n").encode()


def latency_dist(s) -> int:
    """valkey-cli --latency-dist: PING every 10 ms, one spectrum line per
    interval (-i, default 1 s), the legend every 20 lines; until Ctrl-C."""
    o = s.o
    palette = _MONO if o.mono else _PALETTE
    interval_ms = int(o.interval * 1000) if o.interval else 1000
    counts = [0] * len(_BUCKETS)
    count = outputs = 0
    start_of_line = _ustime()
    while True:
        t0 = _ustime()
        try:
            s.conn.call("PING")
        except (OSError, ConnectionError, ProtocolError):
            sys.stderr.write("\nI/O error\n")
            return 1
        latency = _ustime() - t0
        count += 1
        for j, (top, _) in enumerate(_BUCKETS):
            if top == 0 or latency <= top:
                counts[j] += 1
                break
        if (_ustime() - start_of_line) // 1000 > interval_ms:
            out = []
            if outputs % 20 == 0:
                out.append(_dist_legend(palette))
            outputs += 1
            out.append(b"\033[38;5;0m")
            for j, (_, ch) in enumerate(_BUCKETS):
                idx = math.ceil(counts[j] / count * (len(palette) - 1))
                out.append(b"\033[48;5;%dm%s" % (palette[idx], ch.encode()))
                counts[j] = 0
            out.append(b"\033[0m\n")
            write(b"".join(out))
            start_of_line = _ustime()
            count = 0
        time.sleep(0.01)


# -- --intrinsic-latency -------------------------------------------------------------

def _something_fast() -> int:
    """A little work whose run time should not vary (valkey-cli shuffles a
    256-byte table; this is shorter, Python being slower)."""
    t = list(range(16))
    j = out = 0
    for i in range(1, 17):
        i &= 15
        j = (j + t[i]) & 15
        t[i], t[j] = t[j], t[i]
        out += t[(t[i] + t[j]) & 15]
    return out


def intrinsic_latency(seconds: int) -> int:
    """valkey-cli --intrinsic-latency: how long this process can be kept
    from running, measured without a server."""
    run_time = seconds * 1000000
    test_end = _ustime() + run_time
    stop = _Interrupt.install()
    worst = runs = 0
    while True:
        start = _ustime()
        _something_fast()
        end = _ustime()
        latency = end - start
        runs += 1
        if latency <= 0:
            continue
        if latency > worst:
            worst = latency
            write(b"Max latency so far: %d microseconds.\n" % worst)
        avg_us = run_time / runs
        if stop.seen or end > test_end:
            write(b"\n%d total runs (avg latency: %.4f microseconds / %.2f nanoseconds per "
                  b"run).\n" % (runs, avg_us, avg_us * 1e3))
            write(b"Worst run took %.0fx longer than the average latency.\n"
                  % (worst / avg_us if avg_us else float("inf")))
            return 0


# -- --rdb, --replica: the replication protocol ----------------------------------------

_EOF_MARK = 40


def send_replconf(s, arg1: str, arg2: str) -> bool:
    sys.stderr.write("sending REPLCONF %s %s\n" % (arg1, arg2))
    try:
        r = s.conn.call("REPLCONF", arg1, arg2)
    except (OSError, ConnectionError, ProtocolError):
        sys.stderr.write("\nI/O error\n")
        raise SystemExit(1)
    if r.kind == "error":
        sys.stderr.write("REPLCONF %s error: %s\n" % (arg1, txt(r.value)))
        return False
    return True


def _read_some(conn, n: int) -> bytes:
    """Up to n raw bytes: what the reply reader holds first, else one recv."""
    if conn.pos < len(conn.buf):
        data = conn.buf[conn.pos:conn.pos + n]
        conn.pos += len(data)
        return data
    try:
        return conn.sock.recv(n)
    except OSError:
        return b""


def _read_line(conn, what: str) -> bytes:
    """One line up to its \\n (its \\r kept, as valkey-cli prints it), a
    leading bare \\n (the primary's keepalive) skipped."""
    line = b""
    while True:
        ch = _read_some(conn, 1)
        if not ch:
            sys.stderr.write("Error reading bulk length while %s\n" % what)
            raise SystemExit(1)
        if ch == b"\n" and line:
            return line
        if ch != b"\n":
            line += ch


def send_sync(s, words=None):
    """sendSync: SYNC (or the typed SYNC / PSYNC), then the payload's
    header.  Returns (payload size or 0, EOF mark or None, full sync?)."""
    conn = s.conn
    try:
        conn.sock.sendall(b"SYNC\r\n" if words is None else conn.encode(words))
    except OSError:
        sys.stderr.write("Error writing to primary\n")
        raise SystemExit(1)
    line = _read_line(conn, "SYNCing")
    if line[:1] == b"-":
        sys.stderr.write("SYNC with primary failed: %s\n" % txt(line))
        raise SystemExit(1)
    if line.startswith(b"+FULLRESYNC") or line.startswith(b"+CONTINUE"):
        sys.stderr.write("PSYNC replied %s\n" % txt(line))
        partial = line.startswith(b"+CONTINUE")
        if partial:
            return 0, None, False
        line = _read_line(conn, "PSYNCing")
    if line[1:5] == b"EOF:" and len(line) - 5 >= _EOF_MARK:
        return 0, line[5:5 + _EOF_MARK], True
    return _atoull(line[1:]), None, True


def _atoull(b: bytes) -> int:
    digits = b""
    for ch in b.strip():
        if 48 <= ch <= 57:
            digits += bytes((ch,))
        else:
            break
    return int(digits) if digits else 0


def _payload(s, size: int, mark, sink, what: str) -> int:
    """Read the RDB (``size`` bytes, or up to the EOF mark) into ``sink``;
    returns the bytes read."""
    conn = s.conn
    got = 0
    tail = b""
    while mark is not None or got < size:
        want = 4096 if mark is not None else min(4096, size - got)
        data = _read_some(conn, want)
        if not data:
            sys.stderr.write(what)
            raise SystemExit(1)
        sink(data)
        got += len(data)
        if mark is not None:
            tail = (tail + data)[-_EOF_MARK:]
            if tail == mark:
                break
    return got


def get_rdb(s) -> int:
    """valkey-cli --rdb FILE / --functions-rdb FILE ('-' is stdout)."""
    o = s.o
    filename = o.rdb if o.rdb is not None else o.functions_rdb
    send_replconf(s, "capa", "eof")
    send_replconf(s, "rdb-only", "1")
    if o.functions_rdb is not None and not send_replconf(s, "rdb-filter-only", "functions"):
        sys.stderr.write("Failed requesting functions only RDB from server, aborting\n")
        return 1
    size, mark, _ = send_sync(s)
    if mark is not None:
        sys.stderr.write("SYNC sent to primary, writing bytes of bulk transfer until EOF "
                         "marker to '%s'\n" % filename)
    else:
        sys.stderr.write("SYNC sent to primary, writing %d bytes to '%s'\n" % (size, filename))
    to_stdout = filename == "-"
    if to_stdout:
        fd = sys.stdout.fileno()
        sys.stdout.flush()
    else:
        try:
            fd = os.open(filename, os.O_CREAT | os.O_WRONLY, 0o644)
        except OSError as e:
            sys.stderr.write("Error opening '%s': %s\n" % (filename, os.strerror(e.errno)))
            return 1

    def sink(data):
        try:
            n = os.write(fd, data)
        except OSError as e:
            sys.stderr.write("Error writing data to file: %s\n" % os.strerror(e.errno))
            raise SystemExit(1)
        if n != len(data):
            sys.stderr.write("Error writing data to file: short write\n")
            raise SystemExit(1)

    got = _payload(s, size, mark, sink, "I/O Error reading RDB payload from socket\n")
    if mark is not None:
        got -= _EOF_MARK
        if not to_stdout:
            os.ftruncate(fd, got)
        sys.stderr.write("Transfer finished with success after %d bytes\n" % got)
    else:
        sys.stderr.write("Transfer finished with success.\n")
    s.conn.close()
    s.conn = None
    if not to_stdout:
        os.fsync(fd)
        os.close(fd)
    return 0


def replica_mode(s, words=None) -> int:
    """valkey-cli --replica (or a typed SYNC / PSYNC): take a full sync,
    throw the RDB away, then print every command the primary sends, in CSV,
    until the connection ends."""
    o = s.o
    size, mark, full = send_sync(s, words)
    info = "Full resync" if full else "Partial resync"
    if full and size == 0:
        sys.stderr.write("%s with primary, discarding bytes of bulk transfer until EOF "
                         "marker...\n" % info)
    elif full:
        sys.stderr.write("%s with primary, discarding %d bytes of bulk transfer...\n"
                         % (info, size))
    else:
        sys.stderr.write("%s with primary...\n" % info)
    if full:
        got = _payload(s, size, mark, lambda data: None,
                       "Error reading RDB payload while %sing\n" % info)
    if mark is not None:
        sys.stderr.write("%s done after %d bytes. Logging commands from primary.\n"
                         % (info, got))
        time.sleep(1)
        send_replconf(s, "ACK", "0")
    else:
        sys.stderr.write("%s done. Logging commands from primary.\n" % info)
    saved, o.output = o.output, "csv"
    try:
        while True:
            try:
                s.read_reply(False)
            except (OSError, ConnectionError, ProtocolError) as e:
                sys.stderr.write("Error: %s\n" % context_error(e))
                return 1
    finally:
        o.output = saved


# -- --eval ------------------------------------------------------------------------------

def eval_words(path: str, args: list[bytes]) -> list[bytes]:
    """EVAL <the file's text> <numkeys> keys... args...: the first lone ','
    separates the keys from the arguments."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        sys.stderr.write("Can't open file '%s': %s\n" % (path, os.strerror(e.errno)))
        raise SystemExit(1)
    chunks = []
    try:
        while True:   # a directory opens and reads nothing, as with fopen/fread
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
    script = b"".join(chunks)
    keys, rest, comma = [], [], False
    for a in args:
        if not comma and a == b",":
            comma = True
        elif comma:
            rest.append(a)
        else:
            keys.append(a)
    return [b"EVAL", script, b"%d" % len(keys)] + keys + rest


# -- the Lua debugger's lines ------------------------------------------------------------

_COLOURS = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36,
            "white": 37}


def ldb_colour(line: bytes) -> bytes:
    """A debugger line in its colour (by its tag: <reply> cyan, <error> red,
    the current line yellow...), on a terminal whose TERM names an xterm."""
    if "xterm" not in os.environ.get("TERM", ""):
        return line
    colour = "white"
    for tag, c in ((b"<debug>", "bold"), (b"<command>", "green"), (b"<redis>", "green"),
                   (b"<reply>", "cyan"), (b"<error>", "red"), (b"<hint>", "bold")):
        if tag in line:
            colour = c
    if b"<value>" in line or b"<retval>" in line:
        colour = "magenta"
    if len(line) > 4 and 48 <= line[3] <= 57:
        if line[1:2] == b">":
            colour = "yellow"
        elif line[2:3] == b"#":
            colour = "bold"
    return b"\033[%d;%d;49m%s\033[0m" % (colour == "bold", _COLOURS.get(colour, 37), line)
