"""An NVIDIA GPU as a target: kind ``"cuda"``, triple ``nvptx64-nvidia-cuda``, the SM
architecture (``sm_90``) and the PTX ISA version the code is written in. ``device_target()``
takes the architecture from ``HLO_CUDA_ARCH`` (``sm_90`` or ``90``) or else from GPU 0 (through
the CUDA driver)."""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Dict, Tuple

from ..hlox import TargetMismatchError
from ..target import Target

TRIPLE = "nvptx64-nvidia-cuda"
# The lowest PTX ISA version (x10) that supports each architecture: code is written in it so
# that the widest range of ptxas / driver versions accepts it.
_MIN_PTX = {50: 40, 52: 41, 53: 42, 60: 50, 61: 50, 62: 50, 70: 60, 72: 61, 75: 63, 80: 70,
            86: 71, 87: 74, 89: 78, 90: 78, 100: 86, 101: 86, 103: 88, 120: 87, 121: 88}


def split_arch(text: str) -> Tuple[int, str]:
    """``(SM number, suffix)`` of ``sm_90`` / ``90`` / ``9.0`` / ``sm_90a`` / ``sm_100f``: the
    suffix is ``""``, ``"a"`` (arch-specific code: that GPU only) or ``"f"`` (family-specific:
    that GPU and newer ones of the same major version)."""
    m = re.fullmatch(r"\s*(?:sm_)?(\d+)(?:\.(\d))?([af]?)\s*", str(text))
    if not m:
        raise ValueError(f"not a CUDA architecture: {text!r} (expected e.g. sm_90)")
    sm = int(m.group(1)) * 10 + int(m.group(2)) if m.group(2) is not None else int(m.group(1))
    return sm, m.group(3)


def parse_arch(text: str) -> int:
    """The SM number of ``sm_90`` / ``90`` / ``9.0`` (what code is built for: no suffix)."""
    sm, suffix = split_arch(text)
    if suffix:
        raise ValueError(f"not a CUDA architecture to compile for: {text!r} (expected e.g. sm_90)")
    return sm


def arch_runs_on(arch: str, sm: int) -> bool:
    """Code built for ``arch`` (``sm_90``, ``sm_90a``, ``sm_100f``) runs on a GPU of SM number
    ``sm`` (compute capability major * 10 + minor): plain code (PTX is JIT-compiled forward) on
    that GPU or a newer one; ``a`` code on that GPU only; ``f`` code on that GPU and newer ones
    of the same major version. The one check both the loader (``CudaTarget.check_loadable``)
    and ``CudaExecutable`` apply. A malformed ``arch`` raises ValueError."""
    want, suffix = split_arch(arch)
    if suffix == "a":
        return sm == want
    if suffix == "f":
        return sm // 10 == want // 10 and sm >= want
    return sm >= want


def min_ptx(sm: int) -> int:
    known = [a for a in _MIN_PTX if a <= sm]
    if not known:
        raise ValueError(f"CUDA architecture sm_{sm} is older than any this hlo supports")
    return _MIN_PTX[max(known)] if sm not in _MIN_PTX else _MIN_PTX[sm]


@dataclass(frozen=True)
class CudaTarget(Target):
    sm: int  # 90 for sm_90
    ptx: int  # PTX ISA version x10 (78: PTX 7.8)
    kind = "cuda"
    triple = TRIPLE

    @classmethod
    def for_arch(cls, arch) -> "CudaTarget":
        sm = parse_arch(arch) if not isinstance(arch, int) else arch
        return cls(sm, min_ptx(sm))

    @property
    def arch(self) -> str:
        return f"sm_{self.sm}"

    @property
    def features(self) -> str:
        """The LLVM NVPTX feature string (the PTX ISA version)."""
        return f"+ptx{self.ptx}"

    def describe(self) -> str:
        return f"{self.triple} {self.arch} PTX {self.ptx // 10}.{self.ptx % 10}"

    def manifest_entry(self) -> dict:
        return {"kind": "cuda", "triple": self.triple, "arch": self.arch, "ptx": self.ptx}

    def check_loadable(self, entry: dict, where: str) -> None:
        """Code built for ``entry["arch"]`` runs on this GPU (``arch_runs_on``)."""
        if entry.get("triple") != self.triple:
            raise TargetMismatchError(f"{where} was compiled for {entry.get('triple')!r}, not for "
                                      f"an NVIDIA GPU ({self.triple})")
        arch = entry.get("arch", "")
        try:
            ok = arch_runs_on(arch, self.sm)
        except ValueError as e:
            raise TargetMismatchError(f"{where}: {e}") from None
        if not ok:
            raise TargetMismatchError(f"{where} was compiled for {arch}, this GPU is {self.arch}; "
                                      "compile it again here")

    def key_parts(self) -> Dict[str, str]:
        knobs = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                         if k.startswith("HLO_CUDA_") and k != "HLO_CUDA_ARCH")
        return {"cpu": f"{self.triple} {self.arch} {self.features}", "environment": knobs or "-"}

    def pass_options(self) -> dict:
        from hlo.passes.options import target_defaults
        return target_defaults("cuda")


def device_sm() -> int:
    """The SM architecture of GPU 0 (compute capability major*10 + minor); RuntimeError when
    there is no usable GPU."""
    from .probe import probe
    gpu = probe()
    if gpu is not None:
        return gpu.sm
    raise RuntimeError("no usable NVIDIA GPU (set HLO_CUDA_ARCH, e.g. sm_90, to compile for one)")


@functools.lru_cache(maxsize=None)
def _device_target(env_arch: str) -> CudaTarget:
    return CudaTarget.for_arch(env_arch if env_arch else device_sm())


def device_target() -> CudaTarget:
    """The GPU code is built for: ``HLO_CUDA_ARCH`` when set, else GPU 0."""
    return _device_target(os.environ.get("HLO_CUDA_ARCH", ""))


def current() -> CudaTarget:
    """This process's CUDA target (``hlo.runtime.target.current("cuda")``): ``device_target()``."""
    return device_target()
