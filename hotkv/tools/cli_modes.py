"""``hotkv cli``'s special modes, as valkey-cli's: ``--scan [--pattern P]
[--count N]``, ``--bigkeys`` / ``--memkeys`` (findBigKeys), ``--stat``
(statMode), ``--latency`` / ``--latency-history`` (latencyMode) and
``--pipe`` (pipeMode).

Invariants: each prints what valkey-cli prints for the same replies, in
the same order (the per-type summary of --bigkeys in valkey-cli's fixed
order: list, hash, stream, string, set, zset, then other types as found);
--scan and --bigkeys stop at Ctrl-C after the current SCAN batch and still
print their summary; --stat and --latency on a terminal run until Ctrl-C
ends the process.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from .cli_resp import ProtocolError, repr_bytes, txt, write


class _Interrupt:
    """Ctrl-C in --scan / --bigkeys / --memkeys / --hotkeys /
    --intrinsic-latency: the loop stops at its next step and prints what it
    found (one per run, not a module global)."""

    def __init__(self):
        self.seen = False

    def __call__(self, signum, frame):
        self.seen = True

    @classmethod
    def install(cls) -> _Interrupt:
        """A new one, as this process's SIGINT handler."""
        interrupt = cls()
        signal.signal(signal.SIGINT, interrupt)
        return interrupt


def _keyspace_preamble(s, what: bytes) -> int:
    """What --bigkeys, --memkeys and --hotkeys print and ask before their
    SCAN (findBigKeys' and findHotKeys' start): DBSIZE, the banner naming
    ``what`` they look for, READONLY (a cluster replica's keys).  Returns
    the key count."""
    r = _call(s, "DBSIZE")
    if r.kind == "error":
        sys.stderr.write("Couldn't determine DBSIZE: %s\n" % txt(r.value))
        raise SystemExit(1)
    write(b"\n# Scanning the entire keyspace to find %s as well as\n"
          b"# average sizes per key type.  You can use -i 0.1 to sleep 0.1 sec\n"
          b"# per 100 SCAN commands (not usually needed).\n\n" % what)
    ro = _call(s, "READONLY")
    if ro.kind == "error" and ro.value != b"ERR This instance has cluster support disabled":
        sys.stderr.write("Error: %s\n" % txt(ro.value))
        raise SystemExit(1)
    return r.value


def run(s) -> int:
    o = s.o
    if o.latency:
        return latency_mode(s)
    if o.pipe:
        return pipe_mode(s)
    if o.bigkeys:
        big_keys(s, memkeys=False, samples=0)
    if o.memkeys:
        big_keys(s, memkeys=True, samples=o.memkeys_samples)
    if o.bigkeys or o.memkeys:
        return 0
    if o.stat:
        return stat_mode(s)
    return scan_mode(s)


def _call(s, *args):
    try:
        return s.conn.call(*args)
    except (OSError, ConnectionError, ProtocolError):
        sys.stderr.write("\nI/O error\n")
        raise SystemExit(1)


def _scan(s, cursor: int):
    o = s.o
    if o.pattern is not None:
        r = _call(s, "SCAN", str(cursor), "MATCH", o.pattern, "COUNT", str(o.count))
    else:
        r = _call(s, "SCAN", str(cursor), "COUNT", str(o.count))
    if r.kind == "error":
        sys.stderr.write("SCAN error: %s\n" % txt(r.value))
        raise SystemExit(1)
    if r.kind != "array":
        sys.stderr.write("Non ARRAY response from SCAN!\n")
        raise SystemExit(1)
    if len(r.value) != 2:
        sys.stderr.write("Invalid element count from SCAN!\n")
        raise SystemExit(1)
    return int(r.value[0].value), [k.value for k in r.value[1].value]


def scan_mode(s) -> int:
    """valkey-cli --scan: every key, quoted on a terminal."""
    interrupt = _Interrupt.install()
    cursor = 0
    while True:
        cursor, keys = _scan(s, cursor)
        out = []
        for k in keys:
            out.append((repr_bytes(k) if s.o.output == "standard" else k) + b"\n")
        write(b"".join(out))
        if s.o.interval:
            time.sleep(s.o.interval)
        if interrupt.seen or cursor == 0:
            return 0


# -- --bigkeys / --memkeys --------------------------------------------------------

class _Type:
    def __init__(self, name: bytes, sizecmd, unit: str):
        self.name, self.sizecmd, self.unit = name, sizecmd, unit
        self.biggest = 0
        self.count = 0
        self.total = 0
        self.biggest_key = None


def _known_types() -> dict:
    # valkey-cli's dict iteration order for these six names.
    known = [(b"list", "LLEN", "items"), (b"hash", "HLEN", "fields"),
             (b"stream", "XLEN", "entries"), (b"string", "STRLEN", "bytes"),
             (b"set", "SCARD", "members"), (b"zset", "ZCARD", "members")]
    return {n: _Type(n, c, u) for n, c, u in known}


def _pipeline(s, commands):
    s.conn.sock.sendall(b"".join(s.conn.encode(c) for c in commands))
    try:
        return [s.conn.read() for _ in commands]
    except (OSError, ConnectionError, ProtocolError) as e:
        sys.stderr.write("Error getting replies (%s)\n" % e)
        raise SystemExit(1)


def big_keys(s, memkeys: bool, samples: int):
    """valkey-cli's findBigKeys."""
    o = s.o
    types = _known_types()
    interrupt = _Interrupt.install()
    total_keys = _keyspace_preamble(s, b"biggest keys")
    sampled = totlen = loops = 0
    cursor = 0
    pct = 0.0
    while True:
        pct = 100 * sampled / total_keys if total_keys else (
            float("nan") if sampled == 0 else float("inf"))
        cursor, keys = _scan(s, cursor)
        loops += 1
        kinds = []
        for k, tr in zip(keys, _pipeline(s, [("TYPE", k) for k in keys])):
            if tr.kind != "status":
                sys.stderr.write("TYPE returned an error: %s\n" % txt(tr.value))
                raise SystemExit(1)
            t = types.get(tr.value)
            if t is None and tr.value != b"none":
                t = types[tr.value] = _Type(tr.value, None, "?")
            kinds.append(t)
        wanted = [(i, k) for i, (k, t) in enumerate(zip(keys, kinds))
                  if t is not None and (t.sizecmd or memkeys)]
        cmds = []
        for i, k in wanted:
            if not memkeys:
                cmds.append((kinds[i].sizecmd, k))
            elif samples == 0:
                cmds.append(("MEMORY", "USAGE", k))
            else:
                cmds.append(("MEMORY", "USAGE", k, "SAMPLES", str(samples)))
        sizes = [0] * len(keys)
        for (i, k), rr in zip(wanted, _pipeline(s, cmds)):
            if rr.kind != "int":
                sys.stderr.write("Warning:  %s on '%s' failed (may have changed type)\n"
                                 % ("MEMORY USAGE" if memkeys else kinds[i].sizecmd, txt(k)))
            else:
                sizes[i] = rr.value
        out = []
        for k, t, size in zip(keys, kinds, sizes):
            if t is None:
                continue
            t.total += size
            t.count += 1
            totlen += len(k)
            sampled += 1
            if t.biggest < size:
                t.biggest_key = repr_bytes(k)
                out.append(b"[%s%%] Biggest %-6s found so far '%s' with %d %s\n" % (
                    _pct(pct), t.name, t.biggest_key, size,
                    (b"bytes" if memkeys else t.unit.encode())))
                t.biggest = size
            if sampled % 1000000 == 0:
                out.append(b"[%s%%] Sampled %d keys so far\n" % (_pct(pct), sampled))
        write(b"".join(out))
        if o.interval and loops % 100 == 0:
            time.sleep(o.interval)
        if interrupt.seen or cursor == 0:
            break
    out = [b"\n-------- summary -------\n\n"]
    if interrupt.seen:
        out.append(b"[%s%%] " % _pct(pct))
    out.append(b"Sampled %d keys in the keyspace!\n" % sampled)
    out.append(b"Total key length in bytes is %d (avg len %.2f)\n\n"
               % (totlen, totlen / sampled if totlen else 0))
    for t in types.values():
        if t.biggest_key is not None:
            out.append(b"Biggest %6s found '%s' has %d %s\n" % (
                t.name, t.biggest_key, t.biggest, b"bytes" if memkeys else t.unit.encode()))
    out.append(b"\n")
    for t in types.values():
        out.append(b"%d %ss with %d %s (%s%% of keys, avg size %.2f)\n" % (
            t.count, t.name, t.total, b"bytes" if memkeys else t.unit.encode(),
            _pct(100 * t.count / sampled if sampled else 0), t.total / t.count if t.count else 0))
    write(b"".join(out))


def _pct(x: float) -> bytes:
    """printf's %05.2f, nan and inf included."""
    if x != x:
        return b" -nan"   # 0/0 on x86, as glibc prints it
    if x == float("inf"):
        return b"  inf"
    return b"%05.2f" % x


# -- --stat ---------------------------------------------------------------------------

def _info_field(info: bytes, field: bytes):
    p = info.find(field)
    if p < 0:
        return None
    p += len(field) + 1
    end = info.find(b"\r", p)
    if end < 0:
        end = len(info)
    comma = info.find(b",", p)
    if 0 <= comma < end:
        end = comma
    return info[p:end]


def _info_long(info: bytes, field: bytes):
    v = _info_field(info, field)
    if v is None:
        return None
    digits = b""
    for i, ch in enumerate(v):
        if chr(ch).isdigit() or (i == 0 and ch in b"+-"):
            digits += bytes((ch,))
        else:
            break
    try:
        return int(digits)
    except ValueError:
        return 0


def bytes_to_human(n: int) -> bytes:
    sign = b""
    if n < 0:
        sign, n = b"-", -n
    if n < 1024:
        return sign + b"%dB" % n
    for unit, div in ((b"K", 1024), (b"M", 1024 ** 2), (b"G", 1024 ** 3)):
        if n < div * 1024:
            return sign + b"%.2f%s" % (n / div, unit)
    return sign   # valkey-cli prints nothing past a terabyte


def stat_mode(s) -> int:
    """valkey-cli --stat: a line of server figures every interval."""
    o = s.o
    interval = o.interval or 1.0
    r = _call(s, "CONFIG", "GET", "databases")
    if r.kind == "error":
        dbnum = 16
        sys.stderr.write("CONFIG GET databases fails: %s, use default value 16 instead\n"
                         % txt(r.value))
    else:
        dbnum = int(r.value[1].value)
    requests = 0
    i = 0
    while True:
        r = _call(s, "INFO")
        if r.kind == "error":
            sys.stderr.write("ERROR: %s\n" % txt(r.value))
            raise SystemExit(1)
        info = r.value
        out = []
        if i % 20 == 0:
            out.append(b"------- data ------ --------------------- load -------------------- "
                       b"- child -\nkeys       mem      clients blocked requests            "
                       b"connections          \n")
        i += 1
        keys = 0
        for j in range(dbnum):
            k = _info_long(info, b"db%d:keys" % j)
            if k is not None:
                keys += k
        out.append(b"%-11s" % (b"%d" % keys))
        out.append(b"%-8s" % bytes_to_human(_long(_info_long(info, b"used_memory"))))
        out.append(b" %-8s" % (b"%d" % _long(_info_long(info, b"connected_clients"))))
        out.append(b"%-8s" % (b"%d" % _long(_info_long(info, b"blocked_clients"))))
        aux = _long(_info_long(info, b"total_commands_processed"))
        out.append(b"%-19s" % (b"%d (+%d)" % (aux, 0 if requests == 0 else aux - requests)))
        requests = aux
        out.append(b" %-12s" % (b"%d" % _long(_info_long(info, b"total_connections_received"))))
        child = (_long(_info_long(info, b"bgsave_in_progress"))
                 | _long(_info_long(info, b"aof_rewrite_in_progress")) << 1
                 | _long(_info_long(info, b"loading")) << 2)
        out.append({1: b"SAVE", 2: b"AOF", 3: b"SAVE+AOF", 4: b"LOAD"}.get(child, b""))
        out.append(b"\n")
        write(b"".join(out))
        time.sleep(interval)


def _long(v):
    return -(2 ** 63) if v is None else v


# -- --latency ------------------------------------------------------------------------

def _latency_line(o, mn, mx, avg, count) -> bytes:
    if o.output == "standard":
        return b"min: %d, max: %d, avg: %.2f (%d samples)" % (mn, mx, avg, count)
    if o.output == "csv":
        return b"%d,%d,%.2f,%d\n" % (mn, mx, avg, count)
    return b"%d %d %.2f %d\n" % (mn, mx, avg, count)


def latency_mode(s) -> int:
    """valkey-cli --latency: PING every 10 ms; on a terminal a line
    rewritten forever, otherwise one line after the interval (1 s)."""
    o = s.o
    history_interval = o.interval * 1000 if o.interval else 15000
    interval = o.interval * 1000 if o.interval else 1000

    def ms():
        return int(time.time() * 1000)

    history_start = ms()
    mn = mx = tot = count = 0
    while True:
        start = ms()
        _call(s, "PING")
        lat = ms() - start
        count += 1
        if count == 1:
            mn = mx = tot = lat
        else:
            mn, mx, tot = min(mn, lat), max(mx, lat), tot + lat
        avg = tot / count
        if o.output == "standard":
            write(b"\x1b[0G\x1b[2K" + _latency_line(o, mn, mx, avg, count))
        elif o.latency_history:
            write(_latency_line(o, mn, mx, avg, count))
        elif ms() - history_start > interval:
            write(_latency_line(o, mn, mx, avg, count))
            return 0
        if o.latency_history and ms() - history_start > history_interval:
            write(b" -- %.2f seconds range\n" % ((ms() - history_start) / 1000))
            history_start = ms()
            mn = mx = tot = count = 0
        time.sleep(0.01)


# -- --pipe ---------------------------------------------------------------------------

def pipe_mode(s) -> int:
    """valkey-cli --pipe: stdin's RESP to the server while reading replies;
    an ECHO of 20 random bytes marks the end."""
    o = s.o
    conn = s.conn
    sock = conn.sock
    sock.setblocking(False)
    stdin = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin
    stdin_fd = stdin.fileno()
    magic = os.urandom(20)
    obuf = b""
    eof = done = False
    errors = replies = 0
    last_read = time.time()
    while not done:
        want_write = not eof or obuf
        r, w, _ = select.select([sock], [sock] if want_write else [], [], 1.0)
        if r:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                data = None
            read_error = data == b""   # replies already read are still shown first
            if data:
                conn.buf = conn.buf[conn.pos:] + data
                conn.pos = 0
            while True:
                rep = try_read(conn)
                if rep is None:
                    break
                last_read = time.time()
                if rep.kind == "error":
                    sys.stderr.write("%s\n" % txt(rep.value))
                    errors += 1
                elif eof and rep.kind == "bulk" and rep.value == magic:
                    write(b"Last reply received from server.\n")
                    done = True
                    replies -= 1
                replies += 1
            if read_error:
                raise SystemExit(1)
        if w:
            while True:
                if obuf:
                    try:
                        n = sock.send(obuf)
                    except BlockingIOError:
                        n = 0
                    except OSError as e:
                        sys.stderr.write("Error writing to the server: %s\n"
                                         % os.strerror(e.errno or 0))
                        raise SystemExit(1)
                    obuf = obuf[n:]
                    if obuf:
                        break
                if not obuf and not eof:
                    chunk = os.read(stdin_fd, 16384)
                    if not chunk:
                        eof = True
                        obuf = (b"\r\n*2\r\n$4\r\nECHO\r\n$20\r\n" + magic + b"\r\n")
                        write(b"All data transferred. Waiting for the last reply...\n")
                    else:
                        obuf = chunk
                if not obuf and eof:
                    break
        if eof and o.pipe_timeout > 0 and time.time() - last_read > o.pipe_timeout:
            sys.stderr.write("No replies for %d seconds: exiting.\n" % o.pipe_timeout)
            errors += 1
            break
    write(b"errors: %d, replies: %d\n" % (errors, replies))
    return 1 if errors else 0


class _Incomplete(Exception):
    pass


def try_read(conn):
    """One reply from what is buffered, or None (the buffer kept) when it
    holds no whole reply."""
    start = conn.pos

    def no_fill():
        raise _Incomplete()

    conn._fill = no_fill
    try:
        return conn.read()
    except _Incomplete:
        conn.pos = start
        return None
    finally:
        del conn._fill
