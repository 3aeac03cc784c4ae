"""hlo.numpy.fft against numpy's pocketfft (computed in complex128): random complex and real
inputs, 1-D to 3-D, odd and even lengths (powers of two, short lengths through the DFT matrix,
long ones through Bluestein), crop/pad, axes and the three norm modes, on every target;
gradients against jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp

RTOL = {np.complex64: 2e-5, np.complex128: 1e-12, np.float32: 2e-5, np.float64: 1e-12}


def _close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(np.abs(want).max(), 1e-30)
    err = np.abs(got.astype(np.complex128) - want).max() / scale
    assert err <= RTOL[dtype], err


def _cplx(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 12, 64, 67, 100, 256])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_fft_ifft_1d(target, n, dtype):
    rng = np.random.default_rng(n)
    x = _cplx(rng, (3, n), dtype)
    for norm in (None, "ortho", "forward"):
        got = hlo.jit(lambda a: (hnp.fft.fft(a, norm=norm), hnp.fft.ifft(a, norm=norm)), target=target)(x)
        assert got[0].dtype == dtype
        _close(got[0], np.fft.fft(x.astype(np.complex128), norm=norm), dtype)
        _close(got[1], np.fft.ifft(x.astype(np.complex128), norm=norm), dtype)


@pytest.mark.parametrize("n", [2, 9, 16, 33])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rfft_irfft_1d(target, n, dtype):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((2, n)).astype(dtype)
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    spec = np.fft.rfft(x.astype(np.float64))
    got = hlo.jit(lambda a, s: (hnp.fft.rfft(a), hnp.fft.irfft(s, n=n)), target=target)(x, spec.astype(cdt))
    assert got[0].dtype == cdt and got[1].dtype == dtype
    _close(got[0], spec, cdt)
    _close(got[1], np.fft.irfft(spec.astype(cdt).astype(np.complex128), n=n), dtype)


@pytest.mark.parametrize("shape", [(4, 6), (5, 3, 8), (3, 4, 5, 6)])
def test_fftn_rfftn_irfftn(target, shape):
    rng = np.random.default_rng(len(shape))
    x = _cplx(rng, shape, np.complex128)
    xr = x.real.copy()
    axes = list(range(len(shape)))[-3:]
    got = hlo.jit(lambda a, r: (hnp.fft.fftn(a, axes=axes), hnp.fft.ifftn(a, axes=axes, norm="ortho"),
                                hnp.fft.rfftn(r, axes=axes), hnp.fft.irfftn(a, axes=axes)),
                  target=target)(x, xr)
    _close(got[0], np.fft.fftn(x, axes=axes), np.complex128)
    _close(got[1], np.fft.ifftn(x, axes=axes, norm="ortho"), np.complex128)
    _close(got[2], np.fft.rfftn(xr, axes=axes), np.complex128)
    _close(got[3], np.fft.irfftn(x, axes=axes), np.float64)


def test_fft2_axes_crop_pad_and_helpers(target):
    rng = np.random.default_rng(3)
    x = _cplx(rng, (5, 6, 7), np.complex64)
    got = hlo.jit(lambda a: (hnp.fft.fft2(a, s=(4, 9), axes=(0, 2)), hnp.fft.fft(a, n=3, axis=1),
                             hnp.fft.fftshift(a, axes=(1,)), hnp.fft.hfft(a[0, 0])), target=target)(x)
    _close(got[0], np.fft.fft2(x, s=(4, 9), axes=(0, 2)), np.complex64)
    _close(got[1], np.fft.fft(x, n=3, axis=1), np.complex64)
    np.testing.assert_array_equal(got[2], np.fft.fftshift(x, axes=(1,)))
    _close(got[3], np.fft.hfft(x[0, 0].astype(np.complex128)), np.float32)
    np.testing.assert_allclose(hnp.fft.fftfreq(8, 0.5), np.fft.fftfreq(8, 0.5).astype(np.float32))


def test_real_and_integer_inputs_promote_like_jax(target):
    x = np.arange(8, dtype=np.int32)
    got = hlo.jit(hnp.fft.fft, target=target)(x)
    assert got.dtype == np.complex64
    _close(got, np.fft.fft(x), np.complex64)


def test_gradient_of_a_spectrum_norm_matches_jax():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(12).astype(np.float32)

    def f(a, fft, absf):
        return absf(fft(a * 1.5)[1:5]).sum()

    g = hlo.grad(lambda a: f(a, hnp.fft.rfft, hnp.abs))(x)
    want = jax.grad(lambda a: f(a, jnp.fft.rfft, jnp.abs))(x)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="norm"):
        hnp.fft.fft(np.ones(4, np.complex64), norm="bad")
    with pytest.raises(hlo.errors.DTypeError, match="real array"):
        hnp.fft.rfft(np.ones(4, np.complex64))
