"""``hlo.devices()``, ``hlo.device_put(x, device=None)`` and ``hlo.device_get(tree)``, like jax's.

``devices()`` lists the default target's devices: the CUDA devices (``Device``: ``id``,
``platform`` "cuda", ``device_kind``, the GPU's name; an empty list where there is no usable
GPU), or the CPU's (``CpuDevice``: ``HLO_CPU_DEVICES`` of them, default 1, as XLA's host platform
device count); ``devices("cpu")`` / ``devices("cuda")`` ask for one kind. ``device_put(x,
NamedSharding(mesh, spec))`` lays ``x`` out over a mesh (``staging/sharded_array.py``). ``device_put(x)`` copies a host
array (numpy, a numpy scalar, a Python number with hlo's dtype for it, anything with
``__array__``) to a GPU (default: device 0) and returns the runtime's ``DeviceArray`` at once
(the copy is asynchronous); an hlo ``DeviceArray`` already on that device comes back as it is.
Without a GPU: ``TargetUnavailableError`` saying why.
"""
from __future__ import annotations

from typing import List, Optional, Union

import numpy as np

from .. import dtypes
from ..errors import ArgumentTypeError, TargetUnavailableError


class Device:
    """A CUDA device hlo can run on."""

    __slots__ = ("id", "device_kind")
    platform = "cuda"

    def __init__(self, id: int, device_kind: str):
        self.id, self.device_kind = id, device_kind

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("cuda", self.id))

    def __repr__(self):
        return f"CudaDevice(id={self.id}, device_kind={self.device_kind!r})"


def devices(backend: Optional[str] = None) -> list:
    """The devices of ``backend`` ("cpu" or "cuda"; default: the default target's, as
    ``jax.devices()``): the CUDA devices of this machine ([] without a GPU, the driver or its
    bindings), or the CPU devices (``HLO_CPU_DEVICES``, default 1: ``hlo.runtime.cpu.devices``)."""
    from .targets import check_target_name, default_target
    kind = default_target() if backend is None else check_target_name(backend)
    if kind == "cpu":
        from hlo.runtime.cpu.process_spmd import global_devices
        return global_devices()
    if kind != "cuda":
        raise ArgumentTypeError(f"hlo.devices: target {kind!r} has no devices (it runs in this "
                                f"process's interpreter); ask for 'cpu' or 'cuda'")
    return _cuda_devices()


def local_devices(backend: Optional[str] = None) -> list:
    """This process's devices of ``backend`` (as ``jax.local_devices()``): ``hlo.devices()``
    but in a run of several processes (``hlo.distributed``), where ``hlo.devices("cpu")`` lists
    every process's CPU device and this lists this process's."""
    from .targets import check_target_name, default_target
    kind = default_target() if backend is None else check_target_name(backend)
    if kind == "cpu":
        from hlo.runtime.cpu.process_spmd import local_devices as cpu_local
        return cpu_local()
    return devices(kind)


def _cuda_devices() -> List[Device]:
    from hlo.runtime.cuda import driver
    from hlo.runtime.cuda.errors import CudaUnavailableError
    try:
        return [Device(i, driver.get_context(i).name) for i in range(driver.device_count())]
    except CudaUnavailableError:
        return []


def _device_id(device: Union[None, int, Device]) -> int:
    if device is None:
        return 0
    if isinstance(device, Device):
        return device.id
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    raise ArgumentTypeError(f"hlo.device_put: device must be None, a device number or one of "
                            f"hlo.devices(), got {device!r}")


def device_put(x, device=None):
    """``x`` in GPU memory as an hlo ``DeviceArray`` (see the module's docstring); with an
    ``hlo.sharding.NamedSharding``, a ``ShardedArray`` of ``x``'s blocks on the mesh's devices."""
    from ..sharding import NamedSharding
    if isinstance(device, NamedSharding):  # a global array over a mesh of CPU devices
        from .sharded_array import ShardedArray
        if isinstance(x, ShardedArray) and x.sharding == device:
            return x
        return ShardedArray.from_global(np.asarray(x), device, "hlo.device_put")
    from hlo.runtime.cuda.array import DeviceArray
    from hlo.runtime.cuda.array import device_put as put
    from hlo.runtime.cuda.errors import CudaUnavailableError
    from hlo.runtime.cuda.interop import gpu_array_type
    dev = _device_id(device)
    if isinstance(x, DeviceArray) and x.device == dev:
        return x
    if type(x) in (bool, int, float):
        dt, _ = dtypes.scalar_type(x)
        dtypes.check_scalar_fits(x, dt, "hlo.device_put's argument")
        host = np.asarray(x, dt)
    elif isinstance(x, (np.ndarray, np.generic)):
        host = np.asarray(x)
    elif gpu_array_type(x) is not None:
        raise ArgumentTypeError(
            f"hlo.device_put: this {type(x).__name__} is already in GPU memory; pass it to an "
            "hlo.jit function as it is (it is read in place, without a copy)")
    elif hasattr(x, "__array__"):
        host = np.asarray(x)
    else:
        raise ArgumentTypeError(f"hlo.device_put takes an array or a number, got a {type(x).__name__}")
    try:
        dtypes.canonicalize(host.dtype, "hlo.device_put's argument")
    except Exception as e:
        raise ArgumentTypeError(f"hlo.device_put: {e}") from None
    try:
        return put(host, dev)
    except CudaUnavailableError as e:
        raise TargetUnavailableError(f"hlo.device_put needs a CUDA device: {e}") from None


def device_get(x):
    """``x`` (a pytree) with every GPU array copied to the host as a numpy array (other leaves
    as they are), like ``jax.device_get``."""
    from hlo.runtime.cuda.interop import gpu_array_type

    from ..tree_util import tree_map
    return tree_map(lambda a: np.asarray(a) if gpu_array_type(a) is not None else a, x)
