"""Per-call cost of hlo's CUDA runtime (a GPU machine only): python bench/cuda_runtime_calls.py

Times, with the GPU's own work made negligible (1000 floats): one launch per call, queued
(async; the loop ends in one sync) and synchronized each call; ten launches per call; numpy
in -> numpy out (copy in, launch, copy out); and cuBLASLt products (4096^3 f32 and bf16) in
TFLOP/s. Median of repeats, after warm-up."""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "cuda"))


def per_call(fn, n=2000, reps=5):
    fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
    return statistics.median(out)


def main():
    from cuda_test_kernels import NAMES, ptx
    from hlo.backends.cuda.gemm import plan_dot
    from hlo.ir.types import BY_NAME, TensorType
    from hlo.runtime.cuda import CudaExecutable
    from hlo.runtime.steps import BufRef, Launch, steps_to_json

    code = ptx()
    N = 1000
    X, Y = BufRef("input", 0, 0, 4 * N), BufRef("output", 0, 0, 4 * N)

    def exe(steps, ins, outs):
        return CudaExecutable(code, {"format": 1, "target": {"name": "cuda", "arch": "sm_90"},
                                     "inputs": ins, "outputs": outs, "arena_size": 0, "kernels": NAMES,
                                     "steps": steps_to_json(steps)})
    f32n = [{"dtype": "f32", "shape": [N]}]
    one = exe([Launch("add_one", [X, Y], [False, True], (8, 1, 1), (128, 1, 1), 0, [("i32", N)])], f32n, f32n)
    ten = exe([Launch("add_one", [X, Y], [False, True], (8, 1, 1), (128, 1, 1), 0, [("i32", N)])]
              + [Launch("add_one", [Y, Y], [False, True], (8, 1, 1), (128, 1, 1), 0, [("i32", N)])] * 9,
              f32n, f32n)
    x = np.ones(N, np.float32)
    d = one(x)[0].block_until_ready()
    rows = []
    t = per_call(lambda: one(d)); one.synchronize()
    rows.append(("1 launch, device array in, queued", t))
    rows.append(("1 launch + block_until_ready", per_call(lambda: one(d)[0].block_until_ready())))
    t = per_call(lambda: ten(d)); ten.synchronize()
    rows.append(("10 launches, queued", t))
    rows.append(("numpy in, launch, numpy out", per_call(lambda: np.asarray(one(x)[0]))))
    for name, t in rows:
        print(f"{name:40s} {t * 1e6:8.1f} us")
    for dt in ("f32", "bf16"):
        n = 4096
        a = TensorType((n, n), BY_NAME[dt])
        plan = plan_dot(a, a, a, {"lhs_contracting_dimensions": (1,), "rhs_contracting_dimensions": (0,)})
        nb = n * n * a.dtype.itemsize
        step = plan.library_call(BufRef("input", 0, 0, nb), BufRef("input", 1, 0, nb), BufRef("output", 0, 0, nb))
        s = [{"dtype": dt, "shape": [n, n]}]
        mm = exe([step], s * 2, s)
        rng = np.random.default_rng(0)
        u = mm(rng.standard_normal((n, n)).astype(a.dtype.np_dtype), rng.standard_normal((n, n)).astype(a.dtype.np_dtype))[0]
        v = mm(u, u)[0].block_until_ready()
        t = per_call(lambda: mm(u, v), n=20)
        mm.synchronize()
        t = per_call(lambda: mm(u, v)[0].block_until_ready(), n=20)
        print(f"matmul {n}^3 {dt:5s} {t * 1e3:8.3f} ms  {2 * n ** 3 / t / 1e12:7.1f} TFLOP/s")


if __name__ == "__main__":
    main()
