"""Pub/Sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB.

The registry and the fan-out live in ``hotkv.clients.pubsub``; this module parses
arguments and writes the confirmations.  Confirmations are pushes written
straight to the client's output (RESP3 ``>``, RESP2 ``*``), one per channel,
which is why the handlers return no reply of their own: CLIENT REPLY OFF
does not silence them, and inside EXEC they appear inline in its array, as
in Redis.  Counts: (P)SUBSCRIBE/(P)UNSUBSCRIBE report channels + patterns,
the shard variants report shard channels only.  Unsubscribing from a
channel the client is not subscribed to still confirms it, with the current
count (Valkey >= 8.1; 8.0's NOSUB error is gone).  A single node behaves as
Valkey standalone: shard channels are plain channels of their own namespace
that patterns never see.  RESP2 subscribed-mode restrictions are the
dispatcher's (``hotkv.core.dispatch``).  PUBLISH and SPUBLISH are propagated to
replicas only (``hotkv.clients.pubsub.ReplOnly``).
"""

from __future__ import annotations

from ..clients.pubsub import ReplOnly
from ..core.blocking import BLOCKED
from ..core.registry import command, container, spec
from ..protocol.errors import CommandError
from ..protocol.resp import Simple

_HDR2 = b"*3\r\n"
_HDR3 = b">3\r\n"
_KIND = {name: b"$%d\r\n%b\r\n" % (len(name), name) for name in (
    b"subscribe", b"unsubscribe", b"psubscribe", b"punsubscribe", b"ssubscribe",
    b"sunsubscribe")}


def _confirm(c, kind: bytes, name, count: int):
    """Append a subscription push: [kind, name (or null), count]."""
    if name is None:
        item = b"_\r\n" if c.resp3 else b"$-1\r\n"
    else:
        item = b"$%d\r\n%b\r\n" % (len(name), name)
    c.out.append((_HDR3 if c.resp3 else _HDR2) + _KIND[kind] + item + b":%d\r\n" % count)


def _count(c) -> int:
    return len(c.channels) + len(c.patterns)


@command("subscribe", -2, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         args="channel...", complexity="O(N) where N is the number of channels to subscribe to.")
def subscribe(c, argv):
    """Listens for messages published to channels."""
    ps = c.server.pubsub
    for ch in argv[1:]:
        ps.subscribe(c, ch)
        _confirm(c, b"subscribe", ch, _count(c))
    return BLOCKED


@command("unsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         args="[channel]...", complexity="O(N) where N is the number of channels to unsubscribe.")
def unsubscribe(c, argv):
    """Stops listening to messages posted to channels."""
    ps = c.server.pubsub
    names = argv[1:] if len(argv) > 1 else list(c.channels)
    for ch in names:
        ps.unsubscribe(c, ch)
        _confirm(c, b"unsubscribe", ch, _count(c))
    if not names:
        _confirm(c, b"unsubscribe", None, _count(c))
    return BLOCKED


@command("psubscribe", -2, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         args="pattern:p...", complexity="O(N) where N is the number of patterns to subscribe to.")
def psubscribe(c, argv):
    """Listens for messages published to channels that match one or more patterns."""
    ps = c.server.pubsub
    for pattern in argv[1:]:
        ps.psubscribe(c, pattern)
        _confirm(c, b"psubscribe", pattern, _count(c))
    return BLOCKED


@command("punsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         args="[pattern:p]...",
         complexity="O(N) where N is the number of patterns to unsubscribe.")
def punsubscribe(c, argv):
    """Stops listening to messages published to channels that match one or more patterns."""
    ps = c.server.pubsub
    names = argv[1:] if len(argv) > 1 else list(c.patterns)
    for pattern in names:
        ps.punsubscribe(c, pattern)
        _confirm(c, b"punsubscribe", pattern, _count(c))
    if not names:
        _confirm(c, b"punsubscribe", None, _count(c))
    return BLOCKED


@command("ssubscribe", -2, "pubsub noscript loading stale", group="pubsub", since="7.0.0",
         key_specs=(spec("not_key", "index 1", "range -1 1 0"),), args="shardchannel...",
         complexity="O(N) where N is the number of shard channels to subscribe to.")
def ssubscribe(c, argv):
    """Listens for messages published to shard channels."""
    if c.in_exec:
        # Redis refuses it for every client that may not block, MULTI included.
        raise CommandError("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
    ps = c.server.pubsub
    for ch in argv[1:]:
        ps.subscribe(c, ch, shard=True)
        _confirm(c, b"ssubscribe", ch, len(c.shard_channels))
    return BLOCKED


@command("sunsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="7.0.0",
         key_specs=(spec("not_key", "index 1", "range -1 1 0"),), args="[shardchannel]...",
         complexity="O(N) where N is the number of shard channels to unsubscribe.")
def sunsubscribe(c, argv):
    """Stops listening to messages posted to shard channels."""
    ps = c.server.pubsub
    names = argv[1:] if len(argv) > 1 else list(c.shard_channels)
    for ch in names:
        ps.unsubscribe(c, ch, shard=True)
        _confirm(c, b"sunsubscribe", ch, len(c.shard_channels))
    if not names:
        _confirm(c, b"sunsubscribe", None, len(c.shard_channels))
    return BLOCKED


@command("publish", 3, "pubsub loading stale fast may_replicate", group="pubsub",
         since="2.0.0", args="channel message",
         complexity="O(N+M) where N is the number of clients subscribed to the receiving channel "
                    "and M is the total number of subscribed patterns (by any client).")
def publish(c, argv):
    """Posts a message to a channel."""
    server = c.server
    n = server.pubsub.publish(argv[1], argv[2])
    if server.cluster is not None:   # the cluster bus's broadcast (hotkv.cluster.state)
        server.cluster.publish_elsewhere(argv[1], argv[2], False)
    elif server.repl.backlog is not None:
        # To the replicas, in order with the writes around it (inside a
        # transaction's MULTI/EXEC), never to the AOF (hotkv.clients.pubsub.ReplOnly).
        server.propagate(c.db.index, ReplOnly(argv))
    return n


@command("spublish", 3, "pubsub loading stale fast may_replicate", group="pubsub",
         since="7.0.0", key_specs=(spec("not_key"),), args="shardchannel message",
         complexity="O(N) where N is the number of clients subscribed to the receiving shard "
                    "channel.")
def spublish(c, argv):
    """Post a message to a shard channel"""
    server = c.server
    n = server.pubsub.publish(argv[1], argv[2], shard=True)
    if server.cluster is not None:   # to the shard's other nodes (hotkv.cluster.state)
        server.cluster.publish_elsewhere(argv[1], argv[2], True)
    elif server.repl.backlog is not None:
        server.propagate(c.db.index, ReplOnly(argv))   # as PUBLISH
    return n


# -- PUBSUB ---------------------------------------------------------------------

container("pubsub", group="pubsub", since="2.8.0",
          summary="A container for Pub/Sub commands.", complexity="Depends on subcommand.")

_HELP = (
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> "
    "(default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
)


def _syntax_error(argv):
    sub = argv[1]
    nul = sub.find(b"\0")
    if nul >= 0:
        sub = sub[:nul]
    return CommandError(
        "ERR unknown subcommand or wrong number of arguments for '%s'. Try PUBSUB HELP."
        % sub[:128].decode("utf-8", "surrogateescape"))


@command("pubsub|channels", -2, "pubsub loading stale", group="pubsub", since="2.8.0",
         args="[pattern:p]",
         complexity="O(N) where N is the number of active channels, and assuming constant time "
                    "pattern matching (relatively short channels and patterns)")
def pubsub_channels(c, argv):
    """Returns the active channels."""
    if len(argv) > 3:
        raise _syntax_error(argv)
    return c.server.pubsub.channel_list(argv[2] if len(argv) == 3 else None)


@command("pubsub|help", 2, "loading stale", group="pubsub", since="6.2.0", complexity="O(1)")
def pubsub_help(c, argv):
    """Returns helpful text about the different subcommands."""
    head = argv[0].upper() + b" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    return ([Simple(head)] + [Simple(line.encode()) for line in _HELP]
            + [Simple(b"HELP"), Simple(b"    Print this help.")])


@command("pubsub|numpat", 2, "pubsub loading stale", group="pubsub", since="2.8.0",
         complexity="O(1)")
def pubsub_numpat(c, argv):
    """Returns a count of unique pattern subscriptions."""
    return c.server.pubsub.numpat()


@command("pubsub|numsub", -2, "pubsub loading stale", group="pubsub", since="2.8.0",
         args="[channel]...",
         complexity="O(N) for the NUMSUB subcommand, where N is the number of requested channels")
def pubsub_numsub(c, argv):
    """Returns a count of subscribers to channels."""
    ps = c.server.pubsub
    out = []
    for ch in argv[2:]:
        out.append(ch)
        out.append(ps.numsub(ch))
    return out


@command("pubsub|shardchannels", -2, "pubsub loading stale", group="pubsub", since="7.0.0",
         args="[pattern:p]",
         complexity="O(N) where N is the number of active shard channels, and assuming constant "
                    "time pattern matching (relatively short shard channels).")
def pubsub_shardchannels(c, argv):
    """Returns the active shard channels."""
    if len(argv) > 3:
        raise _syntax_error(argv)
    return c.server.pubsub.channel_list(argv[2] if len(argv) == 3 else None, shard=True)


@command("pubsub|shardnumsub", -2, "pubsub loading stale", group="pubsub", since="7.0.0",
         args="[shardchannel]...",
         complexity="O(N) for the SHARDNUMSUB subcommand, where N is the number of requested "
                    "shard channels")
def pubsub_shardnumsub(c, argv):
    """Returns the count of subscribers of shard channels."""
    ps = c.server.pubsub
    out = []
    for ch in argv[2:]:
        out.append(ch)
        out.append(ps.numsub(ch, shard=True))
    return out


# Valkey gives PUBSUB HELP no @pubsub category (it has no pubsub flag).
pubsub_help.command.acl_categories = frozenset({"slow"})
