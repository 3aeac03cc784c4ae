"""The optimization pipeline that turns the CPU backend's LLVM IR into object code for the host.
The host's identity (triple, CPU, features, vector width, thread count, the compatibility
check) is ``hlo.runtime.cpu.target``, which the load path shares."""
from __future__ import annotations

import functools
import time

import llvmlite.binding as llvm
from llvmlite.binding.newpassmanagers import NewPassManager

from hlo.runtime.cpu import target as _target
from hlo.runtime.cpu.target import _init, new_target_machine

from .streaming import STREAM_TYPE, add_nontemporal_hints


def target_machine():
    """The shared target machine used for code generation (never handed to an engine), one
    per CPU that ``host()`` names."""
    return _machine_for(_target.host())


@functools.lru_cache(maxsize=None)
def _machine_for(h):
    return new_target_machine()


def run_module_pipeline(mod, tm, pto) -> None:
    """LLVM's default module pipeline for ``pto`` on ``mod``, freeing the pass manager after.

    llvmlite (0.44-0.50) never frees a ``ModulePassManager``: the class lists ``ffi.ObjectRef``
    before ``NewPassManager``, so ObjectRef's empty ``_dispose`` hides the one that deletes it
    (~65 KiB per O3 pipeline). It is deleted here by hand. The pass builder cannot be reused to
    save its own ~1.6 KiB (its instrumentation callbacks, which llvmlite never frees either):
    every run registers callbacks into it that point at that run's locals, so a second run
    through one builder would call into freed memory."""
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        NewPassManager._dispose(mpm)  # the dispose llvmlite's method order hides
        mpm.detach()


def compile_ir(ir_text: str, opt_level: int = 3):
    """Parse, verify, optimize and emit object code. Returns (object bytes, optimized IR text,
    timings dict)."""
    _init()
    times = {}
    t0 = time.perf_counter()
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    times["llvm_parse"] = time.perf_counter() - t0
    tm = target_machine()
    mod.triple = _target.host().triple
    mod.data_layout = str(tm.target_data)
    t0 = time.perf_counter()
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        # The vectorizer's interleaving already unrolls hot loops; full loop unrolling on top
        # doubled optimization time and code size for no measured gain.
        pto.loop_unrolling = False
        run_module_pipeline(mod, tm, pto)
        if STREAM_TYPE in ir_text:  # non-temporal hints on aligned streaming stores
            hinted = add_nontemporal_hints(str(mod))
            if hinted is not None:
                mod = llvm.parse_assembly(hinted)
    times["llvm_opt"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    obj = tm.emit_object(mod)
    times["llvm_codegen"] = time.perf_counter() - t0
    return obj, mod, times


def listing(ir_text: str, dialect: str, opt_level: int = 3) -> str:
    """What ``compile_ir(ir_text, opt_level)`` makes of ``ir_text``, as text: ``"llvm"`` the
    optimized LLVM IR, ``"asm"`` the machine code as assembly (the same pipeline again: the
    compile itself keeps neither, so it costs nothing unless asked)."""
    _, mod, _ = compile_ir(ir_text, opt_level)
    return optimized_listing(mod, dialect)


def optimized_listing(mod, dialect: str) -> str:
    """``"llvm"`` / ``"asm"`` text of a module ``compile_ir`` optimized."""
    if dialect == "llvm":
        return str(mod)
    if dialect == "asm":
        return target_machine().emit_assembly(mod)
    raise ValueError(f"unknown listing {dialect!r}; expected 'llvm' or 'asm'")
