"""hlo.autodiff: grad / value_and_grad / vjp / jvp, checked against jax and finite differences.

Each VJP rule is exercised on an op built directly (``emit1``) so that the test does not depend
on how hlo.numpy lowers things: its VJP with a random cotangent is compared with jax.vjp of the
same jax.lax op (float32), and with central finite differences of the interpreter's forward
pass in float64 (<J^T ct, v> against <ct, (f(x + hv) - f(x - hv)) / 2h>).
"""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional

import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
import pytest

import hlo
from hlo.autodiff import prims as P
from hlo.tracing.tracer import emit, emit1, trace_region

f32, f64, i32 = np.float32, np.float64, np.int32


def interp(fn):
    return hlo.jit(fn, target="interpreter")


def hlo_vjp(fn, xs, ct):
    """fn's output and the cotangents of all its inputs, on the interpreter."""
    def run(xs, ct):
        out, back = hlo.vjp(fn, *xs)
        return out, back(ct)
    return interp(run)(tuple(xs), ct)


# --------------------------------------------------------------------------------------------
# One case per rule (and per interesting form of a rule)
# --------------------------------------------------------------------------------------------

class Case(NamedTuple):
    id: str
    fn: Callable            # hlo: Tracers -> Tracer (ops emitted directly)
    jfn: Optional[Callable]  # the same computation in jax.lax, or None (finite differences only)
    inputs: Callable        # rng -> list of numpy arrays (float32 / int32 / bool)
    fd: bool = True         # check with finite differences in float64


def _u(*names):
    return lambda x: emit1(names[0], [x])


def _normal(*shape):
    return lambda rng: [rng.standard_normal(shape).astype(f32)]


def _positive(*shape):
    return lambda rng: [rng.uniform(0.5, 2.0, shape).astype(f32)]


def _ties(*shape):
    """Values on a coarse grid, so that max/min see equal elements."""
    return lambda rng: [np.round(rng.standard_normal(shape) * 2).astype(f32) / 2]


def _two(gen_a, gen_b):
    return lambda rng: gen_a(rng) + gen_b(rng)


UNARY = [
    ("negate", lax.neg, _normal(3, 4)), ("abs", lax.abs, _normal(3, 4)),
    ("exponential", lax.exp, _normal(3, 4)), ("exponential_minus_one", lax.expm1, _normal(3, 4)),
    ("log", lax.log, _positive(3, 4)), ("log_plus_one", lax.log1p, _positive(3, 4)),
    ("logistic", lax.logistic, _normal(3, 4)), ("tanh", lax.tanh, _normal(3, 4)),
    ("sqrt", lax.sqrt, _positive(3, 4)), ("rsqrt", lax.rsqrt, _positive(3, 4)),
    ("cbrt", lax.cbrt, _positive(3, 4)), ("sine", lax.sin, _normal(3, 4)),
    ("cosine", lax.cos, _normal(3, 4)), ("tan", lax.tan, lambda r: [r.uniform(-1, 1, (3, 4)).astype(f32)]),
    ("floor", lax.floor, _normal(3, 4)), ("ceil", lax.ceil, _normal(3, 4)),
    ("round_nearest_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), _normal(3, 4)),
    ("round_nearest_afz", lax.round, _normal(3, 4)), ("sign", lax.sign, _normal(3, 4)),
]

BINARY = [
    ("add", lax.add, _two(_normal(3, 4), _normal(3, 4))),
    ("subtract", lax.sub, _two(_normal(3, 4), _normal(3, 4))),
    ("multiply", lax.mul, _two(_normal(3, 4), _normal(3, 4))),
    ("divide", lax.div, _two(_normal(3, 4), _positive(3, 4))),
    ("remainder", lax.rem, _two(lambda r: [r.uniform(-5, 5, (3, 4)).astype(f32)], _positive(3, 4))),
    ("power", lax.pow, _two(_positive(3, 4), _normal(3, 4))),
    ("atan2", lax.atan2, _two(_normal(3, 4), _normal(3, 4))),
    ("maximum", lax.max, _two(_normal(3, 4), _normal(3, 4))),
    ("minimum", lax.min, _two(_normal(3, 4), _normal(3, 4))),
]


def _reduce(kind, dims):
    def fn(x):
        init = {"add": 0, "maximum": -np.inf, "minimum": np.inf}[kind]
        return P.reduce(x, P.const(init, x.dtype), dims, kind)
    return fn


def _dot(lb, rb, lc, rc):
    def fn(x, y):
        return P.dot_general(x, y, lb, rb, lc, rc)

    def jfn(x, y):
        return lax.dot_general(x, y, ((lc, rc), (lb, rb)))
    return fn, jfn


def _ints(*values):
    return lambda rng: [np.asarray(v, dtype=i32) for v in values]


def _gather_case(x_shape, idx, **a):
    def fn(x, i):
        return P.gather(x, i, **a)

    def jfn(x, i):
        dn = lax.GatherDimensionNumbers(
            offset_dims=tuple(a.get("offset_dims", ())),
            collapsed_slice_dims=tuple(a.get("collapsed_slice_dims", ())),
            start_index_map=tuple(a["start_index_map"]),
            operand_batching_dims=tuple(a.get("operand_batching_dims", ())),
            start_indices_batching_dims=tuple(a.get("start_indices_batching_dims", ())))
        if a["index_vector_dim"] == i.ndim:  # jax's index vectors are always the last dimension
            i = i[..., None]
        return lax.gather(x, i, dn, tuple(a["slice_sizes"]), mode=lax.GatherScatterMode.CLIP)
    return fn, jfn, _two(_normal(*x_shape), _ints(idx))


def _scatter_case(x_shape, idx, u_shape, body, jax_ok=True, **a):
    def fn(x, i, u):
        return P.scatter(x, i, u, body, **a)

    def jfn(x, i, u):
        dn = lax.ScatterDimensionNumbers(
            update_window_dims=tuple(a.get("update_window_dims", ())),
            inserted_window_dims=tuple(a.get("inserted_window_dims", ())),
            scatter_dims_to_operand_dims=tuple(a["scatter_dims_to_operand_dims"]),
            operand_batching_dims=tuple(a.get("input_batching_dims", ())),
            scatter_indices_batching_dims=tuple(a.get("scatter_indices_batching_dims", ())))
        f = lax.scatter_add if body == "add" else lax.scatter
        return f(x, i, u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)
    inputs = lambda r: _normal(*x_shape)(r) + _ints(idx)(r) + _normal(*u_shape)(r)
    return fn, (jfn if jax_ok else None), inputs


def _sort(dimension, n):
    """``sort`` of n operands along ``dimension``, ordered by the first one (ascending)."""
    def fn(*xs):
        from hlo.ir import Builder, Region
        region = Region([P.ir_type((), x.dtype) for x in xs for _ in (0, 1)], name="comparator")
        region.outputs = [Builder(region).value("compare", region.args[:2], attrs={"comparison_direction": "LT"})]
        outs = emit("sort", list(xs), {"dimension": dimension, "is_stable": True}, regions=[region])
        return P.add(outs[0], P.mul(outs[1], outs[1])) if n > 1 else outs[0]

    def jfn(*xs):
        outs = lax.sort(tuple(xs), dimension=dimension, num_keys=1)
        return outs[0] + outs[1] * outs[1] if n > 1 else outs[0]
    return fn, jfn


def _conv_case(lhs_shape, rhs_shape, specs, strides, padding, lhs_dil, rhs_dil, fgc=1, bgc=1):
    (ls, rs, os) = specs

    def fn(x, w):
        return P.emit1("convolution", [x, w], {
            "window_strides": strides, "padding": padding, "lhs_dilation": lhs_dil, "rhs_dilation": rhs_dil,
            "input_batch_dimension": ls[0], "input_feature_dimension": ls[1], "input_spatial_dimensions": ls[2:],
            "kernel_output_feature_dimension": rs[0], "kernel_input_feature_dimension": rs[1],
            "kernel_spatial_dimensions": rs[2:], "output_batch_dimension": os[0],
            "output_feature_dimension": os[1], "output_spatial_dimensions": os[2:],
            "feature_group_count": fgc, "batch_group_count": bgc})

    def jfn(x, w):
        return lax.conv_general_dilated(x, w, strides, [tuple(p) for p in padding], lhs_dil, rhs_dil,
                                        lax.ConvDimensionNumbers(tuple(ls), tuple(rs), tuple(os)),
                                        feature_group_count=fgc, batch_group_count=bgc)
    return fn, jfn, _two(_normal(*lhs_shape), _normal(*rhs_shape))


def _branch(region_fn, name):
    return trace_region(lambda: [region_fn()], [], name=name).region


def _if(p, x, y):
    t = _branch(lambda: P.mul(x, y), "true_branch")
    f = _branch(lambda: P.unary("sine", x), "false_branch")
    return emit("if", [p], regions=[t, f])[0]


def _case3(k, x, y):
    bs = [_branch(lambda: P.mul(x, x), "branch0"), _branch(lambda: y, "branch1"),
          _branch(lambda: P.add(P.unary("cosine", x), y), "branch2")]
    return emit("case", [k], regions=bs)[0]


def _rw(kind="add", **a):
    init = {"add": 0.0, "maximum": -np.inf, "minimum": np.inf, "multiply": 1.0}[kind]

    def fn(x):
        return P.emit1("reduce_window", [x, P.const(init, x.dtype)], a,
                       regions=[P.scalar_body(kind, x.dtype)])

    def jfn(x):
        r = x.ndim
        op = {"add": lax.add, "maximum": lax.max, "minimum": lax.min, "multiply": lax.mul}[kind]
        return lax.reduce_window(x, init, op, tuple(a["window_dimensions"]),
                                 tuple(a.get("window_strides", (1,) * r)),
                                 tuple(tuple(p) for p in a.get("padding", ((0, 0),) * r)),
                                 base_dilation=tuple(a.get("base_dilations", (1,) * r)),
                                 window_dilation=tuple(a.get("window_dilations", (1,) * r)))
    return fn, jfn


CASES: List[Case] = []
CASES += [Case(n, _u(n), j, g) for n, j, g in UNARY]
CASES += [Case(n, (lambda name: lambda a, b: emit1(name, [a, b]))(n), j, g) for n, j, g in BINARY]
CASES += [
    Case("maximum-ties", lambda a, b: emit1("maximum", [a, b]), lax.max, _two(_ties(4, 5), _ties(4, 5)), fd=False),
    Case("minimum-ties", lambda a, b: emit1("minimum", [a, b]), lax.min, _two(_ties(4, 5), _ties(4, 5)), fd=False),
    Case("power-zero-exponent", lambda a, b: emit1("power", [a, b]), lax.pow,
         lambda r: [r.uniform(0.5, 2, (6,)).astype(f32), np.array([0, 1, 2, 0, -1.5, 0.5], f32)]),
    Case("reduce_precision", lambda x: emit1("reduce_precision", [x], {"exponent_bits": 5, "mantissa_bits": 10}),
         lambda x: lax.reduce_precision(x, 5, 10), _normal(3, 4), fd=False),
    Case("optimization_barrier", lambda a, b: P.mul(*emit("optimization_barrier", [a, b])),
         lambda a, b: lax.mul(*lax.optimization_barrier((a, b))), _two(_normal(3), _normal(3))),
    Case("select", lambda p, a, b: emit1("select", [p, a, b]), lax.select,
         lambda r: [r.standard_normal((3, 4)) > 0] + _normal(3, 4)(r) + _normal(3, 4)(r)),
    Case("select-scalar-pred", lambda p, a, b: emit1("select", [p, a, b]),
         lambda p, a, b: lax.select(jnp.broadcast_to(p, a.shape), a, b),
         lambda r: [np.asarray(False)] + _normal(3, 4)(r) + _normal(3, 4)(r)),
    Case("clamp", lambda lo, x, hi: emit1("clamp", [lo, x, hi]), lax.clamp,
         lambda r: [np.full((3, 4), -0.5, f32) + r.uniform(-.2, .2, (3, 4)).astype(f32)] + _normal(3, 4)(r)
         + [np.full((3, 4), 0.5, f32) + r.uniform(-.2, .2, (3, 4)).astype(f32)]),
    Case("clamp-scalar-bounds", lambda lo, x, hi: emit1("clamp", [lo, x, hi]),
         lambda lo, x, hi: lax.clamp(jnp.broadcast_to(lo, x.shape), x, jnp.broadcast_to(hi, x.shape)),
         lambda r: [np.asarray(-0.3, f32)] + _normal(4, 5)(r) + [np.asarray(0.4, f32)]),
    Case("convert-f16-roundtrip",
         lambda x: P.convert(P.mul(P.convert(x, np.float16), P.convert(x, np.float16)), f32),
         lambda x: (x.astype(jnp.float16) * x.astype(jnp.float16)).astype(jnp.float32),
         lambda r: [r.uniform(0.5, 1.5, (3, 4)).astype(f32)], fd=False),
    Case("convert-int-blocks", lambda x: P.mul(x, P.convert(P.convert(x, np.int32), x.dtype)),
         lambda x: x * x.astype(jnp.int32).astype(jnp.float32),
         lambda r: [r.uniform(-3, 3, (5,)).astype(f32)]),
    Case("complex-real-imag",  # complex intermediates between real inputs and output
         lambda x, y: P.add(P.unary("real", P.mul(emit1("complex", [x, y]), emit1("complex", [y, x]))),
                            P.unary("imag", P.unary("exponential", emit1("complex", [x, y])))),
         lambda x, y: lax.real(lax.complex(x, y) * lax.complex(y, x)) + lax.imag(lax.exp(lax.complex(x, y))),
         _two(_normal(3, 4), _normal(3, 4))),
    Case("broadcast_in_dim", lambda x: P.broadcast_in_dim(x, (2, 3, 4), [1, 2]),
         lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), _normal(3, 1)),
    Case("broadcast_in_dim-scalar", lambda x: P.broadcast_in_dim(x, (2, 3), []),
         lambda x: lax.broadcast_in_dim(x, (2, 3), ()), _normal()),
    Case("broadcast_in_dim-permuted", lambda x: P.broadcast_in_dim(x, (3, 5, 4), [2, 0]), None,
         _normal(4, 3)),
    Case("broadcast_in_dim-permuted-size1", lambda x: P.broadcast_in_dim(x, (3, 5, 4, 2), [3, 2, 0]), None,
         _normal(2, 1, 3)),
    Case("reshape", lambda x: P.reshape(x, (2, 6)), lambda x: x.reshape(2, 6), _normal(3, 4)),
    Case("transpose", lambda x: P.transpose(x, [2, 0, 1]), lambda x: lax.transpose(x, (2, 0, 1)),
         _normal(2, 3, 4)),
    Case("reverse", lambda x: P.reverse(x, [0, 2]), lambda x: lax.rev(x, (0, 2)), _normal(2, 3, 4)),
    Case("slice-strided", lambda x: P.slice(x, [1, 0], [6, 7], [2, 3]),
         lambda x: lax.slice(x, (1, 0), (6, 7), (2, 3)), _normal(6, 7)),
    Case("slice-empty", lambda x: P.slice(x, [2, 0], [2, 3]), lambda x: lax.slice(x, (2, 0), (2, 3)),
         _normal(4, 3), fd=False),
    Case("pad", lambda x, v: P.pad(x, v, [1, -1], [2, 0], [1, 2]),
         lambda x, v: lax.pad(x, v, ((1, 2, 1), (-1, 0, 2))), _two(_normal(3, 4), _normal())),
    Case("pad-crop", lambda x, v: P.pad(x, v, [-1, 2], [-2, -1], [0, 1]),
         lambda x, v: lax.pad(x, v, ((-1, -2, 0), (2, -1, 1))), _two(_normal(5, 4), _normal())),
    Case("concatenate", lambda a, b, c: P.concatenate([a, b, c], 1),
         lambda a, b, c: lax.concatenate([a, b, c], 1),
         lambda r: _normal(2, 3)(r) + _normal(2, 1)(r) + _normal(2, 4)(r)),
    Case("dynamic_slice", lambda x, i, j: P.dynamic_slice(x, [i, j], [3, 3]),
         lambda x, i, j: lax.dynamic_slice(x, (i, j), (3, 3)), _two(_normal(5, 6), _ints(1, 5))),
    Case("dynamic_update_slice", lambda x, u, i, j: P.dynamic_update_slice(x, u, [i, j]),
         lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
         lambda r: _normal(5, 6)(r) + _normal(2, 3)(r) + _ints(4, 5)(r)),
    Case("reduce-add", _reduce("add", [0, 2]), lambda x: jnp.sum(x, axis=(0, 2)), _normal(3, 4, 5)),
    Case("reduce-max", _reduce("maximum", [1]), lambda x: jnp.max(x, axis=1), _normal(3, 4, 5)),
    Case("reduce-min-all", _reduce("minimum", [0, 1]), lambda x: jnp.min(x), _normal(3, 4)),
    Case("reduce-max-ties", _reduce("maximum", [1]), lambda x: jnp.max(x, axis=1), _ties(4, 6), fd=False),
    Case("reduce-add-init", lambda x, c: P.reduce(x, c, [0], "add"), lambda x, c: jnp.sum(x, 0) + c,
         _two(_normal(4, 3), _normal())),
    Case("reduce-max-init", lambda x, c: P.reduce(x, c, [1], "maximum"), None,
         lambda r: _normal(3, 4)(r) + [np.asarray(0.3, f32)]),
    Case("reduce-multiply", lambda x: P.reduce(x, P.const(1, x.dtype), [1], "multiply"),
         lambda x: jnp.prod(x, axis=1),
         lambda r: [r.uniform(0.5, 1.5, (4, 5)).astype(f32) * np.array([[1], [0], [1], [0]], f32)
                    ** np.array([[0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0] * 5, [1, 0, 1, 0, 0]])]),
    Case("reduce-multiply-init", lambda x, c: P.reduce(x, c, [0], "multiply"), lambda x, c: jnp.prod(x, 0) * c,
         _two(_normal(3, 4), _normal())),
    Case("sort", *_sort(1, 1), _normal(3, 6)),
    Case("sort-key-value", *_sort(0, 2), _two(_normal(5, 3), _normal(5, 3))),
    Case("reduce_window-add", *_rw(window_dimensions=[3, 2], window_strides=[2, 1],
                                   padding=[[1, 1], [0, 1]], base_dilations=[1, 2],
                                   window_dilations=[2, 1]), _normal(8, 6)),
    Case("reduce_window-cumsum", *_rw(window_dimensions=[5, 1], padding=[[4, 0], [0, 0]]), _normal(5, 3)),
    Case("reduce_window-maxpool", *_rw("maximum", window_dimensions=[1, 2, 2], window_strides=[1, 2, 2]),
         _normal(2, 6, 4)),
    Case("reduce_window-maxpool-ties", *_rw("maximum", window_dimensions=[3, 2], window_strides=[1, 2]),
         _ties(6, 6), fd=False),
    Case("reduce_window-max-padded-dilated",  # jax has no VJP for dilated max windows
         _rw("maximum", window_dimensions=[3, 2], window_strides=[2, 1], padding=[[1, 2], [1, 0]],
             base_dilations=[1, 2], window_dilations=[1, 2])[0], None, _normal(7, 5)),
    Case("reduce_window-cummin", *_rw("minimum", window_dimensions=[5, 1], padding=[[4, 0], [0, 0]]),
         _normal(5, 3)),
    Case("reduce_window-cumprod-zeros",
         _rw("multiply", window_dimensions=[1, 4], padding=[[0, 0], [3, 0]])[0], lambda x: lax.cumprod(x, axis=1),
         lambda r: [r.uniform(0.5, 1.5, (3, 4)).astype(f32) * np.array([[1, 1, 1, 1], [1, 0, 1, 1], [0, 1, 0, 1]], f32)]),
    Case("reduce_window-product-init", lambda x, c: P.emit1(
        "reduce_window", [x, c], {"window_dimensions": [2, 2], "window_strides": [1, 2], "padding": [[1, 0], [0, 1]]},
        regions=[P.scalar_body("multiply", x.dtype)]), None, _two(_normal(4, 5), lambda r: [np.asarray(1.3, f32)])),
    Case("dot_general-matmul", *_dot([], [], [1], [0]), _two(_normal(4, 5), _normal(5, 3))),
    Case("dot_general-batched", *_dot([0], [1], [3, 2], [0, 3]), _two(_normal(2, 4, 3, 5), _normal(5, 2, 6, 3))),
    Case("dot_general-outer", *_dot([], [], [], []), _two(_normal(3), _normal(2, 2))),
    Case("dot_general-bf16-to-f32",
         lambda x, y: P.dot_general(P.convert(x, jnp.bfloat16), P.convert(y, jnp.bfloat16), [], [], [1], [0], f32),
         lambda x, y: lax.dot_general(x.astype(jnp.bfloat16), y.astype(jnp.bfloat16), (((1,), (0,)), ((), ())),
                                      preferred_element_type=jnp.float32),
         _two(_normal(4, 8), _normal(8, 3)), fd=False),
    Case("convolution-nchw", *_conv_case((2, 3, 7, 6), (4, 3, 3, 2), ([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]),
                                         [2, 1], [[1, 1], [0, 1]], [1, 1], [1, 2])),
    Case("convolution-nhwc-groups-lhs-dilation", *_conv_case(
        (2, 5, 6, 6), (3, 3, 2, 9), ([0, 3, 1, 2], [3, 2, 0, 1], [0, 3, 1, 2]), [1, 2], [[2, 0], [1, 1]],
        [2, 1], [1, 1], fgc=3)),
    Case("convolution-batch-groups", *_conv_case((4, 3, 5), (6, 3, 2), ([0, 1, 2], [0, 1, 2], [0, 1, 2]),
                                                 [1], [[0, 1]], [1], [2], bgc=2)),
    Case("gather-rows", *_gather_case((5, 4), [[1], [7], [-2], [1]], offset_dims=[1], collapsed_slice_dims=[0],
                                      start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4])),
    Case("gather-batching", *_gather_case((4, 5), [[1], [4], [0], [2]], operand_batching_dims=[0],
                                          start_indices_batching_dims=[0], collapsed_slice_dims=[1],
                                          start_index_map=[1], index_vector_dim=1, slice_sizes=[1, 1])),
    Case("gather-windows", *_gather_case((6, 7), [[1, 2], [5, 6]], offset_dims=[1, 2], start_index_map=[0, 1],
                                         index_vector_dim=1, slice_sizes=[3, 2])),
    Case("gather-implicit-index-dim", *_gather_case((5, 3), [0, 4, 4], offset_dims=[1], collapsed_slice_dims=[0],
                                                    start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 3])),
    Case("scatter-add", *_scatter_case((5, 4), [[1], [9], [1], [0]], (4, 4), "add", update_window_dims=[1],
                                       inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                                       index_vector_dim=1)),
    Case("scatter-add-partial-windows", *_scatter_case(
        (6, 5), [[4], [-1], [2]], (3, 3, 5), "add", jax_ok=False, update_window_dims=[1, 2],
        scatter_dims_to_operand_dims=[0], index_vector_dim=1)),
    Case("scatter-set-unique", *_scatter_case((5, 4), [[3], [0], [7]], (3, 4), None, update_window_dims=[1],
                                              inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                                              index_vector_dim=1)),
    Case("scatter-set-duplicates", *_scatter_case((5, 4), [[3], [0], [3], [-4]], (4, 4), None, jax_ok=False,
                                                  update_window_dims=[1], inserted_window_dims=[0],
                                                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)),
    Case("while-fori_loop", lambda x, y: hlo.lax.fori_loop(0, 3, lambda i, v: hlo.numpy.sin(v * y) + i, x),
         lambda x, y: lax.fori_loop(0, 3, lambda i, v: jnp.sin(v * y) + i, x), _two(_normal(3), _normal(3))),
    Case("if-true", _if, lambda p, x, y: lax.cond(p, lambda: x * y, lambda: jnp.sin(x)),
         lambda r: [np.asarray(True)] + _normal(3)(r) + _normal(3)(r)),
    Case("if-false", _if, lambda p, x, y: lax.cond(p, lambda: x * y, lambda: jnp.sin(x)),
         lambda r: [np.asarray(False)] + _normal(3)(r) + _normal(3)(r)),
    Case("case", _case3, lambda k, x, y: lax.switch(k, [lambda: x * x, lambda: y, lambda: jnp.cos(x) + y]),
         lambda r: [np.asarray(2, i32)] + _normal(3)(r) + _normal(3)(r)),
]


def _is_float(a):
    return np.asarray(a).dtype.kind == "f"


@pytest.mark.parametrize("case", [c for c in CASES if c.jfn is not None], ids=lambda c: c.id)
def test_vjp_matches_jax(case):
    rng = np.random.default_rng(0)
    xs = case.inputs(rng)
    # the cotangent: random, with the output's shape
    fwd = interp(case.fn)(*xs)
    ct = rng.standard_normal(np.shape(fwd)).astype(np.asarray(fwd).dtype)
    out, cts = hlo_vjp(case.fn, xs, ct)
    fl = [i for i, x in enumerate(xs) if _is_float(x)]

    def jf(*floats):
        full = list(xs)
        for i, v in zip(fl, floats):
            full[i] = v
        return case.jfn(*full)
    jout, jback = jax.vjp(jf, *[xs[i] for i in fl])
    jcts = jback(jnp.asarray(ct))
    np.testing.assert_allclose(out, np.asarray(jout), rtol=1e-5, atol=1e-6)
    tol = 1e-2 if "bf16" in case.id else 2e-5
    for i, jc in zip(fl, jcts):
        np.testing.assert_allclose(cts[i], np.asarray(jc), rtol=tol, atol=tol, err_msg=f"input {i}")
    for i, x in enumerate(xs):  # integer/bool inputs get zero cotangents of their own dtype
        if i not in fl:
            assert cts[i].dtype == np.asarray(x).dtype and not np.any(cts[i])


@pytest.mark.parametrize("case", [c for c in CASES if c.fd], ids=lambda c: c.id)
def test_vjp_finite_differences_f64(case):
    rng = np.random.default_rng(1)
    xs = [x.astype(f64) if _is_float(x) else x for x in case.inputs(rng)]
    fwd = interp(case.fn)
    y = np.asarray(fwd(*xs))
    ct = np.where(np.isfinite(y), rng.standard_normal(y.shape), 0.0)  # -inf: windows of padding
    _, cts = hlo_vjp(case.fn, xs, ct)
    h = 1e-6
    v = [rng.standard_normal(np.shape(x)) if _is_float(x) else None for x in xs]
    plus = [x + h * d if d is not None else x for x, d in zip(xs, v)]
    minus = [x - h * d if d is not None else x for x, d in zip(xs, v)]
    with np.errstate(invalid="ignore"):
        jv = np.where(np.isfinite(y), (np.asarray(fwd(*plus)) - np.asarray(fwd(*minus))) / (2 * h), 0.0)
    lhs = sum(float(np.sum(c * d)) for c, d in zip(cts, v) if d is not None)
    rhs = float(np.sum(ct * jv))
    assert abs(lhs - rhs) <= 1e-6 * max(1.0, abs(rhs)), (lhs, rhs)


def test_every_rule_is_exercised():
    """Each op in the VJP table appears in some case above (or in the API tests below)."""
    seen = set()
    for c in CASES:
        xs = c.inputs(np.random.default_rng(0))
        seen.update(op.name for op in interp(c.fn).lower(*xs).ir.walk())
    # host_callback's rule raises (a pure callback has no derivative): test_callbacks.py; the
    # collectives' rules run inside hlo.shard_map: tests/frontend/test_shard_map.py
    collectives = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute"}
    missing = set(hlo.autodiff.RULES) - seen - {"host_callback"} - collectives
    assert not missing, sorted(missing)


# --------------------------------------------------------------------------------------------
# The API on hlo.numpy programs
# --------------------------------------------------------------------------------------------

import hlo.numpy as hnp


def _program(np_, idx):
    """Indexing, take, .at[].add, where, max, mean, matmul, power: a bit of everything."""
    def f(x, w):
        y = np_.tanh(x @ w)
        z = np_.take(x, idx, axis=0) * 2.0
        q = x[1:3, ::2].sum() + x[idx[1]].sum()
        m = np_.where(x > 0, x, 0.1 * x)
        s = np_.zeros((6, 5), x.dtype).at[idx].add(x)
        return np_.sum(y ** 2) + np_.mean(z) + q + np_.sum(m * s[:4]) + np_.max(x)
    return f


def test_grad_of_numpy_program_matches_jax():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5)).astype(f32)
    w = rng.standard_normal((5, 3)).astype(f32)
    idx = np.array([0, 3, 3, 1], i32)
    got = interp(hlo.grad(_program(hnp, idx), argnums=(0, 1)))(x, w)
    want = jax.grad(_program(jnp, idx), argnums=(0, 1))(x, w)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_value_and_grad_pytree_and_aux():
    def loss(params, x):
        h = hnp.tanh(x @ params["w"] + params["b"])
        out = hnp.sum(h * h)
        return out, {"h": h, "n": 3}

    def jloss(params, x):
        h = jnp.tanh(x @ params["w"] + params["b"])
        return jnp.sum(h * h), {"h": h}
    rng = np.random.default_rng(3)
    params = {"w": rng.standard_normal((3, 2)).astype(f32), "b": rng.standard_normal(2).astype(f32)}
    x = rng.standard_normal((4, 3)).astype(f32)
    (v, aux), g = interp(hlo.value_and_grad(loss, has_aux=True))(params, x)
    (jv, jaux), jg = jax.value_and_grad(jloss, has_aux=True)(params, x)
    assert set(g) == {"w", "b"} and set(aux) == {"h", "n"}
    np.testing.assert_allclose(v, jv, rtol=1e-6)
    np.testing.assert_allclose(aux["h"], jaux["h"], rtol=1e-6)
    for k in g:
        np.testing.assert_allclose(g[k], jg[k], rtol=1e-5, atol=1e-6)
    g2, aux2 = interp(hlo.grad(loss, has_aux=True))(params, x)
    np.testing.assert_allclose(g2["w"], jg["w"], rtol=1e-5, atol=1e-6)


def test_grad_outside_jit_and_python_scalars():
    with hlo.config.override(target="interpreter"):
        assert float(hlo.grad(lambda x: x * x * x)(3.0)) == pytest.approx(27.0)
        v, (gx, gy) = hlo.value_and_grad(lambda x, y: x * y + hnp.sin(y), argnums=(0, 1))(3.0, 2.0)
        assert float(v) == pytest.approx(6 + np.sin(2.0), rel=1e-6)
        assert (float(gx), float(gy)) == pytest.approx((2.0, 3 + np.cos(2.0)), rel=1e-6)
        # a non-differentiated Python number is a static argument: a new value, a new program
        g = hlo.grad(lambda x, n: hnp.sum(x ** n))
        x = np.arange(1, 4, dtype=f32)
        np.testing.assert_allclose(g(x, 2), 2 * x)
        np.testing.assert_allclose(g(x, 3), 3 * x * x)


def test_only_arguments_are_differentiated():
    """Reading the same array through a closure does not count (as in jax)."""
    x = np.arange(1, 5, dtype=f32)

    def outer(x):
        return hlo.grad(lambda y: hnp.sum(y * x))(x)
    np.testing.assert_allclose(interp(outer)(x), x)


def test_stop_gradient():
    x = np.arange(1, 5, dtype=f32)
    f = lambda x: hnp.sum(x * hlo.autodiff.stop_gradient(x))
    np.testing.assert_allclose(interp(hlo.grad(f))(x), x)
    # second order: the stop survives being differentiated again (grad f is the stopped x)
    h = lambda x: hnp.sum(hlo.grad(f)(x) * x * x)
    jf = lambda x: jnp.sum(x * jax.lax.stop_gradient(x))
    jh = lambda x: jnp.sum(jax.grad(jf)(x) * x * x)
    np.testing.assert_allclose(interp(hlo.grad(h))(x), jax.grad(jh)(x))


@pytest.mark.parametrize("name", ["sin_cube", "tanh", "exp_log"])
def test_grad_of_grad(name):
    fns = {
        "sin_cube": (lambda x: hnp.sin(x) * x ** 3, lambda x: jnp.sin(x) * x ** 3),
        "tanh": (hnp.tanh, jnp.tanh),
        "exp_log": (lambda x: hnp.exp(x) * hnp.log(x * x + 1), lambda x: jnp.exp(x) * jnp.log(x * x + 1)),
    }
    f, jf = fns[name]
    for x in (0.3, -1.2, 2.0):
        d2 = interp(hlo.grad(hlo.grad(f)))(np.float32(x))
        d3 = interp(hlo.grad(hlo.grad(hlo.grad(f))))(np.float32(x))
        np.testing.assert_allclose(d2, jax.grad(jax.grad(jf))(np.float32(x)), rtol=2e-5, atol=1e-5)
        np.testing.assert_allclose(d3, jax.grad(jax.grad(jax.grad(jf)))(np.float32(x)), rtol=1e-4, atol=1e-4)


def test_jvp_and_hessian_vector_product():
    rng = np.random.default_rng(4)
    x, t = rng.standard_normal((2, 3, 4)).astype(f32)
    w = rng.standard_normal((4, 4)).astype(f32)

    def f(np_):
        return lambda x: np_.tanh(x @ w) * np_.exp(x)
    out, tan = interp(lambda x, t: hlo.jvp(f(hnp), (x,), (t,)))(x, t)
    jout, jtan = jax.jvp(f(jnp), (x,), (t,))
    np.testing.assert_allclose(out, jout, rtol=1e-5)
    np.testing.assert_allclose(tan, jtan, rtol=1e-5, atol=1e-5)

    def loss(np_):
        return lambda x: np_.sum(np_.sin(x @ w) ** 2)
    hvp = interp(lambda x, t: hlo.jvp(hlo.grad(loss(hnp)), (x,), (t,))[1])(x, t)
    jhvp = jax.jvp(jax.grad(loss(jnp)), (x,), (t,))[1]
    np.testing.assert_allclose(hvp, jhvp, rtol=1e-4, atol=1e-4)


def test_vjp_several_outputs_aux_and_integer_inputs():
    def f(x, k):
        return (x * 2.0, hnp.sum(x) * k.astype(x.dtype)), k + 1
    x = np.arange(3, dtype=f32)
    k = np.asarray(4, i32)
    ct = (np.ones(3, f32), np.asarray(2.0, f32))

    def run(x, k, ct):
        out, back, aux = hlo.vjp(f, x, k, has_aux=True)
        return out, back(ct), aux
    out, (cx, ck), aux = interp(run)(x, k, ct)
    np.testing.assert_allclose(out[0], 2 * x)
    np.testing.assert_allclose(cx, 2 + 2 * 4 * np.ones(3))
    assert ck.dtype == np.int32 and ck == 0 and aux == 5
    with hlo.config.override(target="interpreter"):  # eager vjp, then its function
        out, back = hlo.vjp(lambda x: hnp.sin(x) * x, x)
        np.testing.assert_allclose(back(np.ones(3, f32))[0], np.cos(x) * x + np.sin(x), rtol=1e-6)


def test_grad_and_vjp_inside_a_branch():
    x = np.linspace(-1, 1, 4).astype(f32)

    def f(np_, lax_, grad):
        def g(x, p):
            inner = lambda v: grad(lambda u: np_.sum(np_.sin(u) * u))(v)
            return np_.sum(lax_.cond(p, inner, lambda v: v * 2.0, x) ** 2)
        return g
    np.testing.assert_allclose(interp(hlo.grad(f(hnp, hlo.lax, hlo.grad)))(x, True),
                               jax.grad(f(jnp, lax, jax.grad))(x, True), rtol=1e-5)

    def k(x):  # a vjp function made outside the branch, called inside it
        out, back = hlo.vjp(hnp.sin, x)
        return hlo.lax.cond(True, lambda: back(x)[0], lambda: x)
    np.testing.assert_allclose(interp(k)(x), np.cos(x) * x, rtol=1e-6)


def test_grad_through_fori_loop_and_scan():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(4).astype(f32)
    w = (rng.standard_normal((4, 4)) * 0.5).astype(f32)

    def f(np_, lax_):
        def g(x, w):
            y = lax_.fori_loop(1, 5, lambda i, v: np_.tanh(v @ w + i), x)
            c, ys = lax_.scan(lambda c, xi: (c * xi + np_.sum(w[0]), np_.sin(c) * xi), 1.0, x)
            _, zs = lax_.scan(lambda c, xi: (c + xi, c * xi), 0.5, x, reverse=True)
            return np_.sum(y ** 2) + c + np_.sum(ys) + np_.sum(zs)
        return g
    got = interp(hlo.grad(f(hnp, hlo.lax), argnums=(0, 1)))(x, w)
    want = jax.grad(f(jnp, lax), argnums=(0, 1))(x, w)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # second order through a loop
    h = lambda np_, lax_, grad: lambda x: np_.sum(grad(lambda v: lax_.fori_loop(0, 3, lambda i, u: np_.sin(u) * u, v).sum())(x) ** 2)
    np.testing.assert_allclose(interp(hlo.grad(h(hnp, hlo.lax, hlo.grad)))(x),
                               jax.grad(h(jnp, lax, jax.grad))(x), rtol=1e-4, atol=1e-5)


def test_grad_through_cond_and_switch():
    def f(np_, lax_):
        def g(x, p, k):
            a = lax_.cond(p, lambda v: np_.sin(v) * v, lambda v: v * v, x)
            b = lax_.switch(k, [lambda v: v, lambda v: np_.exp(v), lambda v: -v], a)
            return np_.sum(b)
        return g
    x = np.linspace(-1, 1, 5).astype(f32)
    for p, k in [(True, 1), (False, 2), (True, 0)]:
        got = interp(hlo.grad(f(hnp, hlo.lax)))(x, p, np.int32(k))
        want = jax.grad(f(jnp, lax))(x, p, np.int32(k))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# The seed workload: one SGD step of a 784->512->10 relu MLP
# --------------------------------------------------------------------------------------------

def _mlp_step(np_, nn, grad, labels_as):
    def loss(w1, b1, w2, b2, x, labels):
        logits = nn.relu(x @ w1 + b1) @ w2 + b2
        logp = nn.log_softmax(logits)
        if labels_as == "one_hot":
            return -np_.mean(np_.sum(nn.one_hot(labels, 10) * logp, axis=-1))
        return -np_.mean(np_.take_along_axis(logp, labels[:, None], axis=1))

    def step(w1, b1, w2, b2, x, labels):
        l, g = grad(loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, labels)
        return tuple(p - 0.1 * d for p, d in zip((w1, b1, w2, b2), g)) + (l,)
    return step


@pytest.mark.parametrize("labels_as", ["one_hot", "take_along_axis"])
def test_mlp_train_step_matches_jax(labels_as, target):
    """On every target that works here (the ``target`` fixture of tests/frontend/conftest.py)."""
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((784, 512)) / 28).astype(f32)
    b1 = (rng.standard_normal(512) * 0.1).astype(f32)
    w2 = (rng.standard_normal((512, 10)) / np.sqrt(512)).astype(f32)
    b2 = np.zeros(10, f32)
    x = rng.standard_normal((128, 784)).astype(f32)
    labels = rng.integers(0, 10, 128).astype(i32)
    args = (w1, b1, w2, b2, x, labels)
    got = hlo.device_get(hlo.jit(_mlp_step(hnp, hlo.nn, hlo.value_and_grad, labels_as), target=target)(*args))
    want = jax.jit(_mlp_step(jnp, jax.nn, jax.value_and_grad, labels_as))(*args)
    np.testing.assert_allclose(got[4], want[4], rtol=1e-5)
    for new, ref, old in zip(got[:4], want[:4], args[:4]):  # compare the updates, not the weights
        np.testing.assert_allclose(new - old, np.asarray(ref) - old, rtol=1e-3, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

THIS_FILE = "test_autodiff.py"


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if marker in line and "_line_of" not in line:
                return i
    raise AssertionError(marker)


def test_error_non_scalar_output():
    g = hlo.grad(lambda x: x * 2.0)
    with pytest.raises(ValueError, match=r"must return a scalar.*shape \(3,\) \(f32\[3\]\)") as e:
        interp(g)(np.ones(3, f32))  # MARK-nonscalar
    assert f"{THIS_FILE}:{_line_of('MARK-nonscalar')}" in str(e.value)
    with pytest.raises(TypeError, match="single scalar array.*returned"):
        interp(hlo.grad(lambda x: (x, x)))(np.float32(1))


def test_error_integer_input_and_output():
    with pytest.raises(TypeError, match=r"requires real-valued .*argument k is s32\[\].*allow_int=True"):
        interp(hlo.grad(lambda x, k: x * k, argnums=(0, 1)))(np.float32(2), np.int32(3))
    gx, gk = interp(hlo.grad(lambda x, k: x * k, argnums=(0, 1), allow_int=True))(np.float32(2), np.int32(3))
    assert float(gx) == 3.0 and gk.dtype == np.int32 and gk == 0
    with pytest.raises(TypeError, match=r"requires a real-valued \(floating-point\) output.*s32"):
        interp(hlo.grad(lambda x: hnp.sum(x).astype(np.int32)))(np.ones(3, f32))


def test_error_bad_arguments():
    with pytest.raises(TypeError, match="argnums 3 is out of range.*1 positional"):
        interp(hlo.grad(lambda x: x, argnums=3))(np.float32(1))
    with pytest.raises(TypeError, match="has_aux=True.*must return a pair"):
        interp(hlo.grad(lambda x: x * x, has_aux=True))(np.float32(1))
    with pytest.raises(TypeError, match="argnums must be"):
        hlo.grad(lambda x: x, argnums="x")
    with pytest.raises(TypeError, match="expects a callable"):
        hlo.grad(3)


def test_error_not_differentiable_names_the_line():
    def f(x):
        return hlo.lax.while_loop(lambda v: v < 10.0, lambda v: v * v, x)  # MARK-loop
    with pytest.raises(NotImplementedError, match="'while' is not differentiable yet.*trip count") as e:
        interp(hlo.grad(f))(np.float32(1.5))
    assert f"{THIS_FILE}:{_line_of('MARK-loop')}" in str(e.value)
    # ... but a loop that does not touch the differentiated value is fine
    g = interp(hlo.grad(lambda x: x * hlo.lax.while_loop(lambda v: v < 3.0, lambda v: v + 1.0, 0.0)))
    assert float(g(np.float32(2))) == 3.0
    # a long loop: the tape keeps the IR small
    g = interp(hlo.grad(lambda x: hlo.lax.fori_loop(0, 1000, lambda i, v: v * 0.999, x)))
    assert float(g(np.float32(1))) == pytest.approx(0.999 ** 1000, rel=1e-4)


def test_error_vjp_function_misuse():
    saved = []

    def leak(x):
        out, back = hlo.vjp(hnp.sin, x)
        saved.append(back)
        return out
    interp(leak)(np.ones(3, f32))
    with pytest.raises(RuntimeError, match="outside the hlo.jit trace that made it"):
        interp(lambda c: saved[0](c))(np.ones(3, f32))

    def bad_ct(x):
        out, back = hlo.vjp(hnp.sin, x)
        return back(np.ones(4, f32))
    with pytest.raises(ValueError, match=r"cotangent leaf 0 must be f32\[3\].*got f32\[4\]"):
        interp(bad_ct)(np.ones(3, f32))
