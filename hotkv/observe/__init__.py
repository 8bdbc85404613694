"""Observability: what the server shows about itself beyond INFO's counters.

MONITOR's feed and the SLOWLOG (``cmdlog``), event-loop metrics
(``loopstats``), the process title (``proctitle``), and the reads of the
queue libraries' layouts over a server's data (``queues``: used by the
dashboard, ``hotkv.testing.inspect`` and ``hotkv queues``).  The dashboard
and /metrics are ``hotkv.http``.
"""
