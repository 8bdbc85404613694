"""Keys given a TTL on a writable replica by its own clients, and their expiry.

A replica deletes no expired key of its primary's (the primary's UNLINK
comes down the link), but a key that a client of a replica with
``replica-read-only no`` wrote with a TTL has no primary to delete it: Valkey
remembers such keys (rememberReplicaKeyWithExpire) and its cron expires
them (expireReplicaKeys), counted in ``expired_keys`` and shown as INFO's
``slave_expires_tracked_keys``.  This module is that list.

Owns ``server.replica_expire_keys``: key -> set of database indexes where a
non-primary client of a writable replica set a TTL on it (None while empty).
Invariants: only filled while the server is a replica (``replica_link``) and
the writer is not the primary's link; ``cron`` drops a key from a database
once it is expired (deleted as an active expiry) or has no TTL there; FLUSHALL
empties the list (Valkey's flushReplicaKeysWithExpireList); a pass stops
after 3 keys it could not expire or 1 ms, as Valkey's.
"""

from __future__ import annotations

import random
import time


def remember(server, db, key) -> None:
    """db.set_expire on a replica: track key if a writable replica's own
    client set the TTL."""
    link = server.replica_link
    if server.current_client is link.client or server.loading:
        return
    if server.config.values.get("replica-read-only", True):
        return
    keys = server.replica_expire_keys
    if keys is None:
        keys = server.replica_expire_keys = {}
    keys.setdefault(key, set()).add(db.index)


def count(server) -> int:
    keys = server.replica_expire_keys
    return len(keys) if keys else 0


def forget_all(server) -> None:
    server.replica_expire_keys = None


def cron(server) -> None:
    """Valkey's expireReplicaKeys: expire the tracked keys whose time came."""
    keys = server.replica_expire_keys
    if not keys:
        return
    now = server.cmd_time_ms
    start = time.monotonic()
    noexpire = 0
    order = list(keys)
    random.shuffle(order)             # Valkey draws the keys at random
    for n, key in enumerate(order):
        left = set()
        for index in keys[key]:
            db = server.dbs[index]
            when = db.expires.get(key)
            if when is None:
                continue
            if when <= now:
                db.expire_now(key)        # propagated to this replica's AOF, counted
            else:
                noexpire += 1
                left.add(index)
        if left:
            keys[key] = left
        else:
            del keys[key]
        if noexpire > 3 or (n % 64 == 63 and time.monotonic() - start > 0.001):
            break
