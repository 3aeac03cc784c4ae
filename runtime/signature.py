"""What every target's executable says about its inputs and results: ``_Sig`` (dtype, shape,
layout and byte size of one of them, read from a manifest entry), ``Signature`` (the kernels
and the types an executable takes and returns) and ``ArgumentError``, what a call with
arguments of the wrong number, shape or dtype raises.

Its own module so that the CUDA runtime reads signatures without importing the CPU
executable (which links object code with llvmlite): loading a saved CUDA program stays light.
"""
from __future__ import annotations

from typing import List

import numpy as np

from hlo.ir.types import BY_NAME


class ArgumentError(TypeError):
    """Arguments of the wrong number, shape or dtype for an executable."""


def _type_str(dtype_name: str, shape) -> str:
    return f"{dtype_name}[{','.join(str(d) for d in shape)}]"


class _Sig:
    __slots__ = ("dtype", "shape", "name", "perm", "phys_shape", "nbytes")

    def __init__(self, d):
        self.name = d["dtype"]
        self.dtype = BY_NAME[d["dtype"]].np_dtype
        self.shape = tuple(d["shape"])
        lay = d.get("layout")
        default = tuple(range(len(self.shape) - 1, -1, -1))
        # Physical order (major -> minor) when the layout is not row-major.
        self.perm = None if lay is None or tuple(lay) == default else tuple(reversed(lay))
        self.phys_shape = self.shape if self.perm is None else tuple(self.shape[p] for p in self.perm)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class Signature:
    """What every target's executable says about itself: its kernels and the types it takes
    and returns (``manifest``, ``_in`` and ``_out`` lists of ``_Sig``)."""

    manifest: dict
    _in: list   # of _Sig, or a target's subclass of it
    _out: list

    @property
    def kernels(self) -> List[str]:
        return list(self.manifest.get("kernels", []))

    @property
    def input_types(self) -> List[str]:
        return [_type_str(s.name, s.shape) for s in self._in]

    @property
    def output_types(self) -> List[str]:
        return [_type_str(s.name, s.shape) for s in self._out]
