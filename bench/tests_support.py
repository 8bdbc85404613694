"""Locating the reference binary (shared with tests/support.py)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from support import valkey_server_binary  # noqa: E402,F401
