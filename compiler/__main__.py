"""``python -m hlo``: the ``hlo`` command-line tool (``compiler/tools/cli.py``)."""
import sys

from hlo.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
