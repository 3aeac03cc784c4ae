"""hlo.lax.cumlogsumexp: the running ``log(sum(exp(x)))`` along an axis, as the work-efficient
associative scan (``hlo.ir.prefix_scan``) of a stable ``logaddexp`` (exact at -inf and inf,
no overflow), like jax's."""
from __future__ import annotations

from .. import dtypes
from ..errors import DTypeError
from ..ir import prefix_scan
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import elementwise as ew
from .common import as_tracer, canonical_axis
from .reductions import _TracerScanOps


def _logaddexp(a: Tracer, b: Tracer) -> Tracer:
    amax = ew.max(a, b)
    delta = ew.sub(a, b)
    isnan = ew.ne(delta, delta)  # both infinite of one sign (or a NaN): a + b is the answer
    one = ew.log1p(ew.exp(ew.neg(ew.abs(delta))))
    return ew.select(isnan, ew.add(a, b), ew.add(amax, one))


@api_function
def cumlogsumexp(operand, axis: int = 0, reverse: bool = False) -> Tracer:
    """``log(cumsum(exp(operand)))`` along ``axis`` (from the end when ``reverse``), computed
    without overflow."""
    x = as_tracer(operand, what="lax.cumlogsumexp")
    if not dtypes.is_float(x.dtype):
        raise DTypeError(f"lax.cumlogsumexp: the operand must be floating-point, got {x.aval.str_short()}")
    ax = canonical_axis("lax.cumlogsumexp", axis, x.ndim)
    if x.shape[ax] == 0:
        return x
    return prefix_scan.scan(_TracerScanOps(x.weak_type), _logaddexp, x, ax, reverse)
