"""pyproject.toml's explicit ``packages`` list is what a built wheel holds: a package folder
missing from it works in an editable install and is absent from the wheel. Every folder with
an ``__init__.py`` under the mapped folders must be listed, and nothing else."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def package_folders(package_dir: dict, root: str = ROOT) -> set:
    """Import names of every folder with an ``__init__.py`` under the mapped folders."""
    found = set()
    for name, folder in package_dir.items():
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "__init__.py" not in filenames:
                dirnames[:] = []  # not a package: nor is anything under it
                continue
            rel = os.path.relpath(dirpath, base)
            found.add(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    return found


def test_every_package_folder_is_in_the_packages_list():
    st = _pyproject()["tool"]["setuptools"]
    listed = set(st["packages"])
    found = package_folders(st["package-dir"])
    assert not found - listed, f"package folders missing from pyproject's packages: {sorted(found - listed)}"
    assert not listed - found, f"pyproject lists packages with no folder: {sorted(listed - found)}"


def test_the_check_finds_a_new_backend_folder(tmp_path):
    """The checker itself: a new backends/<k>/ with an __init__.py is found."""
    import shutil
    shutil.copytree(os.path.join(ROOT, "backends"), tmp_path / "backends",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "backends" / "newkind").mkdir()
    (tmp_path / "backends" / "newkind" / "__init__.py").write_text("")
    found = package_folders({"hlo.backends": "backends"}, str(tmp_path))
    assert "hlo.backends.newkind" in found and "hlo.backends.cpu" in found
