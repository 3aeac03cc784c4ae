"""Lowering a module to a step tree (``hlo.runtime.steps``): which kernel computes which buffer.
Shared by every target: the kernels themselves come from the target's ``KernelEmitter``
(``kernel_emitter.py``; the CPU's is ``cpu/codegen.py``).

Top level: every op of ``main`` (in schedule order) is one kernel or a few (a fusion whose
region holds reductions or a matrix product may need more than one), writing the buffers the
buffer plan assigned. Inside a fusion region, cheap ops (elementwise, broadcasts, reshapes,
slices, gathers...) are computed on demand by the elemental emitter inside their consumers'
loops; *heavy* ops (reductions, matrix products, convolutions, sorts, scatters, control flow)
are materialized:

* reductions over trailing dimensions whose results are only used per row run in a single
  row-by-row kernel with the rest of the region (``index_trace.row_fusable``);
* an output fusion's dot_general writes straight into the output buffer when the epilogue
  reads it only at the output's own index, and the epilogue then runs in place;
* otherwise a heavy op gets a scratch buffer (a slice of the arena past the buffer plan's
  part) and its own kernel, before the region's outputs are computed.

Nested regions of while/if/case/call become nested step lists with scratch buffers. A
``host_callback`` becomes a ``HostCall`` step (call site ``len(host_sites)``; ``host_sites``
describes each site for the runtime), on targets whose emitter does not decline it; so does a
collective (``collective_steps.py``: its site records the op for the runtime's devices).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Set

from hlo.ir import ops as op_table
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.types import TensorType
from hlo.passes.buffer_assignment import usable_inplace_pairs
from hlo.passes.trip_count import known_trip_count
from hlo.passes.util import free_values, inputs_of
from hlo.runtime.steps import BufRef, Copy, HostCall, Switch, While, type_desc

from . import index_trace
from .collective_steps import lower_collective
from .kernel_emitter import KernelEmitter, Root, is_column_reduce, physical_order
from .scalar_ops import UnsupportedOp

# Ops a fusion materializes (a kernel or steps of their own, before its elementwise outputs);
# the others are computed per element by the elemental emitter inside their readers' loops.
HEAVY = op_table.with_trait(op_table.INNER_LOOP, op_table.WHOLE_ARRAY, op_table.CONTROL_FLOW,
                            op_table.BARRIER, op_table.KERNEL, op_table.SIDE_EFFECT,
                            op_table.COLLECTIVE)
BITCAST_OPS = op_table.with_trait(op_table.MAY_BITCAST)
SCRATCH_ALIGN = 64


def _align(n: int, a: int = SCRATCH_ALIGN) -> int:
    return (n + a - 1) // a * a


class Lowering:
    def __init__(self, cg: KernelEmitter, module: Module, plan):
        self.cg = cg
        self.module = module
        self.plan = plan
        self.steps: list = []
        self.scratch_base = _align(int(getattr(plan, "arena_size", 0) or 0))
        self.scratch_top = self.scratch_base
        self.host_sites: List[dict] = []  # per HostCall site: callback, buffer types, line
        # id(step) -> the op whose lowering appended it (the outermost: a fusion, not the dot
        # inside it); steps no op made (copies of the results, of a region's outputs) are absent
        self.origin: Dict[int, Operation] = {}
        # output -> the donated input it is written into and returned as (``lower_main``)
        self.aliases: Dict[int, int] = {}
        self._written_inputs: Optional[Set[int]] = None
        # dot operands a row prologue computes, left for the product (``defer_row_operand``)
        self.row_operands: Dict[Value, object] = {}

    # -- buffers --------------------------------------------------------------------------

    @property
    def arena_size(self) -> int:
        return self.scratch_top

    def scratch(self, nbytes: int) -> BufRef:
        off = self.scratch_top
        self.scratch_top = _align(off + max(int(nbytes), 1))
        return BufRef("arena", 0, off, int(nbytes))

    def copy_step(self, dst: BufRef, src: BufRef, nbytes: int) -> Copy:
        return Copy(dst, src, int(nbytes))

    def plan_ref(self, v: Value) -> BufRef:
        try:
            s = self.plan.slice_for(v)
        except (KeyError, LookupError):
            return self.scratch(v.type.nbytes)
        kind = s.kind
        if kind == "param":
            return BufRef("input", int(s.index), int(s.offset), int(s.size))
        if kind == "output":
            return BufRef("output", int(s.index), int(s.offset), int(s.size))
        if kind == "temp":
            return BufRef("arena", 0, int(s.offset), int(s.size))
        return self.scratch(v.type.nbytes)

    def written_inputs(self) -> Set[int]:
        """The inputs the buffer plan writes other values into (donated arguments)."""
        if self._written_inputs is None:
            args = set(self.module.main.args)
            slices = getattr(self.plan, "slices", None) or {}
            self._written_inputs = {int(s.index) for v, s in slices.items()
                                    if s.kind == "param" and v not in args}
            self._written_inputs.update(int(k) for k in (getattr(self.plan, "aliases", None) or {}).values())
        return self._written_inputs

    # -- entry ----------------------------------------------------------------------------

    def lower_main(self) -> list:
        main = self.module.main
        env: Dict[Value, BufRef] = {}
        for i, a in enumerate(main.args):
            env[a] = BufRef("input", i, 0, a.type.nbytes)
        self.steps = []
        self.lower_ops(main.body.ops, env, self.plan_ref)
        plan_aliases = getattr(self.plan, "aliases", None) or {}
        self.aliases = {}
        for i, v in enumerate(main.body.outputs):
            k = plan_aliases.get(i)
            if k is not None and env[v] == BufRef("input", k, 0, v.type.nbytes) \
                    and k not in self.aliases.values():
                # written into donated argument k: the result IS that buffer (no copy); the
                # runtime hands the argument's memory back as output i (manifest ``aliases``)
                self.aliases[i] = k
                continue
            dst = BufRef("output", i, 0, v.type.nbytes)
            if env[v] != dst:
                self.steps.append(self.copy_step(dst, env[v], v.type.nbytes))
        return self.steps

    # -- sequences of ops ----------------------------------------------------------------

    def lower_ops(self, ops: Sequence[Operation], env: Dict[Value, BufRef],
                  alloc: Callable[[Value], BufRef]) -> None:
        for op in ops:
            if op.name == "constant":
                env[op.results[0]] = self.cg.const_ref(op.attrs["value"])
                continue
            dests = [alloc(r) for r in op.results]
            self.lower_op(op, dests, env)
            for r, d in zip(op.results, dests):
                env[r] = d

    def lower_region(self, region: Region, env_outer: Dict[Value, BufRef], arg_refs: Sequence[BufRef],
                     dests: Sequence[Optional[BufRef]]) -> list:
        """Steps computing ``region`` with its args in ``arg_refs``; output i ends up in dests[i]
        (None: leave it where it is)."""
        saved = self.steps
        self.steps = []
        env = dict(env_outer)
        env.update(zip(region.args, arg_refs))
        preferred: Dict[Value, BufRef] = {}
        for o, d in zip(region.outputs, dests):
            if d is not None and o not in env and o not in preferred and o.op.name != "constant":
                preferred[o] = d
        self.lower_ops(region.ops, env, lambda v: preferred.get(v) or self.scratch(v.type.nbytes))
        for o, d in zip(region.outputs, dests):
            if d is not None and env[o] != d:
                self.steps.append(self.copy_step(d, env[o], o.type.nbytes))
        steps = self.steps
        self.steps = saved
        return steps

    # -- one op ---------------------------------------------------------------------------

    def lower_op(self, op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        n = len(self.steps)
        try:
            self._lower_op(op, dests, env)
        except UnsupportedOp as e:
            if " (in '" in str(e):
                raise
            where = f" at {op.loc}" if op.loc is not None else ""
            raise UnsupportedOp(f"{e} (in '{op.name}'{where})") from None
        for s in self.steps[n:]:
            self.origin[id(s)] = op

    def _lower_op(self, op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        name = op.name
        cg = self.cg
        where = f" at {op.loc}" if op.loc is not None else ""
        what = f"{name}{where}"
        if name in BITCAST_OPS and len(op.operands) == 1 and dests[0] == env.get(op.operands[0]):
            return  # the buffer plan made this a bitcast: same bytes, nothing to compute
        if name in cg.DECLINED:
            raise UnsupportedOp(cg.DECLINED[name])
        if name == "fusion":
            return self.lower_fusion(op, dests, env)
        own = getattr(self, "_lower_" + name, None) if name in HEAVY else None
        if own is not None:
            return own(op, dests, env)
        if name == "reduce" and op.results[0].type.size and cg.big_reduce(self, op, dests, env, what):
            return
        if name == "reduce" and is_column_reduce(op):
            self.steps.append(cg.column_reduce(op, dests, env, what))
            return
        if op.results[0].type.size == 0:
            return
        if name == "dynamic_update_slice" and dests[0] == env.get(op.operands[0]):
            # written over its operand (the plan's in-place pair, a loop's state): the target may
            # store only the update
            step = cg.update_in_place(op, dests[0], env, _kname(name), what)
            if step is not None:
                self.steps.append(step)
                return
        roots = [Root(r, d, r.type) for r, d in zip(op.results, dests)]
        self.steps.append(cg.loop_kernel(roots, env, _kname(name), what))

    # -- fusions -------------------------------------------------------------------------

    def lower_fusion(self, op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        """Values inside a region carry no layout; the fusion's operands and results do. While
        the fusion's kernels are emitted, each parameter takes its operand's type and each
        computed root its result's type (layouts included), so every kernel (dot, reduction,
        row or loop kernel) reads and writes top-level values in their stated layouts."""
        region = op.regions[0]
        relaid: Dict[Value, TensorType] = {}
        for a, v in zip(region.args, op.operands):
            if tuple(a.type.minor_to_major) != tuple(v.type.minor_to_major):
                relaid[a] = v.type
        for o, r in zip(region.outputs, op.results):
            if tuple(relaid.get(o, o.type).minor_to_major) == tuple(r.type.minor_to_major):
                continue
            if o.op is None or o.op.name == "constant":
                # returned as bytes (a copy): it would need a transposing kernel instead
                raise UnsupportedOp(f"a fusion returns its parameter or a constant {o.type} in "
                                    f"another layout ({r.type}); the LLVM backends do not relayout those")
            if relaid.get(o, r.type) != r.type:
                raise UnsupportedOp(f"a fusion returns one value in two layouts ({relaid[o]}, {r.type})")
            relaid[o] = r.type
        saved = {o: o.type for o in relaid}
        try:
            for o, t in relaid.items():
                o.type = t
            self._lower_fusion(op, dests, env)
        finally:
            for o, t in saved.items():
                o.type = t

    def _lower_fusion(self, op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef]) -> None:
        cg = self.cg
        region = op.regions[0]
        fenv = dict(env)
        fenv.update(zip(region.args, [env[v] for v in op.operands]))
        label = op.attrs.get("name") or f"fusion.{op.attrs.get('kind', 'loop')}"
        where = f" at {op.loc}" if op.loc is not None else ""
        roots: Dict[Value, BufRef] = {}
        late_copies = []
        for o, d in zip(region.outputs, dests):
            if o in fenv or o in roots:
                late_copies.append((d, o))
            elif o.op.name == "constant":
                fenv[o] = cg.const_ref(o.op.attrs["value"])
                late_copies.append((d, o))
            else:
                roots[o] = d
        heavy = [x for x in region.ops if x.name in HEAVY]
        k = index_trace.row_fusable(region, heavy, list(roots)) if heavy else None
        if k is not None and not cg.row_kernel_fits(heavy[0].operands[0].type.shape, k):
            k = None
        if k is not None and roots:
            in_shape = heavy[0].operands[0].type.shape
            self.steps.append(cg.row_kernel(k, [h.results[0] for h in heavy], list(roots.items()),
                                            fenv, in_shape, _kname(label), f"{label}{where} (row-fused)"))
        else:
            stop = set(region.args)
            reads = [env[v] for v in op.operands]
            done_roots = set()
            handled = self._row_prologues(region, heavy, fenv, label)
            for h in heavy:
                if h in handled:
                    continue
                hd = []
                in_place = None
                for r in h.results:
                    if r in roots:
                        hd.append(roots[r])
                    else:
                        in_place = self._in_place_dest(h, r, roots, stop, reads)
                        hd.append(in_place or self.scratch(r.type.nbytes))
                if in_place is not None:
                    # output fusion: the dot writes the root's buffer; its epilogue runs per block
                    (root, _), = roots.items()
                    if cg.dot(self, h, hd[0], fenv, epilogue=root):
                        done_roots.add(root)
                else:
                    self.lower_op(h, hd, fenv)
                for r, d in zip(h.results, hd):
                    fenv.setdefault(r, d)  # (a product may have gone elsewhere: cuda's dot)
            # Elemental roots, grouped by index space.
            groups: Dict[tuple, List[Root]] = {}
            for o, d in roots.items():
                if o in fenv or o in done_roots:
                    continue  # a heavy root, or an epilogue fused into its dot: already written
                key = (o.type.shape, tuple(o.type.minor_to_major))
                groups.setdefault(key, []).append(Root(o, d, o.type))
            for g in groups.values():
                if g[0].dest_type.size == 0:
                    continue
                self.steps.append(cg.loop_kernel(g, fenv, _kname(label), f"{label}{where}"))
        for d, o in late_copies:
            if fenv[o] != d:
                self.steps.append(self.copy_step(d, fenv[o], o.type.nbytes))

    def _row_prologues(self, region: Region, heavy, fenv: Dict[Value, BufRef], label: str) -> set:
        """Dot operands computed by a row-wise normalization inside the fusion (layer norm,
        softmax: the passes' row prologues) are written by one row-by-row kernel each, instead
        of one kernel per reduction plus one for the operand. Returns the reduces handled."""
        handled = set()
        users: Dict[Value, List[Operation]] = {}
        for o in region.ops:
            for v in o.operands:
                users.setdefault(v, []).append(o)
        outs = set(region.outputs)
        for h in heavy:
            if h.name != "dot_general":
                continue
            for v in h.operands:
                if v in fenv or v.op is None:
                    continue
                cone, stack = set(), [v]
                while stack:
                    x = stack.pop()
                    if x in fenv or x.op is None or x.op in cone:
                        continue
                    cone.add(x.op)
                    stack.extend(x.op.operands)
                reduces = [o for o in region.ops if o in cone and o.name in HEAVY]
                if not reduces or any(o.name != "reduce" or o in handled for o in reduces):
                    continue
                if any(u not in cone for o in reduces for r in o.results for u in users.get(r, ())) \
                        or any(r in outs for o in reduces for r in o.results):
                    continue
                k = index_trace.row_fusable(region, reduces, [v], stop=set(fenv))
                if k is None:
                    continue
                if sum(len(users.get(r, ())) for r in v.op.results) == 1 and v not in outs:
                    deferred = self.cg.defer_row_operand(
                        h, v, k, [o.results[0] for o in reduces], reduces[0].operands[0].type.shape,
                        _kname(label + ".prologue"), f"{label}: row-wise prologue of a dot operand")
                    if deferred is not None:
                        self.row_operands[v] = deferred
                        handled.update(reduces)
                        continue
                ref = self.scratch(v.type.nbytes)
                self.steps.append(self.cg.row_kernel(
                    k, [o.results[0] for o in reduces], [(v, ref)], fenv,
                    reduces[0].operands[0].type.shape, _kname(label + ".prologue"),
                    f"{label}: row-wise prologue of a dot operand"))
                fenv[v] = ref
                handled.update(reduces)
        return handled

    def _in_place_dest(self, h: Operation, r: Value, roots: Dict[Value, BufRef], stop,
                       reads: Sequence[BufRef]) -> Optional[BufRef]:
        """For an output fusion: let the dot write into the only root's buffer when the root reads
        it only at its own index (the epilogue then runs in place), unless that buffer is also
        one of the fusion's inputs (the plan may put the output over a residual operand)."""
        if h.name != "dot_general" or len(roots) != 1:
            return None
        (root, ref), = roots.items()
        if any(ref == x or ref.overlaps(x) for x in reads):
            return None
        if root is r or root.type.dtype != r.type.dtype or root.type.shape != r.type.shape:
            return None
        if physical_order(root.type) != list(range(root.type.rank)):
            return None
        if not index_trace.reads_at_identity(r, root, stop):
            return None
        return ref

    @classmethod
    def own_lowerings(cls, emitter=KernelEmitter) -> frozenset:
        """The ops lowered to steps of their own (a ``_lower_<op>`` method) for a target whose
        kernels come from ``emitter`` (a ``KernelEmitter`` class: the ops it declines are left
        out); any other op is computed by a loop kernel of the elemental emitter."""
        return frozenset(n for n in HEAVY if hasattr(cls, "_lower_" + n)
                         and n not in emitter.declined_ops())

    # -- ops with their own kernels ------------------------------------------------------

    def _lower_dot_general(self, op, dests, env):
        self.cg.dot(self, op, dests[0], env)

    def _lower_sort(self, op, dests, env):
        self.cg.sort(self, op, dests, env)

    def _lower_scatter(self, op, dests, env):
        self.cg.scatter(self, op, dests, env)

    def _lower_host_callback(self, op, dests, env):
        values = list(op.operands) + list(op.results)
        site = len(self.host_sites)
        where = str(op.loc) if op.loc is not None else ""
        types = [type_desc(v.type) for v in values]
        self.host_sites.append({"callback_id": op.attrs["callback_id"], "types": types,
                                "operands": len(op.operands), "where": where})
        self.steps.append(HostCall(site, op.attrs["callback_id"],
                                   [env[v] for v in op.operands] + list(dests),
                                   [False] * len(op.operands) + [True] * len(dests), types,
                                   f"{op.attrs.get('what') or 'host_callback'}"
                                   + (f" at {where}" if where else "")))

    def _lower_collective(self, op, dests, env):
        # a host call into the runtime's in-memory collectives (collective_steps.py)
        lower_collective(self, op, dests, env)

    _lower_all_reduce = _lower_all_gather = _lower_reduce_scatter = _lower_all_to_all = \
        _lower_collective_permute = _lower_collective_broadcast = _lower_replica_id = \
        _lower_partition_id = _lower_collective

    # -- control flow --------------------------------------------------------------------

    def _lower_optimization_barrier(self, op, dests, env):
        for v, d in zip(op.operands, dests):
            if env[v] != d:
                self.steps.append(self.copy_step(d, env[v], v.type.nbytes))

    def _lower_call(self, op, dests, env):
        callee = self.module[op.attrs["callee"]]
        fenv = {}
        steps = self.lower_region(callee.body, fenv, [env[v] for v in op.operands], list(dests))
        self.steps.extend(steps)

    def _lower_while(self, op, dests, env):
        cond, body = op.regions
        for i in read_in_place(op, dests, env, self.written_inputs()):
            dests[i] = env[op.operands[i]]   # the loop reads the operand where it is: no copy in
        for v, d in zip(op.operands, dests):
            if env[v] != d:
                self.steps.append(self.copy_step(d, env[v], v.type.nbytes))
        pred_ref = self.scratch(1)
        cond_steps = self.lower_region(cond, env, list(dests), [pred_ref])
        nxt: List[Optional[BufRef]] = []
        for i, o in enumerate(body.outputs):
            if o is body.args[i]:
                nxt.append(None)
            elif state_in_place(body, i):   # the step writes the state over itself: no copy
                nxt.append(dests[i])
            else:
                nxt.append(self.scratch(o.type.nbytes))
        body_steps = self.lower_region(body, env, list(dests), nxt)
        for i, n in enumerate(nxt):
            if n is not None and n != dests[i]:
                body_steps.append(self.copy_step(dests[i], n, op.results[i].type.nbytes))
        self.steps.append(While(cond_steps, pred_ref, body_steps, known_trip_count(op)))

    def _lower_if(self, op, dests, env):
        branches = [self.lower_region(r, env, [], list(dests)) for r in op.regions]
        self.steps.append(Switch(env[op.operands[0]], True, branches))

    def _lower_case(self, op, dests, env):
        branches = [self.lower_region(r, env, [], list(dests)) for r in op.regions]
        if len(branches) == 1:
            self.steps.extend(branches[0])
            return
        self.steps.append(Switch(env[op.operands[0]], False, branches))


def read_in_place(op: Operation, dests: Sequence[BufRef], env: Dict[Value, BufRef],
                  written_inputs: Set[int]) -> List[int]:
    """The slots of a ``while`` whose operand the loop may read where it is instead of copying it
    into the result's buffer first: the body passes the slot through unchanged (a loop-invariant
    weight, a scan's xs), nothing after the loop reads that result, and the operand's buffer is
    one no step writes: an input the plan never writes into (``written_inputs``: donated ones
    holding other values) or a
    constant, and no other slot's buffer. (lstm_grad: its three loops had copied xs, the weights
    and g, ~6.5 MiB, on every call.)"""
    region, body = op.parent, op.regions[1]
    slots = [i for i, v in enumerate(op.operands)
             if body.outputs[i] is body.args[i] and env[v].kind in ("input", "const")
             and not (env[v].kind == "input" and env[v].index in written_inputs)
             and not any(k != i and (d == env[v] or d.overlaps(env[v])) for k, d in enumerate(dests))]
    if region is None or not slots:
        return []
    used = set(region.outputs)
    for o in region.ops:
        if o is not op:
            used.update(inputs_of(o))
    return [i for i in slots if op.results[i] not in used]


def state_in_place(body: Region, i: int) -> bool:
    """May a loop's step write its ``i``-th result straight over the ``i``-th loop state (the
    buffer its argument is read from) instead of into scratch and then a copy? Yes when the
    result's producer is a top-level op of the body that reads that argument as one operand and
    may write this result over it (``buffer_assignment.usable_inplace_pairs``: element by element
    at the index it writes), no op after it reads the argument, and no other result is the
    argument or this result. (Five tanh-and-scale steps on 256x256 in a 32-step fori_loop on the
    CPU: the copy had been 19% of the loop's time.)"""
    arg, out = body.args[i], body.outputs[i]
    producer = out.op
    if producer is None or not any(op is producer for op in body.ops):
        return False
    if any(o is arg for o in body.outputs) or sum(o is out for o in body.outputs) != 1:
        return False
    at = next(k for k, op in enumerate(body.ops) if op is producer)
    if any(arg in inputs_of(op) for op in body.ops[at + 1:]):
        return False
    if sum(v is arg for v in producer.operands) != 1 or arg in free_values(producer):
        return False
    a, j = [k for k, v in enumerate(producer.operands) if v is arg][0], list(producer.results).index(out)
    return (a, j) in usable_inplace_pairs(producer)


def _kname(s: str) -> str:
    out = "".join(c if c.isalnum() or c in "_." else "_" for c in s)
    return out[:48] or "kernel"
