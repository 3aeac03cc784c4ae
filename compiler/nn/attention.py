"""jax.nn.dot_product_attention (jax's "xla" implementation, written on hlo.numpy: fused by
hlo's passes like any other program) and scaled_matmul (block-scaled matrix products)."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from .. import numpy as hnp
from ..errors import ShapeError, UnsupportedError
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from .activations import softmax


def _large_negative(dt) -> float:
    return -0.7 * min(float(dtypes.finfo(dt).max), float(np.finfo(np.float32).max))


@api_function
def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal=False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """Scaled dot-product attention, ``softmax(q k^T * scale + bias, masked) v``, with jax's
    layout: ``query`` is ``[B, T, N, H]`` (or ``[T, N, H]``), ``key``/``value`` ``[B, S, K, H]``
    with ``N`` a multiple of ``K`` (grouped-query attention). ``bias``/``mask`` broadcast to
    ``[B, N, T, S]``. Logits and the softmax are computed in at least float32."""
    what = "dot_product_attention"
    if implementation not in (None, "xla"):
        raise UnsupportedError(f"{what}: implementation={implementation!r} is not available: hlo "
                               "compiles attention from its ops (implementation=None or 'xla')")
    q, k, v = hnp.asarray(query), hnp.asarray(key), hnp.asarray(value)
    if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ShapeError(f"{what}: query, key and value must all be 3-D ([T, N, H]) or 4-D ([B, T, N, "
                         f"H]), got shapes {q.shape}, {k.shape}, {v.shape}")
    batched = q.ndim == 4
    if not batched:
        q, k, v = q[None], k[None], v[None]
    B, T, N, H = q.shape
    _, S, K, _ = k.shape
    if k.shape != v.shape or k.shape[0] != B or k.shape[3] != H:
        raise ShapeError(f"{what}: key and value must have shape [B, S, K, H] = [{B}, S, K, {H}], got "
                         f"{k.shape} and {v.shape}")
    if K == 0 or N % K:
        raise ShapeError(f"{what}: the query's {N} heads must be a multiple of the key's {K}")
    if K != N:  # grouped-query: query head n reads key/value head n // (N // K)
        k, v = hnp.repeat(k, N // K, axis=2), hnp.repeat(v, N // K, axis=2)
    scale = 1.0 / math.sqrt(H) if scale is None else scale
    logits_dt = dtypes.promote_types(q.dtype, np.float32)
    logits = hnp.einsum("BTNH,BSNH->BNTS", q.astype(logits_dt), k.astype(logits_dt))
    logits = logits * hnp.asarray(scale, dtype=logits_dt)
    if bias is not None:
        logits = (logits + hnp.asarray(bias)).astype(logits_dt)
    keep = None

    def both(m):
        return m if keep is None else hnp.logical_and(keep, m)
    if mask is not None:
        m = hnp.asarray(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"{what}: mask must be boolean, got {m.dtype}")
        keep = both(m)
    if is_causal:
        keep = both(hnp.tril(hnp.ones((T, S), dtype=bool)))
    if local_window_size is not None:
        left, right = ((local_window_size, local_window_size) if isinstance(local_window_size, int)
                       else local_window_size)
        qp, kp = hnp.arange(T)[:, None], hnp.arange(S)[None, :]
        keep = both(hnp.logical_and(qp <= kp + left, qp >= kp - right))
    if query_seq_lengths is not None:
        keep = both((hnp.arange(T)[None, :, None] < hnp.asarray(query_seq_lengths)[:, None, None])[:, None])
    if key_value_seq_lengths is not None:
        keep = both((hnp.arange(S)[None, None, :]
                     < hnp.asarray(key_value_seq_lengths)[:, None, None])[:, None])
    if keep is not None:
        logits = hnp.where(keep, logits, _large_negative(logits_dt))
    padded = logits.astype(np.float32)
    probs = softmax(padded, axis=-1).astype(k.dtype)
    out = hnp.einsum("BNTS,BSNH->BTNH", probs, v)
    if query_seq_lengths is not None:
        qm = hnp.arange(T)[None, :] < hnp.asarray(query_seq_lengths)[:, None]
        out = out * qm[:, :, None, None].astype(out.dtype)
    if not batched:
        out = out[0]
    if return_residual:
        from ..autodiff import stop_gradient
        from .activations import logsumexp
        lse = hnp.transpose(logsumexp(padded, axis=-1).astype(k.dtype), (0, 2, 1))
        return out, stop_gradient(lse if batched else lse[0])
    return out


@api_function
def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32) -> Tracer:
    """Block-scaled batched matrix product ``[B, M, K] x [B, N, K] -> [B, M, N]``: each
    operand's element ``[b, i, k]`` is multiplied by its scale ``[b, i, k // block]`` (block =
    K / the scales' last dimension) before the product over ``K``, accumulated in float32."""
    what = "scaled_matmul"
    a, b, sa, sb = (hnp.asarray(t) for t in (lhs, rhs, lhs_scales, rhs_scales))
    if not all(t.ndim == 3 for t in (a, b, sa, sb)):
        raise ValueError(f"{what} requires all inputs to be 3-dimensional arrays")
    (B, M, K), (Bb, N, Kb) = a.shape, b.shape
    if K != Kb or B != Bb:
        raise ValueError(f"{what} requires inputs a and b to have matching batch (B) and contract (K) "
                         f"dimensions, but got shapes {a.shape} and {b.shape}")
    if sa.shape[2] != sb.shape[2] or sa.shape[0] != sb.shape[0] or sa.shape[1] != M or sb.shape[1] != N \
            or sa.shape[0] != B or sa.shape[2] == 0 or K % sa.shape[2]:
        raise ValueError(f"{what} requires scales of shapes [B, M, K / block] and [B, N, K / block], "
                         f"got {sa.shape} and {sb.shape} for inputs {a.shape} and {b.shape}")
    block = K // sa.shape[2]
    f32 = np.float32
    da = a.astype(f32) * hnp.repeat(sa.astype(f32), block, axis=2)
    db = b.astype(f32) * hnp.repeat(sb.astype(f32), block, axis=2)
    return hnp.einsum("bmk,bnk->bmn", da, db).astype(preferred_element_type)
