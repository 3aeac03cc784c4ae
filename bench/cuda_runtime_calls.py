"""Per-call cost of hlo's CUDA runtime beside torch eager, jax.jit and the raw driver (a GPU
machine only): python bench/cuda_runtime_calls.py [--json FILE]

The GPU's own work is negligible (``dispatch``: x + 1 on f32[8]; the other rows 1000 floats),
so these are host costs. Rows: ``dispatch`` with the input already on the device, a loop of
calls ended by one sync (hlo with its default graph threshold, as a one-node CUDA graph and as
the plain step walk; torch eager ``x + 1``; jax.jit); the same with a sync per call; ten
kernels per call (graph vs step walk; the raw floors: ten ``cuLaunchKernel`` and one
``cuGraphLaunch`` of ten nodes); numpy in -> numpy out; a kernel + cuBLASLt product + kernel
executable with the result kept (so its address changes every call: the product is captured
again) and dropped (same address: no patching). Median of repeats, after warm-up; not a test
(tests never assert timings). Also the cuBLASLt f32 / bf16 throughput at 4096^3."""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "cuda"))


def per_call(fn, n=2000, reps=7, sync=None):
    """Median seconds per call of ``fn`` over ``reps`` loops of ``n`` calls, each loop ended by
    ``sync()``."""
    for _ in range(max(n // 10, 20)):
        fn()
    if sync:
        sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        out.append((time.perf_counter() - t) / n)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--no-matmul-throughput", action="store_true")
    args = ap.parse_args()

    from cuda_test_kernels import NAMES, ptx

    from hlo.backends.cuda.gemm import plan_dot
    from hlo.ir.types import BY_NAME, TensorType
    from hlo.runtime.cuda import CudaExecutable, driver
    from hlo.runtime.steps import BufRef, Launch, steps_to_json

    code = ptx()

    def exe(steps, ins, outs, graphs=None, arena=0):
        return CudaExecutable(code, {"format": 1, "target": {"name": "cuda", "arch": "sm_90"},
                                     "inputs": ins, "outputs": outs, "arena_size": arena, "kernels": NAMES,
                                     "steps": steps_to_json(steps)}, graphs=graphs)

    def add_one(n, src, dst):
        return Launch("add_one", [src, dst], [False, True], ((n + 127) // 128, 1, 1), (128, 1, 1), 0, [("i32", n)])

    rows = []

    def row(name, t, note=""):
        rows.append({"row": name, "us_per_call": round(t * 1e6, 2), "note": note})
        print(f"{name:58s} {t * 1e6:8.2f} us  {note}", flush=True)

    ctx = driver.get_context(0)
    print(f"device: {ctx.name} ({ctx.arch}), driver CUDA {'%d.%d' % driver.driver_version()}")
    # -- dispatch: x + 1 on f32[8], the input on the device ------------------------------------
    n8 = 8
    X8, Y8 = BufRef("input", 0, 0, 4 * n8), BufRef("output", 0, 0, 4 * n8)
    s8 = [{"dtype": "f32", "shape": [n8]}]
    variants = {"default": None, "graph (1 node)": 1, "step walk": 0}
    d8 = {}
    for label, g in variants.items():
        e = exe([add_one(n8, X8, Y8)], s8, s8, graphs=g)
        d = e(np.arange(n8, dtype=np.float32))[0].block_until_ready()
        d8[label] = (e, d)
        row(f"dispatch x+1 f32[8], device in, queued [{label}]", per_call(lambda: e(d), sync=e.synchronize))
    e, d = d8["default"]
    row("dispatch x+1 f32[8] + block_until_ready [default]", per_call(lambda: e(d)[0].block_until_ready()))
    try:
        import torch
        xt = torch.arange(n8, dtype=torch.float32, device="cuda")
        row("torch eager x+1 f32[8], queued", per_call(lambda: xt + 1, sync=torch.cuda.synchronize))
        row("torch eager x+1 f32[8] + synchronize", per_call(lambda: (xt + 1, torch.cuda.synchronize())))
    except Exception as ex:
        print(f"torch: {ex}")
    try:
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda x: x + 1)
        xj = jax.device_put(jnp.arange(n8, dtype=jnp.float32))
        f(xj).block_until_ready()
        last = [None]

        def jcall():
            last[0] = f(xj)
        row("jax.jit x+1 f32[8], queued", per_call(jcall, sync=lambda: last[0].block_until_ready()))
        row("jax.jit x+1 f32[8] + block_until_ready", per_call(lambda: f(xj).block_until_ready()))
    except Exception as ex:
        print(f"jax: {ex}")
    ctx.make_current()  # torch / jax may have switched the thread's context

    # -- ten kernels ------------------------------------------------------------------------
    N = 1000
    X, Y = BufRef("input", 0, 0, 4 * N), BufRef("output", 0, 0, 4 * N)
    f32n = [{"dtype": "f32", "shape": [N]}]
    ten_steps = [add_one(N, X, Y)] + [add_one(N, Y, Y)] * 9
    x = np.ones(N, np.float32)
    for label, g in (("graph", None), ("step walk", 0)):
        ten = exe(ten_steps, f32n, f32n, graphs=g)
        dn = ten(x)[0].block_until_ready()
        row(f"10 kernels, device in, queued [{label}]", per_call(lambda: ten(dn), sync=ten.synchronize))
        row(f"10 kernels + block_until_ready [{label}]", per_call(lambda: ten(dn)[0].block_until_ready()))
        kept = []
        row(f"10 kernels, results kept (new address each call) [{label}]",
            per_call(lambda: kept.append(ten(dn)), n=500, sync=ten.synchronize))
        kept.clear()   # the results go (and their device memory)
    one = exe([add_one(N, X, Y)], f32n, f32n)
    row("1 kernel, numpy in -> numpy out", per_call(lambda: np.asarray(one(x)[0])))

    # raw floors through cuda-bindings: ten launches; one graph of ten
    cu = driver.cu
    from hlo.runtime.cuda.module import KernelParams
    func = one.module.function("add_one")
    buf = ctx.alloc(4 * N)
    kp = KernelParams(2, [("i32", N)])
    kp.ptrs[0] = kp.ptrs[1] = buf
    st = ctx.create_stream()
    largs = (func, 8, 1, 1, 128, 1, 1, 0, st.handle, kp.address, 0)
    row("raw: 1 cuLaunchKernel, queued", per_call(lambda: cu.cuLaunchKernel(*largs), sync=st.synchronize))

    def ten_launches():
        for _ in range(10):
            cu.cuLaunchKernel(*largs)
    row("raw: 10 cuLaunchKernel, queued", per_call(ten_launches, sync=st.synchronize))
    cap = ctx.create_stream()
    driver.check(cu.cuStreamBeginCapture(cap.handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capture")
    for _ in range(10):
        cu.cuLaunchKernel(func, 8, 1, 1, 128, 1, 1, 0, cap.handle, kp.address, 0)
    g = driver.check(cu.cuStreamEndCapture(cap.handle), "capture")
    gx = driver.check(cu.cuGraphInstantiate(g, 0), "instantiate")
    row("raw: cuGraphLaunch of 10 kernel nodes, queued", per_call(lambda: cu.cuGraphLaunch(gx, st.handle), sync=st.synchronize))
    row("raw: cuGraphLaunch of 10 + cuStreamSynchronize", per_call(lambda: (cu.cuGraphLaunch(gx, st.handle), st.synchronize())))
    p1 = cu.CUDA_KERNEL_NODE_PARAMS()
    p1.func = func
    p1.gridDimX, p1.gridDimY, p1.gridDimZ, p1.blockDimX, p1.blockDimY, p1.blockDimZ = 8, 1, 1, 128, 1, 1
    p1.kernelParams = kp.address
    node = driver.check(cu.cuGraphGetNodes(g, 10), "nodes")[0][0]
    row("raw: cuGraphExecKernelNodeSetParams", per_call(lambda: cu.cuGraphExecKernelNodeSetParams(gx, node, p1)))

    # -- kernel + cuBLASLt product + kernel -----------------------------------------------------
    m = 64
    t = TensorType((m, m), BY_NAME["f32"])
    plan = plan_dot(t, t, t, {"lhs_contracting_dimensions": (1,), "rhs_contracting_dimensions": (0,)})
    nb = m * m * 4
    A, B, T0 = BufRef("input", 0, 0, nb), BufRef("input", 1, 0, nb), BufRef("arena", 0, 0, nb)
    O0, O1 = BufRef("output", 0, 0, nb), BufRef("output", 1, 0, nb)
    mm_steps = [add_one(m * m, A, T0), plan.library_call(T0, B, O0, what="dot"), add_one(m * m, O0, O1)]
    sm = [{"dtype": "f32", "shape": [m, m]}]
    rng = np.random.default_rng(0)
    av, bv = (rng.standard_normal((m, m)).astype(np.float32) for _ in range(2))
    for label, g in (("graph", None), ("step walk", 0)):
        mx = exe(mm_steps, sm * 2, sm * 2, graphs=g, arena=nb)
        da, db = (mx(av, bv)[1].block_until_ready(), mx(bv, av)[1].block_until_ready())
        row(f"kernel+matmul+kernel, results dropped [{label}]", per_call(lambda: mx(da, db), n=1000, sync=mx.synchronize))
        kept = []
        row(f"kernel+matmul+kernel, results kept [{label}]",
            per_call(lambda: kept.append(mx(da, db)), n=300, reps=5, sync=mx.synchronize))
        kept.clear()   # the results go (and their device memory)

    if not args.no_matmul_throughput:
        for dt in ("f32", "bf16"):
            n = 4096
            a = TensorType((n, n), BY_NAME[dt])
            plan = plan_dot(a, a, a, {"lhs_contracting_dimensions": (1,), "rhs_contracting_dimensions": (0,)})
            nbb = n * n * a.dtype.itemsize
            step = plan.library_call(BufRef("input", 0, 0, nbb), BufRef("input", 1, 0, nbb), BufRef("output", 0, 0, nbb))
            s = [{"dtype": dt, "shape": [n, n]}]
            mm = exe([step], s * 2, s)
            u = mm(rng.standard_normal((n, n)).astype(a.dtype.np_dtype), rng.standard_normal((n, n)).astype(a.dtype.np_dtype))[0]
            v = mm(u, u)[0].block_until_ready()
            tt = per_call(lambda: mm(u, v)[0].block_until_ready(), n=20, reps=5)
            print(f"matmul {n}^3 {dt:5s} {tt * 1e3:8.3f} ms  {2 * n ** 3 / tt / 1e12:7.1f} TFLOP/s")
            rows.append({"row": f"matmul {n}^3 {dt}", "ms": round(tt * 1e3, 3), "tflops": round(2 * n ** 3 / tt / 1e12, 1)})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": ctx.name, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
