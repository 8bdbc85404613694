"""Keyspace and keyevent notifications (``notify-keyspace-events``).

Owns the parameter (parsed into Redis's flag bits, formatted back the way
Redis's CONFIG GET shows it: "KA" reads back as "AK") and, from
``init_server`` (which the server calls), ``server.notify`` --
``fn(db, key, cls, event)``, called by ``Server.written`` /
``Server.event`` / ``Server.key_expired`` -- which publishes
``__keyspace@<db>__:<key>`` -> event and ``__keyevent@<db>__:<event>`` ->
key through ``server.pubsub``.

Invariants:
* ``server.notify`` is None unless some class is enabled together with K
  or E, so a server with notifications off pays one attribute test per
  write and nothing else;
* ``server.notify_new`` is True exactly when the "n" (new key) class is
  on: the keyspace emits "new" when a key is created only then;
* ``cls`` is the class letter (``g $ l s h z x e t n m d``); a class not
  enabled publishes nothing.
"""

from __future__ import annotations

from . import config as _config
from .config import ConfigError

KEYSPACE = 1 << 0    # K
KEYEVENT = 1 << 1    # E
GENERIC = 1 << 2     # g
STRING = 1 << 3      # $
LIST = 1 << 4        # l
SET = 1 << 5         # s
HASH = 1 << 6        # h
ZSET = 1 << 7        # z
EXPIRED = 1 << 8     # x
EVICTED = 1 << 9     # e
STREAM = 1 << 10     # t
KEY_MISS = 1 << 11   # m (not part of A)
MODULE = 1 << 13     # d
NEW = 1 << 14        # n (not part of A)
ALL = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE

CLASS_BITS = {"A": ALL, "g": GENERIC, "$": STRING, "l": LIST, "s": SET, "h": HASH,
              "z": ZSET, "x": EXPIRED, "e": EVICTED, "K": KEYSPACE, "E": KEYEVENT,
              "t": STREAM, "m": KEY_MISS, "d": MODULE, "n": NEW}
# The order CONFIG GET lists the classes in (when not all of A are on).
_FORMAT_ORDER = (("g", GENERIC), ("$", STRING), ("l", LIST), ("s", SET), ("h", HASH),
                 ("z", ZSET), ("x", EXPIRED), ("e", EVICTED), ("t", STREAM),
                 ("d", MODULE), ("n", NEW))


def parse_flags(text: str) -> int:
    flags = 0
    for ch in text:
        bit = CLASS_BITS.get(ch)
        if bit is None:
            raise ConfigError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        flags |= bit
    return flags


def format_flags(flags: int) -> str:
    if flags & ALL == ALL:
        out = "A"
    else:
        out = "".join(ch for ch, bit in _FORMAT_ORDER if flags & bit)
    if flags & KEYSPACE:
        out += "K"
    if flags & KEYEVENT:
        out += "E"
    if flags & KEY_MISS:
        out += "m"
    return out


_config.param("notify-keyspace-events", "special", 0, parse_fn=parse_flags, fmt=format_flags)

_event_bytes: dict = {}


def make_notify(server, flags: int):
    """The server.notify function for these flags, or None if it would never publish."""
    if not flags & (KEYSPACE | KEYEVENT) or not flags & ~(KEYSPACE | KEYEVENT):
        return None
    ps = server.pubsub
    keyspace = flags & KEYSPACE
    keyevent = flags & KEYEVENT
    enabled = {cls: bit for cls, bit in CLASS_BITS.items() if cls not in "AKE" and flags & bit}

    def notify(db, key, cls, event):
        if cls not in enabled or not (ps.channels or ps.patterns):
            return
        ev = _event_bytes.get(event)
        if ev is None:
            ev = event.encode() if isinstance(event, str) else bytes(event)
            if len(_event_bytes) < 1024:
                _event_bytes[event] = ev
        if keyspace:
            ps.publish(b"__keyspace@%d__:%b" % (db.index, key), ev)
        if keyevent:
            ps.publish(b"__keyevent@%d__:%b" % (db.index, ev), key)

    return notify


def apply(server, flags: int):
    server.notify = make_notify(server, flags)
    server.notify_new = server.notify is not None and bool(flags & NEW)


def init_server(server):
    """Install ``server.notify`` from the setting, and keep it in step with CONFIG SET."""
    value = server.config.values["notify-keyspace-events"]
    if isinstance(value, str):   # set before this module took the parameter over
        value = parse_flags(value)
        server.config.values["notify-keyspace-events"] = value
    apply(server, value)
    server.config.listeners["notify-keyspace-events"] = lambda flags: apply(server, flags)


__all__ = ["parse_flags", "format_flags", "make_notify", "init_server", "ALL"]
