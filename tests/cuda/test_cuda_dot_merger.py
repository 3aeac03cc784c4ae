"""The dot-merger pass on target cuda: the transformer layer's Q, K and V projections (three
1024x512 @ 512x512 products + bias) become one cuBLASLt product of 512x1536 with its BIAS
epilogue, read from the steps' text of a compile that needs no GPU; with one (marker ``gpu``),
the layer at the bench's GPU sizes against float64 numpy, the pass on and off."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import gpu

import hlo
import hlo.numpy as hnp
from hlo.backends.cuda import compile as cuda_compile
from hlo.passes.pipeline import optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.workloads import WORKLOADS, Case, Ops, flatten, reference

TOL = {"f32": 1e-4, "bf16": 5e-2}  # bench/cuda_check.py's relative errors against float64
LAYER = next(w for w in WORKLOADS if w.id == "transformer_layer")
# the source lines of the Q, K and V projections in bench/workloads.py
QKV_LINES = [f"workloads.py:{LAYER.fn.__code__.co_firstlineno + n}" for n in (9, 10, 11)]


def _program(dtype, mode="gpu", **options):
    case = Case(LAYER, mode, dtype)
    inputs = case.inputs()

    def fn(*a):
        return LAYER.fn(Ops(hnp), *a)
    ir = hlo.jit(fn).lower(*inputs).ir
    return case, inputs, cuda_compile(optimize(ir, "cuda", options=options or None))


def _launches(prog):
    return sum("<<<" in ln for ln in prog.steps_text.splitlines())


def _matmuls(prog):
    return [ln for ln in prog.steps_text.splitlines() if ln.startswith("cublaslt.matmul")]


@pytest.fixture(scope="module", params=["f32", "bf16"])
def layer(request):
    return request.param, _program(request.param), _program(request.param, dot_merger=False)


def test_qkv_is_one_product_with_a_bias_epilogue(layer):
    dtype, (_, _, on), (_, _, off) = layer
    before = [ln for ln in _matmuls(off) if any(q in ln for q in QKV_LINES)]
    after = [ln for ln in _matmuls(on) if any(q in ln for q in QKV_LINES)]
    assert len(before) == 3 and all("(epilogue BIAS)" in ln for ln in before), off.steps_text
    assert len(after) == 1 and after[0].endswith("(epilogue BIAS)"), on.steps_text
    assert len(_matmuls(on)) == len(_matmuls(off)) - 2
    # the concatenated weights (one copy kernel) and biases (computed into scratch for cuBLASLt)
    assert f"dot_general at {QKV_LINES[0]}: operand" in on.steps_text
    assert f"dot_general at {QKV_LINES[0]}: bias vector" in on.steps_text
    # the attention products read q, k and v through their slices (the same operand copies
    # as before, from the strided product): those two kernel launches are all that is added
    assert _launches(on) == _launches(off) + 2, (on.steps_text, off.steps_text)


@gpu
def test_transformer_layer_on_gpu_matches_float64(layer):
    dtype, (case, inputs, on), (_, _, off) = layer
    ref = reference(case, inputs)
    for prog in (on, off):
        for g, r in zip(flatten(prog(*inputs)), ref):
            g = np.asarray(g).astype(np.float64)
            err = np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)
            assert err < TOL[dtype], f"{case.name} ({'merged' if prog is on else 'separate'}): {err:.2e}"
