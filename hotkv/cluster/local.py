"""MIGRATE to a node of the same process, without a socket.

The nodes of an ``EmbeddedCluster`` share one event loop thread, so
MIGRATE's blocking connection to another node of it could never be
answered.  ``connect(server, host, port)`` gives MIGRATE, for such a
target, an object with the socket calls it uses (``setsockopt``,
``sendall``, ``recv``, ``close``): ``sendall`` runs the commands on the
target's server at once -- through ``dispatch.call`` with a client of its
own, as RESTORE-ASKING, without routing: the target imports the slot --
and ``recv`` returns their replies' bytes.

Invariants: the target's replies come in command order, each complete;
nothing is sent to a node that is not in the topology or was killed.
"""

from __future__ import annotations

from ..clients.client import Client
from ..core.dispatch import call
from ..protocol.resp import RequestParser


class LocalSocket:
    def __init__(self, target):
        self.target = target
        self.replies = bytearray()

    def setsockopt(self, *args):
        pass

    def sendall(self, data: bytes):
        server = self.target
        commands, error = RequestParser().feed(bytes(data))
        fake = Client(server, fake=True)
        fake.kind = "migrate"
        for argv in commands:
            cmd = server.command_table.get(argv[0]) or server.command_table.get(argv[0].lower())
            fake.out = []
            if cmd is None:
                self.replies += b"-ERR unknown command\r\n"
                continue
            if cmd.name == "restore":
                # The target imports the slot: RESTORE-ASKING's effect.
                fake.asking = True
            call(fake, cmd, argv)
            self.replies += b"".join(fake.out)

    def recv(self, n: int) -> bytes:
        out = bytes(self.replies[:n])
        del self.replies[:n]
        return out

    def close(self):
        pass


def connect(server, host: str, port: int):
    """A LocalSocket to the live in-process node at host:port, or None."""
    state = server.cluster
    if state is None:
        return None
    for n in state.topology.nodes.values():
        if n.port == port and n.server is not None and not n.failed \
                and n.host in (host, "") and n.server is not server:
            return LocalSocket(n.server)
    return None
