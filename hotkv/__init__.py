"""hotkv: a Redis-protocol server in Python, built for job queues.

Public API: ``EmbeddedServer`` / ``AsyncEmbeddedServer`` (a real server on an
ephemeral port, for tests and in-process use), ``EmbeddedCluster`` (a
cluster of such nodes in one process, hotkv.cluster), ``Server`` (the
state machine, for those who run their own event loop) and
``inprocess_client`` (a redis-py / valkey-py client talking to an
``EmbeddedServer`` without a socket, hotkv.inprocess).  ``hotkv.fake`` is
fakeredis's API on hotkv, and its names are the package's too, loaded on
first use (they need redis-py or valkey-py): ``import hotkv.fake as
fakeredis`` and ``import hotkv as fakeredis`` both give ``FakeRedis``,
``FakeServer``... and ``aioredis.FakeRedis``.

Importing the package loads nothing but the version: the server's modules
(and with them every command, which ``hotkv.server`` registers) load on
first use of ``hotkv.Server`` or an embedded server, so ``hotkv cli`` and
``hotkv --version`` start in a tenth of the time.  No other module of hotkv
imports this one (the versions are ``hotkv.version``'s).
"""

from importlib import import_module

from .version import REDIS_COMPAT_VERSION, __version__

__all__ = ["Server", "EmbeddedServer", "AsyncEmbeddedServer", "EmbeddedCluster", "__version__",
           "REDIS_COMPAT_VERSION", "inprocess_client"]

# Loaded on first use (PEP 562): ``hotkv cli`` never loads the server, and
# ``hotkv serve`` never loads the embedded servers, the in-process connection
# or the test toolkit (about 1 MB of a served process).
_LAZY = {
    "Server": ("server", "Server"),
    "EmbeddedServer": ("embedded", "EmbeddedServer"),
    "AsyncEmbeddedServer": ("embedded", "AsyncEmbeddedServer"),
    "EmbeddedCluster": ("embedded_cluster", "EmbeddedCluster"),
    "inprocess_client": ("inprocess", "client"),
}
# fakeredis's names (hotkv.fake), so ``import hotkv as fakeredis`` moves a suite.
_LAZY.update((name, ("fake", name)) for name in (
    "FakeServer", "FakeRedis", "FakeStrictRedis", "FakeValkey", "FakeStrictValkey",
    "FakeAsyncRedis", "FakeAsyncValkey", "FakeConnection", "FakeRedisConnection",
    "FakeAsyncConnection", "FakeAsyncRedisConnection", "FakeValkeyConnection",
    "FakeAsyncValkeyConnection", "aioredis"))


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError("module 'hotkv' has no attribute %r" % name)
    value = getattr(import_module("." + where[0], __name__), where[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
