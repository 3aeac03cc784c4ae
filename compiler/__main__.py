"""``python -m hlo``: the ``hlo`` command-line tool (``compiler/cli.py``)."""
import sys

from hlo.cli import main

if __name__ == "__main__":
    sys.exit(main())
