"""StableHLO ops that the importer writes with hlo's own ops (``hlo.ir.decompositions``):
triangular_solve (every flag combination, complex adjoint, batches), fft (all four kinds, 1 to
3 dimensions, odd and even lengths) and rng_bit_generator (THREE_FRY, PHILOX and DEFAULT, bit-exact with XLA),
imported from jax's lowering and run on the interpreter and on the CPU against jax/numpy; the
decomposed programs export and re-import identically."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp
from jax import lax

import hlo
from hlo.ir import print_module
from hlo.ir.stablehlo import export_module, import_module

TARGETS = ["interpreter", "cpu"]


def _run(fn, args, target):
    with jax.enable_x64(True):
        text = jax.jit(fn).lower(*args).as_text()
        want = jax.jit(fn)(*args)
    module = import_module(text)
    again = import_module(export_module(module))
    assert print_module(again) == print_module(module)
    got = hlo.load_stablehlo(text).compile(target=target)(*args)
    return (got if isinstance(want, (tuple, list)) else got[0]), want


_TRI = """func.func @main(%a: tensor<{at}>, %b: tensor<{bt}>) -> tensor<{bt}> {{
  %0 = "stablehlo.triangular_solve"(%a, %b) {{left_side = {left}, lower = {lower},
      unit_diagonal = {unit}, transpose_a = #stablehlo<transpose {tr}>}} : (tensor<{at}>, tensor<{bt}>) -> tensor<{bt}>
  return %0 : tensor<{bt}>
}}"""


def _mlir_type(x):
    et = {"float32": "f32", "complex64": "complex<f32>"}[x.dtype.name]
    return "x".join(str(d) for d in x.shape) + "x" + et


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve(target, left_side, lower, transpose_a, unit_diagonal):
    rng = np.random.default_rng(0)
    dtype = np.complex64 if transpose_a == "ADJOINT" else np.float32
    n = 4
    a = rng.standard_normal((2, n, n)) + 3 * np.eye(n)
    if dtype == np.complex64:
        a = a + 1j * rng.standard_normal((2, n, n))
    keep = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    tri = np.where(keep, a, 0)
    if unit_diagonal:
        tri = np.where(np.eye(n, dtype=bool), 1, tri)
    a = np.where(keep, a, 1e30).astype(dtype)  # the other triangle must not be read
    b = rng.standard_normal((2, n, 3) if left_side else (2, 3, n)).astype(dtype)
    op = {"NO_TRANSPOSE": tri, "TRANSPOSE": np.swapaxes(tri, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(tri, -1, -2))}[transpose_a]
    bb = b.astype(np.complex128)
    want = np.linalg.solve(op, bb) if left_side else np.swapaxes(
        np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(bb, -1, -2)), -1, -2)
    text = _TRI.format(at=_mlir_type(a), bt=_mlir_type(b), left=str(left_side).lower(),
                       lower=str(lower).lower(), unit=str(unit_diagonal).lower(), tr=transpose_a)
    module = import_module(text)
    assert print_module(import_module(export_module(module))) == print_module(module)
    (got,) = hlo.load_stablehlo(text).compile(target=target)(a, b)
    np.testing.assert_allclose(np.asarray(got), want if dtype == np.complex64 else want.real,
                               rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind,shape,lengths", [
    ("fft", (3, 8), 1), ("ifft", (5,), 1), ("fft", (3, 70), 1), ("fftn", (4, 6), 2),
    ("ifftn", (2, 3, 4, 5), 3), ("rfft", (3, 9), 1), ("rfftn", (4, 5, 6), 3),
    ("irfft", (3, 5), 1), ("irfftn", (4, 6, 5), 3)])
def test_fft(target, kind, shape, lengths):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    if kind not in ("rfft", "rfftn"):
        x = x + 1j * rng.standard_normal(shape)
    x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    axes = tuple(range(len(shape) - lengths, len(shape)))
    fn = {"fft": lambda a: jnp.fft.fft(a), "ifft": lambda a: jnp.fft.ifft(a),
          "fftn": lambda a: jnp.fft.fftn(a, axes=axes), "ifftn": lambda a: jnp.fft.ifftn(a, axes=axes),
          "rfft": lambda a: jnp.fft.rfft(a), "rfftn": lambda a: jnp.fft.rfftn(a, axes=axes),
          "irfft": lambda a: jnp.fft.irfft(a), "irfftn": lambda a: jnp.fft.irfftn(a, axes=axes)}[kind]
    got, want = _run(fn, (x,), target)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-10)


RNG_SHAPES = [((), np.uint32), ((7,), np.uint32), ((3, 5), np.uint32), ((4, 6), np.uint64),
              ((5,), np.uint8), ((3, 3), np.uint16), ((2, 2), np.uint64), ((3,), np.uint64),
              ((0,), np.uint32)]
RNG_ALGORITHMS = ["RNG_THREE_FRY", "RNG_PHILOX", "RNG_DEFAULT"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("algorithm", RNG_ALGORITHMS)
@pytest.mark.parametrize("shape,dtype", RNG_SHAPES)
def test_rng_bit_generator_is_bit_exact(target, algorithm, shape, dtype):
    key = np.array([1, 4, 0xFFFFFFFF, 1], np.uint32)

    def f(k):
        return lax.rng_bit_generator(k, shape, dtype=dtype, algorithm=getattr(lax.RandomAlgorithm, algorithm))

    got, want = _run(f, (key,), target)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _xla(text, *args):
    """Run StableHLO text through jaxlib's XLA CPU compiler (results as their unsigned bits)."""
    import jax.extend
    from jax._src.lib import xla_client as xc
    backend = jax.extend.backend.get_backend("cpu")
    with jax.enable_x64(True):
        exe = backend.compile_and_load(text, xc.DeviceList(tuple(jax.devices("cpu"))))
        return [np.asarray(o) for o in exe.execute([jax.device_put(a) for a in args])]


_RNG = """func.func @main(%s: tensor<{n}xui64>) -> (tensor<{n}xui64>, tensor<{shape}x{et}>) {{
  %0:2 = "stablehlo.rng_bit_generator"(%s) {{rng_algorithm = #stablehlo<rng_algorithm {alg}>}} : (tensor<{n}xui64>) -> (tensor<{n}xui64>, tensor<{shape}x{et}>)
  return %0#0, %0#1 : tensor<{n}xui64>, tensor<{shape}x{et}>
}}"""


def _bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("alg,state", [("PHILOX", [7, 0xFFFFFFFFFFFFFFFE, 3]),
                                       ("PHILOX", [2**63 + 5, 2**64 - 3, 2**64 - 1]),
                                       ("PHILOX", [2**64 - 1, 2**64 - 2]), ("DEFAULT", [5, 9, 2**64 - 1]),
                                       ("THREE_FRY", [3, 2**64 - 2])])
@pytest.mark.parametrize("shape,et", [("5x3", "i32"), ("3", "f64"), ("2x3", "f32"), ("5", "i16"),
                                      ("3", "i64"), ("7", "ui8")])
def test_rng_bit_generator_matches_xla_on_any_state_and_type(target, alg, state, shape, et):
    """A u64[3] PHILOX state holds a 128-bit counter (low, high): blocks past 2^64 carry into
    high, and high wraps; signed and float outputs are the bits reinterpreted. XLA's CPU
    compiler run on the same StableHLO text is the reference."""
    s = np.array(state, np.uint64)
    text = _RNG.format(n=len(state), shape=shape, et=et, alg=alg)
    want = _xla(text, s)
    got = hlo.load_stablehlo(text).compile(target=target)(s)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))


def test_rng_bit_generator_refuses_bad_states_by_name():
    text = """func.func @main(%s: tensor<3xui64>) -> tensor<4xui32> {
  %0:2 = "stablehlo.rng_bit_generator"(%s) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : (tensor<3xui64>) -> (tensor<3xui64>, tensor<4xui32>)
  return %0#1 : tensor<4xui32>
}"""
    with pytest.raises(hlo.ir.stablehlo.UnsupportedError, match=r"THREE_FRY takes a u64\[2\] state"):
        import_module(text)
