"""Dump directories: the module after every pass, and what the pipeline decided.

Files (``NNN`` counts passes in the order they ran, so a pass that runs twice has two files):

- ``000-input.hlo``: the module as it came in;
- ``NNN-<pass>.hlo``: the module after that pass (only passes whose name matches the dump
  filter regex), followed by the pass's report as ``//`` comments (fusion decisions, layout
  choices, the schedule's peaks, the buffer plan), so the file still parses;
- ``fusion-decisions.txt``: every fusion decision with its reason, in order, values named as the
  IR the deciding pass read prints them (a header lists which file that is for each pass);
- ``buffer-assignment.txt``: the buffer plan (buffer, slice, size, live range, values);
- ``optimized.hlo``: the final module;
- ``graph.dot`` and ``graph.html``: the final module as a graph of kernels (``graph_view``:
  Graphviz, and a self-contained page to open in a browser);
- ``summary.txt``: each pass with its time and whether it changed the module, time per pass
  name summed, the program's kernel count and memory sizes, and where compile time went:
  the passes, verification between them, the whole of ``optimize``, then (added by
  ``add_backend_times`` once a backend has built the program) code generation, LLVM
  optimization, object emission and loading, and the total.
"""
from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from hlo.ir.core import Module
from hlo.ir.printer import print_module

from .graph_view import graph_of, to_dot, to_html


def _comment(text: str) -> str:
    return "\n".join("// " + line if line else "//" for line in text.splitlines())


class Dumper:
    def __init__(self, path: str, pattern: Optional[str] = None):
        self.path = path
        self.pattern = re.compile(pattern) if pattern else None
        self.count = 0
        self.rows: List[Tuple[int, str, float, bool, bool]] = []
        self.read = "000-input.hlo"  # the IR the next pass reads: a file, or what made it
        self.read_by: List[Tuple[str, str]] = []  # (decision prefix, the IR its pass read)
        os.makedirs(path, exist_ok=True)

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(text)

    def input(self, module: Module) -> None:
        self._write("000-input.hlo", print_module(module))

    def after_pass(self, p, module: Module, changed: bool, seconds: float) -> None:
        self.count += 1
        wanted = self.pattern is None or bool(self.pattern.search(p.name))
        self.rows.append((self.count, p.name, seconds, changed, wanted))
        read = self.read
        name = f"{self.count:03d}-{p.name}.hlo"
        prefix = getattr(p, "decision_prefix", "")
        if prefix:
            self.read_by.append((prefix, read))
        if changed:
            self.read = name if wanted else f"the IR after pass {self.count} ({p.name}; not dumped)"
        if not wanted:
            return
        text = print_module(module)
        rep = p.report()
        if rep:
            # a pass's decisions name values as the IR it read prints them
            head = f"(values below are named as in {read}, the IR this pass read)\n" if changed else ""
            text += "\n" + _comment(head + rep) + "\n"
        self._write(name, text)

    def finish(self, opt) -> None:
        self._write("optimized.hlo", opt.text())
        reads = {}
        for pname, read in self.read_by:
            reads.setdefault(pname, []).append(read)
        head = ["// Each line names values as the IR its pass read prints them (%N, then the op and the",
                "// user's file:line); fusions made by a pass go by their name attribute, as in",
                "// optimized.hlo. The IR each pass read:"]
        head += [f"//   {pname}: {', '.join(dict.fromkeys(rs))}" for pname, rs in reads.items()
                 if any(d.startswith(pname + ": ") for d in opt.decisions)]
        self._write("fusion-decisions.txt", "\n".join(head + list(opt.decisions)) + "\n")
        self._write("buffer-assignment.txt", opt.buffers.text() + "\n")
        graph = graph_of(opt.module, opt)
        self._write("graph.dot", to_dot(graph))
        self._write("graph.html", to_html(graph))

    def write_summary(self, opt) -> None:
        cost = opt.cost_analysis()
        mem = opt.memory_analysis()
        lines = [f"target {opt.target}; {cost['kernels']} kernels "
                 f"({cost['fusions']} fusions); flops {cost['flops']:.0f}; "
                 f"bytes accessed {cost['bytes accessed']:.0f}",
                 f"memory: arguments {mem.argument_size_in_bytes}, outputs {mem.output_size_in_bytes}, "
                 f"temp {mem.temp_size_in_bytes}, aliased {mem.alias_size_in_bytes}, "
                 f"constants {mem.constant_size_in_bytes} bytes", "",
                 f"{'#':>4}  {'pass':<24} {'seconds':>10}  changed  dumped"]
        for n, name, sec, changed, dumped in self.rows:
            lines.append(f"{n:>4}  {name:<24} {sec:>10.6f}  {'yes' if changed else 'no':<7}  "
                         f"{'yes' if dumped else 'no'}")
        totals = {}
        for _, name, sec, _, _ in self.rows:
            totals[name] = totals.get(name, 0.0) + sec
        lines += ["", "time per pass (summed over runs):"]
        for name, sec in sorted(totals.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {name:<24} {sec:>10.6f}")
        lines.append(f"  {'total':<24} {sum(totals.values()):>10.6f}")
        lines += ["", "compile time (seconds):"]
        lines += _time_lines(opt.compile_times)
        self._write("summary.txt", "\n".join(lines) + "\n")


# What the compile-time keys of ``Optimized.compile_times`` and of a backend's executable
# (``compile_times``) mean, in the order a compile spends them.
_TIME_LABELS = {
    "passes": "passes (summed)",
    "verify": "verification between passes",
    "optimize": "optimize (clone, passes, verification, dumps)",
    "emit": "backend: LLVM IR emission",
    "llvm_parse": "backend: LLVM IR parse and verify",
    "llvm_opt": "backend: LLVM optimization",
    "llvm_codegen": "backend: object code emission",
    "cores": "backend: GEMM library code (0 once compiled in the process)",
    "load": "backend: load and link",
    "backend": "backend (total)",
    "total": "total compile (optimize + backend)",
}


def _time_lines(times: dict) -> List[str]:
    """One line per figure, in the order of ``_TIME_LABELS`` (unknown keys last)."""
    order = {k: i for i, k in enumerate(_TIME_LABELS)}
    keys = sorted(times, key=lambda k: order.get(k, len(order)))
    return [f"  {_TIME_LABELS.get(k, k):<46} {times[k]:>10.6f}" for k in keys]


def add_backend_times(dump_dir: str, optimize_seconds: float, times: dict) -> dict:
    """Append a backend's compile times (seconds by key, e.g. ``emit``, ``llvm_opt``, ``load``)
    to ``summary.txt`` in ``dump_dir`` with the totals; returns the times with ``backend`` and
    ``total`` added."""
    times = dict(times)
    times["backend"] = sum(v for k, v in times.items()
                           if k not in ("passes", "verify", "optimize", "backend", "total"))
    times["total"] = optimize_seconds + times["backend"]
    lines = _time_lines(times)
    with open(os.path.join(dump_dir, "summary.txt"), "a") as f:
        f.write("\n".join(lines) + "\n")
    return times
