"""Persistence: nothing acknowledged is lost.

RDB: the value format of DUMP/RESTORE (``rdb``), whole files in Valkey 8.1's
format (``rdbfile``), SAVE/BGSAVE and save points (``snapshots``), what a
forked child needs (``forkchild``).  The append-only file is the ``aof``
package.  Each data type's own encoding lives beside it in
``hotkv.types.codec``; replication (``hotkv.replication``) sends and loads
the same RDB stream.
"""
