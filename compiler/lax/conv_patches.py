"""hlo.lax.conv_general_dilated_patches (jax's construction): the patches a convolution with
``filter_shape`` would see, as channels: one grouped convolution (a group per input channel)
with an identity filter that moves each window position into its own output channel, so the
output's channel dimension holds (input channel, window position) in that order."""
from __future__ import annotations

import math

import numpy as np

from ..tracing.api_util import api_function
from .common import as_tracer
from .contractions import conv_dimension_numbers, conv_general_dilated


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
