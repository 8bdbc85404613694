"""Command modules.  Importing this package registers every command.

One module per area, as Redis's t_*.c files: each holds the handlers of its
commands, registered with ``hotkv.registry.command``.  Adding a command
touches one module (and its test).
"""

from importlib import import_module

MODULES = [
    "connection",
    "transactions",
    "keyspace",
    "strings",
    "lists",
    "server_cmds",
    "client_cmds",
    "streams",
    "pubsub",
    "acl",
    "aof",
    "hashes",
    "sets",
    "zsets",
    "sort",
    "dump",
    "scripting",
]

for _name in MODULES:
    import_module(f"{__name__}.{_name}")
