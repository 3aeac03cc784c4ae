"""Measures how fast a saved executable starts: ``import hlo`` + ``hlo.load`` + the first call, in
fresh processes (the figure the AOT issue asks for). Not a test: timings are never asserted.

    python3 tests/aot/measure_load.py [--workload transformer_layer] [--mode cpu] [--target cpu]
                                      [--repeats 11]

Compiles the bench workload at the mode's sizes once (in this process), saves it, writes hlo's
bytecode (as an installed package has it), then starts ``--repeats`` fresh interpreters that
each import numpy, read the inputs, import hlo, load the file, call it twice and report the
phases and the modules they imported. Prints the median of each phase. A call's time includes
waiting for its results (``block_until_ready`` where they are device arrays); "load + first
call" is the wall time from ``hlo.load`` to the first results (nothing in between: work that
loading starts in the background is not hidden behind the test's own).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
d = np.load(sys.argv[2])
raw = [d[f"arr_{i}"] for i in range(len(d.files))]  # read before loading: the call's own time
t2 = time.perf_counter()
import hlo
t3 = time.perf_counter()
exe = hlo.load(sys.argv[1])
t4 = time.perf_counter()
args = [r.view(a.dtype).reshape(a.shape) for r, a in zip(raw, exe.in_avals)]
def wait(out):
    for o in (out if isinstance(out, (list, tuple)) else [out]):
        getattr(o, "block_until_ready", lambda: None)()
wait(exe(*args))
t5 = time.perf_counter()
wait(exe(*args))
t6 = time.perf_counter()
print(json.dumps({"import numpy": t1 - t0, "import hlo": t3 - t2, "hlo.load": t4 - t3,
                  "first call": t5 - t4, "second call": t6 - t5, "load + first call": t5 - t3,
                  "import hlo + load + first call": t5 - t2,
                  "modules": sorted(m for m in sys.modules if m.startswith("hlo"))}))
"""
PHASES = ("import numpy", "import hlo", "hlo.load", "first call", "second call", "load + first call",
          "import hlo + load + first call")


def compile_sources() -> None:
    """Write hlo's bytecode (``__pycache__``) as an installed package has it, so that the
    fresh processes do not compile its sources (``PYTHONDONTWRITEBYTECODE`` machines never keep it)."""
    import compileall
    for folder in ("compiler", "ir", "passes", "runtime", "backends"):
        compileall.compile_dir(str(REPO / folder), quiet=1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="transformer_layer")
    ap.add_argument("--mode", default="cpu")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="then run one more fresh process under cProfile and print its N most "
                         "expensive functions (cumulative time): where load and the first call go")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import numpy as np

    import hlo
    import hlo.numpy as hnp
    from bench.workloads import BY_ID, Case, Ops
    case = Case(BY_ID[a.workload], a.mode, a.dtype)
    inputs = case.inputs()

    def fn(*xs):
        return case.workload.fn(Ops(hnp, hlo.grad, hlo.vmap), *xs)
    compiled = hlo.aot.compile(fn, *[hlo.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs], target=a.target)
    compile_sources()
    with tempfile.TemporaryDirectory() as d:
        path, data = os.path.join(d, "w.hlox"), os.path.join(d, "in.npz")
        compiled.save(path)
        np.savez(data, *[x.reshape(-1).view(np.uint8) for x in inputs])
        runs = []
        for _ in range(a.repeats):
            p = subprocess.run([sys.executable, "-c", CHILD, path, data], capture_output=True, text=True,
                               check=True)
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        size = os.path.getsize(path)
        if a.profile:
            prof, script = os.path.join(d, "child.prof"), os.path.join(d, "child.py")
            Path(script).write_text(CHILD)
            subprocess.run([sys.executable, "-m", "cProfile", "-o", prof, script, path, data],
                           capture_output=True, text=True, check=True)
            import pstats
            print(f"--- cProfile of one fresh process (import, load, two calls), top {a.profile} by cumulative time")
            pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(a.profile)
    print(f"{case.name} {case.shapes(inputs)} on {a.target}: {size} bytes, {a.repeats} fresh processes, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    for k in PHASES:
        xs = [r[k] * 1e3 for r in runs]
        print(f"  {k:30s} median {statistics.median(xs):7.1f} ms   (min {min(xs):.1f}, max {max(xs):.1f})")
    print("  hlo modules imported:", ", ".join(runs[0]["modules"]))


if __name__ == "__main__":
    main()
