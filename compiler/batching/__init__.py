"""Batching: ``hlo.vmap`` as a transformation of the traced program.

Modules: ``api`` (``vmap``), ``interpreter`` (replaying a per-example region batched),
``table`` (the rule registry and helpers), and the rules: ``rules_elementwise``,
``rules_shape``, ``rules_reduce``, ``rules_indexing``, ``rules_control``.
"""
from .api import vmap
from .table import RULES

__all__ = ["vmap", "RULES"]
