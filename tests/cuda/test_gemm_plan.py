"""The cuBLASLt planner (backends/cuda/gemm.py) without a GPU: each planned params dict runs
through a numpy model of cuBLASLt's column-major semantics (cuda_gemm_model.py) on the operands'
physical buffers, and the result read back through the result's layout must equal the
dot_general computed by numpy in float64."""
import numpy as np
import pytest
from cuda_gemm_model import gelu_tanh, lt_matmul

from hlo.backends.cuda.gemm import Declined, GemmPlan, plan_dot, strides_of
from hlo.ir.types import BY_NAME, TensorType
from hlo.runtime.steps import BufRef, steps_from_json, steps_to_json


def T(shape, dtype="f32", layout=None):
    return TensorType(tuple(shape), BY_NAME[dtype], None if layout is None else tuple(layout))


def dims(lb=(), rb=(), lc=(), rc=()):
    return {"lhs_batching_dimensions": lb, "rhs_batching_dimensions": rb,
            "lhs_contracting_dimensions": lc, "rhs_contracting_dimensions": rc}


def result_type(lhs, rhs, d, dtype=None, layout=None):
    lb, rb = d["lhs_batching_dimensions"], d["rhs_batching_dimensions"]
    lc, rc = d["lhs_contracting_dimensions"], d["rhs_contracting_dimensions"]
    shape = [lhs.shape[i] for i in lb] + [s for i, s in enumerate(lhs.shape) if i not in lb + lc] \
        + [s for i, s in enumerate(rhs.shape) if i not in rb + rc]
    return T(shape, dtype or lhs.dtype.name, layout)


def reference(x, y, d):
    """dot_general in float64."""
    lb, rb = list(d["lhs_batching_dimensions"]), list(d["rhs_batching_dimensions"])
    lc, rc = list(d["lhs_contracting_dimensions"]), list(d["rhs_contracting_dimensions"])
    lf = [i for i in range(x.ndim) if i not in lb + lc]
    rf = [i for i in range(y.ndim) if i not in rb + rc]
    xs = x.astype(np.float64).transpose(lb + lf + lc)
    ys = y.astype(np.float64).transpose(rb + rc + rf)
    bsh = [x.shape[i] for i in lb]
    M = int(np.prod([x.shape[i] for i in lf], dtype=np.int64))
    N = int(np.prod([y.shape[i] for i in rf], dtype=np.int64))
    K = int(np.prod([x.shape[i] for i in lc], dtype=np.int64))
    B = int(np.prod(bsh, dtype=np.int64))
    out = xs.reshape(B, M, K) @ ys.reshape(B, K, N)
    return out.reshape(bsh + [x.shape[i] for i in lf] + [y.shape[i] for i in rf])


def physical(x, t):
    """The flat buffer of array ``x`` stored in ``t``'s layout."""
    perm = tuple(reversed(t.minor_to_major))
    return np.ascontiguousarray(x.transpose(perm)).ravel()


def logical(buf, t):
    perm = tuple(reversed(t.minor_to_major))
    return buf.reshape([t.shape[p] for p in perm]).transpose(np.argsort(perm))


def run_model(plan, lhs_t, rhs_t, out_t, x, y, c=None, c_t=None, bias=None):
    p = plan.params
    a, b = (y, x) if p.swapped else (x, y)
    at, bt = (rhs_t, lhs_t) if p.swapped else (lhs_t, rhs_t)
    bufs = {"a": physical(a, at).astype(np.float64), "b": physical(b, bt).astype(np.float64)}
    if c is not None:
        bufs["c"] = physical(c, c_t).astype(np.float64)
    if bias is not None:
        bufs["bias"] = bias.astype(np.float64)
    d = np.full(out_t.size, np.nan)
    lt_matmul(p.to_json(), bufs, d)  # the params as the step carries them
    assert not np.isnan(d).any(), "the params leave result elements unwritten"
    return logical(d, out_t)


def rand(t, rng):
    return rng.standard_normal(t.shape).astype(t.dtype.np_dtype)


CASES = [
    # (lhs shape, lhs layout, rhs shape, rhs layout, dims, out layout)
    ((5, 7), None, (7, 3), None, dims(lc=(1,), rc=(0,)), None),
    ((5, 7), (0, 1), (7, 3), None, dims(lc=(1,), rc=(0,)), None),
    ((5, 7), None, (7, 3), (0, 1), dims(lc=(1,), rc=(0,)), None),
    ((5, 7), (0, 1), (7, 3), (0, 1), dims(lc=(1,), rc=(0,)), (0, 1)),
    ((7, 5), None, (7, 3), None, dims(lc=(0,), rc=(0,)), None),          # lhs^T @ rhs
    ((5, 7), None, (3, 7), None, dims(lc=(1,), rc=(1,)), None),          # x @ W^T
    ((5, 7), None, (3, 7), None, dims(lc=(1,), rc=(1,)), (0, 1)),        # column-major result
    ((4, 5, 7), None, (4, 7, 3), None, dims((0,), (0,), (2,), (1,)), None),   # batched
    ((4, 5, 7), None, (4, 3, 7), None, dims((0,), (0,), (2,), (2,)), None),   # batched, rhs^T
    ((5, 4, 7), None, (4, 7, 3), None, dims((1,), (0,), (2,), (1,)), None),   # batch not leading
    ((2, 3, 5, 7), None, (2, 3, 7, 4), None, dims((0, 1), (0, 1), (3,), (2,)), None),  # 2 batch dims
    ((2, 3, 5, 7), (2, 3, 1, 0), (2, 3, 7, 4), None, dims((0, 1), (0, 1), (3,), (2,)), None),
    ((4, 5, 7), None, (4, 7, 3), None, dims((0,), (0,), (2,), (1,)), (1, 2, 0)),  # result layout
    ((6, 5, 7), None, (7, 3), None, dims(lc=(2,), rc=(0,)), None),       # two lhs free dims
    ((5, 3, 4), None, (3, 4, 6), None, dims(lc=(1, 2), rc=(0, 1)), None),  # two contracting dims
    ((5, 4, 3), None, (4, 3, 6), None, dims(lc=(2, 1), rc=(1, 0)), None),  # ... listed inner first
    ((5, 7), None, (7,), None, dims(lc=(1,), rc=(0,)), None),            # matrix-vector
    ((7,), None, (7, 3), None, dims(lc=(0,), rc=(0,)), None),            # vector-matrix
    ((7,), None, (7,), None, dims(lc=(0,), rc=(0,)), None),              # dot of vectors
    ((5, 1), None, (1, 3), None, dims(lc=(1,), rc=(0,)), None),          # outer product (k = 1)
    ((3, 1, 7), None, (3, 7, 1), None, dims((0,), (0,), (2,), (1,)), None),  # m = n = 1
    ((5, 7), None, (7, 3), None, dims(), None),                          # no contraction
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_plans_match_dot_general(case, dtype):
    ls, ll, rs, rl, d, ol = CASES[case]
    lhs, rhs = T(ls, dtype, ll), T(rs, dtype, rl)
    out = result_type(lhs, rhs, d, layout=ol)
    plan = plan_dot(lhs, rhs, out, d)
    assert isinstance(plan, GemmPlan), plan
    rng = np.random.default_rng(case)
    x, y = rand(lhs, rng), rand(rhs, rng)
    got = run_model(plan, lhs, rhs, out, x, y)
    np.testing.assert_allclose(got, reference(x, y, d), rtol=1e-12, atol=1e-12)


def test_row_major_result_is_computed_transposed():
    lhs, rhs = T((5, 7)), T((7, 3))
    p = plan_dot(lhs, rhs, T((5, 3)), dims(lc=(1,), rc=(0,))).params
    # D^T (3x5, column-major = the row-major 5x3) = rhs^T lhs^T, both read as stored.
    assert (p.swapped, p.m, p.n, p.k, p.trans_a, p.trans_b) == (True, 3, 5, 7, False, False)
    assert p.a.ld == 3 and p.b.ld == 7 and p.d.ld == 3
    p = plan_dot(T((5, 7)), T((3, 7)), T((5, 3)), dims(lc=(1,), rc=(1,))).params
    assert p.swapped and p.trans_a and not p.trans_b  # x @ W^T: W read transposed


def test_batched_strides():
    p = plan_dot(T((4, 5, 7)), T((4, 7, 3)), T((4, 5, 3)), dims((0,), (0,), (2,), (1,))).params
    assert p.batch == 4
    assert (p.a.batch_stride, p.b.batch_stride, p.d.batch_stride) == (21, 35, 15)


def test_precision_and_types():
    d = dims(lc=(1,), rc=(0,))
    assert plan_dot(T((4, 4)), T((4, 4)), T((4, 4)), d).params.compute == "32F"
    assert plan_dot(T((4, 4)), T((4, 4)), T((4, 4)), d, precision="tf32").params.compute == "32F_FAST_TF32"
    p = plan_dot(T((4, 4), "bf16"), T((4, 4), "bf16"), T((4, 4), "f32"), d).params
    assert (p.compute, p.scale, p.a.dtype, p.d.dtype) == ("32F", "f32", "bf16", "f32")
    p = plan_dot(T((4, 4), "f64"), T((4, 4), "f64"), T((4, 4), "f64"), d).params
    assert (p.compute, p.scale) == ("64F", "f64")
    with pytest.raises(ValueError, match="precision"):
        plan_dot(T((4, 4)), T((4, 4)), T((4, 4)), d, precision="fast")


@pytest.mark.parametrize("lhs,rhs,out,d,why", [
    (T((4, 4), "s32"), T((4, 4), "s32"), T((4, 4), "s32"), dims(lc=(1,), rc=(0,)), "s32"),
    (T((4, 4), "f16"), T((4, 4), "f16"), T((4, 4), "bf16"), dims(lc=(1,), rc=(0,)), "result"),
    (T((3, 5, 4)), T((3, 4, 6)), T((5, 6)), dims(lc=(0, 2), rc=(0, 1)), "contracting"),
    (T((4, 5, 7)), T((4, 7, 3)), T((4, 5, 3), layout=(0, 1, 2)), dims((0,), (0,), (2,), (1,)), "unit-stride"),
    (T((4, 5, 7), layout=(0, 2, 1)), T((4, 7, 3)), T((4, 5, 3)), dims((0,), (0,), (2,), (1,)), "unit-stride"),
    (T((0, 4)), T((4, 3)), T((0, 3)), dims(lc=(1,), rc=(0,)), "empty"),
    (T((2, 3, 5, 7), layout=(3, 2, 0, 1)), T((2, 3, 7, 4)), T((2, 3, 5, 4)),
     dims((0, 1), (0, 1), (3,), (2,)), "batch"),  # the two batch dims in opposite orders
])
def test_declines_with_reason(lhs, rhs, out, d, why):
    plan = plan_dot(lhs, rhs, out, d)
    assert isinstance(plan, Declined) and not plan
    assert why in plan.reason


@pytest.mark.parametrize("epi", ["BIAS", "RELU_BIAS", "GELU_BIAS", "RELU", "GELU"])
@pytest.mark.parametrize("out_layout", [None, (0, 1)])
def test_epilogues(epi, out_layout):
    lhs, rhs = T((6, 8)), T((8, 5))
    out = T((6, 5), layout=out_layout)
    d = dims(lc=(1,), rc=(0,))
    rng = np.random.default_rng(1)
    x, y = rand(lhs, rng), rand(rhs, rng)
    ref = reference(x, y, d)
    bias = bias_dim = None
    if "BIAS" in epi:
        bias_dim = 1 if out_layout is None else 0  # along cuBLASLt's rows: the unit-stride dim
        bias = rng.standard_normal(out.shape[bias_dim]).astype(np.float32)
        ref = ref + (bias[None, :] if bias_dim == 1 else bias[:, None])
    plan = plan_dot(lhs, rhs, out, d, epilogue=epi, bias=None if bias is None else T(bias.shape),
                    bias_dim=bias_dim)
    assert plan, plan
    ref = np.maximum(ref, 0) if "RELU" in epi else gelu_tanh(ref) if "GELU" in epi else ref
    got = run_model(plan, lhs, rhs, out, x, y, bias=bias)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_bias_along_the_wrong_dimension_is_declined():
    plan = plan_dot(T((6, 8)), T((8, 5)), T((6, 5)), dims(lc=(1,), rc=(0,)), epilogue="BIAS",
                    bias=T((6,)), bias_dim=0)
    assert not plan and "bias" in plan.reason


def test_c_operand_and_library_call():
    lhs, rhs, out = T((4, 6, 8)), T((4, 8, 5)), T((4, 6, 5))
    d = dims((0,), (0,), (2,), (1,))
    rng = np.random.default_rng(2)
    x, y, c = rand(lhs, rng), rand(rhs, rng), rand(out, rng)
    plan = plan_dot(lhs, rhs, out, d, c=out, alpha=0.5, beta=2.0)
    got = run_model(plan, lhs, rhs, out, x, y, c=c, c_t=out)
    np.testing.assert_allclose(got, 0.5 * reference(x, y, d) + 2.0 * c, rtol=1e-12, atol=1e-12)
    L, R, C, D = (BufRef("input", 0, 0, x.nbytes), BufRef("input", 1, 0, y.nbytes),
                  BufRef("arena", 0, 64, c.nbytes), BufRef("output", 0, 0, c.nbytes))
    step = plan.library_call(L, R, D, c=C, what="fusion.3")
    assert step.refs == [R, L, C, D] and step.writes == [False, False, False, True]  # swapped: A is rhs
    assert step.params["inputs"] == ["a", "b", "c"]
    assert steps_from_json(steps_to_json([step]))[0] == step
    with pytest.raises(ValueError):
        plan.library_call(L, R, D)  # the plan has a C operand


def test_strides_of_layouts():
    assert strides_of(T((2, 3, 4))) == (12, 4, 1)
    assert strides_of(T((2, 3, 4), layout=(0, 1, 2))) == (1, 2, 6)
    assert strides_of(T((2, 3, 4), layout=(1, 2, 0))) == (12, 1, 3)
