"""The process title (``/proc/<pid>/cmdline``) from ``proc-title-template``.

Valkey rewrites its command line so ``ps`` shows what the template says
(``{title} {listen-addr} {server-mode}`` by default; CONFIG SET applies a
new one at once).  hotkv does it only as a server process of its own
(``hotkv serve`` / the valkey-server launcher: ``server.serving``, which
setting ``server.config_file`` marks) and only when the template is set at
run time, never in an embedding program.  Linux only: the title is written over the memory of the
process's original argument strings, as setproctitle(3) does -- the
environment strings that follow them are copied elsewhere first and
libc's ``environ`` pointed at the copies, so the area from the first
argument to the end of the environment can hold the title (the kernel reads
a cmdline whose argument area no longer ends in NUL on into that space).

Invariants: nothing is written outside [arg_start, env_end) as the kernel
reports them; the environment is moved once and the copies live as long as
the process; a failure leaves the title as it was (returns False).
"""

from __future__ import annotations

import ctypes
import os
import sys

_state: dict = {}      # "area": (start, size) once the environment has moved
MAX_TITLE = 255        # Valkey's setproctitle keeps the first 255 bytes (SPT_MAXTITLE)


def _area():
    if "area" in _state:
        return _state["area"]
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 48-51 (1-based; the split starts at field 3): arg_start .. env_end.
    arg_start, arg_end, env_start, env_end = (int(fields[i - 3]) for i in (48, 49, 50, 51))
    end = arg_end
    if env_start == arg_end and env_end > env_start:
        libc = ctypes.CDLL(None)
        environ = ctypes.c_void_p.in_dll(libc, "environ")
        old = ctypes.cast(environ.value, ctypes.POINTER(ctypes.c_char_p))
        copies = []
        i = 0
        while old[i] is not None:
            copies.append(ctypes.create_string_buffer(old[i]))
            i += 1
        table = (ctypes.c_char_p * (len(copies) + 1))(
            *[ctypes.cast(c, ctypes.c_char_p) for c in copies], None)
        _state["keep"] = (copies, table)
        environ.value = ctypes.addressof(table)
        end = env_end
    _state["area"] = (arg_start, end - arg_start)
    return _state["area"]


def expand(server, template: str) -> str:
    """Valkey's expandProcTitleTemplate for this server."""
    values = server.config.values
    port = values.get("port", 0)
    tls = values.get("tls-port", 0) or 0
    binds = values.get("bind") or ""
    first = binds.split()[0] if binds.split() else "*"
    if first.startswith("-"):
        first = first[1:]
    shown_port = port if port else tls
    fields = {
        "title": sys.argv[0] if sys.argv and sys.argv[0] else "hotkv",
        "listen-addr": "%s:%d" % (first, shown_port),
        "server-mode": "[cluster]" if server.cluster is not None else "",
        "port": str(port),
        "tls-port": str(tls),
        "unixsocket": values.get("unixsocket") or "",
        "config-file": os.path.abspath(server.config_file) if server.config_file else "",
    }
    out, i = [], 0
    while i < len(template):
        if template[i] == "{":
            j = template.find("}", i)
            out.append(fields.get(template[i + 1:j], ""))
            i = j + 1
        else:
            out.append(template[i])
            i += 1
    return "".join(out).strip()


def apply(server) -> bool:
    """Set the title from the current template (a process server on Linux, with
    set-proc-title yes); True if it was written."""
    if not sys.platform.startswith("linux") or not server.serving:
        return False
    values = server.config.values
    if not values.get("set-proc-title", True):
        return False
    title = expand(server, values.get("proc-title-template") or "").encode(
        "utf-8", "surrogateescape")
    try:
        start, size = _area()
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    if size <= 1:
        return False
    data = title[:min(size - 1, MAX_TITLE)]
    ctypes.memmove(start, data + b"\0" * (size - len(data)), size)
    return True


def attach(server):
    """Re-apply when CONFIG SET changes the template."""
    server.config.listeners["proc-title-template"] = lambda _value: apply(server)
