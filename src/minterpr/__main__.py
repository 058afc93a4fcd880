"""``python -m minterpr`` runs the console command."""

import sys

from minterpr.cli.main import main

sys.exit(main())
