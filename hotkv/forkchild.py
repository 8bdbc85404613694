"""What a forked child needs before it writes a snapshot (the AOF rewrite's
and BGSAVE's children, hotkv/aof/rewrite.py and hotkv/snapshots.py).

Owns: ``load_prctl`` (run in the parent before fork, so the child imports
nothing: an import after fork can deadlock on a lock another thread held),
``die_with_parent`` (Linux's PR_SET_PDEATHSIG, so a child never outlives
the server), ``inherited_fds`` (the descriptors the child closes but its
own).
"""

from __future__ import annotations

import os
import signal

_prctl = None


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
