"""Batching: ``hlo.vmap`` as a transformation of the traced program.

Modules: ``api`` (``vmap``), ``interpreter`` (replaying a per-example region batched),
``table`` (the rule registry and helpers), and the rules: ``rules_elementwise``,
``rules_shape``, ``rules_reduce``, ``rules_indexing``, ``rules_control``, ``rules_host``
(host callbacks), ``rules_collectives``, ``rules_custom``
(ops marked by custom_vjp / custom_jvp / checkpoint); ``jacobians`` (jacfwd, jacrev, hessian).
"""
from . import rules_custom  # registers the batching of custom_vjp/jvp, checkpoint
from .api import vmap
from .table import RULES

__all__ = ["vmap", "RULES"]
