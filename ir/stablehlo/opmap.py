"""Which StableHLO op is which hlo op, and how their attributes are spelled on each side.

hlo's op names are StableHLO's without the ``stablehlo.`` prefix. StableHLO's struct attributes
(dot, gather, scatter and convolution dimension numbers) are flattened into hlo's named
attributes with the spec's field names; everything else maps one attribute to one attribute
through a codec that reads the MLIR attribute object and writes its MLIR text. Ops of the
table not listed here (the elementwise ops, select, clamp, convert, reshape, ...) have no
attributes that hlo keeps.

Attributes equal to their default (strides of ones, zero padding, ``indices_are_sorted =
false``, ...) are dropped on import, so a module prints the same whether it was traced or
imported, and export writes them back out where StableHLO requires them.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from .. import ops as op_table

# Attributes that carry no semantics hlo keeps: sharding and layout annotations, precision
# hints and dot algorithms (hlo computes at the operands' precision, which is at least what
# they ask for), shape hints of dynamic ops, and frontend bookkeeping.
IGNORED_ATTRS = {"precision_config", "result_accuracy", "algorithm",
                 "known_expanding_dimensions", "known_nonexpanding_dimensions"}
IGNORED_PREFIXES = ("mhlo.", "jax.", "sdy.", "xla.", "tf.", "xla_")


def ignored_attr(name: str) -> bool:
    return name in IGNORED_ATTRS or name.startswith(IGNORED_PREFIXES)


# --------------------------------------------------------------------------------------------
# Codecs: read an MLIR attribute object, write MLIR attribute text.
# --------------------------------------------------------------------------------------------

def _ir():
    from jaxlib.mlir import ir
    return ir


def read_ints(a) -> Tuple[int, ...]:
    ir = _ir()
    if isinstance(a, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr)):
        return tuple(int(x) for x in a)
    if isinstance(a, ir.DenseElementsAttr):
        return tuple(int(x) for x in np.array(a).reshape(-1))
    if isinstance(a, ir.ArrayAttr):
        return tuple(int(ir.IntegerAttr(x).value) for x in a)
    raise TypeError(f"expected an integer array attribute, got {a}")


def read_int(a) -> int:
    return int(a.value)


def read_bool(a) -> bool:
    return bool(a.value)


def read_bools(a) -> Tuple[bool, ...]:
    ir = _ir()
    if isinstance(a, ir.DenseBoolArrayAttr):
        return tuple(bool(x) for x in a)
    if isinstance(a, ir.DenseElementsAttr):
        return tuple(bool(x) for x in np.array(a).reshape(-1))
    raise TypeError(f"expected a boolean array attribute, got {a}")


def read_pairs(a) -> Tuple[Tuple[int, int], ...]:
    arr = np.array(a).astype(np.int64)
    if arr.size == 0:
        return ()
    return tuple((int(lo), int(hi)) for lo, hi in arr.reshape(-1, 2))


def read_direction(a) -> str:
    from jaxlib.mlir.dialects import stablehlo
    return stablehlo.ComparisonDirectionAttr(a).value


def read_compare_type(a):
    from jaxlib.mlir.dialects import stablehlo
    v = stablehlo.ComparisonTypeAttr(a).value
    return None if v == "NOTYPE" else v


def write_i64(v) -> str:
    return f"{int(v)} : i64"


def write_i32(v) -> str:
    return f"{int(v)} : i32"


def write_bool(v) -> str:
    return "true" if v else "false"


def write_i64s(v) -> str:
    return "array<i64" + (": " + ", ".join(str(int(x)) for x in v) if len(v) else "") + ">"


def write_bools(v) -> str:
    return "array<i1" + (": " + ", ".join("true" if x else "false" for x in v) if len(v) else "") + ">"


def write_pairs(v) -> str:
    if not len(v):
        return "dense<> : tensor<0x2xi64>"
    body = ", ".join(f"[{int(lo)}, {int(hi)}]" for lo, hi in v)
    return f"dense<[{body}]> : tensor<{len(v)}x2xi64>"


def write_direction(v) -> str:
    return f"#stablehlo<comparison_direction {v}>"


def write_compare_type(v) -> str:
    return f"#stablehlo<comparison_type {v}>"


def read_groups(a) -> Tuple[Tuple[int, ...], ...]:
    """Replica groups: StableHLO's dense [groups x size] array, -1 padding ragged groups."""
    arr = np.array(a).astype(np.int64)
    if arr.size == 0:
        return ()
    return tuple(tuple(int(i) for i in row if i != -1) for row in arr.reshape(arr.shape[0], -1))


def write_groups(v) -> str:
    if not len(v):
        return "dense<> : tensor<0x0xi64>"
    width = max(len(g) for g in v)
    rows = ", ".join("[" + ", ".join(str(int(i)) for i in list(g) + [-1] * (width - len(g))) + "]"
                     for g in v)
    return f"dense<[{rows}]> : tensor<{len(v)}x{width}xi64>"


def read_unit(a) -> bool:
    return True  # a unit attribute is true by being there


def write_unit(v) -> str:
    return "unit"


INTS = (read_ints, write_i64s)
INT = (read_int, write_i64)
INT32 = (read_int, write_i32)
BOOL = (read_bool, write_bool)
BOOLS = (read_bools, write_bools)
PAIRS = (read_pairs, write_pairs)
DIRECTION = (read_direction, write_direction)
COMPARE_TYPE = (read_compare_type, write_compare_type)
GROUPS = (read_groups, write_groups)
UNIT = (read_unit, write_unit)

# op -> {attribute name (the same on both sides): codec}
SIMPLE_ATTRS: Dict[str, Dict[str, Tuple[Callable, Callable]]] = {
    "compare": {"comparison_direction": DIRECTION, "compare_type": COMPARE_TYPE},
    "iota": {"iota_dimension": INT},
    "broadcast_in_dim": {"broadcast_dimensions": INTS},
    "transpose": {"permutation": INTS},
    "slice": {"start_indices": INTS, "limit_indices": INTS, "strides": INTS},
    "dynamic_slice": {"slice_sizes": INTS},
    "concatenate": {"dimension": INT},
    "pad": {"edge_padding_low": INTS, "edge_padding_high": INTS, "interior_padding": INTS},
    "reverse": {"dimensions": INTS},
    "reduce": {"dimensions": INTS},
    "reduce_window": {"window_dimensions": INTS, "window_strides": INTS, "base_dilations": INTS,
                      "window_dilations": INTS, "padding": PAIRS},
    "sort": {"dimension": INT, "is_stable": BOOL},
    "reduce_precision": {"exponent_bits": INT32, "mantissa_bits": INT32},
    "convolution": {"window_strides": INTS, "padding": PAIRS, "lhs_dilation": INTS,
                    "rhs_dilation": INTS, "window_reversal": BOOLS,
                    "feature_group_count": INT, "batch_group_count": INT},
    "gather": {"slice_sizes": INTS, "indices_are_sorted": BOOL},
    "scatter": {"indices_are_sorted": BOOL, "unique_indices": BOOL},
    "all_reduce": {"replica_groups": GROUPS, "use_global_device_ids": UNIT},
    "all_gather": {"all_gather_dim": INT, "replica_groups": GROUPS, "use_global_device_ids": UNIT},
    "reduce_scatter": {"scatter_dimension": INT, "replica_groups": GROUPS,
                       "use_global_device_ids": UNIT},
    "all_to_all": {"split_dimension": INT, "concat_dimension": INT, "split_count": INT,
                   "replica_groups": GROUPS},
    "collective_permute": {"source_target_pairs": PAIRS},
    "collective_broadcast": {"replica_groups": GROUPS},
}

# Struct attributes: MLIR attribute name -> the hlo attribute names of its fields.
DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
              "lhs_contracting_dimensions", "rhs_contracting_dimensions")
GATHER_FIELDS = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                 "start_indices_batching_dims", "start_index_map", "index_vector_dim")
SCATTER_FIELDS = ("update_window_dims", "inserted_window_dims", "input_batching_dims",
                  "scatter_indices_batching_dims", "scatter_dims_to_operand_dims", "index_vector_dim")
CONV_FIELDS = ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
               "kernel_input_feature_dimension", "kernel_output_feature_dimension",
               "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
               "output_spatial_dimensions")
STRUCT_ATTRS = {
    "dot_general": ("dot_dimension_numbers", DOT_FIELDS),
    "gather": ("dimension_numbers", GATHER_FIELDS),
    "scatter": ("scatter_dimension_numbers", SCATTER_FIELDS),
    "convolution": ("dimension_numbers", CONV_FIELDS),
    # the collectives' channel_handle: hlo keeps its handle (channel_id; 0 = no channel), the
    # channel type carries no semantics of these ops
    **{op: ("channel_handle", ("channel_id",)) for op in (
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
        "collective_broadcast")},
}


def read_struct(op_name: str, a) -> Dict[str, Any]:
    """The flattened fields of a struct attribute, named as hlo names them."""
    from jaxlib.mlir.dialects import stablehlo
    if STRUCT_ATTRS[op_name][0] == "channel_handle":
        return {"channel_id": int(stablehlo.ChannelHandle(a).handle)}
    if op_name == "dot_general":
        s = stablehlo.DotDimensionNumbers(a)
        return {f: tuple(getattr(s, f)) for f in DOT_FIELDS}
    if op_name == "gather":
        g = stablehlo.GatherDimensionNumbers(a)
        out = {f: tuple(getattr(g, f)) for f in GATHER_FIELDS[:-1]}
        out["index_vector_dim"] = int(g.index_vector_dim)
        return out
    if op_name == "scatter":
        sc = stablehlo.ScatterDimensionNumbers(a)
        out = {f: tuple(getattr(sc, f)) for f in SCATTER_FIELDS[:-2]}
        out["scatter_dims_to_operand_dims"] = tuple(sc.scattered_dims_to_operand_dims)
        out["index_vector_dim"] = int(sc.index_vector_dim)
        return out
    if op_name == "convolution":
        s = stablehlo.ConvDimensionNumbers(a)
        out = {}
        for f in CONV_FIELDS:
            v = getattr(s, f)
            out[f] = tuple(int(x) for x in v) if f.endswith("dimensions") and not isinstance(v, int) else int(v)
        return out
    raise KeyError(op_name)


def _list(v) -> str:
    return "[" + ", ".join(str(int(x)) for x in v) + "]"


def write_struct(op_name: str, attrs: Dict[str, Any]) -> Tuple[str, str]:
    """(MLIR attribute name, MLIR text) of the struct attribute of an hlo op."""
    g = lambda k: attrs.get(k, ())
    if STRUCT_ATTRS[op_name][0] == "channel_handle":
        h = int(attrs.get("channel_id", 0))
        return "channel_handle", f"#stablehlo.channel_handle<handle = {h}, type = {1 if h > 0 else 0}>"
    if op_name == "dot_general":
        fields = [f"{f} = {_list(g(f))}" for f in DOT_FIELDS if g(f)]
        return "dot_dimension_numbers", "#stablehlo.dot<" + ", ".join(fields) + ">"
    if op_name == "gather":
        fields = [f"{f} = {_list(g(f))}" for f in GATHER_FIELDS[:-1] if g(f)]
        fields.append(f"index_vector_dim = {int(attrs['index_vector_dim'])}")
        return "dimension_numbers", "#stablehlo.gather<" + ", ".join(fields) + ">"
    if op_name == "scatter":
        fields = [f"{f} = {_list(g(f))}" for f in SCATTER_FIELDS[:-1] if g(f)]
        fields.append(f"index_vector_dim = {int(attrs['index_vector_dim'])}")
        return "scatter_dimension_numbers", "#stablehlo.scatter<" + ", ".join(fields) + ">"
    if op_name == "convolution":
        from jaxlib.mlir.dialects import stablehlo

        from .mlir_bridge import context
        with context():
            s = stablehlo.ConvDimensionNumbers.get(**{f: attrs[f] for f in CONV_FIELDS})
            return "dimension_numbers", str(s)
    raise KeyError(op_name)


# Attribute values that mean the same as leaving the attribute out.
def implied_default(name: str, value) -> bool:
    if name in ("strides", "window_strides", "base_dilations", "window_dilations",
                "lhs_dilation", "rhs_dilation"):
        return all(int(x) == 1 for x in value)
    if name == "padding":
        return all(int(lo) == 0 and int(hi) == 0 for lo, hi in value)
    if name == "window_reversal":
        return not any(value)
    return False


def drop_defaults(opdef: op_table.OpDef, attrs: Dict[str, Any]) -> Dict[str, Any]:
    """``attrs`` without the entries that equal their default."""
    out = {}
    for k, v in attrs.items():
        spec = opdef.attrs.get(k)
        if spec is not None and not spec.required and spec.default is not None:
            d = spec.default
            if (tuple(v) if isinstance(v, (list, tuple)) else v) == d:
                continue
        if spec is not None and spec.default is None and not spec.required and implied_default(k, v):
            continue
        out[k] = v
    return out


def ones(n: int) -> List[int]:
    return [1] * n
