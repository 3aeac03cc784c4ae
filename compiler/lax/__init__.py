"""hlo.lax: thin, strictly typed wrappers around the IR's ops, like jax.lax.

Each function emits one IR op (or a short fixed sequence) with jax.lax's signature and
strictness: operands share one dtype (Python scalars adopt it), shapes match exactly (rank-0
operands broadcast). hlo.numpy builds numpy semantics (promotion, broadcasting) on top.

Layers: the op wrappers here are below hlo.numpy; control flow (``hlo.lax.control_flow``) and
``hlo.lax.linalg`` (factorizations written with hlo.numpy, as jax's are) sit above them and
are reached lazily through this package (``hlo.lax.cond``, ``hlo.lax.linalg``), so importing
any of them first works.
"""
from .elementwise import (abs, neg, sign, floor, ceil, exp, expm1, log, log1p, tanh, logistic, sin,
                          cos, tan, sqrt, rsqrt, cbrt, not_, population_count, clz, add, sub, mul,
                          div, rem, pow, max, min, atan2, and_, or_, xor, shift_left,
                          shift_right_arithmetic, shift_right_logical, eq, ne, lt, le, gt, ge,
                          is_finite, round, RoundingMethod, square, reciprocal,
                          convert_element_type, bitcast_convert_type, select, clamp, complex,
                          real, imag, conj)
from .special import (erf, erfc, exp2, atan, asin, acos, sinh, cosh, asinh, acosh, atanh,
                      integer_pow)
from .structural import (broadcast_in_dim, broadcast, reshape, transpose, squeeze, expand_dims,
                         slice, slice_in_dim, dynamic_slice, dynamic_update_slice,
                         dynamic_slice_in_dim, dynamic_update_slice_in_dim, concatenate, pad, rev,
                         iota, broadcasted_iota, full, full_like, collapse)
from .reductions import (reduce, reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and,
                         reduce_or, reduce_xor, argmax, argmin, reduce_window, cumsum, cumprod,
                         cummax, cummin, sort, sort_key_val, padtype_to_pads)
from .contractions import (dot_general, dot, conv_general_dilated, conv, ConvDimensionNumbers,
                           conv_dimension_numbers)
from .indexing import (gather, scatter, scatter_add, scatter_mul, scatter_min, scatter_max,
                       scatter_apply, GatherDimensionNumbers, ScatterDimensionNumbers)
from .parallel import (psum, pmean, pmax, pmin, all_gather, psum_scatter, all_to_all, ppermute,
                       axis_index, axis_size, with_sharding_constraint)
from .topk import top_k
from .conv_transpose import conv_transpose
from .cumlogsumexp import cumlogsumexp
from .gamma_fns import lgamma, digamma
from .associative_scan import associative_scan
from .conv_patches import conv_general_dilated_patches, conv_general_dilated_local
from .jax_types import (Precision, PrecisionLike, DotDimensionNumbers, GatherScatterMode, stage,
                        composite)
from .conveniences import (bitwise_and, bitwise_or, bitwise_xor, bitwise_not, index_in_dim, dynamic_index_in_dim,
                           dynamic_update_index_in_dim, select_n, split, stack, unstack, tile, empty,
                           broadcast_to_rank, broadcast_like, broadcast_shapes, dtype, batch_matmul, scatter_sub,
                           reduce_precision, optimization_barrier, approx_max_k, approx_min_k, mulhi, index_take,
                           FftType)
from .conv_shapes import (conv_with_general_padding, conv_shape_tuple, conv_general_shape_tuple,
                          conv_transpose_shape_tuple, reduce_window_shape_tuple, conv_general_permutations,
                          ConvGeneralDilatedDimensionNumbers)

# Every array library (hlo.numpy, hlo.nn, hlo.random, control flow) imports hlo.lax first. Their
# functions called outside a trace compile the call with hlo.jit, which registers itself with
# api_util as the eager compiler when it is imported: load it here.
from ..staging import jit as _api

# Control flow lives in hlo.lax.control_flow, which builds on hlo.lax; hlo.lax.linalg builds on
# hlo.numpy. Both are public here, loaded on first use.
_CONTROL_FLOW = ("cond", "switch", "while_loop", "fori_loop", "scan", "map")
_SPECIAL_MORE = ("igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "betainc")
_ZETA_FNS = ("zeta", "polygamma", "bessel_i1e")


def __getattr__(name):
    if name in _CONTROL_FLOW:
        from . import control_flow
        return getattr(control_flow, name)
    if name == "stop_gradient":  # (hlo.autodiff's: above this layer)
        from ..autodiff import stop_gradient
        return stop_gradient
    if name == "fft":  # written with hlo.numpy.fft
        from ..numpy.lax_fft import fft
        return fft
    if name in ("nextafter", "bessel_i0e"):  # written with hlo.numpy's bit and series helpers
        from ..numpy import float_bits, windows
        return float_bits.nextafter if name == "nextafter" else windows.i0e
    if name in _SPECIAL_MORE:  # written with hlo.numpy and while_loop (jax's own lax algorithms)
        from . import special_more
        return getattr(special_more, name)
    if name == "ragged_dot":  # written with hlo.numpy
        from .ragged import ragged_dot
        return ragged_dot
    if name in _ZETA_FNS:  # written with hlo.numpy (XLA's are chlo ops)
        from . import zeta_fns
        return getattr(zeta_fns, name)
    if name == "linalg":  # hlo.lax.linalg: lu, cholesky, qr, eigh, svd, triangular_solve
        import importlib
        return importlib.import_module(f"{__name__}.linalg")
    if name.startswith("__"):
        raise AttributeError(f"module 'hlo.lax' has no attribute {name!r}")
    from ..base.missing import missing_name  # "did you mean ...?", and whether jax has it
    raise missing_name(__name__, name, __dir__())


def __dir__():
    return sorted(set(globals()) | set(_CONTROL_FLOW) | set(_SPECIAL_MORE) | set(_ZETA_FNS) | {"ragged_dot"} | {"linalg", "stop_gradient", "nextafter", "bessel_i0e", "fft"})
