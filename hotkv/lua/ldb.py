"""The Lua debugger (LDB): SCRIPT DEBUG YES|SYNC|NO and the session a
debugging client drives after its EVAL, following Valkey's eval.c (ldb*).

Owns ``Session`` (one debugging session: the client's socket, the log
entries not yet sent, the breakpoints, step / maxlen state, the source split
in lines), the debugger's command loop (``Session.repl``: step, next,
continue, list, whole, print, break, trace, eval, redis/valkey/server,
maxlen, abort, help), the hook Lua calls on every line of the user's code
(``Session.line_hook``), the human form of a command's reply
(``resp_to_human``), and ``debug_eval`` -- EVAL for a client in debug mode:

* SYNC: the session runs in the server, which serves nobody else until it
  ends (as Valkey); the dataset keeps the script's changes;
* YES: the server forks (as BGSAVE does) and the child runs the session and
  the script, then writes the EVAL's reply and exits -- so every change the
  script made is gone with it; the parent closes its side of the client at
  once.  The child dies with the server (PR_SET_PDEATHSIG: also when an embedded
  server's thread ends, so SHUTDOWN needs no kill of its own) and is reaped
  by a thread of its own.

The wire protocol is Valkey's: the debugger reads the client's socket
itself (a forgiving RESP reader: one command at a time, whatever else came
in the same read is dropped), and answers each command with an array of
status lines (``<value>``, ``<reply>``, ``<error>``, ``* Stopped at``...);
at the end it sends ``<endsession>``, then the EVAL's own reply, and closes
the connection.

Invariants: a session exists only while its EVAL runs (``Engine.ldb`` is it
exactly then); the socket's O_NONBLOCK flag is never changed (its file
description is shared with the event loop, and in YES mode with the
parent): waits are ``poll``; a log entry never holds CR or LF on the wire.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

from lupa import lua51

from ..persistence.forkchild import load_prctl, run_child
from ..protocol.errors import CommandError
from ..protocol.resp import encode_error
from .engine import engine

BREAKPOINTS_MAX = 64      # Valkey's LDB_BREAKPOINTS_MAX
MAXLEN_DEFAULT = 256      # LDB_MAX_LEN_DEFAULT
CBUF_MAX = 1 << 20        # a debugger command buffer past this ends the script
SEND_TIMEOUT = 5.0        # connSendTimeout(ldb.conn, 5000)

HELP = [
    "Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[v]alkey <cmd>       Execute a command.",
    "[m]axlen [len]       Trim logged replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "server.debug()       Produce logs in the debugger console.",
    "server.breakpoint()  Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
]
HELP = [h.encode() for h in HELP]


# ----------------------------------------------------------------------
# C's string helpers, as the debugger's parser and commands use them
# ----------------------------------------------------------------------

def _cstr(b: bytes) -> bytes:
    """What a C function reading b as a NUL-terminated string sees."""
    nul = b.find(b"\0")
    return b if nul < 0 else b[:nul]


def atoi(b: bytes) -> int:
    """C's atoi (glibc: strtol, clamped to long, then cut to int)."""
    s = _cstr(b).lstrip(b" \t\n\v\f\r")
    i, sign = 0, 1
    if s[:1] in (b"+", b"-"):
        sign = -1 if s[:1] == b"-" else 1
        i = 1
    j = i
    while j < len(s) and 48 <= s[j] <= 57:
        j += 1
    v = sign * int(s[i:j]) if j > i else 0
    v = max(-(1 << 63), min(v, (1 << 63) - 1))
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def string2l(b: bytes):
    """Valkey's string2l: a strict decimal long (no spaces, no '+', no
    leading zeros); None when b is not one."""
    if not b or len(b) > 20:
        return None
    if b == b"0":
        return 0
    neg = b[:1] == b"-"
    digits = b[1:] if neg else b
    if not digits or not digits.isdigit() or digits[:1] == b"0" or not digits.isascii():
        return None
    v = -int(digits) if neg else int(digits)
    if not -(1 << 63) <= v < (1 << 63):
        return None
    return v


_REPR = []
for _ch in range(256):
    _c = bytes([_ch])
    _REPR.append({b"\\": b"\\\\", b'"': b'\\"', b"\n": b"\\n", b"\r": b"\\r", b"\t": b"\\t",
                  b"\a": b"\\a", b"\b": b"\\b"}.get(
        _c, _c if 0x20 <= _ch <= 0x7E else b"\\x%02x" % _ch))


def catrepr(s: bytes) -> bytes:
    """Valkey's sdscatrepr: s quoted, escapes for the unprintable bytes."""
    return b'"' + b"".join([_REPR[ch] for ch in s]) + b'"'


def _cfind(buf: bytes, needle: bytes, start: int) -> int:
    """strstr / strchr from ``start``: no match past a NUL byte."""
    nul = buf.find(b"\0", start)
    return buf.find(needle, start, nul if nul >= 0 else len(buf))


def parse_command(buf: bytes):
    """Valkey's ldbReplParseCommand: (argv, protocol_error).  argv None and
    no error: read more.  As forgiving as the original (anything before the
    first '*' is skipped; argument lengths 1..1024, at most 1024 of them)."""
    if not buf:
        return None, False
    p = _cfind(buf, b"*", 0)
    if p < 0:
        return None, True
    nl = _cfind(buf, b"\r\n", p)
    if nl < 0:
        return None, False
    argc = atoi(buf[p + 1:nl])
    p = nl + 2
    if argc <= 0 or argc > 1024:
        return None, True
    argv = []
    while len(argv) < argc:
        if p >= len(buf) or buf[p] == 0:
            return None, False
        if buf[p] != 0x24:   # '$'
            return None, True
        nl = _cfind(buf, b"\r\n", p)
        if nl < 0:
            return None, False
        slen = atoi(buf[p + 1:nl])
        p = nl + 2
        if slen <= 0 or slen > 1024:
            return None, True
        if p + slen + 2 > len(buf):
            return None, False
        argv.append(buf[p:p + slen])
        p += slen
        if buf[p:p + 2] != b"\r\n":
            return None, True
        p += 2
    return argv, False


# ----------------------------------------------------------------------
# A command's reply, for people (ldbRespToHuman)
# ----------------------------------------------------------------------

def resp_to_human(data: bytes, pos: int, out: list) -> int:
    """Append the human form of the reply at data[pos:] to out; returns the
    position after it.  A type the original does not know (big number,
    verbatim, attribute) adds nothing and does not move, as there."""
    kind = data[pos:pos + 1]
    if kind not in b":$+-*~%_#," or not kind:
        return pos
    end = data.index(b"\r\n", pos)
    line = data[pos + 1:end]
    nxt = end + 2
    if kind == b":":
        out.append(line)
    elif kind == b"$":
        n = int(line)
        if n == -1:
            out.append(b"NULL")
            return nxt
        out.append(catrepr(data[nxt:nxt + n]))
        return nxt + n + 2
    elif kind == b"+" or kind == b"-":
        out.append(catrepr(data[pos:end]))
    elif kind == b"*" or kind == b"~":
        n = int(line)
        if kind == b"*" and n == -1:
            out.append(b"NULL")
            return nxt
        out.append(b"[" if kind == b"*" else b"~(")
        for j in range(n):
            nxt = resp_to_human(data, nxt, out)
            if j != n - 1:
                out.append(b",")
        out.append(b"]" if kind == b"*" else b")")
    elif kind == b"%":
        n = int(line)
        out.append(b"{")
        for j in range(n):
            nxt = resp_to_human(data, nxt, out)
            out.append(b" => ")
            nxt = resp_to_human(data, nxt, out)
            if j != n - 1:
                out.append(b",")
        out.append(b"}")
    elif kind == b"_":
        out.append(b"(null)")
    elif kind == b"#":
        out.append(b"#true" if line[:1] == b"t" else b"#false")
    else:   # ','
        out.append(b"(double) " + line)
    return nxt


# ----------------------------------------------------------------------
# The session
# ----------------------------------------------------------------------

class Session:
    """One debugging session (Valkey's ldb state while ldb.active)."""

    def __init__(self, engine, fd: int, body: bytes, forked: bool):
        self.engine = engine
        self.fd = fd
        self.forked = forked
        self.logs: list = []
        # The breakpoints as Valkey holds them: 64 ints in a byte array, so
        # removing one moves bytes exactly as its memmove does.
        self.bp = bytearray(4 * BREAKPOINTS_MAX)
        self.bpcount = 0
        self.step = True
        self.luabp = False
        self.maxlen = MAXLEN_DEFAULT
        self.hint_sent = False
        self.cbuf = b""
        self.currentline = 0
        self.start = time.monotonic()
        src = body.rstrip(b"\r\n")
        self.src = src.split(b"\n") if src else []

    # -- the log ------------------------------------------------------------
    def log(self, entry: bytes):
        self.logs.append(entry)

    def log_maxlen(self, entry: bytes):
        trimmed = False
        if self.maxlen and len(entry) > self.maxlen:
            entry = entry[:self.maxlen] + b" ..."
            trimmed = True
        self.logs.append(entry)
        if trimmed and not self.hint_sent:
            self.hint_sent = True
            self.logs.append(b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable "
                             b"trimming.")

    def send_logs(self):
        parts = [b"*%d\r\n" % len(self.logs)]
        for entry in self.logs:
            parts.append(b"+" + entry.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
        self.logs = []
        self.write(b"".join(parts))

    # -- the socket ---------------------------------------------------------
    def write(self, data: bytes):
        """Write all of data, waiting at most SEND_TIMEOUT for the socket to
        take it; errors are left for the next read to notice (as Valkey)."""
        view = memoryview(data)
        deadline = time.monotonic() + SEND_TIMEOUT
        poller = None
        while view:
            try:
                n = os.write(self.fd, view)
                view = view[n:]
                continue
            except BlockingIOError:
                pass
            except OSError:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if poller is None:
                poller = select.poll()
                poller.register(self.fd, select.POLLOUT)
            poller.poll(left * 1000)

    def read(self) -> bytes:
        """Up to 1024 bytes from the client, waiting as long as it takes
        (a sync session holds the server, as Valkey's does); b"" once the
        connection is gone."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while True:
            try:
                return os.read(self.fd, 1024)
            except BlockingIOError:
                pass
            except OSError:
                return b""
            poller.poll(1000)

    # -- breakpoints and source ---------------------------------------------
    def _bp_at(self, j: int) -> int:
        return int.from_bytes(self.bp[4 * j:4 * j + 4], "little", signed=True)

    def is_breakpoint(self, line: int) -> bool:
        return any(self._bp_at(j) == line for j in range(self.bpcount))

    def add_breakpoint(self, line: int) -> bool:
        if line <= 0 or line > len(self.src):
            return False
        if not self.is_breakpoint(line) and self.bpcount != BREAKPOINTS_MAX:
            j = self.bpcount
            self.bp[4 * j:4 * j + 4] = line.to_bytes(4, "little", signed=True)
            self.bpcount += 1
            return True
        return False

    def del_breakpoint(self, line: int) -> bool:
        for j in range(self.bpcount):
            if self._bp_at(j) == line:
                self.bpcount -= 1
                # memmove(bp + j, bp + j + 1, bpcount - j): bytes, not ints
                n = self.bpcount - j
                src = 4 * (j + 1)
                self.bp[4 * j:4 * j + n] = self.bp[src:src + n]
                return True
        return False

    def source_line(self, line: int) -> bytes:
        if 1 <= line <= len(self.src):
            return _cstr(self.src[line - 1])
        return b"<out of range source code line>"

    def log_source_line(self, line: int):
        bp = self.is_breakpoint(line)
        current = self.currentline == line
        prefix = b"->#" if current and bp else b"-> " if current else b"  #" if bp else b"   "
        self.log(prefix + (b"%d" % line).ljust(3) + b" " + self.source_line(line))

    def list(self, around: int, context: int):
        for j in range(1, len(self.src) + 1):
            if around != 0 and abs(around - j) > context:
                continue
            self.log_source_line(j)

    # -- the hook -----------------------------------------------------------
    def line_hook(self, is_count: bool, line: int):
        """Lua is about to run ``line`` of the user's code (or 100000
        instructions went by): stop there when stepping, at a breakpoint, or
        when the script is past its time limit, and read the client's
        commands until one resumes the script."""
        self.currentline = line
        bp = self.luabp or self.is_breakpoint(line)
        timeout = False
        if is_count and not self.step and not bp:
            limit = self.engine.server.config.values["lua-time-limit"] or 5000
            if (time.monotonic() - self.start) * 1000 < limit:
                return
            timeout = True
            self.step = True
        if not (self.step or bp):
            return
        if bp:
            reason = b"server.breakpoint() called" if self.luabp else b"break point"
        elif timeout:
            reason = b"timeout reached, infinite loop?"
        else:
            reason = b"step over"
        self.step = self.luabp = False
        self.log(b"* Stopped at %d, stop reason = %s" % (line, reason))
        self.log_source_line(line)
        self.send_logs()
        if not self.repl() and timeout:
            raise self._error("timeout during Lua debugging with client closing connection")
        self.start = time.monotonic()

    def _error(self, text: str):
        return lua51.LuaError(self.engine._err_table("ERR " + text))

    # -- the command loop ---------------------------------------------------
    def repl(self) -> bool:
        """Serve debugger commands until one resumes the script: True, or
        False when the client went away (the script then runs to its end)."""
        while True:
            argv, err = parse_command(self.cbuf)
            while argv is None:
                if err:
                    raise self._error("protocol error")
                data = self.read()
                if not data:
                    self.step = False
                    self.bpcount = 0
                    return False
                self.cbuf += data
                if len(self.cbuf) > CBUF_MAX:
                    self.cbuf = b""
                    raise self._error("max client buffer reached")
                argv, err = parse_command(self.cbuf)
            self.cbuf = b""   # what else came with the command is dropped
            if self.command(argv):
                return True

    def command(self, argv) -> bool:
        """Run one debugger command; True when it resumes the script."""
        name = _cstr(argv[0]).lower()
        argc = len(argv)
        internals = self.engine._internals
        if name in (b"h", b"help"):
            self.logs.extend(HELP)
        elif name in (b"s", b"step", b"n", b"next"):
            self.step = True
            return True
        elif name in (b"c", b"continue"):
            return True
        elif name in (b"t", b"trace"):
            frames = internals.ldb_trace()
            n = len(frames)
            for j in range(1, n + 1):
                fname, line = frames[j][1], frames[j][2]
                self.log(b"%s %s:" % (b"In" if j == 1 else b"From",
                                      fname if fname else b"top level"))
                self.log_source_line(int(line))
            if not n:
                self.log(b"<error> Can't retrieve Lua stack.")
        elif name in (b"m", b"maxlen"):
            if argc == 2:
                v = atoi(argv[1])
                self.hint_sent = True
                if v != 0 and v <= 60:
                    v = 60
                self.maxlen = v
            if self.maxlen:
                self.log(b"<value> replies are truncated at %d bytes." % self.maxlen)
            else:
                self.log(b"<value> replies are unlimited.")
        elif name in (b"b", b"break"):
            self.break_(argv)
        elif name in (b"e", b"eval"):
            res = internals.ldb_eval(b" ".join(argv[1:]))
            ok, text = res[0], res[1]
            if ok:
                self.log_maxlen(b"<retval> " + text)
            else:
                self.log(b"<error> " + (text if isinstance(text, bytes) else b"nil"))
        elif name in (b"a", b"abort"):
            raise self._error("script aborted for user request")
        elif argc > 1 and name in (b"r", b"redis", b"v", b"valkey", b"server"):
            # As Valkey: the script's own server.call, with the logging on.
            self.step = True
            try:
                self.engine._py_call(True, *argv[1:])
            finally:
                self.step = False
        elif name in (b"p", b"print"):
            if argc == 2:
                v = internals.ldb_print(_cstr(argv[1]))
                if v is None:
                    self.log(b"No such variable.")
                else:
                    self.log_maxlen(b"<value> " + v)
            else:
                entries = internals.ldb_locals()
                n = len(entries)
                for j in range(1, n + 1):
                    self.log_maxlen(b"<value> " + entries[j])
                if not n:
                    self.log(b"No local variables in the current context.")
        elif name in (b"l", b"list"):
            around, ctx = self.currentline, 5
            if argc > 1:
                num = atoi(argv[1])
                if num > 0:
                    around = num
            if argc > 2:
                ctx = atoi(argv[2])
            self.list(around, ctx)
        elif name in (b"w", b"whole"):
            self.list(1, 1000000)
        else:
            self.log(b"<error> Unknown Lua debugger command or wrong number of arguments.")
        self.send_logs()
        return False

    def break_(self, argv):
        if len(argv) == 1:
            if not self.bpcount:
                self.log(b"No breakpoints set. Use 'b <line>' to add one.")
                return
            self.log(b"%d breakpoints set:" % self.bpcount)
            for j in range(self.bpcount):
                self.log_source_line(self._bp_at(j))
            return
        for arg in argv[1:]:
            line = string2l(arg)
            if line is None:
                self.log(b"Invalid argument:'%s'" % _cstr(arg))
            elif line == 0:
                self.bpcount = 0
                self.log(b"All breakpoints removed.")
            elif line > 0:
                if self.bpcount == BREAKPOINTS_MAX:
                    self.log(b"Too many breakpoints set.")
                elif self.add_breakpoint(line):
                    self.list(line, 1)
                else:
                    self.log(b"Wrong line number.")
            elif self.del_breakpoint(-line):
                self.log(b"Breakpoint removed.")
            else:
                self.log(b"No breakpoint in the specified line.")

    # -- what the engine logs while stepping ---------------------------------
    def log_command(self, argv):
        """A script's call, logged while stepping (Valkey's ldbIsEnabled)."""
        if not self.step:
            return
        parts = [b"<command>"]
        for j, a in enumerate(argv):
            if j == 10:
                parts.append(b" ... (%d more)" % (len(argv) - j - 1))
                break
            parts.append(b" " + a)
        self.log(b"".join(parts))

    def log_reply(self, data: bytes):
        """A script's call's reply, logged while stepping."""
        if not self.step:
            return
        out = [b"<reply> "]
        try:
            resp_to_human(data, 0, out)
        except (ValueError, IndexError):
            pass
        self.log_maxlen(b"".join(out))

    def end(self):
        self.log(b"<endsession>")
        self.send_logs()


# ----------------------------------------------------------------------
# SCRIPT DEBUG and EVAL in debug mode
# ----------------------------------------------------------------------

def set_mode(c, mode: bytes):
    """SCRIPT DEBUG's effect on client c: None (NO), b"yes" or b"sync"."""
    eng = engine(c.server)
    modes = eng.ldb_clients
    if mode is None:
        modes.pop(c.id, None)
        return
    if len(modes) > 1000:    # clients gone without SCRIPT DEBUG NO
        live = c.server.clients
        for cid in [cid for cid in modes if cid not in live]:
            del modes[cid]
    modes[c.id] = mode


def has_pending_replies(c) -> bool:
    """Valkey's clientHasPendingReplies for SCRIPT DEBUG: replies queued and
    not yet written (a pipeline), an EXEC's reply under way included."""
    if c.out or c.in_exec:
        return True
    return c.unsent() > 0


def _load_lua_half(eng):
    """Compile the debugger's Lua half (ldb.lua) in the engine's Lua state,
    once per state (SCRIPT FLUSH makes a new one)."""
    if not eng.ldb_loaded:
        from importlib import resources
        eng._internals.ldb_load(resources.files(__package__).joinpath("ldb.lua").read_bytes())
        eng.ldb_loaded = True


def debug_eval(c, argv, body_fn):
    """EVAL (or EVAL_RO) for client c in debug mode; ``body_fn()`` is the
    plain EVAL (it raises CommandError or queues the reply and returns the
    handler's result)."""
    server = c.server
    eng = engine(server)
    mode = eng.ldb_clients.get(c.id)
    if mode == b"yes":
        _load_lua_half(eng)     # in the parent: a state this one forks keeps it
        return _forked(c, argv, eng, body_fn)
    log_notice(server, "synchronous debugging eval session started")
    _load_lua_half(eng)
    session = Session(eng, c.fd, argv[1], False)
    eng.ldb = session
    try:
        return body_fn()
    finally:
        eng.ldb = None
        eng.ldb_clients.pop(c.id, None)
        session.end()
        log_notice(server, "synchronous debugging eval session ended")
        # The connection closes once the EVAL's reply is written: the end of
        # the session for the client.
        c.closing = True
        c.schedule_flush()


def log_notice(server, text: str):
    import logging
    logging.getLogger("hotkv").info("%s %s", "Valkey", text)


def _forked(c, argv, eng, body_fn):
    server = c.server
    fd = c.fd
    parent = os.getpid()
    load_prctl()      # before fork: the child imports nothing
    try:
        pid = os.fork()
    except OSError as e:
        eng.ldb_clients.pop(c.id, None)
        raise CommandError("ERR Fork() failed: can't run EVAL in debugging mode: %s"
                           % e.strerror)
    if pid == 0:   # pragma: no cover - the child
        run_child(parent, lambda: _child(c, argv, eng, body_fn, fd), "Lua debugging session",
                  keep=(fd,))
    server.total_forks += 1
    eng.ldb_clients.pop(c.id, None)
    eng.ldb_children.add(pid)
    threading.Thread(target=_reap, args=(eng, pid), name="hotkv-ldb-reaper",
                     daemon=True).start()
    # The parent's side of the client is closed at once, nothing sent.
    c.out.clear()
    c.closing = True
    c.kill()
    return None


def _reap(eng, pid: int):
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
    eng.ldb_children.discard(pid)


def _child(c, argv, eng, body_fn, fd: int):  # pragma: no cover - runs in the child
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    session = Session(eng, fd, argv[1], True)
    eng.ldb = session
    try:
        body_fn()
    except CommandError as e:
        c.out.append(encode_error(e.message))
    except Exception as e:   # a bug costs the client an error reply
        c.out.append(encode_error("ERR internal error in the debugger: %s" % type(e).__name__))
    finally:
        eng.ldb = None
    session.end()
    session.write(b"".join(c.out))

