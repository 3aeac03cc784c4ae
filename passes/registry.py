"""Every pass, by name: importing this module imports the pass modules, which register
themselves with ``base.register_pass``; ``registered_passes()`` lists them and
``create_pass(name, config)`` makes one. The pipeline (``pipeline.py``) builds on this."""
from typing import Dict, List

from . import (
    algebraic,
    buffer_assignment,
    canonicalize,
    concat_split,
    constant_folding,
    conv_gemm,
    cse,
    dce,
    dot_merger,
    dot_split_k,
    fusion,
    horizontal,
    inline,
    layout,
    multi_output,
    scheduling,
    while_unroll,
    window_scan,
)
from .base import DOCS, FACTORIES, Pass
from .options import PassConfig


def registered_passes() -> Dict[str, str]:
    """Pass names and one-line descriptions."""
    return dict(sorted(DOCS.items()))


def create_pass(name: str, config: PassConfig = None) -> Pass:
    if name not in FACTORIES:
        raise KeyError(f"unknown pass '{name}' (known: {', '.join(sorted(FACTORIES))})")
    p = FACTORIES[name](config or PassConfig())
    if p.name != name:
        p.name = name
    return p


def create_passes(names: List[str], config: PassConfig = None) -> List[Pass]:
    config = config or PassConfig()
    return [create_pass(n, config) for n in names]
