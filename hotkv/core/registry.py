"""The command table.

A command is one function registered here with its name, arity, flags and
key positions, as in Redis's command table.  Nothing else about a command is
declared anywhere: the dispatcher reads arity and flags from here, and
COMMAND / COMMAND INFO / COMMAND DOCS are generated from here.

Conventions (Redis's):
* arity counts the command name; a negative arity means "at least -arity";
* a container command (CONFIG, CLIENT, XGROUP...) has subcommands, each a
  full command named ``parent|sub`` with its own arity and flags;
* key positions are ``(first, last, step)``, ``last`` negative counting from
  the end; commands whose keys move (BLMPOP, XREAD) also give ``keys_fn``;
* a command whose keys play several roles, or are found by a keyword or a
  key count, declares Redis's full key specs instead: ``key_specs=(spec(...),
  ...)`` (see ``spec``).  COMMAND INFO shows them as declared, and the
  ``(first, last, step)`` triple is derived from them as Redis derives its
  legacy range -- so key positions are still declared once.  A ``not_key``
  spec (a shard channel) is reported but never yields a key to ACL/GETKEYS.
* a command declaring only the triple whose keys' access flags differ from
  the generic ones (``RW access update`` for a write command, ``RO access``
  otherwise) declares them: ``key_flags="RW insert"``, or one string per
  key role in the order the keys come, the last covering the rest
  (``key_flags=("RO access", "OW update")``).  COMMAND INFO and
  GETKEYSANDFLAGS read them (hotkv.commands.introspection).

A handler is ``fn(client, argv) -> reply``; it raises ``CommandError`` for an
error reply.  Handlers never check arity: the dispatcher already did.

Invariant: the table is the process's, shared by every server in it, and a
``Command`` does not change once registered; so it holds no server's
state (its calls, latencies and errors are ``server.cmdstats``, hotkv.core.stats).
"""

from __future__ import annotations

from typing import Callable

# Flags as Redis names them.  The dispatcher reads a few as attributes.
KNOWN_FLAGS = frozenset("""
write readonly denyoom admin pubsub noscript blocking loading stale skip_monitor
skip_slowlog fast no_auth may_replicate no_mandatory_keys no_async_loading
no_multi movablekeys allow_busy protected asking
""".split())

# Key-spec flags as Redis names them (COMMAND INFO, GETKEYSANDFLAGS).
KNOWN_KEY_FLAGS = frozenset("""
RO RW OW RM access update insert delete not_key incomplete variable_flags
""".split())

# Commands that run at once inside MULTI instead of being queued.
MULTI_EXEMPT = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})
# Commands a RESP2 client may run while subscribed.
PUBSUB_ALLOWED = frozenset({"ping", "subscribe", "ssubscribe", "unsubscribe",
                            "sunsubscribe", "psubscribe", "punsubscribe", "quit", "reset"})

GROUP_CATEGORIES = {
    "string": "string", "list": "list", "hash": "hash", "set": "set",
    "sorted_set": "sortedset", "stream": "stream", "pubsub": "pubsub",
    "generic": "keyspace", "connection": "connection", "transactions": "transaction",
    "server": None, "scripting": "scripting", "bitmap": "bitmap",
    "hyperloglog": "hyperloglog", "geo": "geo",
}


_BEGIN_SHAPES = (("index", 1), ("keyword", 2), ("unknown", 0))
_FIND_SHAPES = (("range", 3), ("keynum", 3), ("unknown", 0))


class KeySpec:
    """One Redis key spec: its flags, how the search begins (``index`` n,
    ``keyword`` KW startfrom, or ``unknown``) and how keys are then found
    (``range`` lastkey keystep limit, ``keynum`` keynumidx firstkey keystep,
    or ``unknown``).  Immutable, shared by every call."""
    __slots__ = ("flags", "begin", "begin_args", "find", "find_args", "notes")

    def __init__(self, flags, begin, find, notes=""):
        self.flags = tuple(flags.split())
        words = begin.split()
        self.begin = words[0]
        self.begin_args = tuple(words[1:2]) + tuple(int(w) for w in words[2:]) \
            if self.begin == "keyword" else tuple(int(w) for w in words[1:])
        words = find.split()
        self.find = words[0]
        self.find_args = tuple(int(w) for w in words[1:])
        self.notes = notes
        if (self.begin, len(self.begin_args)) not in _BEGIN_SHAPES \
                or (self.find, len(self.find_args)) not in _FIND_SHAPES:
            raise ValueError(f"bad key spec {begin!r} / {find!r}")

    @property
    def plain_range(self) -> bool:
        return self.begin == "index" and self.find == "range"

    def positions(self, argv) -> list[int]:
        """The argv positions this spec finds (Redis's key-spec walk); []
        when the arguments do not fit it (the handler reports the error)."""
        argc = len(argv)
        if self.begin == "index":
            first = self.begin_args[0]
        elif self.begin == "keyword":
            kw, start = self.begin_args
            rng = range(start, argc) if start > 0 else range(argc + start, 0, -1)
            first = 0
            for i in rng:
                if 1 <= i < argc and argv[i].upper() == kw.encode():
                    first = i + 1
                    break
            if not first:
                return []
        else:
            return []
        if self.find == "range":
            lastkey, step, limit = self.find_args
            if lastkey >= 0:
                last = first + lastkey
            elif not limit:
                last = argc + lastkey
            else:
                last = first + ((argc - first) // limit + lastkey)
        elif self.find == "keynum":
            idx, firstkey, step = self.find_args
            if first + idx >= argc:
                return []
            try:
                n = int(argv[first + idx])
            except ValueError:
                return []
            if n < 0:
                return []
            first += firstkey
            last = first + n - 1
        else:
            return []
        if last >= argc or last < first or first >= argc:
            return []
        return list(range(first, last + 1, step))


def spec(flags: str, begin: str = "index 1", find: str = "range 0 1 0", notes: str = "") -> KeySpec:
    """``spec("RW insert", "index 2")``, ``spec("RO access", "keyword STREAMS 1",
    "range -1 2 2")``, ``spec("RO access", "index 1", "keynum 0 1 1")``."""
    return KeySpec(flags, begin, find, notes)


def legacy_range(specs) -> tuple[tuple[int, int, int], bool]:
    """Redis's legacy (first, last, step) of a list of key specs, and
    whether the keys are movable (some spec is not a plain range)."""
    if not specs:
        return (0, 0, 0), False
    if len(specs) == 1 and specs[0].plain_range:
        s = specs[0]
        last, step, _ = s.find_args
        first = s.begin_args[0]
        return (first, last + first if last >= 0 else last, step), "incomplete" in s.flags
    first, last, prev, movable = None, 0, 0, False
    for s in specs:
        if not s.plain_range:
            movable = True
            continue
        pos = s.begin_args[0]
        lk, step, _ = s.find_args
        if step != 1 or (prev and prev != pos - 1):
            movable = True
            continue
        if "incomplete" in s.flags:
            movable = True
        first = pos if first is None else min(first, pos)
        absolute = lk + pos if lk >= 0 else lk
        # Redis compares unsigned: a negative (from-the-end) last wins.
        if (absolute & 0xFFFFFFFF) > (last & 0xFFFFFFFF):
            last = absolute
        prev = last
    if first is None:
        return (0, 0, 0), True
    return (first, last, 1), movable


def _key_flags(name, declared) -> tuple | None:
    """``key_flags`` as declared ("RW insert", or a tuple of such strings)
    -> a tuple of flag tuples, one per key role; None when not declared."""
    if declared is None:
        return None
    roles = tuple(tuple(r.split()) for r in
                  ((declared,) if isinstance(declared, str) else declared))
    unknown = {f for r in roles for f in r} - KNOWN_KEY_FLAGS
    if not roles or not all(roles) or unknown:
        raise ValueError(f"{name}: bad key_flags {declared!r}")
    return roles


class Command:
    __slots__ = (
        "name", "func", "arity", "flags", "first_key", "last_key", "key_step",
        "key_specs", "legacy_keys", "spec_movable", "key_flags",
        "keys_fn", "group", "summary", "since", "subcommands", "parent",
        "acl_categories", "doc_args", "complexity", "history", "doc_flags", "deprecated",
        "write", "readonly", "denyoom", "noauth", "no_multi",
        "multi_exempt", "pubsub_ok", "blocking", "admin", "bit",
        "plain",
    )

    def __init__(self, name, func, arity, flags, keys, keys_fn, group, summary, since,
                 extra_acl=(), key_specs=None, key_flags=None, doc_args="", group_acl=True):
        self.name = name
        self.func = func
        self.arity = arity
        self.flags = frozenset(flags)
        unknown = self.flags - KNOWN_FLAGS
        if unknown:
            raise ValueError(f"{name}: unknown flags {sorted(unknown)}")
        self.key_specs = tuple(key_specs) if key_specs is not None else None
        self.key_flags = _key_flags(name, key_flags)
        self.spec_movable = False
        if self.key_specs is not None:
            # COMMAND INFO's triple counts every spec; the one keys are
            # found with leaves out not_key specs (a channel is no key).
            self.legacy_keys, self.spec_movable = legacy_range(self.key_specs)
            derived, _ = legacy_range([s for s in self.key_specs if "not_key" not in s.flags])
            if tuple(keys) != (0, 0, 0) and tuple(keys) != derived:
                raise ValueError(f"{name}: keys={keys} but its key specs give {derived}")
            keys = derived
        else:
            self.legacy_keys = tuple(keys)
        self.first_key, self.last_key, self.key_step = keys
        self.keys_fn = keys_fn
        self.group = group
        self.summary = summary
        self.since = since
        # For COMMAND DOCS only: its arguments in hotkv.commands.docs_syntax's
        # syntax (parsed there on first use), its complexity, history
        # (("6.2.0", "Added ..."), ...), doc flags ("syscmd") and, when
        # deprecated, (since, replaced by).
        self.doc_args = doc_args
        self.complexity = ""
        self.history = ()
        self.doc_flags = ""
        self.deprecated = ()
        self.subcommands = None
        self.parent = None
        base = name.split("|")[0]
        self.write = "write" in self.flags
        self.readonly = "readonly" in self.flags
        self.denyoom = "denyoom" in self.flags
        self.noauth = "no_auth" in self.flags
        self.no_multi = "no_multi" in self.flags
        self.multi_exempt = name in MULTI_EXEMPT
        self.pubsub_ok = name in PUBSUB_ALLOWED
        self.blocking = "blocking" in self.flags
        self.admin = "admin" in self.flags
        # No subcommands and no protection: the dispatcher's short path
        # (hotkv.core.dispatch.process_commands) may take it.
        self.plain = not self.admin
        cats = set(extra_acl)
        cat = GROUP_CATEGORIES.get(group) if group_acl else None
        if cat:
            cats.add(cat)
        for flag, c in (("write", "write"), ("readonly", "read"), ("admin", "admin"),
                        ("fast", "fast"), ("blocking", "blocking"), ("pubsub", "pubsub")):
            if flag in self.flags:
                cats.add(c)
        if "admin" in self.flags:
            cats.add("dangerous")
        if "fast" not in self.flags:
            cats.add("slow")
        self.acl_categories = frozenset(cats)
        # A small integer id per command, for ACL bitmaps.
        self.bit = 0
        del base

    @property
    def fullname(self) -> str:
        return self.name

    def key_indexes(self, argv) -> list[int]:
        """Positions of the keys in argv."""
        if self.keys_fn is not None:
            return self.keys_fn(argv)
        if self.first_key <= 0:
            return []
        last = self.last_key
        if last < 0:
            last = len(argv) + last
        return list(range(self.first_key, min(last, len(argv) - 1) + 1, self.key_step))


# name (bytes, as sent lower- or upper-case) -> Command
TABLE: dict[bytes, Command] = {}
# canonical lower-case str name -> Command (top level only)
COMMANDS: dict[str, Command] = {}
_next_bit = 0


def _register_top(cmd: Command):
    key = cmd.name.encode()
    TABLE[key] = cmd
    TABLE[key.upper()] = cmd
    COMMANDS[cmd.name] = cmd


def command(name: str, arity: int, flags: str = "", keys=(0, 0, 0), *,
            keys_fn: Callable | None = None, group: str = "generic",
            summary: str = "", since: str = "1.0.0", acl: tuple = (),
            key_specs=None, key_flags=None, args: str = "", complexity: str = "",
            history: tuple = (), doc_flags: str = "", deprecated: tuple = (),
            group_acl: bool = True):
    """Register ``fn`` as the handler of ``name`` ("get", or "config|get").
    ``args``, ``complexity``, ``history``, ``doc_flags`` and ``deprecated``
    are for COMMAND DOCS only (see ``Command``; ``args`` is written in
    hotkv.commands.docs_syntax's syntax).  ``group_acl=False``: the group
    gives no ACL category (WAIT and WAITAOF are generic commands outside
    @keyspace, as Valkey's command table has them)."""
    def deco(fn):
        global _next_bit
        cmd = Command(name.lower(), fn, arity, flags.split(), keys, keys_fn, group,
                      summary or (fn.__doc__ or "").strip().split("\n")[0], since, acl,
                      key_specs, key_flags, args, group_acl)
        cmd.complexity, cmd.history, cmd.doc_flags, cmd.deprecated = \
            complexity, history, doc_flags, deprecated
        cmd.bit = _next_bit
        _next_bit += 1
        if "|" in cmd.name:
            parent_name, sub = cmd.name.split("|", 1)
            parent = COMMANDS[parent_name]
            cmd.parent = parent
            if parent.subcommands is None:
                parent.subcommands = {}
                parent.plain = False
            parent.subcommands[sub.encode()] = cmd
            parent.subcommands[sub.upper().encode()] = cmd
        else:
            if cmd.name in COMMANDS:
                raise ValueError(f"command {cmd.name} registered twice")
            _register_top(cmd)
        fn.command = cmd
        return fn
    return deco


def container(name: str, *, group: str, summary: str = "", since: str = "1.0.0",
              complexity: str = "", deprecated: tuple = ()):
    """Register a container command (its subcommands are registered with
    ``command('name|sub', ...)``).  Called alone it is an arity error."""
    global _next_bit

    def _no_subcommand(client, argv):  # pragma: no cover - dispatcher never calls it
        raise AssertionError("container called without a subcommand")

    cmd = Command(name, _no_subcommand, -2, (), (0, 0, 0), None, group, summary, since)
    cmd.complexity, cmd.deprecated = complexity, deprecated
    cmd.subcommands = {}
    cmd.plain = False
    cmd.bit = _next_bit
    _next_bit += 1
    _register_top(cmd)
    return cmd


def lookup(name: bytes) -> Command | None:
    cmd = TABLE.get(name)
    if cmd is None:
        cmd = TABLE.get(name.lower())
    return cmd


def all_commands():
    """Every command and subcommand, top level first."""
    for cmd in COMMANDS.values():
        yield cmd
        if cmd.subcommands:
            seen = set()
            for sub in cmd.subcommands.values():
                if sub.name not in seen:
                    seen.add(sub.name)
                    yield sub
