"""numpy's f32 matmul with both OPENBLAS_* variables unset: a child process that times it on request.

The project's AVX-512 machines set ``OPENBLAS_CORETYPE=Haswell`` and ``OPENBLAS_L2_SIZE=512`` for
every process (older OpenBLAS builds fail on their processor without them); numpy's OpenBLAS is
fastest with neither, and that rate is the bar for hlo's product kernels (issue 17: at least 85%
of it). The variables stay set in the bench's own process; only this child runs without them.

This host's speed drifts by up to ~15% within minutes, so a reference timed once, before or after
the workloads, says little about a ratio to a rate measured minutes apart. ``UnsetMatmul.rate``
runs one short burst in the child when asked; ``bench.systems.product_rate`` alternates such
bursts with bursts of hlo's profiled calls and takes the median of the per-round ratios, so both
sides of each ratio ran within the same second.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import List, Optional, Sequence

OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# The sizes timed in each burst (the best of their rates is the burst's figure), as the bench's
# own matmul limit takes the best of its sizes.
SIZES = (1024, 2048)
BURST_S = 0.3
# OpenBLAS's threads keep spinning for ~0.1 s after its last call: hlo's next burst waits this long
# so that they do not share the cores with it.
SETTLE_S = 0.4

_CHILD = r'''
import sys, time
import numpy as np
sizes = [int(s) for s in sys.argv[1].split(",")]
a = {n: np.random.default_rng(n).standard_normal((n, n)).astype(np.float32) for n in sizes}
for n in sizes:
    a[n] @ a[n]
print("ready", flush=True)
for line in sys.stdin:
    burst = float(line) / len(sizes)
    best = 0.0
    for n in sizes:
        x = a[n]
        x @ x
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < burst or k == 0:
            x @ x
            k += 1
        best = max(best, 2.0 * n ** 3 * k / (time.perf_counter() - t0) / 1e9)
    print(repr(best), flush=True)
'''


def unset_env(env: Optional[dict] = None) -> dict:
    """``env`` (the process's environment by default) without the OPENBLAS_* variables."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k not in OPENBLAS_VARS}


class UnsetMatmul:
    """A child process with both variables removed from its environment, timing numpy's f32
    matmul (all cores) in a burst of ``burst_s`` seconds per ``rate()`` call. Each rate is kept in
    ``rates``. Use as a context manager (or call ``close``)."""

    def __init__(self, sizes: Sequence[int] = SIZES, burst_s: float = BURST_S, settle_s: float = SETTLE_S):
        self.sizes, self.burst_s, self.settle_s = tuple(sizes), burst_s, settle_s
        self.rates: List[float] = []
        self._proc = subprocess.Popen([sys.executable, "-c", _CHILD, ",".join(map(str, self.sizes))],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=unset_env())
        self._expect("ready")

    def _expect(self, what: str) -> str:
        line = self._proc.stdout.readline()
        if not line:
            err = self._proc.stderr.read() if self._proc.poll() is not None else ""
            raise RuntimeError(f"the numpy (OPENBLAS_* unset) child exited before {what}: {err[-2000:]}")
        return line.strip()

    def rate(self) -> float:
        """GFLOP/s of one burst (the best of ``sizes``), after which the child's threads are given
        ``settle_s`` to stop spinning."""
        self._proc.stdin.write(f"{self.burst_s}\n")
        self._proc.stdin.flush()
        g = float(self._expect("answering"))
        self.rates.append(g)
        time.sleep(self.settle_s)
        return g

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for f in (self._proc.stdout, self._proc.stderr):
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
