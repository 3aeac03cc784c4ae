"""A compiled CUDA program: PTX, cubins, constants and the manifest with the step tree.

This is what ``hlo.backends.cuda.compile`` returns and what a ``.hlox`` file's ``code.cuda``
sections hold; it imports no code generator, so loading a saved program stays light. Calling
it hands it to the CUDA runtime (``hlo.runtime.cuda.CudaExecutable``, created on first call,
which returns ``DeviceArray`` objects); without a CUDA device that raises the runtime's
``CudaUnavailableError`` saying so.

Sections (``sections()`` / ``from_sections``): ``code.cuda`` (the PTX text),
``code.cuda.<arch>`` (a cubin for that architecture, when ptxas was present at compile time),
``code.cuda.consts`` (the constants' bytes, each 256-byte aligned, in manifest order).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

FORMAT = 1  # the CUDA program interface (manifest + sections); bump on incompatible changes
PTX_SECTION = "code.cuda"
CONST_SECTION = "code.cuda.consts"
CONST_ALIGN = 256


class CudaProgram:
    def __init__(self, manifest: dict, ptx: str, cubins: Dict[str, bytes], constants: Sequence[np.ndarray],
                 steps=None, steps_text: str = "", llvm_ir: str = ""):
        self.manifest = manifest
        self.ptx = ptx
        self.cubins = dict(cubins)
        self.constants = list(constants)
        self._steps = steps
        self.steps_text = steps_text
        self.llvm_ir = llvm_ir
        self.compile_times: dict = {}
        self._runtime = None
        self.input_names = None  # what a declined donation's warning calls the inputs

    # -- what the frontend and hlo.aot ask -------------------------------------------------

    object_code = None  # no host object: ``sections()`` is the saved form

    @property
    def arch(self) -> str:
        return self.manifest["target"]["arch"]

    @property
    def kernels(self) -> List[str]:
        return list(self.manifest["kernels"])

    @property
    def steps(self):
        if self._steps is None:
            from hlo.runtime.steps import steps_from_json
            self._steps = steps_from_json(self.manifest["steps"])
        return self._steps

    @property
    def row_major(self) -> bool:
        return False  # no unchecked fast path: arguments go through the runtime's checks

    def sections(self) -> Dict[str, bytes]:
        out = {PTX_SECTION: self.ptx.encode("utf-8")}
        for arch, cubin in self.cubins.items():
            out[f"{PTX_SECTION}.{arch}"] = cubin
        if self.constants:
            out[CONST_SECTION] = pack_constants(self.constants)
        return out

    @classmethod
    def from_sections(cls, manifest: dict, sections: Dict[str, bytes], steps_text: str = "") -> "CudaProgram":
        """The program of a loaded file (``ValueError`` where sections are missing or do not
        match the manifest)."""
        ptx = sections.get(PTX_SECTION)
        if ptx is None:
            raise ValueError(f"no {PTX_SECTION!r} section")
        prefix = PTX_SECTION + "."
        cubins = {k[len(prefix):]: v for k, v in sections.items()
                  if k.startswith(prefix) and k != CONST_SECTION}
        consts = unpack_constants(manifest.get("constants", []), sections.get(CONST_SECTION, b""))
        return cls(manifest, ptx.decode("utf-8"), cubins, consts, steps_text=steps_text)

    # -- running ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Start readying GPU 0 in the background (``hlo.load`` calls it): the driver's context
        and, where the program has matrix products, the cuBLASLt library. The first call then
        waits only for what is still under way; a failure there is raised by the first call."""
        from hlo.runtime.cuda import cublaslt, driver
        from hlo.runtime.steps import calls_library
        driver.start_context(0)
        if calls_library(self.steps, "cublaslt"):
            cublaslt.start_loading()

    def executable(self):
        """The runtime's ``CudaExecutable`` for this program on device 0 (created on first use):
        the cubin for the device's architecture when the program has one, else the PTX (the
        driver compiles it). Without a CUDA device: ``CudaUnavailableError`` saying so."""
        if self._runtime is None:
            from hlo.runtime.cuda import driver
            from hlo.runtime.cuda.errors import CudaUnavailableError
            from hlo.runtime.cuda.executable import CudaExecutable, encode_constants
            try:
                ctx = driver.get_context(0)
            except CudaUnavailableError:
                from hlo.runtime.cuda.probe import probe
                if probe() is not None:
                    raise
                raise CudaUnavailableError(
                    f"no CUDA device is present: this program was compiled for target 'cuda' "
                    f"({self.arch}) and needs an NVIDIA GPU and its driver to run; compile it for "
                    "target='cpu' to run it here") from None
            m = dict(self.manifest)
            m["target"] = {**m["target"], "name": "cuda"}
            m["constants"] = encode_constants([np.ascontiguousarray(c).tobytes() for c in self.constants])
            code = self.cubins.get(ctx.arch)
            rt = CudaExecutable(code if code is not None else self.ptx, m)
            rt.input_names = self.input_names
            self._runtime = rt
        return self._runtime

    @property
    def profiled(self) -> bool:
        """A build compiled with ``profile=True`` (``hlo.runtime.cuda.profile``)."""
        return self.manifest.get("profile") is not None

    def profile(self):
        """The profile of the calls so far (``CudaExecutable.profile``); ``NotProfiledError``
        for an unprofiled build."""
        return self._profiled_runtime().profile()

    def reset_profile(self) -> None:
        self._profiled_runtime().reset_profile()

    def _profiled_runtime(self):
        if not self.profiled:
            from hlo.runtime.cpu.profile import NOT_PROFILED, NotProfiledError
            raise NotProfiledError(NOT_PROFILED)
        return self.executable()

    def donation_stats(self) -> dict:
        """What donation did on this program's calls (``CudaExecutable.donation_stats``)."""
        if self._runtime is None:
            return {"used": 0, "declined": 0, "aliased_bytes": 0, "last_declined": {}}
        return self._runtime.donation_stats()

    @property
    def loaded(self):
        """The runtime's ``CudaExecutable`` if ``executable()`` has made it, else None."""
        return self._runtime

    def __call__(self, *args) -> list:
        """Queue a call: the results as ``DeviceArray`` objects at once (asynchronous, like
        jax's), what ``hlo.jit`` returns on target cuda."""
        return self.executable().run(list(args))


def pack_constants(arrays: Sequence[np.ndarray]) -> bytes:
    out = bytearray()
    for a in arrays:
        out += b"\0" * (-len(out) % CONST_ALIGN)
        out += np.ascontiguousarray(a).tobytes()
    return bytes(out)


def unpack_constants(descs: Sequence[dict], blob: bytes) -> List[np.ndarray]:
    import ml_dtypes
    out, pos = [], 0
    for d in descs:
        name = d["dtype"]
        dt = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
        shape = tuple(int(x) for x in d["shape"])
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        pos += -pos % CONST_ALIGN
        if pos + n > len(blob):
            raise ValueError("constants section shorter than the manifest says")
        out.append(np.frombuffer(blob[pos:pos + n], dtype=dt).reshape(shape).copy())
        pos += n
    return out


def describe_constant(a: np.ndarray) -> dict:
    return {"dtype": str(a.dtype), "shape": list(a.shape)}
