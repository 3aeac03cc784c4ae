"""The optimization pipeline: ``optimize(module, target, dump_dir, options) -> Optimized``.

Per target (``interpreter``, ``cpu``, ``cuda``) the same order runs:

    simplify (until nothing changes, at most SIMPLIFY_ROUNDS rounds):
        inline, canonicalize, algebraic-simplifier, constant-folding, window-scan, cse, dce,
        while-unroll                                  (on for cuda: Options.while_unroll)
    conv-gemm                                         (on for cpu: Options.conv_products)
    dot-merger                                        (on for cuda: Options.dot_merger)
    dot-split-k                                       (on for cpu: Options.dot_split_k)
    layout-assignment
    fusion, multi-output-fusion, horizontal-fusion   (when Options.fusion)
    cse, dce                                          (tidy fused regions)
    schedule
    buffer-assignment

Targets differ in what fusion may do: cpu and the interpreter fuse a row-wise normalization
into a dot's operand (``Options.row_prologue``), cuda does not; cuda merges products that share
their LHS (``Options.dot_merger``), the others do not; cpu splits the contraction of a product
of few rows whose RHS streams from memory over its threads (``Options.dot_split_k``), the
others do not; cuda unrolls loops of a known, small trip count (``Options.while_unroll``: the
rounds after simplify the copies), the others keep them. The input module is not
changed (it is cloned). The module is verified after every pass that changed it
(``Options.verify``; ``"all"`` also after passes that report no change), including that every
fusion op is a valid fusion of its kind; each pass is timed, and so is each verification; with a dump directory
(``dump_dir=`` or the environment variable ``HLO_DUMP_DIR``) the module is written after every
pass whose name matches ``Options.dump_filter`` (see ``hlo.passes.dump``). The buffer
assignment's checker runs on every result.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from hlo.ir.core import Module
from hlo.ir.printer import print_module
from hlo.ir.verifier import verify_module

from .base import Pass
from .buffer_assignment import BufferAssignment
from .dump import Dumper
from .fusion_kinds import NotFusible, verify_fusion
from .options import Options, PassConfig, check_target
from .registry import create_pass

SIMPLIFY = ["inline", "canonicalize", "algebraic-simplifier", "constant-folding", "window-scan", "cse", "dce",
            "while-unroll"]
SIMPLIFY_ROUNDS = 4
FUSION = ["fusion", "multi-output-fusion", "horizontal-fusion"]
TIDY = ["cse", "dce"]


class PipelineError(Exception):
    """A pass left the module invalid; the message names the pass."""


@dataclass
class Optimized:
    """The result of the pipeline for one target."""

    module: Module
    schedule: list
    buffers: BufferAssignment
    pass_times: List[Tuple[str, float]]
    decisions: List[str]
    target: str
    options: Options
    dump_dir: Optional[str] = None
    # Seconds spent: "passes" (the passes themselves, summed), "verify" (verification between
    # passes), "optimize" (the whole of ``optimize``: cloning, passes, verification, dumps).
    # A backend adds its own figures to the executable it builds (``compile_times``).
    compile_times: Dict[str, float] = field(default_factory=dict)

    def text(self) -> str:
        return print_module(self.module)

    def cost_analysis(self) -> dict:
        from .analysis import cost_analysis
        return cost_analysis(self)

    def memory_analysis(self):
        from .analysis import memory_analysis
        return memory_analysis(self)


def pipeline_passes(target: str, options: Options) -> Tuple[List[str], List[str]]:
    """The pass names the pipeline runs for a target: the simplification group (repeated
    until nothing changes) and the passes after it. Disabled passes are left out, except
    buffer assignment, which every result needs."""
    check_target(target)
    off = options.disabled_passes
    simplify = [n for n in SIMPLIFY if n not in off
                and (n != "while-unroll" or options.while_unroll_for(target))]
    rest = ["conv-gemm", "dot-merger", "dot-split-k", "concat-split", "layout-assignment"] + (FUSION if options.fusion else []) + TIDY + ["schedule"]
    rest = [n for n in rest if n not in off] + ["buffer-assignment"]
    return simplify, rest


def verify(module: Module, allow_row_prologue: bool = True) -> None:
    """The IR verifier plus the fusion-kind check of every fusion op."""
    verify_module(module)
    for fn in module.functions.values():
        for op in fn.walk():
            if op.name == "fusion":
                try:
                    verify_fusion(op, allow_row_prologue)
                except NotFusible as e:
                    raise PipelineError(f"invalid fusion {op.attrs.get('name') or ''}: {e}") from None


class Runner:
    """Runs passes on a module: verification, timing, dumps."""

    def __init__(self, config: PassConfig, dumper: Optional[Dumper]):
        self.config = config
        self.dumper = dumper
        self.times: List[Tuple[str, float]] = []
        self.verify_seconds = 0.0
        self.allow_row = config.options.row_prologue_for(config.target)

    def run(self, p: Pass, module: Module) -> bool:
        t0 = time.perf_counter()
        changed = p.run(module)
        dt = time.perf_counter() - t0
        self.times.append((p.name, dt))
        mode = self.config.options.verify
        # A pass that changed nothing leaves the module as the last verification saw it.
        if mode == "all" or (mode and changed):
            t0 = time.perf_counter()
            try:
                verify(module, self.allow_row)
            except Exception as e:
                raise PipelineError(f"after pass '{p.name}': {e}") from e
            self.verify_seconds += time.perf_counter() - t0
        if self.dumper is not None:
            self.dumper.after_pass(p, module, changed, dt)
        return changed


def _dump_dir_from_env(module: Module) -> Optional[str]:
    base = os.environ.get("HLO_DUMP_DIR")
    if not base:
        return None
    path = os.path.join(base, module.name)
    n = 0
    while os.path.exists(path):
        n += 1
        path = os.path.join(base, f"{module.name}.{n}")
    return path


def optimize(module: Module, target: str = "interpreter", dump_dir: Optional[str] = None,
             options=None) -> Optimized:
    """Optimize a clone of ``module`` for ``target``; see the module docstring."""
    t_start = time.perf_counter()
    check_target(target)
    opts = Options.from_any(options)
    if "main" not in module:
        raise ValueError(f"module @{module.name} has no @main to optimize")
    m = module.clone()
    dump_dir = dump_dir or _dump_dir_from_env(m)
    config = PassConfig(target, opts, [])
    dumper = Dumper(dump_dir, opts.dump_filter) if dump_dir else None
    runner = Runner(config, dumper)
    if dumper is not None:
        dumper.input(m)
    simplify, rest = pipeline_passes(target, opts)
    for _ in range(SIMPLIFY_ROUNDS):
        changed = False
        for n in simplify:
            changed |= runner.run(create_pass(n, config), m)
        if not changed:
            break
    ba_pass = None
    for n in rest:
        p = create_pass(n, config)
        runner.run(p, m)
        if n == "buffer-assignment":
            ba_pass = p
    opt = Optimized(m, list(m.main.ops), ba_pass.result, runner.times, list(config.decisions),
                    target, opts, dump_dir)
    opt.compile_times = {"passes": sum(s for _, s in runner.times), "verify": runner.verify_seconds}
    if dumper is not None:
        dumper.finish(opt)
    opt.compile_times["optimize"] = time.perf_counter() - t_start
    if dumper is not None:
        dumper.write_summary(opt)
    return opt


def as_written(module: Module, target: str = "cpu") -> Optimized:
    """The pipeline's result with every pass off but buffer assignment: ``module`` as written
    (fusions by hand, every top-level op a kernel, in its order) with the real buffer plan. For
    tests and benchmarks of a backend on its own."""
    rest = ["dot-merger", "dot-split-k", "layout-assignment"] + FUSION + TIDY + ["schedule"]
    return optimize(module, target, options={"disabled_passes": frozenset(SIMPLIFY + rest)})
