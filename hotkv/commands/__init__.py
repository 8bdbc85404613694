"""Command modules.  Importing this package registers every command.

One module per area, as Redis's t_*.c files: each holds the handlers of its
commands, registered with ``hotkv.core.registry.command``.  Adding a command
touches one module (and its test).

The order of ``MODULES`` matters: commands are registered in it, and that
order is COMMAND's (and COMMAND DOCS', COMMAND LIST's) and the ACL bit of
each command.  The server-command modules (server_cmds to introspection)
keep the order they had as one module.  A module that imports another
command module must be listed after it, or it registers that module's
commands early.  Importing a command module registers its commands and
nothing else: the server's subsystems are made and called by the server
(``hotkv.server``), and no module here is imported by the core
(tests/test_layers.py).
"""

from importlib import import_module

MODULES = [
    "connection",
    "transactions",
    "keyspace",
    "strings",
    "lists",
    "server_cmds",
    "cluster",        # CLUSTER and MIGRATE after the server commands: their place
    "migrate",        # in the table since they were one module
    "monitor",
    "slowlog",
    "info",
    "config_cmds",
    "debug",
    "placeholders",
    "introspection",
    "client_cmds",
    "streams",        # a package: its entries, groups and info modules, in that order
    "pubsub_cmds",
    "acl_cmds",
    "aof_cmds",
    "hashes",
    "sets",
    "zsets",
    "zset_whole",     # the second half of t_zset.c: set algebra, ZRANDMEMBER, ZSCAN
    "sort",
    "dump",
    "scripting",
    "functions",
    "bits",
    "hll",
    "geo",
    "latency",
    "replicaof",
    "replication",
    "lolwut",
]

for _name in MODULES:
    import_module(f"{__name__}.{_name}")
