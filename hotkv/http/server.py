"""The HTTP listener of ``http-port``: the dashboard (``/``), its JSON
(``/api/state``) and Prometheus metrics (``/metrics``), served on the
server's own event loop with h11 (a sans-IO HTTP/1.1 parser) doing the
parsing.

Invariants -- the HTTP side never holds the loop up or lets a client hold
resources:
* a request head larger than ``MAX_HEAD`` bytes, a body larger than
  ``MAX_BODY``, or anything h11 cannot parse gets a 400/413 reply and the
  connection is closed; a method other than GET/HEAD is 405;
* a request must arrive whole within ``request_timeout`` seconds of the
  connection opening or of the previous response (slowloris), and an idle
  keep-alive connection is closed after ``idle_timeout``; at most
  ``MAX_CONNECTIONS`` HTTP connections are open at once (more get 503);
* replies are built synchronously from a snapshot taken at most once a
  second, less often when costly (hotkv.http.state.Sampler: its share of
  the loop is bounded), so a request costs one bounded snapshot at worst;
  the sampler's timer runs only while the port is on;
* authentication, the protected-mode bind rule and the Host check (DNS
  rebinding) are hotkv.http.auth's; what each user may read of each page
  (403 with the command it may not run, or a filtered view) is
  hotkv.http.rights'.  The checks run in this order: method (405), peer
  (protected mode, 403), Host (403), credentials (401), path (404), the
  user's rights (403).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import h11

from ..core.config import ConfigError, bind_addresses
from . import auth, metrics, pages, rights
from .state import Sampler

log = logging.getLogger("hotkv")

MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
MAX_CONNECTIONS = 128
REQUEST_TIMEOUT = 10.0
IDLE_TIMEOUT = 60.0


class HttpService:
    """The listening sockets, the open connections and the sampler."""

    def __init__(self, server, port: int):
        self.server = server
        self.port = port
        self.servers: list = []
        self.conns: set = set()
        self.sampler = Sampler(server)
        self.request_timeout = REQUEST_TIMEOUT
        self.idle_timeout = IDLE_TIMEOUT
        self._timer = None
        self.bound: list = []

    def start(self):
        """Bind every ``bind`` address now (an error raises ConfigError and
        leaves nothing open), then serve them and start the sampler."""
        problem = auth.bind_refusal(self.server)
        if problem:
            raise ConfigError(problem)
        socks = []
        try:
            for host in bind_addresses(self.server.config.values["bind"]):
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.socket(family, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((host, self.port))
                sock.listen(128)
                sock.setblocking(False)
        except OSError as e:
            for sock in socks:
                sock.close()
            raise ConfigError("http-port: cannot listen on port %d: %s"
                              % (self.port, e.strerror or e)) from None
        loop = self.server.loop
        self.bound = [s.getsockname()[:2] for s in socks]
        for sock in socks:
            loop.create_task(loop.create_server(lambda: HttpConnection(self), sock=sock)) \
                .add_done_callback(self._served)
        self._timer = loop.call_later(1.0, self._tick)
        log.info("Dashboard and metrics on http://%s:%d/", self.bound[0][0], self.port)

    def _served(self, task):
        if not task.cancelled() and task.exception() is None:
            srv = task.result()
            if self._timer is None:   # stopped meanwhile
                srv.close()
            else:
                self.servers.append(srv)

    def _tick(self):
        """Once a second while the port is on: a sample for the plots."""
        try:
            if self.sampler.due():
                self.sampler.sample()
        except Exception:
            log.exception("dashboard sampler failure")
        self._timer = self.server.loop.call_later(1.0, self._tick)

    def stop(self):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for srv in self.servers:
            srv.close()
        self.servers = []
        for conn in list(self.conns):
            conn.close()


class HttpConnection(asyncio.Protocol):
    def __init__(self, service: HttpService):
        self.service = service
        self.transport = None
        self.h = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.request = None
        self.body = 0
        self.timer = None
        self.closed = False

    # -- life ------------------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        svc = self.service
        svc.conns.add(self)
        if len(svc.conns) > MAX_CONNECTIONS:
            self._simple(503, b"too many connections\n", close=True)
            return
        self._arm(svc.request_timeout)

    def _arm(self, seconds: float):
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.service.server.loop.call_later(seconds, self._expired)

    def _expired(self):
        # A slow or silent client: 408 if it had started a request, then close.
        if self.h.our_state in (h11.IDLE, h11.SEND_RESPONSE) and self.request is not None:
            self._simple(408, b"request timeout\n", close=True)
        self.close()

    def close(self):
        if self.closed:
            return
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        self.service.conns.discard(self)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc):
        self.close()

    def eof_received(self):
        self.close()
        return False

    # -- input -----------------------------------------------------------
    def data_received(self, data: bytes):
        if self.closed:
            return
        try:
            self.h.receive_data(data)
            self._events()
        except h11.RemoteProtocolError as e:
            status = e.error_status_hint if 400 <= e.error_status_hint < 500 else 400
            self._simple(status, b"bad request\n", close=True)
        except h11.LocalProtocolError:
            self.close()

    def _events(self):
        while not self.closed:
            ev = self.h.next_event()
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                return
            if isinstance(ev, h11.Request):
                self.request, self.body = ev, 0
                # h11 bounds only a head that arrives in pieces; one that
                # came whole is measured here.
                size = len(ev.target) + sum(len(k) + len(v) + 4 for k, v in ev.headers)
                if size > MAX_HEAD:
                    self._simple(431, b"request header fields too large\n", close=True)
                    return
            elif isinstance(ev, h11.Data):
                self.body += len(ev.data)
                if self.body > MAX_BODY:
                    self._simple(413, b"request body too large\n", close=True)
                    return
            elif isinstance(ev, h11.EndOfMessage):
                self._respond()
                if self.closed or self.h.our_state is not h11.DONE \
                        or self.h.their_state is not h11.DONE:
                    self.close()
                    return
                self.h.start_next_cycle()
                self.request = None
                self._arm(self.service.idle_timeout)
            elif isinstance(ev, h11.ConnectionClosed):
                self.close()
                return

    # -- output ----------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str, extra=(), close=False):
        headers = [("content-type", ctype), ("content-length", str(len(body))),
                   ("cache-control", "no-store"), ("x-content-type-options", "nosniff"),
                   *extra]
        if close:
            headers.append(("connection", "close"))
        out = self.h.send(h11.Response(status_code=status, headers=headers))
        if self.request is None or self.request.method != b"HEAD":
            out += self.h.send(h11.Data(data=body))
        out += self.h.send(h11.EndOfMessage())
        self.transport.write(out)

    def _simple(self, status: int, body: bytes, close=False, extra=()):
        if self.h.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                self._send(status, body, "text/plain; charset=utf-8", extra, close=close)
            except h11.LocalProtocolError:
                pass
        if close:
            self.close()

    def _respond(self):
        req = self.request
        svc = self.service
        if req.method not in (b"GET", b"HEAD"):
            self._simple(405, b"method not allowed\n", extra=[("allow", "GET, HEAD")])
            return
        if auth.peer_refused(svc.server, self.transport.get_extra_info("peername")):
            self._simple(403, b"protected mode: set a password to reach this port from "
                              b"another host\n", close=True)
            return
        host = next((v for k, v in req.headers if k == b"host"), None)
        refused = auth.host_refused(svc.server, host, self.transport.get_extra_info("sockname"))
        if refused:
            self._simple(403, refused.encode())
            return
        creds = next((v for k, v in req.headers if k == b"authorization"), None)
        user = auth.user_for(svc.server, creds)
        if user is None:
            self._simple(401, b"authentication required\n",
                         extra=[("www-authenticate", 'Basic realm="hotkv", charset="UTF-8"')])
            return
        path, _, query = req.target.partition(b"?")
        if path not in rights.PAGES:
            self._simple(404, b"not found\n")
            return
        refused = rights.refusal(user, path)
        if refused:
            self._simple(403, refused.encode("utf-8", "replace"))
        elif path == b"/":
            self._send(200, pages.DASHBOARD, "text/html; charset=utf-8")
        elif path == b"/metrics":
            snap, _ = rights.view(user, svc.sampler.current(1.0))
            self._send(200, metrics.render(snap).encode(),
                       "text/plain; version=0.0.4; charset=utf-8")
        else:
            snap = svc.sampler.current(1.0, fresh=b"fresh=1" in query.split(b"&"))
            snap, history = rights.view(user, snap, svc.sampler.history())
            state = {k: v for k, v in snap.items()
                     if k not in ("info", "raw_keys", "metrics")}   # (/metrics' own)
            state["history"] = history
            state["top_n"] = svc.sampler.top_n()
            self._send(200, json.dumps(state, default=str).encode(),
                       "application/json")


__all__ = ["HttpService", "HttpConnection"]
