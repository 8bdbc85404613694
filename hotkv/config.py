"""Configuration: every setting, with redis.conf names, types and defaults.

One table (``PARAMS``) describes each parameter: its type (int, memory,
bool, enum, string, special), default, whether CONFIG SET may change it, and
aliases (``list-max-ziplist-size`` is ``list-max-listpack-size``).  The same
table serves CONFIG GET/SET, ``hotkv serve --name value`` and config files.
Settings hotkv does not act on (encoding tuning knobs, say) are accepted and
stored so tools that set them keep working; they are marked inert.

A module that owns a behaviour registers the parameters it reads with
``param(...)`` at import time and reads ``server.config.values[name]``.
"""

from __future__ import annotations

import shlex

_MEM_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2,
              "g": 1000**3, "gb": 1024**3}


class ConfigError(Exception):
    pass


class Param:
    __slots__ = ("name", "kind", "default", "mutable", "aliases", "choices", "lo", "hi",
                 "inert", "on_set", "fmt", "parse_fn", "multi")

    def __init__(self, name, kind, default, mutable=True, aliases=(), choices=(), lo=None,
                 hi=None, inert=False, on_set=None, fmt=None, parse_fn=None, multi=False):
        self.name = name
        self.kind = kind
        self.default = default
        self.mutable = mutable
        self.aliases = tuple(aliases)
        self.choices = tuple(choices)
        self.lo = lo
        self.hi = hi
        self.inert = inert
        self.on_set = on_set
        self.fmt = fmt
        self.parse_fn = parse_fn
        self.multi = multi

    def parse(self, text: str):
        """Text -> value, or raise ConfigError with Redis's reason."""
        if self.parse_fn is not None:
            return self.parse_fn(text)
        if self.kind == "bool":
            t = text.lower()
            if t == "yes":
                return True
            if t == "no":
                return False
            raise ConfigError("argument must be 'yes' or 'no'")
        if self.kind == "int":
            try:
                v = int(text)
            except ValueError:
                raise ConfigError("argument couldn't be parsed into an integer") from None
            return self._range(v)
        if self.kind == "memory":
            v = parse_memory(text)
            if v is None:
                raise ConfigError("argument must be a memory value")
            return self._range(v)
        if self.kind == "enum":
            t = text.lower()
            if t not in self.choices:
                raise ConfigError("argument(s) must be one of the following: "
                                  + ", ".join(self.choices))
            return t
        return text

    def _range(self, v):
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            lo = -LLONG_MAX - 1 if self.lo is None else self.lo
            hi = LLONG_MAX if self.hi is None else self.hi
            raise ConfigError("argument must be between %d and %d inclusive" % (lo, hi))
        return v

    def format(self, value) -> str:
        if self.fmt is not None:
            return self.fmt(value)
        if self.kind == "bool":
            return "yes" if value else "no"
        return str(value)


def parse_memory(text: str):
    t = text.strip().lower()
    num = t.rstrip("kmgb")
    unit = t[len(num):]
    if unit not in _MEM_UNITS or not num or not num.isdigit():
        return None
    return int(num) * _MEM_UNITS[unit]


PARAMS: dict[str, Param] = {}
ALIASES: dict[str, str] = {}


def param(name, kind, default, **kw) -> Param:
    p = Param(name, kind, default, **kw)
    PARAMS[name] = p
    for a in p.aliases:
        ALIASES[a] = name
    return p


INT_MAX = 2**31 - 1
LLONG_MAX = 2**63 - 1


def _parse_hz(text: str) -> int:
    """Redis accepts 0..INT_MAX and clamps to 1..500."""
    try:
        v = int(text)
    except ValueError:
        raise ConfigError("argument couldn't be parsed into an integer") from None
    if v < 0 or v > INT_MAX:
        raise ConfigError("argument must be between 0 and %d inclusive" % INT_MAX)
    return min(max(v, 1), 500)


def _parse_save(text: str) -> str:
    """'' or pairs of <seconds> <changes>."""
    parts = text.split()
    if len(parts) % 2:
        raise ConfigError("Invalid save parameters")
    for p in parts:
        if not p.isdigit():
            raise ConfigError("Invalid save parameters")
    return " ".join(parts)


# -- server ---------------------------------------------------------------
param("port", "int", 6379, mutable=False, lo=0, hi=65535)
param("bind", "string", "127.0.0.1", mutable=False)
param("unixsocket", "string", "", mutable=False)
param("unixsocketperm", "int", 0, mutable=False)
param("tcp-backlog", "int", 511, mutable=False)
param("databases", "int", 16, mutable=False, lo=1, hi=2**31 - 1)
param("loglevel", "enum", "notice", choices=("debug", "verbose", "notice", "warning", "nothing"))
param("logfile", "string", "", mutable=False)
param("dir", "string", ".")
param("requirepass", "string", "")
param("protected-mode", "bool", True)
param("maxclients", "int", 10000, lo=1, hi=2**32 - 1)
param("timeout", "int", 0, lo=0, hi=INT_MAX)
param("tcp-keepalive", "int", 300, lo=0, hi=INT_MAX)
param("hz", "int", 10, parse_fn=_parse_hz)
param("maxmemory", "memory", 0, lo=0)
param("maxmemory-policy", "enum", "noeviction", choices=(
    "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru",
    "allkeys-lfu", "allkeys-random", "noeviction"))
param("maxmemory-samples", "int", 5, inert=True)
param("proto-max-bulk-len", "memory", 512 * 1024 * 1024, lo=1024 * 1024, hi=LLONG_MAX)
param("client-query-buffer-limit", "memory", 1024 * 1024 * 1024, lo=1024 * 1024, hi=LLONG_MAX)
param("enable-debug-command", "enum", "no", mutable=False, choices=("no", "yes", "local"))
param("enable-protected-configs", "enum", "no", mutable=False, choices=("no", "yes", "local"))
param("daemonize", "bool", False, mutable=False)
param("pidfile", "string", "", mutable=False)
param("save", "string", "", parse_fn=_parse_save)
param("dbfilename", "string", "dump.rdb")
# RDB snapshots (hotkv/snapshot): Valkey's defaults; rdb-key-save-delay (microseconds per
# key, as Valkey) lets tests hold a BGSAVE child open.
param("rdbcompression", "bool", True)
param("rdbchecksum", "bool", True, mutable=False)
param("stop-writes-on-bgsave-error", "bool", True)
param("rdb-key-save-delay", "int", 0, lo=-INT_MAX - 1, hi=INT_MAX)
param("notify-keyspace-events", "string", "")
param("lua-time-limit", "int", 5000, inert=True, aliases=("busy-reply-threshold",))
param("slowlog-log-slower-than", "int", 10000)
param("slowlog-max-len", "int", 128)
param("latency-tracking", "bool", True, inert=True)
param("active-expire-effort", "int", 1, lo=1, hi=10)
param("lazyfree-lazy-user-del", "bool", False, inert=True)
param("lazyfree-lazy-user-flush", "bool", False, inert=True)
param("lazyfree-lazy-expire", "bool", False, inert=True)
param("lazyfree-lazy-eviction", "bool", False, inert=True)
param("lazyfree-lazy-server-del", "bool", False, inert=True)
param("io-threads", "int", 1, mutable=False, inert=True)
param("appendonly", "bool", False)
param("appendfilename", "string", "appendonly.aof", mutable=False)
param("appenddirname", "string", "appendonlydir", mutable=False)
param("appendfsync", "enum", "everysec", choices=("everysec", "always", "no"))
param("auto-aof-rewrite-percentage", "int", 100, lo=0, hi=INT_MAX)
param("auto-aof-rewrite-min-size", "memory", 64 * 1024 * 1024, lo=0)
param("aof-load-truncated", "bool", True)
param("aof-use-rdb-preamble", "bool", False, inert=True)
param("no-appendfsync-on-rewrite", "bool", False)
param("client-output-buffer-limit", "string",
      "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
param("tls-port", "int", 0, mutable=False)
param("tls-cert-file", "string", "")
param("tls-key-file", "string", "")
param("tls-ca-cert-file", "string", "")
param("tls-auth-clients", "enum", "yes", choices=("yes", "no", "optional"))
param("tls-protocols", "string", "")
param("aclfile", "string", "", mutable=False)
param("replicaof", "string", "", mutable=False, aliases=("slaveof",), inert=True)
param("acllog-max-len", "int", 128)
# -- encoding knobs: accepted so tuning scripts keep working ---------------
for _name, _kind, _default, _aliases in (
        ("list-max-listpack-size", "int", -2, ("list-max-ziplist-size",)),
        ("list-compress-depth", "int", 0, ()),
        ("hash-max-listpack-entries", "int", 128, ("hash-max-ziplist-entries",)),
        ("hash-max-listpack-value", "int", 64, ("hash-max-ziplist-value",)),
        ("set-max-intset-entries", "int", 512, ()),
        ("set-max-listpack-entries", "int", 128, ()),
        ("set-max-listpack-value", "int", 64, ()),
        ("zset-max-listpack-entries", "int", 128, ("zset-max-ziplist-entries",)),
        ("zset-max-listpack-value", "int", 64, ("zset-max-ziplist-value",)),
        ("stream-node-max-bytes", "memory", 4096, ()),
        ("stream-node-max-entries", "int", 100, ()),
        ("activerehashing", "bool", True, ()),
        ("sanitize-dump-payload", "enum", "no", ()),
        ("hll-sparse-max-bytes", "memory", 3000, ()),
        ("active-defrag-cycle-min", "int", 1, ()),
        ("repl-backlog-size", "memory", 1024 * 1024, ()),
        ("min-replicas-to-write", "int", 0, ()),
        ("lfu-log-factor", "int", 10, ()),
        ("lfu-decay-time", "int", 1, ()),
        ("replica-read-only", "bool", True, ("slave-read-only",)),
        ("latency-monitor-threshold", "int", 0, ()),
        ("close-on-oom", "bool", False, ()),
):
    if _name == "sanitize-dump-payload":
        param(_name, "enum", "no", choices=("no", "yes", "clients"), inert=True)
    else:
        param(_name, _kind, _default, aliases=_aliases, inert=True)
# Redis's ranges for the knobs clients and test suites set.
for _name, _lo, _hi in (("list-max-listpack-size", -INT_MAX - 1, INT_MAX),
                        ("list-compress-depth", 0, INT_MAX),
                        ("hash-max-listpack-entries", 0, LLONG_MAX),
                        ("hash-max-listpack-value", 0, LLONG_MAX),
                        ("zset-max-listpack-entries", 0, LLONG_MAX),
                        ("zset-max-listpack-value", 0, LLONG_MAX),
                        ("stream-node-max-entries", 0, LLONG_MAX),
                        ("stream-node-max-bytes", 0, LLONG_MAX)):
    PARAMS[_name].lo, PARAMS[_name].hi = _lo, _hi


class Config:
    """The live settings of one server."""

    def __init__(self, overrides: dict | None = None):
        self.values = {name: p.default for name, p in PARAMS.items()}
        self.listeners = {}   # name -> callback(value), set by owning modules
        for name, value in (overrides or {}).items():
            self.set_from_text(name, value if isinstance(value, str) else _to_text(value),
                               startup=True)

    def canonical(self, name: str) -> str | None:
        name = name.lower()
        if name in PARAMS:
            return name
        return ALIASES.get(name)

    def get(self, name: str):
        return self.values[self.canonical(name) or name]

    def set_from_text(self, name: str, text: str, startup: bool = False):
        canon = self.canonical(name)
        if canon is None:
            raise ConfigError("unknown")
        p = PARAMS[canon]
        if not startup and not p.mutable:
            raise ConfigError("immutable")
        value = p.parse(text)
        if p.multi and startup and self.values.get(canon):
            value = self.values[canon] + value   # a repeated line adds to the earlier ones
        self.values[canon] = value
        cb = self.listeners.get(canon)
        if cb is not None:
            cb(value)
        return canon



def _to_text(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def parse_config_file(text: str) -> list[tuple[str, str]]:
    """redis.conf lines -> (name, value text) pairs, in order."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parts = shlex.split(line, posix=True)
        except ValueError as e:
            raise ConfigError(f"line {lineno}: {e}") from None
        if not parts:
            continue
        name = parts[0].lower()
        value = " ".join(parts[1:]) if len(parts) > 1 else ""
        out.append((name, value))
    return out
