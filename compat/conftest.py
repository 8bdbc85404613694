"""compat/: hotkv against the reference Valkey 8.1.8, byte for byte.

Shares tests/support.py (RawClient, ReferenceValkey) and the fixtures of
tests/conftest.py (loaded under another module name: both files are called
conftest).
"""

import importlib.util
import os
import shutil
import sys

_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
sys.path.insert(0, _TESTS)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_spec = importlib.util.spec_from_file_location("hotkv_tests_conftest",
                                               os.path.join(_TESTS, "conftest.py"))
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)

server = _shared.server
ref_server = _shared.ref_server
diff = _shared.diff


def pytest_collection_finish(session):
    """Start the selected Tcl units in the background as soon as collection
    ends (conformance.Prefetch: they mostly wait, so they overlap the rest of
    the suite; compat/ runs last, by which time most results are in).
    HOTKV_CONFORMANCE_INLINE=1 runs each in its test instead."""
    if os.environ.get("HOTKV_CONFORMANCE_INLINE"):
        return
    names = [item.name for item in session.items      # after -k / -m deselection
             if item.nodeid.startswith("compat/test_conformance.py::")]
    if not names:
        return
    import test_conformance  # compat/test_conformance.py, as pytest imported it
    if test_conformance.BUNDLE is None or shutil.which("tclsh") is None:
        return                 # the tests skip, saying why
    import conformance
    conformance.PREFETCH.start(test_conformance.jobs_for(names))
