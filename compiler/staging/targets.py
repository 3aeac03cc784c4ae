"""Targets, and the one place that turns IR into something that runs.

``"interpreter"``: the reference interpreter (``hlo.ir.interpreter``) runs the optimized module.
For debugging, like jax's eager backend. ``"cpu"`` / ``"cuda"``: ``hlo.passes.pipeline.optimize(module,
target)`` then ``hlo.backends.<target>.compile(optimized)``.

Contracts with the other layers (kept small on purpose):

- ``hlo.passes.pipeline.optimize(module, target, dump_dir=None, options=None)`` returns an
  object with ``.module`` (the optimized IR). It may change the module it is given; we pass a
  copy. ``options`` carries ``{"donated_args": (flat argument indices,)}`` when arguments are
  donated.
- ``hlo.backends.<target>.compile(optimized)`` takes that object and returns an executable
  callable as ``exe(*flat_numpy_arrays) -> list of arrays``.
- ``hlo.passes.analysis.cost_analysis(optimized) -> dict`` and ``memory_analysis(optimized)``.

The default target is "cuda" when the driver binding of the ``cuda`` extra (``cuda.bindings``)
and a usable NVIDIA GPU are present, else "cpu"; ``HLO_TARGET`` / ``hlo.config.update("target", ...)`` override
it.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from functools import lru_cache
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from hlo.ir import Module
from hlo.ir.targets import info

from .. import config
from ..base import gc_pause
from ..config import check_target_name  # the target names (settings check them too)
from ..errors import UnsupportedError, cuda_runner
from . import progress


@lru_cache(maxsize=1)
def has_usable_nvidia_gpu() -> bool:
    """True if the CUDA driver loads, initializes and reports at least one device
    (``hlo.runtime.cuda.probe``)."""
    from hlo.runtime.cuda.probe import probe
    return probe() is not None


def default_target() -> str:
    """``hlo.config`` ``target`` (``HLO_TARGET``) if set; else "cuda" when the CUDA runtime's
    driver binding (the ``cuda`` extra: ``cuda.bindings``) and a usable NVIDIA GPU are present,
    else "cpu". Cheap: ``hlo.jit`` calls it on every call of a function that was not
    given a target."""
    t = config.read("target")
    if t:
        return check_target_name(t)
    return "cuda" if has_cuda_runtime() and has_usable_nvidia_gpu() else "cpu"


@lru_cache(maxsize=1)
def has_cuda_runtime() -> bool:
    """The driver binding the CUDA runtime needs (the ``cuda`` extra) is installed."""
    return _module_exists("cuda.bindings")


def resolve_target(target: Optional[str]) -> str:
    return check_target_name(target) if target is not None else default_target()


def _module_exists(name: str) -> bool:
    """True if ``name`` is a module or a package with an ``__init__`` (a folder of helper
    modules alone, a namespace package, is no backend)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


def _runner(target: str, exe) -> Callable[[Sequence[np.ndarray]], List[np.ndarray]]:
    """``run(flat)`` of a compiled executable (``errors.cuda_runner`` for a CUDA program)."""
    if info(target).device_arrays:
        return cuda_runner(exe)

    def run(flat, _exe=exe):
        return list(_exe(*flat))
    return run


class Artifact:
    """A module compiled for one target: the optimized IR, the pipeline's result (for the
    analyses) and a function that runs flat numpy arrays."""

    executable: Any   # the target's runtime executable (set by the compile that made it)

    def __init__(self, target: str, optimized_module: Module, optimize_result: Any,
                 run: Callable[[Sequence[np.ndarray]], List[np.ndarray]]):
        self.target = target
        self.optimized_module = optimized_module
        self.optimize_result = optimize_result
        self.run = run

    def runners(self):
        """``(run, run_unchecked)`` for ``hlo.jit``'s fast path. Both take a tuple of flat
        arguments and return a sequence of outputs: ``run`` checks them (the executable's own
        ``run`` when there is one, else ``self.run``); ``run_unchecked`` is the native call
        alone, for a tuple of exact C-contiguous numpy arrays of the right shapes and dtypes,
        or None where the artifact has no such entry (the interpreter, a non-row-major input
        or output layout)."""
        exe = getattr(self, "executable", None)  # set by compile_module / the compilation cache
        if info(self.target).device_arrays:
            # the runtime checks and copies arguments itself; once its executable exists (it
            # does after the first call, when hlo.jit makes a fast entry), its ``run`` directly:
            # the wrapper only turns "no GPU here" into TargetUnavailableError at creation
            runtime = getattr(exe, "loaded", None)
            return (runtime.run if runtime is not None else self.run), None
        run = getattr(exe, "run", None)
        unchecked = getattr(exe, "run_unchecked", None)
        if run is None or not callable(run):
            return self.run, None
        if not getattr(exe, "row_major", False):
            unchecked = None  # the executable permutes some input or output layout
        return run, unchecked

    def native_call(self, fallback: Callable, finish) -> Optional[Callable]:
        """The executable's native entry (``Executable.native_call``) where it has one (CPU)."""
        make = getattr(getattr(self, "executable", None), "native_call", None)
        return make(fallback, finish) if info(self.target).native_entry and make is not None else None

    def module_text(self) -> str:
        """The optimized module as IR text (what ``Compiled.as_text`` shows and ``hlo.aot``
        saves)."""
        from hlo.ir import print_module
        return print_module(self.optimized_module)

    def cost_analysis(self) -> Dict[str, Any]:
        return _analysis("cost_analysis", self)

    def memory_analysis(self):
        """The passes' memory analysis, with the temp size the executable's arena: the buffer
        plan plus the scratch its lowering adds (a heavy op inside a fusion, a loop's carried
        values), i.e. what each call allocates."""
        mem = _analysis("memory_analysis", self)
        arena = (getattr(getattr(self, "executable", None), "manifest", None) or {}).get("arena_size")
        if arena is not None:
            mem = dataclasses.replace(mem, temp_size_in_bytes=int(arena))
        return mem


def _analysis(name: str, art: Artifact):
    from hlo.passes import analysis
    return getattr(analysis, name)(art.optimize_result)


def _optimize(module: Module, target: str, options: Optional[dict], dump_dir: Optional[str] = None):
    """The pipeline's result for ``target``, with the options a cpu compile takes from this
    machine (``CpuTarget.pass_options()``: the thread count products split over, ...) under the
    caller's; those facts are in the cache key already, as the machine's part."""
    from hlo.passes.pipeline import optimize
    if info(target).machine_pass_options:
        from hlo.runtime.target import current
        options = {**current(target).pass_options(), **(options or {})}
    # (``optimize`` works on a clone of its own: ``module`` is left as it is)
    return optimize(module, target, dump_dir=dump_dir, options=options or None)


_progress = progress.listener  # (hlo compile's stage printer; it lives with the progress line)


def report_progress(stage: str) -> None:
    """Tell a listener (``hlo compile`` prints stage names and times) and the compile's log and
    progress line (``progress``) that ``stage`` begins."""
    progress.stage(stage)
    cb = _progress.get()
    if cb is not None:
        cb(stage)


def check_declined_ops(module: Module, target: str, declined: Dict[str, str]) -> None:
    """Raise ``UnsupportedError`` naming the user's line of the first op of ``module`` that
    ``target`` declines (its backend's ``declined_ops()``: op name -> reason), before any pass
    runs."""
    if not declined:
        return
    for fn in module.functions.values():
        for op in fn.walk():
            why = declined.get(op.name)
            if why is not None:
                what = op.attrs.get("what") or op.name
                kw = {"location": op.loc} if op.loc is not None else {}
                raise UnsupportedError(f"{what} cannot be compiled for target {target!r}: {why}", **kw)


# Compile options for the backend, not the passes: in the cache key, left out of the
# pipeline's options.
BACKEND_OPTIONS = ("profile",)


def compile_options(donated: Sequence[int] = (), options: Optional[dict] = None,
                    target: Optional[str] = None, profile: bool = False) -> dict:
    """The options a compile passes to the pipeline and keys the persistent cache on; one place,
    so that ``hlo.explain_cache_miss`` compares exactly what a compile would. For the cuda
    target they carry ``hlo.config``'s ``matmul_precision`` (other targets ignore it, so it is
    not in their keys); a profiled build carries ``profile`` (absent otherwise, so unprofiled
    keys are what they were)."""
    opts = dict(options or {})
    if donated:
        opts["donated_args"] = tuple(donated)
    if target is not None and info(target).matmul_precision:
        opts.setdefault("matmul_precision", config.resolved_matmul_precision())
    if profile:
        opts["profile"] = True
    return opts


def check_profile_target(target: str) -> None:
    """The in-program profile exists for the CPU target (``TargetInfo.native_entry``) and for
    cuda (CUDA events around each step: ``hlo.runtime.cuda.profile``)."""
    if not info(target).native_entry and target != "cuda":
        raise UnsupportedError(
            f"compile(profile=True) is for targets 'cpu' and 'cuda': target {target!r} has no "
            "in-program profile; compile for target='cpu' to profile")


def compile_module(module: Module, target: str, *, donated: Sequence[int] = (),
                   options: Optional[dict] = None, dump_dir: Optional[str] = None,
                   profile: bool = False) -> Artifact:
    """Optimize ``module`` for ``target`` and build something that runs it. With ``dump_dir``
    (or ``HLO_DUMP_DIR``), the pipeline writes the module after each pass, the fusion decisions
    and the buffer plan there. ``profile``: a build that times each of its steps
    (``Compiled.profile``; cpu and cuda)."""
    from hlo.ir.nesting import call_with_stack_for  # deep control-flow nests need the stack
    with gc_pause.paused():
        return call_with_stack_for(module, _compile_module, module, target, donated, options,
                                   dump_dir, profile)


def _compile_module(module, target, donated, options, dump_dir, profile=False) -> Artifact:
    check_target_name(target)
    if profile:
        check_profile_target(target)
    opts = compile_options(donated, options, target, profile)
    backend_opts = {k: opts.pop(k) for k in BACKEND_OPTIONS if k in opts}
    key_opts = {**opts, **backend_opts}
    if not info(target).compiled:  # the reference interpreter runs the optimized IR
        from hlo.ir import interpreter
        report_progress("passes")
        res = _optimize(module, target, opts, dump_dir)
        mod = res.module

        def run(flat, _mod=mod):
            return interpreter.run(_mod, list(flat))
        return Artifact(target, mod, res, run)
    backend_module = importlib.import_module(f"hlo.backends.{target}")
    check_declined_ops(module, target, backend_module.declined_ops())
    compile_fn = backend_module.compile
    from .cache import begin as cache_begin  # the persistent cache (compile_cache.py)
    report_progress("cache")
    pending = cache_begin(module, target, key_opts, dump_dir)
    if pending is not None and pending.hit is not None:
        return pending.hit
    report_progress("passes")
    res = _optimize(module, target, opts, dump_dir)
    report_progress("codegen")
    exe = compile_fn(res, **backend_opts)
    art = Artifact(target, res.module, res, _runner(target, exe))
    art.executable = exe
    if pending is not None:
        report_progress("cache write")
        pending.store(art, module)
    return art
