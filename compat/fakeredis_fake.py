"""fakeredis's own test suite in fake mode, on hotkv.fake and on fakeredis itself.

fakeredis 2.41.0's tests (its sdist, fetched and patched once by
compat/suites.py's ``fakeredis`` suite) select their fake-server variants
with ``-m fake``: the tests that build ``fakeredis.FakeServer`` /
``FakeRedis`` / ``FakeAsyncRedis`` ... and talk to them.  Run here twice,
on the same machine, the same selection:

* **hotkv.fake**: with ``-p hotkv_as_fakeredis`` (compat/fakeredis_plugin/
  hotkv_as_fakeredis.py), which replaces fakeredis's public client API with
  hotkv.fake's before the suite's conftest imports it: every fake client of
  the suite is then a redis-py / valkey-py client of a real hotkv server,
  in-process.  Nothing of the suite is edited.
* **fakeredis**: the same command without the plugin (fakeredis on itself).

fakeredis's conftest asks a real server for its type and version even in
fake mode (``real_server_details``, which builds every ``FakeServer``): a
hotkv over TCP answers it, presented as in compat/suites.py (profile
``valkey``: valkey 8.1.8, what hotkv is; profile ``redis``: Redis 7.2.4,
which also runs the tests fakeredis marks ``unsupported_server_types("valkey")``).
``test/test_stack`` is left out, as in compat/suites.py: JSON, Bloom,
TimeSeries and the like are modules Valkey 8.1.8 does not have.

    python compat/fakeredis_fake.py                       # both, profile valkey
    python compat/fakeredis_fake.py --profile redis
    python compat/fakeredis_fake.py --impl hotkv -k test_list --json out.json

Prints passed / failed / skipped per implementation and per directory, and
every test that fails on hotkv.fake (marked when it fails on fakeredis too).
The results and the explanation of every failure: docs/reference/fakeredis-suite.md.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import suites  # noqa: E402

SHIM_DIR = os.path.join(HERE, "fakeredis_plugin")
SELECTION = ["-m", "fake", "--timeout", "60", "test", "--ignore", "test/test_stack"]
IMPLS = ("hotkv", "fakeredis")
PROFILES = {
    "valkey": {"FAKEREDIS_SERVER_TYPE": "valkey",
               "FAKEREDIS_VALKEY_VERSION": suites.VALKEY_VERSION},
    "redis": {"FAKEREDIS_SERVER_TYPE": "redis"},
}


# Every failure of hotkv.fake explained (docs/reference/fakeredis-suite.md): test id
# (junit "module::name", without the parameter) -> cause.  Profile valkey; profile redis adds
# REDIS_ONLY.
INTERNALS = "fakeredis's internals"
DEVIATION = "fakeredis's deviation from Valkey"
OPTION = "a fakeredis option hotkv does not emulate"
REDIS = "Redis, not Valkey 8.1.8"
EXPECTED = {
    "test.test_internals.test_fake_selector::": INTERNALS,
    "test.test_internals.test_expiry_tracking::test_flushdb_forgets_pending_expiries": INTERNALS,
    "test.test_internals.test_expiry_tracking::"
    "test_refreshing_a_ttl_does_not_grow_the_heap_without_bound": INTERNALS,
    "test.test_mixins.test_generic_scan_commands::"
    "test_scan_cursors_are_forgotten_when_the_iteration_ends": INTERNALS,
    "test.test_mixins.test_generic_scan_commands::"
    "test_scan_with_a_cursor_that_is_not_remembered": INTERNALS,
    "test.test_mixins.test_scripting_commands::test_lua_runtime_": INTERNALS,
    "test.test_mixins.test_scripting_commands::test_lua_log": INTERNALS,
    "test.test_mixins.test_server_commands::test_command": INTERNALS,
    "test.test_internals.test_async_connection::test_connection_disconnect": INTERNALS,
    "test.test_internals.test_init_args::"
    "test_client_ids_are_consecutive_and_renewed_on_reconnect": INTERNALS,
    "test.test_internals.test_expiry_tracking::test_dbsize_and_keys_drop_expired_keys": DEVIATION,
    "test.test_internals.test_expiry_tracking::test_expiry_follows_the_key": DEVIATION,
    "test.test_internals.test_expiry_tracking::"
    "test_expiry_replaced_or_cleared_is_not_applied": DEVIATION,
    "test.test_internals.test_init_args.TestInitArgs::test_with_user_password": DEVIATION,
    "test.test_internals.test_init_args.TestInitArgs::test_from_url_user": DEVIATION,
    "test.test_internals.test_async_connection::test_async_client_info_matches_sync": DEVIATION,
    "test.test_mixins.test_function_commands::test_functions_need_redis_7": OPTION,
    "test.test_internals.test_init_args::test_supported_server_types": OPTION,
    "test.test_kividb.test_command_surface::"
    "test_commands_kividb_spells_differently_are_refused": OPTION,
    "test.test_mixins.test_connection_commands::test_time": OPTION,
}
REDIS_ONLY = {
    "test.test_mixins.test_hash_expire_commands::": REDIS,
    "test.test_mixins.test_function_commands::test_function_load_reports_registration_errors":
        REDIS,
    "test.test_mixins.test_function_commands::test_function_names_are_checked": REDIS,
    "test.test_mixins.test_function_commands::test_fcall_bad_redis_calls": REDIS,
    "test.test_mixins.test_scripting_commands::test_eval_call_bool7_redis": REDIS,
    "test.test_mixins.test_scripting_commands::test_script_help73": REDIS,
    "test.test_valkey.test_valkey_lua::test_server_alias_not_available_in_redis_mode": REDIS,
    "test.test_mixins.test_connection_commands::test_client_kill_invalid_id": REDIS,
    "test.test_mixins.test_list_commands::test_watch_when_ltrim_does_not_change_value": REDIS,
}


def cause(test: str, profile: str = "valkey") -> str:
    """Why ``test`` (a junit id) is expected to fail on hotkv.fake, or ''."""
    table = dict(EXPECTED, **(REDIS_ONLY if profile == "redis" else {}))
    for prefix, why in table.items():
        if test.startswith(prefix):
            return why
    return ""


def run(impl: str, profile: str = "valkey", args: list[str] = (), log: str | None = None,
        timeout: int = 3600) -> suites.Result:
    """fakeredis's fake-mode tests on ``impl`` ("hotkv": hotkv.fake, "fakeredis")."""
    suite = suites.BY_NAME["fakeredis"]
    why = suites.available("fakeredis")
    if why:
        raise suites.Unavailable(why)
    result = suites.Result("fakeredis-fake/" + profile, impl)
    details = suites.Hotkv().start()       # answers real_server_details' INFO only
    xml = os.path.join(suite.dir, "junit-fake-%s-%s.xml" % (impl, profile))
    if os.path.exists(xml):
        os.remove(xml)
    env = dict(os.environ, FAKEREDIS_REAL_PORT=str(details.port), **PROFILES[profile])
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(suite.dir, "site"), suites.ROOT, SHIM_DIR])
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            "--junitxml", xml]
    if impl == "hotkv":
        argv += ["-p", "hotkv_as_fakeredis"]
    argv += list(args) if args else SELECTION
    start = time.time()
    out = open(log, "w") if log else subprocess.DEVNULL
    try:
        subprocess.run(["nice", "-n", "10", *argv], cwd=suite.src, env=env, stdout=out,
                       stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        result.error = "timed out after %d s" % timeout
    finally:
        if log:
            out.close()
        details.stop()
    result.seconds = round(time.time() - start, 1)
    if os.path.exists(xml):
        suites.read_junit(xml, result)
        result.by_dir = by_dir(xml)
    elif not result.error:
        result.error = "pytest wrote no report"
    return result


def by_dir(xml: str) -> dict:
    """{directory or file of test/: [passed, failed, skipped]}."""
    import xml.etree.ElementTree as ET
    counts = collections.defaultdict(lambda: [0, 0, 0])
    seen = set()
    for case in ET.parse(xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        group = "/".join(parts[:2]) if len(parts) > 2 else ".".join(parts[:2])
        test = (case.get("classname"), case.get("name"))
        bad = case.find("failure") is not None or case.find("error") is not None
        if test in seen:        # a failing test whose teardown failed too
            continue
        seen.add(test)
        counts[group][1 if bad else 2 if case.find("skipped") is not None else 0] += 1
    return dict(sorted(counts.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=IMPLS + ("both",), default="both")
    ap.add_argument("--profile", choices=list(PROFILES), default="valkey")
    ap.add_argument("-k", help="pytest -k expression")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--logs", help="a directory for each run's pytest output")
    ap.add_argument("paths", nargs="*", help="test files/directories (default: the whole suite)")
    opts = ap.parse_args(argv)
    args = []
    if opts.paths or opts.k:
        args = SELECTION[:4] + (opts.paths or SELECTION[4:]) + (["-k", opts.k] if opts.k else [])
    impls = IMPLS if opts.impl == "both" else (opts.impl,)
    results = {}
    for impl in impls:
        log = None
        if opts.logs:
            os.makedirs(opts.logs, exist_ok=True)
            log = os.path.join(opts.logs, "fake-%s-%s.log" % (impl, opts.profile))
        print("fakeredis 2.41.0 fake-mode tests on %s (profile %s) ..." % (impl, opts.profile),
              flush=True)
        results[impl] = run(impl, opts.profile, args, log)
    print()
    print("| implementation | passed | failed | skipped | seconds |")
    print("|---|---|---|---|---|")
    for impl, r in results.items():
        print("| %s | %d | %d | %d | %.0f |%s" % (
            "hotkv.fake" if impl == "hotkv" else "fakeredis 2.41.0", r.passed, r.failed,
            r.skipped, r.seconds, " " + r.error if r.error else ""))
    groups = sorted({g for r in results.values() for g in getattr(r, "by_dir", {})})
    print("\n| directory | " + " | ".join("%s p/f/s" % i for i in results) + " |")
    print("|---|" + "---|" * len(results))
    for g in groups:
        print("| %s | %s |" % (g, " | ".join(
            "%d / %d / %d" % tuple(getattr(r, "by_dir", {}).get(g, (0, 0, 0)))
            for r in results.values())))
    ours, theirs = results.get("hotkv"), results.get("fakeredis")
    if ours is not None and ours.failures:
        causes = collections.Counter(cause(t, opts.profile) or "UNEXPECTED"
                                     for t in ours.failures)
        print("\nhotkv.fake's failures by cause: " + ", ".join(
            "%s %d" % item for item in sorted(causes.items())))
        print("\nfail on hotkv.fake (* fails on fakeredis too; ! not explained in "
              "docs/reference/fakeredis-suite.md):")
        for test, message in sorted(ours.failures.items()):
            star = "*" if theirs is not None and test in theirs.failures else " "
            bang = " " if cause(test, opts.profile) else "!"
            print(" %s%s %s\n      %s" % (star, bang, test, message))
    if theirs is not None and ours is not None:
        only = sorted(set(theirs.failures) - set(ours.failures))
        if only:
            print("\nfail on fakeredis only:")
            for test in only:
                print("   %s\n      %s" % (test, theirs.failures[test]))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({k: dict(dataclasses.asdict(r), by_dir=getattr(r, "by_dir", {}))
                       for k, r in results.items()}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
