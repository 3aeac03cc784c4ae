"""Float max/min reductions take a fast vectorized path that ignores the order of -0 and +0
(``nsz``) and rerun exactly when the result is a zero; NaN still propagates. Checked bit for
bit (sign of zero included) against the interpreter, row by row, over rows built to hit every
case: all -0, -0 and +0 mixed, a NaN anywhere, infinities, ordinary values."""
import numpy as np
import pytest
from cpu_helpers import check


def _src(op, dt, rows, cols, init):
    t = f"{dt}[{rows},{cols}]"
    return f"""module @m
func @main(%x: {t}) -> ({dt}[{rows}]) {{
  %i = constant dense<{init}> : {dt}[]
  %r = reduce(%x, %i) {{dimensions = [1]}} : {dt}[{rows}] {{
    ^body(%a: {dt}[], %b: {dt}[]):
      %m = {op}(%a, %b) : {dt}[]
      return(%m)
  }}
  return(%r)
}}
"""


def _rows(dtype, cols, rng):
    z = np.zeros(cols, dtype)
    rows = [
        -z,                                     # all -0: the result is -0
        z,                                      # all +0
        np.where(np.arange(cols) == cols // 2, z, -z),   # one +0 among -0
        np.where(np.arange(cols) == cols - 1, -z, z),    # one -0 among +0
        rng.standard_normal(cols).astype(dtype),
        -np.abs(rng.standard_normal(cols)).astype(dtype),  # all negative
    ]
    r = rng.standard_normal(cols).astype(dtype)
    r[cols // 3] = np.nan
    rows.append(r)
    r = -z.copy()
    r[-1] = np.nan                              # NaN last, among zeros
    rows.append(r)
    r = rng.standard_normal(cols).astype(dtype)
    r[0], r[1] = np.inf, -np.inf
    rows.append(r)
    r = np.full(cols, -np.inf, dtype)
    rows.append(r)
    r = np.where(rng.random(cols) < 0.5, z, -z)  # a random mix of signed zeros
    rows.append(r)
    return np.stack(rows)


@pytest.mark.parametrize("op,init", [("maximum", "-inf"), ("minimum", "inf"),
                                     ("maximum", "-0.0"), ("minimum", "0.0")])
@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("cols", [7, 64, 1000])
def test_minmax_reduce_is_exact(op, init, dt, cols):
    rng = np.random.default_rng(cols)
    dtype = np.float32 if dt == "f32" else np.float64
    x = _rows(dtype, cols, rng)
    if op == "minimum":
        x = -x
    check(_src(op, dt, x.shape[0], cols, init), [x])


def test_nan_init_propagates():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    check(_src("maximum", "f32", 3, 8, "0x7FC00000"), [x])
