"""``python -m booku_memory``: see cli.py."""

import sys

from .cli import main

sys.exit(main())
