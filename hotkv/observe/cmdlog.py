"""Who sees the commands that run: MONITOR's feed and the SLOWLOG.

Owns the line each monitor receives (Valkey's replicationFeedMonitors),
``stop_monitoring`` (RESET and disconnection call it), and the slow log:
``server.slowlog`` (newest first, at most slowlog-max-len entries), how an
entry is made (Valkey's slowlogCreateEntry: at most 32 arguments and 128
bytes an argument, credentials redacted as MONITOR redacts them) and its
threshold.  The argument quoting and the redaction are ``hotkv.protocol.replies``'
(the scripting engine formats a script's commands the same way).  The
MONITOR and SLOWLOG commands only read and change this state; the server
declares it and ``init_slowlog`` ties it to the settings; the dispatcher feeds it, which is why it
sits below ``commands/``.

Invariants:
* ``server.monitors`` lists the monitoring clients; the dispatcher calls
  ``server.feed_monitors`` after each command only while that list is
  non-empty, so MONITOR costs nothing when nobody watches.  Admin commands,
  replays of a blocked command and the AOF loader's fake client are never
  shown;
* the dispatcher compares each command's duration with
  ``server.slowlog_threshold`` (seconds, infinite when disabled) and calls
  ``server.slowlog_push`` only for the slow ones; config listeners keep the
  threshold and the log's length in step with CONFIG SET at once.
"""

from __future__ import annotations

from ..protocol.replies import quoted, redacted


def feed_monitors(client, cmd, argv):
    """Called by the dispatcher after each command while a MONITOR exists:
    Redis's replicationFeedMonitors (admin commands are not shown, a blocked
    command is shown once, when it first runs)."""
    server = client.server
    if cmd.admin or client.reprocessing or server.loading or client.is_fake:
        return
    if "skip_monitor" in cmd.flags:
        return
    now = server.clock.time()     # hotkv.core.clock
    if client.addr == client.laddr:   # a unix socket (<path>:0 both ways)
        origin = b"unix:%s" % server.config.values["unixsocket"].encode()
    else:
        origin = client.addr.encode()
    line = b"+%.6f [%d %s] %s\r\n" % (now, client.db.index, origin,
                                        b" ".join([quoted(a) for a in redacted(cmd, argv)]))
    for mon in list(server.monitors):
        if mon.closed:
            continue
        mon.add_raw(line)
        mon.schedule_flush()


def stop_monitoring(c):
    """c is no monitor any more (RESET, disconnection)."""
    try:
        c.server.monitors.remove(c)
    except ValueError:
        pass


# -- the slow log ------------------------------------------------------------

SLOWLOG_MAX_ARGC = 32
SLOWLOG_MAX_ARGLEN = 128


class SlowlogEntry:
    __slots__ = ("id", "time", "usec", "argv", "peer", "name")


def slowlog_push(client, cmd, argv, duration: float):
    """Called by the dispatcher for a command that ran at least
    slowlog-log-slower-than microseconds (Redis's slowlogPushEntryIfNeeded)."""
    if "skip_slowlog" in cmd.flags or client.is_fake:
        return
    server = client.server
    if not server.config.values["slowlog-max-len"]:
        return      # a zero-length log takes no entry and uses no id (as Valkey)
    args = redacted(cmd, argv)
    if len(args) > SLOWLOG_MAX_ARGC:
        args = args[:SLOWLOG_MAX_ARGC - 1] + [
            b"... (%d more arguments)" % (len(args) - SLOWLOG_MAX_ARGC + 1)]
    out = []
    for a in args:
        if len(a) > SLOWLOG_MAX_ARGLEN:
            a = a[:SLOWLOG_MAX_ARGLEN] + b"... (%d more bytes)" % (len(a) - SLOWLOG_MAX_ARGLEN)
        out.append(a)
    e = SlowlogEntry()
    e.id = server.slowlog_next_id
    server.slowlog_next_id += 1
    e.time = int(server.clock.time())     # hotkv.core.clock; the duration below is real
    e.usec = int(duration * 1_000_000)
    e.argv = out
    e.peer = client.addr.encode()
    e.name = client.name
    log_ = server.slowlog
    log_.appendleft(e)
    limit = server.config.values["slowlog-max-len"]
    while len(log_) > limit:
        log_.pop()


def init_slowlog(server):
    """Ready ``server.slowlog`` (the Server declares it): its push, and its
    threshold and length kept in step with CONFIG SET."""
    server.slowlog_push = slowlog_push

    def set_threshold(us):
        server.slowlog_threshold = float("inf") if us < 0 else us / 1_000_000
    set_threshold(server.config.values["slowlog-log-slower-than"])
    server.config.listeners["slowlog-log-slower-than"] = set_threshold

    # slowlog-max-len takes effect at the next entry (slowlog_push trims):
    # lowering it, even to 0, leaves the entries there, as Valkey does.
