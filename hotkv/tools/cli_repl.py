"""``hotkv cli``'s interactive prompt, as valkey-cli's repl(): a line editor
that draws exactly what valkey-cli's linenoise draws (multi-line mode, gray
hints from COMMAND DOCS, history, TAB completion), and subscribed mode
(messages printed as they come until a key or Ctrl-C).

Owns: ``LineEditor`` (linenoise: raw mode, refreshMultiLine, the keys it
handles, history in memory and in ~/.hotkv_cli_history), ``repl`` (the
prompt loop: ``N CMD`` repeats, quit/exit, ``:set hints``, ``connect``,
``clear``, the elapsed time of a slow command), the wait for pushes in
subscribed mode (cliWaitForMessagesOrStdin), the Lua debugger's session
(``ldb_session``: --eval --ldb, ``lua debugger>``, ``restart``) and
--askpass's masked line (``ask_password``).

Invariants: stdin not a terminal -> lines are read without a prompt or
echo (linenoiseNoTTY) and no help is loaded until ``help`` asks; Ctrl-C at
the prompt or Ctrl-D on an empty line ends the session with exit 0;
Ctrl-C in MONITOR or subscribed mode drops the connection and reconnects.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import socket
import struct
import sys
import termios
import time

from ..protocol.resp import split_inline_args
from . import cli_help
from .cli_modes import try_read
from .cli_more import eval_words
from .cli_resp import ProtocolError, _atoi, txt, write

HISTORY_MAX = 100
_UNSUPPORTED = ("dumb", "cons25", "emacs")


class _Aborted(Exception):
    """Ctrl-C while MONITOR or a subscription streams."""


class LineEditor:
    """valkey-cli's linenoise, multi-line mode."""

    mask = False   # linenoise's mask mode: '*' for each character (--askpass)

    def __init__(self, hints=None, complete=None):
        self.history: list[tuple[bytes, bool]] = []
        self.hints = hints            # buf -> bytes or None
        self.complete = complete      # buf -> [bytes]

    # -- history ----------------------------------------------------------------
    def history_add(self, line: bytes, sensitive: bool = False):
        if self.history and self.history[-1][0] == line:
            return
        if len(self.history) == HISTORY_MAX:
            del self.history[0]
        self.history.append((line, sensitive))

    def history_load(self, path):
        try:
            with open(path, "rb") as f:
                for line in f:
                    line = line.split(b"\r", 1)[0].split(b"\n", 1)[0]
                    self.history_add(line)
        except OSError:
            pass

    def history_save(self, path):
        try:
            old = os.umask(0o077)
            try:
                with open(path, "wb") as f:
                    os.fchmod(f.fileno(), 0o600)
                    f.write(b"".join(h + b"\n" for h, s in self.history if not s))
            finally:
                os.umask(old)
        except OSError:
            pass

    # -- reading a line ------------------------------------------------------------
    def readline(self, prompt: bytes):
        """linenoise(): the line, or None at EOF / Ctrl-C / Ctrl-D."""
        if not os.isatty(0):
            return self._no_tty()
        if os.environ.get("TERM", "").lower() in _UNSUPPORTED:
            write(prompt)
            line = sys.stdin.buffer.readline()
            if not line:
                return None
            return line.rstrip(b"\r\n")
        fd = 0
        old = termios.tcgetattr(fd)
        raw = termios.tcgetattr(fd)
        raw[0] &= ~(termios.BRKINT | termios.ICRNL | termios.INPCK | termios.ISTRIP
                    | termios.IXON)
        raw[1] &= ~termios.OPOST
        raw[2] |= termios.CS8
        raw[3] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN | termios.ISIG)
        raw[6][termios.VMIN] = 1
        raw[6][termios.VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, raw)
        try:
            n = self._edit(prompt)
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, old)
        write(b"\n")
        return n

    def _no_tty(self):
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        return line[:-1] if line.endswith(b"\n") else line

    def _columns(self) -> int:
        try:
            cols = struct.unpack("HHHH", fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8))[1]
        except OSError:
            cols = 0
        return cols or 80

    def _out(self, data: bytes):
        os.write(1, data)

    def _refresh(self, hints=True):
        """refreshMultiLine (refreshSingleLine for --askpass's masked line,
        read before the prompt is set to multi-line)."""
        if self.mask:
            self._out(b"\r" + self.prompt + b"*" * len(self.buf) + b"\x1b[0K\r\x1b[%dC"
                      % (len(self.prompt) + self.pos))
            return
        p, buf, pos, cols = self.prompt, self.buf, self.pos, self.cols
        plen = len(p)
        rows = (plen + len(buf) + cols - 1) // cols
        rpos = (plen + self.oldpos + cols) // cols
        old_rows = self.maxrows
        if rows > self.maxrows:
            self.maxrows = rows
        ab = b""
        if old_rows - rpos > 0:
            ab += b"\x1b[%dB" % (old_rows - rpos)
        for _ in range(old_rows - 1):
            ab += b"\r\x1b[0K\x1b[1A"
        ab += b"\r\x1b[0K"
        ab += p + (b"*" * len(buf) if self.mask else buf)
        if hints and self.hints is not None and plen + len(buf) < cols:
            hint = self.hints(bytes(buf))
            if hint is not None:
                hint = hint[:cols - (plen + len(buf))]
                ab += b"\x1b[0;90;49m" + hint + b"\x1b[0m"
        if pos and pos == len(buf) and (pos + plen) % cols == 0:
            ab += b"\n\r"
            rows += 1
            if rows > self.maxrows:
                self.maxrows = rows
        rpos2 = (plen + pos + cols) // cols
        if rows - rpos2 > 0:
            ab += b"\x1b[%dA" % (rows - rpos2)
        col = (plen + pos) % cols
        ab += b"\r\x1b[%dC" % col if col else b"\r"
        self.oldpos = pos
        self._out(ab)

    def _read1(self) -> bytes:
        try:
            return os.read(0, 1)
        except OSError:
            return b""

    def _edit(self, prompt: bytes):
        self.prompt = prompt
        self.buf = bytearray()
        self.pos = self.oldpos = 0
        self.cols = self._columns()
        self.maxrows = 0
        self.hidx = 0
        self.history_add(b"")
        self._out(prompt)
        while True:
            c = self._read1()
            if not c:
                return bytes(self.buf)
            if c == b"\t" and self.complete is not None:
                c = self._complete()
                if c is None:
                    return bytes(self.buf)
                if c == b"\0":
                    continue
            o = c[0]
            if o == 10:
                continue
            if o == 13:
                self.history.pop()
                self._end()
                if self.hints is not None:
                    self._refresh(hints=False)
                return bytes(self.buf)
            if o == 3:
                return None
            if o == 4 and not self.buf:
                self.history.pop()
                return None
            self._key(o, c)

    def _key(self, o: int, c: bytes):
        """One key that edits the line (linenoiseEdit's switch)."""
        if o in (127, 8):
            if self.pos > 0 and self.buf:
                del self.buf[self.pos - 1]
                self.pos -= 1
                self._refresh()
        elif o == 4:
            self._delete()
        elif o == 20:
            if 0 < self.pos < len(self.buf):
                b = self.buf
                b[self.pos - 1], b[self.pos] = b[self.pos], b[self.pos - 1]
                if self.pos != len(b) - 1:
                    self.pos += 1
                self._refresh()
        elif o == 2:
            self._left()
        elif o == 6:
            self._right()
        elif o == 16:
            self._hist(1)
        elif o == 14:
            self._hist(-1)
        elif o == 27:
            self._escape()
        elif o == 21:
            self.buf = bytearray()
            self.pos = 0
            self._refresh()
        elif o == 11:
            del self.buf[self.pos:]
            self._refresh()
        elif o == 1:
            if self.pos:
                self.pos = 0
                self._refresh()
        elif o == 5:
            self._end()
        elif o == 12:
            self._out(b"\x1b[H\x1b[2J")
            self._refresh()
        elif o == 23:
            old = self.pos
            while self.pos > 0 and self.buf[self.pos - 1] == 32:
                self.pos -= 1
            while self.pos > 0 and self.buf[self.pos - 1] != 32:
                self.pos -= 1
            del self.buf[self.pos:old]
            self._refresh()
        else:
            if len(self.buf) < 4095:
                self.buf[self.pos:self.pos] = c
                self.pos += 1
                if self.mask and self.pos == len(self.buf) \
                        and len(self.prompt) + len(self.buf) < self.cols:
                    self._out(b"*")   # linenoise's trivial case: no redraw
                else:
                    self._refresh()

    def _left(self):
        if self.pos > 0:
            self.pos -= 1
            self._refresh()

    def _right(self):
        if self.pos != len(self.buf):
            self.pos += 1
            self._refresh()

    def _end(self):
        if self.pos != len(self.buf):
            self.pos = len(self.buf)
            self._refresh()

    def _delete(self):
        if self.buf and self.pos < len(self.buf):
            del self.buf[self.pos]
            self._refresh()

    def _hist(self, step):
        h = self.history
        if len(h) > 1:
            h[len(h) - 1 - self.hidx] = (bytes(self.buf), h[len(h) - 1 - self.hidx][1])
            self.hidx += step
            if self.hidx < 0:
                self.hidx = 0
                return
            if self.hidx >= len(h):
                self.hidx = len(h) - 1
                return
            self.buf = bytearray(h[len(h) - 1 - self.hidx][0])
            self.pos = len(self.buf)
            self._refresh()

    def _escape(self):
        s0, s1 = self._read1(), self._read1()
        if s0 == b"[":
            if s1.isdigit():
                s2 = self._read1()
                if s2 == b"~" and s1 == b"3":
                    self._delete()
            else:
                {b"A": lambda: self._hist(1), b"B": lambda: self._hist(-1),
                 b"C": self._right, b"D": self._left,
                 b"H": lambda: self._home(), b"F": self._end}.get(s1, lambda: None)()
        elif s0 == b"O":
            {b"H": lambda: self._home(), b"F": self._end}.get(s1, lambda: None)()

    def _home(self):
        if self.pos:
            self.pos = 0
            self._refresh()

    def _complete(self):
        """completeLine: TAB cycles through the completions."""
        cands = self.complete(bytes(self.buf))
        if not cands:
            self._out(b"\x07")
            return b"\0"
        i = 0
        while True:
            if i < len(cands):
                saved = self.buf, self.pos
                self.buf = bytearray(cands[i])
                self.pos = len(self.buf)
                self._refresh()
                self.buf, self.pos = saved
            else:
                self._refresh()
            c = self._read1()
            if not c:
                return None
            if c == b"\t":
                i = (i + 1) % (len(cands) + 1)
                if i == len(cands):
                    self._out(b"\x07")
            elif c == b"\x1b":
                if i < len(cands):
                    self._refresh()
                return c
            else:
                if i < len(cands):
                    self.buf = bytearray(cands[i])
                    self.pos = len(self.buf)
                return c


# -- the prompt loop ---------------------------------------------------------------------

_SENSITIVE_CONFIG = {b"masterauth", b"masteruser", b"primaryuser", b"primaryauth",
                     b"tls-key-file-pass", b"tls-client-key-file-pass", b"requirepass"}


def is_sensitive(words) -> bool:
    """Commands kept out of the history file (isSensitiveCommand)."""
    w = [x.lower() for x in words]
    n = len(w)
    if w[0] == b"auth":
        return True
    if n > 1 and w[0] == b"acl" and w[1] in (b"deluser", b"setuser", b"getuser"):
        return True
    if n > 2 and w[0] == b"config" and w[1] == b"set":
        return any(w[j] in _SENSITIVE_CONFIG for j in range(2, n, 2))
    if n > 4 and w[0] == b"hello":
        j = 2
        while j < n:
            more = n - 1 - j
            if w[j] == b"auth" and more >= 2:
                return True
            if w[j] == b"setname" and more:
                j += 2
                continue
            return False
    if n > 7 and w[0] == b"migrate":
        for j in range(6, n):
            more = n - 1 - j
            if w[j] == b"auth" and more:
                return True
            if w[j] == b"auth2" and more >= 2:
                return True
            if w[j] == b"keys" and more:
                return False
    return False


def _prompt(s) -> bytes:
    if s.conn is None:
        return b"not connected> "
    if s.eval_ldb:
        return b"lua debugger> "
    o = s.o
    host = o.host.encode()
    if o.hostsocket is not None:
        p = b"valkey " + o.hostsocket.encode("utf-8", "surrogateescape")
    else:
        p = (b"[%s]:%d" if b":" in host else b"%s:%d") % (host, o.port)
    if s.dbnum:
        p += b"[%d]" % s.dbnum
    if s.in_multi:
        p += b"(TX)"
    if s.pubsub_mode:
        p += b"(subscribed mode)"
    return p + b"> "


def _history_path():
    env = os.environ.get("HOTKV_CLI_HISTFILE")
    if env is not None:
        return None if env == "/dev/null" else env
    home = os.environ.get("HOME")
    return os.path.join(home, ".hotkv_cli_history") if home else None


def _set_pref(s, words, interactive=True):
    lead = b"" if interactive else b".hotkvclirc: "
    if words[0].lower() == b":set" and len(words) >= 2:
        if words[1].lower() == b"hints":
            s.hints_on = True
        elif words[1].lower() == b"nohints":
            s.hints_on = False
        else:
            write(lead + b"unknown valkey-cli preference '%s'\n" % words[1])
    else:
        write(lead + b"unknown valkey-cli internal command '%s'\n" % words[0])


def repl(s) -> int:
    """valkey-cli's repl()."""
    s.interactive = True
    s.hints_on = True
    tty_in = os.isatty(0)
    # The Lua debugger has its own help: COMMAND DOCS waits for its end.
    s.help_entries = cli_help.init_help(s) if tty_in and not s.eval_ldb else None

    def hints(buf):
        if not s.hints_on or not s.help_entries:
            return None
        return cli_help.hint_for_input(s.help_entries, buf)

    editor = LineEditor(hints=hints,
                        complete=lambda buf: cli_help.completions(s.help_entries or [], buf))
    histfile = _history_path() if tty_in else None
    if tty_in:
        if histfile:
            editor.history_load(histfile)
        rc = os.path.join(os.environ.get("HOME", ""), ".hotkvclirc")
        try:
            with open(rc, "rb") as f:
                for line in f:
                    words = split_inline_args(line.rstrip(b"\r\n"))
                    if words and words[0][:1] == b":":
                        _set_pref(s, words, interactive=False)
        except OSError:
            pass

    def on_sigint(signum, frame):
        if s.monitor_mode or s.pubsub_mode:
            if s.conn is not None:
                s.conn.close()
            s.aborted = True
            raise _Aborted()
        raise SystemExit(1)

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    while True:
        line = editor.readline(_prompt(s))
        if line is None:
            if s.pubsub_mode:
                s.pubsub_mode = False
                if s.connect(force=True):
                    continue
            return 0
        if line and _run_line(s, editor, line, tty_in, histfile) == "quit":
            return 0
        if s.pubsub_mode:
            wait_for_messages(s)


def _run_line(s, editor, line: bytes, tty_in: bool, histfile) -> str | None:
    """One typed line: a command, a preference, quit ("quit" is returned)."""
    if s.eval_ldb and (line.startswith(b"eval ") or line.startswith(b"e ")):
        # The debugger's eval takes the rest of the line as it is.
        cut = 2 if line[1:2] == b" " else 5
        words = [line[:cut - 1], line[cut:]]
    else:
        words = split_inline_args(line)
    if words is None:
        write(b"Invalid argument(s)\n")
        if tty_in:
            editor.history_add(line)
        if histfile:
            editor.history_save(histfile)
        return None
    if not words:
        return None
    repeat, skip = 1, 0
    if len(words) > 1 and _is_number(words[0]):
        repeat = _strtol(words[0])
        if repeat is None or repeat <= 0:
            write(b"Invalid valkey-cli repeat command option value.\n")
            return None
        skip = 1
    sensitive = is_sensitive(words[skip:])
    if tty_in:
        editor.history_add(line, sensitive)
    if not sensitive and histfile:
        editor.history_save(histfile)
    name = words[0].lower()
    if name in (b"quit", b"exit"):
        return "quit"
    if words[0][:1] == b":":
        _set_pref(s, words)
        return None
    if name == b"restart":
        if s.o.eval is not None:
            s.eval_ldb = True
            s.o.output = "raw"
            raise LdbRestart()
        write(b"Use 'restart' only in Lua debugging mode.\n")
    elif len(words) == 3 and name == b"connect":
        s.o.host = txt(words[1])
        s.o.port = _atoi(txt(words[2]))
        s.connect(force=True)
    elif len(words) == 1 and name == b"clear":
        write(b"\x1b[H\x1b[2J")
    else:
        start = time.monotonic()
        _issue(s, words[skip:], repeat)
        if s.eval_ldb_end:
            # The debugging session ended: the EVAL's reply, in the human form.
            s.eval_ldb_end = False
            try:
                s.read_reply(False)
            except (OSError, ConnectionError, ProtocolError) as e:
                sys.stderr.write("Error: %s\n" % e)
                raise SystemExit(1)
            write(b"\n(Lua debugging session ended%s)\n\n"
                  % (b"" if s.o.eval_ldb_sync else b" -- dataset changes rolled back"))
            # COMMAND DOCS, terminal or not.  When the server has closed the
            # debugging connection valkey-cli is left without a help table:
            # no hints, and ``help`` finds nothing until a command has
            # connected again (then ``help`` loads the table, hints too).
            s.help_entries = cli_help.init_help(s)
            if s.conn is not None and _closed_by_peer(s.conn):
                s.help_entries = []
                s.legacy_help = s.conn_lost = True
        elapsed = time.monotonic() - start
        if elapsed >= 0.5 and s.o.output == "standard":
            write(b"(%.2fs)\n" % elapsed)
    return None


def ask_password(prompt: bytes):
    """--askpass: a line read with every character shown as '*' (no prompt
    and no masking when stdin is not a terminal); None at EOF."""
    editor = LineEditor(hints=None, complete=None)
    editor.mask = True
    return editor.readline(prompt)


def _closed_by_peer(conn) -> bool:
    try:
        r, _, _ = select.select([conn.sock], [], [], 0)
        return bool(r) and conn.sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class LdbRestart(Exception):
    """``restart`` in a --eval --ldb session: run the script again."""


def ldb_session(s, args: list[bytes]) -> int:
    """valkey-cli --ldb / --ldb-sync-mode --eval FILE: SCRIPT DEBUG, the
    EVAL, then the debugger's prompt until the session ends; ``restart``
    reconnects and starts again with the file as it is then."""
    o = s.o
    while True:
        write(b"Lua debugging session started, please use:\n"
              b"quit    -- End the session.\n"
              b"restart -- Restart the script in debug mode again.\n"
              b"help    -- Show Lua script debugging commands.\n\n")
        words = eval_words(o.eval, args)
        try:
            s.conn.call("SCRIPT", "DEBUG", "sync" if o.eval_ldb_sync else "yes")
        except (OSError, ConnectionError, ProtocolError):
            pass
        ok = s.issue(words, o.repeat)
        if not s.eval_ldb:
            # Ended at once: the script did not compile; its error follows.
            write(b"Eval debugging session can't start:\n")
            try:
                s.read_reply(False)
            except (OSError, ConnectionError, ProtocolError, AttributeError):
                pass
            return 0 if ok else 1
        try:
            return repl(s)
        except LdbRestart:
            pass
        s.connect(force=True)
        write(b"\n")


def _is_number(w: bytes) -> bool:
    try:
        int(w, 10)
        return not w[:1].isspace() and not w[-1:].isspace() and b"_" not in w
    except ValueError:
        return False


def _strtol(w: bytes):
    v = int(w, 10)
    return None if not -2 ** 63 <= v < 2 ** 63 else v


def _issue(s, words, repeat):
    try:
        ok = s.issue(words, repeat)
    except _Aborted:
        s.aborted = False
        s.monitor_mode = s.pubsub_mode = False
        s.connect(force=True)
        return
    if not ok and s.conn is None and words[0].lower() not in (b"help", b"?"):
        sys.stderr.write("Error: Server closed the connection\n")


def wait_for_messages(s):
    """cliWaitForMessagesOrStdin: print pushes until a key or Ctrl-C."""
    show_info = s.o.output != "raw" and (os.isatty(1) or os.environ.get("FAKETTY"))
    color = show_info and "xterm" in os.environ.get("TERM", "")
    old = None
    if os.isatty(0):
        old = termios.tcgetattr(0)
        mode = termios.tcgetattr(0)
        mode[3] &= ~(termios.ECHO | termios.ICANON)
        termios.tcsetattr(0, termios.TCSANOW, mode)
    try:
        while s.pubsub_mode:
            try:
                while s.conn.buffered() and _whole_reply_buffered(s.conn):
                    s.read_reply(False)
                if show_info:
                    write((b"\x1b[1;90m" if color else b"")
                          + b"Reading messages... (press Ctrl-C to quit or any key to type "
                            b"command)\r" + (b"\x1b[0m" if color else b""))
                r, _, _ = select.select([s.conn.sock, 0], [], [], 5.0)
                if show_info:
                    write(b"\x1b[K")
                if s.conn.sock in r:
                    s.read_reply(False)
                elif 0 in r:
                    break
            except _Aborted:
                if show_info:
                    write(b"\x1b[K")
                s.aborted = False
                s.pubsub_mode = False
                write(b"Closing current connection. Ready to reconnect to Valkey server... \n")
                if not s.connect(force=True):
                    raise SystemExit(1)
                break
            except (OSError, ConnectionError, ProtocolError) as e:
                sys.stderr.write("Error: %s\n" % e)
                raise SystemExit(1)
    finally:
        if old is not None:
            termios.tcsetattr(0, termios.TCSANOW, old)


def _whole_reply_buffered(conn) -> bool:
    start = conn.pos
    r = try_read(conn)
    conn.pos = start
    return r is not None
