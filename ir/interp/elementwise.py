"""Handlers of the elementwise ops: unary and binary arithmetic, compare, select, clamp,
convert, bitcast_convert, reduce_precision. They only look at element types, never at shapes,
so they also run on batches of scalars (region bodies evaluated for many elements at once)."""
from __future__ import annotations

import numpy as np

from . import complex_numerics as cx
from . import numerics as nm
from .registry import attr, handler

F64 = nm.F64


def _unary(fn):
    return lambda it, op, ins, env: [fn(ins[0])]


def _binary(fn):
    return lambda it, op, ins, env: [fn(ins[0], ins[1])]


def _float_upcast(npfn, complex_fn=None):
    """A transcendental function: float64 (complex128) computation rounded once; on complex
    values ``complex_fn`` (``complex_numerics``) where numpy's function takes no complex."""
    cfn = complex_fn or npfn
    return lambda x: cx.upcast(cfn, x) if nm.is_complex(x.dtype) else nm.upcast(npfn, x.dtype, x)


def _float_exact(npfn):
    return lambda x: cx.upcast(npfn, x) if nm.is_complex(x.dtype) else nm.exact(npfn, x.dtype, x)


_UNARY = {
    "abs": nm.abs_,
    "negate": nm.negate,
    "sign": nm.sign,
    "exponential": _float_upcast(np.exp),
    "exponential_minus_one": _float_upcast(np.expm1, cx.expm1),
    "log": _float_upcast(np.log),
    "log_plus_one": _float_upcast(np.log1p, cx.log1p),
    "logistic": nm.logistic,
    "tanh": _float_upcast(np.tanh),
    "sqrt": _float_exact(np.sqrt),
    "rsqrt": nm.rsqrt,
    "cbrt": _float_upcast(np.cbrt, cx.cbrt),
    "sine": _float_upcast(np.sin),
    "cosine": _float_upcast(np.cos),
    "tan": _float_upcast(np.tan),
    "floor": _float_exact(np.floor),
    "ceil": _float_exact(np.ceil),
    "round_nearest_even": nm.round_nearest_even,
    "round_nearest_afz": nm.round_nearest_afz,
    "not": nm.not_,
    "popcnt": nm.popcnt,
    "count_leading_zeros": nm.count_leading_zeros,
    "is_finite": nm.is_finite,
}

_BINARY = {
    "add": nm.add, "subtract": nm.subtract, "multiply": nm.multiply, "divide": nm.divide,
    "remainder": nm.remainder, "power": nm.power, "maximum": nm.maximum,
    "minimum": nm.minimum, "atan2": nm.atan2, "and": nm.bit_and, "or": nm.bit_or,
    "xor": nm.bit_xor, "shift_left": nm.shift_left,
    "shift_right_arithmetic": nm.shift_right_arithmetic,
    "shift_right_logical": nm.shift_right_logical,
}

for _name, _fn in _UNARY.items():
    handler(_name)(_unary(_fn))
for _name, _fn in _BINARY.items():
    handler(_name)(_binary(_fn))

# The scalar functions, by op name, for region bodies recognized as a single op.
BINARY_FUNCTIONS = dict(_BINARY)


@handler("compare")
def _compare(it, op, ins, env):
    return [nm.compare(ins[0], ins[1], op.attrs["comparison_direction"],
                       attr(op, "compare_type"))]


@handler("select")
def _select(it, op, ins, env):
    p, a, b = ins
    return [np.where(p, a, b).astype(a.dtype, copy=False)]


@handler("clamp")
def _clamp(it, op, ins, env):
    lo, x, hi = ins
    return [nm.minimum(nm.maximum(x, lo), hi)]


@handler("convert")
def _convert(it, op, ins, env):
    return [nm.convert(ins[0], op.results[0].type.np_dtype)]


@handler("reduce_precision")
def _reduce_precision(it, op, ins, env):
    return [nm.reduce_precision(ins[0], op.attrs["exponent_bits"], op.attrs["mantissa_bits"])]


@handler("bitcast_convert")
def _bitcast_convert(it, op, ins, env):
    rt = op.results[0].type
    return [nm.bitcast_convert(ins[0], rt.np_dtype, rt.shape)]


@handler("complex")
def _complex(it, op, ins, env):
    re_, im = ins
    out = np.empty(np.broadcast_shapes(re_.shape, im.shape), op.results[0].type.np_dtype)
    out.real = re_
    out.imag = im
    return [out]


@handler("real")
def _real(it, op, ins, env):
    x = ins[0]
    return [np.array(x.real) if nm.is_complex(x.dtype) else x]


@handler("imag")
def _imag(it, op, ins, env):
    x = ins[0]
    if nm.is_complex(x.dtype):
        return [np.array(x.imag)]
    return [np.zeros_like(x)]
