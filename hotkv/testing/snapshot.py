"""Snapshots and seeding: put a server's data in a known state, fast.

Owns ``Snapshot`` (an in-memory deep copy of every database's keys and
TTLs: ``server.snapshot()``), ``restore`` (``server.restore(snap)``: the
databases become the snapshot's), ``seed`` (``server.seed({...})``: keys
from Python objects) and ``load_rdb`` (``server.load_rdb(path)``: the
databases become a dump.rdb's, read by hotkv/persistence/rdbfile.py).

Why it is fast: a snapshot holds the type objects themselves
(hotkv/types/), copied with ``copy_value`` (COPY's deep copy: a string's
immutable bytes are shared, a container is a new one, a stream keeps its
consumer groups, consumers and PELs with their delivery times), and a
restore copies them again and rebuilds the key indexes in one pass: no
parsing, no command dispatch, no network.  bench/snapshot.py measures it
against FLUSHALL plus a pipelined re-seed (bench/RESULTS.md).

Invariants:
* a snapshot never shares mutable state with a server: taken by copying,
  restored by copying, so one snapshot restores any number of times;
* TTLs are absolute unix ms (what EXPIREAT stores): a key restored after
  its time has come is expired at once, as a dump.rdb load would;
* a restore is a write of every key it replaces or creates: transactions
  WATCHing a key that exists before or after it fail their EXEC (the
  SWAPDB rule), clients using client-side caching are told to drop
  everything (one FLUSHALL-style invalidation), ``dirty`` grows (save
  points see it), and with the AOF on the new dataset is logged as a
  FLUSHALL plus the commands that rebuild it (the AOF rewrite's), so a
  restart replays to the same data;
* blocked clients stay blocked with their timeouts unless the restored
  data can serve them: a BLPOP/BLMOVE/XREADGROUP BLOCK... waiting on a key
  that the snapshot fills is served at once, exactly as if the data had
  been pushed; nobody else is woken -- except a reader whose stream or
  group the restore removes: it gets what valkey-server's FLUSHALL gives
  it (XREADGROUP's NOGROUP error).  No keyspace notifications are sent
  (the data did not change through commands); access times (OBJECT
  IDLETIME / FREQ) start afresh, as after loading a file;
* seeding runs real commands (SET, RPUSH, HSET, SADD, ZADD, XADD,
  PEXPIRE) through a fake client on the loop, so it has every effect
  those commands have (WATCH, blocked clients, notifications, the AOF);
  they count in INFO commandstats.

A snapshot holds keys only: function libraries, scripts, configuration,
ACL users and clients are the server's, untouched by a restore.

Everything runs on the server's loop thread (hotkv.testing.inspect.run_on_loop).
"""

from __future__ import annotations

import gc
from os import PathLike
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, TypeVar, Union

from sortedcontainers import SortedList

from ..clients.client import Client
from ..core.dispatch import call, serve_ready_keys
from ..core.keyindex import KeyIndex
from ..lua.functions import FunctionError, registry
from ..persistence import rdbfile
from ..persistence.aof.rewrite import rewrite_value
from ..types.copying import copy_value
from ..types.zsets import ZSetValue
from .inspect import run_on_loop

if TYPE_CHECKING:
    from ..server import Server

_F = TypeVar("_F", bound=Callable[..., Any])
# One database in a snapshot: (keys -> values, keys -> unix ms expiry), or None when empty.
DbImage = Union[tuple[dict, dict], None]
# A key or a value for seed(): text is stored UTF-8 encoded.
Key = Union[str, bytes]


class Snapshot:
    """Every database's keys and TTLs at one moment (``server.snapshot()``).
    ``dbs[i]`` is ``(data, expires)`` for database i, or None when it was
    empty.  Treat as opaque; ``keys`` counts the keys held.  ``indexes[i]``
    holds database i's key indexes (hotkv.core.keyindex), built once here so a
    restore copies their buckets instead of hashing every key again."""

    __slots__ = ("dbs", "keys", "indexes")

    dbs: list[DbImage]
    keys: int
    indexes: list[tuple[KeyIndex, KeyIndex] | None]

    def __init__(self, dbs: list[DbImage]) -> None:
        self.dbs = dbs
        self.keys = sum(len(d[0]) for d in dbs if d is not None)
        self.indexes = [(KeyIndex(d[0]), KeyIndex(d[1])) if d is not None else None
                        for d in dbs]

    def __repr__(self) -> str:
        return "<hotkv Snapshot of %d keys>" % self.keys


def _copy_zset(z: ZSetValue) -> ZSetValue:
    """ZSetValue.copy without re-sorting: sortedcontainers' SortedList
    rebuilt from its sorted sublists (its constructor re-sorts and costs
    ~50 us even for ten members: 5,000 sorted sets took 0.5 s of a
    100k-key restore).  Falls back to copy() if the internals differ."""
    sl = z.sl
    try:
        new_sl = SortedList.__new__(SortedList)
        new_sl._len = sl._len
        new_sl._load = sl._load
        new_sl._lists = [part[:] for part in sl._lists]
        new_sl._maxes = sl._maxes[:]
        new_sl._index = sl._index[:]
        new_sl._offset = sl._offset
    except AttributeError:      # pragma: no cover - another sortedcontainers
        return z.copy()
    new = ZSetValue.__new__(ZSetValue)
    new.d = dict(z.d)
    new.sl = new_sl
    new.big = z.big
    return new


def _copy_index(index: KeyIndex | None, keys: dict) -> KeyIndex:
    """A KeyIndex over keys, copied from index (which holds exactly those
    keys) bucket by bucket; built afresh when index is mid-resize."""
    if index is None or index.old is not None or index.count != len(keys):
        return KeyIndex(keys)
    return index.copy()


def _copy(data: dict) -> dict:
    # Strings (the bulk of most datasets) are immutable bytes: shared.
    return {k: v if type(v) is bytes else
            _copy_zset(v) if type(v) is ZSetValue else copy_value(v)
            for k, v in data.items()}


def _no_gc(fn: _F) -> _F:
    """Run fn with the cyclic GC off: copying 100k values allocates enough
    containers to trigger full collections over the whole dataset (half
    the time of a restore, measured); nothing made here forms a cycle."""
    def wrapped(*args: Any) -> Any:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args)
        finally:
            if was:
                gc.enable()
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped   # type: ignore[return-value]


def take(server: Server) -> Snapshot:
    return run_on_loop(server, _take, server)


@_no_gc
def _take(server: Server) -> Snapshot:
    return Snapshot([(_copy(db.data), dict(db.expires)) if db.data else None
                     for db in server.dbs])


def restore(server: Server, snap: Snapshot, copy: bool = True) -> None:
    """Make server's databases hold exactly snap's keys (``copy=False``
    hands snap's objects over: for a snapshot used once)."""
    if len(snap.dbs) > len(server.dbs):
        if any(d is not None for d in snap.dbs[len(server.dbs):]):
            raise ValueError("the snapshot has more databases than the server (%d)"
                             % len(server.dbs))
    return run_on_loop(server, _restore, server, snap, copy)


@_no_gc
def _restore(server: Server, snap: Snapshot, copy: bool) -> None:
    pad = [None] * (len(server.dbs) - len(snap.dbs))
    entries = list(snap.dbs) + pad
    indexes = list(snap.indexes) + pad
    incoming = []
    for db, entry, index in zip(server.dbs, entries, indexes):
        data, expires = entry if entry is not None else ({}, {})
        if not data and not db.data:
            incoming.append(None)
            continue
        if copy:
            data, expires = _copy(data), dict(expires)
        incoming.append((data, expires, _copy_index(index and index[0], data),
                         _copy_index(index and index[1], expires), None))
        server.dirty += len(db.data) + len(data)
    if not any(incoming):
        return
    # WATCH and blocked clients against both key sets (SWAPDB's rule); the
    # blocked keys are only queued there, served below.
    server.replace_data(incoming, swapdb=True)
    if server.aof is not None:
        _log_dataset(server)
    if server.ready_keys:
        serve_ready_keys(server)


def _log_dataset(server: Server) -> None:
    """The AOF gets FLUSHALL and the commands rebuilding every database."""
    server.propagate(0, [b"FLUSHALL"])
    for db in server.dbs:
        expires = db.expires
        for key, value in db.data.items():
            for argv in rewrite_value(key, value):
                server.propagate(db.index, list(argv))
            when = expires.get(key)
            if when is not None:
                server.propagate(db.index, [b"PEXPIREAT", key, b"%d" % when])
    server.flush_propagation()


# ----------------------------------------------------------------------
# Loading a dump.rdb
# ----------------------------------------------------------------------

def load_rdb(server: Server, path: str | PathLike[str]) -> int:
    """Replace the databases with the RDB file's keys (as a restore: the
    same WATCH / blocked-client / AOF rules); its function libraries are
    loaded too.  Returns the number of keys loaded.  Raises
    hotkv.persistence.rdbfile.RDBLoadError for a file Valkey would refuse."""
    return run_on_loop(server, _load_rdb, server, str(path))


def _load_rdb(server: Server, path: str) -> int:
    loaded = rdbfile.read_file(path, server)
    if loaded.functions:
        try:
            registry(server).load_codes(loaded.functions)
        except FunctionError as e:
            raise rdbfile.RDBLoadError("Failed loading a function library from the RDB: %s"
                                       % e.message) from None
    snap = Snapshot([(d, e) if d else None for d, e in zip(loaded.dbs, loaded.expires)])
    _restore(server, snap, False)
    return loaded.keys_loaded


# ----------------------------------------------------------------------
# Seeding from Python objects
# ----------------------------------------------------------------------

class ZSet(dict):
    """Marks a mapping as a sorted set (member -> score) for ``seed``."""


class Hash(dict):
    """Marks a mapping as a hash for ``seed`` (whatever its values)."""


def _arg(v: object) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, bool):
        raise TypeError("a bool is not a Redis value (use 1/0 or a string)")
    if isinstance(v, float):
        return repr(v).encode()
    if isinstance(v, (str, int)):
        return str(v).encode()
    raise TypeError("cannot store %r as a Redis string" % (v,))


_CHUNK = 1000   # elements per command: keeps one seeded key from stalling the loop long


def _chunks(cmd: bytes, key: bytes, args: list[bytes], step: int = 1) -> Iterator[list[bytes]]:
    per = _CHUNK * step
    for i in range(0, len(args), per):
        yield [cmd, key, *args[i:i + per]]


def _is_stream(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(
        isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], dict) for e in v)


def commands_for(key: Key, value: Any) -> list[list[bytes]]:
    """The commands that store ``value`` (Python objects) at key:
    str/bytes/int/float -> a string; list/tuple -> a list (RPUSH, in
    order); a list of ``(id, {field: value})`` -> a stream (XADD; id "*"
    for a new one); set/frozenset -> a set; ``ZSet`` or a dict whose values
    are all floats -> a sorted set; ``Hash`` or any other dict -> a hash."""
    k = _arg(key)
    if isinstance(value, (bytes, bytearray, memoryview, str, int, float)) \
            and not isinstance(value, bool):
        return [[b"SET", k, _arg(value)]]
    if isinstance(value, (list, tuple, set, frozenset, dict)) and not value:
        raise ValueError("%r: Redis stores no empty %s" % (key, type(value).__name__))
    if _is_stream(value):
        return [[b"XADD", k, _arg(i), *[_arg(x) for kv in f.items() for x in kv]]
                for i, f in value]
    if isinstance(value, (list, tuple)):
        return list(_chunks(b"RPUSH", k, [_arg(x) for x in value]))
    if isinstance(value, (set, frozenset)):
        return list(_chunks(b"SADD", k, [_arg(x) for x in value]))
    if isinstance(value, dict):
        zset = isinstance(value, ZSet) or (
            not isinstance(value, Hash) and all(type(s) is float for s in value.values()))
        if zset:
            flat = [x for m, s in value.items() for x in (_arg(float(s)), _arg(m))]
            return list(_chunks(b"ZADD", k, flat, 2))
        flat = [_arg(x) for kv in value.items() for x in kv]
        return list(_chunks(b"HSET", k, flat, 2))
    raise TypeError("%r: cannot seed a %s" % (key, type(value).__name__))


class SeedError(RuntimeError):
    """A seeding command was refused (its error reply is the message)."""


def seed(server: Server, data: Mapping[Key, Any], db: int = 0,
         ttl: Mapping[Key, float] | None = None) -> int:
    """Store data's keys in database db, replacing what they held; ``ttl``
    maps keys to seconds to live.  Returns the number of keys written."""
    argvs = []
    for key, value in data.items():
        argvs.append([b"DEL", _arg(key)])
        argvs.extend(commands_for(key, value))
    for key, seconds in (ttl or {}).items():
        argvs.append([b"PEXPIRE", _arg(key), b"%d" % int(seconds * 1000)])
    run_on_loop(server, run_commands, server, argvs, db)
    return len(data)


def run_commands(server: Server, argvs: list[list[bytes]], db: int = 0) -> None:
    """Run each argv through the dispatcher as a fake client on db;
    SeedError on the first error reply."""
    client = Client(server, fake=True)
    client.db = server.dbs[db]
    table = server.command_table
    for argv in argvs:
        cmd = table[argv[0].lower()]
        if cmd.subcommands is not None and len(argv) > 1:    # CONFIG SET, ACL DELUSER...
            cmd = cmd.subcommands.get(argv[1].lower(), cmd)
        call(client, cmd, argv)
        out = client.out
        if out:
            first = out[0]
            client.out = []
            if first[:1] == b"-":
                raise SeedError("%s: %s" % (b" ".join(argv[:2]).decode("utf-8", "replace"),
                                            bytes(first[1:]).decode().strip()))
        if server.ready_keys:
            serve_ready_keys(server)


__all__ = ["Snapshot", "take", "restore", "load_rdb", "seed", "ZSet", "Hash", "SeedError",
           "commands_for", "run_commands"]
