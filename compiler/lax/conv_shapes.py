"""jax.lax's convolution shape helpers (conv_shape_tuple, conv_general_shape_tuple,
conv_transpose_shape_tuple, reduce_window_shape_tuple, conv_general_permutations) and
conv_with_general_padding; plain Python on shapes, as in jax."""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .contractions import ConvDimensionNumbers, conv_dimension_numbers, conv_general_dilated
from .reductions import padtype_to_pads

ConvGeneralDilatedDimensionNumbers = ConvDimensionNumbers  # jax's name for the same record


def _stride_dim(d: int, window: int, stride: int) -> int:
    return max(0, (d - window) // stride + 1)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1) -> Tuple[int, ...]:
    """The output shape of a convolution in NCHW/OIHW layout."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, got "
                        f"{len(pads)}.")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError("Negative padding is larger than the size of the corresponding dimension: got padding="
                         f"{pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    space = tuple(_stride_dim(p, k, s) for p, k, s in zip(padded, rhs_shape[2:], strides))
    n = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (int(n), int(rhs_shape[0])) + space


def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) permutations to NCHW/OIHW/NCHW of string dimension numbers."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_char, rhs_char, out_char = ("N", "C"), ("O", "I"), ("N", "C")
    for i, (a, b) in enumerate(zip((lhs_spec, rhs_spec, out_spec), (lhs_char, rhs_char, out_char))):
        if not (a.count(b[0]) == a.count(b[1]) == 1):
            raise TypeError(f"conv_general_dilated dimension_numbers[{i}] must contain the characters "
                            f"'{b[0]}' and '{b[1]}' exactly once, got {a}.")
    spatial = [c for c in lhs_spec if c not in lhs_char]
    lhs_perm = (lhs_spec.index("N"), lhs_spec.index("C")) + tuple(lhs_spec.index(c) for c in spatial)
    rhs_perm = (rhs_spec.index("O"), rhs_spec.index("I")) + tuple(rhs_spec.index(c) for c in spatial)
    out_perm = (out_spec.index("N"), out_spec.index("C")) + tuple(out_spec.index(c) for c in spatial)
    return lhs_perm, rhs_perm, out_perm


def _perms(lhs_shape, rhs_shape, dimension_numbers):
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    return dn.lhs_spec, dn.rhs_spec, dn.out_spec


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lp, rp, op = _perms(lhs_shape, rhs_shape, dimension_numbers)
    out = conv_shape_tuple(np.take(lhs_shape, lp), np.take(rhs_shape, rp), window_strides, padding)
    return tuple(int(d) for d in np.take(out, np.argsort(op)))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lp, rp, op = _perms(lhs_shape, rhs_shape, dimension_numbers)
    lt, rt = np.take(lhs_shape, lp), np.take(rhs_shape, rp)
    if isinstance(padding, str):
        from .conv_transpose import _padding
        padding = [_padding(int(k), int(s), padding) for k, s in zip(rt[2:], window_strides)]
    # the input dilated by the strides, padded, then a stride-1 convolution
    space = tuple(max(0, s * (d - 1) + 1 + lo + hi - k + 1)
                  for d, k, s, (lo, hi) in zip(lt[2:], rt[2:], window_strides, padding))
    out = (int(lt[0]), int(rt[0])) + space
    return tuple(int(d) for d in np.take(out, np.argsort(op)))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding, base_dilation=None,
                              window_dilation=None) -> Tuple[int, ...]:
    """The output shape of a reduce_window (``padding`` as (low, high) pairs)."""
    shape = list(operand_shape)
    if base_dilation is not None:
        shape = [0 if d == 0 else 1 + b * (d - 1) for d, b in zip(shape, base_dilation)]
    if padding is not None:
        shape = [d + lo + hi for d, (lo, hi) in zip(shape, padding)]
    win = list(window_dimensions)
    if window_dilation is not None:
        win = [0 if w == 0 else 1 + r * (w - 1) for w, r in zip(win, window_dilation)]
    return tuple(_stride_dim(d, w, s) for d, w, s in zip(shape, win, window_strides))


@api_function
def conv_with_general_padding(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None) -> Tracer:
    """conv_general_dilated in NCHW/OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)
