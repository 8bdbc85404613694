"""A client's transaction and WATCH state: what the core clears without a command.

Owns ``discard_transaction`` (leave MULTI, forget the queue and every
WATCHed key) and ``unwatch_all``.  The dispatcher calls the first when it
refuses an EXEC, RESET and disconnection call them (``hotkv.server``), and
the transaction commands (``hotkv.commands.transactions``) build on them --
which is why they live below ``commands/``.

Invariants: a key's watcher table (``db.watched[key]``) holds exactly the
clients whose ``client.watched`` names (db, key); an empty table is deleted,
so INFO's ``total_watched_keys`` counts live watches only.
"""

from __future__ import annotations


def discard_transaction(c):
    """Leave MULTI (if in it) and unwatch everything (Valkey's discardTransaction)."""
    c.multi = False
    c.multi_queue = []
    c.multi_error = False
    c.multi_flags = 0
    unwatch_all(c)


def unwatch_all(c):
    """Forget every key c WATCHes (Valkey's unwatchAllKeys)."""
    for (index, key), db in c.watched.items():
        watchers = db.watched.get(key)
        if watchers is not None:
            watchers.pop(c, None)
            if not watchers:
                del db.watched[key]
    c.watched = {}
    c.dirty_cas = False
