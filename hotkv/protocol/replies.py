"""Reply text shared by command modules and the scripting engine.

Owns three small pieces of Redis's wording that several subsystems need and
that belong to none of them (so they live here, below ``hotkv.commands``):

* ``help_reply``: Redis's addReplyHelp, the shape of every ``<CMD> HELP``
  reply (a header line, the given lines, then HELP and its description);
* ``quoted``: Redis's sdscatrepr, how MONITOR (and a script's commands fed
  to MONITOR by ``hotkv.lua.engine``) shows each argument;
* ``redacted``: the arguments a command is echoed with by MONITOR and
  SLOWLOG -- AUTH's, HELLO's, MIGRATE's, ACL SETUSER's and CONFIG SET's
  credentials replaced by ``(redacted)``.

Invariants: every function here is pure (no server, client or socket
state); ``quoted`` escapes exactly the bytes sdscatrepr escapes, so a
MONITOR line is byte-identical to Valkey's.
"""

from __future__ import annotations

from .resp import Simple

__all__ = ["cstr", "help_reply", "quoted", "redacted"]


def cstr(b: bytes) -> str:
    """Bytes as they appear in an error text (undecodable bytes kept)."""
    return b.decode("utf-8", "surrogateescape")


def help_reply(name: str, lines) -> list:
    """Redis's addReplyHelp: a header, the lines, and HELP last."""
    out = [Simple(b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
                  % name.encode())]
    out.extend(Simple(line.encode()) for line in lines)
    out.append(Simple(b"HELP"))
    out.append(Simple(b"    Print this help."))
    return out


def _repr_table():
    table = []
    for ch in range(256):
        if ch == 0x5C:
            table.append(b"\\\\")
        elif ch == 0x22:
            table.append(b'\\"')
        elif ch in (10, 13, 9, 7, 8):
            table.append(b"\\" + {10: b"n", 13: b"r", 9: b"t", 7: b"a", 8: b"b"}[ch])
        elif 32 <= ch < 127:
            table.append(bytes([ch]))
        else:
            table.append(b"\\x%02x" % ch)
    return table


# One entry per byte value: quoting is a table lookup per byte.
_REPR = _repr_table()


def quoted(arg: bytes) -> bytes:
    """Redis's sdscatrepr: a double-quoted, escaped copy of arg."""
    return b'"' + b"".join([_REPR[ch] for ch in arg]) + b'"'


_SENSITIVE_CONFIGS = frozenset((b"requirepass", b"masterauth", b"primaryauth", b"masteruser",
                                b"primaryuser", b"tls-key-file-pass",
                                b"tls-client-key-file-pass"))


def redacted(cmd, argv):
    """Credentials never reach a monitor or the slow log: AUTH's, HELLO's
    AUTH, MIGRATE's AUTH/AUTH2, ACL SETUSER/GETUSER/DELUSER's users and
    rules, CONFIG SET's sensitive values."""
    name = cmd.name
    if name == "auth":
        return argv[:1] + [b"(redacted)"] * (len(argv) - 1)
    if name == "hello":
        out = list(argv)
        for i in range(2, len(out) - 2):
            if out[i].lower() == b"auth":
                out[i + 1] = out[i + 2] = b"(redacted)"
        return out
    if name in ("acl|setuser", "acl|getuser", "acl|deluser"):
        return argv[:2] + [b"(redacted)"] * (len(argv) - 2)    # user names and rules
    if name == "config|set" and len(argv) >= 4 and not len(argv) % 2:
        # The values of the sensitive settings, every pair checked (Valkey's
        # SENSITIVE_CONFIG), even when another name in the command is wrong.
        out = list(argv)
        for i in range(2, len(out), 2):
            if out[i].lower() in _SENSITIVE_CONFIGS:
                out[i + 1] = b"(redacted)"
        return out
    if name == "migrate":
        # Valkey redacts as it parses MIGRATE's options: AUTH's password,
        # AUTH2's user and password; KEYS ends the options.
        out = list(argv)
        i = 6
        while i < len(out):
            word = out[i].lower()
            if word == b"keys":
                break
            if word == b"auth" and i + 1 < len(out):
                out[i + 1] = b"(redacted)"
                i += 1
            elif word == b"auth2" and i + 2 < len(out):
                out[i + 1] = out[i + 2] = b"(redacted)"
                i += 2
            elif word not in (b"copy", b"replace"):
                break    # a syntax error: the parse (and its redaction) stops
            i += 1
        return out
    return argv
