"""``python -m tracebus`` runs the CLI."""

import sys

from tracebus.cli import main

sys.exit(main())
