"""The correctness check every system passes before it is timed: outputs against the float64 numpy
reference, elementwise, |out - ref| <= rtol*|ref| + atol*max|ref| per output.

The tolerances are per element type (the case's dtype): loose enough for reassociated sums,
approximate transcendental functions and f16/bf16 rounding, tight enough that a wrong formula, a
wrong constant (eps, scale) or a wrong gradient fails.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# dtype -> (rtol, atol as a fraction of the output's largest magnitude)
TOLERANCES = {"f32": (5e-5, 5e-6), "f16": (1.5e-2, 4e-3), "bf16": (6e-2, 2e-2)}


@dataclass
class CheckResult:
    ok: bool
    worst: float          # largest |err| / allowed over all elements and outputs (<= 1 passes)
    max_rel_err: float    # largest |err| / max|ref| over the outputs
    message: str


def _f64(a) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(np.float64)


def _eps(dtype) -> float:
    try:
        return float(np.finfo(dtype).eps)
    except ValueError:                                # bfloat16 and friends
        import ml_dtypes
        return float(ml_dtypes.finfo(dtype).eps)


def check_outputs(dtype: str, inputs: list, outs: list, refs: list, delta_of: dict | None = None) -> CheckResult:
    """Compare ``outs`` with ``refs`` (float64). ``delta_of[i] = j`` compares output i minus input j
    (an update) instead of output i itself."""
    rtol, atol = TOLERANCES[dtype]
    delta_of = delta_of or {}
    if len(outs) != len(refs):
        return CheckResult(False, float("inf"), float("inf"),
                           f"{len(outs)} outputs, the reference has {len(refs)}")
    worst, max_rel = 0.0, 0.0
    where = ""
    for i, (o, r) in enumerate(zip(outs, refs)):
        o, r = _f64(o), _f64(r)
        if o.shape != r.shape:
            return CheckResult(False, float("inf"), float("inf"),
                               f"output {i} has shape {o.shape}, the reference {r.shape}")
        slack = 0.0
        if i in delta_of:
            raw = np.asarray(inputs[delta_of[i]])
            base = _f64(raw)
            o, r = o - base, r - base
            # the stored parameter is rounded to its dtype: allow that rounding in the update
            slack = _eps(raw.dtype) * np.abs(base)
        if not np.all(np.isfinite(o)):
            return CheckResult(False, float("inf"), float("inf"), f"output {i} has non-finite values")
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        diff = np.abs(o - r)
        allowed = rtol * np.abs(r) + atol * (scale if scale > 0 else 1.0) + slack
        ratio = float(np.max(diff / allowed)) if r.size else 0.0
        rel = float(np.max(diff)) / (scale if scale > 0 else 1.0) if r.size else 0.0
        max_rel = max(max_rel, rel)
        if ratio > worst:
            worst = ratio
            k = np.unravel_index(int(np.argmax(diff / allowed)), r.shape) if r.ndim else ()
            where = f"output {i}{'' if i not in delta_of else ' (update)'} at {tuple(int(j) for j in k)}: " \
                    f"got {o[k]:.6g}, reference {r[k]:.6g}"
    ok = worst <= 1.0
    return CheckResult(ok, worst, max_rel, "ok" if ok else f"{worst:.3g}x over tolerance; worst {where}")
