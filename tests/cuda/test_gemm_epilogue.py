"""Output fusions on target cuda: which part of a dot's epilogue cuBLASLt computes
(backends/cuda/epilogue.py + gemm.py), read from the steps' text -- bias, ReLU, tanh-GELU,
alpha and a C matrix with beta, over batch dimensions and transposed operands, in f32, f16 and
bf16 -- and every refusal with its reason. Without a GPU, the compile and the steps; with one
(marker ``gpu``), the results against numpy in float64."""
from __future__ import annotations

import math
import re
import zlib

import ml_dtypes
import numpy as np
import pytest
from cuda_helpers import HAVE_GPU

import hlo
import hlo.numpy as hnp

NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
TOL = {"f32": 2e-5, "f16": 4e-3, "bf16": 3e-2}  # relative error (norm) against float64


def gelu_tanh(x, xp=np):
    return 0.5 * x * (1 + xp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def relu(x, xp=np):
    return xp.maximum(x, 0)


def erf_gelu(x, xp=np):
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


# (name, function of (xp, operands...), operand shapes, what the cublaslt step's text must contain
#  (a string, or a regular expression), loop kernels the program has)
CASES = [
    ("bias", lambda xp, x, w, b: x @ w + b, [(64, 96), (96, 128), (128,)], "epilogue BIAS)", 0),
    ("relu", lambda xp, x, w: xp.maximum(x @ w, 0), [(64, 96), (96, 128)], "epilogue RELU)", 0),
    ("relu_bias", lambda xp, x, w, b: xp.maximum(x @ w + b, 0.0), [(64, 96), (96, 128), (128,)],
     "epilogue RELU_BIAS)", 0),
    ("gelu", lambda xp, x, w: gelu_tanh(x @ w, xp), [(64, 96), (96, 128)], "epilogue GELU)", 0),
    ("gelu_bias", lambda xp, x, w, b: gelu_tanh(x @ w + b, xp), [(64, 96), (96, 128), (128,)],
     "epilogue GELU_BIAS)", 0),
    # the residual through C (beta 1), and alpha: an SGD update w - lr * x^T g
    ("residual_bias", lambda xp, x, w, b, r: r + (x @ w + b), [(64, 96), (96, 128), (128,), (64, 128)],
     "epilogue BIAS, C beta 1)", 0),
    ("sgd_update", lambda xp, x, g, w: w - 0.1 * (x.T @ g), [(128, 96), (128, 48), (96, 48)],
     re.compile(r"epilogue DEFAULT, alpha -0\.(1|099|100)\d*, C beta 1\)"), 0),  # 0.1 rounded to the type
    ("scaled_residual", lambda xp, x, w, r: 2.0 * (x @ w) - 0.5 * r, [(32, 64), (64, 16), (32, 16)],
     "epilogue DEFAULT, alpha 2, C beta -0.5)", 0),
    # batch dimensions, a transposed operand
    ("batched_bias_gelu", lambda xp, x, w, b: gelu_tanh(xp.matmul(x, w) + b, xp),
     [(4, 32, 48), (4, 48, 40), (40,)], "epilogue GELU_BIAS)", 0),
    ("transposed_relu_bias", lambda xp, x, w, b: xp.maximum(x @ w.T + b, 0), [(64, 96), (128, 96), (128,)],
     "epilogue RELU_BIAS)", 0),
    # part of the epilogue: the residual after the activation stays a loop kernel
    ("gelu_then_residual", lambda xp, x, w, b: gelu_tanh(x @ w + b, xp) + x, [(64, 128), (128, 128), (128,)],
     "epilogue GELU_BIAS; the rest is a loop kernel: a term is added to an activation's result", 1),
    # a bias vector computed in the fusion (scaled, or the concatenated biases of products the
    # dot-merger pass merged): one small kernel computes it into scratch before the product
    ("scaled_bias", lambda xp, x, w, b: x @ w + 2.0 * b, [(16, 32), (32, 24), (24,)], "epilogue BIAS)", 1),
    ("concatenated_bias", lambda xp, x, w, b: x @ w + xp.concatenate([b[:12] * 3.0, b[12:]]),
     [(16, 32), (32, 24), (24,)], "epilogue BIAS)", 1),
    ("erf_gelu", lambda xp, x, w, b: erf_gelu(x @ w + b, xp) if xp is np else hlo.nn.gelu(x @ w + b, approximate=False),
     [(64, 96), (96, 128), (128,)], "epilogue BIAS; the rest is a loop kernel", 1),
]


def _program(case, dt):
    name, fn, shapes, _, _ = case
    rng = np.random.default_rng(zlib.crc32(name.encode()) % 1000)
    args = [(rng.standard_normal(s) * (0.5 if len(s) > 1 else 1.0)).astype(NP[dt]) for s in shapes]
    jf = hlo.jit(lambda *a: fn(hnp, *a), target="cuda")
    return jf, args


def _steps(jf, args):
    exe = jf.lower(*args).compile()._artifact.executable
    return exe, exe.steps_text


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_epilogue_fused(case, dt):
    name, fn, shapes, want, loops = case
    jf, args = _program(case, dt)
    exe, text = _steps(jf, args)
    calls = [l for l in text.splitlines() if l.startswith("cublaslt.matmul")]
    assert len(calls) == 1, text
    assert (want.search(calls[0]) if isinstance(want, re.Pattern) else want in calls[0]), text
    assert len(exe.kernels) == loops, text
    if not HAVE_GPU:
        return
    got = np.asarray(jf(*args)).astype(np.float64)
    ref = fn(np, *[a.astype(np.float64) for a in args])
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < TOL[dt], (name, dt, err)


def _one_call(fn, shapes, dt="f32"):
    jf, args = _program(("refusal", fn, shapes, "", 0), dt)
    exe, text = _steps(jf, args)
    calls = [l for l in text.splitlines() if l.startswith("cublaslt.matmul")]
    assert len(calls) == 1, text
    if HAVE_GPU:
        got = np.asarray(jf(*args)).astype(np.float64)
        ref = fn(np, *[a.astype(np.float64) for a in args])
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < TOL[dt]
    return calls[0], exe


@pytest.mark.parametrize("fn,shapes,reason", [
    # a term computed in the fusion that is not a vector
    (lambda xp, x, w, b: x @ w + 2.0 * b[None, :], [(16, 32), (32, 24), (24,)], "computed in the fusion"),
    # C is a buffer of the result's type, not an expression
    (lambda xp, x, w, r: x @ w + r * r, [(16, 32), (32, 24), (16, 24)],
     "is not the product, a bias vector or a matrix"),
    # a bias along the rows of the row-major result is not cuBLASLt's (it runs along the columns)
    (lambda xp, x, w, b: x @ w + b[:, None], [(16, 32), (32, 24), (16,)], "epilogue not fused: the bias runs along"),
])
def test_epilogue_refusals_say_why(fn, shapes, reason):
    call, _ = _one_call(fn, shapes)
    assert reason in call, call


def test_an_intermediate_read_twice_keeps_the_product_plain():
    # x @ w + b is an output and feeds the relu: cuBLASLt writes x @ w + b, the relu is a kernel
    def fn(xp, x, w, b):
        h = x @ w + b
        return xp.maximum(h, 0) * h
    call, exe = _one_call(fn, [(16, 32), (32, 24), (24,)])
    assert "epilogue BIAS;" in call and len(exe.kernels) == 1, call


def test_batched_products_with_unmergeable_batch_strides_are_relaid_out():
    # attention's probabilities @ values, written in the layout that makes the heads' merge free:
    # cuBLASLt cannot write it, so the product goes through a row-major scratch and one copy
    def fn(xp, p, v):
        B, H, S, D = 2, 4, 16, 8
        vh = xp.transpose(xp.reshape(v, (B, S, H, D)), (0, 2, 1, 3))
        o = xp.matmul(p, vh)
        return xp.reshape(xp.transpose(o, (0, 2, 1, 3)), (B, S, H * D))
    call, exe = _one_call(fn, [(2, 4, 16, 16), (2, 16, 32)])
    assert "relaid out to row-major" in call, call
    assert not exe.manifest["generated_dots"]


def test_tf32_precision_is_the_compute_type():
    from hlo.backends.cuda.gemm import plan_dot
    from hlo.ir.types import BY_NAME, TensorType
    t = lambda s: TensorType(s, BY_NAME["f32"])
    d = {"lhs_contracting_dimensions": (1,), "rhs_contracting_dimensions": (0,)}
    assert plan_dot(t((8, 4)), t((4, 2)), t((8, 2)), d).params.compute == "32F"
    assert plan_dot(t((8, 4)), t((4, 2)), t((8, 2)), d, precision="tf32").params.compute == "32F_FAST_TF32"


@pytest.mark.gpu
def test_the_fastest_candidate_is_timed_once_and_kept(monkeypatch):
    from hlo.runtime.cuda import cublaslt_tune
    monkeypatch.setattr(cublaslt_tune, "ENABLED", True)  # what HLO_CUBLASLT_AUTOTUNE=1 sets
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((384, 320), (320, 448), (448,)))
    f = hlo.jit(lambda x, w, b: hnp.maximum(x @ w + b, 0), target="cuda")
    before = len(cublaslt_tune._chosen)
    got = np.asarray(f(x, w, b)).astype(np.float64)
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < TOL["f32"]
    assert len(cublaslt_tune._chosen) > before, cublaslt_tune.log[-3:]
    assert "timing failed" not in cublaslt_tune.log[-1], cublaslt_tune.log[-1]
    n = len(cublaslt_tune._chosen)
    g = hlo.jit(lambda x, w, b: hnp.maximum(x @ w + b, 0.0) + 0.0, target="cuda")
    np.asarray(g(x, w, b))
    assert len(cublaslt_tune._chosen) == n  # the same product: its choice is remembered
