"""``python -m hotkv ...``: the ``hotkv`` console script (``hotkv.cli.main``)."""

import sys

from .cli import main

sys.exit(main())
