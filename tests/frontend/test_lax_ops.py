"""hlo.lax against jax.lax: contractions, convolutions, windowed reductions, dynamic slicing,
gather/scatter, sorting, reductions with custom bodies, and the strict elementwise ops."""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_util import compare, rand, stable_seed

import hlo
import hlo.lax as hlax
import hlo.numpy as hnp


def test_dot_general(target):
    rng = np.random.default_rng(0)
    a = rand(rng, (2, 3, 4, 5), "float32")
    b = rand(rng, (2, 5, 4, 6), "float32")
    ai = rand(rng, (3, 4), "int8")
    bi = rand(rng, (4, 2), "int8")

    def f(lax):
        return lambda a, b, ai, bi: {
            "batch_contract2": lax.dot_general(a, b, (((2, 3), (2, 1)), ((0,), (0,)))),
            "no_batch": lax.dot_general(a[0, 0], b[0, :, 0], (((1,), (0,)), ((), ()))),
            "outer": lax.dot_general(a[0, 0, 0], b[0, 0, 0], (((), ()), ((), ()))),
            "pref": lax.dot_general(ai, bi, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32),
            "dot": lax.dot(a[0, 0], b[0, :, 0]), "dot_vec": lax.dot(a[0, 0, 0], b[0, :, 0, 0]),
        }
    compare(f(hlax), f(jlax), (a, b, ai, bi), target, rtol=1e-5, atol=1e-5)


CONVS = [
    # (lhs shape, rhs shape, strides, padding, lhs_dil, rhs_dil, dimension numbers, groups)
    ((2, 3, 9, 8), (4, 3, 3, 2), (1, 1), "VALID", None, None, None, 1),
    ((2, 3, 9, 8), (4, 3, 3, 3), (2, 1), "SAME", None, None, None, 1),
    ((1, 7, 6, 4), (3, 3, 4, 5), (1, 2), ((1, 2), (0, 1)), None, (2, 1), ("NHWC", "HWIO", "NHWC"), 1),
    ((2, 4, 8), (6, 2, 3), (1,), ((1, 2),), (2,), None, None, 2),
    ((2, 4, 8), (6, 2, 3), (2,), "SAME_LOWER", None, (2,), None, 2),
    ((1, 2, 5, 5), (2, 2, 2, 2), (1, 1), ((1, 1), (1, 1)), (2, 2), None, None, 1),
    ((2, 6, 10), (6, 1, 4), (3,), "VALID", None, (2,), ("NCH", "OIH", "NCH"), 6),
]


@pytest.mark.parametrize("case", CONVS, ids=[str(i) for i in range(len(CONVS))])
def test_conv_general_dilated(target, case):
    ls, rs, strides, pad, ld, rd, dn, groups = case
    rng = np.random.default_rng(stable_seed(str(case)))
    x, w = rand(rng, ls, "float32"), rand(rng, rs, "float32")

    def f(lax):
        return lambda x, w: lax.conv_general_dilated(x, w, strides, pad, lhs_dilation=ld, rhs_dilation=rd,
                                                     dimension_numbers=dn, feature_group_count=groups)
    compare(f(hlax), f(jlax), (x, w), target, rtol=1e-4, atol=1e-4)


def test_reduce_window_pooling(target):
    rng = np.random.default_rng(1)
    x = rand(rng, (2, 7, 6, 3), "float32")

    def f(lax, np_):
        return lambda x: {
            "maxpool": lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
            "avgpool": lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4,
            "dilated": lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (1, 2), (0, 1), (0, 0)),
                                         window_dilation=(1, 2, 1, 1)),
            "base_dil": lax.reduce_window(x, -np.inf, lax.max, (1, 2, 1, 1), (1, 1, 1, 1), "VALID",
                                          base_dilation=(1, 2, 1, 1)),
            "cumsum": lax.cumsum(x, axis=1), "cumsum_rev": lax.cumsum(x, axis=2, reverse=True),
            "cummax": lax.cummax(x, axis=1), "cummin": lax.cummin(x, axis=0, reverse=True),
            "cumprod": lax.cumprod(x, axis=3),
        }
    compare(f(hlax, hnp), f(jlax, jnp), (x,), target, rtol=1e-5, atol=1e-5)


def test_dynamic_slicing(target):
    rng = np.random.default_rng(2)
    x = rand(rng, (5, 6), "int32")
    u = rand(rng, (2, 3), "int32")
    starts = np.array([[1, 2], [4, 5], [-1, 0], [-3, -2], [9, -9]], np.int32)

    def f(lax):
        def run(x, u, starts):
            out = {}
            for k in range(starts.shape[0]):
                i, j = starts[k, 0], starts[k, 1]
                out[f"ds{k}"] = lax.dynamic_slice(x, (i, j), (2, 3))
                out[f"dus{k}"] = lax.dynamic_update_slice(x, u, (i, j))
            out["ds_static"] = lax.dynamic_slice(x, (1, 2), (3, 3))
            out["ds_in_dim"] = lax.dynamic_slice_in_dim(x, starts[0, 1], 2, axis=1)
            out["dus_in_dim"] = lax.dynamic_update_slice_in_dim(x, u[:1], starts[1, 0], axis=0)
            return out
        return run
    compare(f(hlax), f(jlax), (x, u, starts), target)


def test_structural_ops(target):
    rng = np.random.default_rng(3)
    x = rand(rng, (3, 4), "float32")

    def f(lax):
        return lambda x: {
            "bid": lax.broadcast_in_dim(x[0], (2, 4, 3), (1,)), "broadcast": lax.broadcast(x, (2,)),
            "reshape_dims": lax.reshape(x, (2, 6), dimensions=(1, 0)), "transpose": lax.transpose(x, (1, 0)),
            "slice": lax.slice(x, (0, 1), (3, 4), (2, 2)), "slice_in_dim": lax.slice_in_dim(x, 1, -1, axis=1),
            "concat": lax.concatenate([x, x * 2], 0), "rev": lax.rev(x, (0, 1)),
            "pad": lax.pad(x, 0.5, ((1, 2, 1), (-1, 0, 0))), "squeeze": lax.squeeze(x[None], (0,)),
            "expand": lax.expand_dims(x, (0, 3)), "iota": lax.iota(jnp.int32, 5),
            "biota": lax.broadcasted_iota(jnp.float32, (2, 3), 1), "full": lax.full((2, 2), 3.0),
            "collapse": lax.collapse(x[None], 0, 2), "select": lax.select(x > 0, x, -x),
            "clamp": lax.clamp(-0.5, x, 0.5), "convert": lax.convert_element_type(x * 10, jnp.int8),
            "bitcast": lax.bitcast_convert_type(x, jnp.int32), "bitcast_narrow": lax.bitcast_convert_type(x, jnp.int16),
            "round_afz": lax.round(x * 4), "round_even": lax.round(x * 4, lax.RoundingMethod.TO_NEAREST_EVEN),
            "integer_pow": lax.integer_pow(x, 3), "integer_pow_neg": lax.integer_pow(x, -2),
            "erf": lax.erf(x), "erfc": lax.erfc(x), "square": lax.square(x), "rsqrt": lax.rsqrt(lax.abs(x) + 1),
            "reciprocal": lax.reciprocal(x + 10), "exp2": lax.exp2(x), "atan2": lax.atan2(x, lax.rev(x, (0,))),
            "shift": lax.shift_right_logical(lax.convert_element_type(x * 100, jnp.int32), 2),
            "popcnt": lax.population_count(lax.convert_element_type(x * 100, jnp.int32)),
            "clz": lax.clz(lax.convert_element_type(lax.abs(x) * 100, jnp.uint32)),
            "is_finite": lax.is_finite(x / (x > 0)), "rem": lax.rem(x, 0.3),
        }
    compare(f(hlax), f(jlax), (x,), target, rtol=2e-6, atol=2e-6)


def test_reduce_with_custom_computations(target):
    rng = np.random.default_rng(4)
    x = rand(rng, (4, 5), "float32")
    y = rand(rng, (4, 5), "int32")

    def f(lax):
        def run(x, y):
            def maxloc(a, b):  # (value, index) pairs: keep the larger value
                (av, ai), (bv, bi) = a, b
                pick = av >= bv
                return lax.select(pick, av, bv), lax.select(pick, ai, bi)
            return {
                "sum": lax.reduce(x, 0.0, lax.add, (0,)), "max": lax.reduce(x, -np.inf, lax.max, (1,)),
                "custom": lax.reduce(x, 1.0, lambda a, b: lax.max(a, b) * 1.0, (0, 1)),
                "pair": lax.reduce((x, y), (-np.inf, 0), maxloc, (1,)),
                "rsum": lax.reduce_sum(y, (0,)), "rmax": lax.reduce_max(x, (0, 1)), "rmin": lax.reduce_min(y, (1,)),
                "rprod": lax.reduce_prod(x, (1,)), "rand": lax.reduce_and(y > 0, (0,)), "ror": lax.reduce_or(y > 5, (1,)),
                "argmax": lax.argmax(x, 1, jnp.int32), "argmin": lax.argmin(y, 0, jnp.int32),
            }
        return run
    compare(f(hlax), f(jlax), (x, y), target, rtol=2e-6, atol=2e-6)


def test_sort_multiple_operands(target):
    rng = np.random.default_rng(5)
    k1 = rand(rng, (3, 6), "int32", 0, 3)
    k2 = rand(rng, (3, 6), "float32")
    v = rand(rng, (3, 6), "int32")

    def f(lax):
        return lambda k1, k2, v: {"one": lax.sort(k2, dimension=0), "two_keys": lax.sort((k1, k2, v), num_keys=2),
                                  "kv": lax.sort_key_val(k1, v, dimension=1)}
    compare(f(hlax), f(jlax), (k1, k2, v), target)


def test_gather_and_scatter(target):
    rng = np.random.default_rng(6)
    x = rand(rng, (5, 4, 3), "float32")
    idx = np.array([[0, 1], [4, 2], [2, 0], [3, 3]], np.int32)
    upd = rand(rng, (4, 3), "float32")
    gdn_h = hlax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
    gdn_j = jlax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
    sdn_h = hlax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0, 1),
                                         scatter_dims_to_operand_dims=(0, 1))
    sdn_j = jlax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0, 1),
                                         scatter_dims_to_operand_dims=(0, 1))

    def f(lax, g, s):
        return lambda x, idx, upd: {
            "gather": lax.gather(x, idx, g, (1, 1, 3)),
            "gather_window": lax.gather(x, idx[:, :1], lax.GatherDimensionNumbers(
                offset_dims=(1, 2), collapsed_slice_dims=(0,), start_index_map=(0,)), (1, 2, 3)),
            "scatter_add": lax.scatter_add(x, idx, upd, s), "scatter_max": lax.scatter_max(x, idx, upd, s),
            "scatter_mul": lax.scatter_mul(x, idx, upd, s), "scatter_min": lax.scatter_min(x, idx, upd, s),
            "scatter": lax.scatter(x, idx[:3], upd[:3], s),
        }
    compare(f(hlax, gdn_h, sdn_h), f(jlax, gdn_j, sdn_j), (x, idx, upd), target, rtol=1e-6)


def test_lax_is_strict_about_dtypes_and_shapes():
    x = np.ones((3,), np.float32)
    with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtype, got float32, int32"):
        hlo.make_ir(lambda x: hlax.add(x, x.astype(np.int32)))(x)
    with pytest.raises(ValueError, match=r"lax.mul requires arguments to have the same shape"):
        hlo.make_ir(lambda x: hlax.mul(x, hnp.ones((4,))))(x)
    with pytest.raises(TypeError, match="Python int 3 does not fit"):
        hlo.make_ir(lambda x: hlax.add(x > 0, 3))(x)
    with pytest.raises(ValueError, match=r"lax.dot_general: contracting dimensions differ"):
        hlo.make_ir(lambda x: hlax.dot_general(x, hnp.ones((4,)), (((0,), (0,)), ((), ()))))(x)
    with pytest.raises(TypeError, match=r"lax.exp: expected floating-point or complex values, got s32\[3\]"):
        hlo.make_ir(lambda x: hlax.exp(x.astype(np.int32)))(x)
    ir = hlo.make_ir(lambda x: hlax.add(x, 1.0) * hlax.mul(x, hnp.float32(2)))(x)
    assert str(ir.main.result_types[0]) == "f32[3]"
