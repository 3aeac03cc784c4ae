"""Automatic differentiation: ``hlo.grad``, ``hlo.value_and_grad``, ``hlo.vjp``, ``hlo.jvp``.

Reverse mode over the traced IR (``backprop``): the function is traced into a region, its ops
are copied into the current trace as the forward pass, and the VJP rule of each op
(``table.RULES``, filled by the ``vjp_*`` modules) emits the backward pass into the same trace.
Everything is ordinary traced IR, so derivatives compose with ``hlo.jit`` and with each other.

Modules: ``api`` (the public functions), ``backprop`` (tracing, inlining, the reverse walk),
``table`` (the rule registry), ``prims`` (the ops rules emit), and the rules:
``vjp_elementwise``, ``vjp_shape``, ``vjp_reduce``, ``vjp_linalg``, ``vjp_indexing``,
``vjp_control``, ``vjp_collectives``.
"""
from . import (vjp_collectives, vjp_control, vjp_elementwise, vjp_indexing, vjp_linalg,
               vjp_reduce, vjp_shape)  # (importing them registers the rules)
from .api import grad, jvp, stop_gradient, value_and_grad, vjp
from .table import RULES

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "stop_gradient", "RULES"]
