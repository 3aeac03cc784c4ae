"""Build the CPU backend's library code ahead: ``python -m hlo.backends.cpu.build_library``.

Compiles every GEMM body this machine can need (``bodies()``) and the worker pool into the
library folder (``hlo.runtime.cpu.code_library``), skipping those already there, and prints
what it built and how long it took. ``make install`` (which ``make demo``, ``make test`` and
``make bench`` depend on) runs it, as installing jaxlib or torch puts their precompiled kernels
in place: a program's first compile then pays for its own code only. Without it each body is
compiled by the first process that needs it (~0.4 s each) and kept for the next.

The bodies are compiled in worker processes (``--jobs``, default one per core): llvmlite lets
one thread of a process into LLVM at a time.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Tuple

# The keys (dtype, B's mode, C's columns strided, A's columns adjacent) the backend can ask
# for, following the decisions that make them: ``dot.lower_dot`` computes float products in
# f32 or f64 (``comp``), and on the generated GEMM computes some as C^T = B^T A^T (C's columns
# strided); ``gemm_tiled.emit_tiled_gemm`` picks B's mode ("contig" or "gather" by B's column
# stride; "bf16" for bf16 pairs, ``dot.bf16_pairs``: A adjacent, C contiguous only) and A's
# adjacency. ``tests/backends/test_gemm_library_build.py`` checks programs of every operand
# layout ask for no body outside this list.


def body_keys() -> List[Tuple[str, str, bool, bool]]:
    from .dot import bf16_pairs
    keys = [(dtype, mode, c_strided, a_unit)
            for dtype in ("f32", "f64") for mode in ("contig", "gather")
            for c_strided in (False, True) for a_unit in (True, False)]
    if bf16_pairs():
        keys.append(("f32", "bf16", False, True))
    return keys


def bodies() -> list:
    """The ``gemm_library.CoreSpec`` of every body this machine's programs can call."""
    from .gemm_tiled import library_body
    return [library_body(*k) for k in body_keys()]


def _build(what) -> Tuple[str, float, bool]:
    """(name, seconds, whether compiled here) of one library object, in a worker process."""
    t0 = time.perf_counter()
    if what == "pool":
        from hlo.runtime.cpu.thread_pool import library_object
        _, read = library_object()
        return "worker pool", time.perf_counter() - t0, not read
    from . import gemm_library
    from .gemm_tiled import library_body
    spec = library_body(*what)
    gemm_library.object_code(spec)
    return spec.symbol, time.perf_counter() - t0, gemm_library.compiles[spec.symbol] > 0


def _missing() -> list:
    """What the folder lacks: body keys, and "pool" for the worker pool."""
    from hlo.runtime.cpu import code_library, thread_pool
    have = {name for name, _ in code_library.contents()}
    todo = [k for k, spec in zip(body_keys(), bodies()) if spec.symbol not in have]
    if thread_pool.library_name() not in have:
        todo.append("pool")
    return todo


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hlo.backends.cpu.build_library",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    a = p.parse_args(argv)
    from hlo.runtime.cpu import code_library
    from hlo.runtime.cpu.target import default_threads, host
    if not code_library.enabled():   # the user's choice: set-up goes on (exit 0)
        print("hlo library: off (HLO_LIBRARY=0): nothing is built ahead", file=sys.stderr)
        return 0
    t0 = time.perf_counter()
    todo = _missing()
    folder = os.path.join(code_library.library_dir(), code_library.build_id()[:16])
    total = len(body_keys()) + 1
    print(f"hlo library: {folder} ({host().describe()}): {total - len(todo)} of {total} objects present")
    if not todo:
        return 0
    jobs = max(1, min(a.jobs or default_threads(), len(todo)))
    built = []
    if jobs == 1:
        results = map(_build, todo)
    else:
        import concurrent.futures
        import multiprocessing
        pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        results = pool.map(_build, todo)
    for name, seconds, compiled in results:
        print(f"  {'built' if compiled else 'found'} {name} ({seconds:.2f} s)")
        built.append(compiled)
    if jobs > 1:
        pool.shutdown()
    missing = _missing()
    print(f"built {sum(built)} objects in {time.perf_counter() - t0:.1f} s ({jobs} processes)")
    if missing:   # hlo still works: each process compiles what it needs (set-up goes on)
        print(f"hlo library: {len(missing)} objects could not be kept in {folder} (see the log "
              "above); each process will compile the library code it uses", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
