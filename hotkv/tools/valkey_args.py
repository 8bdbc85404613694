"""valkey-server's command line and config file, for ``hotkv valkey-server``.

What Valkey's Tcl harness (compat/valkey-server-shim) starts: options joined
as valkey-server's main() joins them into config text (``valkey_options``),
the config read line by line with its quoting (``_sds_repr``), include and
deprecated directives, and its exits: "FATAL CONFIG FILE ERROR" with the line
(``FatalConfigError``).
"""

from __future__ import annotations

from ..core.config import (
    ALIASES,
    PARAMS,
    Config,
    ConfigError,
)
from ..core.config_table import DEPRECATED
from ..protocol.resp import split_inline_args
from .serve_args import SERVE_DEFAULT_SAVE, UsageError


def _sds_repr(text: str) -> str:
    """Valkey's sdscatrepr: a double-quoted string its config parser reads back."""
    out = ['"']
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch in "\n\r\t\a\b":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a",
                        "\b": "\\b"}[ch])
        elif ch.isprintable() and ord(ch) < 128:
            out.append(ch)
        else:
            out.extend("\\x%02x" % b for b in ch.encode("utf-8", "surrogateescape"))
    out.append('"')
    return "".join(out)


def valkey_options(args: list[str]) -> tuple:
    """valkey-server's argv -> (config file or None, read stdin?, options text).
    As Valkey's main(): a first argument not starting with "-" is the file;
    "--name" starts a config line, the arguments after it are appended quoted,
    "--name value" in one argument is a whole line; an option name followed by
    nothing is waiting for its value, so a following "--x" is that value
    (``--proc-title-template --my--title``), except that ``--save`` followed by
    an option or nothing is ``save ""``; a lone "-" first or last reads stdin."""
    path, from_stdin, options = None, False, ""
    j, n = 0, len(args)
    if args and not args[0].startswith("-"):
        path, j = args[0], 1
    handled_last = True
    while j < n:
        arg = args[j]
        if arg == "-" and (j == 0 or j == n - 1):
            from_stdin = True
        elif handled_last and arg.startswith("--"):
            if options:
                options += "\n"
            options += arg[2:] + " "
            words = split_inline_args(arg.encode("utf-8", "surrogateescape"))
            if words is not None and len(words) == 1:
                handled_last = False
                if arg.lower() == "--save" and (j == n - 1 or args[j + 1].startswith("--")):
                    options += '""'
                    handled_last = j != n - 1
            else:
                handled_last = True
        else:
            options += _sds_repr(arg) + " "
            handled_last = True
        j += 1
    return path, from_stdin, options


class FatalConfigError(Exception):
    """valkey-server's report of a config line it cannot take."""

    def __init__(self, message: str, lineno: int | None = None, line: str | None = None):
        text = "\n*** FATAL CONFIG FILE ERROR (Version 8.1.8) ***\n"
        if lineno is not None:
            text += "Reading the configuration file, at line %d\n>>> '%s'\n" % (lineno, line)
        super().__init__(text + message + "\n")


def build_valkey_config(path: str | None, stdin_text: str | None, options: str):
    """A ``Config`` from the file, stdin and the options text (in that order,
    one text as Valkey joins them), line by line by Valkey's rules: a setting
    takes exactly one argument unless it is multi-argument (flag M: save,
    bind, client-output-buffer-limit...), where one argument is split on
    spaces; the first ``save`` line replaces the default save points, later
    ones add to them and ``save ""`` clears them; ``include`` reads another
    file in place; an unknown directive is "Bad directive or wrong number of
    arguments"."""
    text = ""
    if path is not None:
        text = _read_conf(path)
    if stdin_text is not None:
        text += stdin_text   # no separator: Valkey appends stdin as it reads it
    if options:
        text += "\n" + options
    config = Config()
    config.set_from_text("save", SERVE_DEFAULT_SAVE, startup=True)
    # valkey-server's default bind (hotkv's own is 127.0.0.1): a file without a
    # bind line listens on every address, protected mode guarding it.
    config.set_from_text("bind", "* -::*", startup=True)
    config.given = set()
    config.deprecated = []
    state = {"save_loaded": False}
    _valkey_lines(config, text, state, 0)
    return config


def _read_conf(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise UsageError("can't open config file '%s': %s" % (path, e.strerror or e))


def _valkey_lines(config, text: str, state: dict, depth: int):
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.strip(" \t\r\n")
        if not line or line.startswith("#"):
            continue
        words = split_inline_args(line.encode("utf-8", "surrogateescape"))
        if words is None:
            raise FatalConfigError("Unbalanced quotes in configuration line", lineno, line)
        if not words:
            continue
        argv = [w.decode("utf-8", "surrogateescape") for w in words]
        name, args = argv[0].lower(), argv[1:]
        try:
            _valkey_directive(config, name, args, state, depth)
        except ConfigError as e:
            raise FatalConfigError(str(e), lineno, line) from None


def _valkey_directive(config, name: str, args: list, state: dict, depth: int):
    canon = name if name in PARAMS else ALIASES.get(name)
    if canon is None:
        if name == "include" and len(args) == 1:
            if depth >= 10:
                raise ConfigError("includes nested too deeply")
            try:
                _valkey_lines(config, _read_conf(args[0]), state, depth + 1)
            except UsageError as e:
                raise ConfigError(str(e)) from None
            return
        if name in DEPRECATED and len(args) == 1:
            config.deprecated.append(name)   # accepted and ignored, as valkey-server does
            return
        if name == "loadmodule":
            raise ConfigError("hotkv does not load Valkey modules")
        raise ConfigError("Bad directive or wrong number of arguments")
    p = PARAMS[canon]
    if p.multi:   # repeatable directives (user, rename-command): one line each
        value = " ".join(_sds_repr(a) if not a or " " in a else a for a in args)
    elif "M" not in p.flags:
        if len(args) != 1:
            raise ConfigError("wrong number of arguments")
        value = args[0]
    elif len(args) == 1 and args[0]:
        value = args[0]   # one argument: split on spaces by the setting's parser
    else:
        value = " ".join(args)
    if canon == "save":
        if value == "" or not state["save_loaded"]:
            state["save_loaded"] = True
        elif config.values["save"]:
            value = config.values["save"] + " " + value
    config.given.add(canon)
    config.set_from_text(canon, value, startup=True)
