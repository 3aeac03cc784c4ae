"""Per-call cost of donation on the CPU call paths: python bench/donation_calls.py

``x + 1`` on f32[8] (the program's own work is a few nanoseconds, so these are host costs),
without donation and with ``donate_argnums=0`` called as ``x = f(x)`` (each call donates the
previous result: hlo checks that the argument is writable, numpy's own and apart from the
others, then returns that same array). Paths: ``hlo.jit`` (the native entry), the jit's
Python fast path (``HLO_NATIVE_CALL=0`` in the environment turns the native entry off: run
the script twice), ``Compiled``; and a two-argument ``x + y`` donating x (one overlap test a
call). Median of repeats after warm-up, in microseconds; not a test (tests never assert
timings)."""
import os
import statistics
import sys
import time

import numpy as np

import hlo


def per_call(fn, n=20000, reps=7) -> float:
    for _ in range(2000):
        fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
    return statistics.median(out) * 1e6


def main() -> None:
    rows = []
    x0 = np.zeros(8, np.float32)
    y0 = np.ones(8, np.float32)
    for donate in (False, True):
        kw = {"donate_argnums": 0} if donate else {}
        f = hlo.jit(lambda x: x + 1.0, target="cpu", **kw)
        g = hlo.jit(lambda x, y: x + y, target="cpu", **kw)
        c = f.lower(x0).compile()
        state = {"x": x0.copy(), "gx": x0.copy()}

        def jit_call():
            state["x"] = f(state["x"])

        def compiled_call():
            state["x"] = c(state["x"])

        def two_args():
            state["gx"] = g(state["gx"], y0)

        for name, fn in (("jit x+1", jit_call), ("Compiled x+1", compiled_call), ("jit x+y", two_args)):
            rows.append((name, "donated" if donate else "plain", per_call(fn)))
    native = os.environ.get("HLO_NATIVE_CALL", "1") != "0"
    print(f"hlo at {os.path.dirname(hlo.__file__)}; native entry {'on' if native else 'off'}; "
          f"python {sys.version.split()[0]}, numpy {np.__version__}")
    for name, kind, us in rows:
        print(f"  {name:14s} {kind:8s} {us:7.3f} us/call")


if __name__ == "__main__":
    main()
