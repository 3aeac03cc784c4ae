"""Staging objects: ``Lowered`` (traced or imported IR, not yet optimized) and ``Compiled``
(an executable for one target). ``hlo.jit(f).lower(...)`` and ``hlo.load_stablehlo`` both return
a ``Lowered``."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from hlo.ir import Module, print_module


class Lowered:
    """IR for one abstract signature, before target-specific optimization."""

    def __init__(self, module: Module):
        self.ir = module

    def as_text(self) -> str:
        return print_module(self.ir)

    def compile(self, target: Optional[str] = None) -> "Compiled":
        target = target or "interpreter"
        if target != "interpreter":
            raise NotImplementedError(f"target {target!r} has no backend yet; use target='interpreter'")
        return Compiled(self.ir, target)


class Compiled:
    """An executable for one target; called with flat arrays, returns a list of arrays."""

    def __init__(self, module: Module, target: str):
        self.ir = module
        self.target = target

    def as_text(self) -> str:
        return print_module(self.ir)

    def __call__(self, *args) -> list:
        from hlo.ir.interpreter import run
        return run(self.ir, [np.asarray(a) for a in args])
