"""The core: the keyspace and the path every command takes through it.

Owns what one server's commands act on and the rules every command obeys:
the command table (``registry``) and the dispatcher that applies the
cross-cutting checks (``dispatch``), the databases with their expiry and key
index (``db``, ``keyindex``, ``replica_keys``), blocking and client pause
(``blocking``, ``pause``), transactions' WATCH state (``multi``), keyspace
notifications (``notify``), the clock (``clock``), the settings (``config``,
``config_table``), command statistics and latency (``stats``, ``latency``),
and memory: maxmemory eviction, lazy freeing, access tracking, digests
(``eviction``, ``lazyfree``, ``access``, ``digest``).  Every object here is
made by ``hotkv.server.Server`` and belongs to that one server.

Depends on ``hotkv.protocol`` and ``hotkv.types`` only (and ``hotkv.clients``
for client eviction); never on a command module.
"""
