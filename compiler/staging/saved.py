"""Saved executables: a ``Compiled`` as an ``.hlox`` payload, and ``LoadedExecutable``, what
loading one gives. ``hlo.aot`` is the user API on top (compile, save, load); ``Compiled.save``
and the persistent compilation cache (``hlo.staging.cache``) use this module directly.

What a file holds (see ``hlo.runtime.hlox`` for the container's bytes): the manifest (JSON:
format and hlo versions, target kind + triple + CPU + features, the signature with pytree
structures, the runtime's own manifest, buffer plan, call sequence, cost and memory analyses,
the external symbols the code needs), the native code (section ``code.<target kind>``) and the
optimized IR text (section ``ir``).

A saved executable is native code that runs in the loading process: load files only from
trusted sources, as with pickle (README, "Trust model"). Loading checks, before anything is
linked: the container (length, magic, format version, sha256), the whole manifest against
``hlo.runtime.manifest_schema`` (types, ranges, signature = runtime records = the IR's @main), the target (kind, architecture and OS, CPU features), and that
every external symbol the code calls resolves in this process. Only then is the object code
linked (the same path a freshly compiled executable takes). This module is on the load path of
a fresh process: it imports neither the tracer, the passes nor a code generator.
"""
from __future__ import annotations

import collections
import dataclasses
import struct
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from hlo.ir.targets import COMPILED, info
from hlo.runtime import hlox
from hlo.runtime.cpu import pycall
from hlo.runtime.cpu.profile import ProfileMethods
from hlo.runtime.cuda.interop import gpu_array_type
from hlo.runtime.hlox import (
    CorruptFileError,
    FormatVersionError,
    InputMismatchError,
    LoadError,
    SaveError,
)
from hlo.runtime.manifest_schema import check_ir_signature, check_manifest
from hlo.runtime.memory_analysis import MemoryAnalysis
from hlo.runtime.target import check_kind, current

from .. import tree_util
from ..base.boundary import native_first, refresh_native
from ..base.signature import flatten_inputs, plain_name
from ..tree_util import PyTreeDef

SUPPORTED_TARGET_KINDS = COMPILED  # kinds this hlo can load
# kind -> the LoadedExecutable method that links (cpu) or prepares (cuda) its ``code.<kind>``
LOADERS = {"cpu": "_load_cpu", "cuda": "_load_cuda"}


# --------------------------------------------------------------------------------------------
# Pytree structures as JSON
# --------------------------------------------------------------------------------------------

NESTED_MAX_DEPTH = 100  # deeper structures are written flat (JSON nesting has limits)


def tree_to_json(td: Optional[PyTreeDef], what: str = "the arguments") -> Any:
    """A JSON description of a tree structure: ``{"leaf": 1}``, ``{"none": 1}``,
    ``{"tuple": [...]}``, ``{"list": [...]}``, ``{"dict": [[key, child], ...]}`` (sorted
    keys, as flattening orders them), ``{"odict": [[key, child], ...]}``. Keys are strings or
    integers. Other containers (namedtuples, registered classes) cannot be rebuilt from a
    description and raise ``SaveError``.

    A structure more than ``NESTED_MAX_DEPTH`` deep is written flat instead (JSON parsers,
    Python's included, stop at ~1,000 levels of nesting): ``{"nodes": [node, ...]}``, its nodes
    in prefix order, each ``"leaf"``, ``"none"``, ``["tuple", n]``, ``["list", n]`` (n
    children follow) or ``["dict", [key, ...]]``, ``["odict", [key, ...]]`` (one child per
    key follows). Both forms are read back."""
    if td is None:
        return None
    flat: List[Any] = []
    deepest, stack = 0, [(td, 0)]
    while stack:  # prefix order, checking every container on the way
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        flat.append(_flat_node(node, what))
        stack.extend((c, depth + 1) for c in reversed(node.children))
    if deepest > NESTED_MAX_DEPTH:
        return {"nodes": flat}
    return _nested(iter(flat))


def _flat_node(td: PyTreeDef, what: str) -> Any:
    kind = td.kind
    if tree_util.treedef_is_leaf(td):
        return "leaf"
    if kind is type(None):
        return "none"
    if kind is tuple or kind is list:
        return [kind.__name__, len(td.children)]
    if kind is dict or kind is collections.OrderedDict:
        keys = list(td.aux)
        for k in keys:
            if type(k) not in (str, int):
                raise SaveError(f"{what} use a dict key {k!r} of type {type(k).__name__}; a saved "
                                "executable can describe only str and int keys")
        return ["dict" if kind is dict else "odict", keys]
    name = getattr(kind, "__qualname__", getattr(kind, "__name__", repr(kind)))
    raise SaveError(
        f"{what} use the container {name}, which a saved executable cannot describe (only tuples, "
        "lists, dicts, OrderedDicts and None are stored, as JSON; rebuilding another class would "
        "mean running code from the file). Pass its contents as a tuple or dict instead")


def _nested(it) -> Any:
    """The nested description of a flat node list (at most NESTED_MAX_DEPTH deep: recursion)."""
    node = next(it)
    if node == "leaf":
        return {"leaf": 1}
    if node == "none":
        return {"none": 1}
    kind, body = node
    if kind in ("tuple", "list"):
        return {kind: [_nested(it) for _ in range(body)]}
    return {kind: [[k, _nested(it)] for k in body]}


def tree_from_json(j: Any) -> Optional[PyTreeDef]:
    """The ``PyTreeDef`` of a ``tree_to_json`` description (raises ``ValueError`` if malformed)."""
    if j is None:
        return None
    if isinstance(j, dict) and len(j) == 1 and "nodes" in j:
        return _tree_flat(j["nodes"])
    return _tree(j, 0)


def _tree_flat(nodes: Any) -> PyTreeDef:
    """The structure of a flat description: its nodes in prefix order, rebuilt with a stack of
    (kind, aux, children wanted, children built)."""
    if not isinstance(nodes, list) or not nodes:
        raise ValueError("malformed flat tree: 'nodes' is not a non-empty list")
    stack: List[list] = []
    for i, node in enumerate(nodes):
        if node == "leaf":
            built = tree_util.leaf_treedef()
        elif node == "none":
            built = PyTreeDef(type(None), None, ())
        elif isinstance(node, list) and len(node) == 2 and node[0] in ("tuple", "list") \
                and type(node[1]) is int and 0 <= node[1] <= len(nodes):
            stack.append([tuple if node[0] == "tuple" else list, None, node[1], []])
            built = None
        elif isinstance(node, list) and len(node) == 2 and node[0] in ("dict", "odict") \
                and isinstance(node[1], list) and all(type(k) in (str, int) for k in node[1]):
            stack.append([dict if node[0] == "dict" else collections.OrderedDict,
                          tuple(node[1]), len(node[1]), []])
            built = None
        else:
            raise ValueError(f"malformed flat tree node {i}: {str(node)[:60]!r}")
        while True:  # close every container whose children are all built
            if built is not None:
                if not stack:
                    if i != len(nodes) - 1:
                        raise ValueError(f"malformed flat tree: {len(nodes) - i - 1} nodes after "
                                         "the root's last")
                    return built
                stack[-1][3].append(built)
            if not stack or len(stack[-1][3]) < stack[-1][2]:
                break
            kind, aux, _, kids = stack.pop()
            built = PyTreeDef(kind, aux, tuple(kids))
    raise ValueError(f"malformed flat tree: the nodes end inside {len(stack)} open containers")


def _tree(j: Any, depth: int) -> PyTreeDef:
    if depth > NESTED_MAX_DEPTH or not isinstance(j, dict) or len(j) != 1:
        raise ValueError(f"malformed tree node {str(j)[:60]!r}")
    (kind, body), = j.items()
    if kind == "leaf":
        return tree_util.leaf_treedef()
    if kind == "none":
        return PyTreeDef(type(None), None, ())
    if kind in ("tuple", "list"):
        if not isinstance(body, list):
            raise ValueError(f"malformed {kind} node")
        kids = tuple(_tree(c, depth + 1) for c in body)
        return PyTreeDef(tuple if kind == "tuple" else list, None, kids)
    if kind in ("dict", "odict"):
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 and
                                                 type(p[0]) in (str, int) for p in body):
            raise ValueError(f"malformed {kind} node")
        keys = tuple(p[0] for p in body)
        kids = tuple(_tree(p[1], depth + 1) for p in body)
        return PyTreeDef(dict if kind == "dict" else collections.OrderedDict, keys, kids)
    raise ValueError(f"unknown tree node kind {kind!r}")


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------

def _aval_json(aval) -> dict:
    from hlo.ir.types import element_type
    return {"dtype": element_type(aval.dtype).name, "shape": list(aval.shape),
            "weak_type": bool(getattr(aval, "weak_type", False))}


def _symbols_or_none(obj: bytes):
    """``(defined, undefined)`` symbol names of an object, or None where its format is not
    understood or it is corrupt (then loading cannot check its imports in advance)."""
    from hlo.runtime.cpu import elf
    try:
        return elf.symbols(obj)
    except (struct.error, IndexError, ValueError):
        return None


def object_imports(obj: bytes) -> Optional[List[str]]:
    """The external symbols an object calls (None if its format is not understood)."""
    syms = _symbols_or_none(obj)
    return None if syms is None else syms[1]


def _analysis_json(art) -> dict:
    cost = art.cost_analysis()
    mem = art.memory_analysis()
    return {"cost": {k: (v if isinstance(v, (int, str)) else float(v)) for k, v in cost.items()},
            "memory": {f: int(getattr(mem, f)) for f in MemoryAnalysis.__dataclass_fields__}}


def artifact_payload(art) -> hlox.Payload:
    """The payload of a compiled ``Artifact`` (no call signature: flat arrays in and out)."""
    import hlo
    exe = getattr(art, "executable", None)
    if art.target == "cuda" and exe is not None:
        return _cuda_payload(art, exe)
    if exe is None or getattr(exe, "object_code", None) is None:
        raise SaveError(f"an executable for target {art.target!r} has no native code to save; "
                        "compile it for target='cpu' (hlo.aot.compile(f, *specs, target='cpu'))")
    from hlo.ir.callbacks import first_host_callback  # not on the load path
    cb = first_host_callback(art.optimized_module)
    python_sites = [d for d in exe.manifest.get("host_calls") or [] if not d.get("collective")]
    if cb is not None or python_sites:  # (a collective's site is a record, saved as it is)
        at = f" ({cb.attrs.get('what') or 'a host callback'} at {cb.loc})" if cb is not None else ""
        raise SaveError(f"this program calls back into Python{at}: a saved executable cannot hold "
                        "the Python callable (it cannot be serialized); save a version without "
                        "hlo.debug.print / hlo.pure_callback")
    rt = dict(exe.manifest)
    tgt = rt.get("target") or {}
    opt = art.optimize_result
    plan = opt.buffers.text() if opt is not None and hasattr(opt.buffers, "text") else ""
    manifest = {
        "target": dict(tgt, kind=art.target),
        "runtime": rt,
        "buffer_plan": {"arena_size": int(rt.get("arena_size", 0)), "text": plan.splitlines()},
        "call_sequence": (exe.steps_text or "").splitlines(),
        "analyses": _analysis_json(art),
    }
    syms = _symbols_or_none(exe.object_code)
    manifest["imports"] = None if syms is None else syms[1]
    code = f"code.{manifest['target']['kind']}"
    manifest["hlo_version"] = hlo.__version__
    manifest["sections"] = {code: "native code: a relocatable object file for the target triple",
                            "ir": "the optimized module (hlo IR text)"}
    sections = {code: exe.object_code, "ir": art.module_text().encode("utf-8")}
    for i, c in enumerate(rt.get("cores") or []):  # library code the object calls
        name = f"{CORE_SECTION}{i}"
        sections[name] = exe.core_objects[c["symbol"]]
        manifest["sections"][name] = (f"native code: the library code {c['symbol']} that the "
                                      "object calls (linked at load unless already present)")
        manifest["imports"] = _merge_imports(manifest["imports"], object_imports(sections[name]))
    pool = _pool_object_if_used(syms)
    if pool is not None:
        sections[POOL_SECTION] = pool
        manifest["sections"][POOL_SECTION] = ("native code: the runtime's worker pool that parallel "
                                              "kernels call (linked at load unless already present)")
        manifest["imports"] = _merge_imports(manifest["imports"], object_imports(pool))
    return hlox.Payload(manifest, sections)


def _cuda_payload(art, prog) -> hlox.Payload:
    """A CUDA program's payload: its own sections (``code.cuda``: PTX; ``code.cuda.<arch>``: a
    cubin; ``code.cuda.consts``: constants; see ``hlo.runtime.cuda.artifact``)."""
    import hlo
    rt = dict(prog.manifest)
    opt = art.optimize_result
    plan = opt.buffers.text() if opt is not None and hasattr(opt.buffers, "text") else ""
    tgt = rt["target"]
    sections = dict(prog.sections())
    manifest = {
        "target": {k: v for k, v in tgt.items() if k in ("kind", "triple", "arch", "ptx", "features")},
        "runtime": rt,
        "buffer_plan": {"arena_size": int(rt.get("arena_size", 0)), "text": plan.splitlines()},
        "call_sequence": (prog.steps_text or "").splitlines(),
        "analyses": _analysis_json(art),
        "imports": [],
        "hlo_version": hlo.__version__,
        "sections": {k: ("PTX for " + tgt["arch"] if k == "code.cuda" else
                         "constants' bytes" if k.endswith(".consts") else f"cubin for {k[10:]}")
                     for k in sections},
    }
    manifest["sections"]["ir"] = "the optimized module (hlo IR text)"
    sections["ir"] = art.module_text().encode("utf-8")
    return hlox.Payload(manifest, sections)


POOL_SECTION = "code.cpu.pool"
CORE_SECTION = "code.cpu.core."  # + the index of the core in the runtime manifest's ``cores``


def core_objects(runtime: dict, sections: Dict[str, bytes], where: str) -> Dict[str, bytes]:
    """The library code a CPU executable calls, by symbol, from its code sections: one section
    per entry of ``runtime["cores"]``, whose sha256 and symbol must be the entry's; a missing,
    changed or unlisted core section is a ``CorruptFileError``."""
    import hashlib
    entries = runtime.get("cores") or []
    out = {}
    for i, e in enumerate(entries):
        name = f"{CORE_SECTION}{i}"
        obj = sections.get(name)
        if obj is None:
            raise CorruptFileError(f"{where}: no native code section {name!r} for the library "
                                   f"code {e['symbol']} that the executable calls")
        if hashlib.sha256(obj).hexdigest() != e["sha256"]:
            raise CorruptFileError(f"{where}: section {name!r} is not the library code "
                                   f"{e['symbol']} the executable was linked with (sha256 differs)")
        syms = _symbols_or_none(obj)
        if syms is None or e["symbol"] not in syms[0]:
            raise CorruptFileError(f"{where}: section {name!r} does not define {e['symbol']}")
        out[e["symbol"]] = obj
    extra = sorted(k for k in sections if k.startswith(CORE_SECTION) and
                   k[len(CORE_SECTION):] not in {str(i) for i in range(len(entries))})
    if extra:
        raise CorruptFileError(f"{where}: code section(s) {', '.join(extra)} that the manifest "
                               "does not list")
    return out


def _pool_object_if_used(syms) -> Optional[bytes]:
    """The worker pool's object code if the executable's code (its ``syms``, None when they
    could not be read) has the pool pointer, so that a loading process links the pool
    instead of compiling it."""
    from hlo.runtime.cpu.abi import POOL_PTR
    from hlo.runtime.cpu.thread_pool import pool_object_code
    if syms is not None and POOL_PTR not in syms[0]:
        return None
    return pool_object_code()


def _merge_imports(a: Optional[List[str]], b: Optional[List[str]]) -> Optional[List[str]]:
    return None if a is None or b is None else sorted(set(a) | set(b))


def to_payload(compiled) -> hlox.Payload:
    """The ``hlox.Payload`` of a ``Compiled``: the artifact's, plus the call signature."""
    payload = artifact_payload(compiled._artifact)
    low = compiled.lowered
    payload.manifest["signature"] = {
        "name": low.fun_name,
        "in_tree": tree_to_json(low.in_tree, f"the arguments of {low.fun_name}"),
        "out_tree": tree_to_json(low.out_tree, f"the results of {low.fun_name}"),
        "inputs": [_aval_json(a) for a in low.in_avals],
        "outputs": [_aval_json(a) for a in low.out_avals],
        "arg_names": [plain_name(n) for n in low.arg_names],
        "donated": list(low.donated),
    }
    return payload


def dumps(compiled) -> bytes:
    """The ``.hlox`` bytes of a ``Compiled``."""
    return hlox.dumps(to_payload(compiled))


def save(compiled, path) -> None:
    """Write a ``Compiled`` to ``path`` (conventionally ``*.hlox``), atomically."""
    hlox.write(path, to_payload(compiled))


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------

class ArraySpec:
    """Shape and dtype of one flat argument or result of a loaded executable."""

    __slots__ = ("shape", "dtype", "dtype_name", "weak_type")

    def __init__(self, d: dict):
        from hlo.ir.types import BY_NAME
        self.dtype_name = d["dtype"]
        self.dtype = BY_NAME[d["dtype"]].np_dtype
        self.shape = tuple(int(x) for x in d["shape"])
        self.weak_type = bool(d.get("weak_type", False))
        if not isinstance(d["shape"], list) or any(x < 0 for x in self.shape):
            raise ValueError("bad shape")

    def str_short(self) -> str:
        return f"{self.dtype_name}[{','.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"ArraySpec({self.str_short()})"

    def __eq__(self, other):
        return isinstance(other, ArraySpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype_name))


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)


def check_target(target: dict, where: str) -> None:
    """Refuse (``TargetMismatchError``) an executable this machine cannot run: the target of
    its kind decides (``hlo.runtime.target``). A CUDA program loads on a machine without a GPU
    (calling it then says that no CUDA device is present)."""
    if target.get("kind") == "cuda":
        try:
            current("cuda")
        except RuntimeError:
            return
    check_kind(target, where, SUPPORTED_TARGET_KINDS).check_loadable(target, where)


def _check_imports(runtime: dict, imports: Optional[List[str]], where: str,
                   provided: Sequence[str] = ()) -> None:
    """Every external symbol the code calls must resolve before linking (``provided``: defined by
    the executable's own library code): the JIT linker aborts the process on an unresolved one."""
    import llvmlite.binding as llvm

    from hlo.runtime.cpu.executable import _resolve_library
    from hlo.runtime.cpu.loader import load_library
    for lib in runtime.get("libraries", []):
        try:
            load_library(_resolve_library(lib))
        except Exception as e:
            raise LoadError(f"{where} needs the library {lib!r}, which cannot be loaded here: {e}") from None
    if imports is None:
        return
    # LLVM searches the whole process (libc's pthreads included) once an execution engine
    # exists; before the first one, only libraries loaded explicitly: look in the process too.
    import ctypes
    process = ctypes.CDLL(None)
    missing = [s for s in imports if s not in provided and not llvm.address_of_symbol(s)
               and not hasattr(process, s)]
    if missing:
        raise LoadError(f"{where} calls external functions this process does not provide: "
                        f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")


class LoadedExecutable(ProfileMethods):
    """An executable loaded from an ``.hlox`` file: call it like the jitted function (its
    non-static arguments, same pytrees); ``in_avals`` / ``out_avals`` / ``signature_text()``
    describe it; ``as_text()`` is the optimized IR it was built from; ``cost_analysis()`` and
    ``memory_analysis()`` are what the passes measured when it was saved; a profiled build
    (``compile(profile=True)``) keeps profiling: ``profile()`` / ``profile_report()``."""

    executable: Any   # the target's runtime executable; None where the code was not loaded

    def _runtime_executable(self):
        return self.executable

    def __init__(self, payload: hlox.Payload, where: str = "the executable",
                 recompile: Optional[Callable[[str, str], Any]] = None, describe_only: bool = False,
                 spmd_ok: bool = False):
        """``recompile``: instead of linking the stored native code, build the program from the
        IR section with ``recompile(ir_text, where)`` (``hlo.aot.load(..., recompile=True)``
        passes its compiler; it returns a ``Compiled``). ``describe_only``: check the manifest
        and the IR section and stop there (``hlo.aot.describe``): no library is loaded, no code
        is linked or compiled, and calling the result raises ``LoadError``."""
        m = payload.manifest
        check_manifest(m, where)
        if m.get("spmd") and not (spmd_ok or describe_only):
            raise hlox.LoadError(f"{where}: an SPMD program over a mesh of CPU devices "
                                 f"({m['spmd'].get('mesh_shape')}): load it with hlo.aot.load_sharded")
        try:
            target = m["target"]
            runtime = m["runtime"]
            sig = m["signature"]
            _require(isinstance(target, dict) and isinstance(sig, dict) and isinstance(runtime, dict),
                     "target, signature and runtime must be objects")
            self.in_tree = tree_from_json(sig["in_tree"])
            self.out_tree = tree_from_json(sig["out_tree"])
            self.in_avals = [ArraySpec(d) for d in sig["inputs"]]
            self.out_avals = [ArraySpec(d) for d in sig["outputs"]]
            self.arg_names = [str(n) for n in sig["arg_names"]]
            self.fun_name = str(sig["name"])
            _require(len(self.arg_names) == len(self.in_avals), "one name per input")
            _require(self.in_tree is None or self.in_tree.num_leaves == len(self.in_avals),
                     "in_tree leaves != inputs")
            _require(self.out_tree is None or self.out_tree.num_leaves == len(self.out_avals),
                     "out_tree leaves != outputs")
            _require(len(runtime["inputs"]) == len(self.in_avals) and
                     len(runtime["outputs"]) == len(self.out_avals), "runtime signature differs")
            _require(int(runtime["arena_size"]) >= 0 and isinstance(runtime["entry"], str),
                     "bad runtime entry")
            cost = dict(m["analyses"]["cost"])
            mem = MemoryAnalysis(**{k: int(v) for k, v in m["analyses"]["memory"].items()})
            # files written before memory_analysis counted the lowering's scratch: the arena
            # each call allocates is the runtime's
            mem = dataclasses.replace(mem, temp_size_in_bytes=int(runtime["arena_size"]))
            imports = m.get("imports")
            _require(imports is None or all(isinstance(s, str) for s in imports), "bad imports")
            kind = target.get("kind")
            code_name = f"code.{kind}"
            ir = payload.sections["ir"].decode("utf-8")
        except (KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as e:
            raise CorruptFileError(f"{where}: malformed manifest ({type(e).__name__}: {e})") from None
        check_ir_signature(ir, runtime, where)
        # the library code its object calls (CPU: the GEMM's shared bodies), by symbol
        self.cores = [c["symbol"] for c in runtime.get("cores") or []]
        self.manifest = m
        self.target = kind
        self._ir_text = ir
        self._cost = cost
        self._mem = mem
        if describe_only:  # the stored native code is never read
            self.executable = None
            self._run = self._not_loaded
            self._where = where
            return
        if recompile is not None:  # the stored native code is never read
            compiled = recompile(ir, where)
            self.executable = None
            self._recompiled = compiled  # its fresh code (what export_c links)
            self._cost = compiled.cost_analysis()
            self._mem = compiled.memory_analysis()
            self._run = compiled.run_flat
            return
        if kind == "cuda":  # the driver's set-up (~0.1 s) overlaps the rest of loading
            from hlo.runtime.cuda.driver import start_context
            start_context(0)
        check_target(target, where)
        code = payload.sections.get(code_name)
        if code is None:
            raise CorruptFileError(f"{where}: no native code section {code_name!r}")
        self.manifest = m
        self.target = kind
        self._ir_text = ir
        self._cost = cost
        self._mem = mem
        getattr(self, LOADERS[kind])(payload, runtime, imports, target, code, where)

    def _load_cpu(self, payload: hlox.Payload, runtime: dict, imports, target: dict, code: bytes,
                  where: str) -> None:
        from hlo.runtime.cpu.executable import FORMAT_VERSION as RUNTIME_FORMAT
        from hlo.runtime.cpu.executable import Executable
        if runtime.get("format") != RUNTIME_FORMAT:
            raise FormatVersionError(
                f"{where} holds native code for runtime interface {runtime.get('format')!r}; this "
                f"hlo runs interface {RUNTIME_FORMAT}. Compile the program again with this hlo")
        cores = core_objects(runtime, payload.sections, where)
        _check_imports(runtime, imports, where, provided=list(cores))
        rt = dict(runtime)
        rt["target"] = dict(target)
        pool = payload.sections.get(POOL_SECTION)
        try:
            if pool is not None:  # link the stored worker pool unless this process has one
                from hlo.runtime.cpu.thread_pool import pool_address
                pool_address(pool)
            # a file from before ``inputs_written``: every donated argument may be written
            self.executable = Executable(code, rt, steps_text="\n".join(self.manifest.get("call_sequence", [])),
                                         cores=cores, donated=self.manifest["signature"].get("donated") or ())
            self.executable.input_names = list(self.arg_names)
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            raise LoadError(f"{where}: the native code does not link: {e}") from None
        self._run = self.executable.run

    def _load_cuda(self, payload: hlox.Payload, runtime: dict, imports, target: dict, code: bytes,
                   where: str) -> None:
        from hlo.runtime.cuda.artifact import FORMAT, CudaProgram

        from ..errors import cuda_runner
        if runtime.get("format") != FORMAT:
            raise FormatVersionError(
                f"{where} holds a CUDA program of interface {runtime.get('format')!r}; this hlo "
                f"runs interface {FORMAT}. Compile the program again with this hlo")
        field = "runtime"
        try:
            self.executable = CudaProgram.from_sections(
                runtime, payload.sections, steps_text="\n".join(self.manifest.get("call_sequence", [])))
            # the step list is read now, not on first use: a malformed one is this file's error
            field = "runtime.steps"
            if not isinstance(runtime.get("steps"), list):
                raise ValueError(f"expected a list of steps, got {type(runtime.get('steps')).__name__}")
            self.executable.steps
            self.executable.input_names = list(self.arg_names)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:
            detail = f"missing key {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
            raise CorruptFileError(f"{where}: malformed CUDA program: manifest field {field} "
                                   f"({detail})") from None
        self.executable.prepare()
        import hlo.runtime.cuda.executable  # noqa: F401  (what the first call needs, imported now)
        self._run = cuda_runner(self.executable)

    def _not_loaded(self, flat):
        raise LoadError(f"{self._where} was opened for its description only (hlo.aot.describe): "
                        "its code is not loaded; use hlo.load to run it")

    def export_c(self, folder, name: Optional[str] = None):
        """Write ``lib<name>.so`` and ``<name>.h`` into ``folder``: this program as a C library
        (``Compiled.export_c``; what ``hlo export-c`` runs)."""
        from .export_c import export_c
        return export_c(self, folder, name)

    # -- description ---------------------------------------------------------------------------

    def as_text(self) -> str:
        """The optimized IR (hlo text) the native code was built from."""
        return self._ir_text

    def cost_analysis(self) -> Dict[str, Any]:
        return dict(self._cost)

    def memory_analysis(self) -> MemoryAnalysis:
        return self._mem

    def donation_stats(self) -> Dict[str, Any]:
        """What donation did on this executable's calls (``Compiled.donation_stats``)."""
        stats = getattr(self.executable, "donation_stats", None)
        if stats is None:
            return {"used": 0, "declined": 0, "aliased_bytes": 0, "last_declined": {}}
        return stats()

    def signature_text(self) -> str:
        args = ", ".join(f"{n}: {a.str_short()}" for n, a in zip(self.arg_names, self.in_avals))
        return f"{self.fun_name}({args})"

    @property
    def format_version(self) -> int:
        return int(self.manifest["format_version"])

    def __repr__(self):
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"<LoadedExecutable {self.signature_text()} -> ({outs}) for {self.target}>"

    # -- calling --------------------------------------------------------------------------------

    _native = None  # the executable's native entry (api_util.native_first), made on a call
    _native_epoch = -1

    @native_first  # self._native(*args) when there is one and no kwargs, else:
    def __call__(self, args, kwargs):
        if info(self.target).native_entry and self._native_epoch != pycall.epoch():
            refresh_native(self, self._native_call)
        outs = self._run(self.flatten_args(args, kwargs))
        if self.out_tree is None:
            return outs
        return tree_util.tree_unflatten(self.out_tree, outs)

    def _native_call(self, fallback: Callable) -> Optional[Callable]:
        make = getattr(self.executable, "native_call", None)
        if make is None or self.in_tree not in (None, tree_util.positional_treedef(len(self.in_avals))):
            return None
        return make(fallback, tree_util.native_finish(self.out_tree))

    def run_flat(self, flat: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run on flat arguments already in the signature's shapes and dtypes."""
        return self._run(flat)

    def flatten_args(self, args, kwargs) -> List[np.ndarray]:
        """Check the arguments against the signature; return them as flat numpy arrays, or raise
        ``InputMismatchError``."""
        return flatten_inputs(args, kwargs, in_tree=self.in_tree, n_inputs=len(self.in_avals),
                              signature=self.signature_text(), check_leaf=self._check_leaf,
                              error=InputMismatchError, made="saved with")

    def _check_leaf(self, i: int, leaf):
        spec = self.in_avals[i]
        a = _as_array(leaf, spec, device=info(self.target).device_arrays)
        if a is None:
            return None, f"{self.arg_names[i]} is {_describe(leaf)} (saved for {spec.str_short()})"
        return a, None

def _kind(dt: np.dtype) -> str:
    return "f" if dt.name == "bfloat16" else dt.kind


def _as_array(x, spec: ArraySpec, device: bool = False):
    """``x`` as an array of ``spec``'s dtype and shape, or None. Arrays must match exactly;
    with ``device`` (a CUDA executable) a GPU array is passed as it is;
    Python scalars fill rank-0 arguments of a compatible kind (bool: bool; int: integer or
    float; float: float), as ``hlo.jit`` accepts them."""
    t = type(x)
    if t in (bool, int, float):
        kinds = {bool: "b", int: "iuf", float: "f"}[t]
        if spec.shape != () or _kind(spec.dtype) not in kinds:
            return None
        try:
            return np.asarray(x, dtype=spec.dtype)
        except OverflowError:
            return None
    if device and not isinstance(x, np.ndarray):
        gpu = gpu_array_type(x)
        if gpu is not None:  # read in place by the CUDA runtime
            return x if gpu == (spec.shape, spec.dtype) else None
    if not isinstance(x, np.ndarray):
        if isinstance(x, np.generic) or hasattr(x, "__array__"):
            x = np.asarray(x)
        else:
            return None
    if x.dtype != spec.dtype or x.shape != spec.shape:
        return None
    return x


def _describe(x) -> str:
    if isinstance(x, (np.ndarray, np.generic)):
        return f"{x.dtype}[{','.join(map(str, x.shape))}]"
    if type(x) in (bool, int, float):
        return f"a Python {type(x).__name__}"
    return f"a {type(x).__name__}"
