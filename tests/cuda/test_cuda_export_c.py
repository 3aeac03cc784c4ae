"""Export to C for target cuda (``hlo.backends.cuda.export_c``): every seed workload exports and
builds with ``cc``; their PTX passes ptxas; the generated runtime compiles warning-free; a
library loaded on a machine without a GPU says so with ``HLO_ERR_NO_GPU``. On a GPU (marker
``gpu``): run from C with device buffers (tests/export_c/cuda_harness.c), equal to
``hlo.jit(..., target="cuda")``: bit for bit without cuBLASLt products, within rounding with."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from bench.workloads import WORKLOADS, Case, Ops, flatten

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None,
                                reason="export to C needs a C compiler (cc)")

HARNESS = REPO / "tests" / "export_c" / "cuda_harness.c"
CASES = [Case(w, "quick", dt) for w in WORKLOADS for dt in w.dtypes["quick"]]
NO_GPU = 10


def _jit(case):
    body = case.workload.fn

    def fn(*a):
        return body(Ops(hnp, hlo.grad, hlo.vmap), *a)
    fn.__name__ = fn.__qualname__ = case.workload.id
    return hlo.jit(fn, target="cuda")


def _name(case) -> str:
    return case.name.replace("[", "_").replace("]", "")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from hlo.backends.cpu.export_c import ExportError
    root = tmp_path_factory.mktemp("export_cuda")
    done, refused = {}, {}
    for case in CASES:
        name = _name(case)
        inputs = case.inputs()
        try:
            compiled = _jit(case).lower(*inputs).compile()
        except Exception as e:  # no CUDA code generator here (no libdevice)
            pytest.skip(f"cannot compile for cuda here: {e}")
        try:
            compiled.export_c(root / name, name)
        except ExportError as e:
            refused[name] = str(e)
            continue
        (root / name / "inputs.bin").write_bytes(b"".join(np.ascontiguousarray(a).tobytes() for a in inputs))
        done[name] = (case, root / name, compiled, inputs)
    harness = root / "cuda_harness"
    r = subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-o", str(harness), str(HARNESS), "-ldl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return done, refused, harness


def test_every_seed_workload_exports(exported):
    done, refused, _ = exported
    assert refused == {}
    assert set(done) == {_name(c) for c in CASES}
    for name, (_, folder, _, _) in done.items():
        h = (folder / f"{name}.h").read_text()
        assert f"int {name}_create(int device_ordinal, void *stream, {name}_context **out);" in h
        assert "DEVICE pointers" in h


def test_ptx_passes_ptxas_and_runtime_compiles_clean(exported, tmp_path):
    from hlo.backends.cuda.export_c import header, source, spec_of
    done, _, _ = exported
    ptxas = shutil.which("ptxas")
    for name, (_, _, compiled, _) in done.items():
        prog = compiled._runtime_executable()
        spec = spec_of(prog, name)
        (tmp_path / f"{name}.h").write_text(header(spec))
        (tmp_path / "runtime.c").write_text(source(spec, prog))
        r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "runtime.c"],
                           cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, f"{name}: {r.stderr}"
        if ptxas:
            (tmp_path / "k.ptx").write_text(prog.ptx)
            r = subprocess.run([ptxas, f"-arch={prog.arch}", "-o", os.devnull, "k.ptx"], cwd=tmp_path,
                               capture_output=True, text=True)
            assert r.returncode == 0, f"{name}: ptxas: {r.stderr}"


def _gpu_present() -> bool:
    from hlo.runtime.cuda.probe import probe
    try:
        return probe() is not None
    except Exception:
        return False


def test_without_a_gpu_create_says_so(exported):
    if _gpu_present():
        pytest.skip("a GPU is present (test_from_c_equals_hlo_jit runs instead)")
    done, _, harness = exported
    name = "dispatch"
    _, folder, _, _ = done[name]
    r = subprocess.run([str(harness), str(folder / f"lib{name}.so"), name, str(folder / "inputs.bin"),
                        str(folder / "out.bin")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "create_null_out: 1" in r.stdout
    assert f"create: {NO_GPU} | {name}: " in r.stdout, r.stdout
    assert "context_after_failure: NULL" in r.stdout


@pytest.mark.gpu
def test_from_c_equals_hlo_jit(exported):
    done, _, harness = exported
    for name, (case, folder, compiled, inputs) in done.items():
        out = folder / "out.bin"
        r = subprocess.run([str(harness), str(folder / f"lib{name}.so"), name, str(folder / "inputs.bin"),
                            str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "run_counted_wrong: 2" in r.stdout and "run_null_input0: 1" in r.stdout
        want = [np.asarray(o) for o in flatten(_jit(case)(*inputs))]
        raw = np.fromfile(out, np.uint8)
        expect = np.concatenate([w.reshape(-1).view(np.uint8) for w in want])
        if not _has_products(compiled):  # the same kernels, launched alike: the same bits
            assert np.array_equal(raw, expect), f"{name}: C results differ from hlo.jit(target='cuda')'s"
            continue
        # cuBLASLt's algorithm is the heuristic's first, as in Python, but an algorithm may
        # reduce with atomics: within float rounding
        at = 0
        for k, w in enumerate(want):
            got = raw[at:at + w.nbytes].view(w.dtype).reshape(w.shape).astype(np.float64)
            at += w.nbytes
            ref = w.astype(np.float64)
            tol = 1e-5 if w.dtype == np.float32 else 2e-2
            scale = max(1.0, float(np.abs(ref).max(initial=0)))
            assert float(np.abs(got - ref).max(initial=0)) <= tol * scale, f"{name} output {k}"


def _has_products(compiled) -> bool:
    from hlo.runtime.steps import LibraryCall, walk_steps
    return any(isinstance(s, LibraryCall) for s in walk_steps(compiled._runtime_executable().steps))


def test_cublaslt_enums_are_the_runtimes():
    """The export's cuBLASLt enum values and workspace are the Python runtime's (whose GPU test
    checks them against the installed header)."""
    from hlo.backends.cuda import export_c
    from hlo.runtime.cuda import cublaslt
    assert export_c.CUDA_DATA_TYPES == cublaslt.DATA_TYPES
    assert export_c.COMPUTE == cublaslt.COMPUTE_TYPES
    assert export_c.EPILOGUE == cublaslt.EPILOGUES
    assert export_c.WORKSPACE_BYTES == cublaslt.WORKSPACE_BYTES


@pytest.fixture(scope="module")
def loopy_export(tmp_path_factory, exported):
    sys.path.insert(0, str(REPO / "tests" / "export_c"))
    from test_export_c import loopy
    folder = tmp_path_factory.mktemp("loopy_cuda")
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    f = hlo.jit(loopy, target="cuda")
    compiled = f.lower(x, np.int32(0)).compile()
    from hlo.runtime.steps import Switch, While, walk_steps
    kinds = {type(s) for s in walk_steps(compiled._runtime_executable().steps)}
    assert {While, Switch} <= kinds  # the emitter's loop and switch paths are built
    compiled.export_c(folder, "loopy")
    return folder, f, x, exported[2]


@pytest.mark.gpu
def test_control_flow_from_c_on_gpu(loopy_export):
    folder, f, x, harness = loopy_export
    for n in (0, 1, 2, 5):
        (folder / "in.bin").write_bytes(x.tobytes() + np.int32(n).tobytes())
        r = subprocess.run([str(harness), str(folder / "libloopy.so"), "loopy", str(folder / "in.bin"),
                            str(folder / "out.bin")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        raw = np.fromfile(folder / "out.bin", np.uint8)
        want = f(x, np.int32(n))
        assert np.array_equal(raw[:256].view(np.float32), np.asarray(want[0])), n
        assert raw[256:].view(np.int32)[0] == n


def test_control_flow_exports_for_cuda(loopy_export):
    folder = loopy_export[0]
    assert (folder / "libloopy.so").stat().st_size > 0
    assert "[1] n: s32[], int32_t, 4 bytes" in (folder / "loopy.h").read_text()
