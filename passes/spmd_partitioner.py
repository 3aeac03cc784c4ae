"""The SPMD partitioner: a global program plus shardings of its arguments (and, optionally,
its results) over a mesh -> the per-partition program, with collectives where values must
move. ``partition(module, mesh, in_shardings, out_shardings)``; ``hlo.jit(f, in_shardings=...)``
runs it (``compiler/staging/sharded_jit.py``), then the usual pipeline on its result.

A sharding is one tuple of mesh axis names per dimension (``()``: that dimension is whole on
every partition); partition ``i`` is the mesh position ``i`` in row-major order, and a
dimension split over axes ``(a, b)`` is split over ``a`` then ``b`` (major to minor), as
``NamedSharding``'s blocks. Collectives use flattened ids (``use_global_device_ids``) over the
partitions that differ only along the axes concerned.

Ops of ``@main`` (after inlining), in order:

- elementwise ops: the first sharded operand's sharding; a whole (replicated) operand of the
  same shape is sliced to this partition's block (``dynamic_slice`` at the partition's offset);
  operands sharded differently are all-gathered first;
- ``broadcast_in_dim``: operand dimensions keep their axes (a size-1 dimension broadcast to a
  larger one must be whole), new dimensions are whole;
- ``reduce`` of one input with a body of one commutative op and that op's identity as init:
  reduced and sharded dimensions are reduced locally, then all-reduced over their axes;
- ``dot_general``: sharded batch and free dimensions stay sharded in the result; contracting
  dimensions sharded over the same axes on both sides become a local product and an all-reduce
  (a sum); any other mix gathers the operand(s) that do not fit;
- ``transpose``: the sharding permuted; ``convert``, ``reshape`` keeping a sharded leading
  dimension whole;
- constants, iota: whole; every other op (and every value a region reads): its operands are
  all-gathered first, and it runs on whole values, as written;
- a value with a ``with_sharding_constraint`` is resharded to it where it is made.

Each decision goes to the log (``decisions``) with its reason; ``hlo.jit`` writes it to the
dump folder as ``spmd-decisions.txt`` and gives it as ``.spmd_decisions``. The result's
arguments and results have the partitions' block shapes.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.builder import Builder
from hlo.ir.clone import clone_op
from hlo.ir.core import Function, Module, Operation, Value
from hlo.ir.types import TensorType, s32

from .util import free_values, scalar_body_op

Sharding = Tuple[Tuple[str, ...], ...]
ELEMENTWISE = op_table.with_trait(op_table.ELEMENTWISE)


class PartitionError(ValueError):
    """A sharding that does not fit the program: an axis the mesh lacks, a dimension that does
    not split evenly, a rank mismatch."""


def whole(rank: int) -> Sharding:
    return ((),) * rank


class Partitioner:
    def __init__(self, mesh: Dict[str, int]):
        self.axes = list(mesh)
        self.sizes = [int(mesh[a]) for a in self.axes]
        self.ids = np.arange(int(np.prod(self.sizes, dtype=np.int64))).reshape(self.sizes)
        self.decisions: List[str] = []
        self.channel = 0

    # -- shardings ------------------------------------------------------------------------
    def parts(self, axes: Sequence[str]) -> int:
        return int(np.prod([self.sizes[self.axes.index(a)] for a in axes], dtype=np.int64))

    def local_type(self, t: TensorType, sh: Sharding) -> TensorType:
        shape = []
        for d, n in enumerate(t.shape):
            k = self.parts(sh[d])
            if n % k:
                raise PartitionError(f"dimension {d} of {t} does not split into {k} blocks "
                                     f"(axes {sh[d]})")
            shape.append(n // k)
        return TensorType(tuple(shape), t.dtype)

    def groups(self, axes: Sequence[str]) -> List[List[int]]:
        idx = [self.axes.index(a) for a in axes]
        rest = [i for i in range(len(self.sizes)) if i not in idx]
        moved = np.transpose(self.ids, rest + idx)
        return moved.reshape(-1, self.parts(axes)).tolist()

    def _collective_attrs(self, axes) -> dict:
        self.channel += 1
        return {"replica_groups": self.groups(axes), "channel_id": self.channel,
                "use_global_device_ids": True}

    def log(self, msg: str) -> None:
        self.decisions.append(msg)

    # -- moving values ----------------------------------------------------------------------
    def gather(self, b: Builder, v: Value, sh: Sharding, why: str) -> Value:
        """``v`` (sharded by ``sh``) whole on every partition."""
        for d, axes in enumerate(sh):
            if not axes:
                continue
            t = v.type
            shape = list(t.shape)
            shape[d] *= self.parts(axes)
            self.log(f"all_gather: dimension {d} of {t} over {list(axes)}: {why}")
            v = b.op("all_gather", [v], dict(self._collective_attrs(axes), all_gather_dim=d),
                     result_types=[TensorType(tuple(shape), t.dtype)]).results[0]
        return v

    def offset(self, b: Builder, axes: Sequence[str], block: int) -> Value:
        """This partition's block index along ``axes`` times ``block``, as an s32 scalar."""
        pid = b.value("convert", [b.value("partition_id", [])], result_types=[TensorType((), s32)])
        idx = None
        for a in axes:
            i = self.axes.index(a)
            stride = int(np.prod(self.sizes[i + 1:], dtype=np.int64))
            c = lambda x: b.value("constant", attrs={"value": np.array(x, np.int32)})
            coord = b.value("remainder", [b.value("divide", [pid, c(stride)]), c(self.sizes[i])])
            idx = coord if idx is None else b.value("add", [b.value("multiply", [idx, c(self.sizes[i])]), coord])
        return b.value("multiply", [idx, b.value("constant", attrs={"value": np.array(block, np.int32)})])

    def slice_to(self, b: Builder, v: Value, sh: Sharding, why: str) -> Value:
        """A whole ``v`` cut to this partition's block of sharding ``sh``."""
        lt = self.local_type(v.type, sh)
        zero = b.value("constant", attrs={"value": np.array(0, np.int32)})
        starts = []
        for d, axes in enumerate(sh):
            starts.append(self.offset(b, axes, lt.shape[d]) if axes else zero)
        self.log(f"slice: {v.type} to its block {lt} ({list(sh)}): {why}")
        return b.op("dynamic_slice", [v] + starts, {"slice_sizes": lt.shape}, result_types=[lt]).results[0]

    def reshard(self, b: Builder, v: Value, have: Sharding, want: Sharding, why: str) -> Value:
        if have == want:
            return v
        if any(have):
            v = self.gather(b, v, have, why)
        if any(want):
            v = self.slice_to(b, v, want, why)
        return v

    # -- the program --------------------------------------------------------------------------
    def run(self, module: Module, in_shardings: Sequence[Sharding],
            out_shardings: Optional[Sequence[Optional[Sharding]]],
            constraints: Optional[Dict[Value, Sharding]] = None) -> Module:
        fn = module["main"]
        if len(in_shardings) != len(fn.args):
            raise PartitionError(f"{len(in_shardings)} argument shardings for {len(fn.args)} arguments")
        for t, sh in zip(fn.arg_types, in_shardings):
            self._check(t, sh, "argument")
        new = Function("main", [self.local_type(t, sh) for t, sh in zip(fn.arg_types, in_shardings)],
                       "public", fn.loc)
        out = Module(module.name)
        out.add(new)
        env: Dict[Value, Tuple[Value, Sharding]] = {}
        self._env = env
        cons = constraints or {}
        for a, na, sh in zip(fn.args, new.args, in_shardings):
            env[a] = (na, tuple(tuple(x) for x in sh))
            if a in cons:
                self._constrain(Builder(new.body, fn.loc), a, cons[a], env)
        for op in fn.body.ops:
            b = Builder(new.body, op.loc)
            self.op(b, op, env)
            for r in op.results:
                if r in cons:
                    self._constrain(b, r, cons[r], env)
        b = Builder(new.body, fn.body.output_loc)
        outs = []
        for i, v in enumerate(fn.body.outputs):
            lv, sh = env[v]
            want = out_shardings[i] if out_shardings is not None and out_shardings[i] is not None else sh
            self._check(v.type, want, "result")
            outs.append(self.reshard(b, lv, sh, tuple(tuple(x) for x in want), f"result {i}'s sharding"))
            env[v] = (outs[-1], want)
        new.body.outputs = outs
        self.out_shardings = [env[v][1] for v in fn.body.outputs]
        return out

    def _constrain(self, b: Builder, v: Value, want: Sharding, env) -> None:
        self._check(v.type, want, "with_sharding_constraint")
        lv, sh = env[v]
        want = tuple(tuple(x) for x in want)
        if sh != want:
            where = f" at {b.loc}" if getattr(b, "loc", None) is not None else ""
            env[v] = (self.reshard(b, lv, sh, want, f"with_sharding_constraint{where} asks for "
                                   f"{list(want)}"), want)

    def _check(self, t: TensorType, sh: Sharding, what: str) -> None:
        if len(sh) != t.rank:
            raise PartitionError(f"a sharding of rank {len(sh)} for a {what} of type {t}")
        used = [a for axes in sh for a in axes]
        for a in used:
            if a not in self.axes:
                raise PartitionError(f"{what} sharding names axis {a!r}; the mesh's axes: {self.axes}")
        if len(set(used)) != len(used):
            raise PartitionError(f"{what} sharding {sh} uses an axis twice")
        self.local_type(t, sh)

    def op(self, b: Builder, op: Operation, env) -> None:
        name = op.name
        ins = [env[v] for v in op.operands]
        rule = getattr(self, "_op_" + name, None)
        if name in ELEMENTWISE and not op.regions:
            rule = self._elementwise
        if rule is not None and not free_values(op):
            got = rule(b, op, ins)
            if got is not None:
                for r, (v, sh) in zip(op.results, got):
                    env[r] = (v, sh)
                return
        self._whole(b, op, env, ins)

    def _whole(self, b, op, env, ins) -> None:
        why = f"'{op.name}' runs on whole values" + ("" if op.name in ("constant", "iota") else
                                                       " (no partitioning rule for it)")
        vals = [self.reshard(b, v, sh, whole(len(sh)), why) for v, sh in ins]
        vmap = dict(zip(op.operands, vals))
        for fv in free_values(op):  # values its regions read: whole
            lv, sh = env[fv]
            vmap[fv] = self.reshard(b, lv, sh, whole(len(sh)), f"read by the regions of '{op.name}'")
        new = clone_op(op, vmap)
        b.region.append(new)
        for r, nr in zip(op.results, new.results):
            env[r] = (nr, whole(r.type.rank))

    def _elementwise(self, b, op, ins):
        target = next((sh for v, sh in ins if any(sh)), None)
        if target is None:
            return [(b.op(op.name, [v for v, _ in ins], dict(op.attrs),
                          result_types=[r.type for r in op.results]).results[0],
                     whole(op.results[0].type.rank))]
        vals = []
        for (v, sh), gv in zip(ins, op.operands):
            if gv.type.rank == 0:
                vals.append(v)
            elif not any(sh) and self._broadcast_block(gv, target, env_of=self._env) is not None:
                vals.append(self._broadcast_block(gv, target, b=b, env_of=self._env))
            else:
                vals.append(self.reshard(b, v, sh, target, f"operand of '{op.name}' (elementwise) "
                                         f"follows its first sharded operand {list(target)}"))
        rt = self.local_type(op.results[0].type, target)
        return [(b.op(op.name, vals, dict(op.attrs), result_types=[rt]).results[0], target)]

    def _broadcast_block(self, gv: Value, target: Sharding, env_of, b: Optional[Builder] = None):
        """A whole operand made by ``broadcast_in_dim`` along the sharded dimensions (a bias, a
        scalar): broadcast its whole source straight to the block instead of slicing the
        broadcast (None where that does not apply; with ``b``, emit it)."""
        owner = gv.owner if not gv.is_arg else None
        if owner is None or owner.name != "broadcast_in_dim":
            return None
        src = owner.operands[0]
        if src not in env_of or any(env_of[src][1]):
            return None
        dims = owner.attrs["broadcast_dimensions"]
        for d, axes in enumerate(target):
            if axes and d in dims and src.type.shape[dims.index(d)] != 1:
                return None
        if b is None:
            return True
        lt = self.local_type(gv.type, target)
        self.log(f"broadcast to the block: {src.type} -> {lt} instead of {gv.type} "
                 f"(its sharded dimensions {list(target)} are broadcast ones)")
        return b.op("broadcast_in_dim", [env_of[src][0]], dict(owner.attrs), result_types=[lt]).results[0]

    def _op_convert(self, b, op, ins):
        (v, sh), = ins
        rt = self.local_type(op.results[0].type, sh)
        return [(b.op("convert", [v], {}, result_types=[rt]).results[0], sh)]

    def _op_broadcast_in_dim(self, b, op, ins):
        (v, sh), = ins
        dims = op.attrs["broadcast_dimensions"]
        rtype = op.results[0].type
        out = [()] * rtype.rank
        for i, d in enumerate(dims):
            if sh[i]:
                if op.operands[0].type.shape[i] != rtype.shape[d]:
                    v = self.reshard(b, v, sh, whole(len(sh)), "a sharded size-1 dimension is broadcast")
                    sh = whole(len(sh))
                    out = [()] * rtype.rank
                    break
                out[d] = sh[i]
        out_sh = tuple(out)
        rt = self.local_type(rtype, out_sh)
        return [(b.op("broadcast_in_dim", [v], dict(op.attrs), result_types=[rt]).results[0], out_sh)]

    def _op_transpose(self, b, op, ins):
        (v, sh), = ins
        perm = op.attrs["permutation"]
        out_sh = tuple(sh[p] for p in perm)
        return [(b.op("transpose", [v], dict(op.attrs)).results[0], out_sh)]

    def _op_reshape(self, b, op, ins):
        (v, sh), = ins
        t, rt = op.operands[0].type, op.results[0].type
        if not any(sh):
            return [(b.op("reshape", [v], {}, result_types=[rt]).results[0], whole(rt.rank))]
        if any(sh[1:]) or not rt.rank or rt.shape[0] != t.shape[0]:
            return None  # only a sharded leading dimension kept whole is partitioned
        out_sh = (sh[0],) + whole(rt.rank - 1)
        return [(b.op("reshape", [v], {}, result_types=[self.local_type(rt, out_sh)]).results[0], out_sh)]

    def _op_reduce(self, b, op, ins):
        if len(ins) != 2:
            return None
        (x, sh), (init, _) = ins
        kind = scalar_body_op(op.regions[0])
        dims = op.attrs["dimensions"]
        init_op = op.operands[1].owner
        ident = op_table.identity(kind, op.operands[1].type.dtype) if kind else None
        if ident is None or init_op is None or init_op.name != "constant" or \
                np.asarray(init_op.attrs["value"]).tobytes() != np.asarray(ident).tobytes():
            return None  # (a local reduce would count a non-identity init once per partition)
        reduced_axes = [a for d in dims for a in sh[d]]
        out_sh = tuple(sh[d] for d in range(len(sh)) if d not in dims)
        rt = self.local_type(op.results[0].type, out_sh)
        r = b.op("reduce", [x, init], dict(op.attrs), result_types=[rt],
                 regions=[_clone_region(op.regions[0])]).results[0]
        if reduced_axes:
            self.log(f"all_reduce ({kind}): '{op.name}' over dimensions {list(dims)} sharded over "
                     f"{reduced_axes}: local reductions, then one across the partitions")
            r = b.op("all_reduce", [r], self._collective_attrs(reduced_axes),
                     regions=[_clone_region(op.regions[0], "computation")]).results[0]
        return [(r, out_sh)]

    def _op_dot_general(self, b, op, ins):
        (lv, lsh), (rv, rsh) = ins
        a = op.attrs
        lb, rb = a.get("lhs_batching_dimensions", ()), a.get("rhs_batching_dimensions", ())
        lc, rc = a.get("lhs_contracting_dimensions", ()), a.get("rhs_contracting_dimensions", ())
        lt, rt_ = op.operands[0].type, op.operands[1].type
        why = "'dot_general': "
        pairs = [(x, y, "batch") for x, y in zip(lb, rb)] + [(x, y, "contracting") for x, y in zip(lc, rc)]
        for x, y, what in pairs:  # batching and contracting dimensions agree on both sides
            if lsh[x] == rsh[y]:
                continue
            if lsh[x] and not rsh[y]:
                new_r = self._with(rsh, y, lsh[x])
                rv = self.reshard(b, rv, rsh, new_r, why + f"rhs {what} dimension {y} follows lhs's {list(lsh[x])}")
                rsh = new_r
            elif rsh[y] and not lsh[x]:
                new_l = self._with(lsh, x, rsh[y])
                lv = self.reshard(b, lv, lsh, new_l, why + f"lhs {what} dimension {x} follows rhs's {list(rsh[y])}")
                lsh = new_l
            else:
                return None
        lfree = [d for d in range(lt.rank) if d not in lb and d not in lc]
        rfree = [d for d in range(rt_.rank) if d not in rb and d not in rc]
        out_sh = tuple([lsh[d] for d in lb] + [lsh[d] for d in lfree] + [rsh[d] for d in rfree])
        used = [x for axes in out_sh for x in axes]
        if len(set(used)) != len(used):
            return None
        summed = [x for d in lc for x in lsh[d]]
        rtype = self.local_type(op.results[0].type, out_sh)
        r = b.op("dot_general", [lv, rv], dict(a), result_types=[rtype]).results[0]
        if summed:
            self.log(f"all_reduce (add): 'dot_general' contracts dimensions sharded over {summed}: "
                     f"local products, summed across the partitions")
            body = _add_region(rtype.dtype)
            r = b.op("all_reduce", [r], self._collective_attrs(summed), regions=[body]).results[0]
        return [(r, out_sh)]

    @staticmethod
    def _with(sh: Sharding, d: int, axes) -> Sharding:
        out = list(sh)
        out[d] = tuple(axes)
        return tuple(out)


def _clone_region(r, name: Optional[str] = None):
    from hlo.ir.clone import clone_region
    c = clone_region(r, {})
    if name:
        c.name = name
    return c


def _add_region(dtype):
    from hlo.ir.core import Region
    body = Region([TensorType((), dtype)] * 2, name="computation")
    s = Builder(body).value("add", list(body.args))
    body.outputs = [s]
    return body


def partition(module: Module, mesh: Dict[str, int], in_shardings: Sequence[Sharding],
              out_shardings: Optional[Sequence[Optional[Sharding]]] = None,
              constraints: Optional[Dict[Value, Sharding]] = None):
    """(the per-partition module, the result shardings, the decision log). ``constraints``:
    values of ``@main`` (``with_sharding_constraint``) resharded where they are made."""
    from hlo.ir.verifier import verify_module

    from .dce import dce_region
    p = Partitioner(mesh)
    out = p.run(module, in_shardings, out_shardings, constraints)
    dce_region(out["main"].body)  # whole values an op no longer reads (a broadcast made per block)
    verify_module(out)
    return out, p.out_shardings, p.decisions


def partition_annotated(module: Module, constraints: Optional[Dict[Value, Sharding]] = None):
    """``partition`` with the mesh and shardings read from ``@main``'s sharding annotations
    (``ir/sharding_attr.py``: ``%arg0: f32[8,4] {sharding = "mesh<batch=2> [{batch}, {}]"}``):
    arguments without one are whole, results without one are as the partitioner leaves them."""
    fn = module["main"]
    annotated = list(fn.arg_shardings.values()) + list(fn.result_shardings.values())
    if not annotated:
        raise PartitionError("@main has no sharding annotations: nothing says how to partition it")
    meshes = {sh.mesh for sh in annotated}
    if len(meshes) > 1:
        raise PartitionError(f"@main's sharding annotations are over {len(meshes)} different meshes: "
                             + "; ".join(" ".join(f"{n}={s}" for n, s in m) for m in sorted(meshes)))
    mesh = dict(meshes.pop())
    ins = [fn.arg_shardings[i].dims if i in fn.arg_shardings else whole(t.rank)
           for i, t in enumerate(fn.arg_types)]
    outs = None
    if fn.result_shardings:
        outs = [fn.result_shardings[i].dims if i in fn.result_shardings else None
                for i in range(len(fn.result_types))]
    return partition(module, mesh, ins, outs, constraints)
