"""Entry point of ``python -m preflight`` and of the zipapp."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
