"""The host CPU as a target: triple, CPU name and LLVM features (``host()``), the one
compatibility check for CPU code, the compilation cache's key parts, the target machine the
loader links with, and the thread count."""
from __future__ import annotations

import contextlib
import functools
import os
import threading
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


def _vector_bits(plus: set) -> int:
    if "avx512f" in plus:
        return 512
    return 256 if plus & {"avx", "avx2"} else 128


@dataclass(frozen=True)
class CpuTarget(Target):
    triple: str
    cpu: str
    features: str
    kind = "cpu"

    @property
    def vector_bits(self) -> int:
        """The vector width code is generated for: 512 where the CPU has AVX-512F (32 zmm
        registers; the GEMM's register tile and the streaming kernels' alignment follow it),
        256 with AVX/AVX2, else 128."""
        return _vector_bits(_plus(self.features))

    def has(self, feature: str) -> bool:
        """Whether code for this CPU may use LLVM feature ``feature`` (e.g. "avx512bf16")."""
        return feature in _plus(self.features)

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
        built = _plus(entry.get("features"))
        # the vector instruction sets first: they are what a file compiled elsewhere most often
        # needs (AVX-512 code on an AVX2-only machine)
        missing = sorted(built - _plus(self.features),
                         key=lambda f: (f not in ("avx512f", "avx2"), not f.startswith(("avx", "fma", "amx")), f))
        if missing:
            wide = _vector_bits(built)
            raise TargetMismatchError(
                f"{where} was compiled for a CPU ({entry.get('cpu')}, {wide}-bit vectors) with "
                f"features this one ({self.cpu}, {self.vector_bits}-bit vectors) lacks: "
                f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}; compile it again here")

    def key_parts(self) -> Dict[str, str]:
        from hlo.backends.cpu.blas import find_blas, gemm_mode
        # the BLAS is looked for (imported, opened: its threads start) only where
        # HLO_CPU_GEMM=blas selects it; else the key names the generated GEMM
        b = find_blas() if gemm_mode() == "blas" else None
        blas = "generated GEMM" if b is None else f"{os.path.basename(b.path)}:{b.sgemm},{b.dgemm}"
        # every HLO_CPU_* variable: the CPU backend's code-generation switches (HLO_CPU_GEMM, ...)
        knobs = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("HLO_CPU_"))
        caches = f"L1d={cache_bytes(1, 0)} L2={cache_bytes(2, 0)}"
        return {"cpu": f"{self.triple} {self.cpu} {self.features} {caches}",
                "environment": f"threads={default_threads()} gemm={blas}" + (f" {knobs}" if knobs else "")}

    def pass_options(self) -> dict:
        """The pipeline's cpu defaults, and pass ``dot-split-k``'s facts of this machine: a
        product splits over the threads it runs on, where each part's RHS is at least 3/8 of a
        core's L2 (no longer kept in cache from call to call)."""
        from hlo.passes.options import target_defaults
        return {**target_defaults("cpu"), "dot_split_k": default_threads(),
                "dot_split_k_min_rhs_bytes": cache_bytes(2, 1 << 20) * 3 // 8}


@functools.lru_cache(maxsize=None)
def _machine() -> CpuTarget:
    import llvmlite.binding as llvm
    _init()
    return CpuTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                     llvm.get_host_cpu_features().flatten())


_stand_in = threading.local()  # .stack: the targets ``standing_in`` names, in this thread


def host() -> CpuTarget:
    """This machine's CPU (or the one ``standing_in`` names in this thread): what code is
    generated for (its vector width, register tiles) and what loaded code is checked against."""
    stack = getattr(_stand_in, "stack", None)
    return stack[-1] if stack else _machine()


def current() -> CpuTarget:
    """This process's CPU target (``hlo.runtime.target.current("cpu")``): ``host()``."""
    return host()


@contextlib.contextmanager
def standing_in(target: CpuTarget):
    """Within the block, ``host()`` is ``target`` in the calling thread (another thread, such
    as the one ``gemm_library`` compiles library code in, keeps its own): code is compiled for
    that CPU (e.g. AVX2 code on an AVX-512 machine, which runs it) and loaded code is checked
    against its features (an AVX-512 file refused where only AVX2 is). For tests and tools."""
    stack = getattr(_stand_in, "stack", None)
    if stack is None:
        stack = _stand_in.stack = []
    stack.append(target)
    try:
        yield target
    finally:
        stack.pop()


@functools.lru_cache(maxsize=None)
def cache_bytes(level: int, default: int) -> int:
    """The size of one core's data (or unified) cache of ``level`` (1: L1d, 2: L2), read from
    Linux's sysfs; ``default`` where that is not available. The tiled GEMM blocks for it."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith("index"):
                continue
            read = lambda f: open(os.path.join(base, d, f)).read().strip()
            if int(read("level")) == level and read("type") in ("Data", "Unified"):
                size = read("size")
                mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
                return int(size.rstrip("KMG")) * mult
    except (OSError, ValueError):
        pass
    return default


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
