"""jax and jaxlib are an optional extra of hlo (``pip install 'hlo[stablehlo]'``): only the
StableHLO bridge needs them (jaxlib's MLIR bindings parse, verify and legalize StableHLO), and
the developer tools that compare with jax. Everything else (tracing, ``hlo.jit``, ``grad``,
``vmap``, compiling for cpu and cuda, ``save``/``load``, the CLI's compile/run/inspect/export-c/
opt/cache) imports neither.

``require_jaxlib(what)`` and ``require_jax(what)`` are called where such a feature starts, so
that its absence is one clear ``MissingExtraError`` naming the extra, not a
``ModuleNotFoundError`` from deep inside the bridge."""
from __future__ import annotations

INSTALL = "pip install 'hlo[stablehlo]'"

_have_jaxlib = False
_have_jax = False


class MissingExtraError(ImportError):
    """A feature that needs the ``stablehlo`` extra (jax and jaxlib) was used without it. An
    ``ImportError``, so code that treats a missing optional module as absent keeps doing so."""

    def __init__(self, what: str, module: str, cause: BaseException):
        self.what = what
        super().__init__(
            f"{what} needs {module}, which is not installed (or failed to import: {cause}). jax and "
            f"jaxlib are an optional extra of hlo, used only for StableHLO import/export and the "
            f"tools that compare with jax; install them with: {INSTALL}", name=module)


def require_jaxlib(what: str) -> None:
    """Raise ``MissingExtraError`` naming ``what`` when jaxlib's MLIR bindings cannot be imported."""
    global _have_jaxlib
    if _have_jaxlib:
        return
    try:
        import jaxlib.mlir.ir  # noqa: F401
    except ImportError as e:
        raise MissingExtraError(what, "jaxlib", e) from e
    _have_jaxlib = True


def require_jax(what: str) -> None:
    """Raise ``MissingExtraError`` naming ``what`` when jax cannot be imported."""
    global _have_jax
    if _have_jax:
        return
    try:
        import jax  # noqa: F401
    except ImportError as e:
        raise MissingExtraError(what, "jax", e) from e
    _have_jax = True
