"""VJP rules of the collectives (``hlo.lax.psum`` and the others inside ``hlo.shard_map``).

Gradients are those of the whole SPMD program: a collective's results on every device depend
on every device's operand, so the cotangent of a device's operand sums what every device's
result cotangent says about it. Hence the transposes: ``all_reduce`` (a sum) -> ``all_reduce``
(a sum) of the cotangents over the same groups, ``all_gather`` -> ``reduce_scatter`` (a sum),
``reduce_scatter`` (a sum) -> ``all_gather``, ``all_to_all`` -> ``all_to_all`` with the split
and concatenated dimensions swapped, ``collective_permute`` -> the inverse permutation. Each new
collective gets its own channel id (the forward op's plus a large offset: ids only tell
collectives apart). An all_reduce whose computation is ``maximum`` or ``minimum`` (pmax,
pmin) sends the summed cotangent to the devices whose operand equals the result, split evenly
among ties: jax's rule for ``reduce_max`` over the devices (jax itself has no rule for pmax),
``hit * psum(ct) / psum(hit)``, both sums in one all_reduce. Other computations (products,
bitwise ops) are not differentiable.
"""
from __future__ import annotations

from hlo.ir.clone import clone_region
from hlo.passes.util import scalar_body_op

from . import prims as P
from .backprop import not_differentiable
from .table import Eqn, vjp_rule

_CHANNEL_OFFSET = 1 << 20


def _groups(e: Eqn) -> dict:
    a = {"replica_groups": e.attr("replica_groups")}
    ch = e.attr("channel_id") or 0
    if ch > 0:
        a["channel_id"] = ch + _CHANNEL_OFFSET
    if e.attrs.get("use_global_device_ids"):
        a["use_global_device_ids"] = True
    return a


def _summing(e: Eqn) -> None:
    if scalar_body_op(e.op.regions[0]) != "add":
        raise not_differentiable(e.op, " (an all-reduce other than a sum: pmax, pmin)")


def _sum_body(dtype):
    from hlo.ir import Builder, Region
    body = Region([P.ir_type((), dtype)] * 2, name="computation")
    body.outputs = [Builder(body).value("add", list(body.args))]
    return body


@vjp_rule("all_reduce")
def _all_reduce(e: Eqn):
    kind = scalar_body_op(e.op.regions[0])
    if kind in ("maximum", "minimum"):
        return _all_reduce_chooser(e)
    _summing(e)
    outs = []
    for i, x in enumerate(e.args):
        g = e.cts[i] if e.cts[i] is not None else P.zeros(x.shape, x.dtype)
        outs.append(P.emit1("all_reduce", [g], _groups(e), regions=[clone_region(e.op.regions[0], {})]))
    return outs


def _all_reduce_chooser(e: Eqn):
    outs = []
    for i, x in enumerate(e.args):
        if e.cts[i] is None:
            outs.append(None)
            continue
        hit = P.convert(P.compare(x, e.outs[i], "EQ"), x.dtype)
        counts, total = P.emit(
            "all_reduce", [hit, e.cts[i]], _groups(e), regions=[_sum_body(x.dtype)],
            result_types=[P.ir_type(x.shape, x.dtype)] * 2)
        outs.append(P.mul(hit, P.div(total, counts)))
    return outs


@vjp_rule("all_gather")
def _all_gather(e: Eqn):
    from hlo.ir import Builder, Region
    outs = []
    for i, x in enumerate(e.args):
        g = e.cts[i] if e.cts[i] is not None else P.zeros(e.outs[i].shape, x.dtype)
        body = Region([P.ir_type((), g.dtype)] * 2, name="computation")
        s = Builder(body).value("add", list(body.args))
        body.outputs = [s]
        outs.append(P.emit1("reduce_scatter", [g], dict(_groups(e), scatter_dimension=e.attrs["all_gather_dim"]),
                            result_types=[P.ir_type(x.shape, x.dtype)], regions=[body]))
    return outs


@vjp_rule("reduce_scatter")
def _reduce_scatter(e: Eqn):
    _summing(e)
    (x,), g = e.args, e.ct
    return [P.emit1("all_gather", [g], dict(_groups(e), all_gather_dim=e.attrs["scatter_dimension"]),
                    result_types=[P.ir_type(x.shape, x.dtype)])]


@vjp_rule("all_to_all")
def _all_to_all(e: Eqn):
    outs = []
    for i, x in enumerate(e.args):
        g = e.cts[i] if e.cts[i] is not None else P.zeros(e.outs[i].shape, x.dtype)
        a = {"replica_groups": e.attr("replica_groups"), "split_count": e.attrs["split_count"],
             "split_dimension": e.attrs["concat_dimension"], "concat_dimension": e.attrs["split_dimension"]}
        ch = e.attr("channel_id") or 0
        if ch > 0:
            a["channel_id"] = ch + _CHANNEL_OFFSET
        outs.append(P.emit1("all_to_all", [g], a))
    return outs


@vjp_rule("collective_permute")
def _collective_permute(e: Eqn):
    a = {"source_target_pairs": [(t, s) for s, t in e.attrs["source_target_pairs"]]}
    ch = e.attr("channel_id") or 0
    if ch > 0:
        a["channel_id"] = ch + _CHANNEL_OFFSET
    return [P.emit1("collective_permute", [e.ct], a)]
