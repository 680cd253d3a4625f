"""`python -m hermes_estop` runs the `hermes` command."""

import sys

from hermes_estop.cli import main

if __name__ == "__main__":
    sys.exit(main())
