"""A bounded run of the differential sandbox fuzzer (tests/fuzz/fuzz_sandbox.py):
generated probes of what a script can reach and change, on hotkv in a child
process and on valkey-server 8.1.8.  hotkv must refuse whatever Valkey
refuses, must not crash, and no snippet may change what a later script sees.
A long run: ``python tests/fuzz/fuzz_sandbox.py --n 20000 --seed 7``."""
from __future__ import annotations

import io
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fuzz"))

import fuzz_sandbox  # noqa: E402


@pytest.mark.parametrize("seed", [11, 12])
def test_sandbox_fuzz_bounded(seed):
    out = io.StringIO()
    found = fuzz_sandbox.run(300, seed, out=out)
    assert not found["crash"], out.getvalue()
    assert not found["allowed"], out.getvalue()
    assert not found["canary"], out.getvalue()


def test_fuzzer_tells_allowed_from_refused():
    """The classification the test relies on: hotkv running what Valkey
    refused is 'allowed'; equal replies are nothing."""
    ok = b"*3\r\n$4\r\ntrue\r\n$6\r\nstring\r\n$2\r\n{}\r\n"
    refused = b"*3\r\n$5\r\nfalse\r\n$6\r\nstring\r\n$3\r\nerr\r\n"
    assert fuzz_sandbox.classify(ok, refused) == "allowed"
    assert fuzz_sandbox.classify(refused, ok) == "differs"
    assert fuzz_sandbox.classify(ok, ok) is None
    assert fuzz_sandbox.classify(b"$20\r\nfunction: 0x7f01\r\n", b"$17\r\nfunction: 0x1\r\n") \
        is None
