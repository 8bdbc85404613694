"""CONFIG: GET, SET, RESETSTAT, REWRITE and HELP (Redis's config.c commands).

Owns the CONFIG command; the parameters themselves (names, aliases, types,
defaults, parsing and formatting) are ``hotkv.core.config``'s, and a subsystem
that must act when a parameter changes registers a listener in
``server.config.listeners``.

* CONFIG RESETSTAT zeroes the server's counters, the command and error
  statistics, the ACL denial counters and the instantaneous metrics
  (``hotkv.core.stats``), each by name.
* CONFIG REWRITE keeps the file's comments and order (``rewrite_config_file``)
  and writes memory sizes in units, as Valkey (``maxmemory 200mb``).
* CONFIG GET with a pattern lists Valkey's table (``HIDDEN``: directives such as
  rename-command and user answer only by exact name, as in Valkey).
* A changed RDMA setting fails as on a Valkey built without RDMA.

Invariants: a failed CONFIG SET leaves every parameter as it was -- all
values are parsed before any is applied, and a listener's refusal rolls
back those already applied (their listeners called again with the old
value); protected parameters change only as enable-protected-configs allows.
"""

from __future__ import annotations

import logging
import os

from ..core.config import ALIASES, HIDDEN as HIDDEN_SETTINGS, PARAMS, ConfigError, parse_config_file
from ..core.registry import command, container
from ..core.stats import reset_instantaneous
from ..observe import loopstats
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.replies import cstr, help_reply
from ..protocol.resp import OK
from ..protocol.util import stringmatch

log = logging.getLogger("hotkv")

container("config", group="server", summary="A container for server configuration commands.",
          since="2.0.0", complexity="Depends on subcommand.")


@command("config|get", -3, "admin noscript loading stale", group="server", args="parameter...",
         summary="Returns the effective values of configuration parameters.", since="2.0.0",
         complexity="O(N) when N is the number of configuration parameters provided",
         history=(("7.0.0", "Added the ability to pass multiple pattern parameters in one call"),))
def config_get(c, argv):
    """Get the values of configuration parameters."""
    values = c.server.config.values
    config = c.server.config
    matches: dict = {}
    for arg in argv[2:]:
        if not any(ch in arg for ch in b"[*?"):
            name = cstr(arg)
            if name in matches:
                continue
            canon = config.canonical(name)
            if canon is not None:
                matches[name] = PARAMS[canon].format(values[canon])
            continue
        for canon, p in PARAMS.items():
            if canon in HIDDEN:
                continue
            for n in (canon,) + p.aliases:
                if n in matches:
                    continue
                if stringmatch(arg, n.encode(), nocase=True):
                    matches[n] = p.format(values[canon])
    return {k.encode("utf-8", "surrogateescape"): v.encode("utf-8", "surrogateescape")
            for k, v in matches.items()}


def _protected_allowed(c) -> bool:
    mode = c.server.config.values["enable-protected-configs"]
    if mode == "yes":
        return True
    if mode == "local":
        addr = c.addr
        return addr.startswith(("127.", "[::1]", "::1", "/")) or addr == ""
    return False


# Settings a pattern does not list (Valkey's hidden or non-table directives);
# CONFIG GET by their exact name still answers.
HIDDEN = {"rename-command", "user", "close-on-oom"} | HIDDEN_SETTINGS

# Parameters CONFIG SET may only change when enable-protected-configs allows.
PROTECTED = {"dir", "dbfilename"}


@command("config|set", -4, "admin noscript loading stale", group="server",
         args="data(parameter value)...", summary="Sets configuration parameters in-flight.",
         since="2.0.0",
         complexity="O(N) when N is the number of configuration parameters provided",
         history=(("7.0.0", "Added the ability to set multiple parameters in one call."),))
def config_set(c, argv):
    """Set configuration parameters to the given values."""
    if len(argv) % 2:
        raise CommandError(errors.SYNTAX)
    config = c.server.config
    invalid_name = None
    errstr = err_name = None
    failed = deny_loading = False
    todo = []   # (canonical, name as spelled, text)
    for i in range(2, len(argv), 2):
        typed = cstr(argv[i])
        canon = config.canonical(typed)
        if canon is None:
            if not failed:
                invalid_name = typed
                failed = True
            continue
        if failed:
            continue
        p = PARAMS[canon]
        if not p.mutable or (canon in PROTECTED and not _protected_allowed(c)):
            errstr = "can't set immutable config" if not p.mutable else \
                "can't set protected config"
            err_name = typed
            failed = True
            continue
        if "L" in p.flags and c.server.loading:
            # Valkey's DENY_LOADING_CONFIG: its LOADING error goes before any
            # other (clients may retry on it, unlike a plain ERR).
            deny_loading = True
            failed = True
            continue
        if any(t[0] == canon for t in todo):
            errstr = "duplicate parameter"
            err_name = typed
            failed = True
            continue
        todo.append((canon, typed.lower(), cstr(argv[i + 1])))
    if not failed:
        parsed = []
        for canon, name, text in todo:
            try:
                parsed.append((canon, name, PARAMS[canon].parse(text)))
                flags = PARAMS[canon].flags
                if "R" in flags or ("r" in flags and parsed[-1][2] != config.values[canon]):
                    # Valkey's apply step (only for a changed value), built without RDMA
                    raise ConfigError("No RDMA building support.")
            except ConfigError as e:
                errstr, err_name, failed = str(e), name, True
                break
    if not failed:
        values = config.values
        old = [(canon, values[canon]) for canon, _, _ in parsed]
        applied = []
        try:
            for canon, name, value in parsed:
                values[canon] = value
                applied.append(canon)
                cb = config.listeners.get(canon)
                if cb is not None:
                    err_name = name
                    cb(value)
        except Exception as e:  # a listener refused the value: undo everything
            if not isinstance(e, ConfigError):
                log.warning("CONFIG SET %s: %s", err_name, e)
            errstr, failed = str(e) or type(e).__name__, True
            for canon, value in old:
                values[canon] = value
            for canon in applied:
                cb = config.listeners.get(canon)
                if cb is not None:
                    try:
                        cb(values[canon])
                    except Exception:  # pragma: no cover - restoring a known-good value
                        log.warning("could not restore %s after a failed CONFIG SET", canon)
        else:
            return OK
    if deny_loading:
        raise CommandError(errors.LOADING)
    if invalid_name is not None:
        raise CommandError("ERR Unknown option or number of arguments for CONFIG SET - '%s'"
                           % invalid_name)
    if errstr:
        raise CommandError("ERR CONFIG SET failed (possibly related to argument '%s') - %s"
                           % (err_name, errstr))
    raise CommandError("ERR CONFIG SET failed (possibly related to argument '%s')" % err_name)


def reset_stats(server):
    server.stat_numcommands = 0
    server.stat_numconnections = 0
    server.stat_rejected_conn = 0
    server.stat_expiredkeys = 0
    server.stat_keyspace_hits = 0
    server.stat_keyspace_misses = 0
    server.stat_net_input_bytes = 0
    server.stat_net_output_bytes = 0
    server.stat_unexpected_error_replies = 0
    server.stat_client_qbuf_limit_disconnections = 0
    server.stat_client_outbuf_limit_disconnections = 0
    server.lazyfreed_objects = 0          # hotkv.core.lazyfree
    server.stat_evictedkeys = 0
    server.stat_evictedclients = 0        # hotkv.clients.client_eviction
    server.eviction.reset_stats()         # total_eviction_exceeded_time (hotkv.core.eviction)
    if server.scripting is not None:
        server.scripting.evicted = 0      # evicted_scripts (hotkv.lua.engine)
    denied = server.acl.denied            # acl_access_denied_* (hotkv.clients.acl)
    for k in denied:
        denied[k] = 0
    server.cmdstats.reset()       # commandstats, errorstats, latency histograms (hotkv.core.stats)
    reset_instantaneous(server)
    loopstats.reset(server)               # eventloop_* and INFO DEBUG (hotkv.observe.loopstats)


@command("config|resetstat", 2, "admin noscript loading stale", group="server",
         summary="Resets the server's statistics.", since="2.0.0", complexity="O(1)")
def config_resetstat(c, argv):
    """Reset the server's statistics."""
    reset_stats(c.server)
    return OK


def rewrite_config_file(server, path: str, force_all: bool = False):
    """Rewrite ``path`` as Redis's CONFIG REWRITE: keep comments and the
    order of the lines, update the lines of parameters with their current
    values, drop later duplicates, and append changed parameters that were
    not in the file (``force_all``, DEBUG CONFIG-REWRITE-FORCE-ALL: every
    parameter CONFIG GET * lists, changed or not)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    values = server.config.values
    done = set()
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            out.append(line)
            continue
        try:
            pairs = parse_config_file(stripped)
        except ConfigError:
            out.append(line)
            continue
        name = pairs[0][0] if pairs else ""
        canon = name if name in PARAMS else ALIASES.get(name)
        if canon is None or (PARAMS[canon].multi and not PARAMS[canon].mutable):
            # A directive we do not know, or a repeatable one that cannot have
            # changed (rename-command): keep it verbatim.
            out.append(line)
            continue
        if canon in done:
            continue
        done.add(canon)
        if canon == "replicaof" and not values[canon]:
            continue   # no primary: no line, as Valkey (replicaof "" would not load)
        out.append(_conf_line(canon, values[canon]))
    # No save points is written as save "" even when it is the default: a file
    # without a save line starts valkey-server with its default save points.
    added = [canon for canon, p in PARAMS.items()
             if canon not in done and (values[canon] != p.default or
                                       (canon == "save" and not values[canon]) or
                                       (force_all and canon not in HIDDEN))
             and not (p.multi and not p.mutable)
             and not (canon == "replicaof" and not values[canon])]
    if added:
        if out and out[-1].strip():
            out.append("")
        out.append("# Generated by CONFIG REWRITE")
        out.extend(_conf_line(canon, values[canon]) for canon in added)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


_MULTI_ARG = {"save", "client-output-buffer-limit", "bind", "replicaof"}


def _conf_line(canon, value) -> str:
    p = PARAMS[canon]
    text = p.conf_text(value)
    if text == "" or (any(ch in text for ch in " \t\"'\\#")
                      and canon not in _MULTI_ARG and not p.multi):
        text = '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')
    return "%s %s" % (canon, text)


@command("config|rewrite", 2, "admin noscript loading stale", group="server",
         summary="Persists the effective configuration to file.", since="2.8.0", complexity="O(1)")
def config_rewrite(c, argv):
    """Rewrite the configuration file with the in-memory configuration."""
    path = c.server.config_file
    if not path:
        raise CommandError("ERR The server is running without a config file")
    try:
        rewrite_config_file(c.server, path)
    except OSError as e:
        log.warning("CONFIG REWRITE failed: %s", e)
        raise CommandError("ERR Rewriting config file: %s" % (e.strerror or e)) from None
    return OK


@command("config|help", 2, "loading stale", group="server",
         summary="Returns helpful text about the different subcommands.", since="5.0.0",
         complexity="O(1)")
def config_help(c, argv):
    """Show helpful text about the different subcommands."""
    return help_reply("CONFIG", [
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
    ])
