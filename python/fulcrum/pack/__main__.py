"""`python3 -m fulcrum.pack` runs fulcrum-pack without installing its console script."""

import sys

from .cli import main

sys.exit(main())
