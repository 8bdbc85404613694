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
  the end; commands whose keys move (BLMPOP, XREAD) also give ``keys_fn``.

A handler is ``fn(client, argv) -> reply``; it raises ``CommandError`` for an
error reply.  Handlers never check arity: the dispatcher already did.
"""

from __future__ import annotations

from typing import Callable

# Flags as Redis names them.  The dispatcher reads a few as attributes.
KNOWN_FLAGS = frozenset("""
write readonly denyoom admin pubsub noscript blocking loading stale skip_monitor
skip_slowlog fast no_auth may_replicate no_mandatory_keys no_async_loading
no_multi movablekeys allow_busy protected
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


class Command:
    __slots__ = (
        "name", "func", "arity", "flags", "first_key", "last_key", "key_step",
        "keys_fn", "group", "summary", "since", "subcommands", "parent",
        "acl_categories", "write", "readonly", "denyoom", "noauth", "no_multi",
        "multi_exempt", "pubsub_ok", "blocking", "admin", "bit",
        "calls", "usec", "rejected_calls", "failed_calls",
    )

    def __init__(self, name, func, arity, flags, keys, keys_fn, group, summary, since,
                 extra_acl=()):
        self.name = name
        self.func = func
        self.arity = arity
        self.flags = frozenset(flags)
        unknown = self.flags - KNOWN_FLAGS
        if unknown:
            raise ValueError(f"{name}: unknown flags {sorted(unknown)}")
        self.first_key, self.last_key, self.key_step = keys
        self.keys_fn = keys_fn
        self.group = group
        self.summary = summary
        self.since = since
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
        cats = set(extra_acl)
        cat = GROUP_CATEGORIES.get(group)
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
        self.calls = self.usec = self.rejected_calls = self.failed_calls = 0
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

    def reset_stats(self):
        self.calls = self.usec = self.rejected_calls = self.failed_calls = 0


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
            summary: str = "", since: str = "1.0.0", acl: tuple = ()):
    """Register ``fn`` as the handler of ``name`` ("get", or "config|get")."""
    def deco(fn):
        global _next_bit
        cmd = Command(name.lower(), fn, arity, flags.split(), keys, keys_fn, group,
                      summary or (fn.__doc__ or "").strip().split("\n")[0], since, acl)
        cmd.bit = _next_bit
        _next_bit += 1
        if "|" in cmd.name:
            parent_name, sub = cmd.name.split("|", 1)
            parent = COMMANDS[parent_name]
            cmd.parent = parent
            if parent.subcommands is None:
                parent.subcommands = {}
            parent.subcommands[sub.encode()] = cmd
            parent.subcommands[sub.upper().encode()] = cmd
        else:
            if cmd.name in COMMANDS:
                raise ValueError(f"command {cmd.name} registered twice")
            _register_top(cmd)
        fn.command = cmd
        return fn
    return deco


def container(name: str, *, group: str, summary: str = "", since: str = "1.0.0"):
    """Register a container command (its subcommands are registered with
    ``command('name|sub', ...)``).  Called alone it is an arity error."""
    global _next_bit

    def _no_subcommand(client, argv):  # pragma: no cover - dispatcher never calls it
        raise AssertionError("container called without a subcommand")

    cmd = Command(name, _no_subcommand, -2, (), (0, 0, 0), None, group, summary, since)
    cmd.subcommands = {}
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
