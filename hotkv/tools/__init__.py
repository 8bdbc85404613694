"""End-user tools: the ``hotkv`` command line and what it runs beside a server.

``cli`` is the ``hotkv`` console script (``hotkv serve`` and its config
dialects, logging, daemon and shutdown signals); ``cli_tool`` is ``hotkv
cli`` (a valkey-cli); ``checks`` is ``hotkv check-rdb`` / ``check-aof``;
``queues_tui`` and ``queues_remote`` are ``hotkv queues``.  Nothing in the
server imports this package.
"""
