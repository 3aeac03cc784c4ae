"""The in-program profile of a CPU executable built with profiling (``compile(profile=True)``).

A profiled build's native entry adds, for every timed step (kernel call, copy, host call; a
step inside a loop each time it runs), the monotonic-clock nanoseconds it took and one call to
a counter slot of its own, and the whole call's time to a last slot
(``hlo.backends.cpu.entry``). ``Profile.from_counters`` turns those counters and the
manifest's per-step records (``hlo.backends.cpu.profile_records``: name, op, description, FLOPs of
a product kernel) into ``StepProfile`` rows; ``Profile.report()`` is the text table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple


class NotProfiledError(ValueError):
    """``profile()`` asked of an executable built without profiling."""


@dataclass(frozen=True)
class StepProfile:
    """One timed step of the program, over every call since the last reset."""

    index: int  # the step's place among the timed steps (schedule order, depth first)
    name: str  # kernel name, ``copy`` or ``host_call#N``
    op: str  # the op it was lowered from and its result types ('' for result copies)
    what: str  # the step's own description
    calls: int  # times it ran (a step in a loop body: once per iteration)
    seconds: float  # total wall time
    flops: int = 0  # per run, for a product kernel (2*B*M*K*N of its float dot_general)
    where: str = ""  # control flow around it: '' (top level), 'while0.body', ...
    gemm: Optional[Tuple[int, int, int, int]] = None  # a product kernel's (B, M, K, N)
    dtype: str = ""  # a product kernel's operand element type
    split_sum: bool = False  # sums a product's partial results (pass dot-split-k): product time

    @property
    def mean_seconds(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0

    @property
    def gflops(self) -> Optional[float]:
        """GFLOP/s of a product kernel (None for other steps or before it ran)."""
        if not self.flops or not self.calls or self.seconds <= 0:
            return None
        return self.flops * self.calls / self.seconds / 1e9


@dataclass(frozen=True)
class Profile:
    """Every timed step of a profiled executable (``steps``, schedule order), the number of
    whole calls counted and their total wall time inside the program."""

    steps: List[StepProfile]
    calls: int
    seconds: float
    # the timeline behind the counters (``hlo.runtime.cpu.trace``): the step records, the
    # recorded spans (tag, start ns, end ns, thread) and how many did not fit; None where the
    # build records none
    records: Tuple[dict, ...] = field(default=(), repr=False, compare=False)
    events: Any = field(default=None, repr=False, compare=False)
    dropped: int = 0

    @classmethod
    def from_counters(cls, records: Sequence[dict], counters, events=None, dropped: int = 0) -> "Profile":
        """``counters``: int64 pairs (nanoseconds, calls), one per record, then the whole
        call's; ``events``: the recorded spans, where the build keeps them."""
        steps = [StepProfile(i, r["name"], r["op"], r["what"], int(counters[i][1]),
                             int(counters[i][0]) * 1e-9, int(r.get("flops", 0)), r.get("where", ""),
                             tuple(r["gemm"]) if r.get("gemm") else None, r.get("dtype", ""),
                             bool(r.get("split_sum", False)))
                 for i, r in enumerate(records)]
        whole = counters[len(records)]
        return cls(steps, int(whole[1]), int(whole[0]) * 1e-9, tuple(records), events, int(dropped))

    def trace(self, name: str = "hlo") -> dict:
        """The calls' timeline as a Chrome / Perfetto trace object (Trace Event Format:
        ``hlo.runtime.cpu.trace.chrome_trace``): a track per thread, the calls and their
        steps on the calling thread, a parallel kernel's chunks on the workers that ran them,
        each span named as the optimized IR names what it ran (``%3 input_fusion.0``)."""
        if self.events is None:
            raise NotProfiledError("this profiled executable was built before profiled builds "
                                   "recorded a timeline; compile it again with profile=True")
        from .trace import chrome_trace
        return chrome_trace(self.records, self.events, self.dropped, name=name)

    def export_trace(self, path, name: str = "hlo") -> None:
        """Write ``trace()`` as JSON to ``path``: open it in https://ui.perfetto.dev or
        chrome://tracing (torch.profiler's ``export_chrome_trace``; also callable by that
        name). The spans are those since the build was loaded or its profile last reset, the
        first ``hlo.backends.cpu.entry.TRACE_EVENTS`` of them (``dropped`` counts the rest)."""
        from .trace import write_trace
        write_trace(path, self.trace(name))

    export_chrome_trace = export_trace

    @property
    def products(self) -> List[StepProfile]:
        """The product kernels (steps with a ``gemm`` shape; an integer one has no FLOPs)."""
        return [s for s in self.steps if s.gemm is not None]

    @property
    def float_products(self) -> List[StepProfile]:
        """The product kernels that ran and have FLOPs (a float product's)."""
        return [s for s in self.products if s.calls and s.flops]

    @property
    def split_sums(self) -> List[StepProfile]:
        """The kernels that sum a split product's partial results (see ``StepProfile``)."""
        return [s for s in self.steps if s.split_sum]

    @property
    def product_seconds(self) -> float:
        """The seconds of the float product kernels and of the sums of split products."""
        return sum(s.seconds for s in self.float_products) + sum(s.seconds for s in self.split_sums)

    @property
    def product_gflops(self) -> Optional[float]:
        """The product kernels' rate: the sum of their FLOPs over the sum of their seconds and
        those of the sums of split products (None without products or before they ran)."""
        p = self.float_products
        t = self.product_seconds
        return sum(s.flops * s.calls for s in p) / t / 1e9 if p and t > 0 else None

    def report(self, limit: Optional[int] = None) -> str:
        """A table of the steps, longest total time first (the first ``limit`` only, if
        given), then totals: the steps' sum, its share of the calls' wall time, the products'
        rate."""
        wall = self.seconds
        rows = sorted((s for s in self.steps if s.calls), key=lambda s: -s.seconds)
        shown = rows if limit is None else rows[:limit]
        per = f", {wall / self.calls * 1e3:.3f} ms a call" if self.calls else ""
        lines = [f"in-program profile: {self.calls} call(s){per}",
                 f"{'#':>4} {'calls':>7} {'total ms':>9} {'mean us':>9} {'share':>6} {'GFLOP/s':>8}  step: op"]
        for s in shown:
            share = f"{s.seconds / wall:6.1%}" if wall > 0 else " " * 6
            g = f"{s.gflops:8.1f}" if s.gflops is not None else " " * 8
            op = f": {s.op}" if s.op else ""
            where = f" (in {s.where})" if s.where else ""
            lines.append(f"{s.index:>4} {s.calls:>7} {s.seconds * 1e3:9.3f} {s.mean_seconds * 1e6:9.2f} "
                         f"{share} {g}  {s.name}{where}{op}" + (f"  [{s.what}]" if s.what else ""))
        if len(shown) < len(rows):
            rest = sum(s.seconds for s in rows[len(shown):])
            lines.append(f"     ({len(rows) - len(shown)} more steps: {rest * 1e3:.3f} ms)")
        total = sum(s.seconds for s in rows)
        share = f" = {total / wall:.1%} of the calls' {wall * 1e3:.3f} ms" if wall > 0 else ""
        lines.append(f"sum of steps {total * 1e3:.3f} ms{share}")
        g = self.product_gflops
        if g is not None:
            p = self.float_products
            sums = len(self.split_sums)
            lines.append(f"products: {len(p)} kernel(s){f' and {sums} split-K sum(s)' if sums else ''}, "
                         f"{self.product_seconds * 1e3:.3f} ms, {g:.1f} GFLOP/s")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


NOT_PROFILED = ("this executable was compiled without profiling; compile it with profile=True "
                "(jit(f).lower(*args).compile(profile=True))")


class ProfileMethods:
    """``profile()``, ``reset_profile()`` and ``profile_report()`` of a user-facing executable
    (``hlo.Compiled``, ``hlo.aot``'s ``LoadedExecutable``) whose runtime executable
    ``_runtime_executable()`` returns."""

    def _runtime_executable(self):
        raise NotImplementedError

    def _profiled(self, method: str):
        """The runtime executable's ``method``; ``NotProfiledError`` where it has none (an
        executable of another target)."""
        fn = getattr(self._runtime_executable(), method, None)
        if fn is None:
            raise NotProfiledError(NOT_PROFILED)
        return fn

    def profile(self) -> Profile:
        """The in-program profile of every call since the build was loaded or last reset:
        per step (schedule order) its calls, time and, for a matrix product, FLOPs and GFLOP/s
        (``hlo.runtime.cpu.profile.Profile``). Raises ``NotProfiledError`` unless the executable
        was compiled with ``profile=True``."""
        return self._profiled("profile")()

    def reset_profile(self) -> None:
        """Zero the profile's counters (``NotProfiledError`` for an unprofiled build)."""
        self._profiled("reset_profile")()

    def profile_report(self, limit: Optional[int] = None) -> str:
        """``profile().report(limit)``: the steps by time, longest first, with totals."""
        return self.profile().report(limit)
