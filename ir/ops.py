"""The op table: every operation of the hlo IR, defined in one place.

Each ``OpDef`` states an op's operand count, region names, attributes (with kinds and
defaults), result-type inference and extra verification. Names and semantics follow the
StableHLO specification (openxla/stablehlo docs/spec.md); struct attributes of StableHLO
(dot dimension numbers, gather/scatter/convolution dimension numbers) are flattened into
plain named attributes with the spec's field names.

Inference functions take ``(operand_types, attrs, regions)`` and return the result types, or
raise ``OpError`` with a message that the verifier decorates with the op, its operand types
and its source location.

Each op also states its *traits* (``TRAITS``: elementwise, commutative, expensive, ...), the
facts the passes, the interpreter, autodiff and the backends rely on. They derive their op
categories from here (``with_trait``) instead of listing op names; ``tests/ir/test_op_table.py``
checks that every op has an interpreter rule, a VJP rule (or a trait saying why not) and a
lowering on every compiled target.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import ml_dtypes
import numpy as np

from .dim_expr import DimExpr
from .types import ElementType, TensorType, element_type, pred, s32


class OpError(Exception):
    """A rule of an op is broken; the verifier adds the op name, operand types and location."""


# --------------------------------------------------------------------------------------------
# Attribute kinds
# --------------------------------------------------------------------------------------------

def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _norm_int(x):
    if isinstance(x, DimExpr):  # a symbolic size (slice bounds, slice sizes: dim_expr.py)
        return x
    if not _is_int(x):
        raise OpError(f"expected an integer, got {x!r}")
    return int(x)


def _norm_ints(x):
    if not isinstance(x, (list, tuple, np.ndarray)):
        raise OpError(f"expected a list of integers, got {x!r}")
    return tuple(_norm_int(v) for v in x)


def _norm_bool(x):
    if not isinstance(x, (bool, np.bool_)):
        raise OpError(f"expected a boolean, got {x!r}")
    return bool(x)


def _norm_bools(x):
    if not isinstance(x, (list, tuple, np.ndarray)):
        raise OpError(f"expected a list of booleans, got {x!r}")
    return tuple(_norm_bool(v) for v in x)


def _norm_str(x):
    if not isinstance(x, str):
        raise OpError(f"expected a string, got {x!r}")
    return x


def _norm_pairs(x):
    if not isinstance(x, (list, tuple, np.ndarray)):
        raise OpError(f"expected a list of [low, high] pairs, got {x!r}")
    out = []
    for p in x:
        p = _norm_ints(p)
        if len(p) != 2:
            raise OpError(f"expected a [low, high] pair, got {list(p)}")
        out.append(p)
    return tuple(out)


def _norm_array(x):
    if not isinstance(x, np.ndarray):
        raise OpError(f"expected a dense array, got {type(x).__name__}")
    return x


def _norm_float(x):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise OpError(f"expected a number, got {x!r}")
    return float(x)


ATTR_KINDS: Dict[str, Callable[[Any], Any]] = {
    "int": _norm_int, "ints": _norm_ints, "bool": _norm_bool, "bools": _norm_bools,
    "str": _norm_str, "pairs": _norm_pairs, "array": _norm_array, "float": _norm_float,
}

_REQUIRED = object()


# --------------------------------------------------------------------------------------------
# Traits
# --------------------------------------------------------------------------------------------

ELEMENTWISE = "elementwise"
COMMUTATIVE = "commutative"
IDEMPOTENT = "idempotent"
EXPENSIVE = "expensive"
TRANSCENDENTAL = "transcendental"
MATH_ROUTINE = "math_routine"
LONG_MATH_ROUTINE = "long_math_routine"
MOVEMENT = "movement"
WINDOW_OF_OPERAND = "window_of_operand"
MAY_BITCAST = "may_bitcast"
INNER_LOOP = "inner_loop"
WHOLE_ARRAY = "whole_array"
CONTROL_FLOW = "control_flow"
OPEN_REGIONS = "open_regions"
BARRIER = "barrier"
KERNEL = "kernel"
NON_DIFFERENTIABLE = "non_differentiable"
NOT_TRACED = "not_traced"
SIDE_EFFECT = "side_effect"
COLLECTIVE = "collective"

TRAITS: Dict[str, str] = {
    ELEMENTWISE: "each result element depends only on the operand elements at the same index "
                 "(a scalar operand of select/clamp is read at every index)",
    COMMUTATIVE: "binary, commutative and associative: a reduce or scatter body of this one op "
                 "may be applied in any order (add, multiply, maximum, minimum, and, or, xor)",
    IDEMPOTENT: "binary and op(x, x) == x: applying it to one value twice changes nothing",
    EXPENSIVE: "per-element work worth not repeating (XLA's expensive ops): not recomputed per "
               "broadcast element, not put into a dot's operand, kept per row in row kernels",
    TRANSCENDENTAL: "counted as a transcendental by cost analysis (XLA's HloCostAnalysis set: "
                    "the expensive ops other than divide and remainder; sqrt and rsqrt included)",
    MATH_ROUTINE: "computed by a math routine (mathlib polynomial or libm call), a serial chain of "
                  "~20 instructions rather than one instruction: sqrt and rsqrt are not",
    LONG_MATH_ROUTINE: "a math routine of about twice that length (logistic: an exp, a "
                       "reciprocal and a select)",
    MOVEMENT: "data movement (or an index function, iota) an elemental emitter computes at any "
              "output index from operand elements, at no arithmetic cost",
    WINDOW_OF_OPERAND: "reads only a box of its first operand the size of its result (slices)",
    MAY_BITCAST: "may move no data: under the assigned layouts its result can be its operand's "
                 "bytes (layout.is_bitcast decides; then it shares the operand's buffer)",
    INNER_LOOP: "each result element is a loop over many operand elements (reductions, windows, "
                "contractions): materialized inside a fusion before the elementwise outputs",
    WHOLE_ARRAY: "computed by an algorithm over whole arrays, never element by element "
                 "(sort, scatter): a kernel of its own",
    CONTROL_FLOW: "runs regions or a function as a program (loops, branches, calls): lowered "
                  "to nested steps, never folded or fused",
    OPEN_REGIONS: "its regions may read values of the enclosing scope (others are isolated)",
    BARRIER: "returns its operands unchanged, but nothing may be folded or moved across it",
    KERNEL: "a kernel made by the fusion passes (its region is the fused computation)",
    NON_DIFFERENTIABLE: "no VJP rule: its results are integers or pred, or it has no operands, so "
                        "no cotangent reaches it; or (bitcast_convert) reinterpreting bits has no "
                        "derivative, and hlo.grad through it is an error naming the user's line",
    NOT_TRACED: "the frontend never traces it (made by the StableHLO importer or the passes and "
                "gone before or after autodiff runs), so it needs no VJP rule",
    SIDE_EFFECT: "calls back into the host (hlo.debug.print, hlo.pure_callback): never removed, "
                 "merged, folded or fused, and kept in program order with the other side-effecting "
                 "ops; an op whose regions hold one counts as one (passes/util.has_side_effect)",
    COLLECTIVE: "talks to the other processes of a parallel run (ir/collective_ops.py): never "
                "constant-folded (its value depends on the other processes) nor fused",
}


@dataclass
class Attr:
    kind: str
    default: Any = _REQUIRED
    choices: Optional[Tuple[str, ...]] = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass
class OpDef:
    """The definition of one op."""

    name: str
    infer: Callable[[List[TensorType], Dict[str, Any], list], List[TensorType]]
    num_operands: Optional[int] = None  # None: variadic (checked by ``verify``)
    regions: Tuple[str, ...] = ()  # region names; ("*branch",) for a variable number
    attrs: Dict[str, Attr] = field(default_factory=dict)
    verify: Optional[Callable[[List[TensorType], Dict[str, Any], list, List[TensorType]], None]] = None
    result_dtype_free: bool = False  # result element type may be chosen by the producer
    result_type_given: bool = False  # result type cannot be inferred; it is stated by the op
    doc: str = ""
    traits: FrozenSet[str] = frozenset()  # keys of TRAITS
    # elementwise arithmetic ops (no attributes, operands of one type): the TYPE_CLASSES key of
    # the element types they accept
    element_types: Optional[str] = None

    def has(self, trait: str) -> bool:
        return trait in self.traits

    def normalize_attrs(self, attrs: Dict[str, Any]) -> Dict[str, Any]:
        out = {}
        for k, v in attrs.items():
            spec = self.attrs.get(k)
            if spec is None:
                raise OpError(f"unknown attribute '{k}' (known: {', '.join(sorted(self.attrs)) or 'none'})")
            try:
                v = ATTR_KINDS[spec.kind](v)
            except OpError as e:
                raise OpError(f"attribute '{k}': {e}") from None
            if spec.choices is not None and v not in spec.choices:
                raise OpError(f"attribute '{k}' must be one of {', '.join(spec.choices)}, got {v!r}")
            out[k] = v
        for k, spec in self.attrs.items():
            if k not in out:
                if spec.required:
                    raise OpError(f"missing attribute '{k}'")
        return out

    def attr(self, attrs: Dict[str, Any], name: str):
        """The attribute's value, or its default."""
        if name in attrs:
            return attrs[name]
        d = self.attrs[name].default
        return None if d is _REQUIRED else d


OPS: Dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in OPS:
        raise ValueError(f"op '{opdef.name}' is defined twice")
    unknown = set(opdef.traits) - set(TRAITS)
    if unknown:
        raise ValueError(f"op '{opdef.name}' has unknown traits {sorted(unknown)}")
    opdef.traits = frozenset(opdef.traits)
    OPS[opdef.name] = opdef
    return opdef


def with_trait(*traits: str) -> frozenset:
    """The names of the ops that have any of ``traits``."""
    for t in traits:
        if t not in TRAITS:
            raise KeyError(f"unknown trait {t!r}")
    return frozenset(n for n, d in OPS.items() if not d.traits.isdisjoint(traits))


def get(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise OpError(f"unknown op '{name}'") from None


# --------------------------------------------------------------------------------------------
# Helpers for the rules
# --------------------------------------------------------------------------------------------

def _t(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), dtype)


def _check_dims(dims, rank, what):
    seen = set()
    for d in dims:
        if not 0 <= d < rank:
            raise OpError(f"{what} {list(dims)} out of range for rank {rank}")
        if d in seen:
            raise OpError(f"{what} {list(dims)} has a repeated dimension")
        seen.add(d)


def _same_types(ts, what="operands"):
    for t in ts[1:]:
        if not ts[0].same_shape_dtype(t):
            raise OpError(f"{what} must have the same type")


def _require(ok, msg):
    if not ok:
        raise OpError(msg)


TYPE_CLASSES = {
    "float": lambda e: e.is_float,
    "int": lambda e: e.is_int,
    "integral": lambda e: e.is_integral,
    "numeric": lambda e: e.is_int or e.is_float or e.is_complex,
    "real_numeric": lambda e: e.is_int or e.is_float,
    "float_or_complex": lambda e: e.is_float or e.is_complex,
    "any": lambda e: True,
    "signed_or_float": lambda e: e.is_signed or e.is_float or e.is_complex,
}

_CLASS_WORDS = {
    "float": "a floating-point", "int": "an integer", "integral": "a boolean or integer",
    "numeric": "an integer, floating-point or complex",
    "real_numeric": "an integer or floating-point",
    "float_or_complex": "a floating-point or complex", "any": "any",
    "signed_or_float": "a signed integer, floating-point or complex",
}


def _elementwise(name, n, accepts, traits=(), result_pred=False, doc=""):
    check = TYPE_CLASSES[accepts]

    def infer(ts, attrs, regions):
        _same_types(ts)
        _require(check(ts[0].dtype), f"element type {ts[0].dtype} is not {_CLASS_WORDS[accepts]} type")
        if result_pred:
            return [_t(ts[0].shape, pred)]
        # abs of a complex number is its (real) modulus
        return [_t(ts[0].shape, ts[0].dtype.component if name == "abs" else ts[0].dtype)]

    return register(OpDef(name, infer, num_operands=n, doc=doc, element_types=accepts,
                          traits=frozenset((ELEMENTWISE,) + tuple(traits))))


_EXP = (EXPENSIVE,)
_TRANS = (EXPENSIVE, TRANSCENDENTAL)
_ROUTINE = (EXPENSIVE, TRANSCENDENTAL, MATH_ROUTINE)
_INT_ONLY = (NON_DIFFERENTIABLE,)
_REDUCER = (COMMUTATIVE,)
_IDEMPOTENT_REDUCER = (COMMUTATIVE, IDEMPOTENT)

# Unary elementwise ops (spec section "Ops").
_FC = "float_or_complex"
for _name, _cls, _traits in [
    ("abs", "signed_or_float", ()), ("negate", "numeric", ()), ("sign", "signed_or_float", ()),
    ("exponential", _FC, _ROUTINE), ("exponential_minus_one", _FC, _ROUTINE),
    ("log", _FC, _ROUTINE), ("log_plus_one", _FC, _ROUTINE),
    ("logistic", _FC, _ROUTINE + (LONG_MATH_ROUTINE,)), ("tanh", _FC, _ROUTINE),
    ("sqrt", _FC, _TRANS), ("rsqrt", _FC, _TRANS), ("cbrt", _FC, _ROUTINE),
    ("sine", _FC, _ROUTINE), ("cosine", _FC, _ROUTINE), ("tan", _FC, _ROUTINE),
    ("floor", "float", ()), ("ceil", "float", ()), ("round_nearest_even", "float", ()),
    ("round_nearest_afz", "float", ()), ("not", "integral", _INT_ONLY),
    ("popcnt", "int", _INT_ONLY), ("count_leading_zeros", "int", _INT_ONLY),
]:
    _elementwise(_name, 1, _cls, _traits)
_elementwise("is_finite", 1, "float", _INT_ONLY, result_pred=True)

# Binary elementwise ops.
for _name, _cls, _traits in [
    ("add", "any", _REDUCER), ("subtract", "numeric", ()), ("multiply", "any", _REDUCER),
    ("divide", "numeric", _EXP), ("remainder", "real_numeric", _EXP),
    ("power", "numeric", _ROUTINE),
    ("maximum", "any", _IDEMPOTENT_REDUCER), ("minimum", "any", _IDEMPOTENT_REDUCER),
    ("atan2", _FC, _ROUTINE), ("and", "integral", _INT_ONLY + _IDEMPOTENT_REDUCER),
    ("or", "integral", _INT_ONLY + _IDEMPOTENT_REDUCER), ("xor", "integral", _INT_ONLY + _REDUCER),
    ("shift_left", "int", _INT_ONLY), ("shift_right_arithmetic", "int", _INT_ONLY),
    ("shift_right_logical", "int", _INT_ONLY),
]:
    _elementwise(_name, 2, _cls, _traits)

def identity(name: str, dtype: ElementType):
    """The identity element of the commutative op ``name`` on ``dtype`` (``op(e, x) == x``),
    as a numpy scalar of that type, or None (no such op or type): 0 for add/or/xor, 1 for multiply, all bits set
    for and (True for pred, -1 for signed integers), the lowest value for maximum (-inf for
    floats) and the highest for minimum."""
    d = OPS.get(name)
    if d is None or not d.has(COMMUTATIVE) or not TYPE_CLASSES[d.element_types](dtype):
        return None
    t = dtype.np_dtype.type
    if dtype.is_pred:
        return t(name in ("multiply", "and", "minimum"))
    if name in ("add", "or", "xor"):
        return t(0)
    if name == "multiply":
        return t(1)
    if name == "and":
        return t(-1) if dtype.is_signed else t(ml_dtypes.iinfo(dtype.np_dtype).max)
    lo = name == "maximum"
    if dtype.is_float or dtype.is_complex:
        return t(-np.inf if lo else np.inf)
    info = ml_dtypes.iinfo(dtype.np_dtype)
    return t(info.min if lo else info.max)


# The elementwise arithmetic ops (no attributes, operands of one type), by arity.
UNARY_ELEMENTWISE = tuple(n for n, d in OPS.items() if d.element_types and d.num_operands == 1)
BINARY_ELEMENTWISE = tuple(n for n, d in OPS.items() if d.element_types and d.num_operands == 2)


def _infer_reduce_precision(ts, attrs, regions):
    _require(ts[0].dtype.is_float, "operand must be floating-point")
    _require(attrs["exponent_bits"] >= 1, "exponent_bits must be at least 1")
    _require(attrs["mantissa_bits"] >= 0, "mantissa_bits must be non-negative")
    return [ts[0]]


register(OpDef("reduce_precision", _infer_reduce_precision, 1,
               attrs={"exponent_bits": Attr("int"), "mantissa_bits": Attr("int")},
               traits={ELEMENTWISE}))

COMPARISON_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _infer_compare(ts, attrs, regions):
    _same_types(ts)
    ct = attrs.get("compare_type")
    e = ts[0].dtype
    if ct is not None:
        ok = {"FLOAT": e.is_float or e.is_complex, "TOTALORDER": e.is_float, "SIGNED": e.is_signed,
              "UNSIGNED": e.is_unsigned or e.is_pred}[ct]
        _require(ok, f"compare_type {ct} does not fit element type {e}")
    return [_t(ts[0].shape, pred)]


register(OpDef("compare", _infer_compare, 2, attrs={
    "comparison_direction": Attr("str", choices=COMPARISON_DIRECTIONS),
    "compare_type": Attr("str", None, choices=COMPARE_TYPES)},
    traits={ELEMENTWISE, NON_DIFFERENTIABLE}))


def _infer_complex(ts, attrs, regions):
    _same_types(ts)
    e = ts[0].dtype
    _require(e.name in ("f32", "f64"), f"element type {e} is not f32 or f64")
    return [_t(ts[0].shape, element_type("c64" if e.name == "f32" else "c128"))]


def _infer_part(ts, attrs, regions):
    e = ts[0].dtype
    _require(e.is_float or e.is_complex, f"element type {e} is not a floating-point or complex type")
    return [_t(ts[0].shape, e.component)]


# complex(re, im); real and imag of a complex (of a float: the value and zero).
register(OpDef("complex", _infer_complex, 2, traits={ELEMENTWISE}))
register(OpDef("real", _infer_part, 1, traits={ELEMENTWISE}))
register(OpDef("imag", _infer_part, 1, traits={ELEMENTWISE}))


def _infer_select(ts, attrs, regions):
    p, a, b = ts
    _require(p.dtype == pred, f"predicate must be pred, got {p.dtype}")
    _require(a.same_shape_dtype(b), "on_true and on_false must have the same type")
    _require(p.rank == 0 or p.shape == a.shape, "predicate must be a scalar or have the operands' shape")
    return [a.without_layout()]


register(OpDef("select", _infer_select, 3, traits={ELEMENTWISE}))


def _infer_clamp(ts, attrs, regions):
    lo, x, hi = ts
    for b, w in ((lo, "min"), (hi, "max")):
        _require(b.dtype == x.dtype, f"{w} must have the operand's element type")
        _require(b.rank == 0 or b.shape == x.shape, f"{w} must be a scalar or have the operand's shape")
    return [x.without_layout()]


register(OpDef("clamp", _infer_clamp, 3, traits={ELEMENTWISE}))


def _verify_convert(ts, attrs, regions, rts):
    _require(len(rts) == 1 and rts[0].shape == ts[0].shape, "result must have the operand's shape")


register(OpDef("convert", lambda ts, a, r: None, 1, verify=_verify_convert, result_type_given=True,
               traits={ELEMENTWISE}))


def _verify_bitcast_convert(ts, attrs, regions, rts):
    x, r = ts[0], rts[0]
    xb, rb = x.dtype.bits, r.dtype.bits  # pred counts 1 bit, as in StableHLO
    if xb == rb:
        _require(r.shape == x.shape, "result must have the operand's shape when the widths match")
    elif xb > rb:
        _require(r.shape[:-1] == x.shape and r.shape[-1:] == (xb // rb,),
                 f"narrowing bitcast needs result shape {list(x.shape) + [xb // rb]}")
    else:
        _require(x.shape[-1:] == (rb // xb,) and r.shape == x.shape[:-1],
                 f"widening bitcast needs the operand's last dimension to be {rb // xb}")


# Elementwise when the widths match (``hlo.passes.util.is_elementwise``), so not by trait.
register(OpDef("bitcast_convert", lambda ts, a, r: None, 1, verify=_verify_bitcast_convert,
               result_type_given=True, traits={MAY_BITCAST, NON_DIFFERENTIABLE}))


def _verify_constant(ts, attrs, regions, rts):
    v = attrs["value"]
    _require(tuple(v.shape) == rts[0].shape, f"value shape {list(v.shape)} does not match result {rts[0]}")
    _require(v.dtype == rts[0].np_dtype, f"value dtype {v.dtype} does not match result {rts[0]}")


register(OpDef("constant", lambda ts, a, r: [_t(a["value"].shape, element_type(a["value"].dtype))], 0,
               attrs={"value": Attr("array")}, verify=_verify_constant, traits={NON_DIFFERENTIABLE}))


def _verify_iota(ts, attrs, regions, rts):
    _require(rts[0].rank > 0, "result must have rank at least 1")
    _require(0 <= attrs["iota_dimension"] < rts[0].rank, "iota_dimension out of range")
    _require(not rts[0].dtype.is_pred, "iota of pred is not allowed")


register(OpDef("iota", lambda ts, a, r: None, 0, attrs={"iota_dimension": Attr("int")},
               verify=_verify_iota, result_type_given=True, traits={MOVEMENT, NON_DIFFERENTIABLE}))


def _verify_broadcast_in_dim(ts, attrs, regions, rts):
    x, r = ts[0], rts[0]
    dims = attrs["broadcast_dimensions"]
    _require(len(dims) == x.rank, f"broadcast_dimensions {list(dims)} must have one entry per operand dimension ({x.rank})")
    _check_dims(dims, r.rank, "broadcast_dimensions")
    _require(r.dtype == x.dtype, "result must have the operand's element type")
    for i, d in enumerate(dims):
        _require(x.shape[i] in (1, r.shape[d]),
                 f"operand dimension {i} of size {x.shape[i]} cannot broadcast to result dimension {d} of size {r.shape[d]}")


register(OpDef("broadcast_in_dim", lambda ts, a, r: None, 1,
               attrs={"broadcast_dimensions": Attr("ints")}, verify=_verify_broadcast_in_dim,
               result_type_given=True, traits={MOVEMENT, MAY_BITCAST}))


def _verify_reshape(ts, attrs, regions, rts):
    _require(rts[0].dtype == ts[0].dtype, "result must have the operand's element type")
    _require(rts[0].size == ts[0].size, f"cannot reshape {ts[0]} ({ts[0].size} elements) to {rts[0]} ({rts[0].size} elements)")


register(OpDef("reshape", lambda ts, a, r: None, 1, verify=_verify_reshape, result_type_given=True,
               traits={MOVEMENT, MAY_BITCAST}))


def _infer_transpose(ts, attrs, regions):
    x = ts[0]
    perm = attrs["permutation"]
    _require(sorted(perm) == list(range(x.rank)), f"permutation {list(perm)} is not a permutation of {x.rank} dimensions")
    return [_t([x.shape[p] for p in perm], x.dtype)]


register(OpDef("transpose", _infer_transpose, 1, attrs={"permutation": Attr("ints")},
               traits={MOVEMENT, MAY_BITCAST}))


def _infer_slice(ts, attrs, regions):
    x = ts[0]
    st, li = attrs["start_indices"], attrs["limit_indices"]
    sd = attrs.get("strides") or (1,) * x.rank
    _require(len(st) == len(li) == len(sd) == x.rank, "start_indices, limit_indices and strides need one entry per dimension")
    shape = []
    for d in range(x.rank):
        _require(0 <= st[d] <= li[d] <= x.shape[d], f"slice [{st[d]}:{li[d]}] out of bounds for dimension {d} of size {x.shape[d]}")
        _require(sd[d] > 0, "strides must be positive")
        shape.append(-(-(li[d] - st[d]) // sd[d]))
    return [_t(shape, x.dtype)]


register(OpDef("slice", _infer_slice, 1, attrs={
    "start_indices": Attr("ints"), "limit_indices": Attr("ints"), "strides": Attr("ints", None)},
    traits={MOVEMENT, WINDOW_OF_OPERAND}))


def _infer_dynamic_slice(ts, attrs, regions):
    x, idx = ts[0], ts[1:]
    sizes = attrs["slice_sizes"]
    _require(len(idx) == x.rank, f"needs {x.rank} start indices, got {len(idx)}")
    _require(len(sizes) == x.rank, "slice_sizes needs one entry per dimension")
    for i in idx:
        _require(i.rank == 0 and i.dtype.is_int, "start indices must be integer scalars")
    _require(len({i.dtype for i in idx}) <= 1, "start indices must share one type")
    for d in range(x.rank):
        _require(0 <= sizes[d] <= x.shape[d], f"slice size {sizes[d]} out of range for dimension {d} of size {x.shape[d]}")
    return [_t(sizes, x.dtype)]


register(OpDef("dynamic_slice", _infer_dynamic_slice, None, attrs={"slice_sizes": Attr("ints")},
               traits={MOVEMENT, WINDOW_OF_OPERAND}))


def _infer_dynamic_update_slice(ts, attrs, regions):
    x, u, idx = ts[0], ts[1], ts[2:]
    _require(u.dtype == x.dtype and u.rank == x.rank, "update must have the operand's element type and rank")
    _require(len(idx) == x.rank, f"needs {x.rank} start indices, got {len(idx)}")
    for i in idx:
        _require(i.rank == 0 and i.dtype.is_int, "start indices must be integer scalars")
    for d in range(x.rank):
        _require(u.shape[d] <= x.shape[d], "update larger than operand")
    return [x.without_layout()]


register(OpDef("dynamic_update_slice", _infer_dynamic_update_slice, None))


def _infer_concatenate(ts, attrs, regions):
    _require(len(ts) >= 1, "needs at least one operand")
    d = attrs["dimension"]
    r = ts[0].rank
    _require(0 <= d < r, f"dimension {d} out of range for rank {r}")
    total = 0
    for t in ts:
        _require(t.dtype == ts[0].dtype and t.rank == r, "operands must share element type and rank")
        for i in range(r):
            _require(i == d or t.shape[i] == ts[0].shape[i], f"operand shapes differ outside dimension {d}")
        total += t.shape[d]
    shape = list(ts[0].shape)
    shape[d] = total
    return [_t(shape, ts[0].dtype)]


register(OpDef("concatenate", _infer_concatenate, None, attrs={"dimension": Attr("int")},
               traits={MOVEMENT}))


def _infer_pad(ts, attrs, regions):
    x, pv = ts
    _require(pv.rank == 0 and pv.dtype == x.dtype, "padding value must be a scalar of the operand's type")
    lo, hi, it = attrs["edge_padding_low"], attrs["edge_padding_high"], attrs["interior_padding"]
    _require(len(lo) == len(hi) == len(it) == x.rank, "padding needs one entry per dimension")
    shape = []
    for d in range(x.rank):
        _require(it[d] >= 0, "interior_padding must be non-negative")
        n = x.shape[d]
        size = lo[d] + hi[d] + n + max(n - 1, 0) * it[d]
        _require(size >= 0, f"padding makes dimension {d} negative")
        shape.append(size)
    return [_t(shape, x.dtype)]


register(OpDef("pad", _infer_pad, 2, attrs={
    "edge_padding_low": Attr("ints"), "edge_padding_high": Attr("ints"), "interior_padding": Attr("ints")},
    traits={MOVEMENT}))


def _infer_reverse(ts, attrs, regions):
    _check_dims(attrs["dimensions"], ts[0].rank, "dimensions")
    return [ts[0].without_layout()]


register(OpDef("reverse", _infer_reverse, 1, attrs={"dimensions": Attr("ints")}, traits={MOVEMENT}))


def _scalar_body_check(region, n, dtypes, what):
    _require(region is not None, f"missing {what} region")
    want = [TensorType((), d) for d in dtypes]
    got = region.arg_types
    _require([t.without_layout() for t in got] == want,
             f"{what} region must take ({', '.join(map(str, want))}), takes ({', '.join(map(str, got))})")


def _infer_reduce(ts, attrs, regions):
    _require(len(ts) % 2 == 0 and ts, "reduce takes N inputs followed by N init values")
    n = len(ts) // 2
    inputs, inits = ts[:n], ts[n:]
    dims = attrs["dimensions"]
    for t in inputs:
        _require(t.shape == inputs[0].shape, "reduce inputs must have the same shape")
    for t in inits:
        _require(t.rank == 0, "init values must be scalars")
    for i, (t, init) in enumerate(zip(inputs, inits)):
        # StableHLO's "promotable": the same type, or a float input accumulated in a float at
        # least as wide (an f16 sum in f32); a u8 input with an f32 init is no reduction
        _require(t.dtype == init.dtype or (t.dtype.is_float and init.dtype.is_float and
                                           init.dtype.itemsize >= t.dtype.itemsize),
                 f"input {i} of element type {t.dtype} does not fit its init value's type "
                 f"{init.dtype}")
    _check_dims(dims, inputs[0].rank, "dimensions")
    body = regions[0] if regions else None
    if body is not None:
        outs = body.output_types
        _require(len(outs) == n, f"body must return {n} values")
        for i in range(n):
            _require(outs[i].rank == 0 and outs[i].dtype == inits[i].dtype, "body results must be scalars of the init values' types")
        _require(len(body.args) == 2 * n, f"body must take {2 * n} scalar arguments")
    shape = [s for i, s in enumerate(inputs[0].shape) if i not in dims]
    return [_t(shape, t.dtype) for t in inits]


register(OpDef("reduce", _infer_reduce, None, regions=("body",), attrs={"dimensions": Attr("ints")},
               traits={INNER_LOOP}))


def _infer_reduce_window(ts, attrs, regions):
    _require(len(ts) % 2 == 0 and ts, "reduce_window takes N inputs followed by N init values")
    n = len(ts) // 2
    inputs, inits = ts[:n], ts[n:]
    r = inputs[0].rank
    wd = attrs["window_dimensions"]
    ws = attrs.get("window_strides") or (1,) * r
    bd = attrs.get("base_dilations") or (1,) * r
    wdl = attrs.get("window_dilations") or (1,) * r
    pad = attrs.get("padding") or ((0, 0),) * r
    _require(len(wd) == len(ws) == len(bd) == len(wdl) == len(pad) == r, "window attributes need one entry per dimension")
    for t in inputs:
        _require(t.shape == inputs[0].shape, "inputs must have the same shape")
    for t in inits:
        _require(t.rank == 0, "init values must be scalars")
    for i, (t, init) in enumerate(zip(inputs, inits)):
        _require(t.dtype == init.dtype or (t.dtype.is_float and init.dtype.is_float and
                                           init.dtype.itemsize >= t.dtype.itemsize),
                 f"input {i} of element type {t.dtype} does not fit its init value's type "
                 f"{init.dtype}")
    shape = []
    for d in range(r):
        _require(wd[d] > 0 and ws[d] > 0 and bd[d] > 0 and wdl[d] > 0, "window sizes, strides and dilations must be positive")
        padded = (inputs[0].shape[d] - 1) * bd[d] + 1 + pad[d][0] + pad[d][1] if inputs[0].shape[d] else pad[d][0] + pad[d][1]
        dil_w = (wd[d] - 1) * wdl[d] + 1
        shape.append(0 if padded < dil_w else (padded - dil_w) // ws[d] + 1)
    return [_t(shape, t.dtype) for t in inits]


register(OpDef("reduce_window", _infer_reduce_window, None, regions=("body",), attrs={
    "window_dimensions": Attr("ints"), "window_strides": Attr("ints", None),
    "base_dilations": Attr("ints", None), "window_dilations": Attr("ints", None),
    "padding": Attr("pairs", None)}, traits={INNER_LOOP}))


def _infer_dot_general(ts, attrs, regions):
    lhs, rhs = ts
    lb, rb = attrs.get("lhs_batching_dimensions", ()), attrs.get("rhs_batching_dimensions", ())
    lc, rc = attrs.get("lhs_contracting_dimensions", ()), attrs.get("rhs_contracting_dimensions", ())
    _require(len(lb) == len(rb), "lhs and rhs need the same number of batching dimensions")
    _require(len(lc) == len(rc), "lhs and rhs need the same number of contracting dimensions")
    _check_dims(tuple(lb) + tuple(lc), lhs.rank, "lhs batching+contracting dimensions")
    _check_dims(tuple(rb) + tuple(rc), rhs.rank, "rhs batching+contracting dimensions")
    for a, b in zip(lb, rb):
        _require(lhs.shape[a] == rhs.shape[b], f"batch dimension sizes differ: lhs {a} is {lhs.shape[a]}, rhs {b} is {rhs.shape[b]}")
    for a, b in zip(lc, rc):
        _require(lhs.shape[a] == rhs.shape[b], f"contracting dimension sizes differ: lhs {a} is {lhs.shape[a]}, rhs {b} is {rhs.shape[b]}")
    _require(lhs.dtype == rhs.dtype, "lhs and rhs must have the same element type")
    shape = [lhs.shape[d] for d in lb]
    shape += [s for i, s in enumerate(lhs.shape) if i not in lb and i not in lc]
    shape += [s for i, s in enumerate(rhs.shape) if i not in rb and i not in rc]
    return [_t(shape, lhs.dtype)]


register(OpDef("dot_general", _infer_dot_general, 2, attrs={
    "lhs_batching_dimensions": Attr("ints", ()), "rhs_batching_dimensions": Attr("ints", ()),
    "lhs_contracting_dimensions": Attr("ints", ()), "rhs_contracting_dimensions": Attr("ints", ())},
    result_dtype_free=True, traits={INNER_LOOP}))


def _check_batching(x, xb, xname, idx, ib, iname, ivd):
    """Gather's and scatter's batching dimensions: ``xb`` of the operand (checked in range
    already) and ``ib`` of the indices pair up, one for one, with the same sizes; the index
    vector dimension is not one of them."""
    _require(len(ib) == len(xb), f"{iname}_batching_dims {list(ib)} must have one entry per "
             f"{xname}_batching_dims entry ({list(xb)})")
    _check_dims(ib, idx.rank, f"{iname}_batching_dims")
    _require(ivd not in ib, f"index_vector_dim {ivd} cannot be one of {iname}_batching_dims {list(ib)}")
    for a, i in zip(xb, ib):
        _require(x.shape[a] == idx.shape[i], f"batching dimension sizes differ: {xname} {a} is "
                 f"{x.shape[a]}, {iname} {i} is {idx.shape[i]}")


def _infer_gather(ts, attrs, regions):
    x, idx = ts
    _require(idx.dtype.is_int, "start_indices must be integers")
    off = attrs.get("offset_dims", ())
    col = attrs.get("collapsed_slice_dims", ())
    ob = attrs.get("operand_batching_dims", ())
    ib = attrs.get("start_indices_batching_dims", ())
    sim = attrs["start_index_map"]
    ivd = attrs["index_vector_dim"]
    ss = attrs["slice_sizes"]
    _require(len(ss) == x.rank, "slice_sizes needs one entry per operand dimension")
    _require(0 <= ivd <= idx.rank, "index_vector_dim out of range")
    _check_dims(tuple(col) + tuple(ob), x.rank, "collapsed_slice_dims + operand_batching_dims")
    _check_batching(x, ob, "operand", idx, ib, "start_indices", ivd)
    _check_dims(sim, x.rank, "start_index_map")
    iv = idx.shape[ivd] if ivd < idx.rank else 1
    _require(len(sim) == iv, f"start_index_map has {len(sim)} entries, index vector has {iv}")
    for d in tuple(col) + tuple(ob):
        _require(ss[d] <= 1, f"collapsed or batching dimension {d} must have slice size 0 or 1")
    for d in range(x.rank):
        _require(0 <= ss[d] <= x.shape[d], f"slice size {ss[d]} out of range for dimension {d}")
    batch_shape = [s for i, s in enumerate(idx.shape) if i != ivd]
    offset_sizes = [ss[d] for d in range(x.rank) if d not in col and d not in ob]
    rank = len(batch_shape) + len(offset_sizes)
    _require(len(off) == len(offset_sizes), f"offset_dims must have {len(offset_sizes)} entries")
    _check_dims(off, rank, "offset_dims")
    shape, bi, oi = [], 0, 0
    for d in range(rank):
        if d in off:
            shape.append(offset_sizes[oi]); oi += 1
        else:
            shape.append(batch_shape[bi]); bi += 1
    return [_t(shape, x.dtype)]


register(OpDef("gather", _infer_gather, 2, attrs={
    "offset_dims": Attr("ints", ()), "collapsed_slice_dims": Attr("ints", ()),
    "operand_batching_dims": Attr("ints", ()), "start_indices_batching_dims": Attr("ints", ()),
    "start_index_map": Attr("ints"), "index_vector_dim": Attr("int"),
    "slice_sizes": Attr("ints"), "indices_are_sorted": Attr("bool", False)}))


def _infer_scatter(ts, attrs, regions):
    _require(len(ts) >= 3 and len(ts) % 2 == 1, "scatter takes N inputs, the indices and N updates")
    n = (len(ts) - 1) // 2
    inputs, idx, updates = ts[:n], ts[n], ts[n + 1:]
    _require(idx.dtype.is_int, "scatter_indices must be integers")
    for t in inputs:
        _require(t.shape == inputs[0].shape, "inputs must have the same shape")
    uwd = attrs.get("update_window_dims", ())
    iwd = attrs.get("inserted_window_dims", ())
    ib = attrs.get("input_batching_dims", ())
    sib = attrs.get("scatter_indices_batching_dims", ())
    sdod = attrs["scatter_dims_to_operand_dims"]
    ivd = attrs["index_vector_dim"]
    x = inputs[0]
    _require(0 <= ivd <= idx.rank, "index_vector_dim out of range")
    _check_dims(tuple(iwd) + tuple(ib), x.rank, "inserted_window_dims + input_batching_dims")
    _check_batching(x, ib, "input", idx, sib, "scatter_indices", ivd)
    _check_dims(sdod, x.rank, "scatter_dims_to_operand_dims")
    iv = idx.shape[ivd] if ivd < idx.rank else 1
    _require(len(sdod) == iv, f"scatter_dims_to_operand_dims has {len(sdod)} entries, index vector has {iv}")
    for u in updates:
        _require(u.shape == updates[0].shape, "updates must have the same shape")
        _require(u.rank == len(uwd) + idx.rank - (1 if ivd < idx.rank else 0),
                 "updates rank must be len(update_window_dims) + scatter batch rank")
    for i, u in enumerate(updates):
        _require(u.dtype == inputs[i].dtype, "updates must have the inputs' element types")
    _check_dims(uwd, updates[0].rank, "update_window_dims")
    body = regions[0] if regions else None
    if body is not None:
        _require(len(body.args) == 2 * n and len(body.outputs) == n, f"update region must take {2 * n} scalars and return {n}")
    return [t.without_layout() for t in inputs]


register(OpDef("scatter", _infer_scatter, None, regions=("update",), attrs={
    "update_window_dims": Attr("ints", ()), "inserted_window_dims": Attr("ints", ()),
    "input_batching_dims": Attr("ints", ()), "scatter_indices_batching_dims": Attr("ints", ()),
    "scatter_dims_to_operand_dims": Attr("ints"), "index_vector_dim": Attr("int"),
    "indices_are_sorted": Attr("bool", False), "unique_indices": Attr("bool", False)},
    traits={WHOLE_ARRAY}))


def _infer_sort(ts, attrs, regions):
    _require(ts, "sort needs at least one input")
    for t in ts:
        _require(t.shape == ts[0].shape, "sort inputs must have the same shape")
    d = attrs.get("dimension", -1)
    r = ts[0].rank
    _require(-r <= d < r or r == 0, f"dimension {d} out of range for rank {r}")
    cmp = regions[0] if regions else None
    if cmp is not None:
        _scalar_body_check(cmp, 2 * len(ts), [t.dtype for t in ts for _ in (0, 1)], "comparator")
        _require(len(cmp.outputs) == 1 and cmp.output_types[0].rank == 0 and cmp.output_types[0].dtype == pred,
                 "comparator must return one pred scalar")
    return [t.without_layout() for t in ts]


register(OpDef("sort", _infer_sort, None, regions=("comparator",), attrs={
    "dimension": Attr("int", -1), "is_stable": Attr("bool", False)}, traits={WHOLE_ARRAY}))


def _infer_while(ts, attrs, regions):
    cond, body = regions
    want = [t.without_layout() for t in ts]
    _require([t.without_layout() for t in cond.arg_types] == want, "cond region must take the operands' types")
    _require([t.without_layout() for t in body.arg_types] == want, "body region must take the operands' types")
    _require([t.without_layout() for t in body.output_types] == want, "body region must return the operands' types")
    _require(len(cond.outputs) == 1 and cond.output_types[0].without_layout() == TensorType((), pred),
             "cond region must return one pred scalar")
    return want


register(OpDef("while", _infer_while, None, regions=("cond", "body"), traits={CONTROL_FLOW, OPEN_REGIONS}))


def _branch_results(regions, what):
    _require(len(regions) >= 1, f"{what} needs at least one branch")
    first = [t.without_layout() for t in regions[0].output_types]
    for r in regions:
        _require(not r.args, "branches take no arguments")
        _require([t.without_layout() for t in r.output_types] == first, "branches must return the same types")
    return first


def _infer_if(ts, attrs, regions):
    _require(ts[0].without_layout() == TensorType((), pred), "predicate must be a pred scalar")
    return _branch_results(regions, "if")


register(OpDef("if", _infer_if, 1, regions=("true_branch", "false_branch"),
               traits={CONTROL_FLOW, OPEN_REGIONS}))


def _infer_case(ts, attrs, regions):
    _require(ts[0].without_layout() == TensorType((), s32), "index must be an s32 scalar")
    return _branch_results(regions, "case")


register(OpDef("case", _infer_case, 1, regions=("*branch",), traits={CONTROL_FLOW, OPEN_REGIONS}))


def _infer_conv(ts, attrs, regions):
    lhs, rhs = ts
    g = attrs.get
    nsp = lhs.rank - 2
    _require(lhs.rank == rhs.rank and lhs.rank >= 2, "lhs and rhs must have the same rank (at least 2)")
    _require(lhs.dtype == rhs.dtype, "lhs and rhs must have the same element type")
    ws = g("window_strides") or (1,) * nsp
    pad = g("padding") or ((0, 0),) * nsp
    ld = g("lhs_dilation") or (1,) * nsp
    rd = g("rhs_dilation") or (1,) * nsp
    _require(len(ws) == len(pad) == len(ld) == len(rd) == nsp, "window attributes need one entry per spatial dimension")
    ib, ifd, isp = attrs["input_batch_dimension"], attrs["input_feature_dimension"], attrs["input_spatial_dimensions"]
    ki, ko, ksp = attrs["kernel_input_feature_dimension"], attrs["kernel_output_feature_dimension"], attrs["kernel_spatial_dimensions"]
    ob, of, osp = attrs["output_batch_dimension"], attrs["output_feature_dimension"], attrs["output_spatial_dimensions"]
    _check_dims((ib, ifd) + tuple(isp), lhs.rank, "input dimensions")
    _check_dims((ki, ko) + tuple(ksp), rhs.rank, "kernel dimensions")
    _check_dims((ob, of) + tuple(osp), lhs.rank, "output dimensions")
    fgc, bgc = g("feature_group_count", 1), g("batch_group_count", 1)
    _require(fgc >= 1 and bgc >= 1 and (fgc == 1 or bgc == 1), "feature_group_count and batch_group_count must be positive, one of them 1")
    _require(lhs.shape[ifd] % fgc == 0 and lhs.shape[ifd] // fgc == rhs.shape[ki],
             f"input features {lhs.shape[ifd]} / feature_group_count {fgc} must equal kernel input features {rhs.shape[ki]}")
    _require(lhs.shape[ib] % bgc == 0 and rhs.shape[ko] % bgc == 0 and rhs.shape[ko] % fgc == 0,
             "batch and output feature sizes must divide by the group counts")
    shape = [0] * lhs.rank
    shape[ob] = lhs.shape[ib] // bgc
    shape[of] = rhs.shape[ko]
    for i in range(nsp):
        n = lhs.shape[isp[i]]
        dl = (n - 1) * ld[i] + 1 if n else 0
        padded = dl + pad[i][0] + pad[i][1]
        k = rhs.shape[ksp[i]]
        dk = (k - 1) * rd[i] + 1 if k else 0
        shape[osp[i]] = 0 if padded < dk or padded <= 0 or dk == 0 else (padded - dk) // ws[i] + 1
    return [_t(shape, lhs.dtype)]


register(OpDef("convolution", _infer_conv, 2, attrs={
    "window_strides": Attr("ints", None), "padding": Attr("pairs", None),
    "lhs_dilation": Attr("ints", None), "rhs_dilation": Attr("ints", None),
    "window_reversal": Attr("bools", None),
    "input_batch_dimension": Attr("int"), "input_feature_dimension": Attr("int"),
    "input_spatial_dimensions": Attr("ints"),
    "kernel_input_feature_dimension": Attr("int"), "kernel_output_feature_dimension": Attr("int"),
    "kernel_spatial_dimensions": Attr("ints"),
    "output_batch_dimension": Attr("int"), "output_feature_dimension": Attr("int"),
    "output_spatial_dimensions": Attr("ints"),
    "feature_group_count": Attr("int", 1), "batch_group_count": Attr("int", 1)},
    result_dtype_free=True, traits={INNER_LOOP}))

register(OpDef("optimization_barrier", lambda ts, a, r: [t.without_layout() for t in ts], None,
               traits={BARRIER}))

# ``call``'s result types come from the callee; the module verifier checks them.
register(OpDef("call", lambda ts, a, r: None, None, attrs={"callee": Attr("str")}, result_type_given=True,
               traits={CONTROL_FLOW, NOT_TRACED}))


# A call back into the host program (``hlo.ir.callbacks``: the registered Python callable of
# ``callback_id``) with the operands' values; its results are what the callable returns.
register(OpDef("host_callback", lambda ts, a, r: None, None, attrs={
    "callback_id": Attr("int"), "what": Attr("str", "")}, result_type_given=True,
    traits={SIDE_EFFECT}))


def _infer_fusion(ts, attrs, regions):
    body = regions[0]
    _require([t.without_layout() for t in body.arg_types] == [t.without_layout() for t in ts],
             "fused region must take the operands' types")
    return [t.without_layout() for t in body.output_types]


# A fused computation (made by the fusion passes): one kernel whose body is the fused region.
register(OpDef("fusion", _infer_fusion, None, regions=("fused",), attrs={
    "kind": Attr("str", choices=("loop", "input", "output", "multi")),
    "name": Attr("str", None)}, traits={KERNEL, NOT_TRACED}))


def region_names(opdef: OpDef, n: int) -> List[str]:
    """The names of an op's ``n`` regions (case's branches are branch0, branch1, ...)."""
    if len(opdef.regions) == 1 and opdef.regions[0].startswith("*"):
        base = opdef.regions[0][1:]
        return [f"{base}{i}" for i in range(n)]
    return list(opdef.regions)


# The collective ops (and run_parallel) register themselves into the table.
from . import collective_ops  # noqa: F401
