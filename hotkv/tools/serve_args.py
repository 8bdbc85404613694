"""``hotkv serve``'s own command line and config file: hotkv's dialect.

``parse_serve_args`` splits ``[CONFIG_FILE] [--name value ...]`` (a value
runs up to the next ``--option``, so ``--save 900 1 300 10`` works as with
redis-server); ``build_config`` reads the file (``include`` followed) and the
options into a ``Config``, options winning; a bad line is reported as
valkey-server does (``at line N >>> '...'``) with the closest name
(``did_you_mean``).  ``help_config`` is ``--help-config``: every setting, the
inert ones marked (``INERT_WHY``).  valkey-server's own dialect is
``valkey_args``.
"""

from __future__ import annotations

import logging

from ..core.config import (
    ALIASES,
    PARAMS,
    Config,
    ConfigError,
    did_you_mean,
    parse_config_file,
)
from ..core.config_table import DEPRECATED
from ..version import __version__

_LOGLEVELS = {"debug": logging.DEBUG, "verbose": logging.INFO, "notice": logging.INFO,
              "warning": logging.WARNING, "nothing": logging.CRITICAL + 10}


class UsageError(Exception):
    pass


def parse_serve_args(args: list[str]) -> tuple[str | None, list]:
    """``[config-file] [--name value ...]`` -> (path or None, [(name, value)]);
    value is None for a bare ``--flag``."""
    path = None
    settings: list[tuple[str, str]] = []
    i = 0
    if args and not args[0].startswith("--"):
        path = args[0]
        i = 1
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or arg == "--":
            raise UsageError("unexpected argument '%s' (options are --name value)" % arg)
        name = arg[2:]
        if "=" in name:
            name, value = name.split("=", 1)
            settings.append((name.lower(), value))
            i += 1
            continue
        j = i + 1
        values = []
        while j < len(args) and not (args[j].startswith("--") and len(args[j]) > 2):
            values.append(args[j])
            j += 1
        # A bare flag (--appendonly) is "yes" for a boolean, else an error.
        settings.append((name.lower(), " ".join(values) if values else None))
        i = j
    return path, settings


SERVE_DEFAULT_SAVE = "3600 1 300 100 60 10000"   # valkey-server's default save points


class ConfigFileError(UsageError):
    """A config file line hotkv cannot take, reported as valkey-server reports it
    (``*** FATAL CONFIG FILE ERROR ***``, the file and line number, ``>>> 'the
    line'``), then hotkv's reason."""

    def __init__(self, file_path: str, lineno: int, line: str, why: str):
        super().__init__(
            "\n*** FATAL CONFIG FILE ERROR (hotkv %s) ***\n"
            "Reading the configuration file %s, at line %d\n>>> '%s'\n%s"
            % (__version__, file_path, lineno, line, why))


def _unknown(name: str, option: bool) -> str:
    """"unknown setting 'x'", with the closest setting when one is close."""
    guess = did_you_mean(name, DEPRECATED)
    text = "unknown setting '%s'" % name
    if guess is not None:
        text += " (did you mean %s?)" % ("--" + guess if option else "'%s'" % guess)
    return text


def build_config(path: str | None, cli: list):
    """A ``Config`` from a config file and command-line settings, applied in
    order (the command line last, so it wins); every name and value is
    checked and an error names where it came from: the option, or the file,
    line number and line (``ConfigFileError``)."""
    pairs: list = []   # (name, value, where, (file, line number, line) or None)

    def read(file_path: str, depth: int):
        try:
            with open(file_path) as f:
                text = f.read()
        except OSError as e:
            raise UsageError("cannot read config file '%s': %s" % (file_path, e.strerror or e))
        try:
            file_pairs = parse_config_file(text, numbered=True)
        except ConfigError as e:
            if getattr(e, "lineno", None) is None:
                raise UsageError("config file '%s': %s" % (file_path, e))
            raise ConfigFileError(file_path, e.lineno, e.line,
                                  "Unbalanced quotes in configuration line") from None
        for name, value, lineno, line in file_pairs:
            if name == "include":   # redis.conf's include: the other file's lines, here
                if depth >= 10:
                    raise ConfigFileError(file_path, lineno, line, "includes nested too deeply")
                read(value, depth + 1)
            else:
                pairs.append((name, value, "config file '%s'" % file_path,
                              (file_path, lineno, line)))

    if path is not None:
        read(path, 0)
    pairs.extend((name, value, "option --%s" % name, None) for name, value in cli)
    config = Config()
    # `hotkv serve` keeps Valkey's default save points (EmbeddedServer has
    # none); a first "save" setting replaces them, as in redis.conf.
    config.set_from_text("save", SERVE_DEFAULT_SAVE, startup=True)
    config.given = set()   # the settings the file or the command line set
    config.deprecated = []
    seen_save = False
    for name, value, where, loc in pairs:
        try:
            canon = _apply_setting(config, name, value, where, seen_save)
        except UsageError as e:
            if loc is None:
                raise
            raise ConfigFileError(*loc, str(e).replace(" (%s)" % where, "")) from None
        seen_save = seen_save or canon == "save"
    return config


def _apply_setting(config, name: str, value, where: str, seen_save: bool):
    """One setting of build_config; its canonical name (None when ignored)."""
    canon = name if name in PARAMS else ALIASES.get(name)
    if canon is None and name in DEPRECATED and value and len(value.split()) == 1:
        config.deprecated.append(name)   # accepted and ignored, as valkey-server does
        return None
    if canon is None and name == "loadmodule":
        raise UsageError("'loadmodule' (%s): hotkv does not load Valkey modules" % where)
    if canon is None:
        raise UsageError("%s (%s)" % (_unknown(name, where.startswith("option")), where))
    if value is None:
        if PARAMS[canon].kind != "bool":
            raise UsageError("option --%s needs a value" % name)
        value = "yes"
    if canon == "save" and seen_save and value and where.startswith("config"):
        # redis.conf lists one "save <seconds> <changes>" rule a line.
        value = config.values["save"] + " " + value
    config.given.add(canon)
    try:
        config.set_from_text(canon, value, startup=True)
    except ConfigError as e:
        raise UsageError("invalid value '%s' for '%s' (%s): %s" % (value, name, where, e))
    return canon


# Why an inert setting has no effect, where the name alone does not say it.
INERT_WHY = {
    "shutdown-timeout": "it bounds the wait for replicas to catch up at shutdown; hotkv "
                        "does no replication wait at shutdown: it never waits for replicas",
}


def help_config() -> str:
    """``hotkv serve --help-config``: every setting, its default, and whether
    hotkv acts on it ("(inert)": accepted, kept, reported, no effect)."""
    out = ["Settings of valkey.conf / redis.conf (--name value, or a config file line).",
           "(inert): accepted, kept, reported by CONFIG GET and written by CONFIG REWRITE,",
           "but with no effect in hotkv.  (immutable): not changed by CONFIG SET.", ""]
    for name in sorted(PARAMS):
        p = PARAMS[name]
        try:
            default = p.conf_text(p.default) if p.default is not None else ""
        except (TypeError, ValueError):
            default = str(p.default)
        if name == "save":   # hotkv serve's, as valkey-server's (EmbeddedServer has none)
            default = SERVE_DEFAULT_SAVE
        marks = ("  (immutable)" if not p.mutable else "") + ("  (inert)" if p.inert else "")
        out.append("%-40s %s%s" % (name, default if default != "" else '""', marks))
        if p.inert and name in INERT_WHY:
            out.append("    inert: %s" % INERT_WHY[name])
        if p.aliases:
            out.append("    alias: %s" % ", ".join(p.aliases))
    return "\n".join(out) + "\n"
