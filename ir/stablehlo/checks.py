"""Test assertions of the StableHLO test vectors, and their semantics.

The interpreter suite writes expectations as ``check.*`` ops; the testdata suite as
``stablehlo.custom_call @check.*``. The importer (with ``collect_checks``) removes each one and
appends the values it compares to the function's results, recording a ``Check`` that says
which results to compare and how. ``Check.evaluate`` then applies the semantics of StableHLO's
reference checker (stablehlo/tests/CheckOps.cpp and the custom-call fallback in
stablehlo/tools/StablehloTranslateMain.cpp):

- ``expect_eq``: every element equal; floats compare as IEEE values, so -0 == 0 and a NaN
  never matches (the reference uses APFloat ``==``).
- ``expect_almost_eq``: floats within an absolute ``tolerance`` (default 1e-4); a NaN matches
  only a NaN; infinities match only themselves; integers and booleans must be equal.
- ``expect_close``: floats within ``[min_ulp, max_ulp]`` units in the last place; bitwise-equal
  values are 0 apart, two NaNs are 0 apart, and a non-finite value is infinitely far from
  anything it does not equal bitwise.
- ``expect_serialized_eq``: the probe's record exists, has the operand's type and equals it
  as in ``expect_eq``.
- testdata custom calls: ``check.expect_eq`` as above, ``check.expect_close`` with 0..3 ULPs,
  ``check.expect_almost_eq`` with tolerance 1e-3, and ``check.eq`` as ``expect_eq`` for
  integers and booleans and ``expect_almost_eq`` (1e-4) otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import ml_dtypes
import numpy as np

from ..core import Location


@dataclass
class Check:
    """One assertion. ``actual`` and ``expected`` index the entry function's results;
    ``expected_value`` holds the constant of a ``*_const`` check instead of ``expected``;
    ``present``, when set, indexes a pred scalar that must be true for ``expected`` to exist
    (``absent`` says what is missing otherwise: a probe record, see ``probes.py``)."""

    kind: str  # "expect_eq", "expect_almost_eq", "expect_close"
    actual: int
    expected: Optional[int] = None
    expected_value: Optional[np.ndarray] = None
    tolerance: float = 1e-4
    min_ulp: int = 0
    max_ulp: int = 1
    present: Optional[int] = None
    absent: str = ""
    op: str = ""  # the op as written, e.g. "check.expect_eq_const" or "custom_call @check.eq"
    loc: Optional[Location] = None

    def evaluate(self, results: Sequence[np.ndarray]) -> Optional[str]:
        """None when the check holds on ``results``, else a message describing the mismatch."""
        where = f" at {self.loc}" if self.loc is not None else ""
        if self.present is not None and not bool(np.asarray(results[self.present])):
            return f"{self.op}{where}: {self.absent}"
        actual = np.asarray(results[self.actual])
        expected = np.asarray(self.expected_value if self.expected is None else results[self.expected])
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            return (f"{self.op}{where}: result is {actual.dtype}{list(actual.shape)}, "
                    f"expected {expected.dtype}{list(expected.shape)}")
        if self.kind == "expect_eq":
            bad = ~_equal(actual, expected)
            detail = ""
        elif self.kind == "expect_almost_eq":
            bad = ~_almost_equal(actual, expected, self.tolerance)
            detail = f" with tolerance {self.tolerance:g}"
        elif self.kind == "expect_close":
            if not (_is_float(actual) or actual.dtype.kind == "c"):
                return f"{self.op}{where}: expect_close needs floating-point values, got {actual.dtype}"
            ulps = ulp_difference(actual, expected)
            bad = (ulps > self.max_ulp) | (ulps < self.min_ulp)
            detail = f" within {self.min_ulp}..{self.max_ulp} ULP"
        else:
            return f"{self.op}{where}: unknown check kind {self.kind}"
        if not bad.any():
            return None
        idx = np.argwhere(bad)
        shown = []
        for i in idx[:3]:
            i = tuple(int(x) for x in i)
            a, e = actual[i], expected[i]
            extra = f", ULP difference {int(np.asarray(ulp_difference(np.asarray(a), np.asarray(e))).reshape(-1)[0])}" \
                if self.kind == "expect_close" else ""
            shown.append(f"index {list(i)}: {_fmt(a)} (actual) vs {_fmt(e)} (expected){extra}")
        more = f" (and {len(idx) - 3} more)" if len(idx) > 3 else ""
        return (f"{self.op}{where}: {len(idx)} of {actual.size} element(s) differ{detail}: "
                + "; ".join(shown) + more)


def _fmt(x) -> str:
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return f"({_fmt(x.real)}, {_fmt(x.imag)})"
    if _is_float(x):
        return repr(float(x))
    return str(x[()])


def _is_float(a: np.ndarray) -> bool:
    """numpy's floats and ml_dtypes's (bfloat16, the 8-bit and narrower floats)."""
    if a.dtype.kind == "f":
        return True
    try:
        ml_dtypes.finfo(a.dtype)
    except (ValueError, TypeError):
        return False
    return True


def _parts(a: np.ndarray):
    return np.array(a.real), np.array(a.imag)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return a == b
    if _is_float(a):
        return a.astype(np.float64) == b.astype(np.float64)
    return a == b


def _almost_equal(a: np.ndarray, b: np.ndarray, tol: float) -> np.ndarray:
    if a.dtype.kind == "c":  # both parts within the tolerance
        (ar, ai), (br, bi) = _parts(a), _parts(b)
        return _almost_equal(ar, br, tol) & _almost_equal(ai, bi, tol)
    if not _is_float(a):
        return a == b
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        eq = x == y
        both_nan = np.isnan(x) & np.isnan(y)
        finite = np.isfinite(x) & np.isfinite(y)
        close = finite & (np.abs(x - y) <= tol)
    return eq | both_nan | close


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}").astype(np.uint64)


def ulp_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ULP distance of two float arrays of one dtype (uint64; all-ones = infinite);
    for complex arrays the larger of the two parts' distances."""
    if np.asarray(a).dtype.kind == "c":
        (ar, ai), (br, bi) = _parts(np.asarray(a)), _parts(np.asarray(b))
        return np.maximum(ulp_difference(ar, br), ulp_difference(ai, bi))
    shape = np.shape(a)
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    width = a.dtype.itemsize * 8
    ba, bb = _bits(a.reshape(-1)), _bits(b.reshape(-1))
    sign = np.uint64(1) << np.uint64(width - 1)
    mag_a, mag_b = ba & ~sign, bb & ~sign
    neg_a, neg_b = (ba & sign) != 0, (bb & sign) != 0
    x, y = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    finite = np.isfinite(x) & np.isfinite(y)
    diff = np.where(neg_a != neg_b, mag_a + mag_b,
                    np.where(mag_a > mag_b, mag_a - mag_b, mag_b - mag_a))
    out = np.full(ba.shape, np.iinfo(np.uint64).max, dtype=np.uint64)
    out[finite] = diff[finite]
    out[np.isnan(x) & np.isnan(y)] = 0
    out[ba == bb] = 0
    return out.reshape(shape)


def evaluate_all(checks: List[Check], results: Sequence[np.ndarray]) -> List[str]:
    """The failure messages of every check that does not hold."""
    out = []
    for c in checks:
        msg = c.evaluate(results)
        if msg is not None:
            out.append(msg)
    return out
