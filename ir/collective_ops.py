"""The collective ops of the op table: StableHLO's communication between the processes of a
parallel run (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``,
``collective_permute``, ``collective_broadcast``, ``replica_id``, ``partition_id``), and
``run_parallel``, the reference interpreter's way to run programs as such processes (the
StableHLO test vectors' ``interpreter.run_parallel``).

A parallel run is a grid of processes, ``num_replicas x num_partitions``; a process is
``(replica_id, partition_id)``. Which processes a collective talks to (its *process groups*)
follows StableHLO's spec from its attributes:

- ``replica_groups`` (a list of groups of ids; StableHLO pads ragged groups with -1, hlo keeps
  them ragged), ``channel_id`` (StableHLO's ``channel_handle``'s ``handle``; 0 = none) and
  ``use_global_device_ids``;
- all_reduce, all_gather, reduce_scatter: no channel: ``cross_replica`` (the groups are replica
  ids, one set of groups in each partition); a channel: ``cross_replica_and_partition`` (each
  group of replicas, over every partition); a channel and ``use_global_device_ids``:
  ``flattened_ids`` (ids ``replica_id * num_partitions + partition_id``);
- all_to_all, collective_permute, collective_broadcast: no channel: ``cross_replica``; a
  channel: ``cross_partition`` (the ids are partition ids, in each replica);
- an empty ``replica_groups`` is one group of every replica (or partition), as in XLA.

The op semantics live in ``hlo.ir.interp.collectives``. These ops carry the ``collective`` trait:
never constant-folded (a value depends on the other processes) and never fused. ``hlo.lax.psum``
and the others (``compiler/lax/parallel.py``) trace them inside ``hlo.shard_map``;
``collective_broadcast`` and ``run_parallel`` come only from StableHLO (``not_traced``).
"""
from __future__ import annotations

from typing import Tuple

from .ops import (
    ATTR_KINDS,
    COLLECTIVE,
    NON_DIFFERENTIABLE,
    NOT_TRACED,
    Attr,
    OpDef,
    OpError,
    _require,
    _t,
    register,
)
from .types import TensorType, u32


def _norm_groups(x) -> Tuple[Tuple[int, ...], ...]:
    """Replica groups: a list of lists of non-negative ids (ragged allowed; -1 padding, as in
    StableHLO's dense form, is dropped)."""
    import numpy as np
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if not isinstance(x, (list, tuple)):
        raise OpError(f"expected a list of groups (lists of ids), got {x!r}")
    out = []
    for g in x:
        if not isinstance(g, (list, tuple)):
            raise OpError(f"expected a group (a list of ids), got {g!r}")
        ids = []
        for v in g:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise OpError(f"expected an integer id, got {v!r}")
            if int(v) < -1:
                raise OpError(f"id {int(v)} is negative")
            if int(v) != -1:
                ids.append(int(v))
        out.append(tuple(ids))
    return tuple(out)


ATTR_KINDS["groups"] = _norm_groups

_GROUP_ATTRS = {"replica_groups": Attr("groups", ()), "channel_id": Attr("int", 0)}
_GLOBAL_IDS = {"use_global_device_ids": Attr("bool", False)}


def _check_groups(attrs):
    seen = set()
    for g in attrs.get("replica_groups", ()):
        _require(len(g) > 0, "replica_groups has an empty group")
        for i in g:
            _require(i not in seen, f"replica_groups names id {i} twice")
            seen.add(i)
    if attrs.get("use_global_device_ids"):
        _require(attrs.get("channel_id", 0) > 0,
                 "use_global_device_ids needs a channel_id > 0 (StableHLO's rule)")


def _group_size(attrs):
    """The size of every process group when the attributes alone fix it (all groups of one
    size, the groups naming processes directly), else None."""
    groups = attrs.get("replica_groups", ())
    if not groups or attrs.get("channel_id", 0) > 0 and not attrs.get("use_global_device_ids"):
        return None
    sizes = {len(g) for g in groups}
    return sizes.pop() if len(sizes) == 1 else None


def _scalar_computation(regions, ts, what):
    body = regions[0] if regions else None
    _require(body is not None, f"missing {what} region")
    for t in ts:
        want = [TensorType((), t.dtype)] * 2
        got = [a.without_layout() for a in body.arg_types]
        _require(got == want and [o.without_layout() for o in body.output_types] == want[:1],
                 f"{what} region must be ({t.dtype}[], {t.dtype}[]) -> {t.dtype}[] for an operand "
                 f"of {t}, is ({', '.join(map(str, got))}) -> "
                 f"({', '.join(map(str, body.output_types))})")


def _infer_all_reduce(ts, attrs, regions):
    _require(len(ts) > 0, "all_reduce takes at least one operand")
    _check_groups(attrs)
    _scalar_computation(regions, ts, "computation")
    return [t.without_layout() for t in ts]


register(OpDef("all_reduce", _infer_all_reduce, None, regions=("computation",),
               attrs={**_GROUP_ATTRS, **_GLOBAL_IDS}, traits={COLLECTIVE},
               doc="reduces each operand over its process group with the computation"))


def _verify_all_gather(ts, attrs, regions, rts):
    _require(len(ts) > 0 and len(rts) == len(ts), "all_gather has one result per operand")
    _check_groups(attrs)
    d = attrs["all_gather_dim"]
    n = _group_size(attrs)
    for t, r in zip(ts, rts):
        _require(0 <= d < t.rank, f"all_gather_dim {d} out of range for rank {t.rank}")
        _require(r.dtype == t.dtype and r.rank == t.rank, f"result {r} does not match operand {t}")
        for i, (a, b) in enumerate(zip(t.shape, r.shape)):
            if i != d:
                _require(a == b, f"result {r} differs from operand {t} outside all_gather_dim")
        _require(t.shape[d] and r.shape[d] % t.shape[d] == 0 or r.shape[d] == t.shape[d] == 0,
                 f"result dimension {d} ({r.shape[d]}) is not a multiple of the operand's "
                 f"({t.shape[d]})")
        if n is not None and t.shape[d]:
            _require(r.shape[d] == n * t.shape[d],
                     f"result dimension {d} must be {n} x {t.shape[d]} (groups of {n})")


register(OpDef("all_gather", lambda ts, a, r: None, None, attrs={
    "all_gather_dim": Attr("int"), **_GROUP_ATTRS, **_GLOBAL_IDS},
    verify=_verify_all_gather, result_type_given=True, traits={COLLECTIVE},
    doc="concatenates the operands of the process group along all_gather_dim"))


def _verify_reduce_scatter(ts, attrs, regions, rts):
    _require(len(ts) == 1 and len(rts) == 1, "reduce_scatter takes one operand")
    _check_groups(attrs)
    _scalar_computation(regions, ts, "computation")
    t, r = ts[0], rts[0]
    d = attrs["scatter_dimension"]
    _require(0 <= d < t.rank, f"scatter_dimension {d} out of range for rank {t.rank}")
    _require(r.dtype == t.dtype and r.rank == t.rank, f"result {r} does not match operand {t}")
    for i, (a, b) in enumerate(zip(t.shape, r.shape)):
        if i != d:
            _require(a == b, f"result {r} differs from operand {t} outside scatter_dimension")
    _require(r.shape[d] > 0 and t.shape[d] % r.shape[d] == 0,
             f"operand dimension {d} ({t.shape[d]}) is not a multiple of the result's ({r.shape[d]})")
    n = _group_size(attrs)
    if n is not None:
        _require(t.shape[d] == n * r.shape[d],
                 f"operand dimension {d} must be {n} x the result's {r.shape[d]} (groups of {n})")


register(OpDef("reduce_scatter", lambda ts, a, r: None, 1, regions=("computation",), attrs={
    "scatter_dimension": Attr("int"), **_GROUP_ATTRS, **_GLOBAL_IDS},
    verify=_verify_reduce_scatter, result_type_given=True, traits={COLLECTIVE},
    doc="reduces over the process group, then each process keeps its slice of scatter_dimension"))


def _infer_all_to_all(ts, attrs, regions):
    _require(len(ts) > 0, "all_to_all takes at least one operand")
    _check_groups(attrs)
    sd, cd, n = attrs["split_dimension"], attrs["concat_dimension"], attrs["split_count"]
    _require(n > 0, f"split_count must be positive, got {n}")
    groups = attrs.get("replica_groups", ())
    for g in groups:
        _require(len(g) == n, f"replica group {list(g)} has {len(g)} ids, split_count is {n}")
    out = []
    for t in ts:
        _require(0 <= sd < t.rank and 0 <= cd < t.rank,
                 f"split_dimension {sd} / concat_dimension {cd} out of range for rank {t.rank}")
        _require(t.shape[sd] % n == 0, f"dimension {sd} of {t} is not divisible by split_count {n}")
        shape = list(t.shape)
        shape[sd] //= n
        shape[cd] *= n
        out.append(_t(shape, t.dtype))
    return out


register(OpDef("all_to_all", _infer_all_to_all, None, attrs={
    "split_dimension": Attr("int"), "concat_dimension": Attr("int"), "split_count": Attr("int"),
    **_GROUP_ATTRS}, traits={COLLECTIVE},
    doc="splits each operand in split_count blocks, sends block i to the group's process i and "
        "concatenates what it receives along concat_dimension"))


def _infer_permute(ts, attrs, regions):
    pairs = attrs["source_target_pairs"]
    sources, targets = set(), set()
    for s, t in pairs:
        _require(s >= 0 and t >= 0, f"source_target_pairs has a negative id in {[s, t]}")
        _require(s not in sources, f"source {s} appears twice in source_target_pairs")
        _require(t not in targets, f"target {t} appears twice in source_target_pairs")
        sources.add(s)
        targets.add(t)
    return [t.without_layout() for t in ts]


register(OpDef("collective_permute", _infer_permute, 1, attrs={
    "source_target_pairs": Attr("pairs"), "channel_id": Attr("int", 0)},
    traits={COLLECTIVE},
    doc="each target receives its source's operand; a process that is no target gets zeros"))


def _infer_broadcast(ts, attrs, regions):
    _check_groups(attrs)
    return [t.without_layout() for t in ts]


register(OpDef("collective_broadcast", _infer_broadcast, 1, attrs=dict(_GROUP_ATTRS),
               traits={COLLECTIVE, NOT_TRACED},
               doc="every process of a group gets the operand of the group's first process; "
                   "a process in no group gets zeros"))

register(OpDef("replica_id", lambda ts, a, r: [TensorType((), u32)], 0,
               traits={COLLECTIVE, NON_DIFFERENTIABLE}, doc="this process's replica id (u32)"))
register(OpDef("partition_id", lambda ts, a, r: [TensorType((), u32)], 0,
               traits={COLLECTIVE, NON_DIFFERENTIABLE}, doc="this process's partition id (u32)"))


def _infer_run_parallel(ts, attrs, regions):
    nr, np_ = attrs["num_replicas"], attrs["num_partitions"]
    _require(nr > 0 and np_ > 0, f"a grid of {nr} x {np_} processes")
    _require(len(regions) == nr * np_,
             f"{nr} x {np_} processes need {nr * np_} program regions, got {len(regions)}")
    want = [t.without_layout() for r in regions for t in r.arg_types]
    got = [t.without_layout() for t in ts]
    _require(got == want, f"operands ({', '.join(map(str, got))}) are not the programs' "
                          f"arguments in process order ({', '.join(map(str, want))})")
    return [t.without_layout() for r in regions for t in r.output_types]


register(OpDef("run_parallel", _infer_run_parallel, None, regions=("*program",), attrs={
    "num_replicas": Attr("int"), "num_partitions": Attr("int")},
    traits={COLLECTIVE, NOT_TRACED},
    doc="runs one program region per process (replica-major order) concurrently; operands and "
        "results are the processes' in that order"))
