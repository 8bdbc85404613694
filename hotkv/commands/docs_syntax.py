"""A command's arguments as COMMAND DOCS shows them, from a one-line syntax.

Owns the small syntax each ``@command(..., args="...")`` is written in and
its translation into Valkey's COMMAND DOCS ``arguments`` tree (name, type,
display_text, key_spec_index, token, summary, since, deprecated_since,
flags, nested arguments; Valkey's addReplyCommandArgList order).  The
syntax reads like the usage line of the command's documentation, with the
names Valkey gives its arguments:

* ``key:k`` an argument and its type: ``k`` key (``k1``: key spec 1;
  ``pattern:p1`` a pattern in key spec 1), ``i`` integer, ``d`` double,
  ``p`` pattern, ``t`` unix-time, ``s`` or nothing a string (``field``);
* ``NX`` a pure token (named ``nx``); ``auto-id=*`` a pure token named
  otherwise than its token (``empty-string=`` has an empty token);
* ``[ ... ]`` optional, ``( ... )`` a group, ``a | b`` one of them; a group
  whose first item is a bare token gives it to what follows (unless that
  is a token or optional: ``no-one(NO ONE)`` is a block of two): ``[COUNT
  count:i]`` is the argument ``count`` with the token COUNT, ``[LIMIT
  offset:i count:i]`` the block ``limit`` with the token LIMIT;
* ``name( ... )`` / ``name[ ... ]`` names a block or a one-of (Valkey names
  every one); over a token and one argument it renames the argument, whose
  display text stays its own (``by-pattern[BY pattern:p]``);
* after an item or a group: ``'text'`` its display text, ``{text}`` its
  summary, ``@7.0.0`` since, ``!2.8.12`` deprecated since, ``...`` multiple
  (repeating the token too, ``multiple_token``, when the item has one).

Invariants: a syntax is parsed on the first COMMAND DOCS that shows it,
never at import, and the tree is cached by its text (a pure function of
it); the replies share the cached tree and nothing mutates it.
"""

from __future__ import annotations

import functools
import re

from ..protocol.resp import SetReply, Simple

_TYPES = {"k": "key", "i": "integer", "d": "double", "p": "pattern", "t": "unix-time",
          "s": "string"}
_FLAG_ORDER = ("optional", "multiple", "multiple_token")
_LEX = r"""\s*(?:
      (?P<open>(?P<gname>[a-z][\w-]*)?[(\[])
    | (?P<close>[)\]])
    | (?P<bar>\|)
    | (?P<word>[a-z][\w-]*=[^\s'{@!()\[\]|.]*|[\w:-]+)
    )(?P<mods>(?:'[^']*')?(?:\{[^}]*\})?(?:@[\d.]+)?(?:![\d.]+)?(?:\.\.\.)?)"""
_MODS = (r"(?:'(?P<disp>[^']*)')?(?:\{(?P<summary>[^}]*)\})?(?:@(?P<since>[\d.]+))?"
         r"(?:!(?P<dep>[\d.]+))?(?P<multi>\.\.\.)?\Z")
_TOKEN_WORD = r"[A-Z0-9_-]*[A-Z][A-Z0-9_-]*\Z"
# The patterns are compiled by the first COMMAND DOCS (re's cache), not at import.


class _Arg:
    __slots__ = ("name", "type", "display", "ksi", "token", "summary", "since", "dep",
                 "flags", "children", "bare")

    def __init__(self, name, type_, children=None, token=None, ksi=None, bare=False):
        self.name, self.type, self.children = name, type_, children
        self.token, self.ksi, self.bare = token, ksi, bare
        self.display = self.summary = self.since = self.dep = None
        self.flags = set()

    def reply(self, syntax: str) -> dict:
        if self.name is None:
            raise ValueError(f"a one-of or block without a name in {syntax!r}")
        out = {b"name": self.name.encode(), b"type": self.type.encode()}
        if self.children is None:
            out[b"display_text"] = (self.display or self.name).encode()
        if self.ksi is not None:
            out[b"key_spec_index"] = self.ksi
        for field, value in ((b"token", self.token), (b"summary", self.summary),
                             (b"since", self.since), (b"deprecated_since", self.dep)):
            if value is not None:
                out[field] = value.encode()
        if self.flags:
            out[b"flags"] = SetReply(Simple(f.encode()) for f in _FLAG_ORDER if f in self.flags)
        if self.children is not None:
            out[b"arguments"] = [a.reply(syntax) for a in self.children]
        return out


def _word(text: str) -> _Arg:
    if re.match(_TOKEN_WORD, text):
        return _Arg(text.lower(), "pure-token", token=text, bare=True)
    name, eq, token = text.partition("=")
    if eq:
        return _Arg(name, "pure-token", token=token)
    name, _, kind = text.partition(":")
    type_ = _TYPES.get(kind[:1] or "s")
    if type_ is None or not kind[1:].isdigit() and kind[1:]:
        raise ValueError(f"unknown argument type in {text!r}")
    ksi = int(kind[1:]) if kind[1:] else 0 if type_ == "key" else None
    return _Arg(name, type_, ksi=ksi)


def _apply(arg: _Arg, mods: str, optional: bool = False) -> _Arg:
    m = re.match(_MODS, mods)
    if optional:
        arg.flags.add("optional")
    if m["disp"] is not None:
        arg.display = m["disp"]
    arg.summary = m["summary"] or arg.summary
    arg.since = m["since"] or arg.since
    arg.dep = m["dep"] or arg.dep
    if m["multi"]:
        arg.flags.add("multiple")
        if arg.token is not None:
            arg.flags.add("multiple_token")
    arg.bare = False
    return arg


def _bind(seq: list, name: str | None, syntax: str) -> _Arg:
    """One group's single alternative (or one alternative of a one-of) as
    one argument: a bare token gives itself to what follows it."""
    first = seq[0]
    if first.bare and len(seq) == 2 and (seq[1].bare or "optional" in seq[1].flags):
        return _Arg(name or first.token.lower(), "block", seq)
    if first.bare and len(seq) > 1:
        if len(seq) == 2:
            arg = seq[1]
            arg.token = first.token
            if arg.name is None or name:
                if arg.children is None and arg.display is None:
                    arg.display = arg.name
                arg.name = name or first.token.lower()
            return arg
        return _Arg(name or first.token.lower(), "block", seq[1:], token=first.token)
    if len(seq) == 1:
        if name:
            seq[0].name = name
        return seq[0]
    if not name:
        raise ValueError(f"a group of several arguments needs a name: {syntax!r}")
    return _Arg(name, "block", seq)


def _parse_alts(tokens, i: int, syntax: str, top: bool = False):
    """Alternatives (lists of arguments) up to the closing bracket."""
    alts, seq = [], []
    while i < len(tokens):
        m = tokens[i]
        i += 1
        if m["close"]:
            if top:
                raise ValueError(f"unbalanced {m['close']!r} in {syntax!r}")
            alts.append(seq)
            return alts, i, m["mods"]
        if m["bar"]:
            alts.append(seq)
            seq = []
        elif m["word"]:
            seq.append(_apply(_word(m["word"]), m["mods"]) if m["mods"] else _word(m["word"]))
        else:
            inner, i, mods = _parse_alts(tokens, i, syntax)
            if any(not a for a in inner):
                raise ValueError(f"an empty alternative in {syntax!r}")
            name = m["gname"]
            if len(inner) > 1:
                arg = _Arg(name, "oneof", [_bind(a, None, syntax) for a in inner])
            else:
                arg = _bind(inner[0], name, syntax)
            seq.append(_apply(arg, mods, optional=m["open"].endswith("[")))
    if not top:
        raise ValueError(f"unclosed bracket in {syntax!r}")
    if alts:
        raise ValueError(f"'|' outside a group in {syntax!r}")
    return seq, i, ""


def _lex(syntax: str) -> list:
    tokens, pos = [], 0
    while pos < len(syntax):
        if syntax[pos:].isspace():
            break
        m = re.compile(_LEX, re.X).match(syntax, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot read {syntax[pos:pos + 20]!r} in {syntax!r}")
        if (m["open"] and m["mods"]) or (m["mods"] and not re.match(_MODS, m["mods"])):
            raise ValueError(f"misplaced modifier at {syntax[pos:pos + 20]!r} in {syntax!r}")
        tokens.append(m)
        pos = m.end()
    return tokens


@functools.lru_cache(maxsize=None)
def arguments(syntax: str) -> list:
    """COMMAND DOCS' ``arguments`` reply for one command's syntax."""
    seq, _, _ = _parse_alts(_lex(syntax), 0, syntax, top=True)
    return [a.reply(syntax) for a in seq]
