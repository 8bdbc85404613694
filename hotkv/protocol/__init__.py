"""The protocol: the language on the wire, with no socket and no server.

RESP2/RESP3 parsing and encoding (``resp``), Redis's exact error and reply
texts (``errors``, ``replies``), and the number formats Redis reads and
writes: string2ll and argument parsing (``util``), doubles as Valkey prints
them (``fpconv``), x87 long doubles for INCRBYFLOAT (``longdouble``).

The ground floor: imports nothing of hotkv outside this package, so data
types, commands and tools can all use it.
"""
