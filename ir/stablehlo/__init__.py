"""StableHLO import and export.

``import_module(text_or_path)`` reads StableHLO MLIR (what ``jax.jit(f).lower(...).as_text()``
prints, or the StableHLO test vectors) into a verified ``hlo.ir.Module``;
``export_module(module)`` writes StableHLO text that jaxlib's MLIR parses and verifies.
Valid StableHLO that hlo cannot represent raises ``UnsupportedError`` naming the op or type;
text that is not valid StableHLO raises ``StableHLOError``. Both directions run on jaxlib's MLIR,
an optional extra (``pip install 'hlo[stablehlo]'``); without it they raise ``MissingExtraError``
(``requires``), an ``ImportError`` naming the extra.

Modules: ``importer`` and ``exporter`` (the two directions), ``opmap`` (op and attribute
correspondence), ``typemap`` (types and dense constants), ``mlir_bridge`` (jaxlib's MLIR
context, parsing, verification, chlo legalization), ``check_syntax`` and ``checks`` (the test
suites' assertions).
"""
from .errors import StableHLOError, UnsupportedError
from .importer import import_module, import_with_checks
from .exporter import export_module
from .checks import Check
from .requires import MissingExtraError

__all__ = ["import_module", "import_with_checks", "export_module", "UnsupportedError",
           "StableHLOError", "Check", "MissingExtraError"]
