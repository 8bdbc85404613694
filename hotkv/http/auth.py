"""Who may read the dashboard and /metrics: HTTP basic auth against the
server's own users (``requirepass`` is the ``default`` user's password; ACL
users log in by name), and where the HTTP port may listen at all.

Invariants: when a new connection to the Redis port would have to
authenticate (``AclState.auth_required``), every HTTP request must carry the
credentials of an enabled user whose password matches, else 401; the check
reads the live ACL state, so ACL SETUSER / CONFIG SET requirepass apply to
the next request.  The HTTP port never listens on a non-loopback address
while protected mode would refuse a non-loopback client (protected-mode yes
and the default user without a password): ``bind_refusal`` says why; and a
request from a non-loopback peer gets 403 whenever that holds
(``peer_refused``: the settings may change after the port opened).  While
no password is needed, a request whose ``Host`` is not this server's name
or address gets 403 (``host_refused``: DNS rebinding).  What the logged-in
user may then read of each page is hotkv.http.rights'.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress

from ..core.config import bind_addresses


def user_for(server, header: bytes | None):
    """The user a request with this Authorization header value reads as, or
    None (401).  Without a password the ``default`` user -- or the user the
    header names, when its credentials are right -- as a new connection to
    the Redis port starts as ``default`` and may AUTH as another."""
    acl = server.acl
    user = _basic_user(acl, header)
    if user is None and not acl.auth_required():
        return acl.default
    return user


def _basic_user(acl, header: bytes | None):
    if not header or not header[:6].lower() == b"basic ":
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    name, sep, password = decoded.partition(b":")
    if not sep:
        return None
    user = acl.users.get(name or b"default")
    if user is not None and user.enabled and user.password_ok(password):
        return user
    return None


def allowed(server, header: bytes | None) -> bool:
    """Whether a request with this Authorization header value may log in."""
    return user_for(server, header) is not None


def host_refused(server, host: bytes | None, local) -> str | None:
    """DNS rebinding: while no password is needed, a request whose ``Host``
    names anything but this server -- ``localhost``, a loopback address, a
    ``bind`` address or the address the request arrived at (``local``, the
    socket's own), with or without a port -- is refused, with the reason.
    A web page on evil.example whose name an attacker points at 127.0.0.1
    reaches the port, but its requests say ``Host: evil.example``.  A
    request without Host (HTTP/1.0, not a browser) is let through."""
    if host is None or server.acl.auth_required():
        return None
    name = _host_name(host)
    if name is not None:
        if name == "localhost" or _loopback(name):
            return None
        ours = set(bind_addresses(server.config.values["bind"])) - {"0.0.0.0", "::"}
        if isinstance(local, tuple):
            ours.add(str(local[0]).lower())
        if name in ours:
            return None
    return ("host %r is not this server: without a password only localhost, a loopback "
            "address or the server's own address may be named (DNS rebinding protection; "
            "set requirepass to reach the dashboard by another name)\n"
            % host.decode("latin-1"))


def _host_name(host: bytes) -> str | None:
    """``Host``'s name without the port, lower case ([::1] -> ::1), or None
    when it is malformed."""
    try:
        text = host.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return None
    if text.startswith("["):
        name, sep, rest = text[1:].partition("]")
        if not sep or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return name
    name, sep, port = text.partition(":")
    if sep and not port.isdigit():
        return None
    return name


def peer_refused(server, peer) -> bool:
    """Protected mode, checked per request as Valkey checks each connection:
    a non-loopback peer while protected mode is on and the default user has
    no password (the settings may have changed since the port opened)."""
    values = server.config.values
    if not values["protected-mode"] or server.acl.auth_required():
        return False
    return not (isinstance(peer, tuple) and _loopback(str(peer[0])))


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def bind_refusal(server) -> str | None:
    """Why the HTTP port may not listen on ``bind``'s addresses, or None."""
    values = server.config.values
    if not values["protected-mode"] or server.acl.auth_required():
        return None
    exposed = [h for h in bind_addresses(values["bind"]) if not _loopback(h)]
    if not exposed:
        return None
    return ("http-port: refusing to serve the dashboard on %s: protected mode is on and the "
            "default user has no password (set requirepass or ACL users, or bind to "
            "127.0.0.1)" % ", ".join(exposed))


__all__ = ["allowed", "bind_refusal", "host_refused", "peer_refused", "user_for"]
