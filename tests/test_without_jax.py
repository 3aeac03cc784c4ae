"""jax and jaxlib are an optional extra (``hlo[stablehlo]``): in a process where they cannot be
imported, ``import hlo``, ``jit``, ``grad``, ``vmap``, compiling the seed workloads for cpu,
``save``/``load``, ``tree_util`` and the CLI's compile/run/inspect/cache/export-c/opt work, and the StableHLO
entry points raise ``MissingExtraError`` naming ``pip install 'hlo[stablehlo]'``.

One subprocess does all of it (jax is imported by the test process itself, so it cannot be
blocked here): a ``sys.meta_path`` finder placed before ``import hlo`` refuses jax and jaxlib
as an environment without them would, and the process reports what it saw as JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BLOCK = """
import sys
class _NoJax:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jax", "jaxlib"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoJax())
"""

SCRIPT = BLOCK + r"""
import io, json, os, contextlib, collections
import numpy as np
out = {}
try:
    import jax  # noqa
    out["jax_importable"] = True
except ImportError:
    out["jax_importable"] = False

import hlo, hlo.numpy as hnp, hlo.tree_util as htu
from bench.workloads import WORKLOADS, Case, Ops, flatten, reference
folder = sys.argv[1]

# the seed workloads (f32, quick sizes): compiled for cpu, saved, loaded, run, vs float64 numpy
errs, ptx = {}, {}
for w in WORKLOADS:
    case = Case(w, "quick", "f32")
    inputs = case.inputs()
    def fn(*a, _body=w.fn):
        return _body(Ops(hnp, hlo.grad, hlo.vmap), *a)
    fn.__name__ = fn.__qualname__ = w.id
    compiled = hlo.aot.compile(fn, *[hlo.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs], target="cpu")
    path = os.path.join(folder, w.id + ".hlox")
    compiled.save(path)
    outs = flatten(hlo.load(path)(*inputs))
    refs = reference(case, inputs)
    worst = 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        o = np.asarray(o, np.float64)
        if i in w.delta_of:  # updated parameters: compare the update
            base = inputs[w.delta_of[i]].astype(np.float64)
            o, r = o - base, r - base
        worst = max(worst, float(np.max(np.abs(o - r) / (2e-4 + 2e-3 * np.abs(r)))))
    errs[w.id] = [len(outs), len(refs), worst]
    # and for cuda: PTX (assembled where ptxas is installed; run by tests/cuda on a GPU)
    ptx[w.id] = ".target sm_" in hlo.aot.compile(
        fn, *[hlo.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs], target="cuda").as_text("ptx")
out["workloads"] = errs
out["ptx"] = ptx

# jit / grad / vmap over pytrees, and a class registered with hlo's tree_util
@htu.register_pytree_node_class
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b
    def tree_flatten(self):
        return (self.a, self.b), None
    @classmethod
    def tree_unflatten(cls, aux, ch):
        return cls(*ch)
P = collections.namedtuple("P", "w b")
x = np.arange(6, dtype=np.float32).reshape(2, 3)
loss = lambda p, x: hnp.sum((x * p.a + p.b["c"]) ** 2)
g = hlo.jit(hlo.grad(loss))(Pair(np.float32(2), {"c": np.float32(1)}), x)
out["grad"] = [float(g.a), float(g.b["c"])]
want_a = float(np.sum(2 * (2 * x + 1) * x)); want_c = float(np.sum(2 * (2 * x + 1)))
out["grad_want"] = [want_a, want_c]
leaves, tree = htu.tree_flatten({"p": P(1, 2), "q": [Pair(3, 4)]})
out["leaves"] = leaves
out["roundtrip"] = htu.tree_unflatten(tree, leaves)["q"][0].b
out["vmap"] = hlo.vmap(lambda r: hnp.max(r))(x).tolist()

# the StableHLO entry points: one clear error naming the extra
from hlo.ir.stablehlo import MissingExtraError, export_module, import_module
lowered = hlo.jit(lambda x: x + 1).lower(x)
errors = {}
for name, call in [("load_stablehlo", lambda: hlo.load_stablehlo("module {}")),
                   ("import_module", lambda: import_module("module {}")),
                   ("export_module", lambda: export_module(lowered.ir))]:
    try:
        call()
        errors[name] = None
    except MissingExtraError as e:
        errors[name] = [type(e).__name__, isinstance(e, ImportError), str(e)]
out["errors"] = errors
out["export_unverified"] = export_module(lowered.ir, verify=False).count("stablehlo.add")
for tool, mod in [("conformance", "hlo.tools.conformance"), ("api_coverage", "hlo.tools.api_coverage")]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = __import__(mod, fromlist=["main"]).main([folder] if tool == "conformance" else [])
    out[tool] = [rc, err.getvalue()]

# the CLI's own commands
from hlo.tools.cli import main as cli
with open(os.path.join(folder, "model.py"), "w") as f:
    f.write("import hlo.numpy as hnp\ndef f(x, w):\n    return hnp.tanh(x @ w)\n")
np.save(os.path.join(folder, "x.npy"), np.ones((2, 3), np.float32))
np.save(os.path.join(folder, "w.npy"), np.full((3, 4), 0.5, np.float32))
rcs = {}
stdout = io.StringIO()
with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
    m = os.path.join(folder, "model.hlox")
    rcs["compile"] = cli(["compile", os.path.join(folder, "model.py") + ":f", "--arg", "f32[2,3]",
                          "--arg", "f32[3,4]", "-o", m, "-q"])
    rcs["run"] = cli(["run", m, "--input", os.path.join(folder, "x.npy"), os.path.join(folder, "w.npy"),
                      "--output-dir", folder])
    rcs["inspect"] = cli(["inspect", m, "--no-ir"])
    rcs["cache"] = cli(["cache", "info"])
    rcs["export-c"] = cli(["export-c", m, "-o", os.path.join(folder, "c")])
    with open(os.path.join(folder, "ir.hlo"), "w") as f:
        f.write(lowered.as_text())
    before = len(stdout.getvalue())
    rcs["opt"] = cli(["opt", os.path.join(folder, "ir.hlo"), "--pipeline", "--target", "cpu"])
out["exported_c"] = sorted(os.listdir(os.path.join(folder, "c")))
out["opt_printed"] = stdout.getvalue()[before:]
out["cli"] = rcs
out["cli_result"] = np.load(os.path.join(folder, "output_0.npy")).tolist()
out["jax_modules"] = sorted(n for n in sys.modules if n.split(".")[0] in ("jax", "jaxlib"))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nojax")
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["HLO_CACHE"] = "0"  # compile for real, not from an earlier run's cache
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], capture_output=True, text=True,
                       timeout=600, env=env, cwd=ROOT)
    assert p.returncode == 0, f"subprocess failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_jax_is_blocked_and_never_imported(report):
    assert report["jax_importable"] is False
    assert report["jax_modules"] == []


def test_seed_workloads_compile_save_load_and_run_on_cpu(report):
    from bench.workloads import WORKLOADS
    assert set(report["workloads"]) == {w.id for w in WORKLOADS}
    assert report["ptx"] == {w.id: True for w in WORKLOADS}, "cuda compiles to PTX without jax too"
    for wid, (n_out, n_ref, worst) in report["workloads"].items():
        assert n_out == n_ref, wid
        assert worst <= 1.0, f"{wid}: error {worst:.3g} x the tolerance (rtol 2e-3, atol 2e-4)"


def test_grad_vmap_and_tree_util(report):
    np.testing.assert_allclose(report["grad"], report["grad_want"], rtol=1e-5)
    assert report["leaves"] == [1, 2, 3, 4] and report["roundtrip"] == 4
    assert report["vmap"] == [2.0, 5.0]


@pytest.mark.parametrize("entry", ["load_stablehlo", "import_module", "export_module"])
def test_stablehlo_entry_points_name_the_extra(report, entry):
    err = report["errors"][entry]
    assert err is not None, f"{entry} ran without jaxlib"
    name, is_import_error, msg = err
    assert name == "MissingExtraError" and is_import_error
    assert "pip install 'hlo[stablehlo]'" in msg and "jaxlib" in msg


def test_unverified_export_needs_no_jaxlib(report):
    assert report["export_unverified"] == 1


@pytest.mark.parametrize("tool", ["conformance", "api_coverage"])
def test_jax_tools_exit_with_the_extra_named(report, tool):
    rc, err = report[tool]
    assert rc == 2 and "pip install 'hlo[stablehlo]'" in err


def test_cli_commands_work(report):
    assert report["cli"] == {"compile": 0, "run": 0, "inspect": 0, "cache": 0, "export-c": 0, "opt": 0}
    assert "libf.so" in report["exported_c"] and "f.h" in report["exported_c"]
    assert "loop_fusion" in report["opt_printed"] and "add(" in report["opt_printed"]
    np.testing.assert_allclose(report["cli_result"], np.full((2, 4), np.tanh(1.5)), rtol=1e-5)


def test_require_passes_where_jax_is_installed():
    """In the test environment (which has the extra) the checks pass, once and cached."""
    pytest.importorskip("jaxlib")
    from hlo.ir.stablehlo.requires import require_jax, require_jaxlib
    require_jaxlib("this test")
    require_jax("this test")


def test_pyproject_keeps_jax_out_of_the_dependencies():
    """jax is in the extra the error names and in the tests' extra, not a dependency."""
    from test_packaging import _pyproject

    from hlo.ir.stablehlo.requires import INSTALL
    project = _pyproject()["project"]
    names = lambda reqs: {r.split(">")[0].split("=")[0].split("<")[0].strip() for r in reqs}
    extras = project["optional-dependencies"]
    assert not names(project["dependencies"]) & {"jax", "jaxlib"}
    assert INSTALL == "pip install 'hlo[stablehlo]'"
    assert {"jax", "jaxlib"} <= names(extras["stablehlo"]) and {"jax", "jaxlib"} <= names(extras["test"])
