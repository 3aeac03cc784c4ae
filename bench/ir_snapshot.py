"""Write the generated code of every seed workload to a folder, for comparing two trees.

A refactor that should not change code generation is checked by running this before and after
and diffing the folders::

    python bench/ir_snapshot.py /tmp/ir-before          # on the unchanged tree
    python bench/ir_snapshot.py /tmp/ir-after           # after the change
    diff -r /tmp/ir-before /tmp/ir-after                # empty when nothing changed

Each workload of ``bench/workloads.py`` is traced with ``hlo.jit(...).lower`` at each mode's
sizes and dtypes and compiled (persistent cache off) for every target named: ``cpu`` writes the
LLVM IR the backend hands to LLVM (``<workload>-<mode>-<dtype>.cpu.ll``), ``cuda`` writes the
LLVM IR and the PTX (``.cuda.ll``, ``.cuda.ptx``; compiling for cuda needs no GPU). A workload
that fails to compile writes ``.<target>.error`` with the exception's type and message, so a
change in what compiles shows in the diff too.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.workloads import WORKLOADS, Ops, np_dtype  # noqa: E402

TARGET_MODES = {"cpu": ("quick", "cpu"), "cuda": ("quick", "gpu")}


def lowered(workload, mode, dtype):
    import hlo
    import hlo.numpy as hnp
    ops = Ops(hnp, hlo.grad, hlo.vmap)
    body = workload.fn

    def fn(*a):
        return body(ops, *a)
    fn.__name__ = workload.id
    inputs = workload.make_inputs(np.random.default_rng(0), workload.dims[mode], np_dtype(dtype))
    return hlo.jit(fn).lower(*inputs)


def texts(low, target) -> dict:
    """{file suffix: text} of the code generated for ``target``."""
    compiled = low.compile(target)
    exe = compiled._artifact.executable
    if target == "cpu":
        return {"cpu.ll": exe.ir_text}
    return {"cuda.ll": exe.llvm_ir, "cuda.ptx": compiled.as_text("ptx")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write into (created)")
    ap.add_argument("--targets", default="cpu,cuda")
    ap.add_argument("--workloads", default=None, help="comma-separated ids (default: all)")
    ap.add_argument("--modes", default=None,
                    help="comma-separated modes (default: quick and each target's full size)")
    args = ap.parse_args(argv)
    import hlo
    os.makedirs(args.out, exist_ok=True)
    ids = args.workloads.split(",") if args.workloads else None
    with hlo.config.override(cache=False):
        for target in args.targets.split(","):
            modes = args.modes.split(",") if args.modes else TARGET_MODES[target]
            for w in WORKLOADS:
                if ids and w.id not in ids:
                    continue
                for mode in modes:
                    for dt in w.dtypes[mode]:
                        stem = os.path.join(args.out, f"{w.id}-{mode}-{dt}.")
                        try:
                            out = texts(lowered(w, mode, dt), target)
                        except Exception as e:  # recorded: what fails to compile is part of the snapshot
                            out = {f"{target}.error": f"{type(e).__name__}: {e}\n"}
                        for suffix, text in out.items():
                            with open(stem + suffix, "w") as f:
                                f.write(text)
                        print(f"{w.id} {mode} {dt} {target}: {', '.join(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
