"""``python -m hlo.tools.api_coverage``: how much of jax's API hlo's modules of the same role
have, written as the table ``docs/API_COVERAGE.md`` (``--check`` compares instead of writing;
``--missing`` prints the missing names only).

What is counted: a module's public callables, i.e. the names not starting with ``_`` whose
value is callable and not a module (functions, classes, dtype scalar types); constants such as
``jnp.pi`` are not counted. A jax name is covered when ``hasattr`` finds it in hlo's module. A
missing name is listed with the reason hlo leaves it out (``ABSENT``), or "not written yet".

Imports jax (it is the measure): a tool for developers and tests, not for hlo's users.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import types
from typing import Dict, List, Tuple

from hlo.ir.stablehlo.requires import MissingExtraError, require_jax

# (jax module, hlo module, counted toward the >= 95 % goal)
NAMESPACES: Tuple[Tuple[str, str, bool], ...] = (
    ("jax.numpy", "hlo.numpy", True),
    ("jax.numpy.linalg", "hlo.numpy.linalg", True),
    ("jax.numpy.fft", "hlo.numpy.fft", True),
    ("jax.nn", "hlo.nn", True),
    ("jax.random", "hlo.random", True),
    ("jax.tree_util", "hlo.tree_util", True),
    ("jax.lax", "hlo.lax", True),
    ("jax.lax.linalg", "hlo.lax.linalg", False),
)

_IMPURE = ("jax.numpy's only raises NotImplementedError (reading a file or an iterator is not "
           "pure): use numpy's on the host and pass the array")

# Names hlo leaves out on purpose, with the reason the table gives. Everything else missing is
# "not written yet".
ABSENT: Dict[str, Dict[str, str]] = {
    "jax.numpy": {
        "fromfile": _IMPURE, "fromiter": _IMPURE,
        "from_dlpack": "hlo.jit takes DLPack tensors (torch, cupy, jax) as arguments directly",
        "ufunc": "jax's ufunc class (reduce/accumulate/at methods): hlo.numpy's ufuncs are "
                 "plain functions",
        "frompyfunc": "needs jax's ufunc class (see ufunc)",
        "ndarray": "jax's array type: hlo's traced values are hlo.Tracer, results are numpy arrays",
        "einsum_path": "opt_einsum's contraction-path planner: hlo.numpy.einsum plans itself",
        "roots": "numpy's companion-matrix eigenvalues need a general (non-symmetric) eigensolver, "
                 "which hlo.numpy.linalg.eig does not have yet",
        "int1": "1-bit integers: no such IR element type", "uint1": "1-bit integers: no such IR "
        "element type",
    },
    "jax.lax": {
        **{n: "a collective over named device axes that hlo.lax.parallel (psum, all_gather, "
           "ppermute, ...) does not have" for n in (
               "pbroadcast", "pcast", "precv", "psend", "pshuffle", "pswapaxes", "ragged_all_to_all")},
        **{n: "picks among a backend's implementations of a transcendental (the accuracy= argument "
           "of exp, tanh, ...): hlo's elementwise ops have one implementation each"
           for n in ("AccuracyMode", "Tolerance")},
        **{n: "picks a dot's internal algorithm (bf16 passes, tf32, ...): hlo's dot has one, "
           "products at the operands' full precision (jax's HIGHEST; hlo.lax.Precision is taken)"
           for n in ("DotAlgorithm", "DotAlgorithmPreset")},
        **{n: "XLA's token values, which order side effects: hlo's IR has no token type"
           for n in ("after_all", "create_token")},
        "dce_sink": "jax's internal, undocumented marker against its own dead-code elimination: "
                    "not an array computation",
        "rng_uniform": "XLA's stateful RngUniform, whose numbers are backend-defined (jax: "
                       "'different implementations may return different results'): use "
                       "hlo.random.uniform",
    },
    "jax.random": {
        "key_impl": "hlo's keys are raw uint32[2] threefry data: one implementation",
        "key_dtype": "the dtype of jax's typed key arrays: hlo's keys are raw uint32[2] data",
    },
}


def public_callables(mod) -> List[str]:
    out = []
    for n in dir(mod):
        if n.startswith("_"):
            continue
        v = getattr(mod, n)
        if isinstance(v, types.ModuleType) or not callable(v):
            continue
        out.append(n)
    return sorted(out)


def measure() -> List[dict]:
    """Per namespace: jax's names, the covered and the missing ones."""
    rows = []
    for jm, hm, counted in NAMESPACES:
        jmod = importlib.import_module(jm)
        hmod = importlib.import_module(hm)
        names = public_callables(jmod)
        missing = [n for n in names if not hasattr(hmod, n)]
        rows.append(dict(jax=jm, hlo=hm, counted=counted, names=names, missing=missing,
                         covered=len(names) - len(missing)))
    return rows


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f} %" if b else "-"


def table(rows: List[dict]) -> str:
    import jax
    out = ["# hlo's coverage of jax's API", "",
           f"Written by `python -m hlo.tools.api_coverage` from jax {jax.__version__} "
           "(`tests/frontend/test_api_coverage.py` checks that it is current). A name counts "
           "when it is a public callable of jax's module (functions, classes, dtype scalar "
           "types; not constants or submodules) and is covered when hlo's module of the same "
           "role has it. Every covered name added for this table is tested against jax (or "
           "numpy in float64) in `tests/frontend/test_api_*.py`. \"Left out on purpose\" counts the "
           "missing names listed below with a reason (not array computations: file I/O, printing, "
           "jax's own types; or not expressible in hlo's ops yet); \"share of the rest\" is the "
           "covered share of the other names.", "",
           "| jax module | hlo module | covered | of | share | left out on purpose | share of the rest |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        absent = len([n for n in r["missing"] if n in ABSENT.get(r["jax"], {})])
        rest = len(r["names"]) - absent
        out.append(f"| `{r['jax']}` | `{r['hlo']}` | {r['covered']} | {len(r['names'])} | "
                   f"{_pct(r['covered'], len(r['names']))} | {absent} | {_pct(r['covered'], rest)} |")
    out += ["", "`jax.lax.linalg` is listed for information (not counted toward the goal): what it has "
            "beyond hlo's is mostly factorizations hlo.numpy.linalg does not have yet (eig, schur, "
            "hessenberg, tridiagonal).", ""]
    for r in rows:
        out.append(f"## `{r['jax']}`: missing from `{r['hlo']}` ({len(r['missing'])})")
        out.append("")
        if not r["missing"]:
            out += ["Nothing.", ""]
            continue
        reasons = ABSENT.get(r["jax"], {})
        out += ["| name | why |", "|---|---|"]
        for n in r["missing"]:
            out.append(f"| `{n}` | {reasons.get(n, 'not written yet')} |")
        out.append("")
    return "\n".join(out)


def default_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(os.path.dirname(here)), "docs", "API_COVERAGE.md")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hlo.tools.api_coverage", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed table is stale")
    ap.add_argument("--missing", action="store_true", help="print the missing names only")
    ap.add_argument("--path", default=default_path())
    args = ap.parse_args(argv)
    try:  # the table compares hlo's modules with jax's
        require_jax("python -m hlo.tools.api_coverage")
    except MissingExtraError as e:
        print(f"api_coverage: {e}", file=sys.stderr)
        return 2
    rows = measure()
    if args.missing:
        for r in rows:
            print(f"{r['jax']}: {r['covered']}/{len(r['names'])}  missing: {' '.join(r['missing'])}")
        return 0
    text = table(rows) + "\n"
    if args.check:
        with open(args.path) as f:
            if f.read() != text:
                print(f"{args.path} is stale: python -m hlo.tools.api_coverage rewrites it", file=sys.stderr)
                return 1
        return 0
    with open(args.path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
