"""``hlo.load_stablehlo``: bring a StableHLO program (a JAX export, a ``.mlir`` file) into hlo.

    lowered = hlo.load_stablehlo(jax.jit(f).lower(x).as_text())
    compiled = lowered.compile(target="interpreter")
    outputs = compiled(x)          # flat arrays in, a list of arrays out

The program is imported by ``hlo.ir.stablehlo.import_module`` (see its docstring for what is
accepted and what raises ``UnsupportedError``) and wrapped in a ``hlo.staging.stages.Lowered`` with flat
signatures: ``@main``'s parameters in, its results out.
"""
from __future__ import annotations

from typing import Optional

from hlo.ir.stablehlo import StableHLOError, import_module
from hlo.ir.stablehlo.requires import require_jaxlib


def load_stablehlo(source, source_name: Optional[str] = None):
    """A ``Lowered`` for StableHLO given as text, a path, or an MLIR module object.

    ``source_name`` names the program in locations and errors when text is given (a path
    names itself). The module must have a ``@main`` function (JAX exports do); with a
    single function of another name, that function is the entry and is renamed ``main``."""
    from .stages import Lowered
    require_jaxlib("hlo.load_stablehlo")
    module = import_module(source, source_name=source_name)
    entry = entry_name(module)
    if entry is None:
        raise StableHLOError(
            f"module @{module.name} has no @main function to run (functions: "
            + ", ".join("@" + n for n in module.functions) + ")")
    rename_entry_to_main(module, entry)
    return Lowered(module)


def entry_name(module) -> Optional[str]:
    """The function a StableHLO runner starts at: ``@main``, else the only function."""
    if "main" in module:
        return "main"
    if len(module.functions) == 1:
        return next(iter(module.functions))
    return None


def rename_entry_to_main(module, entry: str) -> None:
    """Make ``entry`` the public ``@main`` (hlo's targets run ``@main``)."""
    if entry == "main":
        return
    if "main" in module:
        raise StableHLOError(f"cannot rename @{entry} to @main: @main exists")
    for op in module.walk():
        if op.name == "call" and op.attrs["callee"] == entry:
            raise StableHLOError(f"@{entry} is called by another function; it cannot be the entry")
    fn = module.functions[entry]
    module.functions = {("main" if k == entry else k): v for k, v in module.functions.items()}
    fn.name = "main"
    fn.visibility = "public"
