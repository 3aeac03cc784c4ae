"""The error for a name that one of hlo's array modules does not have (``hnp.percentil``,
``hlo.lax.top_k``): it suggests the nearest names the module has (``difflib``) and, where jax's
module of the same role has the name, says that it is in jax but not in hlo yet.

jax's names come from ``jax_names.py``, a list written from jax (``python -m hlo.base.missing``
rewrites it from the installed jax; tests/frontend/test_user_surface.py checks it against jax):
hlo never imports jax for this, so probing ``hasattr(hnp, name)`` stays cheap and jax-free.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from typing import Iterable, Optional

# hlo's module -> jax's module of the same role
JAX_MODULES = {
    "hlo.numpy": "jax.numpy",
    "hlo.numpy.linalg": "jax.numpy.linalg",
    "hlo.numpy.fft": "jax.numpy.fft",
    "hlo.lax": "jax.lax",
    "hlo.lax.linalg": "jax.lax.linalg",
    "hlo.nn": "jax.nn",
    "hlo.random": "jax.random",
    "hlo.tree_util": "jax.tree_util",
}


def _jax_has(module: str, name: str) -> bool:
    from .jax_names import JAX_NAMES
    return name in JAX_NAMES.get(JAX_MODULES.get(module, ""), ())


def jax_public_names(jax_module: str) -> list:
    """The public names of one of jax's modules (imports jax: for the generator and the test)."""
    mod = importlib.import_module(jax_module)
    return sorted(n for n in dir(mod) if not n.startswith("_"))


def write_jax_names(path: str) -> None:
    from hlo.ir.stablehlo.requires import require_jax
    require_jax("python -m hlo.base.missing")
    import jax
    lines = [f'"""jax {jax.__version__}\'s public names in the modules hlo mirrors (written by '
             '``python -m hlo.base.missing``)."""', "", "JAX_NAMES = {"]
    for jm in sorted(set(JAX_MODULES.values())):
        names = jax_public_names(jm)
        lines.append(f"    {jm!r}: frozenset({{")
        for i in range(0, len(names), 6):
            lines.append("        " + " ".join(f"{n!r}," for n in names[i:i + 6]))
        lines.append("    }),")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def missing_name(module: str, name: str, names: Iterable[str]) -> AttributeError:
    """The AttributeError for ``module.name``, ``names`` being what ``module`` has."""
    public = sorted({n for n in names if not n.startswith("_")})
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.75)
    msg = f"module {module!r} has no attribute {name!r}"
    if close:
        msg += "; did you mean " + " or ".join(f"{module}.{c}" for c in close) + "?"
    if _jax_has(module, name):
        msg += (f" ({JAX_MODULES[module]}.{name} exists in jax; hlo does not have it yet: "
                "write it with the functions hlo has)")
    err = AttributeError(msg)
    err.name, err.obj = name, sys.modules.get(module)
    return err


def install(module_name: str, extra: Optional[Iterable[str]] = ()) -> None:
    """Give ``module_name`` (a package whose names are all in its globals after import, plus
    ``extra`` loaded lazily) a module ``__getattr__`` raising ``missing_name``; a module that
    already has a ``__getattr__`` calls ``missing_name`` itself."""
    mod = sys.modules[module_name]
    extra = tuple(extra)

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise missing_name(module_name, name, public_names(mod) + list(extra))
    mod.__getattr__ = __getattr__


def public_names(mod) -> list:
    """The names ``mod`` offers: its ``__all__``, else its globals less the modules it imported
    (its own submodules stay)."""
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    out = []
    for n, v in vars(mod).items():
        if isinstance(v, type(sys)) and not v.__name__.startswith(mod.__name__ + "."):
            continue
        out.append(n)
    return out


if __name__ == "__main__":
    import os
    write_jax_names(os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_names.py"))
