"""Test vectors with ``interpreter.run_parallel`` on a compiled target: ``@main`` runs in the
reference interpreter (its inputs are constants), except each ``run_parallel``, whose programs
are compiled for the target by themselves (each program function becomes the ``@main`` of a
module of its own) and run on the target's devices as one SPMD run
(``hlo.runtime.cpu.devices.run_spmd``: a device per process, collectives in memory). The
conformance runner sets ``HLO_CPU_DEVICES=8`` when it is unset, so the vectors' grids (up to 5
processes) have their devices.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from hlo.ir.clone import clone_function
from hlo.ir.core import Module
from hlo.ir.interpreter import Interpreter


def has_run_parallel(module: Module) -> bool:
    return any(op.name == "run_parallel" for op in module["main"].walk())


def program_of(region) -> str:
    """The function a ``run_parallel`` region calls (regions are one call, as imported)."""
    ops = region.ops
    if len(ops) != 1 or ops[0].name != "call" or list(ops[0].operands) != list(region.args):
        raise ValueError("a run_parallel program that is not one call of a function")
    return ops[0].attrs["callee"]


def program_module(module: Module, name: str) -> Module:
    """``module``'s functions but ``@main``, with ``@name`` as the public ``@main``."""
    out = Module(module.name)
    for fname, fn in module.functions.items():
        if fname == "main":
            continue
        c = clone_function(fn)
        if fname == name:
            c.name, c.visibility = "main", "public"
        out.add(c)
    return out


class _OnTarget(Interpreter):
    def __init__(self, module: Module, target: str, compile_fn=None):
        super().__init__(module)
        self.target = target
        if compile_fn is None:
            from hlo.staging.stages import Lowered

            def compile_fn(m):
                return Lowered(m).compile(target=target)
        self.compile_fn = compile_fn
        self.compiled: Dict[str, object] = {}

    def eval_op(self, op, ins, env):
        if op.name != "run_parallel":
            return super().eval_op(op, ins, env)
        from hlo.runtime.cpu.devices import run_spmd
        names = [program_of(r) for r in op.regions]
        for n in names:
            if n not in self.compiled:
                self.compiled[n] = self.compile_fn(program_module(self.module, n))
        args, k = [], 0
        for r in op.regions:
            args.append(list(ins[k:k + len(r.args)]))
            k += len(r.args)
        outs = run_spmd(lambda i, a: list(self.compiled[names[i]](*a)), args,
                        op.attrs["num_replicas"], op.attrs["num_partitions"])
        return [np.asarray(o) for per in outs for o in per]


def run_on_target(module: Module, target: str, compile_fn=None) -> List[np.ndarray]:
    """``@main``'s results, its ``run_parallel`` programs run on ``target`` (compiled by
    ``compile_fn(module)`` where given: the runner's pipeline options)."""
    it = _OnTarget(module, target, compile_fn)
    with np.errstate(all="ignore"):
        return [np.array(o) for o in it.call(module["main"], [])]
