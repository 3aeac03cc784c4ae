"""jax.lax's small types and identities in hlo.lax (issue 34): Precision, GatherScatterMode,
DotDimensionNumbers, stage and composite, against jax.lax."""
import numpy as np
import pytest

import hlo
import hlo.lax as hl

jax = pytest.importorskip("jax")

R = np.random.default_rng(2)
X = R.standard_normal(6).astype(np.float32)
M = R.standard_normal((3, 4)).astype(np.float32)
IDX = np.array([[7], [1], [-2]], np.int32)


def _gather(lax, mode):
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    return lambda x: lax.gather(x, IDX, dn, (1,), mode=mode, fill_value=-1.0 if mode == lax.GatherScatterMode.FILL_OR_DROP else None)


def _program(lax):
    dn = (((1,), (0,)), ((), ()))
    return lambda x, m: dict(
        clip=_gather(lax, lax.GatherScatterMode.CLIP)(x),
        fill=_gather(lax, lax.GatherScatterMode.FILL_OR_DROP)(x),
        dot=lax.dot_general(m, m.T, dn, precision=lax.Precision.HIGHEST),
        dot2=lax.dot(m, m.T, precision=(lax.Precision.HIGH, lax.Precision.DEFAULT)),
        composite=lax.composite(lambda a, b: lax.exp(a) * b, name="my.expmul")(x, x),
        stage=lax.stage(2.5) * x)


def test_against_jax():
    want = jax.jit(_program(jax.lax))(X, M)
    got = hlo.jit(_program(hl))(X, M)
    for k in want:
        np.testing.assert_allclose(got[k], np.asarray(want[k]), rtol=1e-5, atol=1e-6, err_msg=k)


def test_names_and_errors():
    assert [m.name for m in hl.GatherScatterMode] == [m.name for m in jax.lax.GatherScatterMode]
    assert [m.name for m in hl.Precision] == [m.name for m in jax.lax.Precision]
    assert hl.GatherScatterMode.from_any("clip") is hl.GatherScatterMode.CLIP
    with pytest.raises(ValueError, match="unknown mode"):
        hlo.jit(_gather(hl, hl.GatherScatterMode.ONE_HOT))(X)
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        hl.composite(lambda a: a, name="")
    assert isinstance(hl.stage(np.float32(1.5)), np.ndarray)
    f = hl.composite(lambda a: a + 1, name="inc", version=2)
    assert (f.composite_name, f.composite_version) == ("inc", 2)


@pytest.mark.parametrize("shape, filt, strides, pad, dn, rd", [
    ((2, 3, 7, 6), (3, 2), (1, 2), "SAME", None, None),
    ((1, 5, 6, 2), (2, 3), (2, 1), [(1, 0), (0, 2)], ("NHWC", "HWIO", "NHWC"), (2, 1)),
    ((2, 4, 9), (3,), (1,), "VALID", None, (2,)),
])
def test_conv_general_dilated_patches_matches_jax(shape, filt, strides, pad, dn, rd):
    x = R.standard_normal(shape).astype(np.float32)
    f = (lambda lax: lambda a: lax.conv_general_dilated_patches(a, filt, strides, pad, rhs_dilation=rd,
                                                                 dimension_numbers=dn))
    np.testing.assert_allclose(hlo.jit(f(hl))(x), np.asarray(jax.jit(f(jax.lax))(x)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, filt, strides, pad, dn", [
    ((2, 3, 7, 6), (3, 2), (1, 2), "SAME", None),
    ((1, 5, 6, 2), (2, 3), (2, 1), [(1, 0), (0, 2)], ("NHWC", "HWIO", "NHWC")),
    ((2, 4, 9), (3,), (2,), "VALID", ("NCH", "OIH", "NHC")),
])
def test_conv_general_dilated_local_matches_jax(shape, filt, strides, pad, dn):
    x = R.standard_normal(shape).astype(np.float32)
    f = (lambda lax: lambda a, w: lax.conv_general_dilated_local(a, w, strides, pad, filt, dimension_numbers=dn))
    patches = jax.lax.conv_general_dilated_patches(x, filt, strides, pad, dimension_numbers=dn)
    dns = jax.lax.conv_dimension_numbers(x.shape, (1, 1) + filt, dn)
    out_spatial = [patches.shape[d] for d in dns.out_spec[2:]]
    wshape = [0] * len(shape)
    wshape[dns.rhs_spec[0]], wshape[dns.rhs_spec[1]] = 4, patches.shape[dns.out_spec[1]]
    for d, n in zip(dns.rhs_spec[2:], out_spatial):
        wshape[d] = n
    w = R.standard_normal(wshape).astype(np.float32)
    np.testing.assert_allclose(hlo.jit(f(hl))(x, w), np.asarray(jax.jit(f(jax.lax))(x, w)), rtol=1e-5, atol=1e-5)
