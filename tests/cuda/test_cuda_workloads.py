"""Every seed workload (bench/workloads.py, quick sizes and dtypes) compiled for target cuda on
any machine (PTX that ptxas accepts, a cubin per arch), saved as ``.hlox`` and loaded in a
fresh process, which needs no code generator and, without a GPU, says clearly that no CUDA
device is present. With a GPU (marker ``gpu``), results against the float64 numpy reference."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from cuda_helpers import HAVE_GPU, gpu

import hlo
import hlo.numpy as hnp
from hlo.backends.nvptx import find_ptxas as ptxas_path

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "aot"))
from aot_util import forbidden, run_python

from bench.workloads import WORKLOADS, Case, Ops, flatten, reference

CASES = [Case(w, "quick", dt) for w in WORKLOADS for dt in w.dtypes["quick"]]
# relative error (norm) against float64 numpy: float32 math, and the narrow types' rounding
TOL = {"f32": 1e-4, "f16": 2e-2, "bf16": 5e-2}


def _compile(case):
    w = case.workload

    def fn(*a, _body=w.fn):
        return _body(Ops(hnp, hlo.grad, hlo.vmap), *a)
    fn.__name__ = fn.__qualname__ = w.id
    inputs = case.inputs()
    return hlo.aot.compile(fn, *[hlo.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs], target="cuda"), inputs


@pytest.fixture(scope="module")
def compiled():
    return {case.name: _compile(case) for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_workload_compiles_to_ptx(case, compiled):
    c, _ = compiled[case.name]
    ptx = c.as_text("ptx")
    kernels = c._artifact.executable.kernels  # none where cuBLASLt computes everything
    assert ".target sm_" in ptx and (".entry" in ptx) == bool(kernels)
    if ptxas_path() is not None and kernels:
        assert c._artifact.executable.cubins, "ptxas did not assemble the PTX"


@gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_workload_on_gpu(case, compiled):
    c, inputs = compiled[case.name]
    got = flatten(c(*inputs))
    ref = reference(case, inputs)
    for g, r in zip(got, ref):
        g = np.asarray(g).astype(np.float64)
        err = np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)
        assert err < TOL[case.dtype], f"{case.name}: relative error {err:.2e}"


LOADER = """
import json, sys
import numpy as np
import hlo
exe = hlo.load(sys.argv[1])
x = np.load(sys.argv[2])
try:
    out = exe(*[x[f"arr_{i}"] for i in range(len(exe.in_avals))])
    res = {"ran": True, "out": [np.asarray(o).tolist() for o in (out if isinstance(out, (list, tuple)) else [out])]}
except Exception as e:
    res = {"ran": False, "error": type(e).__name__, "message": str(e)}
res["modules"] = sorted(sys.modules)
res["target"] = exe.target
print(json.dumps(res))
"""


def test_hlox_round_trip_in_fresh_process(tmp_path, compiled):
    case = next(c for c in CASES if c.workload.id == "softmax")
    c, inputs = compiled[case.name]
    path = tmp_path / "softmax.hlox"
    c.save(path)
    np.savez(tmp_path / "in.npz", *inputs)
    got = run_python(LOADER, str(path), str(tmp_path / "in.npz"))
    assert got["target"] == "cuda"
    assert forbidden(got["modules"]) == []
    assert not any(m.startswith("hlo.backends.cuda.") and m not in (
        "hlo.runtime.cuda.artifact", "hlo.backends.cuda.device") for m in got["modules"]), got["modules"]
    if HAVE_GPU:
        assert got["ran"], got
        np.testing.assert_allclose(np.asarray(got["out"][0]), flatten(c(*inputs))[0], rtol=1e-6)
    else:
        assert not got["ran"]
        assert "no CUDA device" in got["message"], got["message"]
