"""Staging objects: ``Lowered`` (traced or imported IR, not yet optimized) and ``Compiled`` (an
executable for one target).

``hlo.jit(f).lower(*args)`` returns a ``Lowered`` that remembers the pytree structure of the
arguments and results; its ``Compiled`` is called like ``f`` with the non-static arguments and
returns the same pytree of arrays. ``Lowered(module)`` made from a bare Module (what
``hlo.load_stablehlo`` returns) has flat signatures: its ``Compiled`` takes the arrays of
``@main``'s parameters and returns a list of arrays.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from hlo.ir import Module, print_module
from hlo.ir.targets import info
from hlo.runtime.cpu.profile import ProfileMethods

from ..base.boundary import api_boundary, native_first, refresh_native
from ..base.signature import flatten_inputs, plain_name
from ..errors import SignatureMismatchError
from ..tracing.abstract import ShapedArray, array_key, aval_of_type, c_strides, concrete_arg
from ..tracing.tracer import abstractify
from ..tree_util import PyTreeDef, native_finish, positional_treedef, tree_unflatten, unflattener
from . import progress
from .specializing import SpecializingCompiled, is_symbolic, symbolic_avals
from .targets import Artifact, compile_module, resolve_target


class Lowered:
    """IR for one abstract signature, before target-specific optimization.

    ``ir`` is the Module; ``as_text()`` its text form; ``compile(target=None)`` optimizes and
    builds it for a target (the ``hlo.jit`` target, else the default target)."""

    def __init__(self, module: Module, *, in_tree: Optional[PyTreeDef] = None,
                 out_tree: Optional[PyTreeDef] = None, in_avals: Optional[Sequence[ShapedArray]] = None,
                 out_avals: Optional[Sequence[ShapedArray]] = None,
                 arg_names: Optional[Sequence[str]] = None, donated: Sequence[int] = (),
                 target: Optional[str] = None, fun_name: Optional[str] = None):
        self.ir = module
        main = module.main
        self.in_tree = in_tree
        self.out_tree = out_tree
        if in_avals is None and is_symbolic(module):  # symbolic dimensions (specializing.py)
            in_avals, out_avals = symbolic_avals(module)
        self.in_avals = list(in_avals) if in_avals is not None else [aval_of_type(t) for t in main.arg_types]
        self.out_avals = list(out_avals) if out_avals is not None else [aval_of_type(t) for t in main.result_types]
        self.arg_names = list(arg_names) if arg_names is not None else [f"argument {i}" for i in range(len(self.in_avals))]
        self.donated = tuple(donated)
        self.target = target
        self.fun_name = fun_name or module.name
        self.dim_ranges: Dict[str, Any] = {}  # declared sizes of symbols (hlo.Dim): checked at the call

    def as_text(self) -> str:
        return print_module(self.ir)

    @api_boundary
    def compile(self, target: Optional[str] = None, *, dump_dir: Optional[str] = None,
                profile: bool = False) -> "Compiled":
        """Optimize and build for ``target``; ``dump_dir`` keeps every pass's output there.
        ``profile=True`` builds a program that times each of its steps as it runs: read it
        with ``Compiled.profile()`` / ``profile_report()``, its timeline with
        ``profile().export_trace(path)``. On cpu its code differs from the unprofiled build's
        (two clock reads a step); on cuda the code is the same and CUDA events time each step
        (no CUDA graphs); its cache entry differs."""
        t = resolve_target(target if target is not None else self.target)
        if is_symbolic(self.ir):  # compiled per size at the call: not one compile for a range
            return SpecializingCompiled(self, t, dump_dir=dump_dir, profile=profile)
        with progress.compiling(f"hlo.jit({self.fun_name})"):
            return Compiled(self, compile_module(self.ir, t, donated=self.donated,
                                                 dump_dir=dump_dir, profile=profile))

    def signature_text(self) -> str:
        """``f(x: f32[4,8], y: f32[8])``."""
        args = ", ".join(f"{plain_name(n)}: {a.str_short()}" for n, a in zip(self.arg_names, self.in_avals))
        return f"{self.fun_name}({args})"

    def __repr__(self):
        return f"<Lowered {self.signature_text()}>"


class Compiled(ProfileMethods):
    """An executable for one target.

    ``as_text()`` is the optimized IR; ``cost_analysis()`` a dict with at least ``"kernels"``,
    ``"flops"`` and ``"bytes accessed"``; ``memory_analysis()`` an object with
    ``argument_size_in_bytes``, ``output_size_in_bytes``, ``temp_size_in_bytes`` and
    ``alias_size_in_bytes`` (both from ``hlo.passes.analysis``). Calling it runs the program;
    arguments must match the signature it was compiled for (shapes and dtypes). Compiled with
    ``profile=True``, ``profile()`` / ``profile_report()`` / ``reset_profile()`` tell where its
    calls spent their time, step by step (``hlo.runtime.cpu.profile``)."""

    def __init__(self, lowered: Lowered, artifact: Artifact):
        self.lowered = lowered
        self._artifact = artifact
        self.target = artifact.target
        self._fast = None  # (expected argument keys, run, finish), made on the first call
        self._native = None  # the executable's native entry (Executable.native_call)
        self._native_epoch = -1
        exe = getattr(artifact, "executable", None)
        if exe is not None and hasattr(exe, "input_names"):
            exe.input_names = list(lowered.arg_names)  # what a declined donation's warning says

    @property
    def from_cache(self) -> bool:
        """True when this executable was read from the persistent compilation cache (no passes
        or code generation ran in this process)."""
        result = getattr(self._artifact, "optimize_result", None)
        return bool(getattr(result, "from_cache", False))

    def _fast_path(self):
        """For calls with only positional arguments that are exactly the compiled arrays
        (numpy, C-contiguous, same shapes and dtypes): the ``array_key`` tuple they have, the
        executable's unchecked runner and the results' unflattening. False where the signature
        has containers or keyword arguments, or the artifact has no unchecked runner."""
        low = self.lowered
        n = len(low.in_avals)
        run = self._artifact.runners()[1]
        if run is None or (low.in_tree is not None and low.in_tree != positional_treedef(n)):
            return False
        expected = tuple((np.ndarray, a.shape, a.dtype, c_strides(a.shape, a.dtype)) for a in low.in_avals)
        finish = list if low.out_tree is None else unflattener(low.out_tree)
        return expected, run, finish

    def _runtime_executable(self):
        return getattr(self._artifact, "executable", None)

    def runners(self):
        """``(run, run_unchecked)`` of the artifact (``hlo.staging.targets.Artifact.runners``)."""
        return self._artifact.runners()

    @property
    def ir(self) -> Module:
        """The optimized module."""
        return self._artifact.optimized_module

    @property
    def in_avals(self) -> List[ShapedArray]:
        return self.lowered.in_avals

    @property
    def out_avals(self) -> List[ShapedArray]:
        return self.lowered.out_avals

    def as_text(self, dialect: str = "hlo") -> str:
        """The optimized IR (``dialect="hlo"``); for target cpu the optimized LLVM IR
        (``"llvm"``) or the machine code as assembly (``"asm"``), made again from the LLVM IR
        the executable keeps (absent from one loaded from the cache or a ``.hlox``: an error
        says so); for target cuda the generated ``"ptx"`` and its machine code, ``"sass"``
        (through the CUDA toolkit's nvdisasm or cuobjdump: an error says when neither is here). ``"dot"`` is the optimized program
        as a Graphviz graph of kernels, ``"html"`` the same as a self-contained page
        (``hlo.passes.graph_view``; the dumps hold both as ``graph.dot`` / ``graph.html``)."""
        if dialect == "hlo":
            return self._artifact.module_text()
        if dialect in ("llvm", "asm"):
            if self.target != "cpu":
                raise ValueError(f"as_text({dialect!r}) is for target 'cpu'; an executable for "
                                 f"target {self.target!r} has "
                                 + ("'ptx' and 'sass'" if self.target == "cuda" else "only 'hlo'"))
            from hlo.backends.cpu import listing
            return listing(getattr(self._artifact, "executable", None), dialect)
        if dialect in ("dot", "html"):
            from hlo.passes.graph_view import graph_of, to_dot, to_html
            graph = graph_of(self._artifact.optimized_module, getattr(self._artifact, "optimize_result", None))
            return to_dot(graph) if dialect == "dot" else to_html(graph)
        if dialect == "sass":
            exe = getattr(self._artifact, "executable", None)
            if self.target != "cuda" or getattr(exe, "ptx", None) is None:
                raise ValueError(f"as_text('sass') is for target 'cuda' (the GPU's machine code); "
                                 f"an executable for target {self.target!r} has "
                                 + ("'llvm' and 'asm'" if self.target == "cpu" else "only 'hlo'"))
            from hlo.backends.cuda.sass import sass
            return sass(exe)
        if dialect == "ptx":
            ptx = getattr(getattr(self._artifact, "executable", None), "ptx", None)
            if ptx is None:
                raise ValueError(f"as_text('ptx'): an executable for target {self.target!r} has no "
                                 "PTX; compile it for target='cuda'")
            return ptx
        raise ValueError(f"as_text: unknown dialect {dialect!r}; expected 'hlo', 'dot' or 'html' "
                         "(any target), 'llvm' or 'asm' (cpu), or 'ptx' or 'sass' (cuda)")

    @api_boundary
    def cost_analysis(self) -> Dict[str, Any]:
        return self._artifact.cost_analysis()

    @api_boundary
    def memory_analysis(self):
        return self._artifact.memory_analysis()

    def donation_stats(self) -> Dict[str, Any]:
        """What donation did on this executable's calls so far (``hlo.runtime.donation``):
        ``used`` (donated arguments written in place), ``declined`` (copied instead: read-only,
        not numpy's own memory, or sharing memory with another argument; each warned),
        ``aliased_bytes`` (bytes of results that were donated memory, no copy) and
        ``last_declined`` (argument -> reason). ``memory_analysis().alias_size_in_bytes`` is
        what one call aliases when every donation is used."""
        return _donation_stats(self._runtime_executable())

    @api_boundary
    def save(self, path) -> None:
        """Write this executable to ``path`` (an ``.hlox`` file that ``hlo.load`` runs in any
        process without compiling again); see ``hlo.aot``."""
        from .saved import save
        save(self, path)

    @api_boundary
    def export_c(self, folder, name: Optional[str] = None):
        """Write ``lib<name>.so`` and ``<name>.h`` into ``folder``: this program as a C library
        that runs without Python (CPU; ``hlo.staging.export_c``, README "Deploying without
        Python"). ``name`` defaults to the function's name. Returns the two paths."""
        from .export_c import export_c
        return export_c(self, folder, name)

    def native_call(self, fallback: Callable) -> Optional[Callable]:
        """A builtin function that runs exact, C-contiguous numpy arguments of the compiled
        signature natively and returns the results' pytree, handing any other call to
        ``fallback`` (``Executable.native_call``); None where the executable has no such entry
        or the signature has containers."""
        low = self.lowered
        if low.in_tree is not None and low.in_tree != positional_treedef(len(low.in_avals)):
            return None
        if self._artifact.runners()[1] is None:
            return None
        return self._artifact.native_call(fallback, native_finish(low.out_tree))

    @native_first  # self._native(*args) when there is one and no kwargs, else:
    def __call__(self, args, kwargs):
        __tracebackhide__ = True
        fast = self._fast
        if fast is None:
            fast = self._fast = self._fast_path()
        if fast:
            refresh_native(self, self.native_call)
        if fast and not kwargs:
            try:
                ok = tuple(map(array_key, args)) == fast[0]
            except Exception:  # a Python number, a list, ...: the full path below
                ok = False
            if ok:
                return fast[2](fast[1](args))
        flat = self.flatten_args(args, kwargs)
        outs = self.run_flat(flat)
        if self.lowered.out_tree is None:
            return outs
        return tree_unflatten(self.lowered.out_tree, outs)

    def run_flat(self, flat: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Run on already checked flat numpy arguments; return flat results."""
        return self._artifact.run(flat)

    def flatten_args(self, args, kwargs) -> List[np.ndarray]:
        """Check the arguments against the compiled signature; return them as flat numpy arrays."""
        low = self.lowered
        return flatten_inputs(
            args, kwargs, in_tree=low.in_tree, n_inputs=len(low.in_avals),
            signature=low.signature_text(), check_leaf=self._check_leaf, error=SignatureMismatchError,
            advice=". Compile again for the new shapes (hlo.jit does this automatically), or "
                   "convert the arguments")

    def _check_leaf(self, i: int, leaf):
        aval, name = self.lowered.in_avals[i], self.lowered.arg_names[i]
        got = abstractify(leaf, name)
        if got.shape != aval.shape or got.dtype != aval.dtype:
            return None, (f"{plain_name(name)} is {got.strip_weak().str_short()} (compiled for "
                          f"{aval.strip_weak().str_short()})")
        return concrete_arg(leaf, aval, name, device=info(self.target).device_arrays), None

    def __repr__(self):
        return f"<Compiled {self.lowered.signature_text()} for {self.target}>"



def _donation_stats(exe) -> Dict[str, Any]:
    """``donation_stats()`` of a runtime executable (cpu ``Executable``, a ``CudaProgram``)."""
    stats = getattr(exe, "donation_stats", None)
    if stats is None:  # the interpreter: nothing is donated
        return {"used": 0, "declined": 0, "aliased_bytes": 0, "last_declined": {}}
    return stats()
