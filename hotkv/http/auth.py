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
(``peer_refused``: the settings may change after the port opened).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress

from ..config import bind_addresses


def allowed(server, header: bytes | None) -> bool:
    """Whether a request with this Authorization header value may read."""
    acl = server.acl
    if not acl.auth_required():
        return True
    if not header or not header[:6].lower() == b"basic ":
        return False
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    name, sep, password = decoded.partition(b":")
    if not sep:
        return False
    user = acl.users.get(name or b"default")
    return user is not None and user.enabled and user.password_ok(password)


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


__all__ = ["allowed", "bind_refusal", "peer_refused"]
