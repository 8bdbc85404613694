"""``hotkv cli``'s ``help`` and its typing hints, from the server's COMMAND
DOCS, as valkey-cli builds them.

Owns: the help table (one entry per command and subcommand, sorted by full
name: cliInitHelp), a command's syntax line built from its COMMAND DOCS
arguments (makeHint / addHintForArguments), the hint shown while a line is
typed (the arguments still to type: matchArgs), ``help CMD`` /
``help @group`` output (cliOutputHelp) and TAB completions.

Invariants: the syntax text is valkey-cli's for the same COMMAND DOCS reply
(tests compare ``help`` output and typed-line transcripts with
valkey-cli's); a command whose docs have no arguments hints nothing.
"""

from __future__ import annotations

import re

from ..protocol.resp import split_inline_args
from .cli_resp import VERSION, ProtocolError, write

OPTIONAL, MULTIPLE, MULTIPLE_TOKEN = 1, 2, 4


class Arg:
    __slots__ = ("name", "display_text", "token", "type", "flags", "subargs",
                 "matched", "matched_token", "matched_name", "matched_all")

    def __init__(self):
        self.name = b""
        self.display_text = None
        self.token = None
        self.type = "string"
        self.flags = 0
        self.subargs = []
        self.clear()

    def clear(self):
        self.matched = 0
        self.matched_token = self.matched_name = self.matched_all = False


class Entry:
    def __init__(self, argv, group=False):
        self.argv = argv                 # upper-case words
        self.full = b" ".join(argv)
        self.is_group = group
        self.summary = b""
        self.since = None
        self.group = b""
        self.args = None                 # None: no "arguments" in the docs
        self.params = None


def _pairs(r):
    v = r.value if r.kind in ("map", "array") else []
    return [(v[i].value, v[i + 1]) for i in range(0, len(v) - 1, 2)]


def _arg(r) -> Arg:
    a = Arg()
    for k, v in _pairs(r):
        if k == b"name":
            a.name = v.value
        elif k == b"display_text":
            a.display_text = v.value
        elif k == b"token":
            a.token = v.value
        elif k == b"type":
            a.type = v.value.decode()
        elif k == b"arguments":
            a.subargs = [_arg(x) for x in v.value]
        elif k == b"flags":
            for f in v.value:
                a.flags |= {b"optional": OPTIONAL, b"multiple": MULTIPLE,
                            b"multiple_token": MULTIPLE_TOKEN}.get(f.value, 0)
    return a


def _entry(name: bytes, sub, specs, groups) -> list:
    argv = [name.upper()]
    if sub is not None:
        argv.append(sub.split(b"|", 1)[-1].upper())
    e = Entry(argv)
    out = [e]
    for k, v in _pairs(specs):
        if k == b"summary":
            e.summary = v.value
        elif k == b"since":
            e.since = v.value
        elif k == b"group":
            e.group = v.value
            groups.add(v.value)
        elif k == b"arguments":
            e.args = [_arg(x) for x in v.value]
            e.params = make_hint(None, e)
        elif k == b"subcommands":
            for sname, sspecs in _pairs(v):
                out += _entry(name, sname, sspecs, groups)
    return out


def init_help(s) -> list:
    """cliInitHelp: the help table from COMMAND DOCS ([] when unavailable)."""
    if s.conn is None and not s.connect(force=True, quiet=True):
        return []
    try:
        r = s.conn.call("COMMAND", "DOCS")
    except (OSError, ConnectionError, ProtocolError):
        return []
    if r.kind not in ("map", "array"):
        return []
    groups = set()
    entries = []
    for name, specs in _pairs(r):
        entries += _entry(name, None, specs, groups)
    entries += [Entry([b"@" + g], group=True) for g in groups]
    entries.sort(key=lambda e: e.full)
    return entries


# -- the syntax / hint string -------------------------------------------------------

def _or_empty(b):
    return b'""' if not b else b


def _hint_args(hint: bytes, args, sep: bytes) -> bytes:
    """addHintForArguments: ``hint`` with the hints of ``args`` appended."""
    length = len(hint)

    def add_sep(h, is_last):
        nonlocal length
        if len(h) > length and not is_last:
            h += sep
            length = len(h)
        return h

    n = len(args)
    i = 0
    while i < n:
        if not args[i].flags & OPTIONAL:
            hint = add_sep(_hint_arg(hint, args[i]), i == n - 1)
            i += 1
            continue
        j = i
        incomplete = -1
        while j < n and args[j].flags & OPTIONAL:
            if args[j].matched and not args[j].matched_all:
                hint = add_sep(_hint_arg(hint, args[j]), i == n - 1)
                incomplete = j
            j += 1
        if j == n or not args[j].matched:
            while i < j:
                if incomplete != i:
                    hint = add_sep(_hint_arg(hint, args[i]), i == n - 1)
                i += 1
        i = j
    return hint


def _hint_repeated(hint: bytes, a: Arg) -> bytes:
    """addHintForRepeatedArgument: the `` [... ...]`` of a multiple arg."""
    if not a.flags & MULTIPLE:
        return hint
    _clear([a])
    if hint:
        hint += b" "
    hint += b"["
    if a.flags & MULTIPLE_TOKEN:
        hint += _or_empty(a.token)
        if a.type != "pure-token":
            hint += b" "
    if a.type == "oneof":
        hint = _hint_args(hint, a.subargs, b"|")
    elif a.type == "block":
        hint = _hint_args(hint, a.subargs, b" ")
    elif a.type != "pure-token":
        hint += _or_empty(a.display_text or a.name)
    return hint + b" ...]"


def _hint_arg(hint: bytes, a: Arg) -> bytes:
    """addHintForArgument: one argument's hint unless already typed."""
    if a.matched_all:
        return hint
    bracket = a.flags & OPTIONAL and not a.matched
    if bracket:
        hint += b"["
    if a.token is not None and not a.matched_token:
        hint += _or_empty(a.token)
        if a.type != "pure-token":
            hint += b" "
    if a.type == "oneof":
        if not a.matched:
            hint = _hint_args(hint, a.subargs, b"|")
        else:
            for sub in a.subargs:
                if sub.matched:
                    hint = _hint_arg(hint, sub)
    elif a.type == "block":
        hint = _hint_args(hint, a.subargs, b" ")
    elif a.type != "pure-token":
        if not a.matched_name:
            hint += _or_empty(a.display_text or a.name)
    hint = _hint_repeated(hint, a)
    if bracket:
        hint += b"]"
    return hint


def _clear(args):
    for a in args:
        a.clear()
        if a.subargs:
            _clear(a.subargs)


_INT = re.compile(rb"\s*[+-]?\d")
_FLOAT = re.compile(rb"\s*[+-]?(\d|\.\d|inf|nan|0x)", re.I)


def _match_notoken(words, a: Arg) -> int:
    if a.type == "block":
        a.matched += _match_args(words, a.subargs)
        a.matched_all = all(s.matched_all for s in a.subargs)
    elif a.type == "oneof":
        for sub in a.subargs:
            if _match_arg(words, sub):
                a.matched += sub.matched
                a.matched_all = sub.matched_all
                break
    elif a.type in ("integer", "unix-time", "double"):
        rx = _FLOAT if a.type == "double" else _INT
        if rx.match(words[0]):
            a.matched += 1
            a.matched_name = a.matched_all = True
        else:
            a.matched = 0
            a.matched_name = False
    else:
        a.matched += 1
        a.matched_name = a.matched_all = True
    return a.matched


def _match_once(words, a: Arg) -> int:
    if a.token is not None:
        if a.token.lower() != words[0].lower():
            return 0
        a.matched_token = True
        a.matched = 1
        if a.type == "pure-token":
            a.matched_all = True
            return 1
        if len(words) == 1:
            return 1
        words = words[1:]
    if not _match_notoken(words, a):
        return 0
    return a.matched


def _match_arg(words, a: Arg) -> int:
    once = _match_once(words, a)
    if not a.flags & MULTIPLE:
        return once
    total = once
    while a.matched_all and total < len(words):
        _clear([a])
        if a.token is not None and not a.flags & MULTIPLE_TOKEN:
            once = _match_notoken(words[total:], a)
            if a.matched:
                a.matched_token = True
        else:
            once = _match_once(words[total:], a)
        total += once
    a.matched_all = False
    return total


def _match_optional(words, args) -> int:
    nextword = 0
    last = -1
    while nextword != len(words):
        got, which = 0, -1
        for k, a in enumerate(args):
            if a.matched:
                continue
            got = _match_arg(words[nextword:], a)
            if got:
                which = k
                break
        if not got:
            break
        if last != -1:
            args[last].matched_all = True
        last = which
        nextword += got
    return nextword


def _match_args(words, args) -> int:
    nextword = nextarg = 0
    while nextword != len(words) and nextarg != len(args):
        if args[nextarg].flags & OPTIONAL:
            last = nextarg
            while last < len(args) and args[last].flags & OPTIONAL:
                last += 1
            got = _match_optional(words[nextword:], args[nextarg:last])
            nextarg = last - 1
        else:
            got = _match_arg(words[nextword:], args[nextarg])
            if not got:
                return 0
        nextword += got
        nextarg += 1
    return nextword


def make_hint(words, e: Entry) -> bytes:
    """valkey-cli's makeHint: the arguments still to type after ``words``
    (the typed words after the command name), or the whole syntax."""
    if e.args is not None:
        _clear(e.args)
        matched = _match_args(words, e.args) if words else 0
        if matched == len(words or ()):
            return _hint_args(b"", e.args, b" ")
        return b""
    if not words:
        return e.params or b""
    return b""


def find_entry(entries, words):
    best, best_len = None, 0
    for e in entries:
        if e.is_group or len(e.argv) > len(words):
            continue
        if all(e.argv[j].lower() == words[j].lower() for j in range(len(e.argv))) \
                and len(e.argv) > best_len:
            best, best_len = e, len(e.argv)
    return best


def hint_for_input(entries, buf: bytes):
    """getHintForInput + hintsCallback: the gray text after the cursor, or None."""
    words = split_inline_args(buf) or []
    endspace = bool(buf) and buf[-1:].isspace()
    matchc = len(words) if endspace else len(words) - 1
    if matchc < 0:
        return None
    e = find_entry(entries, words[:matchc])
    if e is None:
        return None
    hint = make_hint(words[len(e.argv):matchc], e)
    return hint if endspace else b" " + hint


def completions(entries, buf: bytes) -> list:
    start = 0
    groups_too = False
    if buf[:5].lower() == b"help ":
        start = 5
        while start < len(buf) and buf[start:start + 1].isspace():
            start += 1
        groups_too = True
    out = []
    typed = buf[start:].lower()
    for e in entries:
        if e.is_group and not groups_too:
            continue
        if e.full.lower().startswith(typed):
            out.append(buf[:start] + e.full)
    return out


# -- help output ----------------------------------------------------------------------

def _command_help(e: Entry, with_group: bool) -> bytes:
    out = b"\r\n  \x1b[1m%s\x1b[0m \x1b[90m%s\x1b[0m\r\n" % (
        e.full, e.params if e.params is not None else b"(null)")
    out += b"  \x1b[33msummary:\x1b[0m %s\r\n" % e.summary
    if e.since is not None:
        out += b"  \x1b[33msince:\x1b[0m %s\r\n" % e.since
    if with_group:
        out += b"  \x1b[33mgroup:\x1b[0m %s\r\n" % e.group
    return out


def generic_help() -> bytes:
    return (b"valkey-cli %s\n"
            b"To get help about Valkey commands type:\n"
            b"      \"help @<group>\" to get a list of commands in <group>\n"
            b"      \"help <command>\" for help on <command>\n"
            b"      \"help <tab>\" to get a list of possible help topics\n"
            b"      \"quit\" to exit\n"
            b"\n"
            b"To set valkey-cli preferences:\n"
            b"      \":set hints\" enable online hints\n"
            b"      \":set nohints\" disable online hints\n"
            b"Set your preferences in ~/.valkeyclirc\n" % VERSION.encode())


def output_help(s, words) -> None:
    """cliOutputHelp for ``help [words]``."""
    if not words:
        write(generic_help())
        return
    if getattr(s, "help_entries", None) is None:
        s.help_entries = init_help(s)
    group = words[0][1:] if words[0][:1] == b"@" else None
    out = []
    for e in s.help_entries:
        if e.is_group:
            continue
        if group is None:
            if len(words) <= len(e.argv) and all(
                    words[j].lower() == e.argv[j].lower() for j in range(len(words))):
                out.append(_command_help(e, True))
        elif group.lower() == e.group.lower():
            out.append(_command_help(e, False))
    out.append(b"\r\n")
    write(b"".join(out))
