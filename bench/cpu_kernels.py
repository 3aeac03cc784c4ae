"""CPU backend kernels of the seed workloads, measured side by side with jax.jit.

    python -m bench.cpu_kernels [--quick] [--only softmax,layernorm] [--gemm]

Each seed workload (bench/workloads.py) is written here as hlo IR text with its fusions made by
hand (the shape the fusion passes are expected to produce: one loop fusion for tinyops, row-fused
softmax / layer norm, output fusions for matrix products with their bias/activation/residual
epilogues). This measures the backend alone, independent of the passes: each case is compiled
with ``hlo.backends.cpu.compile`` on a fallback buffer plan, checked against the workload's
float64 numpy reference, then timed (median of repeated runs) next to jax.jit of the workload's
own definition in the same process. The machine's copy bandwidth and numpy matmul rate are
measured in the same run (``bench.limits``), so memory-bound kernels report their fraction of
streaming bandwidth and matrix-heavy ones their GFLOP/s.

``--gemm`` also compares the BLAS path with the generated loop GEMM for the matrix shapes of the
seed workloads (``HLO_CPU_GEMM=generated``), which is how the default was chosen.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

from bench import workloads as W
from bench.check import check_outputs
from bench.limits import cpu_limits

GELU_C = math.sqrt(2.0 / math.pi)


def _t(shape, dt="f32"):
    return f"{dt}[{','.join(str(int(s)) for s in shape)}]"


class IR:
    """A tiny IR text writer: numbered values, one function body."""

    def __init__(self):
        self.lines = []
        self.n = 0

    def v(self, text, ty, indent=2):
        name = f"%v{self.n}"
        self.n += 1
        self.lines.append(" " * indent + f"{name} = {text} : {ty}")
        return name

    def raw(self, text, indent=2):
        self.lines.append(" " * indent + text)


def _scalar(ir, val, shape, ind):
    c = ir.v(f"constant dense<{val!r}>", "f32[]", ind)
    return ir.v(f"broadcast_in_dim({c}) {{broadcast_dimensions = []}}", _t(shape), ind)


def _bcast(ir, x, shape, dims, ind):
    return ir.v(f"broadcast_in_dim({x}) {{broadcast_dimensions = {list(dims)}}}", _t(shape), ind)


def _reduce(ir, x, in_shape, op, init, ind):
    out = in_shape[:-1]
    c = ir.v(f"constant dense<{init}>", "f32[]", ind)
    a, b = f"%r{ir.n}a", f"%r{ir.n}b"
    name = f"%v{ir.n}"
    ir.n += 1
    ir.raw(f"{name} = reduce({x}, {c}) {{dimensions = [{len(in_shape) - 1}]}} : {_t(out)} {{", ind)
    ir.raw(f"^body({a}: f32[], {b}: f32[]):", ind + 2)
    ir.raw(f"%r{ir.n}c = {op}({a}, {b}) : f32[]", ind + 4)
    ir.raw(f"return(%r{ir.n}c)", ind + 4)
    ir.n += 1
    ir.raw("}", ind)
    return name


def _layer_norm(ir, x, shape, ind, gamma=None, beta=None, eps=1e-5):
    """nn.layer_norm over the last axis, elementwise + row reductions (fused by the caller)."""
    rows, n = shape[:-1], shape[-1]
    dims_rows = list(range(len(rows)))
    s = _reduce(ir, x, shape, "add", "0.0", ind)
    mu = ir.v(f"multiply({s}, {_scalar(ir, 1.0 / n, rows, ind)})", _t(rows), ind)
    d = ir.v(f"subtract({x}, {_bcast(ir, mu, shape, dims_rows, ind)})", _t(shape), ind)
    dd = ir.v(f"multiply({d}, {d})", _t(shape), ind)
    s2 = _reduce(ir, dd, shape, "add", "0.0", ind)
    var = ir.v(f"multiply({s2}, {_scalar(ir, 1.0 / n, rows, ind)})", _t(rows), ind)
    ve = ir.v(f"add({var}, {_scalar(ir, eps, rows, ind)})", _t(rows), ind)
    sd = ir.v(f"sqrt({ve})", _t(rows), ind)
    y = ir.v(f"divide({d}, {_bcast(ir, sd, shape, dims_rows, ind)})", _t(shape), ind)
    last = [len(shape) - 1]
    if gamma is not None:
        y = ir.v(f"multiply({y}, {_bcast(ir, gamma, shape, last, ind)})", _t(shape), ind)
    if beta is not None:
        y = ir.v(f"add({y}, {_bcast(ir, beta, shape, last, ind)})", _t(shape), ind)
    return y


def _gelu(ir, x, shape, ind):
    x3 = ir.v(f"multiply({x}, {x})", _t(shape), ind)
    x3 = ir.v(f"multiply({x3}, {x})", _t(shape), ind)
    t = ir.v(f"multiply({x3}, {_scalar(ir, 0.044715, shape, ind)})", _t(shape), ind)
    t = ir.v(f"add({x}, {t})", _t(shape), ind)
    t = ir.v(f"multiply({t}, {_scalar(ir, GELU_C, shape, ind)})", _t(shape), ind)
    t = ir.v(f"tanh({t})", _t(shape), ind)
    t = ir.v(f"add({t}, {_scalar(ir, 1.0, shape, ind)})", _t(shape), ind)
    h = ir.v(f"multiply({x}, {_scalar(ir, 0.5, shape, ind)})", _t(shape), ind)
    return ir.v(f"multiply({h}, {t})", _t(shape), ind)


def _softmax(ir, x, shape, ind):
    rows = list(range(len(shape) - 1))
    m = _reduce(ir, x, shape, "maximum", "-inf", ind)
    e = ir.v(f"exponential({ir.v(f'subtract({x}, {_bcast(ir, m, shape, rows, ind)})', _t(shape), ind)})", _t(shape), ind)
    s = _reduce(ir, e, shape, "add", "0.0", ind)
    return ir.v(f"divide({e}, {_bcast(ir, s, shape, rows, ind)})", _t(shape), ind)


class Fusion:
    """Writes ``%out = fusion(args) {kind} : types { ^fused(...): body; return(...) }``."""

    def __init__(self, ir, kind, args, arg_types, out_types):
        self.ir, self.args, self.arg_types, self.out_types = ir, args, arg_types, out_types
        self.kind = kind
        self.params = [f"%p{ir.n}_{i}" for i in range(len(args))]
        ir.n += 1
        self.start = len(ir.lines)

    def done(self, outs):
        ir = self.ir
        names = [f"%v{ir.n + i}" for i in range(len(self.out_types))]
        ir.n += len(self.out_types)
        head = (f"  {', '.join(names)} = fusion({', '.join(self.args)}) {{kind = \"{self.kind}\"}} : "
                f"{', '.join(self.out_types)} {{")
        params = ", ".join(f"{p}: {t}" for p, t in zip(self.params, self.arg_types))
        body = ir.lines[self.start:]
        del ir.lines[self.start:]
        ir.lines += [head, f"    ^fused({params}):"] + body + [f"      return({', '.join(outs)})", "  }"]
        return names


def _dot(ir, a, b, a_shape, b_shape, ind, lc, rc, lb=(), rb=(), out_shape=None):
    attrs = [f"lhs_contracting_dimensions = {list(lc)}", f"rhs_contracting_dimensions = {list(rc)}"]
    if lb:
        attrs = [f"lhs_batching_dimensions = {list(lb)}", f"rhs_batching_dimensions = {list(rb)}"] + attrs
    return ir.v(f"dot_general({a}, {b}) {{{', '.join(sorted(attrs))}}}", _t(out_shape), ind)


def _linear_fusion(ir, x, x_shape, w, w_shape, bias, epilogue=None, residual=None):
    """Output fusion: epilogue(x @ w + bias) (+ residual), x's last axis contracted."""
    out_shape = tuple(x_shape[:-1]) + (w_shape[1],)
    args = [x, w, bias] + ([residual] if residual else [])
    types = [_t(x_shape), _t(w_shape), _t((w_shape[1],))] + ([_t(out_shape)] if residual else [])
    f = Fusion(ir, "output", args, types, [_t(out_shape)])
    p = f.params
    y = _dot(ir, p[0], p[1], x_shape, w_shape, 6, [len(x_shape) - 1], [0], out_shape=out_shape)
    y = ir.v(f"add({y}, {_bcast(ir, p[2], out_shape, [len(out_shape) - 1], 6)})", _t(out_shape), 6)
    if epilogue == "gelu":
        y = _gelu(ir, y, out_shape, 6)
    elif epilogue == "relu":
        y = ir.v(f"maximum({y}, {_scalar(ir, 0.0, out_shape, 6)})", _t(out_shape), 6)
    if residual:
        y = ir.v(f"add({y}, {p[3]})", _t(out_shape), 6)
    return f.done([y])[0]


def _row_fusion(ir, kind_fn, x, shape, extra=(), extra_types=()):
    f = Fusion(ir, "input", [x] + list(extra), [_t(shape)] + list(extra_types), [_t(shape)])
    y = kind_fn(f.params)
    return f.done([y])[0]


def _module(args, arg_types, build):
    ir = IR()
    outs, out_types = build(ir, args)
    head = f"func @main({', '.join(f'{a}: {t}' for a, t in zip(args, arg_types))}) -> ({', '.join(out_types)}) {{"
    return "module @bench\n\n" + head + "\n" + "\n".join(ir.lines) + f"\n  return({', '.join(outs)})\n}}\n"


# ------------------------------------------------------------------------------------------
# The seed workloads as fused IR
# ------------------------------------------------------------------------------------------

def ir_tinyops(d):
    s = d["x"]

    def build(ir, a):
        f = Fusion(ir, "loop", [a[0]], [_t(s)], [_t(s)])
        x = f.params[0]
        y = ir.v(f"multiply({x}, {_scalar(ir, 2.0, s, 6)})", _t(s), 6)
        y = ir.v(f"add({y}, {_scalar(ir, 1.0, s, 6)})", _t(s), 6)
        e = ir.v(f"exponential({ir.v(f'negate({y})', _t(s), 6)})", _t(s), 6)
        y = ir.v(f"divide({_scalar(ir, 1.0, s, 6)}, {ir.v(f'add({e}, {_scalar(ir, 1.0, s, 6)})', _t(s), 6)})", _t(s), 6)
        y = ir.v(f"multiply({y}, {y})", _t(s), 6)
        y = ir.v(f"tanh({y})", _t(s), 6)
        den = ir.v(f"add({ir.v(f'abs({y})', _t(s), 6)}, {_scalar(ir, 1.0, s, 6)})", _t(s), 6)
        y = ir.v(f"divide({y}, {den})", _t(s), 6)
        return f.done([y]), [_t(s)]
    return _module(["%x"], [_t(s)], build)


def ir_softmax(d):
    s = d["x"]
    return _module(["%x"], [_t(s)], lambda ir, a: (
        [_row_fusion(ir, lambda p: _softmax(ir, p[0], s, 6), a[0], s)], [_t(s)]))


def ir_layernorm(d):
    s = d["x"]
    n = s[-1]
    return _module(["%x", "%g", "%b"], [_t(s), _t((n,)), _t((n,))], lambda ir, a: (
        [_row_fusion(ir, lambda p: _layer_norm(ir, p[0], s, 6, p[1], p[2]), a[0], s, a[1:], [_t((n,))] * 2)],
        [_t(s)]))


def ir_linear_relu(d):
    n, i, o = d["batch"], d["d_in"], d["d_out"]
    return _module(["%x", "%w", "%b"], [_t((n, i)), _t((i, o)), _t((o,))], lambda ir, a: (
        [_linear_fusion(ir, a[0], (n, i), a[1], (i, o), a[2], "relu")], [_t((n, o))]))


def ir_simple_mlp(d):
    n, i, h = d["batch"], d["d_in"], d["hidden"]

    def build(ir, a):
        y = _linear_fusion(ir, a[0], (n, i), a[1], (i, h), a[2], "gelu")
        z = _linear_fusion(ir, y, (n, h), a[3], (h, i), a[4])
        return [z], [_t((n, i))]
    return _module(["%x", "%w1", "%b1", "%w2", "%b2"],
                   [_t((n, i)), _t((i, h)), _t((h,)), _t((h, i)), _t((i,))], build)


def ir_ln_linear_gelu_res(d):
    B, S, D = d["x"]
    s = (B, S, D)

    def build(ir, a):
        h = _row_fusion(ir, lambda p: _layer_norm(ir, p[0], s, 6), a[0], s)
        y = _linear_fusion(ir, h, s, a[1], (D, D), a[2], "gelu", residual=a[0])
        return [y], [_t(s)]
    return _module(["%x", "%w", "%b"], [_t(s), _t((D, D)), _t((D,))], build)


def ir_transformer_layer(d):
    B, S, D = d["x"]
    F = d["ffn"]
    H = W.N_HEADS
    Dh = D // H
    s = (B, S, D)
    names = ["%x", "%wq", "%bq", "%wk", "%bk", "%wv", "%bv", "%wo", "%bo", "%g1", "%be1",
             "%w1", "%b1", "%w2", "%b2", "%g2", "%be2"]
    types = [_t(s)] + [_t((D, D)), _t((D,))] * 4 + [_t((D,))] * 2 + \
        [_t((D, F)), _t((F,)), _t((F, D)), _t((D,))] + [_t((D,))] * 2

    def build(ir, a):
        x = a[0]
        q = _linear_fusion(ir, x, s, a[1], (D, D), a[2])
        k = _linear_fusion(ir, x, s, a[3], (D, D), a[4])
        v = _linear_fusion(ir, x, s, a[5], (D, D), a[6])
        hs = (B, S, H, Dh)
        # scores[b,h,i,j] = sum_e q[b,i,h,e] k[b,j,h,e] / sqrt(Dh), softmax over j: one kernel
        # for the batched product, one row-fused softmax (with the scaling).
        f = Fusion(ir, "output", [q, k], [_t(s), _t(s)], [_t((B, H, S, S))])
        qr = ir.v(f"reshape({f.params[0]})", _t(hs), 6)
        kr = ir.v(f"reshape({f.params[1]})", _t(hs), 6)
        sc = _dot(ir, qr, kr, hs, hs, 6, [3], [3], lb=[0, 2], rb=[0, 2], out_shape=(B, H, S, S))
        sc = ir.v(f"multiply({sc}, {_scalar(ir, 1.0 / math.sqrt(Dh), (B, H, S, S), 6)})", _t((B, H, S, S)), 6)
        scores = f.done([sc])[0]
        p = _row_fusion(ir, lambda pp: _softmax(ir, pp[0], (B, H, S, S), 6), scores, (B, H, S, S))
        f = Fusion(ir, "output", [p, v], [_t((B, H, S, S)), _t(s)], [_t(s)])
        vr = ir.v(f"reshape({f.params[1]})", _t(hs), 6)
        o = _dot(ir, f.params[0], vr, (B, H, S, S), hs, 6, [3], [1], lb=[0, 1], rb=[0, 2], out_shape=(B, H, S, Dh))
        o = ir.v(f"transpose({o}) {{permutation = [0, 2, 1, 3]}}", _t(hs), 6)
        o = ir.v(f"reshape({o})", _t(s), 6)
        o = f.done([o])[0]
        r = _linear_fusion(ir, o, s, a[7], (D, D), a[8], residual=x)
        h = _row_fusion(ir, lambda pp: _layer_norm(ir, pp[0], s, 6, pp[1], pp[2]), r, s, [a[9], a[10]], [_t((D,))] * 2)
        f1 = _linear_fusion(ir, h, s, a[11], (D, F), a[12], "gelu")
        f2 = _linear_fusion(ir, f1, (B, S, F), a[13], (F, D), a[14], residual=h)
        y = _row_fusion(ir, lambda pp: _layer_norm(ir, pp[0], s, 6, pp[1], pp[2]), f2, s, [a[15], a[16]], [_t((D,))] * 2)
        return [y], [_t(s)]
    return _module(names, types, build)


def ir_dispatch(d):
    s = d["x"]

    def build(ir, a):
        c = _scalar(ir, 1.0, s, 2)
        return [ir.v(f"add({a[0]}, {c})", _t(s))], [_t(s)]
    return _module(["%x"], [_t(s)], build)


BUILDERS = {
    "tinyops": ir_tinyops, "ln_linear_gelu_res": ir_ln_linear_gelu_res, "simple_mlp": ir_simple_mlp,
    "linear_relu": ir_linear_relu, "softmax": ir_softmax, "layernorm": ir_layernorm,
    "transformer_layer": ir_transformer_layer, "dispatch": ir_dispatch,
}

# Fastest peer (jax.jit / torch.compile / IREE) measured on a quiet 2-core machine (the issue's
# targets), in ms.
TARGET_MS = {"tinyops": 8.2, "ln_linear_gelu_res": 59.0, "simple_mlp": 0.65, "linear_relu": 0.07,
             "softmax": 19.0, "layernorm": 7.6, "transformer_layer": 44.0, "dispatch": 0.0058}

# Bytes moved (read + written once) for the memory-bound cases.
def _bytes(case, inputs, outputs):
    return sum(a.nbytes for a in inputs) + sum(o.nbytes for o in outputs)


def _time(fn, min_time=0.3, max_reps=200):
    fn()
    ts = []
    t_end = time.perf_counter() + min_time
    while len(ts) < 5 or (time.perf_counter() < t_end and len(ts) < max_reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def run_case(case, limits, do_jax=True):
    from hlo.backends.cpu import compile as cpu_compile
    from hlo.ir import parse_module
    from hlo.passes.pipeline import as_written
    inputs = case.inputs()
    src = BUILDERS[case.workload.id](case.dims)
    t0 = time.perf_counter()
    exe = cpu_compile(as_written(parse_module(src)))
    t_compile = time.perf_counter() - t0
    outs = exe.run(inputs)
    chk = check_outputs(case.dtype, inputs, outs, W.reference(case, inputs))
    med, best = _time(lambda: exe.run(inputs))
    row = {"case": case.name, "shapes": case.shapes(inputs), "ok": chk.ok, "check": chk.message,
           "hlo_ms": med * 1e3, "hlo_best_ms": best * 1e3, "hlo_compile_s": t_compile,
           "kernels": len(exe.kernels), "target_ms": TARGET_MS.get(case.workload.id)}
    if case.workload.memory_bound:
        row["GBps"] = _bytes(case, inputs, outs) / med / 1e9
        row["frac_copy_bw"] = row["GBps"] / limits["copy_GBps"]
    if case.flops():
        row["GFLOPs"] = case.flops() / med / 1e9
        row["frac_matmul"] = row["GFLOPs"] / limits["matmul_GFLOPs_f32"]
    if do_jax:
        import jax
        import jax.numpy as jnp
        jf = jax.jit(lambda *a: case.workload.fn(W.Ops(jnp), *a))
        ji = [jnp.asarray(a) for a in inputs]
        t0 = time.perf_counter()
        jax.block_until_ready(jf(*ji))
        row["jax_first_call_s"] = time.perf_counter() - t0
        jm, jb = _time(lambda: jax.block_until_ready(jf(*ji)))
        row["jax_ms"] = jm * 1e3
        row["speedup_vs_jax"] = jm / med
    return row


def gemm_comparison(shapes=((32, 512, 256), (32, 512, 1024), (32, 1024, 512), (16384, 512, 512), (1024, 512, 2048))):
    """BLAS vs generated loop GEMM for the seed workloads' matrix shapes (GFLOP/s)."""
    import subprocess
    code = ("import sys,time,statistics,numpy as np\n"
            "from hlo.ir import parse_module\nfrom hlo.backends.cpu import compile as C\n"
            "from hlo.passes.pipeline import as_written as U\n"
            "M,K,N=map(int,sys.argv[1:4])\n"
            "src=f'''module @m\\nfunc @main(%a: f32[{M},{K}], %b: f32[{K},{N}]) -> (f32[{M},{N}]) {{\\n"
            "  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{M},{N}]\\n"
            "  return(%0)\\n}}\\n'''\n"
            "e=C(U(parse_module(src)));a=np.ones((M,K),np.float32);b=np.ones((K,N),np.float32);e.run([a,b])\n"
            "ts=[]\nfor _ in range(max(3,int(3e9/(2*M*N*K)))):\n t=time.perf_counter();e.run([a,b]);ts.append(time.perf_counter()-t)\n"
            "print(2*M*N*K/statistics.median(ts)/1e9)\n")
    rows = []
    for M, K, N in shapes:
        r = {"shape": f"{M}x{K}x{N}"}
        for mode in ("blas", "generated"):
            env = dict(os.environ)
            if mode == "generated":
                env["HLO_CPU_GEMM"] = "generated"
            out = subprocess.run([sys.executable, "-c", code, str(M), str(K), str(N)], env=env,
                                 capture_output=True, text=True)
            r[mode] = float(out.stdout.strip()) if out.returncode == 0 else float("nan")
        rows.append(r)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    ap.add_argument("--only", default="", help="comma-separated workload ids")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--gemm", action="store_true", help="also compare BLAS vs generated GEMM")
    args = ap.parse_args(argv)
    mode = "quick" if args.quick else "cpu"
    ids = [i for i in args.only.split(",") if i] or list(BUILDERS)
    limits = cpu_limits(quick=args.quick)
    print(f"machine: copy {limits['copy_GBps']:.1f} GB/s, numpy matmul {limits['matmul_GFLOPs_f32']:.0f} GFLOP/s (f32)")
    cases = [c for c in W.select(ids, mode) if c.dtype == "f32" and c.workload.id in BUILDERS]
    hdr = f"{'case':20s} {'ok':3s} {'hlo ms':>9s} {'jax ms':>9s} {'x jax':>6s} {'target':>8s} {'compile s':>9s} {'jax 1st s':>9s}  notes"
    print(hdr)
    for c in cases:
        r = run_case(c, limits, not args.no_jax)
        notes = []
        if "frac_copy_bw" in r:
            notes.append(f"{r['GBps']:.1f} GB/s = {100 * r['frac_copy_bw']:.0f}% of copy")
        if "GFLOPs" in r:
            notes.append(f"{r['GFLOPs']:.0f} GFLOP/s = {100 * r['frac_matmul']:.0f}% of numpy matmul")
        if not r["ok"]:
            notes.append("CHECK FAILED: " + r["check"])
        print(f"{r['case']:20s} {'yes' if r['ok'] else 'NO':3s} {r['hlo_ms']:9.3f} {r.get('jax_ms', float('nan')):9.3f} "
              f"{r.get('speedup_vs_jax', float('nan')):6.2f} {r['target_ms'] or float('nan'):8.3f} "
              f"{r['hlo_compile_s']:9.3f} {r.get('jax_first_call_s', float('nan')):9.3f}  {'; '.join(notes)}",
              flush=True)
    if args.gemm:
        print("\nGEMM f32 GFLOP/s, BLAS vs generated loops:")
        for r in gemm_comparison():
            print(f"  {r['shape']:18s} blas {r['blas']:7.1f}   generated {r['generated']:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
