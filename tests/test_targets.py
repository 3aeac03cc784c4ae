"""The target checklist: every target of the one table (``hlo.ir.targets``) has everything a
target needs, so adding one is this test plus one folder in ``backends/`` and one in
``runtime/``; forgetting a piece fails here, not in a user's first compile or load.

For a compiled target ``k``: its code generator (``hlo.backends.k``: ``compile``,
``lowered_ops``, ``declined_ops``), its runtime (``hlo.runtime.k.target.current()`` is a
``Target`` of kind ``k``), a loader of its saved files (``hlo.staging.saved.LOADERS``), its parts
of the compilation cache's key, and its packages in ``pyproject.toml``.
"""
import importlib
import inspect
import os

import pytest

from hlo.ir import targets as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_table():
    assert T.TARGETS == tuple(T.INFO) and len(set(T.TARGETS)) == len(T.TARGETS)
    assert set(T.COMPILED) <= set(T.TARGETS) and "cpu" in T.COMPILED
    assert [t for t in T.TARGETS if not T.info(t).compiled] == ["interpreter"]
    with pytest.raises(ValueError, match=r"unknown target 'gpu' \(known: cpu, cuda, interpreter\)"):
        T.info("gpu")


def test_every_list_of_target_names_is_the_table():
    import hlo
    from hlo.passes.options import check_target, target_defaults
    from hlo.runtime.target import KINDS
    from hlo.staging.saved import LOADERS, SUPPORTED_TARGET_KINDS
    assert hlo.config.TARGETS == hlo.TARGETS == T.TARGETS
    assert KINDS == SUPPORTED_TARGET_KINDS == T.COMPILED
    assert set(LOADERS) == set(T.COMPILED)
    for t in T.TARGETS:
        assert check_target(t) == t and target_defaults(t) == dict(T.info(t).pass_defaults)


@pytest.mark.parametrize("kind", T.COMPILED)
def test_codegen(kind):
    backend = importlib.import_module(f"hlo.backends.{kind}")
    for name in ("compile", "compile_module", "lowered_ops", "declined_ops"):
        assert callable(getattr(backend, name, None)), f"hlo.backends.{kind} has no {name}()"
    assert "optimized" in inspect.signature(backend.compile).parameters


@pytest.mark.parametrize("kind", T.COMPILED)
def test_runtime(kind, monkeypatch):
    from hlo.runtime.target import Target, current
    mod = importlib.import_module(f"hlo.runtime.{kind}.target")
    assert callable(getattr(mod, "current", None)), f"hlo.runtime.{kind}.target has no current()"
    classes = [c for c in vars(mod).values()
               if inspect.isclass(c) and issubclass(c, Target) and c is not Target]
    assert classes, f"hlo.runtime.{kind}.target defines no Target subclass"
    if "HLO_CUDA_ARCH" not in os.environ:  # a GPU's target on a machine without one
        monkeypatch.setenv("HLO_CUDA_ARCH", "sm_90")
    t = current(kind)
    assert isinstance(t, Target) and t.kind == kind
    entry = t.manifest_entry()
    assert entry["kind"] == kind
    t.check_loadable(entry, "a file of this machine")  # code built here loads here


@pytest.mark.parametrize("kind", T.COMPILED)
def test_saved_file_section(kind):
    from hlo.staging import saved
    assert kind in saved.SUPPORTED_TARGET_KINDS
    assert callable(getattr(saved.LoadedExecutable, saved.LOADERS[kind], None)), \
        f"LoadedExecutable has no loader {saved.LOADERS[kind]} for code.{kind}"


@pytest.mark.parametrize("kind", T.COMPILED)
def test_cache_key_part(kind, monkeypatch):
    from hlo.staging import cache
    if "HLO_CUDA_ARCH" not in os.environ:  # a GPU's parts on a machine without one
        monkeypatch.setenv("HLO_CUDA_ARCH", "sm_90")
    parts = cache._target_parts(kind)
    assert set(parts) == {"cpu", "environment"} and all(isinstance(v, str) and v for v in parts.values())
    assert parts != cache._target_parts("interpreter")


@pytest.mark.parametrize("kind", T.COMPILED)
def test_packages_entry(kind):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        packages = tomllib.load(f)["tool"]["setuptools"]["packages"]
    for layer in ("backends", "runtime"):
        assert f"hlo.{layer}.{kind}" in packages, f"pyproject.toml does not list hlo.{layer}.{kind}"
        assert os.path.isfile(os.path.join(ROOT, layer, kind, "__init__.py"))
