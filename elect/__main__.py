"""`python -m elect` is the `elect` command (an entry point, not a library module: the one import of elect_cli
from inside `elect`, allowed by name in the layering contracts)."""

import sys

from elect_cli import main

sys.exit(main())
