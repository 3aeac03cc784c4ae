"""The CPU target's collectives: a compiled program's collective is a host call site whose
record (``collective``: the op, its attributes, its computation's op) this module runs on the
calling device's process (``hlo.runtime.cpu.devices``), with the semantics the interpreter
uses (``hlo.ir.interp.collectives``: process groups, rendezvous, one function per op); a
reduction applies the computation's numpy ufunc to whole arrays, folded in group order (so
every member gets the same bits as the interpreter's fold). Outside an SPMD run the program is
one process (replica 0, partition 0).

The record is JSON (no ids of this process), so a program with collectives is cached and saved
like any other.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Sequence

import numpy as np

from hlo.ir.interp.collectives import SEMANTICS, OpView, Process

# The computations a CPU collective applies (a reduction body of one commutative op).
UFUNCS: Dict[str, Callable] = {
    "add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}

_SINGLE = Process(None, 0, 0)

# Seconds the calling threads spent in collectives (waiting for their group included) and how
# many ran, over the process's life: ``stats()``; bench/spmd.py reports it per step.
_stats = [0.0, 0]
_stats_lock = threading.Lock()


def stats() -> Dict[str, float]:
    """``{"seconds": ..., "calls": ...}`` summed over every device's collectives so far."""
    with _stats_lock:
        return {"seconds": _stats[0], "calls": _stats[1]}


def record(name: str, attrs: dict, shapes: Sequence[tuple], computation, where: str) -> dict:
    """The JSON record of one collective site (made by the backend)."""
    return {"op": name, "attrs": {k: _jsonable(v) for k, v in attrs.items()},
            "shapes": [list(s) for s in shapes], "computation": computation, "where": where}


def _jsonable(v):
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return v


def _attrs_from_json(name: str, attrs: dict) -> dict:
    out = {}
    for k, v in attrs.items():
        if k in ("replica_groups", "source_target_pairs"):
            v = tuple(tuple(int(i) for i in g) for g in v)
        out[k] = v
    return out


def _fold(ufunc):
    def combine(values: Sequence[np.ndarray]) -> np.ndarray:
        acc = values[0]
        for v in values[1:]:
            acc = ufunc(acc, v)
        return acc
    return combine


class CollectiveSite:
    """A compiled collective: its semantics, view and fold, made once per executable."""

    def __init__(self, rec: dict):
        name = rec["op"]
        self.fn = SEMANTICS[name]
        where = rec.get("where") or ""
        self.view = OpView(name, _attrs_from_json(name, rec["attrs"]), rec["shapes"],
                           f"'{name}'" + (f" at {where}" if where else ""))
        comp = rec.get("computation")
        self.computation = comp
        self.combine = _fold(UFUNCS[comp]) if comp else None

    def run(self, args: List[np.ndarray]) -> List[np.ndarray]:
        from .devices import current_process
        proc = current_process() or _SINGLE
        t0 = time.perf_counter()
        try:
            across = getattr(proc, "run_collective", None)  # a run of several processes
            if across is not None:
                return across(self, args)
            return self.fn(proc, self.view, args, self.combine)
        finally:
            dt = time.perf_counter() - t0
            with _stats_lock:
                _stats[0] += dt
                _stats[1] += 1
