"""The ``hotkv_cluster`` pytest fixture (registered by hotkv.pytest_plugin).

``hotkv_cluster``: an ``EmbeddedCluster(masters=3, replicas_per_master=1)``
started for the test and stopped after it (it starts in tens of
milliseconds, so each test gets a fresh one).  A test wanting another
shape starts ``hotkv.EmbeddedCluster(...)`` itself.
"""

from __future__ import annotations

import pytest

from .embedded import EmbeddedCluster


@pytest.fixture
def hotkv_cluster():
    with EmbeddedCluster(masters=3, replicas_per_master=1) as cluster:
        yield cluster
