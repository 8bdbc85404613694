"""ACL rules: one user's permissions, as Redis's src/acl.c models them.

Owns ``User`` -- flags (on/off, nopass), password hashes, the allowed
command bits (``registry.Command.bit``) and first-arg exceptions, key
patterns with their read/write access, channel patterns, and selectors
(Redis 7's ``(...)`` rules, extra ``User`` objects holding only key,
channel and command rules) -- with the parsing of every ACL SETUSER rule
(``User.apply``), its description (ACL LIST / GETUSER), and the check of
one command line against it (``User.check``: commands, then keys by the
access the command needs, then channels).  Also the data those need: the
categories in Redis's order, each command's key access (``KEY_FLAGS``,
``KEY_FLAGS_SPLIT``), the pub/sub argument positions Redis checks, the
denial reasons and their error texts, and the glob matcher with its
linear-time shortcuts.

The server's users, the ACL file, the ACL LOG and the hot-path wiring are
hotkv.clients.acl's; this module knows nothing of clients or the server.

Invariants: a rule that fails raises ``RuleError`` (ACL SETUSER applies
rules to a copy, so a failing rule changes nothing); ``User.refresh``
recompiles a user's patterns after a change, so a check never compiles;
a command is allowed when the user's own rules or any selector allow it.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from ..core.registry import TABLE, all_commands
from ..protocol.util import compile_glob

# Category names, in Redis's order (ACL CAT, COMMAND INFO).
CATEGORIES = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
)

KEY_READ, KEY_WRITE = 1, 2
KEY_ALL = KEY_READ | KEY_WRITE

# The key access a command needs (Redis derives it from its key specs:
# ACCESS -> read, INSERT/DELETE/UPDATE -> write).  Read-only commands need
# read and write commands need write, except these.
_KEY_FLAG_EXCEPTIONS = {
    KEY_ALL: """bitfield bitop blmove blmpop blpop brpop brpoplpush bzmpop bzpopmax bzpopmin
        copy decr decrby eval evalsha fcall georadius georadiusbymember geosearchstore getdel
        getex getset hincrby hincrbyfloat incr incrby incrbyfloat lmove lmpop lpop migrate move
        pfmerge rename renamenx rpop rpoplpush sdiffstore setbit sinterstore smove sort spop
        sunionstore zdiffstore zincrby zinterstore zmpop zpopmax zpopmin zrangestore
        zunionstore""",
    0: """exists hexists hlen hstrlen llen memory|usage object|encoding object|freq
        object|idletime object|refcount scard sismember strlen touch type xlen zcard""",
    KEY_READ: "pfdebug xreadgroup",
}
KEY_FLAGS = {name: flags for flags, names in _KEY_FLAG_EXCEPTIONS.items()
             for name in names.split()}
# Commands whose first key and other keys need different access (COPY reads
# its source and writes its destination; SUNIONSTORE writes the first key
# and reads the rest): name -> (first key, other keys).
_R, _W, _RW = KEY_READ, KEY_WRITE, KEY_ALL
KEY_FLAGS_SPLIT = {
    "copy": (_R, _W), "bitop": (_W, _R), "blmove": (_RW, _W), "brpoplpush": (_RW, _W),
    "lmove": (_RW, _W), "rpoplpush": (_RW, _W), "smove": (_RW, _W), "rename": (_RW, _W),
    "renamenx": (_RW, _W), "pfmerge": (_RW, _R), "georadius": (_R, _W),
    "georadiusbymember": (_R, _W), "geosearchstore": (_W, _R), "sdiffstore": (_W, _R),
    "sinterstore": (_W, _R), "sunionstore": (_W, _R), "zdiffstore": (_W, _R),
    "zinterstore": (_W, _R), "zunionstore": (_W, _R), "zrangestore": (_W, _R),
    "sort": (_R, _W),
}

# Commands naming channels Redis checks: name -> (first arg, is_pattern).
CHANNEL_ARGS = {
    "publish": (1, False, True), "spublish": (1, False, True),
    "subscribe": (1, False, False), "ssubscribe": (1, False, False),
    "psubscribe": (1, True, False),
}

DENIED_CMD, DENIED_KEY, DENIED_AUTH, DENIED_CHANNEL = 1, 2, 3, 4

_SETUSER_ERRORS = {
    "ENOENT": "Unknown command or category name in ACL",
    "EINVAL": "Syntax error",
    "EEXIST": ("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and "
               "does not have any effect. Try 'resetkeys' to start with an empty list of "
               "patterns"),
    "EISDIR": ("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid "
               "and does not have any effect. Try 'resetchannels' to start with an empty list "
               "of channels"),
    "ENODEV": "The password you are trying to remove from the user does not exist",
    "EBADMSG": ("The password hash must be exactly 64 characters and contain only lowercase "
                "hexadecimal characters"),
    "ECHILD": "Allowing first-arg of a subcommand is not supported",
}


class RuleError(Exception):
    """An ACL rule was refused; ``code`` is the errno Redis would set."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code

    @property
    def text(self) -> str:
        return _SETUSER_ERRORS.get(self.code, "Wrong format")


def hash_password(password: bytes) -> bytes:
    return hashlib.sha256(password).hexdigest().encode()


def _rule_hash(op: bytes) -> bytes:
    """The password hash a >pass / <pass / #hash / !hash rule names."""
    if op[:1] in (b">", b"<"):
        return hash_password(op[1:])
    h = op[1:]
    if len(h) != 64 or any(c not in b"0123456789abcdef" for c in h):
        raise RuleError("EBADMSG")
    return h


def _has_spaces(s: bytes) -> bool:
    return any(c in b" \t\n\r\v\f\0" for c in s)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


# ----------------------------------------------------------------------
# Command lookup and categories
# ----------------------------------------------------------------------

_CATEGORY_CACHE: dict = {}


def category_commands(category: str):
    """Every command (subcommands included) in a category, in table order.
    As in Valkey a container is in @slow, and a +@slow rule therefore grants
    all of its subcommands."""
    size = len(TABLE)
    cached = _CATEGORY_CACHE.get(category)
    if cached is not None and cached[0] == size:
        return cached[1]
    cmds = [c for c in all_commands() if category in c.acl_categories]
    _CATEGORY_CACHE[category] = (size, cmds)
    return cmds


def lookup_command(name: bytes):
    """Redis's ACLLookupCommand: ``get`` or ``config|get``, any case."""
    parts = name.lower().split(b"|")
    if len(parts) > 2 or not parts[0]:
        return None
    cmd = TABLE.get(parts[0])
    if cmd is None or len(parts) == 1:
        return cmd
    if not cmd.subcommands:
        return None
    return cmd.subcommands.get(parts[1])


def glob_matcher(pattern: bytes):
    """A fast callable for a Redis glob.  Only shapes that match in linear
    time get a shortcut (literal, ``prefix*``, ``*suffix``, ``?`` without
    ``*``); anything else goes to util.stringmatch, whose work is bounded --
    a regex with several ``*`` could backtrack for ages on a long key."""
    # Equal to util.stringmatch: tests/test_fastpaths.py::
    # test_glob_matcher_shortcuts_equal_stringmatch.
    if not any(c in pattern for c in b"*?[\\"):
        return pattern.__eq__
    if b"[" in pattern or b"\\" in pattern:
        return compile_glob(pattern)
    stars = pattern.count(b"*")
    if stars == 0:
        rx = b"".join(b"." if c == 63 else re.escape(bytes((c,))) for c in pattern)
        return re.compile(rx, re.S).fullmatch
    if stars == 1 and b"?" not in pattern:
        head, _, tail = pattern.partition(b"*")
        # Redis's matcher never matches an empty string against a wildcard.
        if not tail:
            return (lambda s: bool(s) and s.startswith(head)) if not head else (
                lambda s: s.startswith(head))
        if not head:
            return lambda s: bool(s) and s.endswith(tail)
        n = len(head) + len(tail)
        return lambda s: len(s) >= n and s.startswith(head) and s.endswith(tail)
    return compile_glob(pattern)


_KEY_FLAGS_CACHE: dict = {}


def key_flags(cmd, argv) -> int:
    flags = _KEY_FLAGS_CACHE.get(cmd)
    if flags is not None:
        return flags
    name = cmd.name
    if name == "set":
        # SET needs read access only with GET (its key spec flags vary).
        for a in argv[3:]:
            if a.upper() == b"GET":
                return KEY_ALL
        return KEY_WRITE
    flags_fn = getattr(cmd.func, "key_flags_fn", None)
    if flags_fn is not None:
        # Flags that depend on the arguments (BITFIELD: read-only with GETs
        # only), as GETKEYSANDFLAGS reports them.
        return KEY_ALL if b"RW" in flags_fn(argv) else KEY_READ
    flags = KEY_FLAGS.get(name)
    if flags is None:
        flags = KEY_READ if cmd.readonly else KEY_WRITE if cmd.write else 0
    _KEY_FLAGS_CACHE[cmd] = flags
    return flags


# ----------------------------------------------------------------------
# Users
# ----------------------------------------------------------------------

class User:
    __slots__ = ("name", "enabled", "nopass", "sanitize", "passwords", "allowed",
                 "allcommands", "future", "firstargs", "rules", "patterns", "allkeys", "channels",
                 "allchannels", "unrestricted", "_matchers", "_chan_matchers", "selectors")

    def __init__(self, name: bytes):
        self.name = name
        self.enabled = False
        self.nopass = False
        self.sanitize = "sanitize-payload"
        self.passwords: list[bytes] = []     # SHA-256 hex, as bytes
        self.allowed: set = set()            # Command.bit values
        self.allcommands = False             # every command bit is set (fast path)
        self.future = False                  # +@all was the base: describes as "+@all"
        self.firstargs: dict = {}            # bit -> {lowercase first arg}
        self.rules: list[str] = []           # command rules after the +@all/-@all base
        self.patterns: list = []             # [pattern bytes, KEY_* flags]
        self.allkeys = False
        self.channels: list[bytes] = []
        self.allchannels = False
        self.unrestricted = False
        self._matchers = ()
        self._chan_matchers = ()
        self.selectors: list = []            # extra "(...)" selectors: User objects

    def copy_from(self, other: "User"):
        self.enabled = other.enabled
        self.nopass = other.nopass
        self.sanitize = other.sanitize
        self.passwords = list(other.passwords)
        self.allowed = set(other.allowed)
        self.allcommands = other.allcommands
        self.future = other.future
        self.firstargs = {k: set(v) for k, v in other.firstargs.items()}
        self.rules = list(other.rules)
        self.patterns = [list(p) for p in other.patterns]
        self.allkeys = other.allkeys
        self.channels = list(other.channels)
        self.allchannels = other.allchannels
        self.selectors = [s.clone() for s in other.selectors]
        self.refresh()

    def clone(self) -> "User":
        u = User(self.name)
        u.copy_from(self)
        return u

    def refresh(self):
        """Recompute what the hot path reads."""
        self.unrestricted = self.allcommands and self.allkeys and self.allchannels
        self._matchers = tuple((glob_matcher(p), f) for p, f in self.patterns)
        self._chan_matchers = tuple(glob_matcher(p) for p in self.channels)

    # -- passwords ------------------------------------------------------
    def password_ok(self, password: bytes) -> bool:
        if self.nopass:
            return True
        candidate = hash_password(password)
        ok = False
        for stored in self.passwords:
            # Compare against every stored hash: time does not tell which matched.
            ok |= hmac.compare_digest(candidate, stored)
        return ok

    # -- rules ----------------------------------------------------------
    def _set_bit(self, cmd, allow: bool):
        if allow:
            self.allowed.add(cmd.bit)
        else:
            self.allowed.discard(cmd.bit)
            self.allcommands = False

    def _change_perm(self, cmd, allow: bool):
        self._set_bit(cmd, allow)
        self.firstargs.pop(cmd.bit, None)
        if cmd.subcommands:
            for sub in set(cmd.subcommands.values()):
                self._set_bit(sub, allow)

    def _update_rules(self, rule: str, allow: bool):
        rule = rule.lower()
        prefix = rule + "|"
        self.rules = [r for r in self.rules if r[1:] != rule and not r[1:].startswith(prefix)]
        self.rules.append(("+" if allow else "-") + rule)

    def apply(self, op: bytes):
        """One ACL SETUSER rule; raises RuleError."""
        if not op:
            return
        low = op.lower()
        if low == b"on":
            self.enabled = True
        elif low == b"off":
            self.enabled = False
        elif low == b"skip-sanitize-payload":
            self.sanitize = "skip-sanitize-payload"
        elif low == b"sanitize-payload":
            self.sanitize = "sanitize-payload"
        elif low == b"nopass":
            self.nopass = True
            self.passwords = []
        elif low == b"resetpass":
            self.nopass = False
            self.passwords = []
        elif op[:1] in (b">", b"#"):
            h = _rule_hash(op)
            if h not in self.passwords:
                self.passwords.append(h)
            self.nopass = False
        elif op[:1] in (b"<", b"!"):
            h = _rule_hash(op)
            if h not in self.passwords:
                raise RuleError("ENODEV")
            self.passwords.remove(h)
        elif low == b"clearselectors":
            self.selectors = []
        elif op[:1] == b"(" and op[-1:] == b")":
            self.selectors.append(new_selector(op[1:-1]))
        elif low == b"reset":
            for r in (b"resetpass", b"resetkeys", b"resetchannels", b"off",
                      b"sanitize-payload", b"-@all", b"clearselectors"):
                self.apply(r)
            if PUBSUB_DEFAULT_ALL[0]:
                self.apply(b"allchannels")
        else:
            self._apply_selector(op, low)
        self.refresh()

    def _apply_selector(self, op: bytes, low: bytes):
        if low in (b"allkeys", b"~*"):
            self.allkeys = True
            self.patterns = []
        elif low == b"resetkeys":
            self.allkeys = False
            self.patterns = []
        elif low in (b"allchannels", b"&*"):
            self.allchannels = True
            self.channels = []
        elif low == b"resetchannels":
            self.allchannels = False
            self.channels = []
        elif low in (b"allcommands", b"+@all"):
            self.allowed = {c.bit for c in all_commands()}
            self.allcommands = True
            self.future = True
            self.rules = []
            self.firstargs = {}
        elif low in (b"nocommands", b"-@all"):
            self.allowed = set()
            self.allcommands = False
            self.future = False
            self.rules = []
            self.firstargs = {}
        elif op[:1] in (b"~", b"%"):
            self._add_key_pattern(op)
        elif op[:1] == b"&":
            if self.allchannels:
                raise RuleError("EISDIR")
            pattern = op[1:]
            if _has_spaces(pattern):
                raise RuleError("EINVAL")
            if pattern not in self.channels:
                self.channels.append(pattern)
            self.allchannels = False
        elif op[:1] == b"+" and op[1:2] != b"@":
            self._allow_command(op)
        elif op[:1] == b"-" and op[1:2] != b"@":
            cmd = lookup_command(op[1:])
            if cmd is None:
                raise RuleError("ENOENT")
            self._change_perm(cmd, False)
            self._update_rules(cmd.name, False)
        elif op[:1] in (b"+", b"-") and op[1:2] == b"@":
            category = _text(op[2:]).lower()
            if category not in CATEGORIES:
                raise RuleError("ENOENT")
            allow = op[:1] == b"+"
            self._update_rules("@" + category, allow)
            for cmd in category_commands(category):
                self._change_perm(cmd, allow)
        else:
            raise RuleError("EINVAL")

    def _add_key_pattern(self, op: bytes):
        """A ``~pattern`` or ``%R~`` / ``%W~`` / ``%RW~pattern`` rule."""
        if self.allkeys:
            raise RuleError("EEXIST")
        flags = 0
        offset = 1
        if op[:1] == b"%":
            n = len(op)
            while True:
                if offset >= n:
                    break
                ch = op[offset:offset + 1]
                if ch.upper() == b"R" and not flags & KEY_READ:
                    flags |= KEY_READ
                elif ch.upper() == b"W" and not flags & KEY_WRITE:
                    flags |= KEY_WRITE
                elif ch == b"~" and flags:
                    offset += 1
                    break
                else:
                    raise RuleError("EINVAL")
                offset += 1
        else:
            flags = KEY_ALL
        pattern = op[offset:]
        if _has_spaces(pattern):
            raise RuleError("EINVAL")
        for p in self.patterns:
            if p[0] == pattern:
                p[1] |= flags
                break
        else:
            self.patterns.append([pattern, flags])
        self.allkeys = False

    def _allow_command(self, op: bytes):
        """A ``+command`` or ``+command|subcommand`` rule."""
        name = op[1:]
        if b"|" not in name:
            cmd = lookup_command(name)
            if cmd is None:
                raise RuleError("ENOENT")
            self._change_perm(cmd, True)
            self._update_rules(cmd.name, True)
            return
        base, _, sub = name.rpartition(b"|")
        cmd = lookup_command(base)
        if cmd is None:
            raise RuleError("ENOENT")
        if cmd.parent is not None:
            raise RuleError("ECHILD")
        if not sub:
            raise RuleError("EINVAL")
        if cmd.subcommands:
            cmd = lookup_command(name)
            if cmd is None:
                raise RuleError("ENOENT")
            self._change_perm(cmd, True)
        else:
            # Redis's deprecated "first argument" rule (+select|0).
            self.firstargs.setdefault(cmd.bit, set()).add(sub.lower())
        self._update_rules(_text(name), True)

    # -- description ------------------------------------------------------
    def flag_names(self) -> list[bytes]:
        out = [b"on" if self.enabled else b"off"]
        if self.nopass:
            out.append(b"nopass")
        out.append(self.sanitize.encode())
        return out

    def command_rules(self) -> bytes:
        base = "+@all" if self.future else "-@all"
        return " ".join([base] + self.rules).encode()

    def key_description(self) -> list[bytes]:
        if self.allkeys:
            return [b"~*"]
        out = []
        for pattern, flags in self.patterns:
            if flags == KEY_ALL:
                out.append(b"~" + pattern)
            elif flags == KEY_READ:
                out.append(b"%R~" + pattern)
            else:
                out.append(b"%W~" + pattern)
        return out

    def selector_description(self) -> list[bytes]:
        parts = self.key_description()
        if self.allchannels:
            parts.append(b"&*")
        else:
            parts.append(b"resetchannels")
            parts += [b"&" + c for c in self.channels]
        parts.append(self.command_rules())
        return parts

    def describe(self) -> bytes:
        """The rules that rebuild this user (ACL LIST, the ACL file)."""
        parts = self.flag_names()
        parts += [b"#" + p for p in self.passwords]
        parts += self.selector_description()
        parts += [b"(" + b" ".join(s.selector_description()) + b")" for s in self.selectors]
        return b" ".join(parts)

    # -- permission checks --------------------------------------------------
    def check(self, cmd, argv):
        """None if this user may run argv, else (reason, argv index).  With
        selectors, any one allowing it is enough; the error reported is
        Redis's pick: the worst reason, then the last argument."""
        denied = self._check_one(cmd, argv)
        if denied is None or not self.selectors:
            return denied
        for sel in self.selectors:
            other = sel._check_one(cmd, argv)
            if other is None:
                return None
            if other[0] > denied[0] or (other[0] == denied[0] and other[1] > denied[1]):
                denied = other
        return denied

    def _check_one(self, cmd, argv):
        if not self.allcommands and not cmd.noauth and cmd.bit not in self.allowed:
            allowed_args = self.firstargs.get(cmd.bit)
            idx = 2 if cmd.parent is not None else 1
            if not allowed_args or len(argv) <= idx or argv[idx].lower() not in allowed_args:
                return DENIED_CMD, 0
        if not self.allkeys and (cmd.first_key > 0 or cmd.keys_fn is not None):
            first = cmd.first_key
            if cmd.keys_fn is None and cmd.last_key == first:
                positions = (first,) if len(argv) > first else ()   # one key: most commands
            else:
                try:
                    positions = cmd.key_indexes(argv)
                except Exception:  # malformed arguments: the handler will say so
                    positions = ()
            if positions:
                split = KEY_FLAGS_SPLIT.get(cmd.name)
                need = key_flags(cmd, argv) if split is None else split[0]
                for i in positions:
                    if not self.key_ok(argv[i], need):
                        return DENIED_KEY, i
                    if split is not None:
                        need = split[1]
        if not self.allchannels:
            spec = CHANNEL_ARGS.get(cmd.name)
            if spec is not None:
                first, is_pattern, single = spec
                last = first + 1 if single else len(argv)
                for i in range(first, min(last, len(argv))):
                    if not self._channel_ok_one(argv[i], is_pattern):
                        return DENIED_CHANNEL, i
        return None

    def key_ok(self, key: bytes, need: int) -> bool:
        if self.allkeys:
            return True
        for match, flags in self._matchers:
            if flags & need == need and match(key):
                return True
        return False

    @property
    def any_allchannels(self) -> bool:
        return self.allchannels or any(s.allchannels for s in self.selectors)

    def channel_ok(self, channel: bytes, is_pattern: bool) -> bool:
        """May this user use the channel (through any of its selectors)?"""
        if self._channel_ok_one(channel, is_pattern):
            return True
        return any(s._channel_ok_one(channel, is_pattern) for s in self.selectors)

    def _channel_ok_one(self, channel: bytes, is_pattern: bool) -> bool:
        if self.allchannels:
            return True
        if is_pattern:
            # A subscription pattern must be granted literally.
            return channel in self.channels
        for match in self._chan_matchers:
            if match(channel):
                return True
        return False


# The acl-pubsub-default of the server being configured (set around each use).
PUBSUB_DEFAULT_ALL = [False]


def new_selector(body: bytes) -> User:
    """A "(...)" selector: key, channel and command rules only."""
    sel = User(b"")
    sel.apply(b"allchannels" if PUBSUB_DEFAULT_ALL[0] else b"resetchannels")
    sel.apply(b"-@all")
    for op in body.split():
        sel._apply_selector(op, op.lower())
    sel.refresh()
    return sel


def merge_selector_args(ops):
    """Join "(" ... ")" rules split over several arguments, as Redis does;
    returns (merged, None) or (None, index of an unclosed "(")."""
    merged, current, start = [], None, -1
    for i, op in enumerate(ops):
        if current is None and op[:1] == b"(" and op[-1:] != b")":
            current, start = op, i
            continue
        if current is not None:
            current += b" " + op
            if op[-1:] == b")":
                merged.append(current)
                current = None
            continue
        merged.append(op)
    if current is not None:
        return None, start
    return merged, None


def new_user(name: bytes) -> User:
    """A user as ACL SETUSER creates it: off, no passwords, no permissions."""
    u = User(name)
    u.apply(b"allchannels" if PUBSUB_DEFAULT_ALL[0] else b"resetchannels")
    u.apply(b"-@all")
    return u


def new_default_user() -> User:
    u = User(b"default")
    for op in (b"+@all", b"~*", b"&*", b"on", b"nopass"):
        u.apply(op)
    return u


def error_message(reason: int, user: User, cmd, value: bytes, verbose: bool) -> str:
    if reason == DENIED_CMD:
        return "User %s has no permissions to run the '%s' command" % (_text(user.name), cmd.name)
    if reason == DENIED_KEY:
        if verbose:
            return "User %s has no permissions to access the '%s' key" % (
                _text(user.name), _text(value))
        return "No permissions to access a key"
    if verbose:
        return "User %s has no permissions to access the '%s' channel" % (
            _text(user.name), _text(value))
    return "No permissions to access a channel"
