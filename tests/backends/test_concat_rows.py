"""A CPU loop kernel whose root is a concatenate along an outer dimension runs each row in the
operand that holds it (backends/cpu/concat_rows.py): compiled results against numpy, for
operands of one and several rows, empty operands, fused producers and a column-major result."""
import numpy as np
import pytest
from cpu_helpers import check

import hlo
import hlo.numpy as hnp

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("axis", [0, 1])
def test_concatenate_of_fused_slices_along_an_outer_axis(axis):
    a = RNG.standard_normal((5, 6, 7)).astype(np.float32)
    b = RNG.standard_normal((5, 6, 7)).astype(np.float32)

    def f(a, b):
        parts = [a[:, :, :] * 2.0, (b + 1.0)[:1] if axis == 0 else (b + 1.0)[:, :1], a[:0] if axis == 0 else a[:, :0],
                 hnp.exp(b)[::2] if axis == 0 else hnp.exp(b)[:, ::2]]
        return hnp.concatenate(parts, axis=axis)

    def ref(a, b):
        parts = [a * 2.0, (b + 1.0)[:1] if axis == 0 else (b + 1.0)[:, :1], a[:0] if axis == 0 else a[:, :0],
                 np.exp(b)[::2] if axis == 0 else np.exp(b)[:, ::2]]
        return np.concatenate(parts, axis=axis)

    got = hlo.jit(f, target="cpu")(a, b)
    np.testing.assert_allclose(got, ref(a, b), rtol=1e-6)
    with hlo.config.override(cache=False):
        text = hlo.jit(f, target="cpu").lower(a, b).compile().as_text("llvm")
    assert "cat.0" in text      # the rows branch to their operand


def test_concatenate_into_a_column_major_result_and_along_the_inner_axis():
    # {0,1}: dimension 0 is the innermost, so that concatenate is the elemental one; the second
    # concatenates along the outer dimension of a row-major result of fused transposes
    src = """module @m
func @main(%a: f32[3,4], %b: f32[2,4]) -> (f32[5,4]{0,1}, f32[4,5]) {
  %c = concatenate(%a, %b) {dimension = 0} : f32[5,4]{0,1}
  %f = fusion(%a, %b) {kind = "loop"} : f32[4,5] {
    ^fused(%x: f32[3,4], %y: f32[2,4]):
      %tx = transpose(%x) {permutation = [1, 0]} : f32[4,3]
      %ty = transpose(%y) {permutation = [1, 0]} : f32[4,2]
      %d = concatenate(%tx, %ty) {dimension = 1} : f32[4,5]
      return(%d)
  }
  %g = fusion(%a, %b) {kind = "loop"} : f32[5,4] {
    ^fused(%x: f32[3,4], %y: f32[2,4]):
      %e = exponential(%x) : f32[3,4]
      %d = concatenate(%e, %y) {dimension = 0} : f32[5,4]
      return(%d)
  }
  return(%c, %f, %g)
}
""".replace("-> (f32[5,4]{0,1}, f32[4,5])", "-> (f32[5,4]{0,1}, f32[4,5], f32[5,4])")
    check(src, [RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((2, 4)).astype(np.float32)],
          rtol=1e-6)
