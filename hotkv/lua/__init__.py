"""Lua scripting (EVAL / EVALSHA / SCRIPT's runtime), following Valkey's
script_lua.c / eval.c / script.c.  No sockets here; the commands live in
``hotkv.commands.scripting``.

* ``engine`` -- the Engine (one per server): the Lua state, the script
  cache, a script's run, the redis.* API but redis.call; put together from
  its halves:
  ``calls`` (redis.call / pcall: the script-side checks, the quick path,
  the reply into Lua values, set_repl's targets), ``replies`` (the
  script's return value as RESP), ``busy`` (the script timeout: the other
  clients served and answered BUSY);
* ``sandbox`` -- the guard every Python callable a script can reach goes
  through, lupa's attribute filter (SECURITY.md);
* ``prelude.lua`` -- the Lua half of the engine: the API table, the
  sandbox, the error handler, the timeout hook (package data, loaded by
  ``engine``);
* ``functions`` -- Valkey functions (FUNCTION / FCALL's runtime): the
  library registry, the Lua state they run in (an ``Engine`` in function
  mode), the DUMP payload and the RDB records of the libraries;
* ``ldb`` (and ``ldb.lua``, its Lua half) -- the Lua debugger: SCRIPT
  DEBUG's sessions, the debugger's commands and logs;
* ``values`` -- Lua 5.1's number and type semantics as Python functions;
* ``libs`` -- the libraries Valkey ships to scripts, written in Python:
  cjson, cmsgpack, struct, bit.

Invariant: the dependencies point one way -- functions -> engine ->
calls / replies / busy / sandbox -> libs -> values; no library knows the
engine or the server.  This package imports nothing on
its own, so importing one of its modules loads only what that module needs.
"""
