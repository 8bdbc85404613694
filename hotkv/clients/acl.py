"""Users and permissions: Redis's ACL model (src/acl.c), one instance per server.

Owns ``server.acl`` (an ``AclState`` the ``Server`` makes, filled from the
settings by ``init_server``): the users by name, the ACL log, the denial counters INFO
reports, and the ``aclfile``.  Used by name:

* ``authenticate`` -- AUTH / HELLO AUTH check a username and password
  against the users (passwords are kept only as SHA-256 hex, as Redis does,
  and compared with ``hmac.compare_digest``); a failure is logged in the
  ACL LOG;
* ``AclState.auth_required`` / ``AclState.default`` -- whether new
  connections must authenticate (``Server.auth_required``), and the
  ``default`` user they start as;
* ``server.acl_check`` -- the dispatcher's permission check.  It is left
  ``None`` while every user may run every command on every key and channel
  (the default ``+@all ~* &*``), so an unrestricted server pays nothing.
  When it is installed, a user's allowed commands are a precomputed set of
  command bits (``registry.Command.bit``); keys come from
  ``cmd.key_indexes(argv)`` and channels from the pub/sub argument
  positions, as Redis's processCommand does.  Patterns are compiled when a
  user changes (linear-time shortcuts for the common shapes), never per
  command.  Blocked clients are re-checked when served
  (``dispatch.serve_ready_keys``) and queued commands at EXEC
  (``exec_recheck``), since permissions may change while they wait;
* ``check_channels`` -- for pub/sub paths the dispatcher does not see (it
  already checks PUBLISH, SPUBLISH, SUBSCRIBE, SSUBSCRIBE and PSUBSCRIBE
  arguments itself).

Invariants:
* ``User`` objects are mutated in place (ACL SETUSER stages the change on a
  copy first, so a failing rule changes nothing); connected clients keep a
  reference and see a change at their next command;
* a deleted user's connections are closed at once;
* ``requirepass`` is the ``default`` user's password (``CONFIG SET
  requirepass`` rewrites it).

One user's rules (``User``: commands, keys, channels, selectors, their
parsing, description and check) are hotkv.clients.acl_rules'.
"""

from __future__ import annotations

import os
import time

from ..core.config import ConfigError, param
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import Double
from .acl_rules import (
    CATEGORIES,
    DENIED_AUTH,
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    KEY_READ,
    PUBSUB_DEFAULT_ALL,
    RuleError,
    User,
    _has_spaces,
    _text,
    category_commands,
    error_message,
    lookup_command,
    merge_selector_args,
    new_default_user,
    new_user,
)
from .clientinfo import client_info_line

_REASONS = {DENIED_CMD: "command", DENIED_KEY: "key", DENIED_AUTH: "auth",
            DENIED_CHANNEL: "channel"}
LOG_GROUPING_MS = 60000

# New users (and ``reset``) start with no channels unless this says allchannels.
param("acl-pubsub-default", "enum", "resetchannels", choices=("allchannels", "resetchannels"))


def _parse_user_directive(text: str):
    words = text.split()
    if not words:
        raise ConfigError("wrong number of arguments")
    return (tuple(words),)


# redis.conf "user <name> <rules...>" lines (repeatable); exclusive with aclfile.
param("user", "special", (), mutable=False, multi=True, parse_fn=_parse_user_directive,
      fmt=lambda v: " ".join(" ".join(u) for u in v))

NO_ACLFILE = ("ERR This instance is not configured to use an ACL file. You may want to specify "
              "users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you "
              "have a configuration file set) in order to store users in the configuration.")


# ----------------------------------------------------------------------
# Per-server state
# ----------------------------------------------------------------------

class AclState:
    def __init__(self, server):
        self.server = server
        self.default = new_default_user()
        self.users: dict[bytes, User] = {b"default": self.default}
        self.log: list[dict] = []          # newest first
        self.log_next_id = 0
        self.denied = {"auth": 0, "cmd": 0, "key": 0, "channel": 0}
        self._aclfile = None

    def auth_required(self) -> bool:
        """Whether a new connection must authenticate first."""
        return not (self.default.nopass and self.default.enabled)

    # -- users ------------------------------------------------------------
    def setuser(self, name: bytes, ops, current=None) -> str | None:
        """ACL SETUSER: apply every rule or none; returns an error text."""
        given = list(ops)
        ops, unclosed = merge_selector_args(given)
        if ops is None:
            return "ERR Unmatched parenthesis in acl selector starting at '%s'." % _text(
                given[unclosed])
        existing = self.users.get(name)
        self._pubsub_default()
        staged = existing.clone() if existing is not None else new_user(name)
        for op in ops:
            try:
                staged.apply(op)
            except RuleError as e:
                return "ERR Error in ACL SETUSER modifier '%s': %s" % (_text(op), e.text)
        if existing is None:
            self.users[name] = staged
        else:
            existing.copy_from(staged)
            self._drop_unsubscribable(existing, current)
        self.changed()
        return None

    def deluser(self, names, current=None) -> int:
        deleted = 0
        for name in names:
            u = self.users.pop(name, None)
            if u is None:
                continue
            deleted += 1
            self._disconnect(lambda c, u=u: c.user is u, current)
        self.changed()
        return deleted

    def _disconnect(self, which, current):
        server = self.server
        for c in list(server.clients.values()):
            if which(c):
                if c is current:
                    c.closing = True    # after this command's reply
                else:
                    c.kill()

    def _drop_unsubscribable(self, user: User, current):
        """Clients of ``user`` subscribed to channels it may no longer use are
        disconnected, as Redis does when channel permissions shrink."""
        if user.any_allchannels:
            return

        def lost(c):
            if c.user is not user:
                return False
            if any(not user.channel_ok(ch, False) for ch in c.channels):
                return True
            if any(not user.channel_ok(ch, False) for ch in c.shard_channels):
                return True
            return any(not user.channel_ok(p, True) for p in c.patterns)
        self._disconnect(lost, current)

    def _pubsub_default(self):
        PUBSUB_DEFAULT_ALL[0] = (
            self.server.config.values["acl-pubsub-default"] == "allchannels")

    def load_directives(self, directives) -> None:
        """redis.conf ``user`` lines, applied at start; raises on an error."""
        self._pubsub_default()
        seen = set()
        for words in directives:
            name, ops = words[0].encode(), [w.encode("utf-8", "surrogateescape")
                                             for w in words[1:]]
            if _has_spaces(name):
                raise RuntimeError("Spaces not allowed in ACL usernames")
            if name in seen:
                raise RuntimeError("Error in user declaration '%s': Duplicate user found. A user "
                                   "can only be defined once in config files" % _text(name))
            seen.add(name)
            u = self.users.get(name)
            if u is None:
                u = self.users[name] = new_user(name)
            else:
                u.apply(b"reset")
            for op in ops:
                try:
                    u.apply(op)
                except RuleError as e:
                    raise RuntimeError("Error loading ACL rule '%s' for the user named '%s': %s"
                                       % (_text(op), _text(name), e.text)) from None
        self.changed()

    def changed(self):
        """Install the dispatcher check only when some user is restricted."""
        restricted = any(not u.unrestricted for u in self.users.values())
        self.server.acl_check = acl_check if restricted else None

    # -- log ----------------------------------------------------------------
    def add_log(self, client, reason: int, obj: bytes, username: bytes | None = None):
        key = {DENIED_AUTH: "auth", DENIED_CMD: "cmd", DENIED_KEY: "key",
               DENIED_CHANNEL: "channel"}[reason]
        self.denied[key] += 1
        maxlen = self.server.config.values["acllog-max-len"]
        if maxlen <= 0:
            del self.log[:]
            return
        if username is None:
            username = client.user.name if client.user is not None else b"default"
        now = self.server.clock.ms()     # hotkv.core.clock, as the slowlog's timestamps
        if client.kind == "lua":
            # A script's call: Valkey logs the context "lua" and the info of the
            # client running the script (cmd=eval), not of the script's own client.
            context = "lua"
            client = self.server.current_client or client
        else:
            context = "multi" if client.multi else "toplevel"
        for i, entry in enumerate(self.log[:10]):
            if (entry["reason"] == reason and entry["context"] == context
                    and abs(now - entry["ctime"]) <= LOG_GROUPING_MS
                    and entry["object"] == obj and entry["username"] == username):
                entry["count"] += 1
                entry["ctime"] = now
                entry["cinfo"] = client_info(client)
                del self.log[i]
                self.log.insert(0, entry)
                return
        self.log.insert(0, {
            "count": 1, "reason": reason, "context": context, "object": obj,
            "username": username, "ctime": now, "created": now, "cinfo": client_info(client),
            "id": self.log_next_id,
        })
        self.log_next_id += 1
        del self.log[maxlen:]

    def log_reply(self, count: int):
        now = self.server.clock.ms()
        out = []
        for e in self.log[:count]:
            out.append({
                b"count": e["count"],
                b"reason": _REASONS[e["reason"]].encode(),
                b"context": e["context"].encode(),
                b"object": e["object"],
                b"username": e["username"],
                b"age-seconds": Double((now - e["ctime"]) / 1000),
                b"client-info": e["cinfo"],
                b"entry-id": e["id"],
                b"timestamp-created": e["created"],
                b"timestamp-last-updated": e["ctime"],
            })
        return out

    # -- ACL file -------------------------------------------------------------
    def aclfile_path(self) -> str:
        # Resolved once against "dir" (Redis chdirs there; ``hotkv serve``
        # does so after start-up, the embedded server never).
        if self._aclfile is None:
            path = self.server.config.values["aclfile"]
            if path and not os.path.isabs(path):
                path = os.path.join(self.server.config.values["dir"] or ".", path)
            self._aclfile = os.path.abspath(path) if path else path
        return self._aclfile

    def load_file(self, current=None) -> str | None:
        """ACL LOAD: all users from the file, or -- on any error -- nothing."""
        name = self.server.config.values["aclfile"]
        path = self.aclfile_path()
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            return "Error loading ACLs, opening file '%s': %s" % (name, e.strerror)
        problems = []
        users: dict[bytes, User] = {}
        self._pubsub_default()
        for lineno, raw in enumerate(data.split(b"\n"), 1):
            line = raw.strip(b" \t\r\n")
            if not line:
                continue
            argv = line.split(b" ")
            if argv[0] != b"user" or len(argv) < 2:
                problems.append("%s:%d should start with user keyword followed by the "
                                "username. " % (name, lineno))
                continue
            uname = argv[1]
            if _has_spaces(uname):
                problems.append("'%s:%d: username '%s' contains invalid characters. "
                                % (name, lineno, _text(uname)))
                continue
            if uname in users:
                problems.append("WARNING: Duplicate user '%s' found on line %d. "
                                % (_text(uname), lineno))
                continue
            u = users[uname] = new_user(uname)
            reported = False
            ops, unclosed = merge_selector_args(argv[2:])
            if ops is None:
                problems.append("%s:%d: Unmatched parenthesis in selector definition."
                                % (name, lineno))
                continue
            for op in ops:
                op = op.strip(b"\t\r\n")
                try:
                    u.apply(op)
                except RuleError as e:
                    if e.code == "ENOENT":
                        problems.append("%s:%d: Error in applying operation '%s': %s. "
                                        % (name, lineno, _text(op), e.text))
                    elif not reported:
                        problems.append("%s:%d: %s. " % (name, lineno, e.text))
                        reported = True
        if problems:
            return "".join(problems) + ("WARNING: ACL errors detected, no change to the "
                                        "previously active ACL rules was performed")
        new_default = users.get(b"default") or new_default_user()
        self.default.copy_from(new_default)
        users[b"default"] = self.default
        self.users = users
        gone = set()
        for c in list(self.server.clients.values()):
            u = users.get(c.user.name) if c.user is not None else self.default
            if u is None:
                gone.add(c.id)
            else:
                c.user = u
        self._disconnect(lambda c: c.id in gone, current)
        for u in users.values():
            self._drop_unsubscribable(u, current)
        self.changed()
        return None

    def save_file(self) -> bool:
        path = self.aclfile_path()
        text = b"".join(b"user " + u.name + b" " + u.describe() + b"\n"
                        for _, u in sorted(self.users.items()))
        tmp = "%s.tmp-%d-%d" % (path, os.getpid(), int(time.time() * 1000))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(text)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            return True
        except OSError as e:
            import logging
            logging.getLogger("hotkv").warning("ACL SAVE failed: %s", e)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False


def client_info(client) -> bytes:
    """The CLIENT LIST line of a client, for the ACL log."""
    try:
        line = client_info_line(client)
    except Exception:   # CLIENT LIST not available: the essentials
        line = ""
    if not line:
        user = _text(client.user.name) if client.user is not None else "default"
        line = ("id=%d addr=%s laddr=%s fd=%d name=%s db=%d user=%s resp=%d" % (
            client.id, client.addr, client.laddr, client.fd, _text(client.name),
            client.db.index, user, 3 if client.resp3 else 2))
    return line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line


# ----------------------------------------------------------------------
# Hot path and hooks
# ----------------------------------------------------------------------

def acl_check(client, cmd, argv):
    """server.acl_check: None, or the NOPERM error after logging the denial."""
    user = client.user
    if user is None or user.unrestricted:
        return None
    denied = user.check(cmd, argv)
    if denied is None:
        return None
    reason, idx = denied
    acl = client.server.acl
    # Valkey looks the command up (its lastcmd: CLIENT LIST's cmd=) before the
    # ACL check, so the log's client-info and later CLIENT LIST name the denied one.
    client.last_cmd = cmd.name
    acl.add_log(client, reason, cmd.name.encode() if reason == DENIED_CMD else argv[idx])
    return "NOPERM " + error_message(reason, user, cmd, argv[idx], False)


_EXEC_REASONS = {
    DENIED_CMD: "no permission to execute the command or subcommand",
    DENIED_KEY: "no permission to touch the specified keys",
    DENIED_CHANNEL: "no permission to access one of the channels used as arguments",
}


def exec_recheck(client, cmd, argv):
    """For EXEC: None, or the error for a queued command the user may no longer
    run (ACLs changed since it was queued); the denial is logged as "multi"."""
    user = client.user
    if user is None or user.unrestricted:
        return None
    denied = user.check(cmd, argv)
    if denied is None:
        return None
    reason, idx = denied
    acl = client.server.acl
    multi = client.multi
    client.multi = True     # the log's context
    try:
        acl.add_log(client, reason, cmd.name.encode() if reason == DENIED_CMD else argv[idx])
    finally:
        client.multi = multi
    return ("NOPERM ACLs rules changed between the moment the transaction was accumulated "
            "and the EXEC call. This command is no longer allowed for the following reason: "
            + _EXEC_REASONS[reason])


def all_keys_readable(client, cmd, argv) -> bool:
    """Redis's ACLUserCheckCmdWithUnrestrictedKeyAccess for reads: may the
    client's user run cmd with read access to every key (``~*``, ``%R~*`` or
    allkeys, in the same selector)?  SORT's BY and GET patterns need it."""
    user = client.user
    if user is None or user.unrestricted:
        return True
    for sel in [user] + user.selectors:
        if sel._check_one(cmd, argv) is None and (
                sel.allkeys or any(p == b"*" and f & KEY_READ for p, f in sel.patterns)):
            return True
    return False


def check_channels(client, channels, is_pattern: bool):
    """For pub/sub handlers: None if the client's user may use every channel
    (or pattern, for PSUBSCRIBE) in ``channels``, else the NOPERM error (the
    denial is logged).  The dispatcher already checks PUBLISH, SPUBLISH,
    SUBSCRIBE, SSUBSCRIBE and PSUBSCRIBE arguments; this is for other paths."""
    user = client.user
    if user is None or user.any_allchannels:
        return None
    for ch in channels:
        if not user.channel_ok(ch, is_pattern):
            client.server.acl.add_log(client, DENIED_CHANNEL, ch)
            return "NOPERM No permissions to access a channel"
    return None


def authenticate(c, username: bytes | None, password: bytes) -> None:
    """AUTH [username] password and HELLO ... AUTH: authenticate c or raise
    the error reply (``username`` None is the one-argument AUTH form)."""
    acl = c.server.acl
    if username is None:
        if acl.default.nopass:
            raise CommandError(
                "ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?")
        username = b"default"
    user = acl.users.get(username)
    if user is None or not user.enabled or not user.password_ok(password):
        argv = c.server.current_argv
        acl.add_log(c, DENIED_AUTH, argv[0] if argv else b"AUTH", username)
        raise CommandError(errors.WRONGPASS)
    c.authenticated = True
    c.user = user


def set_default_password(server, password: str):
    u = server.acl.default
    u.apply(b"resetpass")
    if password:
        u.apply(b">" + password.encode("utf-8", "surrogateescape"))
    else:
        u.apply(b"nopass")
    server.acl.changed()


def init_server(server):
    """Fill ``server.acl`` (an empty ``AclState`` the server made) from the
    settings (requirepass, user, aclfile); RuntimeError when they conflict
    or the ACL file has errors."""
    values = server.config.values
    if values["requirepass"]:
        set_default_password(server, values["requirepass"])
    server.config.listeners["requirepass"] = lambda v: set_default_password(server, v)
    if values["user"]:
        if values["aclfile"]:
            raise RuntimeError(
                "Configuring hotkv with users defined in the configuration and at the same "
                "setting an ACL file path is invalid. This setup is very likely to lead to "
                "configuration errors and security holes, please define either an ACL file or "
                "declare users directly in your configuration, but not both.")
        server.acl.load_directives(values["user"])
    if values["aclfile"]:
        problems = server.acl.load_file()
        if problems:
            raise RuntimeError("Aborting hotkv startup because of ACL errors: " + problems)
    server.acl.changed()


__all__ = ["AclState", "User", "acl_check", "check_channels", "authenticate", "CATEGORIES",
           "category_commands", "init_server", "lookup_command", "error_message"]
