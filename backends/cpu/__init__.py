"""The CPU backend: hlo IR -> LLVM IR (host triple, vectorized, multi-threaded) -> object code
-> ``hlo.runtime.cpu.executable.Executable``.

``compile(optimized)`` takes the passes' ``Optimized`` result (``.module`` whose ``main`` lists
the kernels in schedule order, and ``.buffers``, the buffer plan). ``compile_module(module)``
runs the passes' CPU pipeline first.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional


if TYPE_CHECKING:
    from hlo.ir.core import Module


def __getattr__(name):
    # The code generator is imported on first use, so that running a saved executable (which
    # needs only hlo.runtime, and ``blas`` when it calls one) never imports it.
    if name == "UnsupportedOp":
        from ..scalar_ops import UnsupportedOp
        return UnsupportedOp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def lowered_ops() -> frozenset:
    """The ops this backend lowers, read from its dispatch: the lowering's own steps
    (``Lowering.own_lowerings``) and what the elemental emitter computes in loop kernels
    (``elemental_ops``). ``tests/ir/test_op_table.py`` checks every op of the table is here."""
    from ..elemental import elemental_ops
    from ..lower import Lowering
    from ..mathlib import CPU_MATH
    from .codegen import CpuCodegen
    return Lowering.own_lowerings(CpuCodegen) | elemental_ops(CPU_MATH)


def declined_ops() -> dict:
    """Ops of the table this backend does not lower, with the reason (none: the CPU lowers
    every op, host callbacks included)."""
    from .codegen import CpuCodegen
    return CpuCodegen.declined_ops()


def compile(optimized, threads: Optional[int] = None, opt_level: int = 3, profile: bool = False):
    """Compile an optimized module (or a plain ``Module``) to an ``Executable``. The GEMM's
    library code it calls (``gemm_library``) is read from the library folder or compiled
    alongside (started as the lowering names it). ``profile``: a profiled build, which times
    every step in the program (``entry.EntryEmitter``; ``Executable.profile()`` reads it)."""
    from hlo.ir.core import Module
    from hlo.runtime.cpu.executable import Executable, FORMAT_VERSION
    from ..llvm_util import ModuleContext
    from ..mathlib import CPU_MATH
    from ..lower import Lowering
    from .codegen import CpuCodegen
    from .entry import EntryEmitter, emit_call_entry, emit_py_entry, is_tiny, timed_steps
    from hlo.runtime.cpu.abi import CALL_ENTRY, ENTRY, PROFILE, PY_ENTRY
    from hlo.runtime.steps import describe_steps
    from .blas import find_blas
    from .llvm_pipeline import compile_ir
    from hlo.runtime.steps import written_inputs
    from hlo.passes import stage_hook
    from .gemm_library import describe as describe_core, object_code as core_object
    import hashlib
    from hlo.runtime.cpu.target import default_threads, host
    if isinstance(optimized, Module):
        return compile_module(optimized, threads=threads, opt_level=opt_level, profile=profile)
    t_start = time.perf_counter()
    module = optimized.module
    if "main" not in module:
        raise ValueError(f"module @{module.name} has no @main function to compile")
    nthreads = threads or default_threads()
    h = host()
    ctx = ModuleContext(module.name, h.triple, math=CPU_MATH)
    cg = CpuCodegen(ctx, nthreads)
    lw = Lowering(cg, module, optimized.buffers)
    steps = lw.lower_main()
    run_fn = EntryEmitter(ctx, cg.kernels, cg.tasks, cg.constants, profile=profile).emit(steps)
    emit_py_entry(ctx, run_fn, len(module.main.args), len(module.main.result_types))
    main = module.main
    row_major = all(t.minor_to_major == t.default_layout
                    for t in list(main.arg_types) + list(main.result_types))
    # donation: the inputs the steps write, and the outputs that are a donated input's memory
    written = sorted(set(written_inputs(steps)) | set(lw.aliases.values()))
    aliases = dict(lw.aliases)
    # the CPython entry returns an aliased input as it is: only where the types are the same
    same_types = all(main.result_types[o] == main.arg_types[i] for o, i in aliases.items())
    call_entry = row_major and same_types
    if call_entry:  # the CPython entry (abi.CALL_ENTRY) takes the user's arrays as they are
        io_bytes = sum(t.nbytes
                       for t in list(main.arg_types) + list(main.result_types))
        emit_call_entry(ctx, run_fn, [tuple(t.shape) for t in main.arg_types],
                        [tuple(t.shape) for t in main.result_types],
                        hold_gil=is_tiny(steps, io_bytes + lw.arena_size),
                        in_nbytes=[t.nbytes for t in main.arg_types], written=written, aliases=aliases)
    # the library code it calls (defined elsewhere: the dump says where)
    ir_text = "".join(describe_core(sym) + "\n" for sym in sorted(cg.cores)) + str(ctx.module)
    t_emit = time.perf_counter() - t_start
    stage_hook.stage("llvm")
    obj, opt_mod, times = compile_ir(ir_text, opt_level)
    if getattr(optimized, "dump_dir", None):  # the LLVM IR (as emitted, optimized) and assembly
        _dump_listings(optimized.dump_dir, ir_text, opt_mod)
    times["emit"] = t_emit
    t_cores = time.perf_counter()
    cores = {sym: core_object(spec) for sym, spec in sorted(cg.cores.items())}
    times["cores"] = time.perf_counter() - t_cores
    from hlo.runtime.steps import type_desc as tdesc
    manifest = {
        "format": FORMAT_VERSION,
        "target": h.manifest_entry(),
        "entry": ENTRY,
        "py_entry": PY_ENTRY,
        **({"call_entry": CALL_ENTRY} if call_entry else {}),
        "inputs": [tdesc(t) for t in main.arg_types],
        "outputs": [tdesc(t) for t in main.result_types],
        "inputs_written": written,
        **({"aliases": [[o, i] for o, i in sorted(aliases.items())]} if aliases else {}),
        "arena_size": lw.arena_size,
        "kernels": list(cg.kernels),
        "libraries": ["blas"] if cg.uses_blas else [],
    }
    if cores:  # library code linked with the object (each once per process)
        manifest["cores"] = [{"symbol": s, "sha256": hashlib.sha256(o).hexdigest()} for s, o in cores.items()]
    if profile:  # what each counter slot of the profiled build times (the last: the whole call)
        from hlo.ir.printer import value_names

        from .profile_records import profile_steps
        manifest["profile"] = {"symbol": PROFILE,
                               "steps": profile_steps(timed_steps(steps), lw.origin, cg.products,
                                                      value_names(main))}
    if lw.host_sites:  # calls back into Python (hlo.ir.callbacks): the runtime's dispatcher
        manifest["host_calls"] = lw.host_sites
    if cg.uses_blas:
        b = find_blas()
        manifest["blas_symbols"] = [b.sgemm, b.dgemm]
    stage_hook.stage("load")
    t_load = time.perf_counter()
    exe = Executable(obj, manifest, ir_text=ir_text, steps_text="\n".join(describe_steps(steps)),
                     threads=threads, cores=cores)
    times["load"] = time.perf_counter() - t_load
    exe.compile_times = times
    exe.llvm_opt_level = opt_level  # (``Compiled.as_text("llvm"/"asm")`` runs the pipeline again)
    if getattr(optimized, "dump_dir", None):  # the dump's summary.txt shows where time went
        from hlo.passes.dump import add_backend_times
        opt_times = getattr(optimized, "compile_times", {})
        exe.compile_times = add_backend_times(optimized.dump_dir, opt_times.get("optimize", 0.0), times)
    return exe


def _dump_listings(dump_dir: str, ir_text: str, opt_mod) -> None:
    """``llvm.ll`` (the LLVM IR the backend emitted), ``llvm.opt.ll`` (after LLVM's optimization)
    and ``asm.s`` (the machine code) in the dump directory."""
    import os
    from .llvm_pipeline import optimized_listing
    os.makedirs(dump_dir, exist_ok=True)
    for name, text in (("llvm.ll", ir_text), ("llvm.opt.ll", optimized_listing(opt_mod, "llvm")),
                       ("asm.s", optimized_listing(opt_mod, "asm"))):
        with open(os.path.join(dump_dir, name), "w") as f:
            f.write(text)


def listing(exe, dialect: str) -> str:
    """``Compiled.as_text("llvm")`` / ``("asm")`` of a cpu ``Executable``: the optimized LLVM IR or
    the assembly, made again from the LLVM IR the executable keeps."""
    from .llvm_pipeline import listing as make
    text = getattr(exe, "ir_text", "")
    if not text:
        raise ValueError(
            f"as_text({dialect!r}): this executable was loaded (from the compilation cache or a "
            ".hlox file), which keeps no LLVM IR; compile it again with the cache off "
            "(hlo.config.update('cache', False)) or with a dump_dir to see it")
    return make(text, dialect, getattr(exe, "llvm_opt_level", 3))


def compile_module(module: Module, threads: Optional[int] = None, opt_level: int = 3,
                   profile: bool = False):
    """Optimize ``module`` with the passes' CPU pipeline, with this CPU's
    options (``CpuTarget.pass_options()``; products split over ``threads`` where given), then
    compile."""
    from hlo.runtime.cpu.target import host
    from hlo.passes.pipeline import optimize
    options = host().pass_options()
    if threads:
        options["dot_split_k"] = threads
    return compile(optimize(module, target="cpu", options=options), threads=threads, opt_level=opt_level,
                   profile=profile)


__all__ = ["compile", "compile_module", "UnsupportedOp"]
