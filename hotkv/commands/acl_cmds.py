"""ACL commands: ACL SETUSER / GETUSER / DELUSER / LIST / USERS / WHOAMI / CAT /
LOG / GENPASS / DRYRUN / LOAD / SAVE / HELP.

The model (users, rules, checks, the log, the ACL file) lives in
``hotkv.clients.acl``; this module only parses arguments and shapes replies, as
Valkey's aclCommand does.  The server creates the ACL state itself
(``hotkv.server.Server._make_subsystems``).
"""

from __future__ import annotations

import os

from ..clients import acl as aclmod
from ..core.registry import TABLE, command, container
from ..protocol.errors import CommandError
from ..protocol.resp import OK, SetReply, Simple
from ..protocol.util import string2ll

container("acl", group="server", summary="A container for Access List Control commands.",
          since="6.0.0", complexity="Depends on subcommand.")

_FLAGS = "admin noscript loading stale"
_FLAGS_USER = "noscript loading stale"


def _name(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _subcommand_syntax(argv) -> CommandError:
    return CommandError("ERR unknown subcommand or wrong number of arguments for '%s'. Try %s "
                        "HELP." % (_name(argv[1][:128]), _name(argv[0].upper())))


@command("acl|setuser", -3, _FLAGS, group="server", since="6.0.0", args="username [rule]...",
         complexity="O(N). Where N is the number of rules provided.",
         history=(("6.2.0", "Added Pub/Sub channel patterns."),
                  ("7.0.0", "Added selectors and key based permissions.")))
def acl_setuser(c, argv):
    """Creates and modifies an ACL user and its rules."""
    username = argv[2]
    if aclmod._has_spaces(username):
        raise CommandError("ERR Usernames can't contain spaces or null characters")
    error = c.server.acl.setuser(username, argv[3:], current=c)
    if error is not None:
        raise CommandError(error)
    return OK


@command("acl|deluser", -3, _FLAGS, group="server", since="6.0.0", args="username...",
         complexity="O(1) amortized time considering the typical user.")
def acl_deluser(c, argv):
    """Deletes ACL users, and terminates their connections."""
    if b"default" in argv[2:]:
        raise CommandError("ERR The 'default' user cannot be removed")
    return c.server.acl.deluser(argv[2:], current=c)


@command("acl|getuser", 3, _FLAGS, group="server", since="6.0.0", args="username",
         complexity="O(N). Where N is the number of password, command and pattern rules that the "
                    "user has.",
         history=(("6.2.0", "Added Pub/Sub channel patterns."),
                  ("7.0.0",
                   "Added selectors and changed the format of key and channel patterns from a "
                   "list to their rule representation.")))
def acl_getuser(c, argv):
    """Lists the ACL rules of a user."""
    u = c.server.acl.users.get(argv[2])
    if u is None:
        return None
    channels = b"&*" if u.allchannels else b" ".join(b"&" + ch for ch in u.channels)
    return {
        b"flags": SetReply(u.flag_names()),
        b"passwords": list(u.passwords),
        b"commands": u.command_rules(),
        b"keys": b" ".join(u.key_description()),
        b"channels": channels,
        b"selectors": [_selector_map(s) for s in u.selectors],
    }


def _selector_map(s) -> dict:
    return {
        b"commands": s.command_rules(),
        b"keys": b" ".join(s.key_description()),
        b"channels": b"&*" if s.allchannels else b" ".join(b"&" + ch for ch in s.channels),
    }


@command("acl|list", 2, _FLAGS, group="server", since="6.0.0",
         complexity="O(N). Where N is the number of configured users.")
def acl_list(c, argv):
    """Dumps the effective rules in ACL file format."""
    return [b"user " + name + b" " + u.describe()
            for name, u in sorted(c.server.acl.users.items())]


@command("acl|users", 2, _FLAGS, group="server", since="6.0.0",
         complexity="O(N). Where N is the number of configured users.")
def acl_users(c, argv):
    """Lists all ACL users."""
    return sorted(c.server.acl.users)


@command("acl|whoami", 2, _FLAGS_USER, group="server", since="6.0.0", complexity="O(1)")
def acl_whoami(c, argv):
    """Returns the authenticated username of the current connection."""
    return c.user.name if c.user is not None else None


@command("acl|cat", -2, _FLAGS_USER, group="server", since="6.0.0", args="[category]",
         complexity="O(1) since the categories and commands are a fixed set.")
def acl_cat(c, argv):
    """Lists the ACL categories, or the commands inside a category."""
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    if len(argv) == 2:
        return [name.encode() for name in aclmod.CATEGORIES]
    category = _name(argv[2]).lower()
    if category not in aclmod.CATEGORIES:
        raise CommandError("ERR Unknown category '%s'" % _name(argv[2][:128]))
    return [cmd.name.encode() for cmd in aclmod.category_commands(category)]


@command("acl|genpass", -2, _FLAGS_USER, group="server", since="6.0.0", args="[bits:i]",
         complexity="O(1)")
def acl_genpass(c, argv):
    """Generates a pseudorandom, secure password that can be used to identify ACL users."""
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    bits = 256
    if len(argv) == 3:
        bits = string2ll(argv[2])
        if bits is None:
            raise CommandError("ERR value is not an integer or out of range")
    if bits <= 0 or bits > 4096:
        raise CommandError("ERR ACL GENPASS argument must be the number of bits for the output "
                           "password, a positive number up to 4096")
    chars = (bits + 3) // 4
    return os.urandom((chars + 1) // 2).hex()[:chars].encode()


@command("acl|log", -2, _FLAGS, group="server", since="6.0.0", args="[operation[count:i | RESET]]",
         complexity="O(N) with N being the number of entries shown.",
         history=(("7.2.0", "Added entry ID, timestamp created, and timestamp last updated."),))
def acl_log(c, argv):
    """Lists recent security events generated due to ACL rules."""
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    acl = c.server.acl
    count = 10
    if len(argv) == 3:
        if argv[2].lower() == b"reset":
            del acl.log[:]
            return OK
        count = string2ll(argv[2])
        if count is None:
            raise CommandError("ERR value is not an integer or out of range")
        count = max(count, 0)
    return acl.log_reply(count)


@command("acl|dryrun", -4, _FLAGS, group="server", since="7.0.0", args="username command [arg]...",
         complexity="O(1).")
def acl_dryrun(c, argv):
    """Simulates the execution of a command by a user, without executing the command."""
    u = c.server.acl.users.get(argv[2])
    if u is None:
        raise CommandError("ERR User '%s' not found" % _name(argv[2]))
    args = argv[3:]
    cmd = TABLE.get(args[0]) or TABLE.get(args[0].lower())
    if cmd is not None and cmd.subcommands is not None and len(args) > 1:
        cmd = cmd.subcommands.get(args[1]) or cmd.subcommands.get(args[1].lower())
    if cmd is None:
        raise CommandError("ERR Command '%s' not found" % _name(args[0]))
    n = len(args)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        raise CommandError("ERR wrong number of arguments for '%s' command" % cmd.name)
    denied = u.check(cmd, args)
    if denied is None:
        return OK
    reason, idx = denied
    return aclmod.error_message(reason, u, cmd, args[idx], True).encode(
        "utf-8", "surrogateescape")


@command("acl|load", 2, _FLAGS, group="server", since="6.0.0",
         complexity="O(N). Where N is the number of configured users.")
def acl_load(c, argv):
    """Reloads the rules from the configured ACL file."""
    acl = c.server.acl
    if not c.server.config.values["aclfile"]:
        raise CommandError(aclmod.NO_ACLFILE)
    problems = acl.load_file(current=c)
    if problems:
        raise CommandError("ERR " + problems)
    return OK


@command("acl|save", 2, _FLAGS, group="server", since="6.0.0",
         complexity="O(N). Where N is the number of configured users.")
def acl_save(c, argv):
    """Saves the effective ACL rules in the configured ACL file."""
    if not c.server.config.values["aclfile"]:
        raise CommandError(aclmod.NO_ACLFILE)
    if not c.server.acl.save_file():
        raise CommandError("ERR There was an error trying to save the ACLs. Please check the "
                           "server logs for more information")
    return OK


_HELP = (
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
)


@command("acl|help", 2, "loading stale", group="server", since="6.0.0", complexity="O(1)")
def acl_help(c, argv):
    """Returns helpful text about the different subcommands."""
    return [Simple(b"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")] + [
        Simple(line.encode()) for line in _HELP]
