"""The ``c`` row: the workload exported as a C library (``Compiled.export_c``) and run by the C
example (examples/c/run_model.c, built with ``cc``) in fresh processes, no Python in them.

- first call (``first_call_s``): the wall time of a fresh process that loads the library, reads
  the inputs, runs once and writes the outputs (spawned from here: exec and dynamic loading
  included); its own figure from ``main`` to the first result is ``c_start_to_first_result_s``.
- steady calls (``median_s``...): the example's ``--repeat N`` loop, timed in C
  (``clock_gettime`` around N calls), in ``SAMPLES`` processes; the bench's Python timer never
  wraps a C call.

The export and the build happen in ``bind`` (outside every timing). CPU only.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

from bench.systems import Bound, System
from bench.timing import Timing
from bench.workloads import Ops, flatten

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = 5


class CSystem(System):
    name = "c"
    is_peer = False

    def unavailable(self):
        if self.gpu:
            return "the c row is CPU only (export to C for cuda is not there yet)"
        if shutil.which(os.environ.get("CC") or "cc") is None or shutil.which("make") is None:
            return "needs cc and make"
        return None

    def skip(self, case):
        if case.workload.imported:
            return "skipped: the c row exports traced workloads only"
        return None

    def bind(self, case, inputs):
        import hlo
        import hlo.numpy as hnp
        body = case.workload.fn

        def fn(*a):
            return body(Ops(hnp, getattr(hlo, "grad", None), getattr(hlo, "vmap", None), hlo.lax), *a)
        fn.__name__ = case.workload.id
        compiled = hlo.jit(fn, target="cpu").lower(*inputs).compile()
        folder = tempfile.mkdtemp(prefix="hlo-bench-c-")
        name = re.sub(r"\W", "_", case.name)
        compiled.export_c(folder, name)
        r = subprocess.run(["make", "-s", "-C", os.path.join(REPO, "examples", "c"), f"EXPORT_DIR={folder}",
                            f"MODEL={name}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"building the C example failed: {r.stderr.strip()[:300]}")
        with open(os.path.join(folder, "inputs.bin"), "wb") as f:
            for a in inputs:
                f.write(np.ascontiguousarray(a).tobytes())
        outs = [(a.shape, a.dtype) for a in flatten(compiled.out_avals)]
        threads = compiled._runtime_executable().threads
        return _Bound(folder, os.path.join(folder, f"run_{name}"), outs, threads)


class _Bound(Bound):
    def __init__(self, folder, binary, outs, threads):
        self.folder, self.binary, self.outs, self.threads = folder, binary, outs, threads
        self._stats = {}

    def _run(self, *extra) -> str:
        r = subprocess.run([self.binary, os.path.join(self.folder, "inputs.bin"), "--threads",
                            str(self.threads), *extra], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"the C program failed: {(r.stderr or r.stdout).strip()[:300]}")
        return r.stdout

    def first(self):
        out = os.path.join(self.folder, "out.bin")
        t0 = time.perf_counter()
        stdout = self._run("--output", out)
        self._stats["c_process_first_call_s"] = time.perf_counter() - t0
        m = re.search(r"start to first result: ([\d.]+) ms", stdout)
        if m:
            self._stats["c_start_to_first_result_s"] = float(m.group(1)) / 1e3
        raw = np.fromfile(out, np.uint8)
        arrays, at = [], 0
        for shape, dtype in self.outs:
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            arrays.append(raw[at:at + n].view(dtype).reshape(shape))
            at += n
        return arrays

    def call(self):
        raise NotImplementedError("the c row is timed in C (measure)")

    def _per_call(self, calls: int) -> float:
        stdout = self._run("--repeat", str(calls), "--quiet")
        m = re.search(r"calls: ([\d.]+) us per call", stdout)
        if not m:
            raise RuntimeError(f"the C program printed no timing: {stdout[:200]}")
        return float(m.group(1)) * 1e-6

    def measure(self, min_time: float, max_time: float) -> Timing:
        t0 = time.perf_counter()
        est = self._per_call(3)
        calls = max(3, int(min(min_time, max_time / 2) / SAMPLES / max(est, 1e-8)))
        samples = [self._per_call(calls) for _ in range(SAMPLES)]
        return Timing(statistics.median(samples), min(samples), max(samples), calls * SAMPLES,
                      SAMPLES, calls, time.perf_counter() - t0)

    def stats(self):
        shutil.rmtree(self.folder, ignore_errors=True)
        return dict(self._stats)
