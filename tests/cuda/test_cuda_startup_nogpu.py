"""How a saved CUDA program starts in a fresh process, without a GPU: ``hlo.load`` begins the
driver's context and the cuBLASLt library in background threads, the first call waits for them
(or, where the background attempt failed, raises the same error itself: never a hang, never a
lost error), cuBLASLt is found without importing cuda.pathfinder where it can be, and loading
imports no tracer, passes, code generator, IR classes or llvmlite."""
import importlib.machinery
import importlib.util
import sys
import threading
import time
import types

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.runtime.cuda import cublaslt, driver
from hlo.runtime.cuda.errors import CudaUnavailableError

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "aot"))
from aot_util import forbidden, run_python

S = hlo.ShapeDtypeStruct


# -- the context, begun in the background --------------------------------------------------

@pytest.fixture
def no_contexts(monkeypatch):
    monkeypatch.setattr(driver, "_contexts", {})
    monkeypatch.setattr(driver, "_starting", {})


class SlowContext:
    made = 0

    def __init__(self, device, delay=0.2):
        time.sleep(delay)
        type(self).made += 1
        self.device = device
        self.current_in = set()

    def make_current(self):
        self.current_in.add(threading.get_ident())


def test_get_context_waits_for_the_one_begun_in_the_background(monkeypatch, no_contexts):
    SlowContext.made = 0
    monkeypatch.setattr(driver, "Context", SlowContext)
    t0 = time.perf_counter()
    th = driver.start_context(0)
    assert th is not None and th.name == "hlo-cuda-context-0" and not th.daemon
    assert driver.start_context(0) is th  # one attempt at a time
    ctx = driver.get_context(0)
    assert time.perf_counter() - t0 >= 0.19  # it waited for the background one ...
    assert SlowContext.made == 1  # ... instead of making a second
    assert threading.get_ident() in ctx.current_in  # and made it current in the caller's thread
    th.join()
    assert driver.start_context(0) is None  # made: nothing to begin
    assert driver.get_context(0) is ctx


@pytest.mark.parametrize("error", [CudaUnavailableError("no CUDA device: the NVIDIA driver is loaded but "
                                                        "sees no GPU"),
                                   RuntimeError("cuDevicePrimaryCtxRetain failed: CUDA_ERROR_UNKNOWN")])
def test_a_background_failure_is_raised_by_the_first_call(monkeypatch, no_contexts, capfd, error):
    calls = []

    def failing(device):
        calls.append(threading.current_thread().name)
        raise type(error)(str(error))
    monkeypatch.setattr(driver, "Context", failing)
    driver.start_context(0).join(5)
    assert calls == ["hlo-cuda-context-0"]
    assert capfd.readouterr().err == ""  # nothing printed by the thread
    with pytest.raises(type(error)) as e:
        driver.get_context(0)
    assert str(e.value) == str(error)  # the same error, raised in the caller's thread
    assert calls[1] == threading.current_thread().name
    assert driver._contexts == {}


def test_a_background_attempt_still_running_is_waited_for_then_its_error_raised(monkeypatch, no_contexts):
    started = threading.Event()

    def failing(device):
        started.set()
        time.sleep(0.2)
        raise CudaUnavailableError("no CUDA device 0: this machine has 0")
    monkeypatch.setattr(driver, "Context", failing)
    driver.start_context(0)
    assert started.wait(5)
    t0 = time.perf_counter()
    with pytest.raises(CudaUnavailableError, match="no CUDA device 0"):
        driver.get_context(0)
    assert time.perf_counter() - t0 >= 0.15  # waited on the lock, then tried itself


# -- cuBLASLt: found without cuda.pathfinder where it can be, opened in the background ------

class Opened:
    def __init__(self, name):
        self._name = name


@pytest.fixture
def dlopen(monkeypatch):
    """ctypes.CDLL that opens only the names in ``dlopen.ok``, recording every attempt."""
    tried = []

    def cdll(name, *a, **k):
        tried.append(name)
        if name in cdll.ok:
            return Opened(name)
        raise OSError(f"{name}: cannot open shared object file")
    cdll.ok, cdll.tried = set(), tried
    monkeypatch.setattr(cublaslt.ctypes, "CDLL", cdll)
    return cdll


def _wheels_at(monkeypatch, roots):
    spec = importlib.machinery.ModuleSpec("nvidia", None, is_package=True)
    spec.submodule_search_locations = [str(r) for r in roots]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "nvidia" else real(name, *a))


def _pathfinder(monkeypatch, path=None):
    if path is None:
        monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)  # not installed
        return
    mod = types.ModuleType("cuda.pathfinder")
    mod.load_nvidia_dynamic_lib = lambda name: types.SimpleNamespace(abs_path=path)
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", mod)


def test_cublaslt_is_opened_from_a_wheel_first(monkeypatch, tmp_path, dlopen):
    lib = tmp_path / "cu13" / "lib" / "libcublasLt.so.13"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    _wheels_at(monkeypatch, [tmp_path / "elsewhere", tmp_path])
    _pathfinder(monkeypatch, None)
    dlopen.ok = {str(lib), "libcublasLt.so.13"}
    assert cublaslt._open_library()._name == str(lib)
    assert dlopen.tried == [str(lib)]


def test_cublaslt_by_soname_then_through_pathfinder(monkeypatch, tmp_path, dlopen):
    _wheels_at(monkeypatch, [tmp_path])  # no wheel holds it
    _pathfinder(monkeypatch, "/opt/cuda/lib64/libcublasLt.so.13")
    dlopen.ok = {"libcublasLt.so.12"}
    assert cublaslt._open_library()._name == "libcublasLt.so.12"
    assert dlopen.tried == ["libcublasLt.so.13", "libcublasLt.so.12"]
    dlopen.ok = {"/opt/cuda/lib64/libcublasLt.so.13"}
    dlopen.tried.clear()
    assert cublaslt._open_library()._name == "/opt/cuda/lib64/libcublasLt.so.13"
    assert dlopen.tried[-1] == "/opt/cuda/lib64/libcublasLt.so.13"


def test_cublaslt_nowhere_is_a_clear_error(monkeypatch, tmp_path, dlopen):
    _wheels_at(monkeypatch, [tmp_path])
    _pathfinder(monkeypatch, None)
    with pytest.raises(CudaUnavailableError, match="cuBLASLt .libcublasLt. was not found.*cuda-pathfinder"):
        cublaslt._open_library()


def test_a_background_library_failure_is_raised_by_the_first_use(monkeypatch, capfd):
    monkeypatch.setattr(cublaslt, "_lib", None)
    attempts = []

    def missing():
        attempts.append(threading.current_thread().name)
        raise CudaUnavailableError("cuBLASLt (libcublasLt) was not found: nowhere")
    monkeypatch.setattr(cublaslt, "_open_library", missing)
    cublaslt.start_loading().join(5)
    assert attempts == ["hlo-cublaslt-load"] and capfd.readouterr().err == ""
    with pytest.raises(CudaUnavailableError, match="was not found: nowhere"):
        cublaslt.library()
    assert len(attempts) == 2 and cublaslt._lib is None


# -- hlo.load ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A CUDA program with a cuBLASLt product and one without."""
    d = tmp_path_factory.mktemp("startup")
    mm = hlo.aot.compile(lambda x, w: hnp.tanh(x @ w), S((64, 64), "float32"), S((64, 64), "float32"),
                         target="cuda")
    ew = hlo.aot.compile(lambda x: hnp.exp(x) + 1.0, S((64,), "float32"), target="cuda")
    mm.save(d / "mm.hlox")
    ew.save(d / "ew.hlox")
    return d


@pytest.mark.parametrize("name, matmul", [("mm", True), ("ew", False)])
def test_load_begins_the_context_and_cublaslt_only_where_used(monkeypatch, saved, name, matmul):
    begun = []
    monkeypatch.setattr(driver, "start_context", lambda device=0: begun.append(("context", device)))
    monkeypatch.setattr(cublaslt, "start_loading", lambda: begun.append(("cublaslt",)))
    exe = hlo.load(saved / f"{name}.hlox")
    assert exe.target == "cuda"
    assert ("context", 0) in begun
    assert (("cublaslt",) in begun) == matmul


LOADER = """
import json, sys
import numpy as np
import hlo
exe = hlo.load(sys.argv[1])
x = [np.ones(a.shape, a.dtype) for a in exe.in_avals]
try:
    out = exe(*x)
    res = {"ran": True, "out": float(np.asarray(out).ravel()[0])}
except Exception as e:
    res = {"ran": False, "error": type(e).__name__, "message": str(e)}
res["modules"] = sorted(sys.modules)
print(json.dumps(res))
"""


def test_a_fresh_process_loads_a_cuda_program_light(saved):
    got = run_python(LOADER, str(saved / "mm.hlox"))
    mods = got["modules"]
    assert forbidden(mods) == []
    heavy = [m for m in mods if m.split(".")[0] == "llvmlite" or m in (
        "hlo.ir.core", "hlo.ir.parser", "hlo.ir.builder", "hlo.runtime.cpu.executable", "hlo.runtime.cpu.loader")
        or (m.startswith("hlo.backends.") and m not in (
            "hlo.backends.cuda", "hlo.runtime.cuda.artifact", "hlo.backends.cuda.device"))]
    assert heavy == []
    if got["ran"]:
        assert got["out"] == pytest.approx(np.tanh(64.0))
    else:
        assert "no CUDA device" in got["message"] or "cuda-bindings" in got["message"], got
