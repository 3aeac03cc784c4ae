"""The profile of a CUDA program compiled with ``profile=True``: CUDA events around every step.

The program's code is the unprofiled build's; what differs is how it runs. Its manifest has
a ``profile`` entry (``kernels``: for each kernel, the op it was lowered from as the optimized
IR prints it: ``value`` ``%3``, ``op``, the user's ``loc``), and its ``CudaExecutable`` then
replays no CUDA graphs and wraps every launch, copy and cuBLASLt product of its records
(``launch.build``'s, at any depth of while / switch) as a ``launch.TIMED`` record
``(TIMED, slot, record)``: ``launch.run``
records a timing event on the stream before and after it, and the executable records a pair
around each whole call (the last slot). Events are read when the profile is asked for
(``fold``: a stream synchronization, then ``cuEventElapsedTime`` of each against the first
event since the last reset), or every ``FOLD_EVERY`` pairs, so the events a long run holds stay
bounded. The result is ``hlo.runtime.cpu.profile.Profile`` (per step: calls and GPU time;
the calls' GPU time) with the spans for ``Profile.export_trace``: one track, the stream
(thread 0, which ``hlo.runtime.cpu.trace`` names "GPU stream").
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from .launch import COPY, LAUNCH, MATMUL, SWITCH, TIMED, WHILE

FOLD_EVERY = 4096  # event pairs held before they are read (a synchronization)
TRACE_SPANS = 16384  # spans kept for the timeline since the last reset (the first ones)


def timed_records(records: list, descs: List[dict], kernels: Dict[str, dict], where: str = "") -> list:
    """``records`` with each launch, copy and product wrapped as ``(TIMED, slot, record)``;
    ``descs`` gets each one's profile record (``hlo.runtime.cpu.profile``'s fields: name, op,
    what, where, flops; value and loc where the manifest's ``kernels`` has them), in slot
    order. Loops and switches are numbered as ``hlo.backends.cpu.entry.timed_steps`` numbers
    them (``while0.body``, ``switch1.branch0``)."""
    out, n = [], 0
    pre = f"{where}/" if where else ""
    for r in records:
        k = r[0]
        if k in (LAUNCH, COPY, MATMUL):
            descs.append(_describe(r, where, kernels))
            out.append((TIMED, len(descs) - 1, r))
        elif k == WHILE:
            cond = timed_records(r[1], descs, kernels, f"{pre}while{n}.cond")
            body = timed_records(r[3], descs, kernels, f"{pre}while{n}.body")
            out.append((WHILE, cond, r[2], body, r[4]))
            n += 1
        elif k == SWITCH:
            out.append((SWITCH, r[1], r[2], [timed_records(b, descs, kernels, f"{pre}switch{n}.branch{i}")
                                             for i, b in enumerate(r[3])]))
            n += 1
        else:
            raise ValueError(f"record kind {k} cannot be timed")
    return out


def _describe(r, where: str, kernels: Dict[str, dict]) -> dict:
    if r[0] == LAUNCH:
        rec = {"name": r[4], "op": "", "what": r[5] or "", "where": where, "flops": 0}
        info = kernels.get(r[4]) or {}
        for key in ("op", "value", "loc"):
            if info.get(key):
                rec[key] = info[key]
        return rec
    if r[0] == COPY:
        return {"name": "copy", "op": "", "what": f"{r[3]} bytes", "where": where, "flops": 0}
    call = r[1]  # a cuBLASLt product: its FLOPs, 2*batch*m*n*k
    p = call.params
    flops = 2 * int(getattr(p, "batch", 1) or 1) * int(p.m) * int(p.n) * int(p.k)
    return {"name": "cublaslt.matmul", "op": "", "what": call.what, "where": where, "flops": flops}


class EventTimer:
    """Timing events around the timed records of a profiled executable's calls."""

    def __init__(self, descs: List[dict], driver):
        self.descs = descs
        self.driver = driver
        self.counters = np.zeros((len(descs) + 1, 2), np.int64)  # (ns, calls); last: whole calls
        self.rows: List[tuple] = []  # (slot, start ns, end ns, 0): the timeline
        self.dropped = 0
        self.pending: List[tuple] = []  # (slot, start event, end event), in stream order
        self.free: list = []
        self.ref = None  # the first event since the last reset: time 0

    def _event(self):
        if self.free:
            return self.free.pop()
        cu = self.driver.cu
        return self.driver.check(cu.cuEventCreate(0), "cuEventCreate")  # (timing enabled)

    def start(self, stream) -> object:
        e = self._event()
        self._record(e, stream)
        if self.ref is None:
            self.ref = e
        return e

    def stop(self, slot: int, start, stream) -> None:
        e = self._event()
        self._record(e, stream)
        self.pending.append((slot, start, e))

    def stop_call(self, start, stream) -> None:
        """The end of a whole call; reads the events once ``FOLD_EVERY`` pairs are held."""
        self.stop(len(self.descs), start, stream)
        if len(self.pending) >= FOLD_EVERY:
            self.fold(stream)

    def _record(self, e, stream) -> None:
        ret = self.driver.cu.cuEventRecord(e, stream)
        if ret[0] is not self.driver.OK:
            self.driver.check(ret, "cuEventRecord")

    def _ns(self, a, b) -> int:
        cu = self.driver.cu
        elapsed = getattr(cu, "cuEventElapsedTime", None) or getattr(cu, "cuEventElapsedTime_v2")
        ret = elapsed(a, b)
        ms = self.driver.check(ret, "cuEventElapsedTime")
        return int(round(float(ms) * 1e6))

    def fold(self, stream) -> None:
        """Wait for the stream, then add each held pair's time to its slot's counters and the
        timeline; the events go back to the pool (but the reference)."""
        if not self.pending:
            return
        ret = self.driver.cu.cuStreamSynchronize(stream)
        if ret[0] is not self.driver.OK:
            self.driver.check(ret, "cuStreamSynchronize", "reading the profile's events")
        for slot, a, b in self.pending:
            t0, t1 = self._ns(self.ref, a), self._ns(self.ref, b)
            self.counters[slot, 0] += max(0, t1 - t0)
            self.counters[slot, 1] += 1
            if len(self.rows) < TRACE_SPANS:
                self.rows.append((slot, t0, t1, 0))
            else:
                self.dropped += 1
            for e in (a, b):
                if e is not self.ref:
                    self.free.append(e)
        self.pending = []

    def reset(self, stream) -> None:
        self.fold(stream)
        self.counters[...] = 0
        self.rows, self.dropped = [], 0
        if self.ref is not None:
            self.free.append(self.ref)
            self.ref = None

    def profile(self, stream):
        """The ``Profile`` of the calls since the last reset (``hlo.runtime.cpu.profile``)."""
        from hlo.runtime.cpu.profile import Profile
        self.fold(stream)
        events = np.array(self.rows, dtype=np.int64).reshape(-1, 4)
        return Profile.from_counters(self.descs, self.counters.copy(), events, self.dropped)

    def release(self) -> None:
        """Destroy the events (the executable is going away)."""
        cu = self.driver.cu
        for e in [self.ref] + self.free + [x for _, a, b in self.pending for x in (a, b)]:
            if e is not None:
                try:
                    cu.cuEventDestroy(e)
                except Exception:
                    pass
        self.free, self.pending, self.ref = [], [], None


def kernel_origins(steps, origin: Dict[int, object], names: Dict) -> Dict[str, dict]:
    """For the manifest's ``profile``: each launched kernel's op (``describe_op``), its first
    result as the optimized IR prints it (``value``) and the user's line (``loc``); the first
    launch of a kernel name wins."""
    from hlo.runtime.steps import Launch, Switch, While
    out: Dict[str, dict] = {}

    def walk(ss):
        for s in ss:
            if isinstance(s, Launch):
                op = origin.get(id(s))
                if op is not None and s.name not in out:
                    info = {"op": _describe_op(op)}
                    if op.results and op.results[0] in names:
                        info["value"] = names[op.results[0]]
                    if op.loc is not None:
                        info["loc"] = str(op.loc)
                    out[s.name] = info
            elif isinstance(s, While):
                walk(s.cond)
                walk(s.body)
            elif isinstance(s, Switch):
                for b in s.branches:
                    walk(b)
    walk(steps)
    return out


def _describe_op(op) -> str:
    what = op.name
    if op.name == "fusion":
        what = f"fusion {op.attrs.get('kind', 'loop')} {op.attrs.get('name', '')}".rstrip()
    return f"{what} -> {', '.join(str(r.type) for r in op.results)}"

