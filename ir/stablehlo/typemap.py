"""Types and constants across the bridge: MLIR tensor types <-> ``TensorType``, and dense
element attributes <-> numpy arrays.

Reading a dense attribute goes through numpy's buffer protocol where jaxlib supports it (i1,
signless/unsigned integers, f16, f32, f64) and through the attribute's printed text otherwise
(bf16 and zero-element tensors): MLIR prints every element exactly, non-finite floats as hex
bit patterns, large tensors as a hex blob of raw little-endian bytes.
Writing goes the other way through text: a hex blob, which is exact for every type.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ..core import Location
from ..dim_expr import DimExpr
from ..types import FROM_MLIR, MLIR_NAMES, ElementType, TensorType
from .errors import StableHLOError, UnsupportedError

_NUMPY_READABLE = {"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"}

_SHAPED = re.compile(r"^tensor<(.*)>$", re.S)


def describe_unsupported_type(s: str) -> str:
    """A short reason for a type string hlo cannot hold."""
    if "?" in s:
        return "dynamic shape"
    if "complex" in s:
        return "complex element type"
    if "quant" in s:
        return "quantized element type"
    if "token" in s:
        return "token type"
    if "tuple" in s:
        return "tuple type"
    if re.search(r"\bf8|f4E|f6E|\bf8E", s):
        return "8-bit or narrower float element type"
    if re.search(r"\bu?i[24]\b|x[u]?i[24]>|<[u]?i[24]>", s):
        return "sub-byte integer element type"
    return "element type outside hlo's list"


def element_from_mlir(t, loc: Optional[Location] = None) -> ElementType:
    s = str(t)
    et = FROM_MLIR.get(s)
    if et is None:
        raise UnsupportedError(f"type {s}", describe_unsupported_type(s), loc)
    return et


def tensor_from_mlir(t, loc: Optional[Location] = None) -> TensorType:
    """The ``TensorType`` of a ranked, static MLIR tensor type; UnsupportedError otherwise."""
    ir = _ir()
    s = str(t)
    if not isinstance(t, ir.RankedTensorType):
        why = "unranked tensor" if isinstance(t, ir.UnrankedTensorType) else describe_unsupported_type(s)
        raise UnsupportedError(f"type {s}", why, loc)
    rt = t
    if not rt.has_static_shape:
        raise UnsupportedError(f"type {s}", "dynamic shape", loc)
    if rt.encoding is not None:
        raise UnsupportedError(f"type {s}", "tensor with an encoding (bounded dynamism or sparsity)", loc)
    return TensorType(tuple(rt.shape), element_from_mlir(rt.element_type, loc))


def tensor_from_mlir_dims(t, loc: Optional[Location], dynamic) -> TensorType:
    """``tensor_from_mlir`` for a type with dynamic dimensions: each ``?`` is ``dynamic()``
    (a symbol, ``ir/stablehlo/dynamic.py``); with ``dynamic()`` None only the element type and
    the encoding are checked (and a placeholder type is returned)."""
    ir = _ir()
    s = str(t)
    if not isinstance(t, ir.RankedTensorType):
        why = "unranked tensor" if isinstance(t, ir.UnrankedTensorType) else describe_unsupported_type(s)
        raise UnsupportedError(f"type {s}", why, loc)
    if t.encoding is not None:
        raise UnsupportedError(f"type {s}", "tensor with an encoding (bounded dynamism or sparsity)", loc)
    et = element_from_mlir(t.element_type, loc)
    dims = []
    for i in range(t.rank):
        if t.is_dynamic_dim(i):
            d = dynamic()
            dims.append(1 if d is None else d)
        else:
            dims.append(t.get_dim_size(i))
    return TensorType(tuple(dims), et)


def tensor_to_mlir_text(t: TensorType) -> str:
    """``tensor<4x8xf32>`` for ``f32[4,8]`` (layouts have no StableHLO spelling and are dropped)."""
    dims = "".join("?x" if isinstance(d, DimExpr) else f"{d}x" for d in t.shape)  # symbolic: ?
    return f"tensor<{dims}{MLIR_NAMES[t.dtype.name]}>"


def _ir():
    from jaxlib.mlir import ir
    return ir


# ---------------------------------------------------------------------------------------------
# Dense attributes -> numpy
# ---------------------------------------------------------------------------------------------

class TextAttr:
    """A dense attribute that jaxlib cannot hand to Python (complex element types), as text."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def array_from_attr(attr, t: TensorType) -> np.ndarray:
    """The value of a dense elements attribute as an array of ``t``'s dtype and shape."""
    if isinstance(attr, TextAttr):
        return array_from_text(attr.text, t)
    ir = _ir()
    if not isinstance(attr, ir.DenseElementsAttr):
        s = str(attr)
        kind = s.split("<", 1)[0]
        raise UnsupportedError(f"constant {kind}<...>", "only dense<...> constants are read")
    if t.dtype.name in _NUMPY_READABLE and t.size > 0:
        a = np.array(attr)
        if a.dtype != t.np_dtype:
            a = a.astype(t.np_dtype)
        if a.size == t.size:
            return np.array(a.reshape(t.shape), order="C", copy=True)
        if a.size == 1:  # a splat
            return np.full(t.shape, a.reshape(-1)[0], dtype=t.np_dtype)
        raise StableHLOError(f"dense constant has {a.size} elements, {t} needs {t.size}")
    return array_from_text(str(attr), t)


_DENSE = re.compile(r"^\s*dense<(.*)>\s*(?::.*)?$", re.S)
_SCALAR = re.compile(r"true|false|[-+]?0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)")


def array_from_text(text: str, t: TensorType) -> np.ndarray:
    """Decode a printed ``dense<...> : tensor<...>`` attribute (or just ``dense<...>``)."""
    m = _DENSE.match(text)
    if m is None:
        raise StableHLOError(f"not a dense attribute: {text[:80]}")
    body = _strip_type(m.group(1)).strip()
    et = t.dtype
    if body.startswith('"'):
        hexs = body.strip('"')
        if not hexs.startswith("0x"):
            raise StableHLOError(f"malformed hex constant: {text[:80]}")
        raw = bytes.fromhex(hexs[2:])
        store = np.dtype(np.uint8) if et.is_pred else et.np_dtype
        if len(raw) == store.itemsize and t.size != 1:  # a splat written as hex
            return np.full(t.shape, np.frombuffer(raw, store)[0], dtype=store).astype(et.np_dtype)
        if len(raw) != t.size * store.itemsize:
            raise StableHLOError(f"hex constant has {len(raw)} bytes, {t} needs {t.size * store.itemsize}")
        return np.frombuffer(raw, dtype=store).astype(et.np_dtype).reshape(t.shape).copy()
    if body == "":
        if t.size != 0:
            raise StableHLOError(f"empty dense constant for {t}")
        return np.zeros(t.shape, et.np_dtype)
    nested = body.startswith("[")
    leaves = _SCALAR.findall(body)
    if et.is_complex:  # (re,im) pairs
        if len(leaves) % 2:
            raise StableHLOError(f"complex constant with an odd number of parts: {text[:80]}")
        c = et.component
        vals = [complex(_scalar(leaves[i], c), _scalar(leaves[i + 1], c))
                for i in range(0, len(leaves), 2)]
        nested = nested or body.startswith("[(")
    else:
        vals = [_scalar(s, et) for s in leaves]
    if not nested and len(vals) == 1:
        return np.full(t.shape, vals[0], dtype=et.np_dtype)
    if len(vals) != t.size:
        raise StableHLOError(f"dense constant has {len(vals)} elements, {t} needs {t.size}")
    return np.array(vals, dtype=et.np_dtype).reshape(t.shape)


def _strip_type(body: str) -> str:
    # ``dense<...> : tensor<...>`` was matched greedily up to the last '>': cut the type off.
    i = body.rfind("> : tensor<")
    return body[:i] if i >= 0 else body


def _scalar(s: str, et: ElementType):
    if et.is_pred:
        return s in ("true", "1")
    if et.is_int:
        return int(s, 0) if not s.startswith("-0x") else -int(s[1:], 0)
    low = s.lower().lstrip("+")
    if low.lstrip("-").startswith("0x"):
        bits = int(low.lstrip("-"), 16)
        return np.array(bits, dtype=f"u{et.itemsize}").view(et.np_dtype)[()]
    return np.array(float(low), dtype=np.float64).astype(et.np_dtype)[()]


# ---------------------------------------------------------------------------------------------
# numpy -> dense attribute text
# ---------------------------------------------------------------------------------------------

def dense_text(value: np.ndarray, t: TensorType) -> str:
    """``dense<"0x...">`` (raw little-endian bytes; one byte per i1) for any array of ``t``."""
    if t.size == 0:
        return "dense<>"
    a = np.ascontiguousarray(np.asarray(value, dtype=t.np_dtype).reshape(t.shape))
    if t.dtype.is_pred:
        a = a.astype(np.uint8)
    flat = a.reshape(-1)
    if flat.size > 1 and (flat.view(np.uint8).reshape(flat.size, -1) == flat.view(np.uint8).reshape(flat.size, -1)[0]).all():
        flat = flat[:1]
    return f'dense<"0x{flat.astype(flat.dtype.newbyteorder("<"), copy=False).tobytes().hex().upper()}">'
