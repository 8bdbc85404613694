"""hotkv: a Redis-protocol server in Python, built for job queues.

Public API: ``EmbeddedServer`` / ``AsyncEmbeddedServer`` (a real server on an
ephemeral port, for tests and in-process use), ``EmbeddedCluster`` (a
cluster of such nodes in one process, hotkv.cluster) and ``Server`` (the
state machine, for those who run their own event loop).

Importing the package registers every command (``hotkv.commands``); no other
module of hotkv imports this one (the versions are ``hotkv.version``'s), so
the package stays at the top of the import graph.
"""

from . import commands  # noqa: F401  (registers every command)
from .cluster.embedded import EmbeddedCluster
from .embedded import AsyncEmbeddedServer, EmbeddedServer
from .server import Server
from .version import REDIS_COMPAT_VERSION, __version__

__all__ = ["Server", "EmbeddedServer", "AsyncEmbeddedServer", "EmbeddedCluster", "__version__",
           "REDIS_COMPAT_VERSION"]
