"""Batching of ops marked by ``custom_vjp``, ``custom_jvp`` and ``checkpoint``: the primal
branch is batched like any region (every output batched), and the batched op gets a mark of
the same kind whose rules are the user's rules under ``vmap`` (a ``custom_vjp``'s cotangents
of unbatched arguments are summed over the batch). A checkpoint policy's kept values are not
carried over: the batched op recomputes everything."""
from __future__ import annotations

from ..autodiff import prims as P
from ..autodiff.checkpoint import RematMark
from ..autodiff.custom import CustomJVPMark, CustomVJPMark, _interleave
from ..autodiff.marks import MARKS
from ..tree_util import tree_flatten, tree_unflatten
from .rules_control import _trace_batched
from .table import MARK_RULES


def _axes(mark, flags):
    return tuple(tree_unflatten(mark.in_tree, [0 if b else None for b in flags]))


def _sum_unbatched(cts, axes):
    """Cotangents of a vmapped rule summed over the batch for arguments that were not batched."""
    out = []
    for c, a in zip(cts, axes):
        if c is None:
            out.append(None)
            continue
        flags = tree_flatten(a, is_leaf=lambda x: x is None)[0]
        leaves, tree = tree_flatten(c)
        if len(flags) == 1 and len(leaves) != 1:
            flags = flags * len(leaves)
        out.append(tree_unflatten(tree, [P.reduce_sum(x, [0]) if f is None else x
                                         for x, f in zip(leaves, flags)]))
    return tuple(out)


def _vjp_mark(mark: CustomVJPMark, args, flags, size) -> CustomVJPMark:
    from .api import vmap
    axes = _axes(mark, flags)
    fwd, bwd, nondiff, pos = mark.fwd, mark.bwd, mark.nondiff, mark.nondiff_pos

    def fwd_b(*diff):
        return vmap(lambda *d: fwd(*_interleave(pos, nondiff, d)), in_axes=axes,
                    axis_size=size)(*diff)

    def bwd_b(res, ct):
        cts = vmap(lambda r, c: tuple(bwd(*nondiff, r, c)), axis_size=size)(res, ct)
        return _sum_unbatched(cts, axes)

    new = CustomVJPMark(args, mark.fun, fwd_b, bwd_b, (), (), mark.in_tree, mark.out_tree)
    new.name = mark.name
    return new


def _jvp_mark(mark: CustomJVPMark, args, flags, size) -> CustomJVPMark:
    from .api import vmap
    axes = _axes(mark, flags)
    rule, nondiff = mark.rule, mark.nondiff

    def rule_b(primals, tangents):
        return vmap(lambda p, t: rule(*nondiff, p, t), in_axes=(axes, axes),
                    axis_size=size)(primals, tangents)

    new = CustomJVPMark(args, mark.fun, rule_b, (), mark.in_tree, mark.out_tree)
    new.name = mark.name
    return new


def _remat_mark(mark: RematMark, args, flags, size) -> RematMark:
    return RematMark(args, mark.n_out, [])


_BATCHED_MARK = {CustomVJPMark: _vjp_mark, CustomJVPMark: _jvp_mark, RematMark: _remat_mark}


def batch_marked(ctx, op):
    mark = MARKS[op]
    ins = [ctx.env.get(v) for v in mark.args]
    n = len(op.result_types)
    region, _ = _trace_batched(ctx, op.regions[0], [], [True] * n, op.regions[0].name)
    outs = P.emit("case", [ctx.env.get(op.operands[0])[0]], regions=[region])
    MARKS[outs[0]._value.owner] = _BATCHED_MARK[type(mark)](
        mark, [t._value for t, _ in ins], [b for _, b in ins], ctx.size)
    return outs, [True] * n


for _cls in _BATCHED_MARK:
    MARK_RULES[_cls] = batch_marked
