"""The tracer and the IR it records: source locations on every op, constants from closures,
the region-tracing API that control flow builds on, and text round trips."""
import inspect

import numpy as np
import pytest

import hlo
import hlo.lax as hlax
import hlo.numpy as hnp
from hlo.tracing.abstract import ShapedArray
from hlo.tracing.tracer import current_trace, emit, emit1, lift, trace_region

X = np.ones((2, 3), np.float32)


def _all_ops(module):
    return list(module.walk())


def test_every_op_carries_the_users_line():
    def f(x):
        a = x * 2.0                                   # line +1
        b = hnp.sum(a, axis=0)                        # line +2 (a reduce with a body)
        c = hnp.sort(b)                               # line +3 (a comparator region)
        return hlo.nn.softmax(c), x.at[0, 1].set(5)   # line +4
    m = hlo.make_ir(f)(X)
    start = inspect.getsourcelines(f)[1]
    lines = {op.loc.line for op in _all_ops(m)}
    assert all(op.loc is not None and op.loc.file == "test_tracing_ir.py" for op in _all_ops(m))
    assert lines == {start + 1, start + 2, start + 3, start + 4}
    reduce_op = next(op for op in m.main.ops if op.name == "reduce")
    assert all(op.loc.line == start + 2 for op in reduce_op.regions[0].ops)
    assert m.main.loc.line == start and "loc(\"test_tracing_ir.py\"" in str(m)
    hlo.ir.verify_module(m)


def test_closure_constants_become_constant_ops():
    small = np.arange(4, dtype=np.float32)
    big = np.random.default_rng(0).standard_normal((20, 20)).astype(np.float32)

    def f(x):
        return x[0, :1] * small + small.sum() + hnp.sum(big) + big[0, 0] * 0

    m = hlo.make_ir(f)(X)
    consts = [op for op in m.main.ops if op.name == "constant"]
    values = [op.attrs["value"] for op in consts]
    assert any(v.shape == (4,) and np.array_equal(v, small) for v in values)
    assert sum(1 for v in values if v.shape == (20, 20)) == 1  # the same array is one constant
    assert 'dense<"0x' in str(m)  # large constants print as raw bytes
    text = hlo.ir.print_module(m)
    assert hlo.ir.print_module(hlo.ir.parse_module(text)) == text
    out = hlo.jit(f, target="interpreter")(X)
    np.testing.assert_allclose(out, small + small.sum() + big.sum(), rtol=1e-5)


def test_traced_modules_round_trip_through_text():
    def f(x, w):
        h = hlo.nn.layer_norm(x @ w)
        return hnp.argsort(h, axis=-1), hnp.cumsum(h, axis=0), h.at[:, hnp.array([0, 2])].add(1.0)
    m = hlo.make_ir(f)(np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))
    text = hlo.ir.print_module(m)
    assert hlo.ir.print_module(hlo.ir.parse_module(text)) == text


def test_tracer_attributes():
    seen = {}

    def f(x, s):
        seen.update(shape=x.shape, dtype=x.dtype, ndim=x.ndim, size=x.size, weak=s.weak_type,
                    repr=repr(x), srepr=repr(s), T=x.T.shape, nbytes=x.nbytes, trace=current_trace())
        return x.real + x.imag
    hlo.make_ir(f)(X, 1.0)
    assert seen["shape"] == (2, 3) and seen["dtype"] == np.float32 and seen["ndim"] == 2 and seen["size"] == 6
    assert seen["weak"] is True and seen["repr"] == "Traced<f32[2,3]>" and seen["srepr"] == "Traced<f32[]{weak}>"
    assert seen["T"] == (3, 2) and seen["nbytes"] == 24 and seen["trace"] is not None
    assert current_trace() is None


def test_region_tracing_api_for_library_code(target):
    """What control flow and other library code do: trace callables into regions and emit an
    op that carries them (here a two-result reduce and a 'scatter' update region)."""
    def argmax_and_max(x):
        def body(acc, cur):
            (av, ai), (bv, bi) = acc, cur
            pick = av >= bv
            return hlax.select(pick, av, bv), hlax.select(pick, ai, bi)

        scalar_types = [ShapedArray((), x.dtype), ShapedArray((), np.int32)]
        region = trace_region(lambda a, b, c, d: body((a, b), (c, d)), scalar_types * 2, name="body")
        assert region.out_tree.num_leaves == 2 and [str(a) for a in region.out_avals] == ["f32[]", "s32[]"]
        assert region.captured == []
        idx = hlax.broadcasted_iota(np.int32, x.shape, 1)
        vmax, imax = emit("reduce", [x, idx, lift(np.float32(-np.inf)), lift(np.int32(0))],
                          {"dimensions": [1]}, regions=[region.region])
        return vmax, imax

    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], np.float32)
    vmax, imax = hlo.jit(argmax_and_max, target=target)(x)
    np.testing.assert_array_equal(vmax, [5.0, 7.0])
    np.testing.assert_array_equal(imax, [1, 0])


def test_regions_may_read_enclosing_values_and_report_them():
    def f(x):
        scale = x[0, 0]
        tr = trace_region(lambda a: a * scale + 1.0, [ShapedArray((), np.float32)], name="body")
        assert len(tr.captured) == 1 and tr.captured[0] is scale
        assert tr.region.ops[0].operands[1] is scale._value or any(
            v is scale._value for op in tr.region.ops for v in op.operands)
        return x
    hlo.make_ir(f)(X)


def test_trace_region_with_pytree_arguments():
    def f(x):
        tree = hlo.tree_util.tree_structure(((0, 0), {"k": 0}))
        tr = trace_region(lambda pair, d: {"sum": pair[0] + pair[1] * d["k"]},
                          [ShapedArray((), np.float32)] * 3, in_tree=tree)
        assert tr.out_tree == hlo.tree_util.tree_structure({"sum": 0})
        assert len(tr.region.args) == 3 and len(tr.region.outputs) == 1
        return x
    hlo.make_ir(f)(X)


def test_emit_validates_ops_and_reports_the_users_line():
    def f(x):
        return emit1("add", [x, lift(np.ones(3, np.float32))])  # MARK
    with pytest.raises(hlo.errors.ShapeError, match="operands must have the same type") as e:
        hlo.make_ir(f)(X)
    assert str(e.value).startswith(f"{__file__}:")


def test_outputs_may_repeat_or_pass_arguments_through(target):
    f = hlo.jit(lambda x, y: (x, x, y * 1, 3.0, None), target=target)
    out = hlo.device_get(f(X, X + 1))
    assert out[4] is None
    np.testing.assert_array_equal(out[0], X)
    np.testing.assert_array_equal(out[1], X)
    assert out[3] == 3.0 and out[3].dtype == np.float32
