"""Importing this module registers every pass (``hlo.passes.base.registered_passes()`` lists
them); the pass modules register themselves with ``@register_pass``."""
from . import (inline, dce, cse, constant_folding, canonicalize, algebraic, layout,  # noqa: F401
               fusion, multi_output, horizontal, scheduling, pipeline)
