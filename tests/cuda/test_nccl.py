"""The NCCL binding (hlo.runtime.cuda.nccl). Without a GPU: the library's version and unique ids,
its enum values against the nccl.h installed beside it, the unique id's bootstrap over the TCP
store, the dtype/op mapping (skipped where libnccl is not found). With a GPU (marked ``gpu``):
a communicator of one on GPU 0, made both ways (init_rank, init_all), every collective against
numpy; with two or more GPUs, one process driving them all. One command runs them all:

    .venv/bin/python -m pytest -q tests/cuda/test_nccl.py
"""
import os
import re
import socket
import threading

import ml_dtypes
import numpy as np
import pytest

from hlo.runtime.cuda import nccl
from hlo.runtime.processes import DistributedError, DistributedTimeoutError

_why = nccl.unavailable_reason()
needs_nccl = pytest.mark.skipif(_why is not None, reason=f"NCCL absent: {_why}")


def test_dtype_and_op_mapping_needs_no_library():
    assert nccl._typed("float32", 10, "sum") == (7, 10, 0)
    assert nccl._typed("bfloat16", 3, "max") == (9, 3, 2)
    assert nccl._typed("int16", 5, None) == (1, 10, None)        # moved as bytes
    assert nccl._typed("complex64", 4, "sum") == (7, 8, 0)      # sums of the parts
    assert nccl._typed("bool", 4, "sum") == (1, 4, 2)           # or = max of 0/1
    assert nccl._typed("bool", 4, "prod") == (1, 4, 3)          # and = min
    for dtype, op, msg in (("int16", "sum", "cannot reduce int16"), ("complex64", "max", "max of complex"),
                           ("float32", "mean", "not one of sum"), ("object", None, "do not take object")):
        with pytest.raises(DistributedError, match=msg):
            nccl._typed(dtype, 1, op)


@needs_nccl
def test_version_and_unique_ids():
    v = nccl.version()
    assert v >= 20000 and re.fullmatch(r"2\.\d+\.\d+", nccl.version_string())
    a, b = nccl.unique_id(), nccl.unique_id()
    assert len(a) == len(b) == nccl.UNIQUE_ID_BYTES and a != b


@needs_nccl
def test_enum_values_match_the_installed_header():
    path = nccl.library_path()
    header = os.path.join(os.path.dirname(os.path.dirname(path)), "include", "nccl.h")
    if not os.path.isabs(path) or not os.path.exists(header):
        pytest.skip(f"no nccl.h beside {path!r}")
    text = open(header, encoding="utf-8", errors="replace").read()
    found = {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(nccl\w+|NCCL_UNIQUE_ID_BYTES)\s*=?\s*(\d+)\b", text)}
    # names a newer NCCL added (ncclTimeout in 2.32) are absent from an older header; the rest
    # must be there, with the binding's values
    wrong = {k: (v, found[k]) for k, v in nccl.HEADER_ENUMS.items() if k in found and found[k] != v}
    assert not wrong, f"enum values differ from {header}: {wrong}"
    core = ("ncclSuccess", "ncclSum", "ncclFloat32", "ncclBfloat16", "NCCL_UNIQUE_ID_BYTES")
    assert all(k in found for k in core if k in nccl.HEADER_ENUMS), [k for k in core if k not in found]


@needs_nccl
def test_unique_id_bootstrap_over_the_tcp_store():
    from hlo.runtime.rendezvous import TcpStore
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    server = TcpStore(addr, is_server=True, timeout=10)
    client = TcpStore(addr, timeout=10)
    got = {}
    t = threading.Thread(target=lambda: got.__setitem__(1, nccl.bootstrap_unique_id(1, client, "k", 2)))
    t.start()
    got[0] = nccl.bootstrap_unique_id(0, server, "k", 2)
    t.join(10)
    # a rank that never comes: the others fail at the barrier, within the store's timeout
    lonely = TcpStore(addr, timeout=0.5)
    with pytest.raises(DistributedTimeoutError, match="barrier 'k2/ready'.*1 of 2 processes arrived"):
        nccl.bootstrap_unique_id(0, lonely, "k2", 2)
    lonely.close()
    client.close()
    server.close()
    assert got[0] == got[1] and len(got[0]) == nccl.UNIQUE_ID_BYTES
    with pytest.raises(DistributedError, match="needs an MpiTransport or a TcpStore"):
        nccl.bootstrap_unique_id(0, object())


# --- on a GPU --------------------------------------------------------------------------------

def _dt(name):
    return np.dtype(getattr(ml_dtypes, name)) if name in ("bfloat16", "float8_e4m3fn") else np.dtype(name)


class Dev:
    """Device buffers of one GPU for the tests: to/from numpy through the runtime's driver."""

    def __init__(self, device=0):
        from hlo.runtime.cuda import driver
        self.driver = driver
        self.ctx = driver.get_context(device)
        self.ctx.make_current()
        self.stream = self.ctx.create_stream()
        self.ptrs = []

    def put(self, a):
        a = np.ascontiguousarray(a)
        p = self.ctx.alloc(max(a.nbytes, 1))
        self.ptrs.append(p)
        self.driver.memcpy_htod(p, a.ctypes.data, a.nbytes, self.stream)
        self.stream.synchronize()
        return p

    def empty(self, shape, dtype):
        """A buffer filled with 0x5A bytes, so that a collective that writes nothing shows."""
        return self.put(np.full(int(np.prod(shape)) * np.dtype(dtype).itemsize, 0x5A, np.uint8))

    def get(self, p, shape, dtype):
        out = np.empty(shape, dtype)
        self.driver.memcpy_dtoh(out.ctypes.data, p, out.nbytes, self.stream)
        return out

    def close(self):
        self.stream.synchronize()
        for p in self.ptrs:
            self.ctx.free(p)


@pytest.fixture
def one():
    """(communicator of one on GPU 0, its device buffers)."""
    if _why is not None:
        pytest.skip(f"NCCL absent: {_why}")
    dev = Dev(0)
    comm = nccl.Communicator.init_rank(1, nccl.unique_id(), 0, 0)
    yield comm, dev
    comm.destroy()
    dev.close()


def _data(dtype, n, seed=0):
    rng = np.random.default_rng(seed)
    d = _dt(dtype)
    if d.kind == "b":
        return rng.random(n) < 0.5
    if d.kind == "c":
        return (rng.integers(-4, 5, n) + 1j * rng.integers(-4, 5, n)).astype(d)
    return rng.integers(-3, 4 if d.kind != "u" else 9, n).clip(0 if d.kind == "u" else -3).astype(d)


@pytest.mark.gpu
def test_communicator_of_one_describes_itself(one):
    comm, _ = one
    assert (comm.size, comm.rank, comm.device) == (1, 0, 0)
    assert comm.async_error() is None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, op", [("float32", "sum"), ("float32", "max"), ("float64", "prod"),
                                       ("bfloat16", "sum"), ("float16", "min"), ("int32", "sum"),
                                       ("uint8", "max"), ("int64", "min"), ("bool", "sum"),
                                       ("complex64", "sum")])
def test_all_reduce_of_one_is_the_input(one, dtype, op):
    comm, dev = one
    x = _data(dtype, 1000)
    s, r = dev.put(x), dev.empty(x.shape, x.dtype)
    comm.all_reduce(s, r, x.size, _dt(dtype).name, op, dev.stream)
    comm.wait(dev.stream, "all_reduce")
    np.testing.assert_array_equal(dev.get(r, x.shape, x.dtype), x)
    comm.all_reduce(s, s, x.size, _dt(dtype).name, op, dev.stream)  # in place
    np.testing.assert_array_equal(dev.get(s, x.shape, x.dtype), x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int16", "bfloat16", "complex128"])
def test_data_movement_of_one(one, dtype):
    comm, dev = one
    x = _data(dtype, 64, seed=1)
    name = _dt(dtype).name
    s = dev.put(x)
    for run in (lambda r: comm.all_gather(s, r, x.size, name, dev.stream),
                lambda r: comm.reduce_scatter(s, r, x.size, name, "sum", dev.stream) if name != "int16" else
                comm.all_gather(s, r, x.size, name, dev.stream),
                lambda r: comm.broadcast(s, r, x.size, name, 0, dev.stream),
                lambda r: comm.all_to_all(s, r, x.size, name, dev.stream),
                lambda r: comm.permute(s, r, x.size, name, [(0, 0)], dev.stream)):
        r = dev.empty(x.shape, x.dtype)
        run(r)
        comm.wait(dev.stream)
        np.testing.assert_array_equal(dev.get(r, x.shape, x.dtype), x)
    r = dev.empty(x.shape, x.dtype)
    comm.permute(s, r, x.size, name, [], dev.stream)   # nobody sends to rank 0: zeros
    comm.wait(dev.stream)
    np.testing.assert_array_equal(dev.get(r, x.shape, x.dtype), np.zeros_like(x))


@pytest.mark.gpu
def test_send_to_self_in_a_group(one):
    comm, dev = one
    x = _data("float32", 256, seed=2)
    s, r = dev.put(x), dev.empty(x.shape, x.dtype)
    with nccl.group():
        comm.send(s, x.size, "float32", 0, dev.stream)
        comm.recv(r, x.size, "float32", 0, dev.stream)
    comm.wait(dev.stream)
    np.testing.assert_array_equal(dev.get(r, x.shape, x.dtype), x)


@pytest.mark.gpu
def test_init_all_and_abort():
    if _why is not None:
        pytest.skip(f"NCCL absent: {_why}")
    dev = Dev(0)
    (comm,) = nccl.Communicator.init_all([0])
    x = _data("float32", 10)
    s = dev.put(x)
    comm.all_reduce(s, s, x.size, "float32", "sum", dev.stream)
    comm.wait(dev.stream)
    np.testing.assert_array_equal(dev.get(s, x.shape, x.dtype), x)
    comm.abort()
    with pytest.raises(DistributedError, match="aborted or destroyed"):
        comm.all_reduce(s, s, x.size, "float32", "sum", dev.stream)
    dev.close()


@pytest.mark.gpu
def test_one_process_driving_every_local_gpu():
    if _why is not None:
        pytest.skip(f"NCCL absent: {_why}")
    from hlo.runtime.cuda import driver
    n = driver.device_count()
    if n < 2:
        pytest.skip(f"needs two or more GPUs; this machine has {n}")
    devs = [Dev(i) for i in range(n)]
    comms = nccl.Communicator.init_all(list(range(n)))
    xs = [_data("float32", 4096, seed=i) for i in range(n)]
    bufs = [d.put(x) for d, x in zip(devs, xs)]
    gathered = [d.empty((n * 4096,), np.float32) for d in devs]
    with nccl.group():
        for c, d, b in zip(comms, devs, bufs):
            c.all_reduce(b, b, 4096, "float32", "sum", d.stream)
    with nccl.group():
        for c, d, b, g in zip(comms, devs, bufs, gathered):
            c.all_gather(b, g, 4096, "float32", d.stream)
    for c, d in zip(comms, devs):
        c.wait(d.stream)
    total = np.sum(xs, axis=0)
    for d, b, g in zip(devs, bufs, gathered):
        np.testing.assert_array_equal(d.get(b, (4096,), np.float32), total)
        np.testing.assert_array_equal(d.get(g, (n * 4096,), np.float32), np.tile(total, n))
    for c in comms:
        c.destroy()
    for d in devs:
        d.close()
