"""The fast routes by which GPU arrays of other libraries enter a CUDA executable
(``interop.reader_for``, ``CudaExecutable._bring`` / ``_order_foreign``,
``driver.order_after_foreign``), run without a GPU: fake producers shaped like torch tensors,
jax arrays and ``__cuda_array_interface__`` objects, and a fake driver that records the
stream queries, event records and waits a call makes."""
import gc
import sys
import types

import ml_dtypes
import numpy as np
import pytest

from hlo.runtime.cuda import driver, interop
from hlo.runtime.cuda.executable import ArgumentError, CudaExecutable, Manifest

# -- a fake driver and a bare executable ------------------------------------------------------

class _Driver:
    """``CUstream`` / ``cuStreamQuery`` (finished or not, per handle) for
    ``order_after_foreign``."""

    class CUresult:
        CUDA_ERROR_NOT_READY = 600

    def __init__(self):
        self.busy = set()
        self.queries = []

    def CUstream(self, h):
        return ("stream", h)

    def cuStreamQuery(self, s):
        self.queries.append(s[1])
        return (600,) if s[1] in self.busy else (0,)


class _Event:
    def __init__(self, log):
        self.log = log

    def record(self, s):
        self.log.append(("record", s[1]))


class _Stream:
    ptr = 0x5000

    def __init__(self, log):
        self.log = log

    def wait(self, event):
        self.log.append(("wait",))


@pytest.fixture
def cu(monkeypatch):
    fake = _Driver()
    monkeypatch.setattr(driver, "cu", fake)
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(driver, "_foreign_streams", {})
    monkeypatch.setattr(interop, "_readers", {})
    monkeypatch.setattr(interop, "_TORCH_DTYPES", None)
    return fake


def _exe(inputs):
    """A CudaExecutable with what ``_bring`` and ``_order_foreign`` use, and no GPU."""
    m = Manifest({"format": 1, "target": {"name": "cuda", "arch": "sm_90"},
                  "inputs": [{"dtype": d, "shape": list(s), **({"layout": lay} if lay else {})}
                             for d, s, lay in inputs],
                  "outputs": [], "steps": []})
    exe = object.__new__(CudaExecutable)
    exe.log = []
    exe._in, exe._m, exe._readers, exe._donatable = m.inputs, m, {}, frozenset()
    exe._stream, exe._wait_event = _Stream(exe.log), _Event(exe.log)
    exe.ctx = types.SimpleNamespace(device=0)
    return exe


def _call(exe, args):
    """What ``CudaExecutable.run`` does with the arguments: bring each, then order once."""
    keep, streams = [], {}
    ptrs = [exe._bring(i, a, {}, keep, streams) for i, a in enumerate(args)]
    if streams:
        exe._order_foreign(streams)
    return ptrs, keep


# -- torch ------------------------------------------------------------------------------------

class _TorchDtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


def _fake_torch(monkeypatch, current_stream):
    torch = types.ModuleType("torch")
    for name in ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
                 "uint8", "bool", "complex64"):
        setattr(torch, name, _TorchDtype(name))
    calls = []

    def raw(device):
        calls.append(device)
        return current_stream[device]
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=raw)

    class Tensor:
        def __init__(self, ptr, shape, dtype, strides=None, device=0, requires_grad=False):
            self.ptr, self.shape, self.dtype, self.device_index = ptr, tuple(shape), dtype, device
            self.requires_grad = requires_grad
            c, step = [], 1
            for d in reversed(self.shape):
                c.insert(0, step)
                step *= d
            self.strides_ = tuple(strides) if strides is not None else tuple(c)
            self.contiguous = self.strides_ == tuple(c)

        def get_device(self):
            return self.device_index

        def is_neg(self):
            return False

        def data_ptr(self):
            return self.ptr

        def is_contiguous(self):
            return self.contiguous

        def stride(self):
            return self.strides_

        def __dlpack__(self, stream=None):  # the slow route must not be taken
            raise AssertionError("__dlpack__ called")

        def __dlpack_device__(self):
            return (2, self.device_index)
    Tensor.__module__ = "torch"

    class Parameter(Tensor):
        pass
    Parameter.__module__ = "torch.nn.parameter"
    torch.Tensor = Tensor
    torch.nn = types.SimpleNamespace(Parameter=Parameter)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch, calls


def test_torch_tensors_are_read_through_their_attributes_and_ordered_once_per_call(cu, monkeypatch):
    torch, stream_reads = _fake_torch(monkeypatch, {0: 0})
    exe = _exe([("f32", (4, 8), None), ("bf16", (8,), None), ("f32", (8, 4), [0, 1])])
    a = torch.Tensor(0x1000, (4, 8), torch.float32)
    w = torch.nn.Parameter(0x2000, (8,), torch.bfloat16, requires_grad=True)  # detached, no copy
    t = torch.Tensor(0x3000, (8, 4), torch.float32, strides=(1, 8))  # a transpose: column-major
    ptrs, keep = _call(exe, [a, w, t])
    assert ptrs == [0x1000, 0x2000, 0x3000]
    assert keep == [a, w, t]  # alive until the call is done
    assert stream_reads == [0]  # torch's current stream, read once for three tensors
    assert cu.queries == [0] and exe.log == []  # torch's stream had finished: no event, no wait
    cu.busy.add(0)
    _call(exe, [a, w, t])
    assert exe.log == [("record", 0), ("wait",)]  # one record and one wait for three tensors
    assert stream_reads == [0, 0]


def test_torch_tensors_on_two_streams_wait_once_per_stream(cu, monkeypatch):
    torch, _ = _fake_torch(monkeypatch, {0: 0x77})
    exe = _exe([("f32", (2,), None)] * 3)
    cu.busy.add(0x77)
    _call(exe, [torch.Tensor(0x10 * k, (2,), torch.float32) for k in (1, 2, 3)])
    assert cu.queries == [0x77] and exe.log == [("record", 0x77), ("wait",)]


@pytest.mark.parametrize("make, match", [
    (lambda t: t.Tensor(0x10, (2, 3), t.float64), r"argument 0: expected f32\[2,3\], got float64\[2,3\]"),
    (lambda t: t.Tensor(0x10, (3, 2), t.float32), r"expected f32\[2,3\], got float32\[3,2\]"),
    (lambda t: t.Tensor(0x10, (2, 3), t.complex64), "torch tensor of dtype .*complex64.* no type for"),
    (lambda t: t.Tensor(0x10, (2, 3), t.float32, strides=(6, 2)), r"strides \(24, 8\) \(bytes\).*contiguous"),
    (lambda t: t.Tensor(0x10, (2, 3), t.float32, device=1), "lives on cuda:1; this executable runs on cuda:0"),
])
def test_torch_argument_errors_name_the_argument(cu, monkeypatch, make, match):
    torch, _ = _fake_torch(monkeypatch, {0: 0, 1: 0})
    exe = _exe([("f32", (2, 3), None)])
    with pytest.raises(ArgumentError, match=match):
        _call(exe, [make(torch)])


def test_bf16_torch_tensors_map_to_ml_dtypes_bfloat16(cu, monkeypatch):
    torch, _ = _fake_torch(monkeypatch, {0: 0})
    read = interop.reader_for(torch.Tensor)
    keep = []
    ptr, shape, dtype, strides, dev = read(torch.Tensor(0x40, (3,), torch.bfloat16), {}, 0x5000, keep)
    assert dtype == np.dtype(ml_dtypes.bfloat16) and strides is None and (ptr, shape, dev) == (0x40, (3,), 0)


# -- jax ----------------------------------------------------------------------------------------

class _Layout:
    def __init__(self, m2m):
        self.major_to_minor, self.tiling = m2m, ()


class _JaxDevice:
    def __init__(self, platform, k):
        self.platform, self.local_hardware_id, self.id = platform, k, k


class ArrayImpl:
    """Shaped like ``jaxlib._jax.ArrayImpl`` where the reader looks."""

    def __init__(self, ptr, shape, dtype, platform="gpu", ready=True, m2m=None, devices=1):
        self.ptr, self.shape, self.dtype, self.ready, self.deleted = ptr, tuple(shape), np.dtype(dtype), ready, False
        self.sharding = types.SimpleNamespace(device_set={_JaxDevice(platform, k) for k in range(devices)})
        m2m = tuple(range(len(shape))) if m2m is None else m2m
        self.format = types.SimpleNamespace(layout=_Layout(m2m))
        self.pointer_reads, self.dlpack_streams = 0, []

    def is_deleted(self):
        return self.deleted

    def is_ready(self):
        return self.ready

    def unsafe_buffer_pointer(self):
        self.pointer_reads += 1
        return self.ptr

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        self.dlpack_streams.append(stream)  # jax orders the consumer's stream after the array
        return interop.export_capsule(self.ptr, self.shape, None, self.dtype, 0, self)


ArrayImpl.__module__ = "jaxlib._jax"


def test_a_jax_array_is_read_once_and_checked_for_deletion_on_every_call(cu):
    exe = _exe([("f32", (4, 2), None)])
    x = ArrayImpl(0x900, (4, 2), np.float32)
    for _ in range(3):
        ptrs, keep = _call(exe, [x])
        assert ptrs == [0x900] and keep == [x]
    assert x.pointer_reads == 1  # immutable: read once, cached
    assert cu.queries == [] and exe.log == []  # ready when first read: nothing to order
    x.deleted = True  # donated to a jax call, or x.delete()
    with pytest.raises(ArgumentError, match="argument 0: a jax array that was deleted or donated"):
        _call(exe, [x])
    key = id(x)
    assert key in interop._jax_seen
    del x, keep
    gc.collect()
    assert key not in interop._jax_seen  # the cache lets go with the array


def test_a_jax_array_still_being_computed_goes_through_dlpack_with_our_stream(cu):
    exe = _exe([("f32", (3,), None)])
    x = ArrayImpl(0xa00, (3,), np.float32, ready=False)
    ptrs, keep = _call(exe, [x])
    assert ptrs == [0xa00] and x.dlpack_streams == [_Stream.ptr] and x.pointer_reads == 0
    assert id(x) not in interop._jax_seen  # not cached until ready
    x.ready = True
    _call(exe, [x])
    _call(exe, [x])
    assert x.dlpack_streams == [_Stream.ptr] and x.pointer_reads == 1


def test_jax_layouts_devices_and_hosts(cu):
    exe = _exe([("f32", (4, 2), [0, 1])])  # column-major
    col = ArrayImpl(0xb00, (4, 2), np.float32, m2m=(1, 0))
    assert _call(exe, [col])[0] == [0xb00]
    with pytest.raises(ArgumentError, match="strides"):
        _call(exe, [ArrayImpl(0xc00, (4, 2), np.float32)])  # row-major where column-major is read
    read = interop.reader_for(ArrayImpl)
    assert read(ArrayImpl(0xd00, (2,), np.float32, platform="cpu"), {}, 0, []) is None  # copied
    with pytest.raises(BufferError, match="sharded over 2 devices"):
        read(ArrayImpl(0xe00, (2,), np.float32, devices=2), {}, 0, [])


# -- any __cuda_array_interface__ producer ------------------------------------------------------

class _Cai:
    def __init__(self, ptr, shape, typestr, stream, strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "version": 3, "stream": stream, "strides": strides}


def test_array_interface_producers_are_ordered_once_per_named_stream(cu):
    exe = _exe([("f32", (2,), None)] * 4)
    cu.busy.update({11, 12})
    args = [_Cai(0x100, (2,), "<f4", 11), _Cai(0x200, (2,), "<f4", 11), _Cai(0x300, (2,), "<f4", 12),
            _Cai(0x400, (2,), "<f4", None)]  # None: nothing to wait for
    ptrs, keep = _call(exe, args)
    assert ptrs == [0x100, 0x200, 0x300, 0x400] and len(keep) == 4
    assert cu.queries == [11, 12]
    assert exe.log == [("record", 11), ("wait",), ("record", 12), ("wait",)]
    with pytest.raises(ArgumentError, match=r"got int32\[2\]"):
        _call(exe, [_Cai(0x100, (2,), "<i4", None)] + args[1:])


# -- hlo.jit's fast key ------------------------------------------------------------------------

def test_the_fast_key_of_arrays_without_numpy_strides_is_type_shape_dtype():
    from hlo.staging import jit as api
    x = ArrayImpl(0x1, (2, 3), np.float32)
    key = api._mixed_key((x, 1.5, np.zeros(3, np.float32)))
    assert key == ((ArrayImpl, (2, 3), np.dtype(np.float32)), float,
                   (np.ndarray, (3,), np.dtype(np.float32), (4,)))
    assert api._KEY_OF[ArrayImpl] is api._SHAPE_DTYPE_KEY  # learnt once: no exception per call
    assert api._mixed_key((object(),)) is None
