"""The CUDA backend: hlo IR -> LLVM IR (``nvptx64-nvidia-cuda``) -> PTX (and a cubin where
ptxas is present) -> a ``CudaProgram`` that the CUDA runtime (``hlo.runtime.cuda``) runs.

Compiling needs no GPU: the architecture is the present device's, else ``HLO_CUDA_ARCH``
(default ``sm_90``); see ``device.py``. ``compile(optimized)`` takes the passes' ``Optimized``
result (``target="cuda"``). Importing this package is cheap: the code generator is imported on
first use.
"""
from __future__ import annotations


def lowered_ops() -> frozenset:
    """The ops this backend lowers, read from its dispatch: the shared lowering's own steps
    (``Lowering.own_lowerings``) and what the elemental emitter computes in GPU kernels with
    libdevice math (``elemental_ops``). ``tests/ir/test_op_table.py`` checks the op table."""
    from ..elemental import elemental_ops
    from ..lower import Lowering
    from ..mathlib import LIBDEVICE_MATH
    from .codegen import CudaCodegen
    return Lowering.own_lowerings(CudaCodegen) | elemental_ops(LIBDEVICE_MATH)


def declined_ops() -> dict:
    """Ops of the table this backend does not lower, with the reason (``KernelEmitter.DECLINED``:
    host callbacks); ``hlo.staging.targets`` refuses a program holding one before the passes run."""
    from .codegen import CudaCodegen
    return CudaCodegen.declined_ops()


def compile(optimized, opt_level: int = 3, profile: bool = False):
    """Compile an optimized module (``hlo.passes.pipeline.optimize(m, target="cuda")``) to a
    ``CudaProgram``; ``profile``: one that times each of its steps with CUDA events when it runs
    (``hlo.runtime.cuda.profile``; the same code)."""
    from .build import build
    return build(optimized, opt_level=opt_level, profile=profile)


def compile_module(module, opt_level: int = 3):
    """Optimize ``module`` with the passes' CUDA pipeline, then compile."""
    from hlo.passes.pipeline import optimize
    return compile(optimize(module, target="cuda"), opt_level=opt_level)


__all__ = ["compile", "compile_module", "declined_ops", "lowered_ops"]
