"""The import graph of hlo's modules, read from source (no module is imported).

``python tests/import_graph.py`` prints the strongly connected components (import cycles) of
more than one module, largest first; ``tests/test_import_layers.py`` checks the layer contract.

What counts as an import: every ``import`` / ``from ... import`` statement anywhere in a module
(inside functions and methods too, since those run as soon as the function is called), and
``importlib.import_module("constant.name")``. Imports under ``if TYPE_CHECKING:`` never run and
are left out. ``from hlo.x import y`` is an import of the submodule ``hlo.x.y`` when one exists,
else of ``hlo.x``. An import of a package stands for what its ``__init__`` imports (followed
through nested packages); package ``__init__`` files are not nodes of the graph themselves.
"""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Source folder -> import name (pyproject.toml's package-dir).
FOLDERS = {"compiler": "hlo", "ir": "hlo.ir", "passes": "hlo.passes", "backends": "hlo.backends",
           "runtime": "hlo.runtime"}


@dataclass(frozen=True)
class Import:
    target: str  # a module (never a package) of the graph
    path: str  # the importing file, relative to the repository root
    line: int
    in_function: bool

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def find_modules(root: str = ROOT) -> dict[str, tuple[str, bool]]:
    """Every module name -> (file path relative to root, is a package ``__init__``)."""
    out = {}
    for folder, name in FOLDERS.items():
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames
                                 if os.path.exists(os.path.join(dirpath, d, "__init__.py")))
            rel = os.path.relpath(dirpath, base)
            pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            for f in sorted(filenames):
                if not f.endswith(".py"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                if f == "__init__.py":
                    out[pkg] = (path, True)
                else:
                    out[pkg + "." + f[:-3]] = (path, False)
    # ``hlo.ir`` and friends are folders of their own but subpackages of ``hlo``.
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def raw_imports(path: str, module: str, is_package: bool, root: str = ROOT):
    """(imported name, line, inside a function) for each import in the file; a ``from`` import
    yields ``package.name`` candidates as ``(base, name)`` pairs for the resolver."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if is_package else module.rpartition(".")[0]
    found = []

    def visit(node, in_function):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, in_function)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function = True
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(((alias.name, None), node.lineno, in_function))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 > 0:
                    parts = parts[:-(node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                found.append(((base, alias.name), node.lineno, in_function))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append(((node.args[0].value, None), node.lineno, in_function))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function)

    visit(tree, False)
    return found


class ImportGraph:
    def __init__(self, root: str = ROOT):
        self.modules = find_modules(root)
        self._raw = {m: raw_imports(p, m, pkg, root) for m, (p, pkg) in self.modules.items()}
        self._expanding: set[str] = set()
        self._package_targets: dict[str, set[str]] = {}
        # module -> list of Import (modules only, no packages, no self-edges)
        self.edges: dict[str, list[Import]] = {}
        for m, (path, pkg) in self.modules.items():
            if pkg:
                continue
            out = {}
            for (base, name), line, in_fn in self._raw[m]:
                for t in sorted(self._resolve(base, name)):
                    if t != m:
                        out.setdefault((t, line), Import(t, path, line, in_fn))
            self.edges[m] = list(out.values())

    def _is_package(self, name):
        return self.modules.get(name, (None, False))[1]

    def _expand(self, name: str) -> set[str]:
        """A module name -> itself; a package -> the modules its ``__init__`` imports."""
        if name not in self.modules:
            return set()
        if not self._is_package(name):
            return {name}
        if name in self._package_targets:
            return self._package_targets[name]
        if name in self._expanding:
            return set()
        self._expanding.add(name)
        out = set()
        for (base, attr), _, _ in self._raw[name]:
            out |= self._resolve(base, attr)
        self._expanding.discard(name)
        self._package_targets[name] = out
        return out

    def _resolve(self, base, name) -> set[str]:
        if base is None or not (base == "hlo" or base.startswith("hlo.")):
            return set()
        if name is not None and f"{base}.{name}" in self.modules:
            return self._expand(f"{base}.{name}")
        if name is None:
            # ``import hlo.a.b`` binds ``hlo`` but imports hlo.a.b: that module is the target.
            return self._expand(base)
        return self._expand(base)

    def graph(self) -> dict[str, set[str]]:
        return {m: {i.target for i in imps} for m, imps in self.edges.items()}

    def cycles(self) -> list[list[str]]:
        """Strongly connected components of more than one module, largest first."""
        return [c for c in strongly_connected(self.graph()) if len(c) > 1]


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components sorted by size, then name."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                comps.append(sorted(comp))
    return sorted(comps, key=lambda c: (-len(c), c))


def main(argv=None) -> int:
    g = ImportGraph()
    cycles = g.cycles()
    print(f"{len(g.edges)} modules, {sum(len(v) for v in g.graph().values())} import edges")
    if not cycles:
        print("no import cycles")
    for c in cycles:
        print(f"cycle of {len(c)}: {' '.join(c)}")
    if "-v" in (argv or sys.argv[1:]):
        for c in cycles:
            members = set(c)
            for m in c:
                for imp in g.edges[m]:
                    if imp.target in members:
                        fn = " (in a function)" if imp.in_function else ""
                        print(f"  {imp.where()}: {m} -> {imp.target}{fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
