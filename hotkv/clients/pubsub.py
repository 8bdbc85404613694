"""Pub/Sub: the channel and pattern registry, message fan-out, and the
output-buffer limit that protects the server from slow subscribers.

Owns ``PubSub`` (one per server, ``server.pubsub``, made by ``init_server``),
the ``client-output-buffer-limit`` parameter, and the cleanup of a client's
subscriptions (``client_gone``, which the server calls on RESET and
disconnect).  No sockets: messages are appended
to ``client.out`` and the client is scheduled for the once-per-loop-turn
flush (``Client.schedule_flush``).

Invariants:
* ``channels[ch]`` / ``shard_channels[ch]`` / ``patterns[p].clients`` hold
  exactly the clients whose ``channels`` / ``shard_channels`` / ``patterns``
  set holds that name; an entry with no clients left is deleted (so
  PUBSUB CHANNELS and NUMPAT count only live subscriptions).
* A message is encoded at most once per protocol version per publish, and
  the same bytes object is appended to every subscriber's output.
* A message to the client whose command is running (it published to a
  channel it listens to, or its write raised a keyspace event it listens
  to) goes to ``server.pending_push`` and is appended after the command's
  reply -- after the whole EXEC for a transaction -- as Redis does.
* Subscription confirmations and messages are pushes: CLIENT REPLY OFF/SKIP
  do not silence them.
* A subscriber whose pending output (queued + transport buffer) reaches the
  pubsub class's hard limit, or stays over the soft limit for longer than
  soft-seconds, is disconnected at publish time and counted in
  ``stat_client_outbuf_limit_disconnections``; it is unsubscribed at once,
  so it stops counting as a receiver.  The check costs O(1) per delivery:
  the output size is measured once per client per loop turn and then kept
  up to date by adding what this module appends.
* PUBLISH reaches replicas, never the AOF (Valkey's forceCommandPropagation
  with PROPAGATE_REPL): its entry in the propagation unit is a ``ReplOnly``
  argv, which the AOF writer leaves out; only a primary with a replication
  stream queues it (a cluster node broadcasts instead).
"""

from __future__ import annotations

import logging
import time

from ..core import config as _config
from ..core.config import ConfigError
from ..protocol.util import compile_glob


class ReplOnly(list):
    """A propagated argv that goes to the replicas only (PUBLISH)."""
    __slots__ = ()

log = logging.getLogger("hotkv")

_MESSAGE = b"$7\r\nmessage\r\n"
_SMESSAGE = b"$8\r\nsmessage\r\n"
_PMESSAGE = b"$8\r\npmessage\r\n"
_INF = float("inf")


# ----------------------------------------------------------------------
# client-output-buffer-limit
# ----------------------------------------------------------------------
# The value is a tuple of (class, hard, soft, soft_seconds), one per class in
# Redis's order.  CONFIG SET and config lines may name only some classes;
# parse() returns just those and the server's listener merges them over the
# current limits (hence ``multi``: config-file lines accumulate).

OBUF_CLASSES = ("normal", "slave", "pubsub")
_CLASS_ALIASES = {"normal": "normal", "slave": "slave", "replica": "slave",
                  "pubsub": "pubsub"}
_MEM_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000 ** 2, "mb": 1024 ** 2,
              "g": 1000 ** 3, "gb": 1024 ** 3}
_ULLONG_MAX = 2 ** 64 - 1
OBUF_DEFAULT = (("normal", 0, 0, 0), ("slave", 268435456, 67108864, 60),
                ("pubsub", 33554432, 8388608, 60))


def _memtoull(text: str):
    """Redis's memtoull: digits then an optional unit; None on error."""
    if text.startswith("-") or not text.isascii():
        return None
    i = 0
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    unit = text[i:].lower()
    if unit not in _MEM_UNITS:
        return None
    digits = text[:i]
    if len(digits) >= 128:
        return None
    value = min(int(digits), _ULLONG_MAX) if digits else 0
    return (value * _MEM_UNITS[unit]) & _ULLONG_MAX


def _soft_seconds(text: str):
    """strtoll() then a C int, as Redis stores it; None on error."""
    t = text.lstrip(" \t\n\v\f\r")
    sign = 1
    if t[:1] in ("+", "-"):
        sign = -1 if t[0] == "-" else 1
        t = t[1:]
    if not t.isdigit() or not t.isascii():
        if t == "" and text.strip() == "":   # strtoll("") is 0, end at start
            return 0
        return None
    v = sign * int(t)
    v = max(min(v, 2 ** 63 - 1), -2 ** 63)
    v = (v + 2 ** 31) % 2 ** 32 - 2 ** 31
    return v if v >= 0 else None


def parse_obuf_limits(text: str) -> tuple:
    """``class hard soft seconds`` groups -> tuple of the classes named."""
    args = text.split(" ") if text else []
    if len(args) % 4:
        raise ConfigError("Wrong number of arguments in buffer limit configuration.")
    out = {}
    for j in range(0, len(args), 4):
        name = args[j]
        cls = _CLASS_ALIASES.get(name.lower()) if name.isascii() else None
        if cls is None:
            raise ConfigError("Invalid client class specified in buffer limit configuration.")
        hard = _memtoull(args[j + 1])
        soft = _memtoull(args[j + 2])
        secs = _soft_seconds(args[j + 3])
        if hard is None or soft is None or secs is None:
            raise ConfigError("Error in hard, soft or soft_seconds setting in buffer limit "
                              "configuration.")
        out[cls] = (cls, hard, soft, secs)
    return tuple(out.values())


def merge_obuf_limits(current: tuple, update: tuple) -> tuple:
    table = {entry[0]: entry for entry in current}
    for entry in update:
        table[entry[0]] = entry
    return tuple(table.get(cls, default) for cls, default in
                 zip(OBUF_CLASSES, OBUF_DEFAULT))


def format_obuf_limits(value: tuple) -> str:
    full = merge_obuf_limits(OBUF_DEFAULT, value)
    return " ".join("%s %d %d %d" % entry for entry in full)


_config.param("client-output-buffer-limit", "special", OBUF_DEFAULT, multi=True,
              parse_fn=parse_obuf_limits, fmt=format_obuf_limits)


# ----------------------------------------------------------------------
# The registry
# ----------------------------------------------------------------------

class _Pattern:
    __slots__ = ("match", "clients")

    def __init__(self, pattern: bytes):
        self.match = compile_glob(pattern, exact=True)
        self.clients: dict = {}


class PubSub:
    """Channels, shard channels and patterns of one server."""

    def __init__(self, server):
        self.server = server
        self.channels: dict = {}         # channel -> {client: None}
        self.shard_channels: dict = {}   # shard channel -> {client: None}
        self.patterns: dict = {}         # pattern -> _Pattern
        # client -> output bytes pending, measured this loop turn
        self._queued: dict = {}
        self.limit = (0, 0, 0)           # pubsub class: hard, soft, seconds
        self._threshold = _INF
        self.obuf_limits = OBUF_DEFAULT
        # Clients whose soft-limit time started: the cron closes one whose
        # time runs out with no further message (hotkv.clients.limits.cron).
        self.soft_clients: dict = {}

    # -- configuration ------------------------------------------------------
    def set_obuf_limits(self, value: tuple):
        merged = merge_obuf_limits(self.obuf_limits, value)
        self.obuf_limits = merged
        self.server.config.values["client-output-buffer-limit"] = merged
        _, hard, soft, secs = merged[2]
        self.limit = (hard, soft, secs)
        self._threshold = min(hard or _INF, soft or _INF)

    # -- subscriptions ------------------------------------------------------
    def subscribe(self, c, channel: bytes, shard: bool = False) -> bool:
        mine = c.shard_channels if shard else c.channels
        if channel in mine:
            return False
        mine.add(channel)
        table = self.shard_channels if shard else self.channels
        subs = table.get(channel)
        if subs is None:
            subs = table[channel] = {}
        subs[c] = None
        return True

    def unsubscribe(self, c, channel: bytes, shard: bool = False) -> bool:
        mine = c.shard_channels if shard else c.channels
        if channel not in mine:
            return False
        mine.discard(channel)
        table = self.shard_channels if shard else self.channels
        subs = table[channel]
        del subs[c]
        if not subs:
            del table[channel]
        return True

    def psubscribe(self, c, pattern: bytes) -> bool:
        if pattern in c.patterns:
            return False
        c.patterns.add(pattern)
        entry = self.patterns.get(pattern)
        if entry is None:
            entry = self.patterns[pattern] = _Pattern(pattern)
        entry.clients[c] = None
        return True

    def punsubscribe(self, c, pattern: bytes) -> bool:
        if pattern not in c.patterns:
            return False
        c.patterns.discard(pattern)
        entry = self.patterns[pattern]
        del entry.clients[c]
        if not entry.clients:
            del self.patterns[pattern]
        return True

    def unsubscribe_all(self, c):
        """Drop every subscription of c without telling it (RESET, disconnect)."""
        for ch in list(c.channels):
            self.unsubscribe(c, ch)
        for ch in list(c.shard_channels):
            self.unsubscribe(c, ch, shard=True)
        for p in list(c.patterns):
            self.punsubscribe(c, p)
        self._queued.pop(c, None)
        c.output_soft_since = 0

    # -- publishing ---------------------------------------------------------
    def publish(self, channel: bytes, message: bytes, shard: bool = False) -> int:
        """Deliver message; returns the number of receivers, as PUBLISH."""
        receivers = 0
        victims = None
        subs = (self.shard_channels if shard else self.channels).get(channel)
        # The frame's parts after its header; joined once per protocol
        # version that has a receiver (one copy of the payload each).
        tail = (b"$%d\r\n" % len(channel), channel, b"\r\n$%d\r\n" % len(message), message,
                b"\r\n")
        if subs:
            victims = self._send(subs, (_SMESSAGE if shard else _MESSAGE,) + tail, 3, victims)
            receivers = len(subs)
        if not shard and self.patterns:
            for pattern, entry in self.patterns.items():
                if entry.match(channel):
                    parts = (_PMESSAGE, b"$%d\r\n" % len(pattern), pattern, b"\r\n") + tail
                    victims = self._send(entry.clients, parts, 4, victims)
                    receivers += len(entry.clients)
        if victims:
            self._drop(victims)
        return receivers

    def _send(self, clients, parts: tuple, n: int, victims):
        server = self.server
        current = server.current_client
        queued = self._queued
        threshold = self._threshold
        frame2 = frame3 = None
        for c in clients:
            if c.resp3:
                if frame3 is None:
                    frame3 = b"".join((b">%d\r\n" % n,) + parts)
                frame = frame3
            else:
                if frame2 is None:
                    frame2 = b"".join((b"*%d\r\n" % n,) + parts)
                frame = frame2
            if c is current:
                server.pending_push.append(frame)
                continue
            out = c.out
            size = queued.get(c)
            if size is None or not out:
                size = c.output_size()
            size += len(frame)
            queued[c] = size
            out.append(frame)
            if not c.flush_scheduled:
                c.schedule_flush()
            if size >= threshold:
                if self._over_limit(c, size):
                    if victims is None:
                        victims = []
                    victims.append(c)
            elif c.output_soft_since:
                c.output_soft_since = 0
        return victims

    def _over_limit(self, c, used: int) -> bool:
        hard, soft, seconds = self.limit
        if hard and used >= hard:
            return True
        if soft and used >= soft:
            now = int(time.time())
            if not c.output_soft_since:
                c.output_soft_since = now
                self.soft_clients[c] = None
                return False
            return now - c.output_soft_since > seconds
        c.output_soft_since = 0
        return False

    def cron(self):
        """The soft limit with no traffic (Valkey's clientsCron checks every
        client's limits): a subscriber over it past soft-seconds is closed."""
        victims = []
        for c in list(self.soft_clients):
            if c.closed or not c.output_soft_since or not c.subscribed:
                del self.soft_clients[c]
            elif self._over_limit(c, c.output_size()):
                victims.append(c)
            elif not c.output_soft_since:     # under the limit again
                del self.soft_clients[c]
        if victims:
            for c in victims:
                self.soft_clients.pop(c, None)
            self._drop(victims)

    def _drop(self, victims):
        server = self.server
        for c in victims:
            if c.closed or getattr(c, "is_fake", False):
                continue
            server.stat_client_outbuf_limit_disconnections += 1
            log.warning("Client id=%d addr=%s closed for overcoming of output buffer limits.",
                        c.id, c.addr)
            self.unsubscribe_all(c)
            kill = getattr(c, "kill", None)
            if kill is not None:
                kill()
            else:
                c.close()

    def new_turn(self):
        """Before replies leave (Server.before_sleep): the flush empties every
        queue we measured."""
        if self._queued:
            self._queued.clear()

    # -- introspection ------------------------------------------------------
    def channel_list(self, pattern: bytes | None, shard: bool = False) -> list:
        table = self.shard_channels if shard else self.channels
        if pattern is None:
            return list(table)
        match = compile_glob(pattern, exact=True)
        return [ch for ch in table if match(ch)]

    def numsub(self, channel: bytes, shard: bool = False) -> int:
        subs = (self.shard_channels if shard else self.channels).get(channel)
        return len(subs) if subs else 0

    def numpat(self) -> int:
        return len(self.patterns)

    def clients(self) -> int:
        """Clients with at least one subscription (INFO pubsub_clients)."""
        return sum(1 for c in self.server.clients.values()
                   if c.channels or c.patterns or c.shard_channels)

    def info_fields(self) -> dict:
        """INFO stats fields this module owns."""
        return {"pubsub_channels": len(self.channels), "pubsub_patterns": len(self.patterns),
                "pubsubshard_channels": len(self.shard_channels),
                "pubsub_clients": self.clients()}


# ----------------------------------------------------------------------
# What the server calls, by name (hotkv.server)
# ----------------------------------------------------------------------

def init_server(server) -> PubSub:
    """The server's PubSub, its output-buffer limits from the settings.  The
    server routes CONFIG SET client-output-buffer-limit to ``set_obuf_limits``
    (hotkv.clients.limits reads the normal class from the merged value)."""
    ps = PubSub(server)
    # The configured value may name only some classes (a config line, an
    # override): complete it over the defaults.
    ps.set_obuf_limits(server.config.values["client-output-buffer-limit"])
    return ps


def client_gone(c):
    """c disconnected or RESET: drop its subscriptions and its measured output."""
    ps = c.server.pubsub
    if c.channels or c.patterns or c.shard_channels:
        ps.unsubscribe_all(c)
    else:
        ps._queued.pop(c, None)


__all__ = ["PubSub", "init_server", "client_gone", "parse_obuf_limits", "format_obuf_limits",
           "OBUF_DEFAULT"]
