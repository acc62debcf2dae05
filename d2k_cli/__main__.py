import sys

from d2k_cli.main import main

sys.exit(main())
