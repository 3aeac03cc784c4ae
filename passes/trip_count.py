"""A ``while`` loop's known trip count: the shape ``fori_loop`` gives a loop with constant bounds.

    %i, ... = while(%c0, ...) { ^cond(%k, ...): compare(%k, %N) LT   ^body(%k, ...): add(%k, 1) ... }

with ``c0`` and ``N`` integer constants runs its body ``max(0, N - c0)`` times, and its condition
computes nothing else. A runtime that knows this need not evaluate the condition or read its
predicate back: the CUDA runtime queues every step without waiting for the device between them
(``runtime/cuda/launch.py``), as XLA does for loops with a known trip count.

The analysis reads the optimized program, so it looks through fusions: a fusion's result is the
value its body returns, with the body's parameters standing for the fusion's operands. Anything
else (another comparison, a counter stepped by a computed amount, a bound that is not a
constant) gives None: the loop then tests its condition every step, as before.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from hlo.ir.core import Operation, Value


def _source(v: Value, env: Dict[Value, Value]) -> Tuple[Value, Dict[Value, Value]]:
    """``v`` with fusion results replaced by what their bodies return and fusion parameters by
    the fusions' operands (``env`` maps the parameters already passed through)."""
    for _ in range(64):
        if v in env:
            v = env[v]
            continue
        op = v.op
        if op is None or op.name != "fusion":
            return v, env
        body = op.regions[0]
        env = {**env, **dict(zip(body.args, op.operands))}
        v = body.outputs[list(op.results).index(v)]
    return v, env


def _int_constant(v: Value, env: Dict[Value, Value]) -> Optional[int]:
    v, _ = _source(v, env)
    op = v.op
    if op is None or op.name != "constant" or not v.dtype.is_int:
        return None
    a = np.asarray(op.attrs["value"])
    return int(a.reshape(-1)[0]) if a.size == 1 else None


def _is(v: Value, env: Dict[Value, Value], target: Value) -> bool:
    return _source(v, env)[0] is target


def known_trip_count(op: Operation) -> Optional[int]:
    """How many times the body of ``op`` (a ``while``) runs, when that is known before it runs
    (see the module's docstring); None otherwise."""
    if op.name != "while" or len(op.regions) != 2:
        return None
    cond, body = op.regions
    if len(cond.outputs) != 1:
        return None
    pred, env = _source(cond.outputs[0], {})
    test = pred.op
    if test is None or test.name != "compare" or test.attrs.get("comparison_direction") != "LT":
        return None
    if test.attrs.get("compare_type", "SIGNED") not in ("SIGNED", "UNSIGNED"):
        return None
    x, bound = test.operands
    ks = [k for k, a in enumerate(cond.args) if _is(x, env, a)]
    n = _int_constant(bound, env)
    if len(ks) != 1 or n is None:
        return None
    k = ks[0]
    start = _int_constant(op.operands[k], {})
    step, benv = _source(body.outputs[k], {})
    if start is None or step.op is None or step.op.name != "add":
        return None
    a, b = step.op.operands
    if not any(_is(p, benv, body.args[k]) and _int_constant(q, benv) == 1 for p, q in ((a, b), (b, a))):
        return None
    return max(0, n - start)
