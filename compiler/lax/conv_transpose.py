"""hlo.lax.conv_transpose: the transposed ("deconvolution") convolution, as jax.lax defines it: a
``conv_general_dilated`` whose input is dilated by the strides, padded so that 'SAME' and
'VALID' give the transposed shapes (optionally with the kernel flipped and its feature axes
swapped, ``transpose_kernel=True``: the gradient of a forward convolution)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .common import as_tracer
from .contractions import conv_dimension_numbers, conv_general_dilated
from .structural import rev

_DEFAULT_LAYOUT = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                   5: ("NHWDC", "HWDIO", "NHWDC")}


def _padding(k: int, s: int, padding: str):
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(math.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    else:
        raise ValueError(f"lax.conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")
    return pad_a, pad_len - pad_a


@api_function
def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None) -> Tracer:
    """Transposed convolution of ``lhs`` with the kernel ``rhs`` (jax.lax.conv_transpose;
    layouts default to channels-last: NC/IO, NHC/HIO, NHWC/HWIO, NHWDC/HWDIO)."""
    what = "lax.conv_transpose"
    a = as_tracer(lhs, what=what)
    b = as_tracer(rhs, what=what)
    nd = a.ndim
    if nd != b.ndim or nd < 2:
        raise ShapeError(f"{what}: lhs and rhs must have the same rank (at least 2), got {a.shape} and {b.shape}")
    if dimension_numbers is None:
        if nd not in _DEFAULT_LAYOUT:
            raise ShapeError(f"{what}: no default layout for rank {nd}; pass dimension_numbers")
        dimension_numbers = _DEFAULT_LAYOUT[nd]
    dn = conv_dimension_numbers(a.shape, b.shape, dimension_numbers)
    strides = tuple(int(s) for s in strides)
    if len(strides) != nd - 2:
        raise ShapeError(f"{what}: strides need one entry per spatial dimension ({nd - 2}), got {strides}")
    k_sdims = [b.shape[d] for d in dn.rhs_spec[2:]]
    if isinstance(padding, str):
        dil = (1,) * (nd - 2) if rhs_dilation is None else tuple(rhs_dilation)
        eff = [0 if k == 0 else 1 + r * (k - 1) for k, r in zip(k_sdims, dil)]
        pads = [_padding(k, s, padding) for k, s in zip(eff, strides)]
    else:
        pads = [tuple(p) for p in padding]
    if transpose_kernel:
        b = rev(b, [int(d) for d in np.array(dn.rhs_spec)[2:]])
        perm = list(range(nd))
        o, i = dn.rhs_spec[0], dn.rhs_spec[1]
        perm[o], perm[i] = perm[i], perm[o]
        from .structural import transpose
        b = transpose(b, perm)
    return conv_general_dilated(a, b, (1,) * (nd - 2), pads, lhs_dilation=strides, rhs_dilation=rhs_dilation,
                                dimension_numbers=dn, precision=precision,
                                preferred_element_type=preferred_element_type)
