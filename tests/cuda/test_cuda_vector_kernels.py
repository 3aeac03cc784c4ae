"""The memory-bound kernel shapes of the CUDA backend: loop kernels that move 16 bytes a thread
access (``ld.global.nc.v4.f32``) with a scalar path for misaligned pointers, and row kernels
(softmax, layer norm) that keep the row in registers as vectors, a warp per row up to 1024
elements and a block per row beyond.

Without a GPU: the PTX holds the vector accesses where the minor dimension divides into vectors
and the scalar path beside them, none where it does not, and the launch shapes are the
expected ones. With a GPU (marker ``gpu``): results against float64 numpy at odd sizes, counts
that do not divide, rows of 1 to 16384 elements, f16/bf16 storage, misaligned views of another
library's memory and grids smaller than the work (grid-stride loops)."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from cuda_helpers import ROW_LAYERNORM, ROW_SOFTMAX, compile_src, gpu, row_src

from hlo.backends.cuda import kernels as K
from hlo.backends.cuda.device import launch_device

rng = np.random.default_rng(11)
BF16 = np.dtype(ml_dtypes.bfloat16)
NP = {"f32": np.float32, "f16": np.float16, "bf16": BF16}

CHAIN = """module @m
func @main(%arg0: {et}[{shape}]) -> ({et}[{shape}]) {{
  %0 = multiply(%arg0, %arg0) : {et}[{shape}]
  %1 = tanh(%0) : {et}[{shape}]
  %2 = abs(%1) : {et}[{shape}]
  %3 = constant dense<1.0> : {et}[]
  %4 = broadcast_in_dim(%3) {{broadcast_dimensions = []}} : {et}[{shape}]
  %5 = add(%2, %4) : {et}[{shape}]
  %6 = divide(%1, %5) : {et}[{shape}]
  %7 = exponential(%6) : {et}[{shape}]
  return(%7)
}}
"""


def chain_ref(x):
    t = np.tanh(x.astype(np.float64) ** 2)
    return np.exp(t / (np.abs(t) + 1))


# a row-shaped operand scaled by a broadcast vector: the vector's reads are lanes too
AFFINE = """module @m
func @main(%arg0: f32[{n},{m}], %arg1: f32[{m}], %arg2: f32[{m},{n}]) -> (f32[{n},{m}], f32[{n},{m}]) {{
  %0 = broadcast_in_dim(%arg1) {{broadcast_dimensions = [1]}} : f32[{n},{m}]
  %1 = multiply(%arg0, %0) : f32[{n},{m}]
  %2 = transpose(%arg2) {{permutation = [1, 0]}} : f32[{n},{m}]
  %3 = add(%1, %2) : f32[{n},{m}]
  %4 = subtract(%arg0, %0) : f32[{n},{m}]
  return(%3, %4)
}}
"""

def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layernorm_ref(x, g, b):
    x = x.astype(np.float64)
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * g + b


VEC_LOAD = re.compile(r"ld\.global\.nc\.v[248]\.")
VEC_STORE = re.compile(r"st\.global\.v[248]\.")
SCALAR_LOAD = re.compile(r"ld\.global\.nc\.[bfu](16|32)\s")


def _launch(prog):
    """(grid, block) of the program's only kernel, from its step text."""
    assert len(prog.kernels) == 1, prog.steps_text
    m = re.search(r"<<<\((\d+), 1, 1\), \((\d+), 1, 1\)>>>", prog.steps_text)
    return int(m.group(1)), int(m.group(2))


def _rel_err(got, ref):
    got = np.asarray(got).astype(np.float64)
    return np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)


# ------------------------------------------------------------------ PTX (no GPU needed)

@pytest.mark.parametrize("et,shape,vec", [
    ("f32", (64, 1024), 4), ("f32", (5, 6), 2), ("f32", (7, 33), 1), ("f32", (1000001,), 1),
    ("f16", (16, 256), 8), ("bf16", (3, 12), 4)])
def test_loop_kernel_vector_width(et, shape, vec):
    prog = compile_src(CHAIN.format(et=et, shape=",".join(map(str, shape))))
    ptx = prog.ptx
    if vec > 1:
        assert VEC_LOAD.search(ptx) and VEC_STORE.search(ptx), "no vector accesses"
        assert SCALAR_LOAD.search(ptx), "no scalar path for misaligned pointers"
        # f32 as v4 / v2 of b32; eight f16 as v4.b32, four bf16 as v4.b16
        assert {"f32": f".v{vec}.b32", "f16": ".v4.b32", "bf16": ".v4.b16"}[et] in ptx
    else:
        assert not VEC_LOAD.search(ptx) and not VEC_STORE.search(ptx)
    grid, block = _launch(prog)
    n = int(np.prod(shape))
    per = K.LOOP_VECTORS if vec > 1 else K.UNROLL  # elements or vectors a thread an iteration
    if n // vec < per * K.BLOCK * launch_device().sm_count * (K.BIG_WAVES if vec > 1 else 1):
        per = 1  # too few for every thread of the device to take several
    assert block == K.BLOCK and grid == -(-(n // vec) // (K.BLOCK * per)), "a grid that covers the work once"


def test_loop_kernel_reads_a_broadcast_vector_as_lanes_and_a_transpose_per_element():
    prog = compile_src(AFFINE.format(n=16, m=64))
    # arg0 (4 lanes) and arg1 (broadcast along rows) in vectors; arg2 read across its rows
    assert len(VEC_LOAD.findall(prog.ptx)) >= 2
    assert len(VEC_STORE.findall(prog.ptx)) >= 2  # both outputs


@pytest.mark.parametrize("m,size,vec", [
    (31, K.WARP, 1), (33, K.WARP, 1), (1000, K.WARP, 4), (1024, K.WARP, 4),
    (4097, 256, 1), (16384, 512, 4)])
def test_row_kernel_shapes(m, size, vec):
    n = 5
    for tmpl in (ROW_SOFTMAX, ROW_LAYERNORM):
        prog = compile_src(row_src(tmpl, "f32", n, m))
        assert "row-fused" in prog.steps_text
        grid, block = _launch(prog)
        assert K.row_group(m)[0] == size
        per_block = block // size
        assert grid == -(-n // per_block)
        if vec > 1:
            assert VEC_LOAD.search(prog.ptx) and VEC_STORE.search(prog.ptx)
            assert SCALAR_LOAD.search(prog.ptx), "no scalar path for misaligned pointers"
        else:
            assert not VEC_LOAD.search(prog.ptx) and not VEC_STORE.search(prog.ptx)


def test_row_kernel_narrow_storage_moves_eight_elements():
    prog = compile_src(row_src(ROW_SOFTMAX, "bf16", 4, 1024))
    assert VEC_LOAD.search(prog.ptx) and VEC_STORE.search(prog.ptx)
    # 16 bytes of the widest row-shaped value, halved until the row divides
    from hlo.ir import parse_module
    f = parse_module(row_src(ROW_SOFTMAX, "bf16", 4, 1024)).main
    assert K.row_vector_width((4, 1024), 1, list(f.args), []) == 8
    assert K.row_vector_width((4, 1020), 1, list(f.args), []) == 4


def test_read_only_unaliased_buffers_use_the_noncoherent_path():
    prog = compile_src(CHAIN.format(et="f32", shape="8,64"))
    assert "ld.global.nc" in prog.ptx and "ld.global.v" not in prog.ptx


# ------------------------------------------------------------------ on the GPU

@gpu
@pytest.mark.parametrize("et,shape", [
    ("f32", (64, 1024)), ("f32", (5, 6)), ("f32", (7, 33)), ("f32", (1000001,)), ("f32", (3, 1, 4096)),
    ("f16", (16, 256)), ("f16", (9, 10)), ("bf16", (3, 12)), ("bf16", (130, 1000))])
def test_loop_kernel_on_gpu(et, shape):
    x = (rng.standard_normal(shape) * 1.5).astype(NP[et])
    got = compile_src(CHAIN.format(et=et, shape=",".join(map(str, shape))))(x)[0]
    tol = 1e-6 if et == "f32" else 1e-2
    assert _rel_err(got, chain_ref(x)) < tol


@gpu
def test_loop_kernel_with_broadcast_and_transpose_reads_on_gpu():
    n, m = 16, 64
    x, w, y = (rng.standard_normal(s).astype(np.float32) for s in ((n, m), (m,), (m, n)))
    a, b = compile_src(AFFINE.format(n=n, m=m))(x, w, y)
    np.testing.assert_allclose(np.asarray(a), x * w + y.T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(b), x - w, rtol=1e-6, atol=1e-6)


@gpu
@pytest.mark.parametrize("m", [1, 31, 33, 1000, 1024, 4097, 16384])
@pytest.mark.parametrize("et", ["f32", "f16", "bf16"])
def test_softmax_and_layernorm_rows_on_gpu(m, et):
    n = 3 if m >= 4096 else 37
    x = (rng.standard_normal((n, m)) * 2).astype(NP[et])
    tol = 1e-5 if et == "f32" else (4e-3 if et == "f16" else 2e-2)
    got = compile_src(row_src(ROW_SOFTMAX, et, n, m))(x)[0]
    assert _rel_err(got, softmax_ref(x)) < tol
    g, b = rng.standard_normal(m).astype(np.float32), rng.standard_normal(m).astype(np.float32)
    got = compile_src(row_src(ROW_LAYERNORM, et, n, m))(x, g, b)[0]
    assert _rel_err(got, layernorm_ref(x, g, b)) < tol


@gpu
@pytest.mark.parametrize("kind", ["loop", "softmax", "layernorm"])
def test_misaligned_views_take_the_scalar_path(kind):
    torch = pytest.importorskip("torch")
    n, m = 6, 1024
    base = torch.randn(n * m + 1, device="cuda", dtype=torch.float32)
    view = base[1:].view(n, m)  # 4 bytes past a 16-byte boundary
    x = view.cpu().numpy()
    if kind == "loop":
        got, ref = compile_src(CHAIN.format(et="f32", shape=f"{n},{m}"))(view)[0], chain_ref(x)
    elif kind == "softmax":
        got, ref = compile_src(row_src(ROW_SOFTMAX, "f32", n, m))(view)[0], softmax_ref(x)
    else:
        g = torch.randn(m + 1, device="cuda")[1:]
        b = torch.randn(m, device="cuda")
        got = compile_src(row_src(ROW_LAYERNORM, "f32", n, m))(view, g, b)[0]
        ref = layernorm_ref(x, g.cpu().numpy(), b.cpu().numpy())
    assert _rel_err(got, ref) < 1e-5
    torch.cuda.synchronize()


@gpu
def test_grid_smaller_than_the_work(monkeypatch):
    """Grid-stride loops: a grid capped at 3 blocks still covers every element and row; one
    multiprocessor makes a thread take ``LOOP_VECTORS`` vectors an iteration."""
    monkeypatch.setattr(K, "MAX_GRID", 3)
    monkeypatch.setenv("HLO_CUDA_SMS", "1")
    for shape in [(40, 1000), (7, 999)]:
        x = rng.standard_normal(shape).astype(np.float32)
        prog = compile_src(CHAIN.format(et="f32", shape=",".join(map(str, shape))))
        assert _launch(prog)[0] == 3
        assert _rel_err(prog(x)[0], chain_ref(x)) < 1e-6
    x = rng.standard_normal((50, 1024)).astype(np.float32)
    prog = compile_src(row_src(ROW_SOFTMAX, "f32", 50, 1024))
    assert _launch(prog)[0] == 3
    assert _rel_err(prog(x)[0], softmax_ref(x)) < 1e-5

