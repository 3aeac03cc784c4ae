"""Building a ``CudaProgram`` from the passes' result: lower, emit LLVM IR, compile to PTX
(``backends/nvptx.py``), assemble a cubin where ptxas is present."""
from __future__ import annotations

import time

from hlo.passes import stage_hook
from hlo.runtime.cuda.artifact import FORMAT, CudaProgram, describe_constant
from hlo.runtime.steps import describe_steps, steps_to_json, written_inputs

from .. import nvptx
from ..lower import Lowering
from .codegen import CudaCodegen
from .device import launch_device


def _tdesc(t) -> dict:
    return {"dtype": t.dtype.name, "shape": list(t.shape),
            "layout": list(t.layout) if t.layout is not None else None}


def build(optimized, opt_level: int = 3, profile: bool = False) -> CudaProgram:
    from hlo.ir.core import Module
    if isinstance(optimized, Module):
        from . import compile_module
        return compile_module(optimized, opt_level=opt_level)
    t0 = time.perf_counter()
    module = optimized.module
    if "main" not in module:
        raise ValueError(f"module @{module.name} has no @main function to compile")
    dev = launch_device()
    ctx = nvptx.module_context(module.name, dev.target)
    options = getattr(optimized, "options", None)
    cg = CudaCodegen(ctx, dev, matmul_precision=getattr(options, "matmul_precision", None))
    lw = Lowering(cg, module, optimized.buffers)
    steps = lw.lower_main()
    ir_text = str(ctx.module)
    t1 = time.perf_counter()
    stage_hook.stage("ptx")
    ptx, times = nvptx.compile_ptx(ir_text, dev.target, opt_level)
    stage_hook.stage("ptxas")
    t2 = time.perf_counter()
    cubin = nvptx.assemble(ptx, dev.arch) if cg.kernels and nvptx.find_ptxas() else None
    t3 = time.perf_counter()
    main = module.main
    manifest = {
        "format": FORMAT,
        "entry": "steps",  # the runtime walks the step tree (no native entry point)
        "target": dict(dev.target.manifest_entry(), features=dev.target.features, sm_count=dev.sm_count),
        "inputs": [_tdesc(t) for t in main.arg_types],
        "outputs": [_tdesc(t) for t in main.result_types],
        "arena_size": lw.arena_size,
        "kernels": list(cg.kernels),
        "steps": steps_to_json(steps),
        # donation: the inputs the steps write, and the outputs that are a donated input's memory
        "inputs_written": sorted(set(written_inputs(steps)) | set(lw.aliases.values())),
        **({"aliases": [[o, i] for o, i in sorted(lw.aliases.items())]} if lw.aliases else {}),
        "constants": [describe_constant(cg.constants[k]) for k in sorted(cg.constants)],
        "generated_dots": list(cg.generated_dots),
        "gemm_epilogues": list(cg.gemm_epilogues),
    }
    if profile:  # run with events around each step; each kernel's op as the optimized IR names it
        from hlo.ir.printer import value_names
        from hlo.runtime.cuda.profile import kernel_origins
        manifest["profile"] = {"kernels": kernel_origins(steps, lw.origin, value_names(main))}
    prog = CudaProgram(manifest, ptx, {dev.arch: cubin} if cubin is not None else {},
                       [cg.constants[k] for k in sorted(cg.constants)], steps=steps,
                       steps_text="\n".join(describe_steps(steps)), llvm_ir=ir_text)
    prog.compile_times = dict(times, emit=t1 - t0, ptx=t2 - t1, ptxas=t3 - t2)
    return prog

