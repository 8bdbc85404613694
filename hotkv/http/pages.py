"""The dashboard page (dashboard.html, beside this module, shipped as package
data): one self-contained HTML document (inline CSS and JS,
nothing fetched from elsewhere: hotkv may run with no network) that polls
``/api/state`` once a second and redraws: server cards, the queues (lists,
stream groups, library queues by their own names), depth and rate plots
drawn as inline SVG from the server's bounded history, keyspace, slowlog and
latency events.  Invariant: every value shown comes from /api/state; the
page keeps no state of its own beyond the last reply, and every text put in
the page is escaped (key names are user data).
"""

from importlib import resources

DASHBOARD = resources.files(__package__).joinpath("dashboard.html").read_bytes()

__all__ = ["DASHBOARD"]
