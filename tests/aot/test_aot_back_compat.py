"""Executables saved by earlier format versions (tests/data/) keep loading and running.

``hlox_v1_small.hlox`` was written by format version 1 (tests/data/make_hlox_v1.py, baseline
CPU, no BLAS): tanh/scale/shift, a matrix product, a row sum, an integer max and a mean. When
the format changes, the version is bumped, a new file is added beside this one, and this test
keeps passing (or the loader refuses version 1 by name, and this test says so)."""
from __future__ import annotations

import platform
import sys

import numpy as np
import pytest
from aot_util import REPO, forbidden, run_python

import hlo
from hlo.runtime import hlox

DATA = REPO / "tests" / "data"
V1 = DATA / "hlox_v1_small.hlox"

pytestmark = pytest.mark.skipif(
    not (platform.machine() == "x86_64" and sys.platform.startswith("linux")),
    reason="tests/data holds x86_64 Linux executables; this machine cannot run them")


def _check(out, d):
    np.testing.assert_array_equal(out[0]["z"], d["z"])
    np.testing.assert_array_equal(out[0]["rowsum"], d["rowsum"])
    assert out[0]["kmax"].dtype == np.int32 and out[0]["kmax"] == d["kmax"]
    np.testing.assert_array_equal(out[1], d["mean"])


def test_version_1_file_loads_and_runs():
    assert V1.stat().st_size < 16 * 1024
    exe = hlo.load(V1)
    assert exe.format_version == 1
    assert exe.manifest["target"] == {"kind": "cpu", "triple": "x86_64-unknown-linux-gnu",
                                      "cpu": "x86-64", "features": ""}
    d = np.load(DATA / "hlox_v1_small.npz")
    out = exe(d["x"], d["w"], d["k"])
    _check(out, d)
    # and it computes what it says (numpy, float64)
    y = np.tanh(d["x"].astype(np.float64)) * 2 + 1
    np.testing.assert_allclose(out[0]["z"], y @ d["w"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[0]["rowsum"], y.sum(1), rtol=1e-5)
    assert out[0]["kmax"] == d["k"].max()
    np.testing.assert_allclose(out[1], (y @ d["w"]).mean(), rtol=1e-5, atol=1e-6)
    assert "dot_general" in exe.as_text() and exe.cost_analysis()["kernels"] >= 2
    assert "x: f32[4,8], w: f32[8,3], k: s32[5]" in exe.signature_text()


def test_version_1_file_in_a_fresh_process():
    code = """
import json, sys
import numpy as np
import hlo
exe = hlo.load(sys.argv[1])
d = np.load(sys.argv[2])
out = exe(d["x"], d["w"], d["k"])
ok = bool(np.array_equal(out[0]["z"], d["z"]) and np.array_equal(out[1], d["mean"]))
print(json.dumps({"ok": ok, "modules": sorted(sys.modules)}))
"""
    res = run_python(code, str(V1), str(DATA / "hlox_v1_small.npz"))
    assert res["ok"]
    assert forbidden(res["modules"]) == []


def test_every_saved_format_version_is_covered():
    """Each data file is a format this hlo still reads (or refuses by name: none yet)."""
    files = sorted(DATA.glob("*.hlox"))
    assert files, "tests/data has no saved executables"
    for f in files:
        version = hlox.peek_version(f.read_bytes())
        assert 1 <= version <= hlox.FORMAT_VERSION, f
        hlo.load(f)
