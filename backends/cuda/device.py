"""The GPU a program is compiled for: its target (``hlo.runtime.cuda.target.CudaTarget``:
architecture, PTX version) and its multiprocessor count, which launch shapes are a function of.

The architecture is ``HLO_CUDA_ARCH`` when set, else GPU 0's, else (compiling on a machine
without a GPU) ``sm_90``. The multiprocessor count is ``HLO_CUDA_SMS`` when set, else GPU 0's
when compiling for it (no ``HLO_CUDA_ARCH``), else that architecture's usual data-center part. A program
compiled for another count still runs correctly: its kernels loop over whatever grid they get.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from hlo.runtime.cuda.probe import probe
from hlo.runtime.cuda.target import CudaTarget, device_target

DEFAULT_ARCH = "sm_90"
# multiprocessors of the data-center part of each architecture (V100, T4, A100, A10, L40,
# H100/H200 SXM, B200)
TYPICAL_SMS = {70: 80, 75: 40, 80: 108, 86: 84, 89: 142, 90: 132, 100: 148}


@dataclass(frozen=True)
class LaunchDevice:
    target: CudaTarget
    sm_count: int

    @property
    def arch(self) -> str:
        return self.target.arch


def launch_device() -> LaunchDevice:
    """What to compile for (see the module docstring)."""
    try:
        target = device_target()
        on_device = not os.environ.get("HLO_CUDA_ARCH")
    except RuntimeError:  # no GPU here and no HLO_CUDA_ARCH: cross-compile for the default
        target, on_device = CudaTarget.for_arch(DEFAULT_ARCH), False
    env_sms = os.environ.get("HLO_CUDA_SMS")
    if env_sms:
        if not env_sms.isdigit() or int(env_sms) < 1:
            raise ValueError(f"HLO_CUDA_SMS={env_sms!r}: expected a positive number of multiprocessors")
        return LaunchDevice(target, int(env_sms))
    gpu = probe() if on_device else None
    sms = gpu.sm_count if gpu is not None else None
    return LaunchDevice(target, sms or TYPICAL_SMS.get(target.sm, 108))
