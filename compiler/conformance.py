"""``python -m hlo.conformance DIR [--target interpreter]``: the StableHLO conformance runner
(``hlo.tools.conformance``)."""
import os
import sys

if __name__ == "__main__":
    # Run the runner's imported copy, not a ``__main__`` one: the tasks and cases handed to
    # worker processes pickle by module name, and a fresh worker interpreter (target cuda, or
    # once MLIR is loaded) can import ``hlo.tools.conformance`` but not a script's ``__main__``.
    from hlo.tools.conformance import main
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head` and friends
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
