"""Import real ``jax.jit(f).lower(...).as_text()`` output, run it on the interpreter and compare
with jax; export it again and check jaxlib accepts it and it re-imports identically."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp
from jax import lax

import hlo
from hlo.ir import print_module
from hlo.ir.stablehlo import export_module, import_module, mlir_bridge

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6)).astype(np.float32)
Y = RNG.standard_normal((6, 3)).astype(np.float32)
V = RNG.standard_normal(8).astype(np.float32)
IDX = np.array([3, 0, 7, 7], np.int32)
IMG = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
KER = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)

PROGRAMS = {
    # jnp.sort and nested jits lower to calls of private functions
    "matmul_private_call": (lambda a, b: jax.jit(lambda p, q: jnp.tanh(p @ q))(a, b) + 1, (X, Y)),
    "chlo_erf_tan_lgamma": (lambda a: jnp.tan(a) + jax.scipy.special.erf(a)
                            + jax.scipy.special.gammaln(jnp.abs(a) + 0.5), (V,)),
    "while_loop": (lambda a: lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5), (0, a))[1], (V,)),
    "sort_argsort": (lambda a: (jnp.sort(a), jnp.argsort(a)), (V,)),
    "top_k": (lambda a: lax.top_k(a, 3), (V,)),
    "gather_index": (lambda a, i: a[i], (V, IDX)),
    "scatter_add": (lambda a, i: a.at[i].add(1.0), (V, IDX)),
    "scatter_2d": (lambda a, i: a.at[i % 4, 2].multiply(3.0), (X, IDX)),
    "cond_switch": (lambda a: lax.cond(a.sum() > 0, lambda t: t * 2, lambda t: t - 1, a)
                    + lax.switch(1, [lambda t: t, lambda t: -t], a), (V,)),
    "scan_cumsum": (lambda a: lax.scan(lambda c, t: (c + t, c * t), 0.0, a), (V,)),
    "conv_pool": (lambda a, k: lax.reduce_window(
        lax.conv_general_dilated(a, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), (IMG, KER)),
    "argmax_softmax": (lambda a: (jnp.argmax(a, axis=1), jax.nn.softmax(a, axis=-1)), (X,)),
    "dynamic_slice_update": (lambda a, i: lax.dynamic_update_slice(
        a, lax.dynamic_slice(a, (i[0] % 4, 1), (2, 3)) * 2, (i[1] % 3, i[0] % 4)), (X, IDX)),
}


def _lowered_text(name):
    f, args = PROGRAMS[name]
    return jax.jit(f).lower(*args).as_text()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jax_program_runs_like_jax(name):
    f, args = PROGRAMS[name]
    lowered = hlo.load_stablehlo(_lowered_text(name))
    got = lowered.compile(target="interpreter")(*args)
    want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jax.jit(f)(*args))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jax_program_round_trips_through_export(name):
    m = import_module(_lowered_text(name))
    text = export_module(m)
    # jaxlib parses and verifies what we export
    mlir_bridge.parse_and_verify(text)
    assert print_module(import_module(text)) == print_module(m)
    # the pretty form parses too
    mlir_bridge.parse_and_verify(export_module(m, pretty=True))


def test_private_functions_become_calls():
    m = import_module(_lowered_text("matmul_private_call"))
    calls = [op for op in m.walk() if op.name == "call"]
    assert calls and all(op.attrs["callee"] in m for op in calls)
    assert any(fn.visibility == "private" for fn in m.functions.values())


def test_chlo_is_legalized_and_gather_scatter_attributes_flatten():
    m = import_module(_lowered_text("chlo_erf_tan_lgamma"))
    assert not any(op.name.startswith("chlo") for op in m.walk())
    g = import_module(_lowered_text("gather_index"))
    gather = next(op for op in g.walk() if op.name == "gather")
    assert gather.attrs["collapsed_slice_dims"] == (0,) and gather.attrs["start_index_map"] == (0,)
    s = import_module(_lowered_text("scatter_add"))
    scatter = next(op for op in s.walk() if op.name == "scatter")
    assert scatter.attrs["scatter_dims_to_operand_dims"] == (0,)
    assert [o.name for o in scatter.region("update").ops] == ["add"]


def test_mlir_module_object_is_accepted():
    f, args = PROGRAMS["while_loop"]
    ir_module = jax.jit(f).lower(*args).compiler_ir("stablehlo")
    m = import_module(ir_module)
    assert any(op.name == "while" for op in m.walk())


def test_locations_from_jax_debug_info_point_at_this_file():
    text = jax.jit(lambda a: jnp.sin(a) * 2).lower(V).as_text(debug_info=True)
    m = import_module(text)
    files = {op.loc.file for op in m.walk() if op.loc is not None}
    assert any(f.endswith("test_stablehlo_jax.py") for f in files)
