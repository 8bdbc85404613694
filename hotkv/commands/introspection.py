"""COMMAND: the command table as clients see it, generated from hotkv.core.registry.

Owns COMMAND, COMMAND COUNT / LIST / INFO / DOCS / GETKEYS /
GETKEYSANDFLAGS / HELP: how a registered command is shown (Redis's
10-element COMMAND INFO entry: flags in Redis's order, ACL categories in
Redis's order, command tips, key specs, subcommands) and how the keys of a
full command line are found.  Nothing about a command is declared here:
its arity, flags, keys, key specs and key flags are its @command's
(``hotkv.core.registry``); the routing tips Valkey publishes (``COMMAND_TIPS``)
are data, by full name.

Invariants: COMMAND, COMMAND INFO and COMMAND DOCS list commands in
registration order (``hotkv.commands.MODULES``); a key's flags come from,
in order: SET's argument-dependent rule, the declared key spec that finds
it, the declared ``key_flags``, then the generic ``RW access update`` (a
write command) or ``RO access``.
"""

from __future__ import annotations

from ..core.registry import COMMANDS, all_commands, command, lookup
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.replies import help_reply
from ..protocol.resp import SetReply, Simple
from ..protocol.util import stringmatch
from .docs_syntax import arguments

_FLAG_ORDER = ("write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
               "blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking",
               "fast", "no_auth", "no_mandatory_keys", "no_async_loading", "no_multi",
               "movablekeys", "allow_busy")
_CAT_ORDER = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
              "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
              "blocking", "dangerous", "connection", "transaction", "scripting")
_CAT_RANK = {name: i for i, name in enumerate(_CAT_ORDER)}


# Command tips as Redis publishes them (COMMAND INFO element 8): they tell
# cluster-aware clients how to route a command.  Data, keyed by full name.
_NDO, _NDOO = "nondeterministic_output", "nondeterministic_output_order"
_ALL_NODES = ("request_policy:all_nodes", "response_policy:all_succeeded")
_ALL_SHARDS = ("request_policy:all_shards", "response_policy:all_succeeded")
_SPECIAL = (_NDO, "request_policy:all_shards", "response_policy:special")
_NODES_SPECIAL = (_NDO, "request_policy:all_nodes", "response_policy:special")
_MULTI_SUM = ("request_policy:multi_shard", "response_policy:agg_sum")
COMMAND_TIPS = {
    "acl|deluser": _ALL_NODES, "acl|save": _ALL_NODES, "acl|setuser": _ALL_NODES,
    "client|info": (_NDO,), "client|list": (_NDO,), "client|setinfo": _ALL_NODES,
    "client|setname": _ALL_NODES, "command": (_NDOO,), "command|docs": (_NDOO,),
    "command|info": (_NDOO,), "command|list": (_NDOO,), "config|resetstat": _ALL_NODES,
    "config|rewrite": _ALL_NODES, "config|set": _ALL_NODES,
    "dbsize": ("request_policy:all_shards", "response_policy:agg_sum"),
    "del": _MULTI_SUM, "dump": (_NDO,), "exists": _MULTI_SUM, "flushall": _ALL_SHARDS,
    "flushdb": _ALL_SHARDS, "function|delete": _ALL_SHARDS, "function|flush": _ALL_SHARDS,
    "function|kill": ("request_policy:all_shards", "response_policy:one_succeeded"),
    "function|list": (_NDOO,), "function|load": _ALL_SHARDS, "function|restore": _ALL_SHARDS,
    "function|stats": _SPECIAL, "hgetall": (_NDOO,), "hkeys": (_NDOO,),
    "hrandfield": (_NDO,), "hscan": (_NDO,), "hvals": (_NDOO,), "info": _SPECIAL,
    "keys": ("request_policy:all_shards", _NDOO), "lastsave": (_NDO,),
    **{"cluster|" + sub: (_NDO,) for sub in (
        "bumpepoch", "getkeysinslot", "replicas", "slots", "info", "links", "myshardid",
        "shards", "count-failure-reports", "nodes", "slaves")},
    "cluster|slot-stats": (_NDO, "request_policy:all_shards"),
    "latency|doctor": _NODES_SPECIAL, "latency|graph": _NODES_SPECIAL,
    "latency|histogram": _NODES_SPECIAL, "latency|history": _NODES_SPECIAL,
    "latency|latest": _NODES_SPECIAL,
    "latency|reset": ("request_policy:all_nodes", "response_policy:agg_sum"),
    "memory|doctor": _SPECIAL, "migrate": (_NDO,), "memory|malloc-stats": _SPECIAL,
    "memory|purge": _ALL_SHARDS, "memory|stats": _SPECIAL,
    "mget": ("request_policy:multi_shard",),
    "mset": ("request_policy:multi_shard", "response_policy:all_succeeded"),
    "module|list": (_NDOO,),
    "object|encoding": (_NDO,), "object|freq": (_NDO,), "object|idletime": (_NDO,),
    "object|refcount": (_NDO,), "ping": _ALL_SHARDS, "pttl": (_NDO,),
    "randomkey": ("request_policy:all_shards", "response_policy:special", _NDO),
    "scan": (_NDO, "request_policy:special", "response_policy:special"),
    "script|exists": ("request_policy:all_shards", "response_policy:agg_logical_and"),
    "script|flush": _ALL_NODES,
    "script|kill": ("request_policy:all_shards", "response_policy:one_succeeded"),
    "script|load": _ALL_NODES, "sdiff": (_NDOO,), "sinter": (_NDOO,),
    "slowlog|get": ("request_policy:all_nodes", _NDO),
    "slowlog|len": ("request_policy:all_nodes", "response_policy:agg_sum", _NDO),
    "slowlog|reset": _ALL_NODES, "smembers": (_NDOO,), "spop": (_NDO,),
    "srandmember": (_NDO,), "sscan": (_NDO,), "sunion": (_NDOO,), "time": (_NDO,),
    "touch": _MULTI_SUM, "ttl": (_NDO,), "unlink": _MULTI_SUM,
    "wait": ("request_policy:all_shards", "response_policy:agg_min"),
    "waitaof": ("request_policy:all_shards", "response_policy:agg_min"),
    "xadd": (_NDO,), "xautoclaim": (_NDO,), "xclaim": (_NDO,), "xinfo|consumers": (_NDO,),
    "xpending": (_NDO,), "xtrim": (_NDO,), "zrandmember": (_NDO,), "zscan": (_NDO,),
}


def _movable(cmd) -> bool:
    return cmd.keys_fn is not None or cmd.spec_movable or "movablekeys" in cmd.flags


# Valkey 8.1 reports skip_slowlog under its new name.
_FLAG_NAMES = {"skip_slowlog": b"skip_commandlog"}


def _command_flags(cmd):
    flags = set(cmd.flags)
    if _movable(cmd):
        flags.add("movablekeys")
    return SetReply(Simple(_FLAG_NAMES.get(f) or f.encode()) for f in _FLAG_ORDER if f in flags)


def _is_container(cmd) -> bool:
    return cmd.subcommands is not None and cmd.parent is None and not cmd.flags \
        and cmd.arity == -2


def _command_categories(cmd):
    # A container (CONFIG, XINFO...) is never run itself: Redis lists it as
    # @slow only, whatever its subcommands' categories.
    cats = ["slow"] if _is_container(cmd) else \
        sorted(cmd.acl_categories, key=lambda n: (_CAT_RANK.get(n, 99), n))
    return SetReply(Simple(b"@" + n.encode()) for n in cats)


def _declared_spec(s):
    if s.begin == "index":
        begin = {b"type": b"index", b"spec": {b"index": s.begin_args[0]}}
    elif s.begin == "keyword":
        begin = {b"type": b"keyword", b"spec": {b"keyword": s.begin_args[0].encode(),
                                                b"startfrom": s.begin_args[1]}}
    else:
        begin = {b"type": b"unknown", b"spec": {}}
    if s.find == "range":
        find = {b"type": b"range", b"spec": dict(zip((b"lastkey", b"keystep", b"limit"),
                                                     s.find_args))}
    elif s.find == "keynum":
        find = {b"type": b"keynum", b"spec": dict(zip((b"keynumidx", b"firstkey", b"keystep"),
                                                      s.find_args))}
    else:
        find = {b"type": b"unknown", b"spec": {}}
    out = {b"notes": s.notes.encode()} if s.notes else {}
    out[b"flags"] = SetReply(Simple(f.encode()) for f in s.flags)
    out[b"begin_search"] = begin
    out[b"find_keys"] = find
    return out


def _key_specs(cmd):
    if cmd.key_specs is not None:
        return SetReply(_declared_spec(s) for s in cmd.key_specs)
    if cmd.first_key <= 0 and not _movable(cmd):
        return SetReply()
    flags = _key_flags(cmd)
    if cmd.first_key <= 0:
        begin = {b"type": b"unknown", b"spec": {}}
        find = {b"type": b"unknown", b"spec": {}}
    else:
        last = cmd.last_key - cmd.first_key if cmd.last_key >= 0 else cmd.last_key
        begin = {b"type": b"index", b"spec": {b"index": cmd.first_key}}
        find = {b"type": b"range",
                b"spec": {b"lastkey": last, b"keystep": cmd.key_step, b"limit": 0}}
    return SetReply([{b"flags": SetReply(flags), b"begin_search": begin, b"find_keys": find}])


def _subcommands(cmd):
    seen = []
    if cmd.subcommands:
        for sub in cmd.subcommands.values():
            if sub not in seen:
                seen.append(sub)
    return seen


def command_info(cmd):
    """One COMMAND INFO entry, in Redis's 10-element shape."""
    if cmd is None:
        return None
    first = last = step = 0
    if cmd.legacy_keys[0] > 0:
        first, last, step = cmd.legacy_keys
    subs = _subcommands(cmd)
    return [
        cmd.name.encode(),
        cmd.arity,
        _command_flags(cmd),
        first, last, step,
        _command_categories(cmd),
        SetReply(t.encode() for t in COMMAND_TIPS.get(cmd.name, ())),
        _key_specs(cmd),
        [command_info(s) for s in subs] if subs else SetReply(),
    ]


def command_docs(cmd) -> dict:
    """One COMMAND DOCS entry, in Valkey's field order (addReplyCommandDocs)."""
    out = {}
    if cmd.summary:
        out[b"summary"] = cmd.summary.encode()
    if cmd.since:
        out[b"since"] = cmd.since.encode()
    out[b"group"] = cmd.group.replace("_", "-").encode()
    if cmd.complexity:
        out[b"complexity"] = cmd.complexity.encode()
    if cmd.deprecated:
        out[b"doc_flags"] = SetReply([Simple(b"deprecated")])
        out[b"deprecated_since"] = cmd.deprecated[0].encode()
        out[b"replaced_by"] = cmd.deprecated[1].encode()
    elif cmd.doc_flags:
        out[b"doc_flags"] = SetReply(Simple(f.encode()) for f in cmd.doc_flags.split())
    if cmd.history:
        out[b"history"] = SetReply([v.encode(), text.encode()] for v, text in cmd.history)
    if cmd.doc_args:
        out[b"arguments"] = arguments(cmd.doc_args)
    subs = _subcommands(cmd)
    if subs:
        out[b"subcommands"] = {s.name.encode(): command_docs(s) for s in subs}
    return out


def _lookup_full(name: bytes):
    """'get' or 'config|get' -> Command."""
    if b"|" in name:
        parent, _, sub = name.partition(b"|")
        cmd = lookup(parent)
        if cmd is None or not cmd.subcommands:
            return None
        return cmd.subcommands.get(sub) or cmd.subcommands.get(sub.lower())
    return lookup(name)


@command("command", -1, "loading stale", group="server", acl=("connection",),
         summary="Returns detailed information about all commands.", since="2.8.13",
         complexity="O(N) where N is the total number of commands")
def command_(c, argv):
    """Get array of command details."""
    return [command_info(cmd) for cmd in COMMANDS.values()]


@command("command|count", 2, "loading stale", group="server", acl=("connection",),
         summary="Returns a count of commands.", since="2.8.13", complexity="O(1)")
def command_count(c, argv):
    """Get total number of commands."""
    return len(COMMANDS)


@command("command|info", -2, "loading stale", group="server", acl=("connection",),
         args="[command-name]...",
         summary="Returns information about one, multiple or all commands.", since="2.8.13",
         complexity="O(N) where N is the number of commands to look up",
         history=(("7.0.0", "Allowed to be called with no argument to get info on all commands."),))
def command_info_cmd(c, argv):
    """Get array of specific command details."""
    if len(argv) == 2:
        return [command_info(cmd) for cmd in COMMANDS.values()]
    return [command_info(_lookup_full(name)) for name in argv[2:]]


@command("command|docs", -2, "loading stale", group="server", acl=("connection",),
         args="[command-name]...",
         summary="Returns documentary information about one, multiple or all commands.",
         since="7.0.0", complexity="O(N) where N is the number of commands to look up")
def command_docs_cmd(c, argv):
    """Get array of specific command documentation."""
    if len(argv) == 2:
        return {cmd.name.encode(): command_docs(cmd) for cmd in COMMANDS.values()}
    out = {}
    for name in argv[2:]:
        cmd = _lookup_full(name)
        if cmd is not None:
            out[cmd.name.encode()] = command_docs(cmd)
    return out


@command("command|list", -2, "loading stale", group="server", acl=("connection",),
         args="[FILTERBY (MODULE module-name | ACLCAT category | PATTERN pattern:p)]",
         summary="Returns a list of command names.", since="7.0.0",
         complexity="O(N) where N is the total number of commands")
def command_list(c, argv):
    """Get an array of command names."""
    kind = arg = None
    i = 2
    while i < len(argv):
        if argv[i].lower() == b"filterby" and len(argv) - 1 - i == 2:
            kind = argv[i + 1].lower()
            if kind not in (b"module", b"aclcat", b"pattern"):
                raise CommandError(errors.SYNTAX)
            arg = argv[i + 2]
            i += 3
        else:
            raise CommandError(errors.SYNTAX)
    out = []
    for cmd in all_commands():
        if kind == b"module":
            continue
        if kind == b"aclcat" and arg.lower().decode("latin-1") not in cmd.acl_categories:
            continue
        if kind == b"pattern" and not stringmatch(arg, cmd.name.encode(), nocase=True):
            continue
        out.append(cmd.name.encode())
    return out


def command_keys(cmd, args) -> list:
    """Positions (in args, args[0] the command name) of its keys."""
    return cmd.key_indexes(args)


@command("command|getkeys", -3, "loading stale", group="server", acl=("connection",),
         args="command [arg]...", summary="Extracts the key names from an arbitrary command.",
         since="2.8.13", complexity="O(N) where N is the number of arguments to the command")
def command_getkeys(c, argv):
    """Extract keys given a full command."""
    return [key for key, _ in _getkeys(argv[2:])]


@command("command|getkeysandflags", -3, "loading stale", group="server", acl=("connection",),
         args="command [arg]...",
         summary="Extracts the key names and access flags for an arbitrary command.",
         since="7.0.0", complexity="O(N) where N is the number of arguments to the command")
def command_getkeysandflags(c, argv):
    """Extract keys and access flags given a full command."""
    args = argv[2:]
    return [[args[p], SetReply(_key_flags(cmd, args, i, p))]
            for i, (p, cmd) in enumerate(_getkeys(args, True))]


def _key_flags(cmd, argv=None, nth: int = 0, pos: int = -1) -> list:
    if cmd.name == "set" and argv is not None:
        # SET's flags depend on its arguments: with GET it reads the old value.
        get = any(a.lower() == b"get" for a in argv[3:])
        return [Simple(f) for f in ((b"RW", b"access", b"update") if get else (b"OW", b"update"))]
    flags_fn = getattr(cmd.func, "key_flags_fn", None)
    if flags_fn is not None and argv is not None:
        # A variable_flags command whose flags depend on its arguments
        # (BITFIELD: read-only with GETs only), as Valkey's getkeys procs.
        return [Simple(f) for f in flags_fn(argv)]
    if cmd.key_specs is not None and argv is not None:
        # The flags of the spec that finds this key (as Redis reports them).
        for s in cmd.key_specs:
            if "not_key" not in s.flags and pos in s.positions(argv):
                return [Simple(f.encode()) for f in s.flags]
    # Declared flags (``key_flags`` on the @command): one entry per key
    # role, the last covering the rest (SORT's STORE destination, which no
    # key spec locates, is its second role).
    roles = cmd.key_flags
    if roles is not None:
        return [Simple(f.encode()) for f in roles[min(nth, len(roles) - 1)]]
    if "write" in cmd.flags:
        return [Simple(b"RW"), Simple(b"access"), Simple(b"update")]
    return [Simple(b"RO"), Simple(b"access")]


def _getkeys(args, positions_only=False):
    """(key, command) pairs of a full command (with ``positions_only``,
    (position, command)), or the GETKEYS error."""
    cmd = lookup(args[0])
    if cmd is not None and cmd.subcommands and len(args) > 1:
        cmd = cmd.subcommands.get(args[1]) or cmd.subcommands.get(args[1].lower())
    if cmd is None:
        raise CommandError("ERR Invalid command specified")
    if cmd.first_key <= 0 and not _movable(cmd):
        raise CommandError("ERR The command has no key arguments")
    n = len(args)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        raise CommandError("ERR Invalid number of arguments specified for command")
    try:
        positions = command_keys(cmd, args)
    except Exception:  # a keys_fn refusing malformed arguments (bad numkeys...)
        positions = []
    if positions and cmd.key_specs is not None and any(
            s.find == "keynum" and not s.positions(args) for s in cmd.key_specs):
        # A key count that overruns the arguments: Redis finds no keys.
        positions = []
    if not positions:
        if "no_mandatory_keys" in cmd.flags:
            return []
        raise CommandError("ERR Invalid arguments specified for command")
    return [(p if positions_only else args[p], cmd) for p in positions if 0 <= p < n]


@command("command|help", 2, "loading stale", group="server", acl=("connection",),
         summary="Returns helpful text about the different subcommands.", since="5.0.0",
         complexity="O(1)")
def command_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("COMMAND", [
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands in this server.",
        "LIST",
        "    Return a list of all commands in this server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full command.",
    ])
