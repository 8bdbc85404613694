"""The sharp edges of hotkv's pytest toolkit (issue 30, section 2): faults
that could never fire, misuse before start() / after stop(), the journal's
handshake entries, the clock's timedelta, AsyncEmbeddedServer.restart, an
empty queue's blocked consumers, and the shared server put back as it
started after each test (hotkv.testing.isolation).

Each test here failed on the code before its fix (checked one by one).
"""

import asyncio
import datetime
import threading
import time

import pytest
import redis
import valkey

from hotkv.embedded import AsyncEmbeddedServer, EmbeddedServer
from hotkv.testing import LoopThreadCallError
from hotkv.testing.isolation import Baseline
from test_fixtures import _counts, run_pytest


@pytest.fixture
def srv(hotkv_server_factory):
    return hotkv_server_factory()


# -- faults that never fire ---------------------------------------------------

def test_a_fault_on_an_unknown_command_is_refused(srv):
    with pytest.raises(ValueError, match=r"unknown command 'LPSUH'.*did you mean.*LPUSH"):
        srv.faults.error("LPSUH")
    with pytest.raises(ValueError, match=r"unknown subcommand 'client\|nosuch' of CLIENT"):
        srv.faults.drop("client|nosuch")
    fault = srv.faults.error("CLIENT SETNAME")      # a subcommand, as typed
    assert fault.commands == {"client|setname"}
    srv.faults.clear()


def test_a_fault_that_never_fired_warns_at_teardown(tmp_path):
    files = {"test_w.py": '''
        def test_incr(hotkv):
            import redis
            r = redis.Redis(host=hotkv.host, port=hotkv.port)
            hotkv.faults.error("INCR")         # redis-py's incr() sends INCRBY k 1
            r.incr("n")
            r.close()

        def test_fired(hotkv):
            import redis, pytest
            r = redis.Redis(host=hotkv.host, port=hotkv.port)
            with hotkv.faults.error("INCRBY"):
                with pytest.raises(redis.ResponseError):
                    r.incr("n")
            r.close()
        '''}
    proc = run_pytest(tmp_path, files, "-p", "no:randomly", "-W", "default")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert _counts(proc.stdout)["passed"] == 2
    assert "UnmatchedFaultWarning" in out and "INCRBY key 1" in out
    assert out.count("never fired") == 1, out        # test_fired's fault fired


# -- misuse -----------------------------------------------------------------

def test_test_controls_before_start_say_to_start():
    s = EmbeddedServer()
    for name in ("clock", "faults", "journal", "inspect"):
        with pytest.raises(RuntimeError, match=r"%s: the server is not started yet: "
                                               r"call start\(\)" % name):
            getattr(s, name)


def _controls_refuse(clock, faults, journal, inspect):
    """A stopped server's controls, taken before stop(), each refuse."""
    with pytest.raises(RuntimeError, match="stopped"):
        clock.advance(1)
    assert clock.real and clock.offset == 0.0          # not moved by the failed call
    with pytest.raises(RuntimeError, match="stopped"):
        faults.error("GET")
    with pytest.raises(RuntimeError, match="stopped"):
        journal.start()
    with pytest.raises(RuntimeError, match="stopped"):
        inspect.keys()


def test_test_controls_after_stop_fail_and_leave_the_clock_alone():
    s = EmbeddedServer().start()
    clock, faults, journal, inspect = s.clock, s.faults, s.journal, s.inspect
    s.stop()
    _controls_refuse(clock, faults, journal, inspect)
    for name in ("clock", "faults", "journal", "inspect"):
        with pytest.raises(RuntimeError, match=r"%s: the server is stopped: call start\(\)"
                           % name):
            getattr(s, name)


def test_async_test_controls_after_stop_fail_and_leave_the_clock_alone():
    # The test's loop stays open after stop(): the refusal cannot be "the
    # loop is closed" alone (it was: the clock moved, the fault was set).
    async def scenario():
        s = await AsyncEmbeddedServer().start()
        clock, faults, journal, inspect = s.clock, s.faults, s.journal, s.inspect
        await s.stop()
        _controls_refuse(clock, faults, journal, inspect)
        for name in ("clock", "faults", "journal", "inspect"):
            with pytest.raises(RuntimeError, match=r"%s: the server is stopped" % name):
                getattr(s, name)
        await s.start()                   # and it starts again, its controls working
        s.clock.advance(1)
        assert s.clock.offset == 1.0
        await s.stop()
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_setting_typo_names_the_setting():
    with pytest.raises(ValueError, match=r"unknown setting 'appendonlyy'.*did you mean "
                                         r"appendonly"):
        EmbeddedServer(appendonlyy=True)


def test_a_marker_typo_names_the_setting(tmp_path):
    files = {"test_m.py": '''
        import pytest

        @pytest.mark.hotkv(maxmemory_polcy="allkeys-lru")
        def test_typo(hotkv):
            pass
        '''}
    proc = run_pytest(tmp_path, files)
    out = proc.stdout + proc.stderr
    assert "@pytest.mark.hotkv(maxmemory_polcy='allkeys-lru')" in out, out
    assert "unknown setting 'maxmemory-polcy'" in out and "maxmemory_policy" in out, out


@pytest.mark.parametrize("how", ["tcp", "inprocess-lock", "inprocess-hop"])
def test_a_client_call_in_a_wait_until_predicate_raises_at_once_and_the_server_serves_on(
        how, hotkv_server_factory):
    # It was a TimeoutError after the wait's timeout, and the server then
    # served nobody until that client's own socket timeout (never, here).
    srv = hotkv_server_factory(inprocess=how == "inprocess-lock")
    r = valkey.Valkey(host=srv.host, port=srv.port) if how == "tcp" else srv.client("valkey")
    r.ping()
    began = time.monotonic()
    with pytest.raises(LoopThreadCallError, match="read state instead"):
        srv.wait_until(lambda s: r.llen("q") == 1, timeout=5)
    assert time.monotonic() - began < 2.5            # at once, not after the timeout
    began = time.monotonic()
    fresh = valkey.Valkey(host=srv.host, port=srv.port, socket_timeout=2)
    assert fresh.ping() and time.monotonic() - began < 1.0
    assert r.lpush("q", "x") == 1                    # the predicate's client works on
    srv.wait_until(lambda s: s.inspect.get("q") == [b"x"], timeout=5)   # reading state does
    fresh.close()
    r.close()


def test_a_predicate_blocked_elsewhere_lets_the_server_serve_again(srv):
    # A check that blocks on something else: the loop stops waiting for it
    # at the wait's timeout and serves; wait_until says so when it returns.
    r = valkey.Valkey(host=srv.host, port=srv.port, socket_timeout=2)
    r.ping()
    pinged = []

    def ping_meanwhile():
        time.sleep(0.5)
        began = time.monotonic()
        pinged.append((r.ping(), time.monotonic() - began))
    t = threading.Thread(target=ping_meanwhile)
    t.start()
    with pytest.raises(TimeoutError, match="still running after 0.3 s.*serves again"):
        srv.wait_until(lambda s: time.sleep(0.9), timeout=0.3)
    t.join(10)
    assert pinged and pinged[0][0] and pinged[0][1] < 0.3, pinged   # served during the check
    r.close()


def test_a_slow_check_running_at_the_timeout_is_not_called_wedged(srv):
    # Each check takes 0.3 s and they run back to back (a cron tick is due
    # after each): at the 1 s timeout one began about 0.1 s before.  That
    # is a slow check, answered "still false"; "waits for itself" is for a
    # check running most of the wait (the loaded run's wait_idle, which
    # reads the kernel's socket table each turn, was told it was wedged).
    def slow(s):
        time.sleep(0.3)
        return False
    with pytest.raises(TimeoutError) as e:
        srv.wait_until(slow, timeout=1)
    assert "still false after 1.0 s" in str(e.value), str(e.value)


# -- ergonomics ---------------------------------------------------------------

def test_pytest_fixtures_shows_a_line_for_each_hotkv_fixture(tmp_path):
    proc = run_pytest(tmp_path, {"test_x.py": "def test_x():\n    pass\n"}, "--fixtures")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    lines = out.splitlines()
    names = ["hotkv_server", "hotkv_url", "hotkv", "hotkv_client", "hotkv_server_factory",
             "hotkv_url_env", "hotkv_seed_data", "hotkv_seed_snapshot", "hotkv_seeded",
             "hotkv_async", "hotkv_anyio"]
    for name in names:
        at = [i for i, line in enumerate(lines)
              if line.split(" ")[0] in (name, name + "]") and "--" in line]
        assert at, "%s not listed:\n%s" % (name, out)
        assert "no docstring available" not in lines[at[0] + 1], lines[at[0]:at[0] + 2]


def test_journal_assertions_hide_their_frames():
    from hotkv.testing.journal import Journal
    for fn in (Journal.assert_called, Journal.assert_not_called, Journal.assert_order):
        assert "__tracebackhide__" in fn.__code__.co_varnames, fn


def test_journal_leaves_out_the_handshake(srv):
    with srv.journal as j:
        r = redis.Redis(host=srv.host, port=srv.port, protocol=3, client_name="w")
        r.set("k", "v")
        r.close()
    assert [e.name for e in j.entries()] == ["set"]
    assert len(j) == 1 and [e.name for e in j.for_client("w")] == ["set"]
    j.show_handshake = True
    names = [e.name for e in j.entries()]
    assert names[0] == "hello" and "client|setinfo" in names and len(j) == len(names)


def test_journal_leaves_out_auth_setname_and_select_sent_on_connecting(hotkv_server_factory):
    """AUTH, CLIENT SETNAME and SELECT that redis-py sends on connecting
    (password=, client_name=, db=) are the handshake too; the same commands
    sent by the test later, or by a connection older than the journal's
    start, are the test's own."""
    srv = hotkv_server_factory(requirepass="pw")
    for protocol in (2, 3):
        with srv.journal as j:
            r = redis.Redis(host=srv.host, port=srv.port, protocol=protocol, password="pw",
                            client_name="w", db=2)
            r.set("k", "v")
            r.select(3)
            r.client_setname("w2")
        assert [e.name for e in j.entries()] == ["set", "select", "client|setname"], protocol
        assert len(j) == 3, protocol
        with srv.journal as j:            # r's connection is older than this start
            r.select(2)
            r.close()
        assert [e.name for e in j.entries()] == ["select"] and len(j) == 1, protocol


def test_clock_advance_takes_a_timedelta(srv):
    clock = srv.clock.freeze()
    before = clock.ms()
    clock.advance(datetime.timedelta(minutes=2, milliseconds=5))
    assert clock.ms() - before == 120_005
    with pytest.raises(TypeError, match="timedelta"):
        clock.advance("5")
    clock.reset()


def test_async_embedded_server_restart_keeps_data_and_port():
    async def scenario():
        s = await AsyncEmbeddedServer().start()
        port = s.port
        s.seed({"k": "v"})
        s.clock.freeze()
        await s.restart()
        assert s.port == port and s.inspect.get("k") == b"v" and s.clock.frozen
        await s.restart(keep_data=False)
        assert s.inspect.keys() == []
        await s.stop()
        with pytest.raises(RuntimeError, match="stopped"):
            s.inspect.keys()
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_queue_shows_consumers_blocked_on_an_empty_list(srv):
    r = valkey.Valkey(host=srv.host, port=srv.port)
    assert srv.inspect.queue("jobs") is None
    got = []
    t = threading.Thread(target=lambda: got.append(r.brpop("jobs", 30)))
    t.start()
    srv.wait_until(lambda s: s.server.blocked_clients == 1)
    q = srv.inspect.queue("jobs")
    assert q is not None and q.depth == 0 and q.items == [] and q.waiting_consumers == 1
    assert q.head is None and q.tail is None and q.oldest is None
    valkey.Valkey(host=srv.host, port=srv.port).lpush("jobs", "j1")
    t.join(10)
    assert got == [(b"jobs", b"j1")]
    r.close()


# -- the shared server put back as it started ------------------------------------

def _state(r) -> tuple:
    return (r.config_get("*"), sorted(r.acl_list()), r.function_list(),
            r.script_exists("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
            r.info()["tracking_clients"], r.info()["tracking_total_keys"], r.acl_log())


def test_baseline_restore_puts_back_config_acl_functions_scripts_tracking(srv):
    r = redis.Redis(host=srv.host, port=srv.port)
    fresh = _state(r)
    base = Baseline.take(srv.server)
    assert base.restore(srv.server) == []          # nothing changed: nothing done
    t = redis.Redis(host=srv.host, port=srv.port, protocol=3)
    t.execute_command("CLIENT", "TRACKING", "ON")
    t.get("tracked")
    r.config_set("notify-keyspace-events", "KEA")
    r.config_set("maxmemory-policy", "allkeys-lru")
    r.function_load("#!lua name=lib1\nserver.register_function('f1', function() return 1 end)")
    r.script_load("return 1")
    r.acl_setuser("bob", enabled=True, passwords=["+pw"], commands=["+get"], keys=["k*"])
    r.acl_setuser("default", enabled=True, nopass=True, commands=["+@all", "-flushall"],
                  keys=["*"], channels=["*"])
    with pytest.raises(redis.AuthenticationError):     # an ACL LOG entry
        redis.Redis(host=srv.host, port=srv.port, username="bob", password="no").ping()
    done = base.restore(srv.server)
    assert {"config notify-keyspace-events", "config maxmemory-policy", "acl users",
            "acl log", "functions", "scripts", "tracking"} <= set(done), done
    after = _state(r)
    assert after[0] == fresh[0]
    assert after[1:] == fresh[1:]
    assert t.execute_command("CLIENT", "TRACKINGINFO")[b"flags"] == [b"off"]
    t.close()
    r.close()


def test_the_hotkv_fixture_resets_the_shared_server_between_tests(tmp_path):
    files = {"test_iso.py": '''
        import redis

        def test_changes(hotkv):
            r = redis.Redis(host=hotkv.host, port=hotkv.port)
            r.config_set("notify-keyspace-events", "KEA")
            r.function_load("#!lua name=l\\nserver.register_function('f', function() end)")
            r.script_load("return 1")
            r.acl_setuser("bob", enabled=True, nopass=True)
            r.close()

        def test_sees_a_fresh_server(hotkv):
            r = redis.Redis(host=hotkv.host, port=hotkv.port)
            assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": ""}
            assert r.function_list() == []
            assert r.script_exists("e0e1f9fabfc9d4800c877a703b823ac0578ff8db") == [False]
            assert r.acl_users() == ["default"]
            r.close()
        '''}
    proc = run_pytest(tmp_path, files, "-p", "no:randomly")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _counts(proc.stdout) == {"passed": 2}
