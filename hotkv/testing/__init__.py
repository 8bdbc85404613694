"""Test-control helpers for hotkv servers (issue 16): inspection, snapshots and seeding,
faults, the command journal and waiting. Each module attaches to an EmbeddedServer and
reads or changes its state on the server loop thread, so a test sees a consistent view.

This module holds what those modules share:

* ``on_loop(server, fn)`` runs ``fn()`` on the server's event loop and returns its
  result (or raises its exception); called from the loop's own thread (an
  ``AsyncEmbeddedServer``, a predicate) it runs ``fn`` at once.  A stopped
  server (its loop closed) raises RuntimeError, a loop that does not answer
  within ``timeout`` a TimeoutError saying why it may be stuck.
* ``install_hooks(server)`` sets ``server.test_hooks``, the one hook
  ``hotkv.core.dispatch.call`` calls before each command, from what is on: the
  faults (``hotkv.testing.faults``) and the journal (``hotkv.testing.journal``).

* ``LoopThreadCallError``: a call to a server through a client, made where
  only that server's loop could answer it (its loop thread, an in-process
  turn, a ``wait_until`` predicate): raised at once instead of waiting for
  itself.

Invariants: with no fault set and the journal off ``server.test_hooks`` is None,
so the dispatcher pays one attribute test per command; the hook is only ever
changed on the loop thread (between two commands).
"""

from __future__ import annotations

import concurrent.futures

LOOP_THREAD_CALL = (
    "a call to this server through a client from the server's own loop thread "
    "(a wait_until predicate, a server callback, a synchronous client inside the "
    "AsyncEmbeddedServer's event loop) waits for a reply only that thread can give: read "
    "state instead (server.inspect..., server.server), or make the call outside the "
    "predicate, from a thread or coroutine of your own")


class LoopThreadCallError(RuntimeError):
    """A client call to a server made where only that server's loop could
    answer it (see LOOP_THREAD_CALL)."""


def on_loop(server, fn, timeout: float = 30.0):
    """fn() on the loop of ``server`` (a hotkv ``Server``); its result."""
    loop = server.loop
    if loop is not None and loop.is_closed():
        raise RuntimeError("the server is stopped (its event loop is closed): start() it "
                           "again before using its test controls")
    if loop is None or server.on_loop_thread():
        return fn()
    done: concurrent.futures.Future = concurrent.futures.Future()

    def run():
        try:
            done.set_result(fn())
        except BaseException as e:   # handed to the caller's thread
            done.set_exception(e)
    loop.call_soon_threadsafe(run)
    try:
        return done.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(
            "the server's loop thread did not answer within %.1f s: it is busy or wedged "
            "(a long script, DEBUG SLEEP, a pause, or code on that thread -- a wait_until "
            "predicate -- calling this server through a client, which waits for itself)"
            % timeout) from None


def install_hooks(server) -> None:
    """Recompute ``server.test_hooks`` (call on the loop thread)."""
    faults = server.faults
    journal = server.journal
    f_on = faults is not None and bool(faults.rules)
    j_on = journal is not None and journal.recording
    if f_on and j_on:
        fault_hook, journal_hook = faults.hook, journal.hook

        def both(client, cmd, argv, func, outer):
            # The journal sees what the faults made of the command (and so
            # records an injected error as the reply the client got).
            return journal_hook(client, cmd, argv, fault_hook(client, cmd, argv, func, outer),
                                outer)
        server.test_hooks = both
    elif f_on:
        server.test_hooks = faults.hook
    elif j_on:
        server.test_hooks = journal.hook
    else:
        server.test_hooks = None
