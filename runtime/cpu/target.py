"""The host CPU as a target: triple, CPU name and LLVM features (``host()``), the one
compatibility check for CPU code, the compilation cache's key parts, the target machine the
loader links with, and the thread count."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Dict

from ..hlox import TargetMismatchError
from ..target import Target, arch_os


@functools.lru_cache(maxsize=None)
def _init() -> None:
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def _plus(features: str) -> set:
    return {f[1:] for f in (features or "").split(",") if f.startswith("+")}


@dataclass(frozen=True)
class CpuTarget(Target):
    triple: str
    cpu: str
    features: str
    kind = "cpu"

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

    def manifest_entry(self) -> dict:
        return {"kind": "cpu", "triple": self.triple, "cpu": self.cpu, "features": self.features}

    def check_loadable(self, entry: dict, where: str) -> None:
        """Code built for ``entry`` (a manifest's target) runs here if the architecture and the
        OS are this machine's and this CPU has every feature it was built with."""
        triple = entry.get("triple") or ""
        if arch_os(triple) != arch_os(self.triple):
            raise TargetMismatchError(f"{where} was compiled for {triple or 'an unknown triple'}, "
                                      f"this machine is {self.triple}; compile it again here")
        missing = sorted(_plus(entry.get("features")) - _plus(self.features))
        if missing:
            raise TargetMismatchError(
                f"{where} was compiled for a CPU ({entry.get('cpu')}) with features this one "
                f"({self.cpu}) lacks: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}; "
                "compile it again here")

    def key_parts(self) -> Dict[str, str]:
        from hlo.backends.cpu.blas import find_blas
        b = find_blas()
        blas = "generated GEMM" if b is None else f"{os.path.basename(b.path)}:{b.sgemm},{b.dgemm}"
        # every HLO_CPU_* variable: the CPU backend's code-generation switches (HLO_CPU_GEMM, ...)
        knobs = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("HLO_CPU_"))
        return {"cpu": f"{self.triple} {self.cpu} {self.features}",
                "environment": f"threads={default_threads()} gemm={blas}" + (f" {knobs}" if knobs else "")}

    def pass_options(self) -> dict:
        from hlo.passes.options import target_defaults
        return target_defaults("cpu")


@functools.lru_cache(maxsize=None)
def host() -> CpuTarget:
    import llvmlite.binding as llvm
    _init()
    return CpuTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                     llvm.get_host_cpu_features().flatten())


def new_target_machine():
    """A fresh target machine for the host (an MCJIT engine takes ownership of the one it is
    given)."""
    import llvmlite.binding as llvm
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
