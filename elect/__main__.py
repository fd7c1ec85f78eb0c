"""`python -m elect` is the `elect` command."""

import sys

from elect.cli import main

sys.exit(main())
