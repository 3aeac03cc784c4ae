"""Write the generated code of every seed workload to a folder, for comparing two trees.

A refactor that should not change code generation is checked by running this before and after
and diffing the folders::

    python bench/ir_snapshot.py /tmp/ir-before          # on the unchanged tree
    python bench/ir_snapshot.py /tmp/ir-after           # after the change
    diff -r /tmp/ir-before /tmp/ir-after                # empty when nothing changed

Each workload of ``bench/workloads.py`` is traced with ``hlo.jit(...).lower`` at each mode's
sizes and dtypes and compiled (persistent cache off) for every target named: ``cpu`` writes the
LLVM IR the backend hands to LLVM (``<workload>-<mode>-<dtype>.cpu.ll``) and the IR of each
GEMM body from the library it calls (``cores/<symbol>.ll``), ``cuda`` writes the LLVM IR and the
PTX (``.cuda.ll``, ``.cuda.ptx``; compiling for cuda needs no GPU) and the program's manifest
(``.cuda.manifest.json``: the step tree, cuBLASLt calls' parameters included). A workload that fails to
compile writes ``.<target>.error`` with the exception's type and message, so a change in what
compiles shows in the diff too.

The library bodies' symbols end in a digest of the library's build, which covers the paths and
contents of the generator's source files (``runtime/cpu/code_library.py``'s ``SOURCES``): any
edit of those files, a rename included, changes it while the code stays the same. The digest is
written as ``<digest>``; the bodies' own IR is written in full, so a change of their code shows.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.workloads import WORKLOADS, Ops, np_dtype

TARGET_MODES = {"cpu": ("quick", "cpu"), "cuda": ("quick", "gpu")}
_CORE_DIGEST = re.compile(r"(hlo\.gemm_core\.[\w.]*?)\.[0-9a-f]{16}\b")


def without_digests(text: str) -> str:
    return _CORE_DIGEST.sub(r"\1.<digest>", text)


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
        from hlo.backends.cpu.gemm_library import core_ir
        out = {"cpu.ll": without_digests(exe.ir_text)}
        for core in exe.manifest.get("cores", ()):
            out[os.path.join("cores", without_digests(core["symbol"]) + ".ll")] = \
                without_digests(core_ir(core["symbol"]))
        return out
    return {"cuda.ll": exe.llvm_ir, "cuda.ptx": compiled.as_text("ptx"),
            "cuda.manifest.json": json.dumps(exe.manifest, indent=1) + "\n"}


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
                            path = (os.path.join(args.out, suffix) if suffix.startswith("cores")
                                    else stem + suffix)
                            os.makedirs(os.path.dirname(path), exist_ok=True)
                            with open(path, "w") as f:
                                f.write(text)
                        print(f"{w.id} {mode} {dt} {target}: {', '.join(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
