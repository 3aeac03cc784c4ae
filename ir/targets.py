"""The targets, in one table: every other list of target names derives from ``TARGETS`` (the
target-name check of ``hlo.config`` and of the pipeline, the passes' per-target defaults, the
runtime's kinds of machine code, the kinds a saved file holds, the compilation cache's key),
and code that behaves differently per target asks its ``TargetInfo`` what it can do rather than
comparing its name. The table sits in the lowest package: the passes need target names (their
defaults differ per target), and so does the load path of a saved executable, which imports the
runtime and the IR but never the passes.

A compiled target ``k`` (machine code) has, besides its row here: a code generator
``hlo.backends.k`` (``compile``, ``lowered_ops``, ``declined_ops``), a runtime ``hlo.runtime.k``
whose ``target.current()`` is its ``hlo.runtime.target.Target`` (identity, load check, cache key
parts, pass options), a loader of its saved files (``hlo.staging.saved.LOADERS``) and its
packages in ``pyproject.toml``; ``tests/test_targets.py`` checks each of them for every compiled
target here. The ``interpreter`` target runs the optimized IR in the reference interpreter.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Tuple


class TargetInfo(NamedTuple):  # (not a dataclass: ``import hlo`` reads this table and stays light)
    name: str
    # Machine code: compiled by ``hlo.backends.<name>``, run by ``hlo.runtime.<name>``, saved in
    # ``.hlox`` files and the compilation cache. False: the reference interpreter runs the IR.
    compiled: bool
    # Results are device arrays (asynchronous), and arrays already on the device are handed to
    # the runtime as they are.
    device_arrays: bool = False
    # A native CPython entry takes exact numpy arguments straight into the machine code (hlo.jit's
    # fast path), and ``compile(profile=True)`` builds an in-program profile.
    native_entry: bool = False
    # hlo.config's ``matmul_precision`` changes the code (so it is a compile option and part of
    # the cache key).
    matmul_precision: bool = False
    # This machine's facts (threads, cache sizes) are pass options (``Target.pass_options()``),
    # and pass ``dot-split-k`` splits products over the threads.
    machine_pass_options: bool = False
    # Products computed by a library call may write into a program output directly (a cuBLASLt
    # call writes its result where the buffer plan says; see ``buffer_assignment``).
    products_in_outputs: bool = True
    # A process that has used the target may fork workers (CUDA's driver state does not survive
    # a fork: the conformance runner starts fresh interpreters instead).
    fork_safe: bool = True
    # What the target changes from the pipeline's defaults (``options.target_defaults``): cpu and
    # the interpreter fuse a row-wise prologue into a dot's operand, cuda does not; cuda merges
    # products that share their LHS and unrolls loops with a known trip count; cpu and cuda
    # compute convolutions as products (pass ``conv-gemm``; on cuda cuBLASLt runs them).
    pass_defaults: Tuple[Tuple[str, bool], ...] = ()


_TABLE = (
    TargetInfo("cpu", compiled=True, native_entry=True, machine_pass_options=True,
               pass_defaults=(("row_prologue", True), ("dot_merger", False), ("while_unroll", False),
                              ("conv_products", True))),
    TargetInfo("cuda", compiled=True, device_arrays=True, matmul_precision=True,
               products_in_outputs=False, fork_safe=False,
               pass_defaults=(("row_prologue", False), ("dot_merger", True), ("while_unroll", True),
                              ("conv_products", True))),
    TargetInfo("interpreter", compiled=False,
               pass_defaults=(("row_prologue", True), ("dot_merger", False), ("while_unroll", False))),
)

INFO: Dict[str, TargetInfo] = {t.name: t for t in _TABLE}
TARGETS: Tuple[str, ...] = tuple(INFO)                                  # every target name
COMPILED: Tuple[str, ...] = tuple(t.name for t in _TABLE if t.compiled)  # machine-code kinds


def info(target: str) -> TargetInfo:
    """The row of ``target``; ``ValueError`` naming the known targets for any other name."""
    try:
        return INFO[target]
    except (KeyError, TypeError):
        raise ValueError(f"unknown target {target!r} (known: {', '.join(TARGETS)})") from None
