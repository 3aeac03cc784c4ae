"""``python -m hlo.opt``: run optimization passes on an IR text file (``hlo.tools.opt``)."""
import sys

if __name__ == "__main__":
    from hlo.tools.opt import main
    sys.exit(main())
