"""hotkv's HTTP port (issue 19): ``http-port`` (0 = off, the default; a
config-file setting, ``hotkv serve --http-port N`` and CONFIG SET) serves a
live dashboard of the server and its queues at ``/``, the same data as JSON
at ``/api/state`` and Prometheus metrics in redis_exporter's names at
``/metrics``.  h11 parses HTTP: it is the optional extra ``hotkv[dashboard]``
(``pip install 'hotkv[dashboard]'``); without it setting http-port fails
with a message saying so, and nothing else in hotkv needs it.  Who may
read: hotkv.http.auth (basic auth against the server's users, protected
mode, the Host check against DNS rebinding); what each user may read of
each page, by its ACL: hotkv.http.rights.

The server calls ``attach(server)`` once its loop is known (Server.attach_loop)
and ``detach(server)`` at shutdown.  Invariant: with http-port 0 nothing runs
(no socket, no timer, no sampling, no per-list counting: hotkv.http.counts);
changing it stops the old listener and starts the new one, and a port that
cannot be served (in use, refused by the protected-mode rule of
hotkv.http.auth, h11 missing) fails the CONFIG SET (or the start) with the
reason and leaves the previous state.
"""

from __future__ import annotations

from ..core.config import ConfigError
from . import counts


def _start(server, port: int):
    try:
        from .server import HttpService
    except ImportError as e:   # h11 not installed
        raise ConfigError("http-port needs the h11 package: pip install 'hotkv[dashboard]' "
                          "(%s)" % e) from None
    svc = HttpService(server, port)
    svc.start()
    return svc


def set_port(server, port: int):
    """CONFIG SET http-port (and the start): serve ``port``, 0 = stop."""
    old = server.http
    if old is not None and old.port == port:
        return
    new = _start(server, port) if port else None   # raises before the old one stops
    if old is not None:
        old.stop()
    server.http = new
    # The list commands count per key only while the dashboard is on.
    (counts.start if new is not None else counts.stop)(server)


def attach(server):
    server.config.listeners["http-port"] = lambda v: set_port(server, v)
    if server.config.values["http-port"]:
        set_port(server, server.config.values["http-port"])


def detach(server):
    svc = server.http
    if svc is not None:
        svc.stop()
        server.http = None
        counts.stop(server)


__all__ = ["attach", "detach", "set_port"]
