"""hlo.lax.ragged_dot: lhs's rows fall into consecutive groups of ``group_sizes`` rows, group g
multiplied by rhs[g] (rows past the groups give zeros), as jax.lax.ragged_dot. Written as the
product with every group's matrix and a per-row select of its own (G times the flops of one
product: there is no grouped-matmul op). Above hlo.numpy (loaded by hlo.lax.__getattr__)."""
from __future__ import annotations

import numpy as np

from .. import numpy as jnp
from ..tracing.api_util import api_function


@api_function
def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None,
               out_sharding=None):
    """(m, k) x (g, k, n) -> (m, n), row i of lhs multiplied by rhs[its group]."""
    if group_offset is not None:
        raise NotImplementedError("lax.ragged_dot: group_offset is not supported (jax's XLA lowering "
                                  "does not support it either)")
    if out_sharding is not None:
        raise NotImplementedError("lax.ragged_dot: out_sharding is not supported: use "
                                  "hlo.lax.with_sharding_constraint on the result")
    lhs, rhs, gs = jnp.asarray(lhs), jnp.asarray(rhs), jnp.asarray(group_sizes)
    if lhs.ndim != 2 or rhs.ndim != 3 or gs.ndim != 1:
        raise TypeError(f"lax.ragged_dot: expected lhs (m, k), rhs (g, k, n) and group_sizes (g,), got "
                        f"{lhs.shape}, {rhs.shape} and {gs.shape}")
    if lhs.shape[1] != rhs.shape[1] or rhs.shape[0] != gs.shape[0]:
        raise TypeError(f"lax.ragged_dot: lhs {lhs.shape}, rhs {rhs.shape} and group_sizes {gs.shape} "
                        "disagree (lhs's k must be rhs's, rhs's g group_sizes')")
    if not jnp.issubdtype(gs.dtype, jnp.integer):
        raise TypeError(f"lax.ragged_dot: group_sizes must be integers, got {np.dtype(gs.dtype).name}")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"lax.ragged_dot: lhs and rhs must have one dtype, got {np.dtype(lhs.dtype).name} "
                        f"and {np.dtype(rhs.dtype).name}")
    out_dt = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    ends = jnp.cumsum(gs.astype(np.int32))
    rows = jnp.arange(lhs.shape[0], dtype=np.int32)
    group = jnp.sum(rows[None, :] >= ends[:, None], axis=0)  # the group of each row (g: none)
    per_group = jnp.einsum("mk,gkn->gmn", lhs.astype(out_dt), rhs.astype(out_dt))
    mine = group[None, :] == jnp.arange(gs.shape[0], dtype=np.int32)[:, None]
    return jnp.sum(jnp.where(mine[:, :, None], per_group, jnp.zeros((), out_dt)), axis=0)
