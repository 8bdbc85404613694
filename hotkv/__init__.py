"""hotkv: a Redis-protocol server in Python, built for job queues.

Public API: ``EmbeddedServer`` / ``AsyncEmbeddedServer`` (a real server on an
ephemeral port, for tests and in-process use) and ``Server`` (the state
machine, for those who run their own event loop).
"""

__version__ = "0.1.0"
# The Redis version reported to clients (INFO redis_version, HELLO), as
# Valkey does for client-library compatibility.
REDIS_COMPAT_VERSION = "7.2.4"

from . import commands  # noqa: E402,F401  (registers every command)
from .server import Server  # noqa: E402
from .embedded import EmbeddedServer, AsyncEmbeddedServer  # noqa: E402

__all__ = ["Server", "EmbeddedServer", "AsyncEmbeddedServer", "__version__"]
