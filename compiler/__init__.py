"""hlo: a whole-program ahead-of-time compiler for array programs.

    import hlo, hlo.numpy as hnp

    @hlo.jit
    def f(x, w):
        return hlo.nn.gelu(x @ w)

    f(x, w)                         # traced, compiled for the default target, run
    f.lower(x, w).as_text()         # the traced IR;  .compile() -> Compiled
    hlo.make_ir(f)(x, w)            # the IR Module (like jax.make_jaxpr)
"""
__version__ = "0.1.0"

# first of all: its at-fork handlers must be registered before any other module's (base/fork_safety.py)
from .base import fork_safety
from . import config
from . import tree_util

# ``import hlo`` stays light so that ``hlo.load(path)`` runs a saved executable without
# importing the tracer, the passes or a code generator. The first use of any other public name
# imports the whole frontend at once (the imports below, as before), side effects included
# (hlo.numpy installs the operators of traced values).
_AOT_NAMES = {
    "load": ("hlo.aot", "load"),
    "aot": ("hlo.aot", None),
    "LoadedExecutable": ("hlo.staging.saved", "LoadedExecutable"),
    "ExecutableError": ("hlo.runtime.hlox", "ExecutableError"),
    "LoadError": ("hlo.runtime.hlox", "LoadError"),
    "DonationWarning": ("hlo.ir.errors", "DonationWarning"),
    "distributed": ("hlo.distributed", None),  # multi-process runs: needs no compiler
}
# (public name, module it comes from, attribute of that module or None for the module itself),
# in the order the frontend has always been imported.
_FRONTEND = (
    ("errors", "hlo.errors", None), ("dtypes", "hlo.dtypes", None),
    ("ShapeDtypeStruct", "hlo.tracing.abstract", "ShapeDtypeStruct"), ("Dim", "hlo.tracing.dims", "Dim"),
    ("jit", "hlo.staging.jit", "jit"), ("make_ir", "hlo.staging.jit", "make_ir"), ("JitFunction", "hlo.staging.jit", "JitFunction"),
    ("Lowered", "hlo.staging.stages", "Lowered"), ("Compiled", "hlo.staging.stages", "Compiled"),
    ("TARGETS", "hlo.config", "TARGETS"), ("default_target", "hlo.staging.targets", "default_target"),
    ("numpy", "hlo.numpy", None), ("lax", "hlo.lax", None), ("nn", "hlo.nn", None),
    ("random", "hlo.random", None),  # hlo.random: jax.random's bits on uint32[2] keys
    ("load_stablehlo", "hlo.staging.stablehlo", "load_stablehlo"),
    ("grad", "hlo.autodiff", "grad"), ("value_and_grad", "hlo.autodiff", "value_and_grad"),
    ("vjp", "hlo.autodiff", "vjp"), ("jvp", "hlo.autodiff", "jvp"),
    ("vmap", "hlo.batching", "vmap"),
    ("custom_vjp", "hlo.autodiff.custom", "custom_vjp"), ("custom_jvp", "hlo.autodiff.custom", "custom_jvp"),
    ("checkpoint", "hlo.autodiff.checkpoint", "checkpoint"), ("remat", "hlo.autodiff.checkpoint", "remat"),
    ("checkpoint_policies", "hlo.autodiff.checkpoint", "checkpoint_policies"), ("jacfwd", "hlo.batching.jacobians", "jacfwd"),
    ("jacrev", "hlo.batching.jacobians", "jacrev"), ("hessian", "hlo.batching.jacobians", "hessian"),
    ("explain_cache_miss", "hlo.staging.jit", "explain_cache_miss"),  # the persistent cache
    ("devices", "hlo.staging.placement", "devices"), ("device_put", "hlo.staging.placement", "device_put"),
    ("device_get", "hlo.staging.placement", "device_get"),
    ("debug", "hlo.debug", None), ("pure_callback", "hlo.lax.callbacks", "pure_callback"),
    ("sharding", "hlo.sharding", None), ("shard_map", "hlo.staging.shard_map", "shard_map"),
    ("local_devices", "hlo.staging.placement", "local_devices"),
    ("make_array_from_process_local_data", "hlo.staging.process_arrays",
     "make_array_from_process_local_data"),
)
_FRONTEND_NAMES = {n for n, _, _ in _FRONTEND}
_loading = False


def _get(module: str, attr):
    import importlib
    m = importlib.import_module(module)
    return m if attr is None else getattr(m, attr)


def _load_frontend():
    global _loading
    if _loading:
        return
    _loading = True
    try:
        g = globals()
        for name, module, attr in _FRONTEND:
            g[name] = _get(module, attr)
    finally:
        _loading = False


def __getattr__(name):
    if name in _AOT_NAMES:
        return _get(*_AOT_NAMES[name])
    if name in _FRONTEND_NAMES:
        for n, module, attr in _FRONTEND:
            # A submodule (``from hlo import dtypes`` inside the frontend, or ``hlo.numpy``) is
            # imported by itself; any other name loads the whole frontend.
            if n == name and (attr is None or _loading):
                return _get(module, attr)
        _load_frontend()
        return globals()[name]
    raise AttributeError(f"module 'hlo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _FRONTEND_NAMES | set(_AOT_NAMES))
