import sys

from agents.cli import main

sys.exit(main())
