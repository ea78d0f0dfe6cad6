"""Entry point of ``python -m preflight`` and of the zipapp."""

import sys

from .interrupts import install_early

install_early()  # first: a SIGTERM from here on is recorded, and ends the run with its verdict files

from .cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
