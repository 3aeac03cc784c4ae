"""f32 exp's power-of-two scaling (backends/mathlib.py: both exponent biases carried in the
rounding constant, 2**n formed as two factors from the rounded value's bits): every float at the
scale's edges, where a wrong bias or a lost bit would show (subnormal results from -104 to
-87.3, normal results near the underflow threshold, overflow from 88.72), against numpy in
float64; NaN inputs with payload bits in the low 9 bits (the bits the scale reads) stay NaN."""
import numpy as np
import pytest
from cpu_helpers import compile_text, unary_src


def _floats_between(lo: float, hi: float) -> np.ndarray:
    """Every f32 in [lo, hi) for 0 <= lo < hi, or in (hi, lo] mirrored when both are <= 0."""
    a, b = (np.float32(abs(lo)), np.float32(abs(hi)))
    a, b = min(a, b), max(a, b)
    bits = np.arange(a.view(np.uint32), b.view(np.uint32), dtype=np.uint32)
    if lo < 0 or hi < 0:
        bits |= np.uint32(0x80000000)
    return bits.view(np.float32)


def _run_exp(x: np.ndarray) -> np.ndarray:
    exe = compile_text(unary_src("exponential", f"f32[{x.size}]"))
    return exe.run([x])[0]


@pytest.mark.parametrize("lo,hi,max_ulp", [
    (-104.5, -87.0, 1.0),   # subnormal and tiny normal results: ulp of the subnormal grid
    (-87.0, -80.0, 1.5),
    (80.0, 89.0, 1.5),      # up to and past the overflow threshold
])
def test_exp_every_float_at_the_scale_edges(lo, hi, max_ulp):
    x = _floats_between(lo, hi)
    got = _run_exp(x)
    ref64 = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        ref32 = ref64.astype(np.float32)
    # overflow and underflow land exactly where the correctly rounded result does (allowing one
    # float of slack at each threshold for the approximation's last-ulp error)
    inf_got, inf_ref = np.isinf(got), np.isinf(ref32)
    assert np.count_nonzero(inf_got != inf_ref) <= 1
    zero_got, zero_ref = got == 0, ref32 == 0
    assert np.count_nonzero(zero_got != zero_ref) <= 1
    ok = np.isfinite(got) & np.isfinite(ref32)
    spacing = np.spacing(np.abs(ref32[ok])).astype(np.float64)
    err = np.abs(got[ok].astype(np.float64) - ref64[ok]) / spacing
    assert err.max() <= max_ulp, (err.max(), x[ok][np.argmax(err)])
    assert not np.any(np.isnan(got))


def test_exp_nan_payloads_and_specials():
    payloads = np.array([0x7FC00000, 0x7FC00001, 0x7FC001FF, 0x7F800001, 0x7FBFFFFF,
                         0xFFC00000, 0xFFC0017F, 0xFF800155], np.uint32).view(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 88.72283, 88.722839,
                         -103.97, -103.973, 1000.0, -1000.0], np.float32)
    got = _run_exp(np.concatenate([payloads, specials]))
    assert np.all(np.isnan(got[:payloads.size]))
    want = np.array([1.0, 1.0, np.inf, 0.0, 1.0, 1.0], np.float32)
    assert np.array_equal(got[payloads.size:payloads.size + 6], want)
    assert np.isfinite(got[payloads.size + 6]) and np.isinf(got[payloads.size + 7])
    assert got[payloads.size + 8] == np.float32(1e-45) and got[payloads.size + 9] == 0.0
    assert np.isinf(got[-2]) and got[-1] == 0.0
