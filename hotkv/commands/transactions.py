"""MULTI / EXEC / DISCARD / WATCH / UNWATCH.

Queueing itself happens in the dispatcher (it is a rule about every
command), and leaving a transaction or a WATCH without a command (RESET,
disconnection, a refused EXEC) is ``hotkv.core.multi``'s; this module owns what
the transaction commands do.

Invariants:
* EXEC runs the queue with ``client.in_exec`` set, so blocking commands act
  as their non-blocking forms; blocked clients whose keys became ready are
  served after the whole EXEC (the dispatcher does it after the call), so a
  transaction that pushes twice hands both elements over in order.
* A WATCHed key touched by anyone (another client, expiry, FLUSHALL), or
  live at WATCH and logically expired at EXEC, fails the EXEC with a null
  reply; WATCH state is cleared by EXEC, DISCARD, UNWATCH and RESET.
"""

from __future__ import annotations

from ..clients.acl import exec_recheck
from ..core.blocking import BLOCKED
from ..core.dispatch import call
from ..core.multi import discard_transaction, unwatch_all
from ..core.registry import command
from ..protocol import errors
from ..protocol.errors import CommandError
from ..protocol.resp import NULL_ARRAY, OK


@command("multi", 1, "noscript loading stale fast no_multi allow_busy", group="transactions",
         since="1.2.0", summary="Starts a transaction.", complexity="O(1)")
def multi(c, argv):
    """Mark the start of a transaction block."""
    if c.multi:
        raise CommandError(errors.NESTED_MULTI)
    c.multi = True
    c.multi_queue = []
    c.multi_error = False
    c.multi_flags = 0
    return OK


@command("discard", 1, "noscript loading stale fast allow_busy", group="transactions",
         since="2.0.0", summary="Discards a transaction.",
         complexity="O(N), when N is the number of queued commands")
def discard(c, argv):
    """Discard all commands issued after MULTI."""
    if not c.multi:
        raise CommandError(errors.DISCARD_WITHOUT_MULTI)
    discard_transaction(c)
    return OK


@command("exec", 1, "noscript loading stale skip_slowlog", group="transactions", since="1.2.0",
         summary="Executes all commands in a transaction.",
         complexity="Depends on commands in the transaction")
def exec_(c, argv):
    """Execute all commands issued after MULTI."""
    if not c.multi:
        raise CommandError(errors.EXEC_WITHOUT_MULTI)
    server = c.server
    if c.multi_error:
        discard_transaction(c)
        raise CommandError(errors.EXECABORT)
    queue = c.multi_queue
    if c.watched and not c.dirty_cas:
        _expired_since_watch(c)
    if c.dirty_cas:
        discard_transaction(c)
        return NULL_ARRAY
    unwatch_all(c)
    c.multi = False
    c.multi_queue = []
    c.multi_flags = 0
    c.add_raw(b"*%d\r\n" % len(queue))
    c.in_exec = True
    try:
        for cmd, args in queue:
            if server.acl_check is not None:   # ACLs may have changed since MULTI
                denied = exec_recheck(c, cmd, args)
                if denied is not None:
                    server.count_error(denied)
                    c.add_error(denied)
                    continue
            call(c, cmd, args)
    finally:
        c.in_exec = False
        if server.aof is None and server.prop_pending:
            # A REPLICAOF in the queue made this server a replica (without an
            # AOF): the writes before it go nowhere, as Valkey drops its
            # replicas there, and there is no sink left to feed them to.
            server.prop_pending = []
    # EXEC itself is not logged: each command it ran was.
    server.prop_override = []
    return BLOCKED  # the replies are already written


def _expired_since_watch(c):
    """A WATCHed key that was live at WATCH and is logically expired now (not
    yet deleted: lazy expiry, active expiry off) fails the EXEC as a change
    would (Valkey's isWatchedKeyExpired)."""
    for (_index, key), db in c.watched.items():
        watchers = db.watched.get(key)
        flag = watchers.get(c) if watchers is not None else None
        if flag is not None and not flag[0] and key in db.data and db.is_expired(key):
            c.dirty_cas = True
            return


@command("watch", -2, "noscript loading stale fast no_multi allow_busy", keys=(1, -1, 1),
         group="transactions", since="2.2.0", key_flags="RO", args="key:k...",
         summary="Monitors changes to keys to determine the execution of a transaction.",
         complexity="O(1) for every key.")
def watch(c, argv):
    """Monitor changes to keys to determine the execution of a transaction."""
    if c.multi:
        raise CommandError(errors.WATCH_IN_MULTI)
    db = c.db
    for key in argv[1:]:
        token = (db.index, key)
        if token in c.watched:
            continue
        watchers = db.watched.get(key)
        if watchers is None:
            watchers = db.watched[key] = {}
        expired = key in db.data and db.is_expired(key)
        watchers[c] = [expired]
        c.watched[token] = db
    return OK


@command("unwatch", 1, "noscript loading stale fast allow_busy", group="transactions",
         since="2.2.0", summary="Forgets about watched keys of a transaction.", complexity="O(1)")
def unwatch(c, argv):
    """Forget about all watched keys."""
    unwatch_all(c)
    return OK

