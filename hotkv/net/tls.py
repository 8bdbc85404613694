"""TLS: a second listener that speaks RESP over TLS, with Python's ``ssl``.

Owns the ``tls-*`` settings (declared in hotkv.core.config) and ``start_listeners``
(``hotkv.net.listeners.Listener.start`` calls it, after the plain listeners) that,
when ``tls-port`` is set, opens a TLS listener on every ``bind`` address next
to the plain one, with the very same ``Connection`` protocol (the listener
passes its factory, so this module does not import the network layer):
after the handshake a TLS client is an ordinary client (AUTH, ACL, limits
all apply).  ``tls-port -1`` (what ``EmbeddedServer(tls_port=0)`` passes)
binds an ephemeral port; the bound port is written back to ``tls-port``.

Settings, as Redis names them:
* ``tls-cert-file`` / ``tls-key-file``: the server certificate chain and key
  (the key may sit in the certificate file);
* ``tls-ca-cert-file``: CAs that client certificates must chain to;
* ``tls-auth-clients``: ``yes`` (a client certificate is required, the
  default), ``optional`` (verified when sent) or ``no``;
* ``tls-protocols``: e.g. ``"TLSv1.2 TLSv1.3"`` (default: TLS 1.2 and up).

Invariants: a configuration that cannot work (no certificate, client
authentication without a CA, an unknown protocol name) stops the server at
start with a message naming the setting, as Redis refuses to start; the
handshake never runs on the event loop's time budget unbounded (asyncio
aborts handshakes after ``HANDSHAKE_TIMEOUT`` seconds).
"""

from __future__ import annotations

import ssl

from ..core.config import bind_addresses

HANDSHAKE_TIMEOUT = 10.0

_PROTOCOLS = {
    "tlsv1": ssl.TLSVersion.TLSv1, "tlsv1.1": ssl.TLSVersion.TLSv1_1,
    "tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3,
}


class TLSConfigError(Exception):
    pass


def make_context(values) -> ssl.SSLContext:
    """An SSLContext from the tls-* settings, or TLSConfigError."""
    cert = values["tls-cert-file"]
    key = values["tls-key-file"] or None
    ca = values["tls-ca-cert-file"]
    auth = values["tls-auth-clients"]
    if not cert:
        raise TLSConfigError("Failed to configure TLS: tls-cert-file is not set")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise TLSConfigError(f"Failed to load certificate: {cert}: {e}") from None
    if auth in ("yes", "optional"):
        if not ca:
            raise TLSConfigError(
                "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when "
                "tls-cluster, tls-replication or tls-auth-clients are enabled!")
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "yes" else ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if ca:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as e:
            raise TLSConfigError(f"Failed to configure CA certificate(s) file: {ca}: {e}") from None
    protocols = values["tls-protocols"].lower().split()
    if protocols:
        versions = []
        for p in protocols:
            if p not in _PROTOCOLS:
                raise TLSConfigError(f"Failed to configure TLS: unknown protocol '{p}'")
            versions.append(_PROTOCOLS[p])
        ctx.minimum_version = min(versions)
        ctx.maximum_version = max(versions)
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


async def start_listeners(listener, loop, factory):
    """Open the TLS listeners when tls-port is set (TLSConfigError when the
    settings cannot work); factory() makes each connection's protocol."""
    server = listener.server
    values = server.config.values
    port = values["tls-port"]
    if not port:
        return
    ctx = make_context(values)
    if port < 0:
        port = 0
    hosts = bind_addresses(values["bind"])
    bound = []
    for host in hosts:
        srv = await loop.create_server(factory, host, port, ssl=ctx,
                                       backlog=values["tcp-backlog"], reuse_address=True,
                                       ssl_handshake_timeout=HANDSHAKE_TIMEOUT)
        listener.servers.append(srv)
        listener.tls_contexts[id(srv)] = ctx   # for net.busy.ServeWhileBlocked
        for sock in srv.sockets:
            bound.append(sock.getsockname()[:2])
        if port == 0 and bound:
            port = bound[0][1]
    values["tls-port"] = port

