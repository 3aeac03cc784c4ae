"""Helpers for the AOT tests: run Python in a fresh process, the modules a loading process must
never import, and a counter that proves no object code was linked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Loading a saved executable must import none of these (no tracing, passes or code generation).
FORBIDDEN_PREFIXES = ("hlo.tracing.tracer", "hlo.staging.jit", "hlo.jit", "hlo.staging.stages", "hlo.passes", "hlo.numpy", "hlo.lax",
                      "hlo.nn", "hlo.autodiff", "hlo.random", "hlo.lax.control_flow",
                      "hlo.backends.lower", "hlo.backends.cpu.codegen", "hlo.backends.cpu.kernels", "hlo.backends.elemental",
                      "hlo.backends.scalar_ops", "hlo.backends.cpu.dot", "hlo.ir.interpreter")


def forbidden(modules) -> list:
    return sorted(m for m in modules if m.startswith(FORBIDDEN_PREFIXES))


def run_python(code: str, *args: str, timeout: float = 120) -> dict:
    """Run ``code`` in a fresh interpreter; it must print one JSON object as its last line."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(REPO))
    assert p.returncode == 0, f"subprocess failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


class LinkCounter:
    """Patches the loader so that every attempt to link object code is counted."""

    def __init__(self, monkeypatch):
        import hlo.runtime.cpu.executable as executable
        import hlo.runtime.cpu.loader as loader
        self.count = 0
        real = loader.LoadedObject

        def counting(*a, **k):
            self.count += 1
            return real(*a, **k)
        monkeypatch.setattr(executable, "LoadedObject", counting)   # an executable's code
        monkeypatch.setattr(loader, "LoadedObject", counting)       # the worker pool's code
