"""The host CPU as an LLVM target: triple, CPU name and features, vector width, thread count,
and the optimization pipeline that turns our LLVM IR into object code."""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite.binding.newpassmanagers import NewPassManager

from .streaming import STREAM_TYPE, add_nontemporal_hints


@functools.lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class HostTarget:
    triple: str
    cpu: str
    features: str

    @property
    def vector_bits(self) -> int:
        f = self.features.split(",")
        if "+avx512f" in f:
            return 512
        if "+avx2" in f or "+avx" in f:
            return 256
        return 128

    def describe(self) -> str:
        return f"{self.triple} cpu={self.cpu} vector={self.vector_bits}bit"


@functools.lru_cache(maxsize=None)
def host() -> HostTarget:
    _init()
    return HostTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      llvm.get_host_cpu_features().flatten())


@functools.lru_cache(maxsize=None)
def target_machine():
    """The shared target machine used for code generation (never handed to an engine)."""
    return new_target_machine()


def new_target_machine():
    """A fresh target machine (an MCJIT engine takes ownership of the one it is given)."""
    _init()
    h = host()
    t = llvm.Target.from_triple(h.triple)
    return t.create_target_machine(cpu=h.cpu, features=h.features, opt=3, reloc="pic",
                                   codemodel="default")


def default_threads() -> int:
    """All cores of the machine, capped by ``HLO_CPU_THREADS`` when set."""
    n = os.cpu_count() or 1
    try:
        n = len(os.sched_getaffinity(0)) or n
    except (AttributeError, OSError):
        pass
    cap = os.environ.get("HLO_CPU_THREADS")
    if cap:
        try:
            c = int(cap)
        except ValueError:
            raise ValueError(f"HLO_CPU_THREADS must be a positive integer, got {cap!r}") from None
        if c < 1:
            raise ValueError(f"HLO_CPU_THREADS must be a positive integer, got {cap!r}")
        n = min(n, c)
    return max(1, n)


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
    mod.triple = host().triple
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
