"""The CUDA runtime's parts that need no GPU: imports, the no-GPU errors, manifest checks, and
the step walk (launch records, copies, while, switch) against a simulated driver."""
import ctypes
import subprocess
import sys

import numpy as np
import pytest

from hlo.runtime.cuda import driver, program
from hlo.runtime.cuda.errors import CudaError, CudaOutOfMemoryError, CudaUnavailableError
from hlo.runtime.cuda.executable import Manifest, _arch_ok, encode_constants
from hlo.runtime.steps import BufRef, Copy, KernelCall, LibraryCall, Launch, Switch, While, steps_to_json


def test_import_hlo_loads_no_cuda_bindings():
    code = ("import sys, hlo, hlo.runtime.cuda, hlo.runtime.cuda.executable, hlo.backends.cuda.gemm; "
            "print('cuda.bindings' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_bindings_is_cuda_unavailable(monkeypatch):
    monkeypatch.setattr(driver, "cu", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails
    with pytest.raises(CudaUnavailableError, match="cuda-bindings"):
        driver.bindings()


def test_no_gpu_error_is_clear():
    try:
        driver.get_context(0)
    except CudaUnavailableError as e:
        assert "driver" in str(e) or "device" in str(e) or "cuda-bindings" in str(e)
    else:
        pytest.skip("this machine has a GPU")


def test_error_classes():
    assert issubclass(CudaUnavailableError, CudaError) and issubclass(CudaError, RuntimeError)
    assert issubclass(CudaOutOfMemoryError, MemoryError)


# -- manifests -------------------------------------------------------------------------------

def manifest(step_list, **kw):
    m = {"format": 1, "target": {"name": "cuda", "arch": "sm_90"},
         "inputs": [{"dtype": "f32", "shape": [4]}], "outputs": [{"dtype": "f32", "shape": [4]}],
         "arena_size": 64, "constants": encode_constants([np.arange(4, dtype=np.float32).tobytes()]),
         "kernels": ["add_one"], "steps": steps_to_json(step_list)}
    m.update(kw)
    return m


ADD = Launch("add_one", [BufRef("input", 0, 0, 16), BufRef("output", 0, 0, 16)], [False, True],
             (1, 1, 1), (32, 1, 1), 0, [("i32", 4)], "fusion.1")


def test_manifest_parses():
    m = Manifest(manifest([ADD], aliases=[[0, 0]],
                          inputs=[{"dtype": "f32", "shape": [2, 2], "layout": [0, 1]}],
                          outputs=[{"dtype": "f32", "shape": [2, 2], "layout": [0, 1]}]))
    assert m.arch == "sm_90" and m.kernels == ["add_one"] and m.aliases == {0: 0}
    assert m.inputs[0].strides == (4, 8) and m.constants[0] == np.arange(4, dtype=np.float32).tobytes()
    assert m.steps[0] == ADD and not m.uses_cublaslt


@pytest.mark.parametrize("change,match", [
    ({"format": 2}, "format"),
    ({"target": {"name": "cpu"}}, "target"),
    ({"target": {"name": "cuda", "arch": "gfx90a"}}, "arch"),
    ({"constants": ["not base64!"]}, "constant"),
    ({"kernels": ["other"]}, "not among the kernels"),
    ({"aliases": [[0, 3]]}, "does not exist"),
    ({"aliases": [[0, 0]], "outputs": [{"dtype": "f32", "shape": [8]}]}, "differ"),
    ({"inputs": [{"dtype": "f32", "shape": [2, 2], "layout": [0, 0]}]}, "permutation"),
    ({"steps": [{"step": "launch", "name": "add_one"}]}, "malformed"),
])
def test_manifest_errors(change, match):
    with pytest.raises(ValueError, match=match):
        Manifest(manifest([ADD], **change))


def test_arch_compatibility():
    assert _arch_ok("sm_90", (9, 0)) and _arch_ok("sm_80", (9, 0)) and _arch_ok("sm_90", (10, 0))
    assert not _arch_ok("sm_90", (8, 9)) and not _arch_ok("sm_90a", (10, 0)) and _arch_ok("sm_90a", (9, 0))


# -- the step walk against a simulated driver ------------------------------------------------

BASE = 1 << 20  # simulated device addresses start here


class FakeDriver:
    """Just enough of cuda.bindings.driver for program.run: device memory is a byte array;
    kernels are simulated by name."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.mem = np.zeros(1 << 16, np.uint8)
        self.launches = []

    def view(self, addr, dtype, n=1):
        off = addr - BASE
        return self.mem[off:off + n * np.dtype(dtype).itemsize].view(dtype)

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shm, stream, params, extra):
        argv = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        ptr = lambda j: ctypes.c_uint64.from_address(argv[j]).value  # noqa: E731
        self.launches.append(func)
        if func == "add_one":
            n = ctypes.c_int32.from_address(argv[2]).value
            self.view(ptr(1), np.float32, n)[:] = self.view(ptr(0), np.float32, n) + 1
        elif func == "zero_i32":
            self.view(ptr(0), np.int32)[0] = 0
        elif func == "inc_i32":
            self.view(ptr(0), np.int32)[0] += 1
        elif func == "lt_i32":
            self.view(ptr(2), np.uint8)[0] = self.view(ptr(0), np.int32)[0] < self.view(ptr(1), np.int32)[0]
        else:
            raise AssertionError(func)
        return (0,)

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        self.mem[dst - BASE:dst - BASE + n] = self.mem[src - BASE:src - BASE + n].copy()
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        ctypes.memmove(dst, self.mem[src - BASE:].ctypes.data, n)
        return (0,)


class FakeStream:
    handle = ptr = 7

    def synchronize(self, what=""):
        pass


class FakeModule:
    def function(self, name):
        return name


@pytest.fixture
def fake(monkeypatch):
    f = FakeDriver()
    monkeypatch.setattr(driver, "cu", f)
    monkeypatch.setattr(driver, "OK", 0)
    return f


def env_for(fake, host):
    arena = BASE + 4096
    return program.Env(FakeModule(), FakeStream(), [BASE + 8192], [16], arena, 256, [16, 4], [16],
                       None, 0, ctypes.addressof(host))


def test_walk_while_switch_copy(fake):
    n = 4
    x, k, y = BASE + 0, BASE + 64, BASE + 128  # input 0 (f32[4]), input 1 (s32[]), output 0
    fake.view(x, np.float32, n)[:] = [1, 2, 3, 4]
    fake.view(k, np.int32)[0] = 3
    cnt, pred = BufRef("arena", 0, 0, 4), BufRef("arena", 0, 64, 1)
    out = BufRef("output", 0, 0, 16)
    steps = [
        Copy(out, BufRef("input", 0, 0, 16), 16),
        Launch("zero_i32", [cnt], [True], (1, 1, 1), (1, 1, 1)),
        While([Launch("lt_i32", [cnt, BufRef("input", 1, 0, 4), pred], [False, False, True], (1, 1, 1), (1, 1, 1))],
              pred,
              [Launch("add_one", [out, out], [False, True], (1, 1, 1), (32, 1, 1), 0, [("i32", n)]),
               Launch("inc_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))]),
        Switch(BufRef("input", 1, 0, 4), False,
               [[], [Launch("add_one", [out, out], [False, True], (1, 1, 1), (32, 1, 1), 0, [("i32", n)])],
                [Launch("zero_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))]]),
    ]
    host = (ctypes.c_uint8 * 8)()
    env = env_for(fake, host)
    recs = program.build(steps, env)
    program.run(recs, ([x, k], [y]), env)
    np.testing.assert_array_equal(fake.view(y, np.float32, n), [4, 5, 6, 7])  # x + 3 (k = 3)
    assert fake.launches.count("add_one") == 3 and fake.launches.count("lt_i32") == 4
    assert fake.launches[-1] == "zero_i32"  # selector 3 is out of range: the last branch
    # the same records, other buffers: only the patched pointers change
    x2, y2 = BASE + 256, BASE + 320
    fake.view(x2, np.float32, n)[:] = 10
    fake.view(k, np.int32)[0] = 1
    program.run(recs, ([x2, k], [y2]), env)
    np.testing.assert_array_equal(fake.view(y2, np.float32, n), [12] * 4)  # 1 loop + branch 1


@pytest.mark.parametrize("step,match", [
    (Launch("add_one", [BufRef("arena", 0, 250, 16)], [True], (1, 1, 1), (1, 1, 1)), "outside the arena"),
    (Launch("add_one", [BufRef("input", 3, 0, 4)], [True], (1, 1, 1), (1, 1, 1)), "there are 2"),
    (Launch("add_one", [BufRef("output", 0, 8, 16)], [True], (1, 1, 1), (1, 1, 1)), "outside output 0"),
    (Launch("add_one", [BufRef("const", 1, 0, 4)], [True], (1, 1, 1), (1, 1, 1)), "constant 1 does not exist"),
    (Copy(BufRef("output", 0, 0, 4), BufRef("input", 0, 0, 4), 16), "do not fit"),
    (LibraryCall("cublas", "gemm", [], []), "not supported"),
    (KernelCall("k", [], [], 1, False), "CPU kernel"),
])
def test_build_rejects_bad_steps(fake, step, match):
    host = (ctypes.c_uint8 * 8)()
    with pytest.raises(ValueError, match=match):
        program.build([step], env_for(fake, host))
