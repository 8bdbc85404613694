"""Configuration: every setting, with redis.conf names, types and defaults.

One table (``PARAMS``) describes each parameter: its type (int, memory,
bool, enum, string, special), default, whether CONFIG SET may change it, and
aliases (``list-max-ziplist-size`` is ``list-max-listpack-size``).  The same
table serves CONFIG GET/SET, ``hotkv serve --name value`` and config files.
Settings hotkv does not act on (encoding tuning knobs, say) are accepted and
stored so tools that set them keep working; they are marked inert.

Valkey 8.1.8's own table is ``hotkv.core.config_table``; ``_load_table`` lays it over
the parameters defined here: every Valkey name exists (227 in ``CONFIG GET *``),
with Valkey's aliases, ranges, mutability, defaults and parse errors, and one
Valkey has that hotkv does not define is added inert.  Where hotkv keeps its own
default, range or mutability, ``_OWN_DEFAULT``/``_OWN_RANGE``/``_OWN_IMMUTABLE``
say so (and tests/test_config_parity.py says why).  Invariant: a parameter is
inert unless something in hotkv reads its value.

A module that owns a behaviour registers the parameters it reads with
``param(...)`` at import time and reads ``server.config.values[name]``.
"""

from __future__ import annotations

from ..protocol.resp import split_inline_args
from .config_table import HIDDEN_ROWS, ROWS

_MEM_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2,
              "g": 1000**3, "gb": 1024**3}


class ConfigError(Exception):
    pass


class Param:
    __slots__ = ("name", "kind", "default", "mutable", "aliases", "choices", "lo", "hi",
                 "inert", "on_set", "fmt", "parse_fn", "multi", "flags")

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
        self.flags = ""   # config_table's U (unsigned), % (percent), 8 (octal), ...

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
        if self.kind in ("int", "memory"):
            return self._range(self._number(text))
        if self.kind == "enum":
            t = text.lower()
            if t not in self.choices:
                raise ConfigError("argument(s) must be one of the following: "
                                  + ", ".join(self.choices))
            return t
        return text

    def _number(self, text: str) -> int:
        """Valkey's numericParseString: memory, then percent, then octal, then a
        plain long long; the error names the first form the setting accepts."""
        if self.kind == "memory":
            v = parse_memory(text)
            if v is not None:
                return v
        if "%" in self.flags and len(text) > 1 and text.endswith("%") \
                and _is_ll(text[:-1]) and int(text[:-1]) >= 0:
            return -int(text[:-1])   # a percentage is kept negative, as Valkey does
        if "8" in self.flags:
            try:
                return int(text, 8)
            except ValueError:
                pass
        elif self.kind == "int" and _is_ll(text):
            return int(text)
        if self.kind == "memory":
            raise ConfigError("argument must be a memory or percent value" if "%" in self.flags
                              else "argument must be a memory value")
        if "8" in self.flags:
            raise ConfigError("argument couldn't be parsed as an octal number")
        raise ConfigError("argument couldn't be parsed into an integer")

    def _range(self, v):
        if "U" in self.flags and self.lo is not None and self.hi is not None:
            u = v & (2**64 - 1)   # C's unsigned comparison: -1 is 2^64-1
            if u < self.lo or u > self.hi:
                if "8" in self.flags:
                    raise ConfigError("argument must be between %o and %o inclusive"
                                      % (self.lo, self.hi))
                raise ConfigError("argument must be between %d and %d inclusive"
                                  % (self.lo, self.hi))
            return u
        if "%" in self.flags and v < 0:
            if self.lo is not None and v < self.lo:
                raise ConfigError("percentage argument must be less or equal to %d" % -self.lo)
            return v
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
        if "%" in self.flags and value < 0:
            return "%d%%" % -value
        if "U" in self.flags and "Q" not in self.flags and value >= 2**63:
            return str(value - 2**64)   # Valkey prints every number as a long long
        if "8" in self.flags:
            return "%o" % value
        return str(value)

    def conf_text(self, value) -> str:
        """The value as CONFIG REWRITE writes it: memory in the largest exact
        unit (200mb, not 209715200), as Valkey's rewriteConfigFormatMemory."""
        if self.kind == "memory" and self.fmt is None and isinstance(value, int) and value > 0:
            for unit, size in (("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)):
                if value % size == 0:
                    return "%d%s" % (value // size, unit)
        return self.format(value)


def _is_ll(text: str) -> bool:
    """string2ll's syntax: an optional '-', digits, no leading zeros, in range."""
    if not text or len(text) > 20:
        return False
    body = text[1:] if text[0] == "-" else text
    if not body.isdigit() or not body.isascii() or (len(body) > 1 and body[0] == "0"):
        return False
    return -2**63 <= int(text) < 2**63


def parse_memory(text: str):
    t = text.strip().lower()
    num = t.rstrip("kmgb")
    unit = t[len(num):]
    if unit not in _MEM_UNITS or not num or not num.isdigit() or not num.isascii():
        return None
    # strtoull saturates, the multiplication wraps: what memtoull gives.
    return (min(int(num), 2**64 - 1) * _MEM_UNITS[unit]) % 2**64


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
    if not _is_ll(text):
        raise ConfigError("argument couldn't be parsed into an integer")
    v = int(text)
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
param("tcp-keepalive", "int", 300, lo=0, hi=INT_MAX, inert=True)
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
param("latency-tracking", "bool", True)    # hotkv.core.latency: the per-command histograms
param("active-expire-effort", "int", 1, lo=1, hi=10)
# DEL as UNLINK, FLUSH* ASYNC by default: big values freed after the reply (hotkv.core.lazyfree).
# All five default to yes as in Valkey 8.1: a deletion by expiry, eviction or the server
# (RESTORE with a past TTL, SPOP of the whole set) is propagated as UNLINK.
param("lazyfree-lazy-user-del", "bool", True)
param("lazyfree-lazy-user-flush", "bool", True)
param("lazyfree-lazy-expire", "bool", True)
param("lazyfree-lazy-eviction", "bool", True)
param("lazyfree-lazy-server-del", "bool", True)
param("io-threads", "int", 1, mutable=False, inert=True)
param("appendonly", "bool", False)
param("appendfilename", "string", "appendonly.aof", mutable=False)
param("appenddirname", "string", "appendonlydir", mutable=False, inert=True)
param("appendfsync", "enum", "everysec", choices=("everysec", "always", "no"))
param("auto-aof-rewrite-percentage", "int", 100, lo=0, hi=INT_MAX)
param("auto-aof-rewrite-min-size", "memory", 64 * 1024 * 1024, lo=0)
param("aof-load-truncated", "bool", True)
param("aof-use-rdb-preamble", "bool", True)
param("no-appendfsync-on-rewrite", "bool", False, inert=True)
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
# Read by hotkv.core.access (OBJECT FREQ's counter) and hotkv.core.latency (LATENCY events).
for _name in ("lfu-log-factor", "lfu-decay-time", "latency-monitor-threshold"):
    PARAMS[_name].inert = False
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


# Where hotkv keeps its own default on purpose (tests/test_config_parity.py lists why).
_OWN_DEFAULT = {"dir", "port", "bind", "save"}
# Table settings hotkv acts on in ``hotkv serve`` (hotkv.tools.cli: logging, supervision); an
# embedded server has no log or supervisor of its own.
_SERVE_ONLY = {"always-show-logo", "log-format", "log-timestamp-format", "supervised",
               "syslog-enabled", "syslog-ident", "syslog-facility", "shutdown-on-sigint",
               "shutdown-on-sigterm"}
# tls-port -1 asks hotkv for a free port (tests use it): wider than Valkey's 0..65535.
_OWN_RANGE = {"tls-port"}
# Settings Valkey changes at run time that hotkv cannot (TLS listeners are made once).
_OWN_IMMUTABLE = {"tls-port"}


def _check_activedefrag(text):
    if text.lower() == "yes":
        raise ConfigError("Active defragmentation cannot be enabled: it requires a server "
                          "compiled with a modified Jemalloc like the one shipped by default "
                          "with the source distribution")
    if text.lower() == "no":
        return False
    raise ConfigError("argument must be 'yes' or 'no'")


def _ip_check(what):
    def check(text):
        import socket
        family = socket.AF_INET if what == "IPv4" else socket.AF_INET6
        if text:
            try:
                socket.inet_pton(family, text)
            except (OSError, ValueError):
                raise ConfigError("Invalid %s address" % what) from None
        return text
    return check


def _check_hostname(text):
    if len(text.encode()) >= 256:
        raise ConfigError("Hostnames must be less than 256 characters")
    if any(not (ch.isascii() and (ch.isalnum() or ch in "-.")) for ch in text):
        raise ConfigError("Hostnames may only contain alphanumeric characters, hyphens or dots")
    return text


_TITLE_VARS = {"title": "", "listen-addr": "*:0", "server-mode": "", "port": "0",
               "tls-port": "0", "unixsocket": "", "config-file": ""}


def _check_proc_title(text):
    """validateProcTitleTemplate: known {variables}, not empty once expanded."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "{":
            j = text.find("}", i)
            if j < 0 or text[i + 1:j] not in _TITLE_VARS:
                raise ConfigError("template format is invalid or contains unknown variables")
            out.append(_TITLE_VARS[text[i + 1:j]])
            i = j + 1
        elif text[i] == "}":
            raise ConfigError("template format is invalid or contains unknown variables")
        else:
            out.append(text[i])
            i += 1
    if not "".join(out).strip():
        raise ConfigError("template format is invalid or contains unknown variables")
    return text


def _check_locale(text):
    """updateLocaleCollate: setlocale(LC_COLLATE) must know the name (the process's
    collation is put back: hotkv compares bytes)."""
    import locale
    old = locale.setlocale(locale.LC_COLLATE)
    try:
        locale.setlocale(locale.LC_COLLATE, text)
    except locale.Error:
        raise ConfigError("Invalid locale name") from None
    finally:
        locale.setlocale(locale.LC_COLLATE, old)
    return text


def _check_oom_values(text):
    parts = text.split()
    if len(parts) != 3:
        raise ConfigError("wrong number of arguments")
    for part in parts:
        if not _is_ll(part) or not -2000 <= int(part) <= 2000:
            raise ConfigError("Invalid oom-score-adj-values, elements must be between -2000 "
                              "and 2000.")
    return " ".join(str(int(x)) for x in parts)


def _check_percentiles(text):
    parts = text.split()
    for part in parts:
        try:
            v = float(part)
        except ValueError:
            v = None
        if v is None or part.strip() != part or part.lower() in ("nan", "inf", "-inf"):
            raise ConfigError("Invalid latency-tracking-info-percentiles parameters")
        if not 0.0 <= v <= 100.0:
            raise ConfigError("latency-tracking-info-percentiles parameters should sit "
                              "between [0.0,100.0]")
    return " ".join(_fmt_double(float(x)) for x in parts)


def _fmt_double(v: float) -> str:
    return "%d" % v if v == int(v) else repr(v)


# Valkey's SHUTDOWN_* bits: the shutdown-on-sig* settings' values, and the
# flags of Server.prepare_shutdown (the SHUTDOWN command's options).
SHUTDOWN_SAVE, SHUTDOWN_NOSAVE, SHUTDOWN_NOW, SHUTDOWN_FORCE = 1, 2, 4, 8
_SHUTDOWN_FLAGS = (("default", 0), ("save", SHUTDOWN_SAVE), ("nosave", SHUTDOWN_NOSAVE),
                   ("now", SHUTDOWN_NOW), ("force", SHUTDOWN_FORCE))


def _parse_shutdown_flags(text):
    """A multi-argument enum: flags OR-ed; SAVE and NOSAVE exclude each other."""
    words, value = text.split(), 0
    names = dict(_SHUTDOWN_FLAGS)
    if not words or any(w.lower() not in names for w in words):
        raise ConfigError("argument(s) must be one of the following: "
                          + ", ".join(n for n, _ in _SHUTDOWN_FLAGS))
    for w in words:
        value |= names[w.lower()]
    if value & 1 and value & 2:
        raise ConfigError("shutdown options SAVE and NOSAVE can't be used simultaneously")
    return value


def _format_shutdown_flags(value):
    return next((n for n, v in _SHUTDOWN_FLAGS if v == value), None) or \
        " ".join(n for n, v in _SHUTDOWN_FLAGS if v and value & v == v)


def _parse_perm(text):
    """unixsocketperm: read as octal (Valkey's range 0..777 octal), kept as the octal
    digits (700 is 0o700), the form hotkv.net.listeners reads."""
    p = PARAMS["unixsocketperm"]
    return int("%o" % p._range(p._number(text)))


def bind_addresses(text: str) -> list[str]:
    """``bind`` as Valkey reads it: ``*`` every IPv4 address, ``::*`` every IPv6
    one, a leading ``-`` marks an address as optional (hotkv binds it like any)."""
    hosts = [h.lstrip("-") for h in text.split()] or ["127.0.0.1"]
    return [{"*": "0.0.0.0", "::*": "::"}.get(h, h) for h in hosts]


def _parse_replicaof(text):
    """``replicaof host port`` / ``no one``, checked as Valkey checks it; hotkv
    follows that primary once its data is loaded (hotkv.replication.replica)."""
    words = text.split()
    if len(words) != 2:
        raise ConfigError("wrong number of arguments")
    if words[0].lower() == "no" and words[1].lower() == "one":
        return ""
    if not _is_ll(words[1]) or not 0 <= int(words[1]) <= 65535:
        raise ConfigError("Invalid primary port")
    return "%s %d" % (words[0], int(words[1]))


_PARSERS = {
    "replicaof": _parse_replicaof,
    "unixsocketperm": _parse_perm,
    "activedefrag": _check_activedefrag,
    "cluster-announce-client-ipv4": _ip_check("IPv4"),
    "cluster-announce-client-ipv6": _ip_check("IPv6"),
    "cluster-announce-hostname": _check_hostname,
    "proc-title-template": _check_proc_title,
    "locale-collate": _check_locale,
    "oom-score-adj-values": _check_oom_values,
    "latency-tracking-info-percentiles": _check_percentiles,
    "shutdown-on-sigint": _parse_shutdown_flags,
    "shutdown-on-sigterm": _parse_shutdown_flags,
}


def _load_table():
    """Valkey's table (hotkv.core.config_table) over the parameters above: aliases, flags,
    ranges, mutability and defaults come from it; a setting hotkv does not define
    is added, accepted and inert."""
    for name, kind, default, flags, aliases, extra in ROWS + HIDDEN_ROWS:
        p = PARAMS.get(name)
        if p is None:   # hotkv names the setting by an alias (slowlog-max-len, lua-time-limit)
            p = next((PARAMS[a] for a in aliases if a in PARAMS), None)
            names = (name,) + tuple(aliases)
        else:
            names = aliases
        if p is None:
            p = param(name, kind, None, inert=name not in _SERVE_ONLY)
        for a in names:
            if a != p.name and a not in p.aliases:
                p.aliases += (a,)
                ALIASES[a] = p.name
        p.flags = flags
        if p.name not in _OWN_IMMUTABLE:
            p.mutable = "I" not in flags
        if kind in ("int", "memory") and p.parse_fn is None and p.name not in _OWN_RANGE:
            p.kind, (p.lo, p.hi) = kind, extra
        elif kind == "enum" and p.parse_fn is None:
            p.kind, p.choices = kind, extra
        if name in _PARSERS and p.parse_fn is None:
            p.parse_fn = _PARSERS[name]
            if name.startswith("shutdown-on-"):
                p.fmt = _format_shutdown_flags
            elif name == "unixsocketperm":
                p.fmt = str
        if p.name not in _OWN_DEFAULT and (p.default is None or p.parse_fn is None):
            p.default = p.parse(default) if kind != "string" else default


_load_table()
# Read by hotkv.replication.replica (hotkv as a replica of a Valkey primary).
for _name in ("replicaof", "replica-read-only", "replica-serve-stale-data", "primaryauth",
              "primaryuser", "repl-timeout", "replica-priority", "replica-announced",
              "replica-announce-ip", "replica-announce-port", "tls-replication",
              "tls-client-cert-file", "tls-client-key-file",
              "activerehashing"):      # (hotkv.server's cron: key-index resizes)
    PARAMS[_name].inert = False
# Read by the module named (so not inert; tests/test_first_hour.py fails on a setting
# still marked inert whose name a module of hotkv/ reads).
for _name in (
        "bind-source-addr",                       # replication.replica, commands.migrate
        "extended-redis-compatibility",           # HELLO, INFO server
        "hash-max-listpack-entries", "hash-max-listpack-value",     # OBJECT ENCODING
        "set-max-intset-entries", "set-max-listpack-entries", "set-max-listpack-value",
        "zset-max-listpack-entries", "zset-max-listpack-value",
        "list-max-listpack-size", "list-compress-depth",            # encodings, RDB, DEBUG
        "stream-node-max-bytes", "stream-node-max-entries",         # commands.streams
        "hll-sparse-max-bytes",                                     # commands.hll
        "key-load-delay", "loading-process-events-interval-bytes",  # rdbfile
        "latency-tracking-info-percentiles",                        # latency
        "lua-time-limit",                                           # lua.engine
        "maxmemory-clients",                                        # client_eviction
        "proc-title-template", "set-proc-title",                    # proctitle
        "replica-ignore-maxmemory",                                 # eviction
        "min-replicas-to-write", "min-replicas-max-lag", "repl-backlog-size",
        "repl-backlog-ttl", "repl-diskless-sync", "repl-diskless-sync-delay",
        "repl-diskless-sync-max-replicas", "repl-ping-replica-period"):  # replication
    PARAMS[_name].inert = False
# hotkv's own settings (not Valkey's): the dashboard and metrics HTTP port
# (hotkv.http; 0 = off) and how many keys /metrics gives series to.  Listed by
# exact name only, as the hidden ones, so CONFIG GET * stays Valkey's.
param("http-port", "int", 0, lo=0, hi=65535)
param("http-metrics-top-keys", "int", 50, lo=0, hi=100000)
OWN_SETTINGS = frozenset({"http-port", "http-metrics-top-keys"})
# Valkey's hidden settings: answered by exact name, never listed for a pattern.
HIDDEN = frozenset(row[0] for row in HIDDEN_ROWS) | OWN_SETTINGS


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


def parse_config_file(text: str, numbered: bool = False) -> list:
    """redis.conf lines -> (name, value text) pairs, in order; with ``numbered``,
    (name, value text, line number, the line) for error messages.  Unbalanced
    quotes raise ConfigError with ``lineno`` and ``line`` set."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        # Split as valkey-server does (sdssplitargs): "..." with \n \t \xHH
        # escapes, '...' with \' only, a closing quote followed by a space.
        words = split_inline_args(line.encode("utf-8", "surrogateescape"))
        if words is None:
            e = ConfigError(f"line {lineno}: Unbalanced quotes in configuration line")
            e.lineno, e.line = lineno, line
            raise e
        parts = [w.decode("utf-8", "surrogateescape") for w in words]
        if not parts:
            continue
        name = parts[0].lower()
        value = " ".join(parts[1:]) if len(parts) > 1 else ""
        out.append((name, value, lineno, line) if numbered else (name, value))
    return out


def did_you_mean(name: str, extra=()) -> str | None:
    """The setting (or alias) closest to a misspelt ``name`` (``maxmemroy`` ->
    ``maxmemory``, ``prot`` -> ``port``), or None when none is close."""
    import difflib
    found = difflib.get_close_matches(name.lower(), [*PARAMS, *ALIASES, *extra], n=1,
                                      cutoff=0.7)
    return found[0] if found else None
