"""What a forked child needs before it writes a snapshot (the AOF rewrite's
and BGSAVE's children, hotkv/persistence/aof/rewrite.py and hotkv/persistence/snapshots.py).

Owns: ``load_prctl`` (run in the parent before fork, so the child imports
nothing: an import after fork can deadlock on a lock another thread held),
``die_with_parent`` (Linux's PR_SET_PDEATHSIG, so a child never outlives
the server), ``inherited_fds`` (the descriptors the child closes but its
own), and the fork itself with what keeps the parent's latency low while
a child runs (``fork``, ``child_setup``, ``reaped``):

* the cyclic GC's objects are frozen (``gc.freeze``) from the fork until
  the last child is reaped: a gen-2 collection in the parent would write
  every tracked object's GC header, copying (copy-on-write) every page the
  child still shares, and walk a heap that cannot hold new garbage anyway;
* the child runs at ``CHILD_NICE`` (a lower CPU priority): on a machine
  with fewer cores than busy threads the child's CPU would otherwise delay
  the event loop by whole scheduler slices; when a core is idle it still
  runs at full speed;
* the fork's duration and count go to ``server.latest_fork_usec`` and
  ``server.total_forks`` (INFO stats), as Valkey measures its fork;
* with ``oom-score-adj`` on, the child writes the background-child class of
  ``oom-score-adj-values`` to its own oom_score_adj (hotkv.clients.limits), as
  Valkey's children do: the kernel kills a child before its server.

Invariants: every ``fork`` that returned a pid is matched by one
``reaped`` (the parent's child-done and kill paths); the GC is frozen
exactly while at least one child forked here is unreaped.
"""

from __future__ import annotations

import gc
import os
import signal
import time

from ..clients import limits  # (loaded already: the server imports it)

_prctl = None
# The child's nice increment (bench/persistence.py turns it to compare).
CHILD_NICE = 10
# Whether to freeze the GC's objects while a child runs (the same).
FREEZE_GC = True
_children = 0                 # forked here and not yet reaped


def load_prctl():
    global _prctl
    if _prctl is None:
        try:
            import ctypes
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except Exception:
            _prctl = False


def die_with_parent(parent: int):
    """Linux: the child is killed when the server (thread) dies --
    also when it died before the child got here (then getppid changed)."""
    if _prctl:
        try:
            _prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != parent:
        os._exit(1)


def inherited_fds():
    try:
        return [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        try:
            top = min(os.sysconf("SC_OPEN_MAX"), 65536)
        except (ValueError, OSError):
            top = 4096
        return range(3, top)


def fork(server) -> int:
    """os.fork() for a snapshot child: 0 in the child, its pid in the
    parent; OSError when it fails (nothing left frozen then)."""
    global _children
    load_prctl()      # before fork: the child imports nothing
    values = server.config.values
    if FREEZE_GC and not _children:
        gc.freeze()
    _children += 1
    t0 = time.perf_counter()
    try:
        pid = os.fork()
    except OSError:
        reaped()
        raise
    if pid:
        server.latest_fork_usec = int((time.perf_counter() - t0) * 1e6)
        server.total_forks += 1
    elif values["oom-score-adj"] != "no":
        # Valkey's serverFork: the child takes the background-child class.
        limits.set_oom_score_adj(values, limits.OOM_BGCHILD)
    return pid


def child_setup(parent: int):
    """First thing in the child: no GC (it allocates little, and a
    collection would copy every shared page), a lower priority, and death
    with the parent."""
    gc.disable()
    if CHILD_NICE:
        try:
            os.nice(CHILD_NICE)
        except OSError:
            pass
    die_with_parent(parent)


def run_child(parent: int, work, what: str, keep: tuple = (), lower_priority: bool = False):
    """The whole life of a forked child; never returns.  Set up (``child_setup``
    with ``lower_priority``, else only no GC and death with the parent),
    close every inherited fd above 2 but ``keep`` (listening and client
    sockets stay the parent's only: a parent killed mid-save must free its
    port at once), run ``work()`` and exit 0 -- or exit 1 with
    ``<what> failed: <error>`` on stderr."""
    code = 1
    try:
        if lower_priority:
            child_setup(parent)
        else:
            gc.disable()
            die_with_parent(parent)
        for fd in inherited_fds():
            if fd > 2 and fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        work()
        code = 0
    except BaseException as e:
        try:
            os.write(2, ("%s failed: %r\n" % (what, e)).encode())
        except BaseException:
            pass
    finally:
        os._exit(code)


def reaped():
    """A child from ``fork`` has ended (or could not start)."""
    global _children
    _children = max(_children - 1, 0)
    if not _children and gc.get_freeze_count():
        gc.unfreeze()
