"""Building a ``CudaProgram`` from the passes' result: lower, emit LLVM IR, compile to PTX,
assemble a cubin where ptxas is present."""
from __future__ import annotations

import time

import llvmlite.ir as ir

from hlo.runtime.steps import LibraryCall, describe_steps, steps_to_json
from ..llvm_util import I32, ModuleContext
from ..lower import Lowering
from ..mathlib import LIBDEVICE_MATH
from .codegen import CudaCodegen
from .device import target_device
from .program import FORMAT, TRIPLE, CudaProgram, describe_constant
from . import ptx as P


def _tdesc(t) -> dict:
    return {"dtype": t.dtype.name, "shape": list(t.shape),
            "layout": list(t.layout) if t.layout is not None else None}


def build(optimized, opt_level: int = 3) -> CudaProgram:
    from hlo.ir.core import Module
    if isinstance(optimized, Module):
        from . import compile_module
        return compile_module(optimized, opt_level=opt_level)
    t0 = time.perf_counter()
    module = optimized.module
    if "main" not in module:
        raise ValueError(f"module @{module.name} has no @main function to compile")
    dev = target_device()
    ctx = ModuleContext(module.name, TRIPLE, P.data_layout(dev.arch), math=LIBDEVICE_MATH)
    cg = CudaCodegen(ctx, dev)
    lw = Lowering(cg, module, optimized.buffers)
    # libdevice's __nvvm_reflect("__CUDA_FTZ"): keep denormals (IEEE results, as the CPU)
    ctx.module.add_named_metadata("llvm.module.flags", [ir.Constant(I32, 4),
                                  ir.MetaDataString(ctx.module, "nvvm-reflect-ftz"), ir.Constant(I32, 0)])
    steps = lw.lower_main()
    ir_text = str(ctx.module)
    t1 = time.perf_counter()
    ptx = P.compile_ptx(ir_text, dev.arch)
    t2 = time.perf_counter()
    cubin = P.assemble(ptx, dev.arch)
    t3 = time.perf_counter()
    main = module.main
    manifest = {
        "format": FORMAT,
        "entry": "steps",  # the runtime walks the step tree (no native entry point)
        "target": {"triple": TRIPLE, "arch": dev.arch, "sm_count": dev.sm_count, "device": dev.name},
        "inputs": [_tdesc(t) for t in main.arg_types],
        "outputs": [_tdesc(t) for t in main.result_types],
        "arena_size": lw.arena_size,
        "kernels": list(cg.kernels),
        "steps": steps_to_json(steps),
        "constants": [describe_constant(cg.constants[k]) for k in sorted(cg.constants)],
        "libraries": sorted({s.library for s in _walk(steps) if isinstance(s, LibraryCall)}),
        "generated_dots": list(cg.generated_dots),
    }
    prog = CudaProgram(manifest, ptx, {dev.arch: cubin} if cubin is not None else {},
                       [cg.constants[k] for k in sorted(cg.constants)], steps=steps,
                       steps_text="\n".join(describe_steps(steps)), llvm_ir=ir_text)
    prog.compile_times = {"emit": t1 - t0, "ptx": t2 - t1, "ptxas": t3 - t2}
    return prog


def _walk(steps):
    from hlo.runtime.steps import Switch, While
    for s in steps:
        yield s
        if isinstance(s, While):
            yield from _walk(s.cond)
            yield from _walk(s.body)
        elif isinstance(s, Switch):
            for br in s.branches:
                yield from _walk(br)
