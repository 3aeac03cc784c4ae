"""Fixtures of the frontend tests: ``target`` runs a test on every target that works here.

The targets are "interpreter" plus each backend whose compiler exists (cpu; cuda only with a
usable NVIDIA GPU). ``HLO_TEST_TARGETS=interpreter,cpu`` picks them explicitly."""
import importlib
import importlib.util
import os

import pytest

from hlo.staging.targets import has_usable_nvidia_gpu


def _backend_ready(target: str) -> bool:
    try:
        if importlib.util.find_spec("hlo.passes.pipeline") is None:
            return False
        mod = importlib.import_module(f"hlo.backends.{target}")
    except ImportError:
        return False
    if getattr(mod, "compile", None) is None:
        return False
    return target != "cuda" or has_usable_nvidia_gpu()


def frontend_targets():
    env = os.environ.get("HLO_TEST_TARGETS")
    if env:
        return [t.strip() for t in env.split(",") if t.strip()]
    return ["interpreter"] + [t for t in ("cpu", "cuda") if _backend_ready(t)]


TARGETS = frontend_targets()


@pytest.fixture(params=TARGETS)
def target(request):
    return request.param
