"""Counted loops on target cuda, unrolled (pass ``while-unroll``): an RNN cell's steps launch its
two cuBLASLt products and one epilogue kernel each -- ``xs[i]`` read in place at its offset
(``codegen._buffer_view`` through a contiguous slice), no counter, index or state-copy kernels
-- and the 16 epilogues are one kernel (``GpuKernel._twin``), read from the steps' text of a
compile that needs no GPU; with one (marker ``gpu``), the loops against float64 numpy and
against the same loops kept as loops."""
from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import gpu

import hlo
import hlo.numpy as hnp
from hlo import lax
from hlo.backends.cuda import compile as cuda_compile
from hlo.passes.pipeline import optimize

RNG = np.random.default_rng(0)
H, W, U, XS = ((32, 512), (512, 512), (128, 512), (16, 32, 128))


def rnn_fori(h, w, u, xs):
    return lax.fori_loop(0, 16, lambda i, h: hnp.tanh(h @ w + xs[i] @ u + 0.5), h)


def rnn_scan(h, w, u, xs):
    return lax.scan(lambda h, x: (hnp.tanh(h @ w + x @ u + 0.5), None), h, xs)[0]


def inputs():
    return [(RNG.standard_normal(s) / np.sqrt(s[-2] if len(s) == 2 and s[0] >= 128 else 1)).astype(np.float32)
            for s in (H, W, U, XS)]


def program(fn, **options):
    ir = hlo.jit(fn).lower(*inputs()).ir
    return cuda_compile(optimize(ir, "cuda", options=options or None))


def reference(h, w, u, xs):
    h = h.astype(np.float64)
    for i in range(xs.shape[0]):
        h = np.tanh(h @ w + xs[i].astype(np.float64) @ u + 0.5)
    return h


@pytest.mark.parametrize("fn", [rnn_fori, rnn_scan])
def test_an_unrolled_rnn_launches_two_products_and_one_kernel_a_step(fn):
    prog = program(fn)
    lines = prog.steps_text.splitlines()
    assert not any(ln.startswith(("while", "copy")) for ln in lines), prog.steps_text
    launches = [ln for ln in lines if "<<<" in ln]
    matmuls = [ln for ln in lines if ln.startswith("cublaslt.matmul")]
    assert len(matmuls) == 32 and len(launches) == 16, prog.steps_text
    # every step's x[i] @ u reads xs (input 3) at step i's offset: 32 x 128 floats a step
    offsets = sorted(int(ln.split("input3+")[1].split(",")[0].split(")")[0]) if "input3+" in ln else 0
                     for ln in matmuls if "input3" in ln)
    assert offsets == [i * 32 * 128 * 4 for i in range(16)], prog.steps_text
    # the 16 epilogues (add, + 0.5, tanh) are one kernel, or two: the last step's h @ w is
    # cuBLASLt's C (its product goes to scratch, not into the result, which the kernel writes)
    assert len(prog.kernels) <= 2 and len({ln.split("<<<")[0] for ln in launches}) == len(prog.kernels)
    assert not any("output0" in ln for ln in matmuls), prog.steps_text


def test_kept_as_a_loop_it_has_its_counter_and_copies():
    prog = program(rnn_fori, while_unroll=False)
    assert prog.steps_text.splitlines()[2].startswith("while (16 steps)"), prog.steps_text
    assert "k_gather" in prog.steps_text


def test_a_slice_that_is_not_contiguous_is_still_copied():
    """Columns 0..63 of each row: not one range of the buffer, so not read in place."""
    x = RNG.standard_normal((32, 128)).astype(np.float32)
    w = RNG.standard_normal((64, 16)).astype(np.float32)
    prog = cuda_compile(optimize(hlo.jit(lambda x, w: x[:, :64] @ w).lower(x, w).ir, "cuda"))
    assert ": operand" in prog.steps_text, prog.steps_text
    rows = cuda_compile(optimize(hlo.jit(lambda x, w: x[8:16, :64] @ w).lower(
        RNG.standard_normal((32, 64)).astype(np.float32), w).ir, "cuda"))
    assert "input0+2048" in rows.steps_text and ": operand" not in rows.steps_text, rows.steps_text


@gpu
@pytest.mark.parametrize("fn", [rnn_fori, rnn_scan])
def test_unrolled_loops_on_gpu_match_float64_and_the_loop(fn):
    args = inputs()
    ref = reference(*args)
    got = {}
    for unroll in (True, False):
        out = np.asarray(program(fn, while_unroll=unroll)(*args)[0]).astype(np.float64)
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        assert err < 1e-4, (unroll, err)
        got[unroll] = out
    np.testing.assert_allclose(got[True], got[False], rtol=1e-4, atol=1e-5)


@gpu
def test_a_jitted_fori_loop_on_gpu_is_unrolled_and_right():
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    f = hlo.jit(lambda x: lax.fori_loop(0, 8, lambda i, y: hnp.sin(y) * 0.9 + i * 0.01, x), target="cuda")
    ref = x.astype(np.float64)
    for i in range(8):
        ref = np.sin(ref) * 0.9 + i * 0.01
    np.testing.assert_allclose(np.asarray(f(x)), ref, rtol=1e-5, atol=1e-6)


@gpu
def test_products_reading_arguments_that_stay_put_stay_in_the_graphs():
    """A new ``xs`` every call (kept by the caller, so at a new address each time): the 16
    products reading it are captured again each call until their segment splits; they become
    direct calls, while the 16 products reading only h and w (the same every call) stay in
    graphs. The results land in kernels' outputs, never in a product's."""
    from hlo.runtime.cuda.graph import CAPTURES_BEFORE_SPLIT, GRAPH, Segment
    from hlo.runtime.cuda.launch import MATMUL, MatmulCall
    host = inputs()
    args = [hlo.device_put(a) for a in host[:3]]
    c = hlo.jit(rnn_fori, target="cuda").lower(*host).compile()
    kept = []
    for _ in range(CAPTURES_BEFORE_SPLIT + 4):
        xs = hlo.device_put(host[3])
        kept.append((xs, c(*args, xs)))
    ref = reference(*host)
    for _, out in kept:
        got = np.asarray(out[0] if isinstance(out, (list, tuple)) else out).astype(np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-4
    exe = c._runtime_executable().executable()
    parts = [p for r in exe._slots[0].records if r[0] == GRAPH for p in (r[1]._parts or [])]
    direct = [p for p in parts if isinstance(p, MatmulCall)]
    graphed = [rec for p in parts if isinstance(getattr(p, "__self__", None), Segment)
               for rec in p.__self__.records if rec[0] == MATMUL]
    assert len(direct) == 16 and len(graphed) == 16, (len(direct), len(graphed))
