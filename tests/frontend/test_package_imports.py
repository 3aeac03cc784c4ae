"""``import hlo`` is lazy (so ``hlo.load`` stays light); no submodule may shadow a public function.

Importing a submodule sets it as an attribute of its package, so a submodule named like a public
function (``hlo/jit.py`` next to ``hlo.jit``) would replace the function whenever it is imported
before the frontend is loaded. These checks run in a fresh process, where that order happens.
"""
import subprocess
import sys

import pytest

CHECK = r"""
import importlib, pkgutil, types, sys
import hlo
mods = [m.name for m in pkgutil.iter_modules(hlo.__path__, "hlo.") if m.name not in ("hlo.__main__",)]
for name in mods:
    importlib.import_module(name)
for name in ("jit", "make_ir", "grad", "value_and_grad", "vjp", "jvp", "load", "load_stablehlo",
             "explain_cache_miss", "default_target"):
    obj = getattr(hlo, name)
    assert callable(obj) and not isinstance(obj, types.ModuleType), (name, obj)
print("ok", len(mods))
"""


@pytest.mark.parametrize("first", ["", "import hlo.staging.jit\n", "from hlo.staging.stages import Compiled\n"])
def test_no_submodule_shadows_a_public_function(first):
    r = subprocess.run([sys.executable, "-c", first + CHECK], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ok")
