"""`python -m agent.cli`: the same as the `ragdrift` console script."""

import sys

from agent.cli import main

sys.exit(main())
