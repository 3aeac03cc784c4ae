"""hlo's user API on target cuda: ``hlo.jit`` / ``Compiled`` return DeviceArrays (asynchronous)
and take GPU arrays in place, ``hlo.device_put`` / ``hlo.devices``, ``matmul_precision``
reaching cuBLASLt. Without a GPU: the compile side, and the frontend's handling of DeviceArrays
over a simulated device (an executable stand-in whose memory is a byte array); with one (marker
``gpu``): the real runtime, chaining calls, other libraries' arrays through DLPack."""
import ctypes

import numpy as np
import pytest

import hlo
from hlo.runtime.cuda import driver
from hlo.runtime.cuda.array import Completion, DeviceArray, DeviceBuffer
from hlo.runtime.steps import LibraryCall


def _library_calls(compiled):
    prog = compiled._artifact.executable
    return [st for st in prog.steps if isinstance(st, LibraryCall)]


@pytest.mark.parametrize("precision,compute", [("highest", "32F"), ("tf32", "32F_FAST_TF32")])
def test_matmul_precision_selects_the_cublaslt_compute_type(monkeypatch, precision, compute):
    monkeypatch.setenv("HLO_CUDA_ARCH", "sm_90")
    a, b = np.ones((64, 32), np.float32), np.ones((32, 48), np.float32)
    with hlo.config.override(matmul_precision=precision, cache=False):
        c = hlo.jit(lambda x, y: x @ y, target="cuda").lower(a, b).compile()
    calls = _library_calls(c)
    assert [(st.library, st.fn) for st in calls] == [("cublaslt", "matmul")]
    assert calls[0].params["compute"] == compute


# -- a simulated device ------------------------------------------------------------------------

BASE = 1 << 20


class FakeCu:
    """The driver calls a DeviceArray makes (copies to the host) over a byte array."""

    def __init__(self):
        self.mem = np.zeros(1 << 16, np.uint8)
        self.top = 0

    def alloc(self, nbytes):
        p = BASE + self.top
        self.top += -(-max(nbytes, 1) // 256) * 256
        return p

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        ctypes.memmove(dst, self.mem[src - BASE:].ctypes.data, n)
        return (0,)


class FakeCtx:
    device = 0

    def make_current(self):
        pass


class FakeStream:
    handle = ptr = 7

    def synchronize(self, what=""):
        pass

    def query(self):
        return True


class FakeExecutable:
    """Stands in for ``CudaExecutable``: records what each call received and computes ``fn`` of
    the arguments' values (read from the simulated memory) into new DeviceArrays."""

    def __init__(self, cu, fn):
        self.cu, self.fn, self.received = cu, fn, []
        self.ctx, self.stream = FakeCtx(), FakeStream()

    def put(self, a):
        a = np.array(a, order="C")  # (np.ascontiguousarray would make rank 0 rank 1)
        p = self.cu.alloc(a.nbytes)
        self.cu.mem[p - BASE:p - BASE + a.nbytes] = a.reshape(-1).view(np.uint8)
        done = Completion(self.stream, "a simulated call", [])
        return DeviceArray(DeviceBuffer(p, a.nbytes, self.ctx, self.stream, owner=self), a.shape, a.dtype,
                           done=done)

    def run(self, args):
        self.received.append([type(a) for a in args])
        vals = [np.asarray(a) for a in args]  # DeviceArrays: read back from the simulated memory
        return [self.put(np.asarray(o)) for o in self.fn(*vals)]


@pytest.fixture
def sim(monkeypatch):
    """Target cuda compiles as usual (PTX for sm_90); running hands the arguments to a
    ``FakeExecutable`` computing the test's numpy function."""
    from hlo.runtime.cuda.artifact import CudaProgram
    cu = FakeCu()
    monkeypatch.setattr(driver, "cu", cu)
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setenv("HLO_CUDA_ARCH", "sm_90")
    state = {"fn": None, "exes": []}

    def executable(self):
        if self._runtime is None:
            self._runtime = FakeExecutable(cu, state["fn"])
            state["exes"].append(self._runtime)
        return self._runtime
    monkeypatch.setattr(CudaProgram, "executable", executable)
    with hlo.config.override(cache=False):
        yield state


def test_jit_returns_device_arrays_and_takes_them_in_place(sim):
    sim["fn"] = lambda x: (x * 2 + 1,)
    f = hlo.jit(lambda x: x * 2 + 1, target="cuda")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = f(x)
    assert type(y) is DeviceArray and y.shape == (2, 3) and y.dtype == np.float32
    assert (y.ndim, y.size, y.nbytes, len(y)) == (2, 6, 24, 2)
    np.testing.assert_array_equal(np.asarray(y.block_until_ready()), x * 2 + 1)
    z = f(y)  # the full path: a DeviceArray is traced from its attributes and passed as it is
    w = f(y)  # the fast path (an entry for DeviceArray arguments)
    exe = sim["exes"][0]
    assert exe.received == [[np.ndarray], [DeviceArray], [DeviceArray]]
    np.testing.assert_array_equal(np.asarray(z), (x * 2 + 1) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(z))
    assert f.cache_info().misses == 1 and f.cache_info().hits == 2
    assert any(k[1][0][0] is DeviceArray for k in f._fast)  # keyed by (type, shape, dtype, strides)


def test_rank0_results_stay_rank0(sim):
    sim["fn"] = lambda x: (x.sum(),)
    s = hlo.jit(lambda x: x.sum(), target="cuda")(np.arange(4, dtype=np.float32))
    assert s.shape == () and np.asarray(s).shape == () and float(s) == 6.0 and s.item() == 6.0
    assert "6." in repr(s)


def test_compiled_and_pytrees(sim):
    sim["fn"] = lambda a, b: (a - b, a + b)  # a dict's leaves in key order: d, s
    c = hlo.jit(lambda p: {"s": p[0] + p[1], "d": p[0] - p[1]}, target="cuda").lower(
        (np.ones(3, np.float32), np.ones(3, np.float32))).compile()
    out = c((np.full(3, 5, np.float32), np.full(3, 2, np.float32)))
    assert all(type(v) is DeviceArray for v in out.values())
    assert np.asarray(out["s"]).tolist() == [7, 7, 7] and np.asarray(out["d"]).tolist() == [3, 3, 3]


def test_device_array_computes_nothing_on_the_host(sim):
    sim["fn"] = lambda x: (x + 1,)
    y = hlo.jit(lambda x: x + 1, target="cuda")(np.zeros(3, np.float32))
    for op in (lambda: y + 1, lambda: 1 + y, lambda: y == y, lambda: y[0], lambda: -y,
               lambda: np.ones(3) + y):
        with pytest.raises(TypeError, match="numpy.asarray|hlo.jit|not supported|unsupported"):
            op()
    with pytest.raises(AttributeError, match=r"numpy\.asarray\(x\)"):
        y.reshape(3, 1)
    with pytest.raises(AttributeError, match=r"numpy\.asarray\(x\)"):
        y.astype(np.int32)
    with pytest.raises(TypeError, match="one element"):
        float(y)


def test_device_array_to_a_cpu_function_is_copied(sim):
    sim["fn"] = lambda x: (x + 1,)
    y = hlo.jit(lambda x: x + 1, target="cuda")(np.arange(3, dtype=np.float32))
    g = hlo.jit(lambda x: x * 10, target="cpu")
    out = g(y)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, [10, 20, 30])
    np.testing.assert_array_equal(g(y), [10, 20, 30])


def test_device_put_without_a_gpu_is_clear(monkeypatch):
    from hlo.runtime.cuda.errors import CudaUnavailableError

    def no_gpu(device=0):
        raise CudaUnavailableError("no NVIDIA driver found")
    monkeypatch.setattr(driver, "get_context", no_gpu)
    with pytest.raises(hlo.errors.TargetUnavailableError, match="device_put needs a CUDA device"):
        hlo.device_put(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="device must be"):
        hlo.device_put(np.ones(3), device="tpu")


def test_a_buffer_dropped_after_its_module_was_torn_down_frees_without_an_error(monkeypatch):
    """At interpreter shutdown the array module's globals are cleared (set to None) while device
    arrays a script kept are still alive: dropping one then must still free its memory, not
    print "Exception ignored ... 'NoneType' object is not callable" (it did, once per array)."""
    import gc
    import sys

    from hlo.runtime.cuda import array as array_mod
    freed = []

    class Stream:
        handle = 7

    class Cu:
        @staticmethod
        def cuMemFreeAsync(ptr, handle):
            freed.append((ptr, handle))

    monkeypatch.setattr(driver, "cu", Cu)
    buf = DeviceBuffer(0x1000, 64, None, Stream())
    monkeypatch.setattr(array_mod, "_free", None)     # what finalization does to the module
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    del buf
    gc.collect()
    assert unraisable == [] and freed == [(0x1000, 7)]


# -- on a GPU ------------------------------------------------------------------------------------

gpu = pytest.mark.gpu


@gpu
def test_gpu_chained_calls_stay_on_the_device():
    f = hlo.jit(lambda x: x * 2.0 + 1.0, target="cuda")
    g = hlo.jit(lambda x, y: (x @ y).sum(axis=0), target="cuda")
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    a = f(x)
    b = g(a, a)  # DeviceArrays in, without a host copy
    assert type(a) is DeviceArray and type(b) is DeviceArray
    ref = ((x * 2 + 1).astype(np.float64) @ (x * 2 + 1)).sum(axis=0)
    np.testing.assert_allclose(np.asarray(b.block_until_ready()), ref, rtol=1e-4, atol=1e-3)
    b2 = g(f(x), a)  # the fast path with DeviceArray arguments
    np.testing.assert_allclose(np.asarray(b2), ref, rtol=1e-4, atol=1e-3)
    assert g.cache_info().misses == 1 and g.cache_info().hits == 1
    assert any(k[1][0][0] is DeviceArray for k in g._fast)


@gpu
def test_gpu_rank0_and_scalars():
    s = hlo.jit(lambda x: x.sum(), target="cuda")(np.arange(5, dtype=np.float32))
    assert s.shape == () and np.asarray(s).shape == () and float(s) == 10.0
    i = hlo.jit(lambda x: hlo.numpy.argmax(x), target="cuda")(np.array([1, 7, 3], np.float32))
    assert np.asarray(i).shape == () and int(i) == 1


@gpu
def test_gpu_device_put_and_devices():
    devs = hlo.devices()
    assert devs and devs[0].id == 0 and devs[0].platform == "cuda"
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = hlo.device_put(x)
    assert type(d) is DeviceArray and d.shape == (3, 4) and hlo.device_put(d) is d
    np.testing.assert_array_equal(np.asarray(d), x)
    f = hlo.jit(lambda v: v + 1, target="cuda")
    np.testing.assert_array_equal(np.asarray(f(d)), x + 1)
    np.testing.assert_array_equal(np.asarray(f(d)), x + 1)  # fast path
    np.testing.assert_array_equal(np.asarray(hlo.device_put(3)), 3)  # weak int: int32
    assert hlo.device_put(3).dtype == np.int32


@gpu
def test_gpu_torch_inputs_through_dlpack():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    f = hlo.jit(lambda x, y: x * y + 1.0, target="cuda")
    t = torch.arange(8, dtype=torch.float32, device="cuda").reshape(2, 4)
    for _ in range(2):  # the full path, then the fast path (keyed by type, shape and dtype)
        out = f(t, t)
        np.testing.assert_array_equal(np.asarray(out), (t * t + 1).cpu().numpy())
    assert f.cache_info().hits == 1
    back = torch.from_dlpack(out)  # and back to torch without a copy
    assert back.data_ptr() == out.device_ptr
    np.testing.assert_array_equal(back.cpu().numpy(), (t * t + 1).cpu().numpy())


@gpu
def test_gpu_cupy_inputs():
    cp = pytest.importorskip("cupy")
    f = hlo.jit(lambda x: x - 1.0, target="cuda")
    c = cp.arange(6, dtype=cp.float32)
    np.testing.assert_array_equal(np.asarray(f(c)), np.arange(6, dtype=np.float32) - 1)
    np.testing.assert_array_equal(np.asarray(f(c)), np.arange(6, dtype=np.float32) - 1)


@gpu
def test_gpu_jax_inputs():
    jax = pytest.importorskip("jax")
    try:
        dev = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("jax has no GPU backend here")
    f = hlo.jit(lambda x: x * 3.0, target="cuda")
    j = jax.device_put(np.arange(4, dtype=np.float32), dev)
    np.testing.assert_array_equal(np.asarray(f(j)), np.arange(4, dtype=np.float32) * 3)


# -- foreign arrays through their fast routes (interop.reader_for) -----------------------------

def _torch_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


@gpu
def test_gpu_torch_bf16_and_requires_grad_tensors_are_read_in_place():
    torch = _torch_gpu()
    f = hlo.jit(lambda x, w: x @ w, target="cuda")
    x = torch.randn(16, 32, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(32, 8, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    w2 = torch.nn.Parameter(torch.randn(32, 8, dtype=torch.bfloat16, device="cuda"))
    want = (x.float() @ w.detach().float())
    for _ in range(2):  # the full path, then the fast path
        out = f(x, w)
        got = torch.from_dlpack(out)  # back without a copy
        assert got.dtype == torch.bfloat16 and got.data_ptr() == out.device_ptr
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(torch.from_dlpack(f(x, w2)).float(), x.float() @ w2.detach().float(),
                               rtol=2e-2, atol=2e-2)
    assert w.grad is None and w.requires_grad  # read, not detached in place


@gpu
def test_gpu_torch_inputs_wait_for_torch_stream_without_a_host_sync():
    """A tensor written on torch's current stream after a long GPU sleep is read after the
    write: hlo's stream waits on the device (the call returns before the sleep ends)."""
    torch = _torch_gpu()
    f = hlo.jit(lambda x, y: x + y, target="cuda")
    x = torch.zeros(1 << 20, device="cuda")
    y = torch.ones(1 << 20, device="cuda")
    f(x, y).block_until_ready()  # compiled
    for side in (False, True):
        s = torch.cuda.Stream() if side else torch.cuda.current_stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)  # ~25 ms of GPU cycles
            x.fill_(2.0)
            out = f(x, y)
            assert not s.query()  # the call did not wait for torch on the host
        np.testing.assert_array_equal(np.asarray(out), np.full(1 << 20, 3.0, np.float32))
        x.zero_()
    torch.cuda.synchronize()


@gpu
def test_gpu_torch_tensor_memory_changed_under_the_same_object_is_read_afresh():
    torch = _torch_gpu()
    f = hlo.jit(lambda x: x * 2.0, target="cuda")
    t = torch.arange(6, dtype=torch.float32, device="cuda")
    np.testing.assert_array_equal(np.asarray(f(t)), np.arange(6) * 2.0)
    t.set_(torch.full((6,), 5.0, device="cuda"))  # same object, other memory
    np.testing.assert_array_equal(np.asarray(f(t)), np.full(6, 10.0))
    t.data = torch.full((6,), 7.0, device="cuda")
    np.testing.assert_array_equal(np.asarray(f(t)), np.full(6, 14.0))


def _jax_gpu():
    jax = pytest.importorskip("jax")
    try:
        return jax, jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("jax has no GPU backend here")


@gpu
def test_gpu_jax_arrays_being_computed_fresh_deleted_and_back_without_copy():
    jax, dev = _jax_gpu()
    import jax.numpy as jnp
    f = hlo.jit(lambda x: x + 1.0, target="cuda")
    g = jax.jit(lambda a: jnp.tanh(a @ a) + 2.0)
    a = jax.device_put(np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32), dev)
    for _ in range(3):  # each y is fresh and likely still being computed when f reads it
        y = g(a)
        out = f(y)
        np.testing.assert_allclose(np.asarray(out), np.asarray(y) + 1.0, rtol=1e-6)
    back = jax.dlpack.from_dlpack(out)
    assert back.unsafe_buffer_pointer() == out.device_ptr  # zero-copy back into jax
    np.testing.assert_array_equal(np.asarray(back), np.asarray(out))
    y.delete()
    with pytest.raises(TypeError, match="deleted or donated"):
        f(y)


@gpu
def test_gpu_cupy_arrays_on_cupy_streams():
    cp = pytest.importorskip("cupy")
    f = hlo.jit(lambda x, y: x * y, target="cuda")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        a = cp.arange(1 << 16, dtype=cp.float32)
        b = cp.full(1 << 16, 3.0, dtype=cp.float32)
        out = f(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.arange(1 << 16, dtype=np.float32) * 3)
    with pytest.raises(TypeError, match="strides"):
        f(a[::2], b[::2])
