"""jax.nn.scaled_dot_general and get_scaled_dot_general_config: dot_general on block-scaled
low-precision operands (microscaling). With ``configs`` each operand is quantized as jax does:
per block of ``block_size`` along the contracted dimensions, a scale (mxfp8: a power of two
rounded up, E8M0; nvfp4: an E4M3 value, after a global scale) and the scaled data cast to
``data_type`` (float8_e4m3fn, float4_e2m1fn); the product of the dequantized blocks is
accumulated in float32 (``scaled_matmul``). Without ``configs`` it is ``dot_general``.
Gradients go through the dequantized product (jax quantizes the cotangent too)."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from .. import dtypes
from .. import numpy as hnp
from ..lax.contractions import dot_general
from ..lax.elementwise import bitcast_convert_type
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer


@dataclasses.dataclass
class BlockScaleConfig:
    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Optional[Any]
    infer_only: bool


def get_scaled_dot_general_config(mode: str, global_scale=None) -> BlockScaleConfig:
    """jax's configurations: 'mxfp8' (blocks of 32, E4M3 data, E8M0 scales) or 'nvfp4' (blocks
    of 16, E2M1 data, E4M3 scales, a float32 global scale, default 1)."""
    if mode == "nvfp4":
        return BlockScaleConfig("nvfp4", 16, hnp.float4_e2m1fn, hnp.float8_e4m3fn,
                                np.ones((1,), np.float32) if global_scale is None else global_scale, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, hnp.float8_e4m3fn, hnp.float8_e8m0fnu, None, False)
    raise ValueError(f"Unsupported mode: {mode}")


def _normalize(x: Tracer, contract, batch) -> Tracer:
    """``x`` as (B, M, K): batch, free and contracted dimensions, each group flattened."""
    order = list(range(x.ndim))
    c = [d for d in order if d in contract]
    b = [d for d in order if d in batch]
    m = [d for d in order if d not in contract and d not in batch]
    t = hnp.transpose(x, b + m + c)
    size = lambda ds: int(np.prod([x.shape[d] for d in ds], dtype=np.int64))
    return hnp.reshape(t, (size(b), size(m), size(c)))


def _e8m0_round_up(s: Tracer) -> Tracer:
    """A float32 power of two at least ``s`` (E8M0's rounding up; 2**-127 for zero)."""
    bits = bitcast_convert_type(s.astype(np.float32), np.uint32)
    exp = bits >> np.uint32(23)
    mant = bits & np.uint32(0x7FFFFF)
    up = hnp.logical_and(hnp.logical_and(mant > 0, exp != 0xFE),
                         hnp.logical_not(hnp.logical_and(exp == 0, mant <= 0x400000)))
    exp = hnp.where(up, exp + np.uint32(1), exp) & np.uint32(0xFF)
    out = bitcast_convert_type(exp << np.uint32(23), np.float32)
    return hnp.where(out == 0, np.float32(2.0 ** -127), out)


def _quantize(x: Tracer, cfg: BlockScaleConfig):
    """(the data cast to cfg.data_type, the float32 scale of each block)."""
    B, M, K = x.shape
    bs = int(cfg.block_size)
    if K < bs or K % bs:
        raise ValueError(f"scaled_dot_general: the contracted size {K} must be a multiple of the block size {bs}")
    xb = hnp.reshape(x, (B, M, K // bs, bs))
    top = float(dtypes.finfo(np.dtype(cfg.data_type)).max)
    amax = hnp.max(hnp.abs(xb), axis=-1, keepdims=True) / np.array(top, x.dtype)
    if cfg.mode == "mxfp8":
        scale = _e8m0_round_up(amax).astype(x.dtype)
    elif cfg.mode == "nvfp4":
        xb = xb / hnp.asarray(cfg.global_scale).astype(x.dtype)
        amax = hnp.max(hnp.abs(xb), axis=-1, keepdims=True) / np.array(top, x.dtype)
        smax = float(dtypes.finfo(np.dtype(cfg.scale_type)).max)
        scale = hnp.clip(amax, 0, smax).astype(cfg.scale_type).astype(np.float32)
    else:
        raise ValueError(f"Unrecognized mode: {cfg.mode}.")
    q = hnp.clip(xb / scale, -top, top).astype(cfg.data_type)
    return hnp.reshape(q, (B, M, K)), hnp.reshape(scale, (B, M, K // bs)).astype(np.float32)


@api_function
def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32, configs=None,
                       implementation=None) -> Tracer:
    """``dot_general`` of block-scaled quantized operands (see the module docstring)."""
    if configs is None:
        return dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)
    pet = np.dtype(preferred_element_type)
    if pet not in (np.dtype(np.float32), dtypes.bfloat16, np.dtype(np.float16)):
        raise TypeError(f"Only support preferred_element_type in (f32, bf16, f16), but got {pet}")
    a, b = hnp.asarray(lhs), hnp.asarray(rhs)
    (lc, rc), (lb, rb) = [[tuple(t) for t in pair] for pair in dimension_numbers]
    a3, b3 = _normalize(a, lc, lb), _normalize(b, rc, rb)
    aq, asc = _quantize(a3, configs[0])
    bq, bsc = _quantize(b3, configs[1])
    from .attention import scaled_matmul
    out_dt = np.float32 if configs[0].mode == "nvfp4" else pet
    out = scaled_matmul(aq, bq, asc, bsc, preferred_element_type=out_dt)
    if configs[0].mode == "nvfp4":
        gs = hnp.asarray(configs[0].global_scale) * hnp.asarray(configs[1].global_scale)
        out = (out * gs.astype(np.float32)).astype(pet)
    shape = ([a.shape[d] for d in lb] + [a.shape[d] for d in range(a.ndim) if d not in lc and d not in lb]
             + [b.shape[d] for d in range(b.ndim) if d not in rc and d not in rb])
    return hnp.reshape(out, shape)
