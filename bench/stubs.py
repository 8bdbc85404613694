"""An event loop and a transport that do nothing but count, for benches that
drive a real ``hotkv.net.connection.Connection`` in process (no sockets, no
asyncio): bench/bigvalue_stages.py and bench/replication.py."""

from __future__ import annotations


class Loop:
    """call_soon queues, run() drains; timers are never armed."""

    def __init__(self):
        self.q = []

    def call_soon(self, cb, *a):
        self.q.append((cb, a))

    def call_later(self, delay, cb, *a):
        return None

    def run(self):
        while self.q:
            q, self.q = self.q, []
            for cb, a in q:
                cb(*a)


class Transport:
    """Counts the bytes written (``n``); never backs up, never closes."""

    def __init__(self):
        self.n = 0

    def write(self, data):
        self.n += len(data)

    def writelines(self, chunks):
        for c in chunks:
            self.n += len(c)

    def get_extra_info(self, name, default=None):
        return default

    def set_write_buffer_limits(self, **kw):
        pass

    def get_write_buffer_size(self):
        return 0

    def is_closing(self):
        return False

    def close(self):
        pass
