"""Collective forms newer than jaxlib's StableHLO (1.17), written with hlo's own ops as they
are imported (as ``triangular_solve`` and ``fft`` are, ``ir/decompositions.py``):

- ``collective_broadcast`` with ``has_dynamic_root``: data operands and a last operand
  ``root`` (``i32[k]``): data operand ``k`` comes from the process at position ``root[k]`` of
  the process's group -> per operand an ``all_gather`` over the group (a new leading dimension)
  and a ``dynamic_slice`` at ``root[k]``;
- ``collective_reduce`` (no channel: groups of replicas): the group's first process gets the
  reduction, the others zeros -> ``all_reduce`` and a ``select`` on whether this replica opens
  its group (a table of replica ids, indexed by ``replica_id``).

jaxlib's parser rejects these, so ``parse`` (``mlir_bridge``) retries a text it could not parse
with their op names moved to the unregistered ``hlo_newer`` dialect (``newer_syntax.rewrite``);
the importer hands those ops here. Other uses of the ``hlo_newer`` ops (a channel on collective_reduce) are
unsupported.
"""
from __future__ import annotations

from typing import List

import numpy as np

from ..types import TensorType, s32
from . import opmap
from .errors import StableHLOError, UnsupportedError
from .newer_syntax import DIALECT


def _groups(attrs, name, loc):
    if "replica_groups" not in attrs:
        raise StableHLOError(f"{name} without replica_groups" + (f" at {loc}" if loc else ""))
    return opmap.read_groups(attrs["replica_groups"])


def _channel(attrs) -> int:
    if "channel_handle" not in attrs:
        return 0
    return opmap.read_struct("all_reduce", attrs["channel_handle"])["channel_id"]


def import_op(imp, op, name: str, attrs, operands, rtypes, b, loc) -> List:
    short = name[len(DIALECT) + 1:]
    full = "stablehlo." + short
    if short == "collective_broadcast":
        return _dynamic_root_broadcast(attrs, operands, rtypes, b, loc, full)
    if short == "collective_reduce":
        return _collective_reduce(imp, op, attrs, operands, rtypes, b, loc, full)
    raise UnsupportedError(name, "op outside hlo's op table", loc)


def _dynamic_root_broadcast(attrs, operands, rtypes, b, loc, full):
    for k in attrs:
        if k not in ("replica_groups", "channel_handle", "has_dynamic_root") and not opmap.ignored_attr(k):
            raise UnsupportedError(f"attribute '{k}' of {full}", "hlo has no equivalent", loc)
    groups = _groups(attrs, full, loc)
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise UnsupportedError(f"{full} with has_dynamic_root", "groups of different sizes", loc)
    n = sizes.pop()
    *data, root = operands
    if root.type.rank != 1 or root.type.shape[0] != len(data) or not root.type.dtype.is_int:
        raise StableHLOError(f"{full}: the root operand must be an integer vector with one entry per "
                             f"data operand, got {root.type}" + (f" at {loc}" if loc else ""))
    base = {"replica_groups": groups}
    ch = _channel(attrs)
    if ch > 0:
        base["channel_id"] = ch
    outs = []
    for k, x in enumerate(data):
        t = x.type
        stacked = b.value("reshape", [x], result_types=[TensorType((1,) + t.shape, t.dtype)])
        gathered = b.op("all_gather", [stacked], dict(base, all_gather_dim=0),
                        result_types=[TensorType((n,) + t.shape, t.dtype)]).results[0]
        rk = b.value("slice", [root], attrs={"start_indices": (k,), "limit_indices": (k + 1,)})
        rk = b.value("reshape", [rk], result_types=[TensorType((), root.type.dtype)])
        rk = b.value("convert", [rk], result_types=[TensorType((), s32)])
        zero = b.value("constant", attrs={"value": np.array(0, np.int32)})
        picked = b.op("dynamic_slice", [gathered, rk] + [zero] * t.rank,
                      {"slice_sizes": (1,) + t.shape},
                      result_types=[TensorType((1,) + t.shape, t.dtype)]).results[0]
        outs.append(b.value("reshape", [picked], result_types=[TensorType(t.shape, t.dtype)]))
    return outs


def _collective_reduce(imp, op, attrs, operands, rtypes, b, loc, full):
    for k in attrs:
        if k not in ("replica_groups", "channel_handle") and not opmap.ignored_attr(k):
            raise UnsupportedError(f"attribute '{k}' of {full}", "hlo has no equivalent", loc)
    if _channel(attrs) > 0:
        raise UnsupportedError(f"{full} with a channel", "only replica groups (no channel)", loc)
    groups = _groups(attrs, full, loc)
    if len(operands) != 1 or not op.regions:
        raise UnsupportedError(full, "one operand and a computation", loc)
    (x,) = operands
    region = imp.region(op.regions[0], "computation", {})
    reduced = b.op("all_reduce", [x], {"replica_groups": groups}, regions=[region]).results[0]
    top = max(i for g in groups for i in g) + 1
    table = np.zeros(top, np.int32)
    for g in groups:
        table[g[0]] = 1
    rid = b.value("convert", [b.value("replica_id", [])], result_types=[TensorType((), s32)])
    t = b.value("constant", attrs={"value": table})
    first = b.op("dynamic_slice", [t, rid], {"slice_sizes": (1,)},
                 result_types=[TensorType((1,), s32)]).results[0]
    first = b.value("reshape", [first], result_types=[TensorType((), s32)])
    one = b.value("constant", attrs={"value": np.array(1, np.int32)})
    is_root = b.value("compare", [first, one], attrs={"comparison_direction": "EQ"})
    pred = b.value("broadcast_in_dim", [is_root], attrs={"broadcast_dimensions": ()},
                   result_types=[TensorType(x.type.shape, is_root.type.dtype)])
    zeros = b.value("broadcast_in_dim", [b.value("constant", attrs={"value": np.zeros((), x.type.np_dtype)})],
                    attrs={"broadcast_dimensions": ()}, result_types=[x.type])
    return [b.value("select", [pred, reduced, zeros])]
