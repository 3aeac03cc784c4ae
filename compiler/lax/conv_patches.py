"""hlo.lax.conv_general_dilated_patches (jax's construction): the patches a convolution with
``filter_shape`` would see, as channels: one grouped convolution (a group per input channel)
with an identity filter that moves each window position into its own output channel, so the
output's channel dimension holds (input channel, window position) in that order; and
conv_general_dilated_local (jax's: those patches times a filter per output position)."""
from __future__ import annotations

import math

import numpy as np

from ..tracing.api_util import api_function
from .common import as_tracer
from .contractions import conv_dimension_numbers, conv_general_dilated, dot_general
from .structural import transpose


@api_function
def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """Extract the patches of ``lhs`` under a ``filter_shape`` window, as jax.lax's."""
    x = as_tracer(lhs, what="lax.conv_general_dilated_patches")
    filter_shape = tuple(int(d) for d in filter_shape)
    if len(filter_shape) != x.ndim - 2:
        raise TypeError(f"lax.conv_general_dilated_patches: filter_shape {filter_shape} needs one size per "
                        f"spatial dimension of the rank-{x.ndim} input ({x.ndim - 2})")
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    lhs_spec, rhs_spec, _ = dn
    spatial = math.prod(filter_shape)
    channels = x.shape[lhs_spec[1]]
    eye = np.broadcast_to(np.eye(spatial, dtype=x.dtype), (channels, spatial, spatial))
    rhs = np.moveaxis(eye.reshape((channels * spatial, 1) + filter_shape), (0, 1), (rhs_spec[0], rhs_spec[1]))
    return conv_general_dilated(x, np.ascontiguousarray(rhs), window_strides, padding, lhs_dilation,
                                rhs_dilation, dn, feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)


@api_function
def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape, lhs_dilation=None,
                               rhs_dilation=None, dimension_numbers=None, precision=None):
    """A locally connected ("unshared") convolution: a separate filter at each output position
    (``rhs`` has the output's spatial sizes, its input-channel dimension holds (input channel,
    window position)), as jax.lax's: the patches, then one batched product over the positions."""
    x = as_tracer(lhs, what="lax.conv_general_dilated_local")
    w = as_tracer(rhs, what="lax.conv_general_dilated_local: rhs")
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding, lhs_dilation,
                                           rhs_dilation, dimension_numbers)
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(x.shape, (1, 1) + tuple(filter_shape),
                                                          dimension_numbers)
    lhs_b, rhs_b = list(out_spec[2:]), list(rhs_spec[2:])
    rhs_b = [rhs_b[i] for i in sorted(range(len(rhs_b)), key=lambda k: lhs_b[k])]
    dn = (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_b), rhs_b))
    out = dot_general(patches, w, dn, precision=precision)
    r = out.ndim
    perm = [0] * r  # the product's (positions..., batch, out channel) back to out_spec's order
    rest = iter(range(r - 2))
    for d in range(r):
        perm[d] = r - 2 if d == out_spec[0] else r - 1 if d == out_spec[1] else next(rest)
    return transpose(out, perm)
