"""Write the inputs file that run_model reads: each input's raw bytes (row-major), in argument
order, as the exported header lists them.

    python examples/c/write_inputs.py layer.hlox inputs.bin              # random normal values
    python examples/c/write_inputs.py layer.hlox inputs.bin --npz in.npz  # arrays from an .npz
                                                                          # (by argument name or in order)
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import hlo


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", metavar="MODEL.hlox")
    p.add_argument("output", metavar="INPUTS.bin")
    p.add_argument("--npz", default=None, help="take the arrays from this .npz instead of random ones")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    exe = hlo.aot.describe(a.model)  # the signature only: nothing in the file runs
    rng = np.random.default_rng(a.seed)
    arrays = []
    if a.npz:
        with np.load(a.npz) as d:
            keys = list(exe.arg_names) if set(exe.arg_names) <= set(d.files) else list(d.files)
            arrays = [d[k] for k in keys]
    else:
        for spec in exe.in_avals:
            arrays.append(rng.standard_normal(spec.shape).astype(np.float32).astype(spec.dtype))
    if len(arrays) != len(exe.in_avals):
        print(f"{a.model} takes {len(exe.in_avals)} inputs, got {len(arrays)}", file=sys.stderr)
        return 1
    with open(a.output, "wb") as f:
        for arr, spec, name in zip(arrays, exe.in_avals, exe.arg_names):
            arr = np.asarray(arr)
            if arr.shape != tuple(spec.shape) or arr.dtype != spec.dtype:
                print(f"input {name}: expected {spec.dtype}{list(spec.shape)}, got {arr.dtype}{list(arr.shape)}",
                      file=sys.stderr)
                return 1
            f.write(np.ascontiguousarray(arr).tobytes())
    print(f"wrote {a.output}: {len(arrays)} inputs, {sum(np.asarray(x).nbytes for x in arrays)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
