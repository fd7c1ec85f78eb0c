"""`python -m elect_cli` is the `elect` command."""

import sys

from elect_cli import main

sys.exit(main())
