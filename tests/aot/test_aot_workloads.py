"""Every seed workload (bench/workloads.py, at the bench's quick sizes and dtypes) compiled and
saved in this process, then loaded and run in a fresh one: identical results, and the loading
process imported no tracer, pass or code-generator module."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from aot_util import REPO, forbidden, run_python

import hlo
import hlo.numpy as hnp

sys.path.insert(0, str(REPO))  # the repo root holds bench/
from bench.workloads import WORKLOADS, Case, Ops, flatten, reference

CASES = [Case(w, "quick", dt) for w in WORKLOADS for dt in w.dtypes["quick"]]

LOADER = """
import json, sys, time
import numpy as np
t0 = time.perf_counter()
import hlo
folder, names = sys.argv[1], sys.argv[2:]
for name in names:
    exe = hlo.load(f"{folder}/{name}.hlox")
    d = np.load(f"{folder}/{name}.in.npz")   # raw bytes (npz has no bfloat16): view as the signature says
    out = exe(*[d[f"arr_{i}"].view(a.dtype).reshape(a.shape) for i, a in enumerate(exe.in_avals)])
    flat = []
    def walk(o):
        if isinstance(o, (tuple, list)):
            for x in o: walk(x)
        else:
            flat.append(o)
    walk(out)
    np.savez(f"{folder}/{name}.out.npz", *[np.asarray(a).reshape(-1).view(np.uint8) for a in flat],
             dtypes=np.array([str(np.asarray(a).dtype) for a in flat]))
print(json.dumps({"modules": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def saved_workloads(tmp_path_factory):
    folder = tmp_path_factory.mktemp("workloads")
    expected, arenas = {}, {}
    for case in CASES:
        w = case.workload
        inputs = case.inputs()
        body = w.fn

        def fn(*a, _body=body):
            return _body(Ops(hnp, hlo.grad, hlo.vmap), *a)
        fn.__name__ = fn.__qualname__ = w.id
        compiled = hlo.aot.compile(fn, *[hlo.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs], target="cpu")
        name = case.name.replace("[", "_").replace("]", "")
        compiled.save(folder / f"{name}.hlox")
        np.savez(folder / f"{name}.in.npz", *[a.reshape(-1).view(np.uint8) for a in inputs])
        expected[name] = (case, inputs, flatten(compiled(*inputs)))
        arenas[name] = (compiled.memory_analysis().temp_size_in_bytes,
                        allocated_arenas(compiled._artifact.executable))
    return folder, expected, arenas


def allocated_arenas(exe) -> set:
    """The sizes of the arenas the executable allocated for its calls (each with 64 bytes to
    align it)."""
    return {raw.nbytes - 64 for raw in exe._arena_mem.values()}


def test_each_seed_workload_runs_identically_in_a_fresh_process(saved_workloads):
    folder, expected, _ = saved_workloads
    assert {c.workload.id for c in CASES} == {w.id for w in WORKLOADS}
    res = run_python(LOADER, str(folder), *expected, timeout=300)
    assert forbidden(res["modules"]) == [], "loading imported the compiler"
    for name, (case, inputs, outs) in expected.items():
        got = np.load(folder / f"{name}.out.npz")
        dtypes = list(got["dtypes"])
        assert len(dtypes) == len(outs), name
        for i, o in enumerate(outs):
            assert dtypes[i] == str(o.dtype), name
            g = got[f"arr_{i}"].view(o.dtype).reshape(o.shape)
            np.testing.assert_array_equal(g, o, err_msg=f"{name} output {i}")


@pytest.mark.parametrize("case", [c for c in CASES if c.dtype == "f32"], ids=lambda c: c.name)
def test_saved_workloads_agree_with_the_float64_reference(saved_workloads, case):
    folder, expected, _ = saved_workloads
    name = case.name
    _, inputs, _ = expected[name]
    exe = hlo.load(folder / f"{name}.hlox")
    outs = flatten(exe(*inputs))
    refs = reference(case, inputs)
    for i, (o, r) in enumerate(zip(outs, refs)):
        if i in case.workload.delta_of:                      # updated parameters: compare the update
            base = inputs[case.workload.delta_of[i]].astype(np.float64)
            o, r = o.astype(np.float64) - base, r - base
        np.testing.assert_allclose(np.asarray(o, np.float64), r, rtol=2e-3, atol=2e-4,
                                   err_msg=f"{name} output {i}")


def test_memory_analysis_is_the_arena_the_runtime_allocates(saved_workloads):
    folder, _, arenas = saved_workloads
    for name, (temp, allocated) in arenas.items():
        assert allocated in (set(), {temp}) and (temp == 0) == (not allocated), (name, temp, allocated)
        assert hlo.load(folder / f"{name}.hlox").memory_analysis().temp_size_in_bytes == temp, name
