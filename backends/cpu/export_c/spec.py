"""What an exported library is made from: ``LibrarySpec`` (its name, each argument's and
result's name, dtype, shape and size, the donations, the workspace, the target) read from a CPU
``Executable`` and the signature's names, and checked against what the C API can carry."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from hlo.runtime.signature import _Sig

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# C keywords and names the C library owns, which a library name may not be
RESERVED = frozenset("""auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while main hlo""".split())

# dtype name -> how the header describes one element
C_ELEMENT = {
    "pred": "uint8_t (0 or 1)", "s8": "int8_t", "s16": "int16_t", "s32": "int32_t", "s64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
    "f16": "uint16_t (IEEE half bits)", "bf16": "uint16_t (bfloat16 bits)", "f32": "float", "f64": "double",
    "c64": "float[2] (real, imaginary)", "c128": "double[2] (real, imaginary)",
    "s2": "int8_t (2-bit value, one per byte)", "s4": "int8_t (4-bit value, one per byte)",
    "u2": "uint8_t (2-bit value, one per byte)", "u4": "uint8_t (4-bit value, one per byte)",
}


class ExportError(ValueError):
    """A program that cannot be exported as a C library, or an export that failed."""


@dataclass(frozen=True)
class ArgSpec:
    name: str
    dtype: str      # hlo's name: f32, bf16, s32, ...
    shape: Tuple[int, ...]
    nbytes: int
    align: int      # bytes: the element type's natural alignment

    @property
    def type_text(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"

    @property
    def element_text(self) -> str:
        if self.dtype in C_ELEMENT:
            return C_ELEMENT[self.dtype]
        return f"uint8_t ({self.dtype} code, one per byte)"  # the small floats


@dataclass
class LibrarySpec:
    name: str
    function: str
    inputs: List[ArgSpec]
    outputs: List[ArgSpec]
    aliases: Dict[int, int]          # output -> donated input whose memory it is
    written: Tuple[int, ...]         # inputs the program writes (donated)
    arena_size: int
    triple: str
    cpu: str
    features: str
    hlo_version: str
    uses_pool: bool
    objects: Dict[str, bytes] = field(default_factory=dict)  # file name -> object code

    @property
    def target_text(self) -> str:
        return f"cpu {self.triple} {self.cpu}"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name) or name in RESERVED or name.startswith("hlo_"):
        raise ExportError(f"library name {name!r}: must be a C identifier of at most 64 characters "
                          "(letters, digits, _; not a C keyword, not starting with hlo_), e.g. 'layer'")
    return name


def _arg(d: dict, name: str, what: str) -> ArgSpec:
    s = _Sig(d)
    if s.perm is not None:
        raise ExportError(f"{what} {name} is laid out {list(d.get('layout') or [])} (not row-major); "
                          "the C API takes row-major buffers, and this program's layout assignment "
                          "chose another: export is not there yet for such programs")
    return ArgSpec(name, s.name, tuple(int(x) for x in s.shape), int(s.nbytes), int(s.dtype.alignment))


def from_executable(exe, name: str, arg_names: Optional[Sequence[str]] = None,
                    function: str = "", hlo_version: str = "") -> LibrarySpec:
    """The spec of ``exe`` (a CPU ``hlo.runtime.cpu.executable.Executable``); ``ExportError``
    for what the C API cannot carry: host callbacks, a BLAS build, a profiled build, a layout
    other than row-major."""
    check_name(name)
    m = exe.manifest
    if any(d.get("collective") for d in m.get("host_calls") or []):
        raise ExportError("this program holds collectives (an SPMD program over several devices); "
                          "an exported C library runs on one device: export a program without them")
    if m.get("host_calls"):
        raise ExportError("this program calls back into Python (hlo.debug.print / hlo.pure_callback); "
                          "an exported C library cannot: export a version without them")
    if m.get("libraries"):
        raise ExportError(f"this program calls the libraries {m['libraries']} (compiled with "
                          "HLO_CPU_GEMM=blas); export one compiled without HLO_CPU_GEMM=blas, "
                          "whose products are hlo's own code")
    if m.get("profile"):
        raise ExportError("this is a profiled build (compile(profile=True)); the C API has no "
                          "profile queries: export an unprofiled build")
    nin, nout = len(m["inputs"]), len(m["outputs"])
    names = list(arg_names) if arg_names is not None else [f"arg{i}" for i in range(nin)]
    if len(names) != nin:
        raise ExportError(f"{len(names)} argument names for {nin} inputs")
    out_names = ["result"] if nout == 1 else [f"result{i}" for i in range(nout)]
    inputs = [_arg(d, n, "argument") for d, n in zip(m["inputs"], names)]
    outputs = [_arg(d, n, "result") for d, n in zip(m["outputs"], out_names)]
    aliases = {int(o): int(i) for o, i in (m.get("aliases") or [])}
    tgt = m.get("target") or {}
    return LibrarySpec(name=name, function=function or name, inputs=inputs, outputs=outputs,
                       aliases=aliases, written=tuple(int(i) for i in exe.inputs_written),
                       arena_size=int(m["arena_size"]), triple=str(tgt.get("triple", "")),
                       cpu=str(tgt.get("cpu", "")), features=str(tgt.get("features", "")),
                       hlo_version=hlo_version, uses_pool=False)
