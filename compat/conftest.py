"""compat/: hotkv against the reference Valkey 8.1.8, byte for byte.

Shares tests/support.py (RawClient, ReferenceValkey) and the fixtures of
tests/conftest.py (loaded under another module name: both files are called
conftest).
"""

import importlib.util
import os
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
