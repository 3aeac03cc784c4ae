"""A profiled CPU executable's timeline as a Chrome / Perfetto trace (the Trace Event Format's
JSON: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).

A build compiled with ``profile=True`` appends every timed span to an event buffer as it runs
(``hlo.backends.cpu.entry``: the whole call, each kernel, copy and host call, and each chunk
of a parallel kernel on the worker that ran it; the first ``TRACE_EVENTS`` spans since the
build was loaded or its profile reset). ``chrome_trace`` turns them and the manifest's step
records into complete events (``"ph": "X"``), one track per thread: the calling thread shows
the calls and their steps, nested; the pool's workers show the chunks they ran. A span is
named as the optimized IR names what it ran (``%3 input_fusion.0``, ``%5 dot_general``), with
the kernel, op, the user's ``file:line``, the control flow around it and, for a matrix
product, its FLOPs and GFLOP/s in its ``args``.

A CUDA program compiled with ``profile=True`` gives the same spans, timed by CUDA events on
its stream (``hlo.runtime.cuda.profile``): one track, "GPU stream".

Users reach it as ``compiled.profile().export_trace(path)`` (``Profile.export_trace``, after
torch.profiler's ``export_chrome_trace``, which is also a name for it); open the file in
https://ui.perfetto.dev or chrome://tracing.
"""
from __future__ import annotations

import json
from typing import Dict, List, Sequence

from .abi import TRACE_CHUNK

GPU_STREAM = 0  # the thread of a CUDA program's spans (GPU time on its stream: runtime/cuda/profile.py)


def span_name(record: dict) -> str:
    """What a step ran, as the optimized IR names it: ``%3 input_fusion.0``, ``%5 dot_general``;
    ``copy``, ``host_call#0`` for steps no op made."""
    op = record.get("op", "")
    if not op:
        return record["name"]
    words = op.split(" -> ")[0].split()
    what = words[2] if words[0] == "fusion" and len(words) > 2 else words[0]
    value = record.get("value", "")
    return f"{value} {what}" if value else what


def chrome_trace(records: Sequence[dict], events, dropped: int = 0, *, name: str = "hlo",
                 pid: int = 1) -> dict:
    """The Trace Event Format object of ``events`` (rows of tag, start ns, end ns, thread: the
    runtime's ``Executable.trace_events()``) for a program whose timed steps are ``records``
    (the manifest's ``profile`` steps; the slot past the last is the whole call). Times are in
    microseconds from the first span's start."""
    rows = [tuple(int(x) for x in r) for r in events]
    out: List[dict] = []
    if not rows:
        return {"traceEvents": out, "displayTimeUnit": "ns",
                "otherData": {"program": name, "dropped_events": int(dropped)}}
    base = min(r[1] for r in rows)
    # tracks: the threads that called the program first, then the workers (first seen first)
    calling = [r[3] for r in rows if not r[0] & TRACE_CHUNK]
    threads: Dict[int, int] = {}
    for thread in calling + [r[3] for r in rows]:
        threads.setdefault(thread, len(threads) + 1)
    callers = {threads[t] for t in calling}
    n = len(records)
    for tag, t0, t1, thread in rows:
        tid = threads[thread]
        chunk = bool(tag & TRACE_CHUNK)
        slot = tag & (TRACE_CHUNK - 1)
        ts, dur = (t0 - base) / 1e3, max(0, t1 - t0) / 1e3
        if slot == n:  # the whole call
            out.append({"name": f"call {name}", "cat": "call", "ph": "X", "ts": ts, "dur": dur,
                        "pid": pid, "tid": tid})
            continue
        if slot > n:
            raise ValueError(f"trace event for slot {slot}, but the program has {n} timed steps")
        r = records[slot]
        args = {"step": slot, "kernel": r["name"]}
        for k in ("op", "loc", "where", "what"):
            if r.get(k):
                args[{"loc": "source"}.get(k, k)] = r[k]
        if r.get("gemm"):
            args["gemm [B, M, K, N]"] = list(r["gemm"])
            if r.get("flops") and not chunk:
                args["flops"] = r["flops"]
                if t1 > t0:
                    args["GFLOP/s"] = round(r["flops"] / (t1 - t0), 2)
        cat = ("chunk" if chunk else "copy" if r["name"] == "copy" else
               "host_call" if r["name"].startswith("host_call") else
               "product" if r.get("gemm") else "kernel")
        out.append({"name": span_name(r) + (" (chunk)" if chunk else ""), "cat": cat, "ph": "X",
                    "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}]
    for thread, tid in threads.items():
        role = "calling thread" if tid in callers else "worker"
        label = "GPU stream" if thread == GPU_STREAM else f"{role} {tid}"
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": label}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}})
    return {"traceEvents": meta + out, "displayTimeUnit": "ns",
            "otherData": {"program": name, "dropped_events": int(dropped)}}


def write_trace(path, trace: dict) -> None:
    with open(path, "w") as f:
        json.dump(trace, f)

