"""``hlo.jit(f, in_shardings=..., out_shardings=...)``: ``f`` written for global arrays, run
as one SPMD program over a mesh of CPU devices, the partitioner deciding what moves.

``in_shardings``: a ``NamedSharding`` per positional argument (for every array of that
argument's pytree), or one for all; ``out_shardings`` likewise for the results, or None (each
result as the partitioner leaves it). A call traces ``f`` on the global shapes (once per
signature), inlines it, partitions it (``hlo.passes.spmd_partitioner``: the per-partition
program, its decisions in ``.spmd_decisions`` and, with ``HLO_DUMP_DIR``, in
``spmd-decisions.txt``), compiles that for the CPU and runs it on the mesh's devices
(``run_spmd``); the results are ``ShardedArray``s. Inside another trace it is an error, as
``hlo.shard_map``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import numpy as np

from ..errors import ArgumentTypeError, ShapeError, UnsupportedError
from ..sharding import NamedSharding, PartitionSpec
from ..tracing.tracer import Tracer
from ..tree_util import tree_flatten, tree_unflatten


def _per_leaf(shardings, args, what: str) -> List[NamedSharding]:
    if isinstance(shardings, NamedSharding):
        shardings = (shardings,) * len(args)
    if not isinstance(shardings, (tuple, list)) or len(shardings) != len(args):
        raise ArgumentTypeError(f"hlo.jit: {what} must give one NamedSharding per argument "
                                f"({len(args)}), got {shardings!r}")
    out = []
    for s, a in zip(shardings, args):
        leaves, _ = tree_flatten(a)
        if isinstance(s, NamedSharding):
            out.extend([s] * len(leaves))
        else:
            ss, _ = tree_flatten(s, is_leaf=lambda x: isinstance(x, NamedSharding))
            if len(ss) != len(leaves) or not all(isinstance(x, NamedSharding) for x in ss):
                raise ArgumentTypeError(f"hlo.jit: {what} does not match its argument's structure")
            out.extend(ss)
    return out


def _tuple_of(spec: PartitionSpec, rank: int):
    if len(spec) > rank:
        raise ShapeError(f"hlo.jit: {spec} has more entries than the array's rank {rank}")
    return tuple(spec.axes_of(d) for d in range(rank))


class ShardedJit:
    def __init__(self, f, in_shardings, out_shardings=None):
        self.f, self.in_shardings, self.out_shardings = f, in_shardings, out_shardings
        self._compiled: Dict[tuple, Any] = {}
        self.spmd_decisions: List[str] = []
        # the last traced program before partitioning, its arguments and results annotated with
        # their shardings (hlo IR text; `hlo.ir.sharding_attr`)
        self.lowered_ir: Optional[str] = None
        self.__wrapped__ = f

    def __call__(self, *args):
        import hlo
        from hlo.ir import print_module
        from hlo.ir.sharding_attr import ValueSharding
        from hlo.passes.inline import Inline
        from hlo.passes.spmd_partitioner import partition_annotated
        from hlo.runtime.cpu.devices import run_spmd

        from .shard_map import run_blocks
        from .stages import Lowered
        flat, tree = tree_flatten(list(args))
        if any(isinstance(x, Tracer) for x in flat):
            raise UnsupportedError("hlo.jit with in_shardings inside a traced function is not "
                                   "supported yet: call it on arrays")
        from .sharded_array import ShardedArray
        # a ShardedArray stays as it is (its blocks are passed where its sharding is the
        # argument's: in a run of several processes, this process's blocks only)
        arrays = [x if isinstance(x, ShardedArray) else np.asarray(x) for x in flat]
        shs = _per_leaf(self.in_shardings, list(args), "in_shardings")
        mesh = shs[0].mesh
        if any(s.mesh != mesh for s in shs):
            raise ShapeError("hlo.jit: every in_sharding must be over one mesh")
        key = (tree, tuple((a.shape, str(a.dtype)) for a in arrays))
        if key not in self._compiled:
            from ..lax.parallel import constraint_scope
            specs = [hlo.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
            with constraint_scope() as found:
                lowered = hlo.jit(self.f).lower(*tree_unflatten(tree, specs))
            module = lowered.ir
            Inline().run(module)
            n_out = lowered.out_tree.num_leaves
            outs = None
            if self.out_shardings is not None:
                dummy = tree_unflatten(lowered.out_tree, [0] * n_out)
                top = list(dummy) if isinstance(dummy, (tuple, list)) else [dummy]
                osh = _per_leaf(self.out_shardings if isinstance(self.out_shardings, NamedSharding)
                                or len(top) > 1 or not isinstance(dummy, (tuple, list))
                                else self.out_shardings, top, "out_shardings")
                outs = [_tuple_of(s.spec, t.rank) for s, t in zip(osh, module["main"].result_types)]
            ins = [_tuple_of(s.spec, a.ndim) for s, a in zip(shs, arrays)]
            for s_ in found.values():
                if s_.mesh != mesh:
                    raise ShapeError("lax.with_sharding_constraint: a sharding over another mesh "
                                     "than the in_shardings'")
            cons = {v: _tuple_of(s_.spec, v.type.rank) for v, s_ in found.items()}
            main = module["main"]
            main.arg_shardings = {i: ValueSharding.of(mesh.shape, sh) for i, sh in enumerate(ins)}
            if outs is not None:
                main.result_shardings = {i: ValueSharding.of(mesh.shape, sh)
                                         for i, sh in enumerate(outs)}
            self.lowered_ir = print_module(module)   # the partitioner reads the annotations
            part, out_sh, decisions = partition_annotated(module, cons)
            self.spmd_decisions = decisions
            dump = os.environ.get("HLO_DUMP_DIR")
            if dump:
                os.makedirs(dump, exist_ok=True)
                with open(os.path.join(dump, "spmd-decisions.txt"), "w", encoding="utf-8") as fh:
                    fh.write("\n".join(decisions) + ("\n" if decisions else ""))
            compiled = Lowered(part).compile(target="cpu")
            self._compiled[key] = (compiled, lowered.out_tree, out_sh, part)
        compiled, out_tree, out_sh, part = self._compiled[key]
        blocks = []
        for a, s in zip(arrays, shs):
            s.check_shape(a.shape, "hlo.jit: an argument")
            if isinstance(a, ShardedArray):
                if a.sharding == s:
                    blocks.append(a.blocks)
                    continue
                a = np.asarray(a)
            blocks.append([a[s.index(i, a.shape)] for i in range(mesh.size)])
        flat_tree = tree_flatten(list(range(len(arrays))))[1]
        del run_spmd
        specs_out = [PartitionSpec(*[ax if ax else None for ax in sh]) for sh in out_sh]
        res = run_blocks(_FlatCall(compiled), mesh, blocks, flat_tree, out_tree,
                         lambda result, n: specs_out)
        return res

    def as_text(self) -> str:
        """The last compiled per-partition program (hlo IR text)."""
        from hlo.ir import print_module
        if not self._compiled:
            raise ValueError("hlo.jit: not called yet")
        return print_module(list(self._compiled.values())[-1][3])


class _FlatCall:
    """A compiled flat program called with flat arguments, its results as a list."""

    def __init__(self, compiled):
        self.compiled = compiled

    def __call__(self, *flat):
        out = self.compiled(*flat)
        return list(out) if isinstance(out, (tuple, list)) else [out]


def sharded_jit(f, in_shardings, out_shardings: Optional[Any] = None) -> ShardedJit:
    return ShardedJit(f, in_shardings, out_shardings)
