"""hlo.ir: types, the op table, the in-memory IR, its text form, verifier and interpreter."""
from .types import (ElementType, TensorType, element_type, tensor, scalar, ALL_ELEMENT_TYPES,
                    UnsupportedTypeError, pred, s8, s16, s32, s64, u8, u16, u32, u64, f16, bf16, f32, f64)
from .core import Location, Value, Operation, Region, Function, Module, uses
from .errors import IRError, ParseError, VerifyError
from .ops import OPS, OpDef, OpError
from .builder import Builder
from .printer import print_module, print_function, print_op
from .parser import parse_module
from .verifier import verify_module
from .clone import clone_module, clone_function

__all__ = [
    "ElementType", "TensorType", "element_type", "tensor", "scalar", "ALL_ELEMENT_TYPES",
    "UnsupportedTypeError", "Location", "Value", "Operation", "Region", "Function", "Module", "uses",
    "IRError", "ParseError", "VerifyError", "OPS", "OpDef", "OpError", "Builder",
    "print_module", "print_function", "print_op", "parse_module", "verify_module",
    "clone_module", "clone_function",
]
