"""Steady-state timing: warm-up, then samples until at least ``min_time`` seconds (and 5 samples)
have been spent, each sample ending in a device sync.

Calls shorter than a millisecond are timed in batches (one sync at the batch's end) so that the
timer's own cost stays small; a sample is the batch time divided by its calls. Calls so slow that
5 samples would not fit in ``max_time`` get fewer samples (at least 2), and the result says so.
"""
from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass


@dataclass
class Timing:
    median_s: float
    min_s: float
    max_s: float
    calls: int            # timed calls (batches x batch size), warm-up excluded
    samples: int
    batch: int
    seconds: float        # wall time spent timing

    @property
    def note(self) -> str:
        if self.samples < 5:
            return f"only {self.samples} timed calls ({self.median_s:.3g} s each)"
        return ""


def measure(call, sync, min_time: float = 1.0, max_time: float = 20.0, warmup: int = 2) -> Timing:
    """Time ``call()`` (results passed to ``sync``) per the module's rules."""
    est = math.inf
    for i in range(warmup):
        t0 = time.perf_counter()
        sync(call())
        est = min(est, time.perf_counter() - t0)
        if est > max_time / 4:
            break                                   # slow: one warm-up is enough
    batch = 1 if est >= 1e-3 else max(1, int(math.ceil(1e-3 / max(est, 1e-7))))
    samples = []
    was_enabled = gc.isenabled()
    gc.disable()
    start = time.perf_counter()
    try:
        while True:
            t0 = time.perf_counter()
            out = None
            for _ in range(batch):
                out = call()
            sync(out)
            samples.append((time.perf_counter() - t0) / batch)
            spent = time.perf_counter() - start
            if len(samples) >= 5 and spent >= min_time:
                break
            if len(samples) >= 2 and spent + samples[-1] > max_time:
                break
    finally:
        if was_enabled:
            gc.enable()
    return Timing(statistics.median(samples), min(samples), max(samples), len(samples) * batch,
                  len(samples), batch, time.perf_counter() - start)
