"""The run-time program of an executable, shared by every target: where buffers live and the
steps that run.

``BufRef`` names a buffer at run time (an input, an output, a slice of the arena or a constant).
Steps are kernel calls, copies and structured control flow (while / if / case) holding nested
step lists. The CPU backend turns a step tree into one native entry point
(``backends/cpu/entry.py``); a GPU runtime walks it (or records it into a graph). Step trees
round-trip through JSON (``steps_to_json`` / ``steps_from_json``), so a saved executable can
carry one.

- ``KernelCall``: a CPU kernel over ``extent`` iterations of its outer loop, optionally spread
  over threads.
- ``Launch``: a GPU kernel launch: grid and block dimensions, dynamic shared memory bytes; its
  parameters are the buffers of ``refs`` in order (device pointers), then ``scalars``
  (``(type, value)`` pairs, type one of ``i32``, ``i64``, ``f32``).
- ``LibraryCall``: a call into a runtime library (for example a cuBLASLt matrix product):
  ``library`` and ``fn`` name it, ``params`` is a JSON-able dict the runtime interprets.
- ``HostCall``: a call back into the Python host (``hlo.ir.callbacks``, callback
  ``callback_id``), call site ``site`` of the executable: ``refs`` are the operands then the
  results, ``types`` their type descriptions (``dtype``, ``shape``, ``layout``: minor-to-major
  or None) in the same order; the callback reads the operands and writes the results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union


@dataclass(frozen=True)
class BufRef:
    """A buffer at run time. kind: 'input' | 'output' | 'arena' | 'const'."""

    kind: str
    index: int = 0  # input/output number, or the constant's id
    offset: int = 0  # bytes
    size: int = 0  # bytes

    def overlaps(self, other: "BufRef") -> bool:
        if self.kind != other.kind or self.index != other.index:
            return False
        if self.size == 0 or other.size == 0:
            return False
        return self.offset < other.offset + other.size and other.offset < self.offset + self.size

    def __str__(self):
        if self.kind == "arena":
            return f"arena[{self.offset}:+{self.size}]"
        if self.kind == "const":
            return f"const#{self.index}"
        return f"{self.kind}{self.index}" + (f"+{self.offset}" if self.offset else "")


@dataclass
class KernelCall:
    name: str
    refs: List[BufRef]
    writes: List[bool]  # which refs the kernel writes
    extent: int  # iterations of the kernel's outer (parallel) loop
    parallel: bool  # worth spreading over threads
    what: str = ""  # a one-line description for dumps


@dataclass
class Launch:
    name: str
    refs: List[BufRef]
    writes: List[bool]
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    shared_bytes: int = 0
    scalars: List[Tuple[str, Any]] = field(default_factory=list)
    what: str = ""


@dataclass
class LibraryCall:
    library: str
    fn: str
    refs: List[BufRef]
    writes: List[bool]
    params: Dict[str, Any] = field(default_factory=dict)
    what: str = ""


def type_desc(t) -> Dict[str, Any]:
    """A tensor type as the runtime describes buffers: ``dtype`` name, ``shape``, ``layout``
    (minor-to-major, or None for row-major)."""
    return {"dtype": t.dtype.name, "shape": list(t.shape),
            "layout": list(t.layout) if t.layout is not None else None}


@dataclass
class HostCall:
    site: int
    callback_id: int
    refs: List[BufRef]
    writes: List[bool]
    types: List[Dict[str, Any]]
    what: str = ""


@dataclass
class Copy:
    dst: BufRef
    src: BufRef
    nbytes: int


@dataclass
class While:
    """``cond`` computes the predicate into ``cond_ref``; ``body`` runs while it holds. With
    ``trip_count`` (known before the loop runs: ``passes.trip_count``) the body runs that many
    times and a runtime may skip the condition (the CUDA runtime does: it then never waits for the
    device between steps)."""

    cond: list
    cond_ref: BufRef
    body: list
    trip_count: Optional[int] = None


@dataclass
class Switch:
    """``if`` (pred selector, branches [true, false]) or ``case`` (s32 selector; out-of-range
    picks the last branch)."""

    selector: BufRef
    is_pred: bool
    branches: List[list]


Step = Union[KernelCall, Launch, LibraryCall, HostCall, Copy, While, Switch]


def walk_steps(steps):
    """Every step of ``steps``, those inside While and Switch bodies too (depth first)."""
    for st in steps:
        yield st
        if isinstance(st, While):
            yield from walk_steps(st.cond)
            yield from walk_steps(st.body)
        elif isinstance(st, Switch):
            for b in st.branches:
                yield from walk_steps(b)


def written_inputs(steps) -> List[int]:
    """The inputs some step (at any depth) writes: donated arguments the buffer plan reuses for
    an output or as scratch. A runtime may run the steps on the caller's memory for these only
    where it may be written in place (``hlo.runtime.donation``)."""
    out = set()
    for st in walk_steps(steps):
        if isinstance(st, Copy):
            if st.dst.kind == "input":
                out.add(st.dst.index)
            continue
        for r, w in zip(getattr(st, "refs", ()), getattr(st, "writes", ())):
            if w and r.kind == "input":
                out.add(r.index)
    return sorted(out)


def calls_library(steps, library: str) -> bool:
    """Whether any step (at any depth) is a ``LibraryCall`` into ``library``."""
    return any(isinstance(st, LibraryCall) and st.library == library for st in walk_steps(steps))


def describe_steps(steps, depth=0) -> List[str]:
    ind = "  " * depth
    out = []
    for s in steps:
        if isinstance(s, KernelCall):
            par = " parallel" if s.parallel else ""
            out.append(f"{ind}{s.name}({', '.join(map(str, s.refs))}) x{s.extent}{par}  {s.what}")
        elif isinstance(s, Launch):
            sh = f" shared={s.shared_bytes}" if s.shared_bytes else ""
            sc = "".join(f", {t} {v}" for t, v in s.scalars)
            out.append(f"{ind}{s.name}<<<{tuple(s.grid)}, {tuple(s.block)}{sh}>>>"
                       f"({', '.join(map(str, s.refs))}{sc})  {s.what}")
        elif isinstance(s, LibraryCall):
            out.append(f"{ind}{s.library}.{s.fn}({', '.join(map(str, s.refs))})  {s.what}")
        elif isinstance(s, HostCall):
            out.append(f"{ind}host_call#{s.site} callback {s.callback_id}"
                       f"({', '.join(map(str, s.refs))})  {s.what}")
        elif isinstance(s, Copy):
            out.append(f"{ind}copy {s.src} -> {s.dst} ({s.nbytes} bytes)")
        elif isinstance(s, While):
            out.append(f"{ind}while{'' if s.trip_count is None else f' ({s.trip_count} steps)'}:")
            out += describe_steps(s.cond, depth + 1)
            out.append(f"{ind}  test {s.cond_ref}")
            out.append(f"{ind}do:")
            out += describe_steps(s.body, depth + 1)
        elif isinstance(s, Switch):
            out.append(f"{ind}switch {s.selector}:")
            for i, br in enumerate(s.branches):
                out.append(f"{ind} branch {i}:")
                out += describe_steps(br, depth + 1)
    return out


# ------------------------------------------------------------------------------------------
# JSON form (what a saved executable stores)
# ------------------------------------------------------------------------------------------

def _ref_json(r: BufRef) -> list:
    return [r.kind, r.index, r.offset, r.size]


_REF_KINDS = ("input", "output", "arena", "const")


def _ref(x) -> BufRef:
    if not (isinstance(x, list) and len(x) == 4 and x[0] in _REF_KINDS
            and all(type(v) is int and v >= 0 for v in x[1:])):
        raise ValueError(f"malformed buffer reference {x!r}")
    return BufRef(x[0], x[1], x[2], x[3])


def steps_to_json(steps) -> list:
    out = []
    for s in steps:
        if isinstance(s, KernelCall):
            out.append({"step": "kernel", "name": s.name, "refs": [_ref_json(r) for r in s.refs],
                        "writes": list(s.writes), "extent": s.extent, "parallel": s.parallel,
                        "what": s.what})
        elif isinstance(s, Launch):
            out.append({"step": "launch", "name": s.name, "refs": [_ref_json(r) for r in s.refs],
                        "writes": list(s.writes), "grid": list(s.grid), "block": list(s.block),
                        "shared_bytes": s.shared_bytes, "scalars": [list(p) for p in s.scalars],
                        "what": s.what})
        elif isinstance(s, LibraryCall):
            out.append({"step": "library", "library": s.library, "fn": s.fn,
                        "refs": [_ref_json(r) for r in s.refs], "writes": list(s.writes),
                        "params": s.params, "what": s.what})
        elif isinstance(s, HostCall):
            out.append({"step": "host_call", "site": s.site, "callback_id": s.callback_id,
                        "refs": [_ref_json(r) for r in s.refs], "writes": list(s.writes),
                        "types": [dict(t) for t in s.types], "what": s.what})
        elif isinstance(s, Copy):
            out.append({"step": "copy", "dst": _ref_json(s.dst), "src": _ref_json(s.src),
                        "nbytes": s.nbytes})
        elif isinstance(s, While):
            out.append({"step": "while", "cond": steps_to_json(s.cond),
                        "cond_ref": _ref_json(s.cond_ref), "body": steps_to_json(s.body),
                        **({} if s.trip_count is None else {"trip_count": s.trip_count})})
        elif isinstance(s, Switch):
            out.append({"step": "switch", "selector": _ref_json(s.selector), "is_pred": s.is_pred,
                        "branches": [steps_to_json(b) for b in s.branches]})
        else:
            raise TypeError(f"not a step: {s!r}")
    return out


def _dims(x, what) -> Tuple[int, int, int]:
    if not (isinstance(x, list) and len(x) == 3 and all(type(v) is int and v >= 1 for v in x)):
        raise ValueError(f"malformed {what} {x!r}")
    return tuple(x)


def steps_from_json(data) -> list:
    """The step tree of ``steps_to_json``'s output. Malformed input raises ``ValueError``."""
    if not isinstance(data, list):
        raise ValueError("a step list must be a list")
    out = []
    for d in data:
        if not isinstance(d, dict):
            raise ValueError(f"malformed step {d!r}")
        kind = d.get("step")
        try:
            if kind == "kernel":
                out.append(KernelCall(str(d["name"]), [_ref(r) for r in d["refs"]],
                                      [bool(w) for w in d["writes"]], int(d["extent"]),
                                      bool(d["parallel"]), str(d.get("what", ""))))
            elif kind == "launch":
                scalars = []
                for p in d.get("scalars", []):
                    if not (isinstance(p, list) and len(p) == 2 and p[0] in ("i32", "i64", "f32")):
                        raise ValueError(f"malformed scalar parameter {p!r}")
                    scalars.append((p[0], p[1]))
                out.append(Launch(str(d["name"]), [_ref(r) for r in d["refs"]],
                                  [bool(w) for w in d["writes"]], _dims(d["grid"], "grid"),
                                  _dims(d["block"], "block"), int(d.get("shared_bytes", 0)),
                                  scalars, str(d.get("what", ""))))
            elif kind == "library":
                if not isinstance(d["params"], dict):
                    raise ValueError("library call params must be an object")
                out.append(LibraryCall(str(d["library"]), str(d["fn"]), [_ref(r) for r in d["refs"]],
                                       [bool(w) for w in d["writes"]], d["params"],
                                       str(d.get("what", ""))))
            elif kind == "host_call":
                types = d["types"]
                if not (isinstance(types, list) and all(isinstance(t, dict) for t in types)
                        and len(types) == len(d["refs"])):
                    raise ValueError("a host call needs one type description per buffer")
                out.append(HostCall(int(d["site"]), int(d["callback_id"]),
                                    [_ref(r) for r in d["refs"]], [bool(w) for w in d["writes"]],
                                    [dict(t) for t in types], str(d.get("what", ""))))
            elif kind == "copy":
                out.append(Copy(_ref(d["dst"]), _ref(d["src"]), int(d["nbytes"])))
            elif kind == "while":
                trips = d.get("trip_count")
                out.append(While(steps_from_json(d["cond"]), _ref(d["cond_ref"]),
                                 steps_from_json(d["body"]), None if trips is None else int(trips)))
            elif kind == "switch":
                out.append(Switch(_ref(d["selector"]), bool(d["is_pred"]),
                                  [steps_from_json(b) for b in d["branches"]]))
            else:
                raise ValueError(f"unknown step kind {kind!r}")
        except (KeyError, TypeError) as e:
            raise ValueError(f"malformed {kind} step: {e}") from None
    return out
