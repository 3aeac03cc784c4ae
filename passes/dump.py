"""Dump directories: the module after every pass, and what the pipeline decided.

Files (``NNN`` counts passes in the order they ran, so a pass that runs twice has two files):

- ``000-input.hlo``: the module as it came in;
- ``NNN-<pass>.hlo``: the module after that pass (only passes whose name matches the dump
  filter regex), followed by the pass's report as ``//`` comments (fusion decisions, layout
  choices, the schedule's peaks, the buffer plan), so the file still parses;
- ``fusion-decisions.txt``: every fusion decision with its reason, in order;
- ``buffer-assignment.txt``: the buffer plan (buffer, slice, size, live range, values);
- ``optimized.hlo``: the final module;
- ``summary.txt``: each pass with its time and whether it changed the module, time per pass
  name summed, and the program's kernel count and memory sizes.
"""
from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from hlo.ir.core import Module
from hlo.ir.printer import print_module


def _comment(text: str) -> str:
    return "\n".join("// " + line if line else "//" for line in text.splitlines())


class Dumper:
    def __init__(self, path: str, pattern: Optional[str] = None):
        self.path = path
        self.pattern = re.compile(pattern) if pattern else None
        self.count = 0
        self.rows: List[Tuple[int, str, float, bool, bool]] = []
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
        if not wanted:
            return
        text = print_module(module)
        rep = p.report()
        if rep:
            text += "\n" + _comment(rep) + "\n"
        self._write(f"{self.count:03d}-{p.name}.hlo", text)

    def finish(self, opt) -> None:
        self._write("optimized.hlo", opt.text())
        self._write("fusion-decisions.txt", "\n".join(opt.decisions) + ("\n" if opt.decisions else ""))
        self._write("buffer-assignment.txt", opt.buffers.text() + "\n")
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
        self._write("summary.txt", "\n".join(lines) + "\n")
