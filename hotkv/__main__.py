"""``python -m hotkv ...``: the ``hotkv`` console script (``hotkv.tools.cli.main``)."""

import sys

from .tools.cli import main

sys.exit(main())
