"""hlo.ir: types, the op table, the in-memory IR, its text form, verifier and interpreter.

The names below are imported on first use (module ``__getattr__``), so that code needing one
small piece, such as a saved executable's loader reading ``hlo.ir.types``, does not import the
parser, printer and verifier too.
"""
import importlib

_FROM = {
    "types": ("ElementType", "TensorType", "element_type", "tensor", "scalar", "ALL_ELEMENT_TYPES",
              "UnsupportedTypeError", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
              "f16", "bf16", "f32", "f64"),
    "core": ("Location", "Value", "Operation", "Region", "Function", "Module", "uses"),
    "errors": ("IRError", "ParseError", "VerifyError"),
    "ops": ("OPS", "OpDef", "OpError"),
    "builder": ("Builder",),
    "printer": ("print_module", "print_function", "print_op"),
    "parser": ("parse_module",),
    "verifier": ("verify_module",),
    "clone": ("clone_module", "clone_function"),
}
_WHERE = {name: mod for mod, names in _FROM.items() for name in names}

__all__ = [
    "ElementType", "TensorType", "element_type", "tensor", "scalar", "ALL_ELEMENT_TYPES",
    "UnsupportedTypeError", "Location", "Value", "Operation", "Region", "Function", "Module", "uses",
    "IRError", "ParseError", "VerifyError", "OPS", "OpDef", "OpError", "Builder",
    "print_module", "print_function", "print_op", "parse_module", "verify_module",
    "clone_module", "clone_function",
]


def __getattr__(name):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'hlo.ir' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
