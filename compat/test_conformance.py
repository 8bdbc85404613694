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
