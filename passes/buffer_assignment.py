"""Buffer assignment: where every top-level value of ``main`` lives while the schedule runs.

The result is a ``BufferAssignment`` (an analysis with a text form; it changes no IR). Each
value of ``main``'s top level gets a ``Slice(kind, index, offset, size)``:

- ``param``: the caller's argument buffer ``index`` (parameters, bitcasts of them, and outputs
  written into a donated argument);
- ``output``: the result buffer ``index``, which the runtime allocates before the run. The
  value returned as result ``i`` lives there, and so may temporaries that die before it is
  written (at ``offset`` inside it);
- ``temp``: ``offset`` into the one arena of ``arena_size`` bytes (aligned to ``alignment``);
- ``constant``: entry ``index`` of the constants table (``constants``).

How values come to share storage:

- a bitcast (``layout.is_bitcast``: free reshapes and transposes) shares its operand's slice,
  and so does each result of an ``optimization_barrier`` (it orders and fences, it moves
  nothing: a cumsum of 2^22 had copied each of its scan's 44 levels);
- in place: a kernel whose ``fusion_kinds.inplace_pairs`` allow it writes its result over an
  operand whose last reader it is (same size and layout): an elementwise update, a softmax
  over its input, a dot epilogue over its residual. In a fusion with several outputs, not over
  an operand that another output still reads, unless one loop computes both outputs' elements
  before storing them (``usable_inplace_pairs``);
- donation (``donate_argnums``): an output is written into a donated argument of the same size
  when the argument is no longer read by then (or in place, by its last reader). A donation
  that cannot be honored warns (``DonationWarning``) and says why;
- everything else is packed, biggest first, best fit: into output buffers and donated arguments
  while they are free, then into the arena at the smallest gap among buffers live at the same
  time.

With ``products_in_outputs=False`` (target cuda), a value a library product writes (a
``dot_general``, or an output fusion around one: cuBLASLt's result) is neither merged in place
into an output nor packed into an output's or a donated argument's buffer: those addresses
change from call to call, and a cuBLASLt node of a CUDA graph must be captured again for a new
address where a kernel node is only patched (an unrolled RNN cell's last product had become a
direct call each call).

Outputs whose value is a parameter, a constant, or a value already returned elsewhere are
``output_copies``: the runtime copies them into their result buffer after the run.
``check()`` verifies independently that no two values live at the same time overlap in memory
unless a bitcast or a permitted in-place update makes them one; the pipeline runs it on every
assignment it makes.
"""
from __future__ import annotations

import bisect
import heapq
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.printer import value_names
from hlo.ir.targets import info

from .base import Pass, register_pass
from .fusion_kinds import inplace_pairs
from .layout import is_bitcast
from .options import PassConfig
from .util import Labels, inputs_of, nbytes, value_label

ALIGNMENT = 64


from hlo.ir.errors import DonationWarning


class BufferAssignmentError(Exception):
    """``BufferAssignment.check()`` found values that overlap in memory while both live."""


@dataclass(frozen=True)
class Slice:
    kind: str    # "param", "output", "temp", "constant"
    index: int   # parameter number, output number, 0 for the arena, constants-table entry
    offset: int  # bytes into that allocation
    size: int    # bytes

    def __str__(self) -> str:
        if self.kind == "temp":
            return f"temp[{self.offset}:{self.offset + self.size}]"
        return f"{self.kind}{self.index}[{self.offset}:{self.offset + self.size}]"


@dataclass
class Buffer:
    """Values stored in one place, and when that place is in use (schedule steps; parameters
    start at -1, returned values end at len(schedule))."""
    id: int
    values: List[Value]
    size: int
    start: int
    end: int
    kind: str = "temp"
    index: int = 0
    slice: Optional[Slice] = None
    note: str = ""


def _align(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


class BufferAssignment:
    """The buffer plan of one optimized ``main`` (see the module docstring)."""

    alignment = ALIGNMENT

    def __init__(self, region: Region, schedule: Sequence[Operation], donate_argnums=(),
                 warn: bool = True, products_in_outputs: bool = True):
        self.region = region
        self.products_in_outputs = products_in_outputs
        self.schedule = list(schedule)
        self.labels = Labels()
        self.buffers: List[Buffer] = []
        self.slices: Dict[Value, Slice] = {}
        self.constants: List[np.ndarray] = []
        self.output_slices: List[Slice] = []
        self.output_copies: List[Tuple[int, Slice]] = []
        self.aliases: Dict[int, int] = {}          # output number -> donated parameter number
        self.donation_notes: List[str] = []
        self.inplace: List[Tuple[Operation, Value, Value]] = []
        self.arena_size = 0
        self._build(list(donate_argnums), warn)

    # ---------------------------------------------------------------------------------------
    def _build(self, donate: List[int], warn: bool) -> None:
        region = self.region
        n = len(self.schedule)
        nparams = len(region.args)
        for k in donate:
            if not 0 <= k < nparams:
                raise ValueError(f"donate_argnums: argument {k} does not exist (main takes "
                                 f"{nparams} argument(s))")
        donate_set = set(donate)
        self.donate_set = frozenset(donate_set)
        step = {id(op): t for t, op in enumerate(self.schedule)}
        if len(step) != len(region.ops) or any(id(op) not in step for op in region.ops):
            raise ValueError("the schedule must list every top-level op of main exactly once")

        # Values, definitions and last uses.
        self.def_step: Dict[Value, int] = {}
        self.last_use: Dict[Value, int] = {}
        for a in region.args:
            self.def_step[a] = -1
            self.last_use[a] = -1
        for op in self.schedule:
            t = step[id(op)]
            for v in inputs_of(op):
                if v in self.def_step:
                    self.last_use[v] = max(self.last_use.get(v, -1), t)
            for r in op.results:
                self.def_step[r] = t
                self.last_use.setdefault(r, t)
        for v in region.outputs:
            self.last_use[v] = n

        # Storage classes: bitcasts join their operand.
        owner: Dict[Value, Buffer] = {}

        def new_buffer(vals, kind="temp", index=0):
            b = Buffer(len(self.buffers), list(vals), max(nbytes(v.type) for v in vals), 0, 0, kind, index)
            self.buffers.append(b)
            for v in vals:
                owner[v] = b
            return b

        for i, a in enumerate(region.args):
            new_buffer([a], "param", i)
        for op in self.schedule:
            if is_bitcast(op) or op.name == "optimization_barrier":
                for a, r in zip(op.operands, op.results):
                    b = owner[a]
                    b.values.append(r)
                    owner[r] = b
            elif op.name == "constant":
                b = new_buffer(op.results, "constant", len(self.constants))
                self.constants.append(op.attrs["value"])
            else:
                for r in op.results:
                    new_buffer([r])
        self.owner = owner
        self._update_ranges()

        # Outputs: the first output of each temp buffer is stored in that output's buffer.
        outs = region.outputs
        out_buf: Dict[int, Buffer] = {}
        for i, v in enumerate(outs):
            b = owner[v]
            if b.kind == "temp":
                b.kind, b.index = "output", i
                out_buf[i] = b
        self._merge_inplace(donate_set, step)
        self._donate(donate, donate_set, warn)
        # Outputs that are parameters (not donated into), constants or repeated values: copies.
        for i, v in enumerate(outs):
            b = owner[v]
            if not (b.kind == "output" and b.index == i) and self.aliases.get(i) is None:
                self.output_copies.append((i, None))
        self._pack(donate_set)
        for b in self.buffers:
            for v in b.values:
                self.slices[v] = b.slice
        self.output_copies = [(i, self.slices[outs[i]]) for i, _ in self.output_copies]
        self.output_slices = []
        for i, v in enumerate(outs):
            if i in self.aliases:
                self.output_slices.append(Slice("param", self.aliases[i], 0, nbytes(v.type)))
            else:
                self.output_slices.append(Slice("output", i, 0, nbytes(v.type)))

    def _update_ranges(self) -> None:
        for b in self.buffers:
            b.start = min(self.def_step[v] for v in b.values)
            b.end = max(self.last_use[v] for v in b.values)

    def _merge(self, keep: Buffer, gone: Buffer) -> None:
        keep.values.extend(gone.values)
        for v in gone.values:
            self.owner[v] = keep
        keep.start = min(keep.start, gone.start)
        keep.end = max(keep.end, gone.end)
        keep.size = max(keep.size, gone.size)
        # ``buffers`` stays in id order (made in that order, only ever removed from): find
        # ``gone`` by bisection, not by a scan that compares every buffer field by field.
        i = bisect.bisect_left(self.buffers, gone.id, key=lambda b: b.id)
        assert self.buffers[i] is gone
        del self.buffers[i]

    def _merge_inplace(self, donate_set: Set[int], step) -> None:
        for op in self.schedule:
            t = step[id(op)]
            taken: Set[int] = set()
            merged: Set[Value] = set()
            for i, j in usable_inplace_pairs(op):
                if i in taken:
                    continue
                a, r = op.operands[i], op.results[j]
                if a in merged:
                    continue  # one value in several operands (a loop's two slots): one result gets it
                ba, br = self.owner[a], self.owner[r]
                if ba is br or ba.end != t or br.start != t or ba.size != br.size:
                    continue
                if br.values[0] is not r:
                    continue
                if br.kind == "output" and self._library_product(ba):
                    continue
                if ba.kind == "temp" and br.kind in ("temp", "output"):
                    self._merge(br, ba)
                elif ba.kind == "param" and ba.index in donate_set and br.kind == "output" \
                        and ba.index not in self.aliases.values():
                    self.aliases[br.index] = ba.index
                    br.note = f"donated argument {ba.index}"
                    self._merge(ba, br)
                else:
                    continue
                taken.add(i)
                merged.add(a)
                self.inplace.append((op, a, r))

    def _donate(self, donate: List[int], donate_set: Set[int], warn: bool) -> None:
        outs = self.region.outputs
        for k in donate:
            if k in self.aliases.values():
                self.donation_notes.append(f"argument {k} is updated in place into output "
                                           f"{[i for i, p in self.aliases.items() if p == k][0]}")
                continue
            pb = self.owner[self.region.args[k]]
            size = nbytes(self.region.args[k].type)
            same = [i for i, v in enumerate(outs) if self.owner[v].kind == "output"
                    and self.owner[v].index == i and nbytes(v.type) == size and i not in self.aliases]
            reason = None
            if self.region.args[k] in outs or any(v in outs for v in pb.values):
                reason = "it is itself returned"
            elif not [i for i, v in enumerate(outs) if nbytes(v.type) == size]:
                reason = f"no output has its size ({size} bytes)"
            elif not same:
                reason = f"every output of its size ({size} bytes) is already written elsewhere"
            else:
                ok = [i for i in same if self.owner[outs[i]].start > pb.end]
                if not ok:
                    i = same[0]
                    reader = self.schedule[pb.end] if 0 <= pb.end < len(self.schedule) else None
                    who = f"'{reader.name}'" if reader is not None else "a later op"
                    reason = (f"it is still read (by {who} at step {pb.end}) after output {i} of its "
                              f"size is written (at step {self.owner[outs[i]].start})")
                else:
                    i = ok[0]
                    ob = self.owner[outs[i]]
                    self.aliases[i] = k
                    ob.note = f"donated argument {k}"
                    self._merge(pb, ob)
                    self.donation_notes.append(f"argument {k} is reused for output {i}")
                    continue
            msg = f"donated argument {k} ({self.region.args[k].type}) is not reused: {reason}"
            self.donation_notes.append(msg)
            if warn:
                warnings.warn(msg, DonationWarning, stacklevel=4)

    # ---------------------------------------------------------------------------------------
    def _pack(self, donate_set: Set[int]) -> None:
        # Bins: output buffers and donated arguments, each with its capacity and occupants.
        bins: List[Tuple[Buffer, List[Tuple[int, int, int, int]]]] = []
        for b in self.buffers:
            if b.kind == "output":
                b.slice = Slice("output", b.index, 0, b.size)
                bins.append((b, [(0, b.size, b.start, b.end)]))
            elif b.kind == "param":
                b.slice = Slice("param", b.index, 0, b.size)
                if b.index in donate_set:
                    bins.append((b, [(0, b.size, b.start, b.end)]))
            elif b.kind == "constant":
                b.slice = Slice("constant", b.index, 0, b.size)
        temps = [b for b in self.buffers if b.kind == "temp"]
        temps.sort(key=lambda b: (-b.size, b.start, b.id))
        arena = _Occupants()
        for b in temps:
            placed = False
            best = None
            for owner, occ in ([] if self._library_product(b) else bins):
                off = _fit(occ, b, owner.size, best_fit=False)
                if off is not None and (best is None or owner.size < best[0].size):
                    best = (owner, occ, off)
            if best is not None:
                owner, occ, off = best
                occ.append((off, b.size, b.start, b.end))
                b.kind, b.index = owner.kind, owner.index
                b.slice = Slice(owner.kind, owner.index, off, b.size)
                b.note = f"inside {owner.kind} {owner.index} before it is used"
                placed = True
            if not placed:
                off = _fit(arena.during(b.start, b.end), b, None, best_fit=True)
                arena.add((off, b.size, b.start, b.end))
                b.slice = Slice("temp", 0, off, b.size)
        self.arena_size = _align(max((o + s for o, s, _, _ in arena.all), default=0))

    def _library_product(self, b: Buffer) -> bool:
        """Whether ``b`` holds a value a library product writes and must stay out of the
        call's argument and result buffers (``products_in_outputs`` off)."""
        if self.products_in_outputs:
            return False
        for v in b.values:
            op = v.op
            if op is not None and (op.name == "dot_general" or (
                    op.name == "fusion" and any(o.name == "dot_general" for o in op.regions[0].ops))):
                return True
        return False

    # ---------------------------------------------------------------------------------------
    def slice_for(self, value: Value) -> Slice:
        try:
            return self.slices[value]
        except KeyError:
            raise KeyError(f"{value!r} has no slice: only top-level values of main have buffers "
                           "(values inside fused regions live in registers)") from None

    @property
    def output_size(self) -> int:
        return sum(nbytes(v.type) for v in self.region.outputs)

    @property
    def alias_size(self) -> int:
        return sum(nbytes(self.region.outputs[i].type) for i in self.aliases)

    def text(self) -> str:
        """The plan: each buffer with its slice, size, live range and values."""
        names = value_names(self.region)

        def label(v):
            return value_label(v, names)

        n = len(self.schedule)
        lines = [f"buffer assignment: arena {self.arena_size} bytes (alignment {self.alignment}), "
                 f"{len(self.schedule)} steps"]
        order = sorted(self.buffers, key=lambda b: ({"param": 0, "output": 1, "temp": 2, "constant": 3}[b.slice.kind],
                                                   b.slice.index, b.slice.offset, b.start))
        for b in order:
            rng = f"[{'entry' if b.start < 0 else b.start}, {'exit' if b.end >= n else b.end}]"
            vals = ", ".join(label(v) for v in b.values)
            note = f"  ({b.note})" if b.note else ""
            lines.append(f"  buffer {b.id}: {b.slice}  size {b.size}  live {rng}  values {vals}{note}")
        for op, a, r in self.inplace:
            lines.append(f"  in place: {label(r)} writes over {label(a)}")
        for i, s in self.output_copies:
            lines.append(f"  output {i} is copied from {s}")
        for note in self.donation_notes:
            lines.append(f"  donation: {note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    # ---------------------------------------------------------------------------------------
    def check(self) -> None:
        """Raise BufferAssignmentError if two values that are live at the same time overlap in
        memory, other than a bitcast and its operand or a permitted in-place update; or if a
        slice leaves its allocation; or a non-donated argument is written."""
        region = self.region
        root: Dict[Value, Value] = {a: a for a in region.args}
        for op in self.schedule:
            if op.name == "optimization_barrier":
                for a, r in zip(op.operands, op.results):
                    root[r] = root.get(a, a)
                continue
            for r in op.results:
                root[r] = root.get(op.operands[0], op.operands[0]) if is_bitcast(op) else r
        # Live range of each storage root, from its own definition to its aliases' last use.
        live: Dict[Value, List[int]] = {}
        for v, rt in root.items():
            d = self.def_step[rt]
            e = self.last_use.get(v, d)
            if rt in live:
                live[rt][1] = max(live[rt][1], e)
            else:
                live[rt] = [d, e]
        for rt in live:
            live[rt][1] = max(live[rt][1], self.last_use.get(rt, live[rt][0]))
        sizes = {rt: nbytes(rt.type) for rt in live}
        caps = {("output", i): nbytes(v.type) for i, v in enumerate(region.outputs)}
        caps.update({("param", i): nbytes(a.type) for i, a in enumerate(region.args)})
        for rt in live:
            s = self.slice_for(rt)
            if s.size < sizes[rt]:
                raise BufferAssignmentError(f"{rt!r} needs {sizes[rt]} bytes but its slice {s} has {s.size}")
            cap = self.arena_size if s.kind == "temp" else caps.get((s.kind, s.index))
            if cap is not None and s.offset + sizes[rt] > cap:
                raise BufferAssignmentError(f"{rt!r} at {s} runs past the end of its allocation ({cap} bytes)")
            if s.kind == "temp" and s.offset % self.alignment:
                raise BufferAssignmentError(f"{rt!r} at {s} is not aligned to {self.alignment}")
            if s.kind == "param" and not rt.is_arg and s.index not in set(self.aliases.values()) \
                    and s.index not in self._donated():
                raise BufferAssignmentError(f"{rt!r} is written into argument {s.index}, which was not donated")
        allowed = set()
        for op, a, r in self.inplace:
            if any(op.operands[i] is a and op.results[j] is r for i, j in usable_inplace_pairs(op)):
                allowed.add((root[a], root[r]))
        roots = list(live)
        by_space: Dict[Tuple[str, int], List[Value]] = {}
        for rt in roots:
            s = self.slices[rt]
            if s.kind != "constant" and sizes[rt] > 0:
                by_space.setdefault((s.kind, s.index), []).append(rt)
        for vals in by_space.values():
            clash = _clash(vals, self.slices, sizes, live, allowed)
            if clash is not None:
                u, w = clash
                raise BufferAssignmentError(
                    f"values {u!r} (live {live[u]}) and {w!r} (live {live[w]}) overlap at "
                    f"{self.slices[u]} / {self.slices[w]}")
        for i, v in enumerate(region.outputs):
            s = self.slices[v]
            if i in self.aliases:
                if s != Slice("param", self.aliases[i], 0, s.size) and not (s.kind == "param" and s.index == self.aliases[i]):
                    raise BufferAssignmentError(f"output {i} is said to alias argument {self.aliases[i]} but lives at {s}")
            elif not (s.kind == "output" and s.index == i and s.offset == 0) and \
                    i not in {j for j, _ in self.output_copies}:
                raise BufferAssignmentError(f"output {i} lives at {s}, neither its output buffer nor a listed copy")

    def _donated(self) -> Set[int]:
        return set(self.donate_set)


# Ops inside a fusion that the CPU backend computes into their own storage before the fusion's
# elementwise outputs are written (whole, or per row before the row's stores): reading an
# operand through them is finished before an elementwise output overwrites it.
_MATERIALIZED_FIRST = op_table.with_trait(op_table.INNER_LOOP)
# Ops inside a fusion that run as kernels of their own (lower.py's HEAVY): an output they
# compute is written before, not together with, the elementwise outputs.
_OWN_KERNEL = _MATERIALIZED_FIRST | op_table.with_trait(
    op_table.WHOLE_ARRAY, op_table.CONTROL_FLOW, op_table.BARRIER, op_table.KERNEL)


def usable_inplace_pairs(op: Operation) -> List[Tuple[int, int]]:
    """``fusion_kinds.inplace_pairs(op)`` less the pairs that would clobber another output's
    input: in a fusion with several outputs, output ``j`` written over operand ``i`` is safe
    only if every other output that reads operand ``i`` element by element is computed in the
    same loop iteration, before the stores (outputs of one shape and layout of a loop-like
    fusion: one CPU kernel computes all of them, then stores). A row kernel (``input`` fusion)
    writes its outputs one after another, so there any such other reader rules the pair out."""
    readers: Dict[int, List[int]] = {}  # operand -> the outputs that read it element by element
    return [(i, j) for i, j in inplace_pairs(op) if not _clobbers_other_output(op, i, j, readers)]


def _clobbers_other_output(op: Operation, i: int, j: int, readers: Dict[int, List[int]] = None) -> bool:
    if op.name != "fusion" or len(op.results) < 2:
        return False
    region = op.regions[0]
    arg, target = region.args[i], region.outputs[j]
    kind = op.attrs.get("kind", "loop")
    if kind == "multi":
        # Parts run one after another; inplace_pairs lets only the operand's one reader write
        # over it, so the question is that part's own.
        for part in region.ops:
            if arg in part.operands and target in part.results:
                return _clobbers_other_output(part, part.operands.index(arg), part.results.index(target))
        return False
    tj = op.results[j].type
    elemental = lambda v: v.op is not None and v.op.name not in _OWN_KERNEL and v.op.name != "constant"
    if readers is None:
        readers = {}
    if i not in readers:  # one pass over the region per operand, not one per pair and output
        readers[i] = _elementwise_readers(region, arg)
    for k in readers[i]:
        out = region.outputs[k]
        if k == j or out is target:
            continue
        tk = op.results[k].type
        same_loop = (kind != "input" and elemental(out) and elemental(target)
                     and tuple(tk.shape) == tuple(tj.shape)
                     and tuple(tk.minor_to_major) == tuple(tj.minor_to_major)
                     and tuple(out.type.minor_to_major) == tuple(target.type.minor_to_major))
        if not same_loop:
            return True
    return False


def _elementwise_readers(region: Region, arg: Value) -> List[int]:
    """The outputs of ``region`` whose computation reads ``arg`` other than through an op
    materialized first, in one forward pass over its ops."""
    reach: Set[Value] = {arg}
    for op in region.ops:
        if op.name in _MATERIALIZED_FIRST:
            continue
        if any(v in reach for v in inputs_of(op)):
            reach.update(op.results)
    return [k for k, out in enumerate(region.outputs) if out in reach]


def _clash(vals: List[Value], slices: Dict[Value, Slice], sizes: Dict[Value, int],
           live: Dict[Value, List[int]], allowed: Set[Tuple[Value, Value]]):
    """Two values of one allocation that overlap in memory while both are live (steps, both
    ends included), other than an in-place handover (an ``allowed`` pair at the same offset,
    the first's last step the second's first); None when there are none.

    A sweep over the steps: the values live at a step hold disjoint ranges (each is checked
    against the others when it starts), kept sorted by offset, so a value that starts is
    checked against its two neighbours by offset only (all that share its offset, for a
    handover), not against every value of the allocation."""
    keys: List[int] = []  # the offsets of the live values, sorted
    at: Dict[int, List[Value]] = {}  # offset -> the live values there
    ending: List[Tuple[int, int, Value]] = []  # heap of (last step, order, value)
    for seq, w in enumerate(sorted(vals, key=lambda v: live[v][0])):
        start, a = live[w][0], slices[w].offset
        while ending and ending[0][0] < start:
            u = heapq.heappop(ending)[2]
            off = slices[u].offset
            here = at[off]
            here.remove(u)
            if not here:
                del at[off]
                del keys[bisect.bisect_left(keys, off)]
        i = bisect.bisect_right(keys, a)
        near = (at[keys[i - 1]] if i else []) + (at[keys[i]] if i < len(keys) else [])
        for u in near:
            su = slices[u].offset
            if su + sizes[u] <= a or a + sizes[w] <= su:
                continue
            lu, lw = live[u], live[w]
            if su == a and ((lu[1] == lw[0] and (u, w) in allowed) or
                            (lw[1] == lu[0] and (w, u) in allowed)):
                continue
            return u, w
        if a not in at:
            bisect.insort(keys, a)
            at[a] = []
        at[a].append(w)
        heapq.heappush(ending, (live[w][1], seq, w))
    return None


class _Occupants:
    """The arena's occupants (offset, size, start, end), indexed by the spans of steps they
    live in, so that placing a buffer looks at those live around its own steps rather than at
    every buffer placed so far (``_fit`` filters them exactly)."""

    SPAN = 32  # steps per index entry

    def __init__(self):
        self.all: List[Tuple[int, int, int, int]] = []
        self.spans: Dict[int, List[Tuple[int, int, int, int]]] = {}

    def add(self, occ: Tuple[int, int, int, int]) -> None:
        self.all.append(occ)
        for k in range(occ[2] // self.SPAN, occ[3] // self.SPAN + 1):
            self.spans.setdefault(k, []).append(occ)

    def during(self, start: int, end: int) -> List[Tuple[int, int, int, int]]:
        """Every occupant live at some step of [start, end] (some more than once, some not)."""
        out: List[Tuple[int, int, int, int]] = []
        for k in range(start // self.SPAN, end // self.SPAN + 1):
            out.extend(self.spans.get(k, ()))
        return out


def _fit(occ, b: Buffer, capacity: Optional[int], best_fit: bool) -> Optional[int]:
    """An aligned offset for ``b`` among occupants (offset, size, start, end) live at the same
    time; None if it does not fit within ``capacity``."""
    busy = sorted((o, o + s) for o, s, st, en in occ if not (en < b.start or b.end < st) and s > 0)
    gaps = []
    cur = 0
    for lo, hi in busy:
        if lo - cur >= b.size:
            gaps.append((lo - cur, cur))
        cur = max(cur, _align(hi))
    if capacity is not None:
        if capacity - cur >= b.size:
            gaps.append((capacity - cur, cur))
        if not gaps:
            return None
    else:
        gaps.append((float("inf"), cur))
    if best_fit:
        return min(gaps)[1]
    return min(gaps, key=lambda g: g[1])[1]


@register_pass("buffer-assignment", "assign every top-level value a slice (analysis; IR unchanged)")
class BufferAssignmentPass(Pass):
    name = "buffer-assignment"

    def __init__(self, config: PassConfig = None):
        self.config = config or PassConfig()
        self.result: Optional[BufferAssignment] = None

    def run(self, module: Module) -> bool:
        main = module.main
        self.result = BufferAssignment(main.body, list(main.ops), self.config.options.donate_argnums,
                                       products_in_outputs=info(self.config.target).products_in_outputs)
        self.result.check()
        return False

    def report(self) -> str:
        return self.result.text() if self.result is not None else ""
