"""GPU tests (marked ``gpu``) skip where there is no usable NVIDIA GPU (CI has none). The CUDA
backend's tests also reuse the CPU backend's IR programs (``tests/backends`` on the path)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "backends"))


def _gpu_reason():
    try:
        from hlo.runtime.cuda import driver
        from hlo.runtime.cuda.errors import CudaUnavailableError
    except ImportError as e:
        return f"hlo.runtime.cuda does not import: {e}"
    try:
        driver.get_context(0)
    except CudaUnavailableError as e:
        return str(e)
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if it.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"no GPU: {reason}")
        for it in gpu_items:
            it.add_marker(skip)
