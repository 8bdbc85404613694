"""A pytest plugin that runs fakeredis's own tests on hotkv.fake.

Loaded with ``-p hotkv_as_fakeredis`` (before fakeredis's conftest.py is
imported), it replaces fakeredis's *public* client API -- the names
``import fakeredis`` and ``from fakeredis import aioredis`` give -- with
hotkv.fake's, whose clients talk in-process to a real hotkv server.  The
rest of the fakeredis package (``fakeredis._commands``, ``fakeredis.model``,
``fakeredis._helpers``, its TCP server...) stays fakeredis's own: tests that
import those test fakeredis's internals, not the server behind the API.

Nothing in fakeredis's suite is edited; compat/fakeredis_fake.py runs it.
"""

from __future__ import annotations

import fakeredis
import fakeredis.aioredis

import hotkv.fake

# fakeredis's top-level names -> hotkv.fake's
PUBLIC = [
    "FakeServer", "FakeRedis", "FakeStrictRedis", "FakeConnection", "FakeRedisConnection",
    "FakeAsyncRedis", "FakeAsyncConnection", "FakeAsyncRedisConnection",
    "FakeValkey", "FakeStrictValkey", "FakeAsyncValkey",
]
# fakeredis.aioredis's (its public asyncio path) -> hotkv.fake's
AIOREDIS = {"FakeRedis": "FakeAsyncRedis", "FakeConnection": "FakeAsyncConnection",
            "FakeAsyncConnection": "FakeAsyncConnection",
            "FakeAsyncRedisConnection": "FakeAsyncRedisConnection"}

for _name in PUBLIC:
    setattr(fakeredis, _name, getattr(hotkv.fake, _name))
for _name, _ours in AIOREDIS.items():
    setattr(fakeredis.aioredis, _name, getattr(hotkv.fake, _ours))


def pytest_report_header(config):
    return "fakeredis %s's public client API replaced by hotkv.fake (%s)" % (
        fakeredis.__version__, hotkv.fake.__file__)
