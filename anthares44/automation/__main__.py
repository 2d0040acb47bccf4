"""`python -m anthares44.automation ...`: the `a44` command, for an environment without its console script."""

import sys

from .cli.main import main

sys.exit(main())
