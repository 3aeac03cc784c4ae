"""hlo.numpy's functions added for jax's surface (issue 34), each against jax.numpy (or numpy
in float64) on a few shapes and dtypes, traced under hlo.jit; and the data-dependent ones'
``size=`` contract."""
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp

jax = pytest.importorskip("jax")
jnp = jax.numpy

R = np.random.default_rng(0)
F = R.standard_normal((4, 6)).astype(np.float32)
F3 = R.standard_normal((3, 4, 5)).astype(np.float32)
V = R.standard_normal(9).astype(np.float32)
W = R.standard_normal(4).astype(np.float32)
I = R.integers(-5, 6, (5, 4)).astype(np.int32)
IU = R.integers(0, 7, 12).astype(np.int32)
FN = F.copy()
FN[0, 1] = FN[2, :2] = np.nan
FN[3, :] = np.nan
B = R.integers(0, 2, (3, 11)).astype(bool)
X = np.linspace(0.0, 2.0, 11).astype(np.float32)
P = np.array([1.0, -2.0, 3.0], np.float32)
Q = np.array([2.0, 1.0], np.float32)

# (id, f(m, *args) with m = hlo.numpy or jax.numpy, args)
CASES = [
    ("quantile", lambda m, a: m.quantile(a, 0.3), (F,)),
    ("quantile-axes-q", lambda m, a: m.quantile(a, np.array([0.1, 0.9], np.float32), axis=(0, 2), keepdims=True), (F3,)),
    ("quantile-methods", lambda m, a: m.stack([m.quantile(a, 0.35, axis=1, method=k) for k in
                                              ("lower", "higher", "midpoint", "nearest")]), (F,)),
    ("percentile", lambda m, a: m.percentile(a, np.array([5.0, 50.0, 95.0], np.float32), axis=0), (F,)),
    ("nanquantile", lambda m, a: m.nanquantile(a, 0.7, axis=1), (FN,)),
    ("nanpercentile", lambda m, a: m.nanpercentile(a, 25.0, axis=0), (FN,)),
    ("nanmedian", lambda m, a: m.nanmedian(a, axis=1), (FN,)),
    ("nanvar", lambda m, a: m.nanvar(a, axis=1, ddof=1), (FN,)),
    ("nanstd", lambda m, a: m.nanstd(a), (FN,)),
    ("nanargmax", lambda m, a: m.nanargmax(a, axis=1), (FN,)),
    ("nanargmin", lambda m, a: m.nanargmin(a, axis=0), (FN,)),
    ("nancumsum", lambda m, a: m.nancumsum(a, axis=1), (FN,)),
    ("nancumprod", lambda m, a: m.nancumprod(a), (FN,)),
    ("bincount", lambda m, a: m.bincount(a, length=9), (IU,)),
    ("bincount-weights", lambda m, a, w: m.bincount(a, w, length=7), (IU, R.random(12).astype(np.float32))),
    ("histogram", lambda m, a: m.histogram(a, bins=5), (F,)),
    ("histogram-edges-density", lambda m, a: m.histogram(a, bins=np.array([-2.0, -0.5, 0.0, 1.0, 3.0], np.float32),
                                                         density=True), (F,)),
    ("histogram-range", lambda m, a: m.histogram(a, bins=4, range=(-1.0, 1.0)), (F,)),
    ("histogram_bin_edges", lambda m, a: m.histogram_bin_edges(a, bins=6), (F,)),
    ("histogram2d", lambda m, a, b: m.histogram2d(a, b, bins=3), (F[0], F[1])),
    ("histogramdd", lambda m, a: m.histogramdd(a, bins=(2, 3, 2)), (F3[0, :, :3].copy(),)),
    ("cov", lambda m, a: m.cov(a), (F,)),
    ("cov-weights", lambda m, a: m.cov(a, rowvar=False, fweights=np.arange(1, 5), aweights=np.arange(1.0, 5.0,
                                                                                                   dtype=np.float32)), (F,)),
    ("corrcoef", lambda m, a, b: m.corrcoef(a, b), (F[:2], F[2:])),
    ("nextafter", lambda m, a, b: m.nextafter(a, b), (V, V[::-1].copy())),
    ("spacing", lambda m, a: m.spacing(a), (V,)),
    ("frexp", lambda m, a: m.frexp(a), (np.concatenate([V * 1e3, [0.0, np.inf, -1e-30]]).astype(np.float32),)),
    ("ldexp", lambda m, a, b: m.ldexp(a, b), (V, R.integers(-130, 130, 9).astype(np.int32))),
    ("modf", lambda m, a: m.modf(a), (V * 5,)),
    ("gcd", lambda m, a, b: m.gcd(a, b), (I, I[::-1] * 3)),
    ("lcm", lambda m, a, b: m.lcm(a, b), (I, I[::-1] + 1)),
    ("bitwise_count", lambda m, a: m.bitwise_count(a), (I,)),
    ("packbits", lambda m, a: m.packbits(a, axis=1), (B,)),
    ("packbits-little", lambda m, a: m.packbits(a, bitorder="little"), (B,)),
    ("unpackbits", lambda m, a: m.unpackbits(a, axis=0, count=-2), (np.packbits(B, axis=0),)),
    ("i0", lambda m, a: m.i0(a), (V * 4,)),
    ("bartlett", lambda m: m.bartlett(7), ()),
    ("blackman", lambda m: m.blackman(6), ()),
    ("hamming", lambda m: m.hamming(5), ()),
    ("hanning", lambda m: m.hanning(8), ()),
    ("kaiser", lambda m, b: m.kaiser(9, b), (np.float32(3.5),)),
    ("nonzero", lambda m, a: m.nonzero(a, size=25), (I,)),
    ("nonzero-fill", lambda m, a: m.nonzero(a, size=4, fill_value=(-1, -2)), (I,)),
    ("flatnonzero", lambda m, a: m.flatnonzero(a, size=30, fill_value=-1), (I,)),
    ("argwhere", lambda m, a: m.argwhere(a > 0, size=12), (F3,)),
    ("compress", lambda m, c, a: m.compress(c, a, axis=1, size=3, fill_value=-7), (np.array([1, 0, 1, 1], bool), I)),
    ("extract", lambda m, c, a: m.extract(c, a, size=10), (I > 0, I * 2)),
    ("isin", lambda m, a, b: m.isin(a, b), (I, np.array([0, 3, -2], np.int32))),
    ("isin-invert", lambda m, a, b: m.isin(a, b, invert=True), (IU, IU[:3])),
    ("union1d", lambda m, a, b: m.union1d(a, b, size=14), (IU, I[0])),
    ("intersect1d", lambda m, a, b: m.intersect1d(a, b, size=4), (IU, I[:2].ravel())),
    ("setdiff1d", lambda m, a, b: m.setdiff1d(a, b, size=6), (IU, I[0])),
    ("setxor1d", lambda m, a, b: m.setxor1d(a, b, size=9), (IU, I[0])),
    ("unique_values", lambda m, a: m.unique_values(a, size=8), (IU,)),
    ("unique_counts", lambda m, a: tuple(m.unique_counts(a, size=8)), (IU,)),
    ("unique_inverse", lambda m, a: tuple(m.unique_inverse(a, size=8)), (I,)),
    ("unique_all", lambda m, a: tuple(m.unique_all(a, size=9)), (IU,)),
    ("tril_indices", lambda m: m.tril_indices(4, -1, 5), ()),
    ("triu_indices", lambda m: m.triu_indices(3, 1), ()),
    ("tril_indices_from", lambda m, a: m.tril_indices_from(a), (F,)),
    ("triu_indices_from", lambda m, a: m.triu_indices_from(a, -1), (F,)),
    ("diag_indices", lambda m: m.diag_indices(3, 3), ()),
    ("diag_indices_from", lambda m, a: m.diag_indices_from(a), (F[:4, :4],)),
    ("mask_indices", lambda m: m.mask_indices(4, m.triu, 1, size=6), ()),
    ("indices", lambda m: m.indices((2, 3)), ()),
    ("indices-sparse", lambda m: m.indices((2, 3), sparse=True), ()),
    ("ix_", lambda m, a, b: m.ix_(a, b), (np.array([0, 2], np.int32), np.array([1, 3, 4], np.int32))),
    ("unravel_index", lambda m, a: m.unravel_index(a, (3, 4)), (np.array([0, 5, 11, -1, 7], np.int32),)),
    ("ravel_multi_index", lambda m, a, b: m.ravel_multi_index((a, b), (3, 5), mode="clip"),
     (np.array([0, 2, 4], np.int32), np.array([4, 0, -1], np.int32))),
    ("ravel_multi_index-wrap-F", lambda m, a, b: m.ravel_multi_index((a, b), (3, 5), mode="wrap", order="F"),
     (np.array([0, 2, 4], np.int32), np.array([4, 0, -1], np.int32))),
    ("select", lambda m, a: m.select([a < -0.5, a > 0.5], [a * 2, a * 10], -1.0), (F,)),
    ("choose", lambda m, a, b, c: m.choose(a, [b, c], mode="clip"), (np.array([0, 1, 2, -1], np.int32), W, W * 10)),
    ("choose-wrap", lambda m, a, b, c: m.choose(a, [b, c], mode="wrap"), (np.array([0, 1, 2, -1], np.int32), W, W * 10)),
    ("piecewise", lambda m, a: m.piecewise(a, [a < 0, a >= 0], [lambda t: -t, lambda t: t * 2]), (V,)),
    ("piecewise-otherwise", lambda m, a: m.piecewise(a, [a < -1, a > 1], [0.5, lambda t: t, 7.0]), (V,)),
    ("lexsort", lambda m, a, b: m.lexsort((a, b)), (IU, IU[::-1] % 3)),
    ("lexsort-2d", lambda m, a, b: m.lexsort((a, b), axis=0), (I, I[::-1] % 2)),
    ("fill_diagonal", lambda m, a: m.fill_diagonal(a, 7.0, inplace=False), (F,)),
    ("put", lambda m, a: m.put(a, np.array([0, 5, 9]), np.array([-1.0, -2.0], np.float32), inplace=False), (F,)),
    ("put-clip", lambda m, a: m.put(a, np.array([0, 50]), 3.0, mode="clip", inplace=False), (F,)),
    ("place", lambda m, a: m.place(a, a > 0, np.array([9.0, 8.0], np.float32), inplace=False), (F,)),
    ("put_along_axis", lambda m, a: m.put_along_axis(a, np.array([[1], [0], [3], [5]]), -5.0, 1, inplace=False), (F,)),
    ("delete", lambda m, a: m.delete(a, np.array([0, 2]), axis=1), (F,)),
    ("delete-flat", lambda m, a: m.delete(a, slice(1, None, 3)), (F,)),
    ("insert", lambda m, a: m.insert(a, 2, np.array([[7.0], [8.0], [9.0], [10.0]], np.float32), axis=1), (F,)),
    ("insert-flat", lambda m, a: m.insert(a, np.array([0, 3]), np.array([-1.0, -2.0], np.float32)), (F,)),
    ("diagflat", lambda m, a: m.diagflat(a, 1), (W.reshape(2, 2),)),
    ("convolve", lambda m, a, b: m.convolve(a, b), (V, W)),
    ("convolve-same", lambda m, a, b: m.convolve(a, b, mode="same"), (W, V)),
    ("correlate", lambda m, a, b: m.correlate(a, b), (V, W)),
    ("correlate-full", lambda m, a, b: m.correlate(a, b, mode="full"), (W, V)),
    ("polyval", lambda m, p, x: m.polyval(p, x), (P, X)),
    ("polyadd", lambda m, a, b: m.polyadd(a, b), (P, Q)),
    ("polysub", lambda m, a, b: m.polysub(a, b), (Q, P)),
    ("polymul", lambda m, a, b: m.polymul(a, b), (P, Q)),
    ("polydiv", lambda m, a, b: m.polydiv(a, b), (np.array([1.0, 2.0, 3.0, 4.0], np.float32), Q)),
    ("polyder", lambda m, a: m.polyder(a, 2), (np.array([1.0, 2.0, 3.0, 4.0], np.float32),)),
    ("polyint", lambda m, a: m.polyint(a, 2, k=np.array([1.0, 2.0], np.float32)), (P,)),
    ("poly", lambda m, a: m.poly(a), (np.array([1.0, -2.0, 0.5], np.float32),)),
    ("vander", lambda m, a: m.vander(a, 4), (W,)),
    ("vander-increasing", lambda m, a: m.vander(a, increasing=True), (np.array([1, 2, 3], np.int32),)),
    ("trapezoid", lambda m, a: m.trapezoid(a, dx=0.5), (F,)),
    ("trapezoid-x", lambda m, a, x: m.trapezoid(a, x), (V, np.cumsum(np.abs(V)).astype(np.float32))),
    ("gradient", lambda m, a: m.gradient(a), (F,)),
    ("gradient-spacing", lambda m, a: m.gradient(a, 0.5, axis=1), (F,)),
    ("unwrap", lambda m, a: m.unwrap(a), (np.cumsum(V * 2).astype(np.float32),)),
    ("array_equiv", lambda m, a, b: m.array_equiv(a, b), (W, np.stack([W, W]))),
    ("copy", lambda m, a: m.copy(a), (F,)),
    ("resize", lambda m, a: m.resize(a, (3, 5)), (W,)),
    ("block", lambda m, a, b: m.block([[a, b], [m.ones((1, 10), np.float32)]]), (F[:1], F[1:2, :4])),
    ("dsplit", lambda m, a: tuple(m.dsplit(a, [1, 3])), (F3,)),
    ("rollaxis", lambda m, a: m.rollaxis(a, 2), (F3,)),
    ("rollaxis-start", lambda m, a: m.rollaxis(a, 0, 3), (F3,)),
    ("vecdot", lambda m, a, b: m.vecdot(a, b), (F3, F3[0])),
    ("matvec", lambda m, a, b: m.matvec(a, b), (F3, F3[0, 0])),
    ("vecmat", lambda m, a, b: m.vecmat(a, b), (F3[0, :, 0], F3)),
    ("sort_complex", lambda m, a: m.sort_complex(a), (np.array([1 + 2j, 1 - 1j, -3, 1], np.complex64),)),
    ("geomspace", lambda m: m.geomspace(1.0, 1000.0, 4), ()),
    ("geomspace-negative", lambda m: m.geomspace(-1.0, -100.0, 5, endpoint=False), ()),
    ("fromfunction", lambda m: m.fromfunction(lambda i, j: i + 2 * j, (2, 3), dtype=np.float32), ()),
    ("apply_over_axes", lambda m, a: m.apply_over_axes(m.sum, a, [0, 2]), (F3,)),
    ("apply_along_axis", lambda m, a: m.apply_along_axis(lambda r: r[:2] * m.sum(r), 1, a), (F3,)),
    ("vectorize", lambda m, a, b: m.vectorize(lambda x, y: m.where(x > y, x, y * 2))(a, b), (F, W[:, None])),
    ("vectorize-signature", lambda m, a, b: m.vectorize(lambda x, y: m.dot(x, y), signature="(n),(n)->()")(a, b),
     (F3, F3[0, 0])),
    ("isscalar", lambda m, a: m.asarray([m.isscalar(1.0), m.isscalar(a), m.isscalar(a[0, 0])]), (F,)),
]


def _tree_close(got, want, tol):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _tree_close(g, w, tol)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype or (g.dtype.kind == w.dtype.kind), (g.dtype, w.dtype)
    if g.dtype.kind in "fc":
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def _tol(name):
    return 2e-5 if name not in ("i0", "kaiser", "cov-weights") else 1e-4


def _bundle(cases, m):
    """One function computing every case (its arguments flattened), for one compile."""
    def program(*xs):
        out, i = [], 0
        for _, f, args in cases:
            out.append(f(m, *xs[i:i + len(args)]))
            i += len(args)
        return out
    return program, [a for _, _, args in cases for a in args]


# Cases whose semantics are jax's own (size=, fill_value=, inplace=False, int32 indices, the
# padded set results, -1 for an all-NaN nanargmax, ...): checked against jax.numpy. The others
# are numpy's functions and are checked against numpy (fast; jax compiling 130 functions would
# cost the suite half a minute).
JAX_REFERENCE = {
    "nanargmax", "nanargmin", "bincount", "bincount-weights", "histogramdd", "nonzero", "nonzero-fill",
    "flatnonzero", "argwhere", "compress", "extract", "union1d", "intersect1d", "setdiff1d", "setxor1d",
    "unique_values", "unique_counts", "unique_inverse", "unique_all", "mask_indices", "fill_diagonal", "put",
    "put-clip", "place", "put_along_axis", "polydiv", "isscalar", "unravel_index", "histogram",
    "histogram-edges-density", "histogram-range", "histogram_bin_edges", "histogram2d",
}


@pytest.fixture(scope="module")
def references():
    """Each case's expected result: from numpy, or from one jax.jit of all jax-checked cases."""
    import warnings
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy on the all-NaN rows, on purpose
        out = {name: f(np, *args) for name, f, args in CASES if name not in JAX_REFERENCE}
    jcases = [c for c in CASES if c[0] in JAX_REFERENCE]
    program, args = _bundle(jcases, jnp)
    out.update(zip([c[0] for c in jcases], jax.jit(program)(*args)))
    return out


# Each case runs on the reference interpreter (a compile per case on the CPU backend would cost
# the suite a minute); one program of many cases is compiled for the CPU below.
@pytest.mark.parametrize("name, f, args", CASES, ids=[c[0] for c in CASES])
def test_against_numpy_or_jax(name, f, args, references):
    got = hlo.jit(lambda *a: f(hnp, *a), target="interpreter")(*args)
    _tree_close(got, references[name], _tol(name))


COMPILED = ["quantile-axes-q", "nanvar", "nanargmax", "histogram", "cov-weights", "ldexp", "frexp", "gcd",
            "packbits", "unpackbits", "i0", "nonzero-fill", "isin", "setdiff1d", "unique_all", "lexsort",
            "put_along_axis", "insert", "convolve", "polydiv", "gradient", "unwrap", "vectorize-signature",
            "apply_along_axis", "select", "piecewise"]


def test_the_cpu_backend_computes_the_references(references):
    cases = [c for c in CASES if c[0] in COMPILED]
    assert len(cases) == len(COMPILED)
    program, args = _bundle(cases, hnp)
    for (name, _, _), g in zip(cases, hlo.jit(program)(*args)):
        _tree_close(g, references[name], _tol(name))


def test_dtype_aliases_are_jax_numpys():
    for n in ("bool", "single", "double", "csingle", "cdouble", "int_", "uint", "float_", "complex_"):
        assert np.dtype(getattr(hnp, n)) == np.dtype(getattr(jnp, n)), n
    assert hnp.isdtype(np.float32, "real floating") and hnp.isdtype(hnp.bfloat16, ("bool", "real floating"))
    assert not hnp.isdtype(np.int8, "unsigned integer") and hnp.iterable([1]) and not hnp.iterable(3)


@pytest.mark.parametrize("dt", [np.float64, np.float16])
def test_float_bits_are_numpys_in_other_widths(dt):
    x = np.array([0.0, -0.0, 1.0, -1.5, 1e-5, np.inf, -np.inf, np.nan, 7.25, 100.0], dt)
    y = np.array([1.0, -1.0, 0.0, -2.0, 1.0, 0.0, 0.0, 1.0, 7.25, np.inf], dt)
    np.testing.assert_array_equal(hnp.nextafter(x, y), np.nextafter(x, y))
    m, e = hnp.frexp(x)
    nm, ne = np.frexp(x)
    np.testing.assert_array_equal(m, nm)
    np.testing.assert_array_equal(e, ne)
    k = np.array([0, 3, -3, -20, 5, 1, 1, 0, -20, 4], np.int32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(hnp.ldexp(x, k), np.ldexp(x, k))
    if dt == np.float64:
        np.testing.assert_array_equal(hnp.spacing(x[:5]), np.spacing(x[:5]))


def test_float64_paths_against_numpy():
    x = np.linspace(0, 1, 20)
    y = 3 * x ** 2 - x + 0.5 + 0.01 * np.sin(9 * x)
    np.testing.assert_allclose(hnp.polyfit(x, y, 2), np.polyfit(x, y, 2), rtol=1e-9)
    c, res, rank, s, _ = hnp.polyfit(x, np.stack([y, -y], 1), 3, full=True)
    np.testing.assert_allclose(c, np.polyfit(x, np.stack([y, -y], 1), 3), rtol=1e-9, atol=1e-12)
    a = R.standard_normal((5, 7))
    np.testing.assert_allclose(hnp.quantile(a, [0.2, 0.5], axis=1), np.quantile(a, [0.2, 0.5], axis=1), rtol=1e-12)
    np.testing.assert_allclose(hnp.cov(a, ddof=0), np.cov(a, ddof=0), rtol=1e-12)
    np.testing.assert_allclose(hnp.convolve(a[0], a[1][:3], "same"), np.convolve(a[0], a[1][:3], "same"), rtol=1e-12)
    big, kern = R.standard_normal(3000), R.standard_normal(1500)  # the convolution-op path
    np.testing.assert_allclose(hnp.convolve(big, kern), np.convolve(big, kern), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(hnp.i0(np.array([0.5, 7.9, 8.1, 30.0])), np.i0([0.5, 7.9, 8.1, 30.0]), rtol=1e-13)
    sub = np.array([1e-40, -3e-42, 1.5], np.float32)  # subnormal float32 (jax 0.10's frexp flushes them)
    np.testing.assert_array_equal(hnp.frexp(sub)[0], np.frexp(sub)[0])
    np.testing.assert_array_equal(hnp.frexp(sub)[1], np.frexp(sub)[1])
    z = np.zeros((7, 3))
    want = z.copy()
    np.fill_diagonal(want, [1.0, 2.0], wrap=True)  # (jax has no wrap=True)
    np.testing.assert_array_equal(hnp.fill_diagonal(z, np.array([1.0, 2.0]), wrap=True, inplace=False), want)


@pytest.mark.parametrize("call", [
    lambda a: hnp.nonzero(a), lambda a: hnp.argwhere(a), lambda a: hnp.flatnonzero(a),
    lambda a: hnp.unique_values(a), lambda a: hnp.union1d(a, a), lambda a: hnp.extract(a > 0, a),
    lambda a: hnp.bincount(a),
])
def test_data_dependent_shapes_need_size_under_jit_and_not_on_concrete_arrays(call):
    a = np.array([0, 3, 0, 1, 2], np.int32)
    with pytest.raises(TypeError, match="length="if call.__code__.co_names[-1] == "bincount" else "size="):
        hlo.jit(call)(a)
    got = call(a)  # concrete: the size is measured, as jax outside jit
    name = call.__code__.co_names[-1]
    want = getattr(jnp, name)(*([a, a] if name == "union1d" else [a > 0, a] if name == "extract" else [a]))
    _tree_close(got, want, 0)


def test_inplace_updates_are_refused_as_in_jax():
    for f in (lambda: hnp.put(F, [0], 1.0), lambda: hnp.place(F, F > 0, [1.0]),
              lambda: hnp.fill_diagonal(F, 0.0), lambda: hnp.put_along_axis(F, np.zeros((4, 1), int), 0.0, 1)):
        with pytest.raises(ValueError, match="inplace=False"):
            f()
    with pytest.raises(TypeError, match="mode='clip'"):
        hlo.jit(lambda i: hnp.choose(i, [W, W]))(np.zeros(4, np.int32))
    with pytest.raises(hlo.errors.UnsupportedError, match="eigenvalues"):
        hnp.poly(np.eye(2))


def test_new_functions_differentiate():
    def f(m, a):
        return (m.sum(m.quantile(a, 0.3, axis=1)) + m.sum(m.convolve(a[0], a[1, :3]) ** 2) + m.nanvar(a)
                + m.sum(m.polyval(a[2, :3], a[3])))
    g = hlo.grad(lambda a: f(hnp, a))(F)
    jg = jax.grad(lambda a: f(jnp, a))(F)
    np.testing.assert_allclose(g, jg, rtol=1e-4, atol=1e-5)


def test_trim_zeros_on_concrete_arrays_and_a_clear_error_when_traced():
    for a, trim in [(np.array([0, 0, 1, 2, 0, 3, 0]), "fb"), (np.array([0, 0, 1, 2, 0]), "f"),
                    (np.array([0, 1, 0, 0]), "b"), (np.zeros(3), "fb")]:
        np.testing.assert_array_equal(hnp.trim_zeros(a, trim), np.trim_zeros(a, trim))
    with pytest.raises(TypeError, match="concrete array"):
        hlo.jit(hnp.trim_zeros)(np.ones(3))


def test_numpys_host_functions_are_there_for_jax_code(tmp_path):
    x = np.arange(6.0).reshape(2, 3)
    hnp.save(tmp_path / "x.npy", x)
    y = hnp.load(tmp_path / "x.npy")
    np.testing.assert_array_equal(hlo.jit(lambda a: a * 2)(y), x * 2)
    np.testing.assert_array_equal(hnp.frombuffer(b"\x01\x02", dtype=np.uint8), [1, 2])
    assert hnp.array_str(x) == np.array_str(x)
    with hnp.printoptions(precision=2):
        assert hnp.get_printoptions()["precision"] == 2
    with pytest.raises(hlo.errors.TracerArrayConversionError):
        hlo.jit(lambda a: hnp.array_repr(a))(x)
