"""The import contract: every module imports only its own layer or layers below it, counting
imports inside functions too (they run as soon as the function is called). The graph is read
from source by ``import_graph.py`` (``python tests/import_graph.py -v`` prints the cycles).

Packages, lowest first (a package imports only itself and packages to its left):

    hlo.ir  <  hlo.passes  <  hlo.runtime  <  hlo.backends  <  hlo (the frontend, compiler/)

``ALLOWED_UPWARD`` lists the edges that still go up, each with its reason.

The frontend's layers, lowest first (``FRONTEND_LAYERS``): a module may import modules of its
own layer and of the layers before it, never one after it.
"""
from __future__ import annotations

import fnmatch
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_graph import ImportGraph

PACKAGES = ("hlo.ir", "hlo.passes", "hlo.runtime", "hlo.backends", "hlo")

# (layer, what it holds, module patterns). Order is the contract: lowest first.
FRONTEND_LAYERS = (
    ("base", "settings, errors, dtypes, pytrees (the public hlo.config, hlo.errors, hlo.dtypes, "
     "hlo.tree_util); hlo/base/: source lines, the input-signature check, the API boundary "
     "(api_boundary, native_first), the collector pause, the at-fork lock resets",
     ("hlo.config", "hlo.errors", "hlo.dtypes", "hlo.tree_util", "hlo.base.*", "hlo.distributed")),
    ("saved-format", "a Compiled as .hlox payload, and LoadedExecutable (the fresh-process load path)",
     ("hlo.staging.saved", "hlo.staging.export_c")),
    ("trace", "hlo/tracing/: abstract values, the tracer, api_function (eager hook registry)",
     ("hlo.tracing.*",)),
    ("compile", "targets, the persistent cache, Lowered / Compiled, device placement (device_put)",
     ("hlo.staging.targets", "hlo.staging.cache", "hlo.staging.stages", "hlo.staging.placement",
      "hlo.staging.progress", "hlo.sharding", "hlo.staging.sharded_array", "hlo.staging.process_arrays",
      "hlo.staging.specializing")),
    ("lax", "hlo.lax's op wrappers and what builds on them only (PRNG bits, erf_inv); host "
     "callbacks (pure_callback, debug.print)",
     ("hlo.lax.*", "hlo.debug")),
    ("control-flow", "cond, switch, while_loop, fori_loop, scan, map",
     ("hlo.lax.control_flow",)),
    ("numpy", "hlo.numpy (numpy semantics on lax)",
     ("hlo.numpy.*",)),
    ("jit", "hlo.jit / make_ir: tracing a function, compiling and caching (registers the eager hook); "
     "hlo.shard_map (traces its function with hlo.jit)",
     ("hlo.staging.jit", "hlo.staging.shard_map", "hlo.staging.sharded_jit")),
    ("autodiff", "grad, value_and_grad, vjp, jvp, stop_gradient, custom_vjp/custom_jvp, checkpoint",
     ("hlo.autodiff.*",)),
    ("batching", "vmap and what builds on it (jacfwd, jacrev, hessian)",
     ("hlo.batching.*",)),
    ("linalg", "hlo.lax.linalg's factorizations (built on hlo.numpy, as jax's) and hlo.numpy.linalg",
     ("hlo.lax.linalg", "hlo.numpy.linalg")),
    ("libraries", "hlo.nn, hlo.random; hlo.lax's special functions written with hlo.numpy, "
     "while_loop and custom_jvp (igamma, betainc, zeta, ...)",
     ("hlo.nn.*", "hlo.random", "hlo.random_dists", "hlo.lax.special_more", "hlo.lax.zeta_fns",
      "hlo.lax.ragged")),
    ("user", "hlo.aot (compile/save/load), StableHLO import, hlo/tools/ (conformance runner, CLI "
     "tools) and their python -m entry points",
     ("hlo.aot", "hlo.staging.stablehlo", "hlo.tools.*", "hlo.opt", "hlo.conformance",
      "hlo.__main__")),
)

# Upward edges that exist on purpose: (importing module, imported module pattern) -> reason.
ALLOWED_UPWARD = {
    ("hlo.backends.cpu.gemm_profile", "hlo.*"):
        "a command-line profiling tool (python -m); it builds workloads with hlo.numpy and "
        "nothing imports it",
    ("hlo.passes.analysis", "hlo.runtime.memory_analysis"):
        "MemoryAnalysis, a plain record, lives in the runtime so that a saved executable "
        "rebuilds it without importing the passes",
    ("hlo.runtime.cpu.target", "hlo.backends.cpu.blas"):
        "the CPU target's cache-key parts name the BLAS, which the CPU backend finds",
    ("hlo.runtime.cpu.blas_threads", "hlo.backends.cpu.blas"):
        "the BLAS whose thread count is held is found by the CPU backend",
    ("hlo.runtime.cpu.executable", "hlo.backends.cpu.blas"):
        "an executable that calls the BLAS resolves it through the CPU backend's finder",
    ("hlo.runtime.cpu.thread_pool", "hlo.backends.*"):
        "the worker pool is generated as LLVM IR with the backends' helpers",
}

# Import cycles that remain, each small (at most MAX_CYCLE modules).
KNOWN_CYCLES = (
    # Module.__str__ / clone() call the printer and the cloner, which read the core classes.
    ("hlo.ir.clone", "hlo.ir.core", "hlo.ir.printer"),
    # The tiled GEMM emitter calls back into dot's shared operand views.
    ("hlo.backends.cpu.dot", "hlo.backends.cpu.gemm_tiled"),
    # compile_module asks the cache first; a cache entry is a saved Compiled.
    ("hlo.staging.cache", "hlo.staging.stages", "hlo.staging.targets"),
    # hlo.numpy's basic families call each other inside functions (reductions of ufuncs, ...).
    ("hlo.numpy.creation", "hlo.numpy.reductions", "hlo.numpy.shapes", "hlo.numpy.ufuncs"),
    # The op table registers the collective ops from their own module, which uses its helpers.
    ("hlo.ir.collective_ops", "hlo.ir.ops"),
    # hlo.random re-exports the samplers of random_dists, which draw with its uniform and normal.
    ("hlo.random", "hlo.random_dists"),
)
MAX_CYCLE = 5


def package_of(module: str) -> str:
    for p in PACKAGES[:-1]:
        if module == p or module.startswith(p + "."):
            return p
    return "hlo"


def frontend_layer(module: str):
    """Index into FRONTEND_LAYERS of the most specific pattern matching ``module``."""
    best = None
    for i, (_, _, patterns) in enumerate(FRONTEND_LAYERS):
        for pat in patterns:
            if fnmatch.fnmatchcase(module, pat):
                spec = len(pat.rstrip("*"))
                if best is None or spec > best[0]:
                    best = (spec, i)
    return None if best is None else best[1]


def _allowed(importer: str, target: str) -> bool:
    return any(importer == a and fnmatch.fnmatchcase(target, pat) for a, pat in ALLOWED_UPWARD)


def upward_imports(graph: ImportGraph):
    """Messages naming file:line for every import of a higher package or frontend layer."""
    out = []
    order = {p: i for i, p in enumerate(PACKAGES)}
    for m, imports in sorted(graph.edges.items()):
        pm = package_of(m)
        for imp in imports:
            pt = package_of(imp.target)
            fn = " (inside a function)" if imp.in_function else ""
            if order[pt] > order[pm]:
                if not _allowed(m, imp.target):
                    out.append(f"{imp.where()}: {m} (package {pm}) imports {imp.target}{fn}, from "
                               f"the higher package {pt}; packages import downward only: "
                               + " < ".join(PACKAGES))
            elif pm == pt == "hlo":
                lm, lt = frontend_layer(m), frontend_layer(imp.target)
                if lm is not None and lt is not None and lt > lm:
                    out.append(f"{imp.where()}: {m} (layer '{FRONTEND_LAYERS[lm][0]}') imports "
                               f"{imp.target}{fn} from the higher layer '{FRONTEND_LAYERS[lt][0]}'; "
                               "frontend layers import downward only: "
                               + " < ".join(name for name, _, _ in FRONTEND_LAYERS))
    return out


@pytest.fixture(scope="module")
def graph():
    return ImportGraph()


def test_every_frontend_module_has_a_layer(graph):
    missing = [m for m in graph.edges if package_of(m) == "hlo" and frontend_layer(m) is None]
    assert not missing, ("frontend modules without a layer (add them to FRONTEND_LAYERS in "
                         f"tests/test_import_layers.py): {', '.join(sorted(missing))}")


def test_imports_go_downward_only(graph):
    bad = upward_imports(graph)
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_allowed_upward_edges_still_exist(graph):
    """An exception nobody needs any more is removed from the table."""
    used = {(a, pat) for (a, pat) in ALLOWED_UPWARD
            if any(fnmatch.fnmatchcase(i.target, pat) and package_of(i.target) != package_of(a)
                   for i in graph.edges.get(a, ()))}
    assert used == set(ALLOWED_UPWARD)


def test_import_cycles_are_small_and_known(graph):
    cycles = graph.cycles()
    assert max((len(c) for c in cycles), default=0) <= MAX_CYCLE, cycles
    assert sorted(tuple(c) for c in cycles) == sorted(KNOWN_CYCLES), cycles


def test_an_upward_import_inside_a_function_is_reported(tmp_path):
    """The checker itself: a function-level import of a higher layer names file and line."""
    import shutil

    import import_graph
    root = tmp_path / "repo"
    for folder in import_graph.FOLDERS:
        shutil.copytree(os.path.join(import_graph.ROOT, folder), root / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "compiler" / "lax" / "common.py"
    text = path.read_text()
    path.write_text(text + "\n\ndef _late():\n    from ..numpy import creation\n    return creation\n")
    line = text.count("\n") + 4
    bad = upward_imports(ImportGraph(str(root)))
    assert any(b.startswith(f"compiler/lax/common.py:{line}: hlo.lax.common (layer 'lax') imports "
                            "hlo.numpy.creation (inside a function) from the higher layer 'numpy'")
               for b in bad), bad
    assert ImportGraph(str(root)).cycles() != ImportGraph().cycles()
