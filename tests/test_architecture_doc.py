"""docs/ARCHITECTURE.md stays true to the code: every repository path it quotes in backticks
exists, and every dotted ``hlo.`` name it quotes imports (a module) or is found (an attribute of
one). A rename that leaves the page behind fails here."""
import importlib
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
TOP = ("compiler", "ir", "passes", "backends", "runtime", "tests", "bench", "docs", "examples")


def quoted() -> list:
    """The backticked spans of the page, with their line numbers (code blocks left out)."""
    out, fence = [], False
    with open(DOC, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            if not fence:
                out += [(n, m.group(1)) for m in re.finditer(r"`([^`\n]+)`", line)]
    return out


def _path(span: str):
    """A repository path the span names (``backends/cpu/entry.py``, ``runtime/cpu/``; the file
    of ``runtime/cpu/target.cache_bytes``), or None. ``<k>`` stands for any target."""
    span = "compiler/" + span[4:] if span.startswith("hlo/") else span
    if not re.fullmatch(r"[\w./-]+", span) or "/" not in span or span.split("/")[0] not in TOP:
        return None
    if not span.endswith(("/", ".py", ".md", ".toml", ".txt", ".json")) and "." in span.rsplit("/", 1)[-1]:
        return span.split(".")[0] + ".py"  # a module's attribute
    return span


def _file_name(span: str):
    """A file the span names without its folder from the top (``cpu/entry.py``, ``entry.py``),
    or None: some file of the repository must end with it."""
    if re.fullmatch(r"[\w/]+\.(py|md)", span) and span.split("/")[0] not in TOP + ("hlo",):
        return span
    return None


def _exists(path: str) -> bool:
    p = os.path.join(ROOT, path.rstrip("/"))
    return os.path.exists(p) or os.path.exists(p + ".py")


def repo_files() -> list:
    out = []
    for top in TOP:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "__pycache__"))]
            out += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames]
    return out


def _dotted(span: str):
    """A dotted ``hlo.`` name the span names (``hlo.runtime.cpu.executable.Executable``; a
    call's parentheses and arguments dropped), or None."""
    m = re.match(r"(hlo(?:\.\w+)+)(\(.*\))?$", span)
    return m.group(1) if m else None


def resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_page_quotes_paths_and_names():
    spans = quoted()
    assert sum(_path(s) is not None for _, s in spans) > 50
    assert sum(_dotted(s) is not None for _, s in spans) > 20


def test_every_quoted_path_exists():
    files = repo_files()
    missing = [f"line {n}: {s}" for n, s in quoted()
               if (_path(s) is not None and not _exists(_path(s)))
               or (_file_name(s) is not None and not any(f == s or f.endswith("/" + s) for f in files))]
    assert not missing, "docs/ARCHITECTURE.md quotes paths that do not exist:\n" + "\n".join(missing)


def test_every_quoted_hlo_name_exists():
    missing = [f"line {n}: {s}" for n, s in quoted()
               if _dotted(s) is not None and not resolves(_dotted(s))]
    assert not missing, "docs/ARCHITECTURE.md quotes hlo names that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("span,path,name", [
    ("backends/cpu/entry.py", "backends/cpu/entry.py", None),
    ("runtime/cpu/", "runtime/cpu/", None),
    ("runtime/cpu/target.cache_bytes", "runtime/cpu/target.py", None),
    ("hlo.runtime.cpu.executable.Executable", None, "hlo.runtime.cpu.executable.Executable"),
    ("hlo.device_put(x)", None, "hlo.device_put"),
    ("model.py", None, None), ("x / 2", None, None),
])
def test_what_counts_as_a_path_or_a_name(span, path, name):
    assert _path(span) == path and _dotted(span) == name


def test_a_missing_name_is_found():
    assert resolves("hlo.runtime.cpu.executable.Executable") and resolves("hlo.jit")
    assert not resolves("hlo.targets.TARGETS") and not resolves("hlo.runtime.executable")


def _modules(folder: str):
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            if f.endswith(".py"):
                yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def test_no_file_name_is_used_in_both_backends_and_runtime():
    """A file's folder says its layer and its name its role (the page's "Packages")."""
    names = {layer: {os.path.basename(m) for m in _modules(layer)} for layer in ("backends", "runtime")}
    both = sorted(names["backends"] & names["runtime"] - {"__init__.py"})
    assert not both, f"file names used in both backends/ and runtime/: {both}"


def test_the_runtime_outside_its_cpu_folder_is_not_cpu_only():
    """No module of runtime/ outside runtime/cpu/ imports the CPU runtime or llvmlite when it is
    imported (a function may, where it serves the CPU)."""
    import ast
    bad = []
    for m in _modules("runtime"):
        if m.startswith(os.path.join("runtime", "cpu") + os.sep):
            continue
        with open(os.path.join(ROOT, m), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ("." * node.level) + (node.module or "")
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            if any(n.startswith(("llvmlite", "hlo.runtime.cpu")) or re.match(r"\.+cpu\b", n) for n in names):
                bad.append(f"{m}:{node.lineno}")
    assert not bad, f"runtime modules outside runtime/cpu/ that import the CPU runtime: {bad}"
