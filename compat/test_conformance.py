"""Valkey's own Tcl suite against hotkv, guarded per unit.

Each unit runs on a fresh hotkv; it must pass at least the count recorded in
compat/conformance-baseline.json and fail nothing outside
compat/conformance-skip.txt (where every known failure has its reason).
"""

from __future__ import annotations

import shutil

import pytest

import conformance  # compat/conformance.py

BUNDLE = conformance.bundle_dir()
BASELINE = conformance.load_baseline()

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.skipif(BUNDLE is None, reason="../shared/conformance (Valkey's Tcl suite) is "
                       "not beside this checkout; set HOTKV_CONFORMANCE_DIR"),
    pytest.mark.skipif(shutil.which("tclsh") is None,
                       reason="tclsh is not installed (apt-get install tcl)"),
]


@pytest.mark.parametrize("unit", conformance.UNITS)
def test_unit(unit):
    res = conformance.run_unit(BUNDLE, unit, timeout=300)
    detail = "\n".join(res["failures"]) + ("\nABORTED: " + res["aborted"] if res["aborted"] else "")
    assert res["server_alive"], f"the server died during {unit}"
    assert res["failed"] == 0, f"{unit}: {res['failed']} failed\n{detail}"
    assert res["passed"] >= BASELINE.get(unit, 0), \
        f"{unit}: {res['passed']} passed, recorded {BASELINE.get(unit)}\n{detail}"


def test_units_back_to_back_on_one_server():
    """Every unit again, one after another on ONE server, as a user's server
    lives: a unit inherits the previous one's CONFIG changes and leftovers
    (type/stream leaves stream-node-max-entries at 2 for type/stream-cgroups,
    where XREADGROUP without COUNT once stopped past the first node).  The
    reference passes the same counts this way."""
    results = conformance.run_units_one_server(BUNDLE, conformance.UNITS, timeout=300)
    problems = []
    for unit, res in results.items():
        detail = "; ".join(res["failures"]) + (" ABORTED: " + res["aborted"]
                                               if res["aborted"] else "")
        if res["failed"] or res["passed"] < BASELINE.get(unit, 0):
            problems.append(f"{unit}: {res['passed']} passed (recorded "
                            f"{BASELINE.get(unit)}), {res['failed']} failed {detail}")
    assert all(r["server_alive"] for r in results.values()), "the server died during the run"
    assert not problems, "\n".join(problems)
