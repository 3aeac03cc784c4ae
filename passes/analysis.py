"""Cost and memory analysis of an optimized program (``Optimized``), in the shape of XLA's
``Compiled.cost_analysis()`` and ``Compiled.memory_analysis()``.

``cost_analysis``: "kernels" counts launched kernels (fusion ops and unfused compute ops of
``main``'s top level; constants and bitcasts launch nothing); "flops" counts one per element of
each elementwise op, one per reduced element, 2*M*N*K per dot (nested regions counted once per
execution of their op, a while body once); "transcendentals" the expensive elementwise ops
among them; "bytes accessed" what each kernel reads from and writes to memory (every distinct
top-level input once plus its outputs; fused intermediates stay in registers).

``memory_analysis``: argument, output, temp (the arena), alias (outputs written into donated
arguments) and constant sizes in bytes.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from hlo.ir import ops as op_table
from hlo.ir.core import Operation
from hlo.runtime.memory_analysis import MemoryAnalysis

from .layout import is_bitcast
from .util import ELEMENTWISE, TRANSCENDENTAL, inputs_of, nbytes


def is_kernel(op: Operation) -> bool:
    """Does this top-level op of main launch a kernel?"""
    return op.name != "constant" and not is_bitcast(op)


# Ops whose regions are scalar bodies applied per element (reduce, sort, scatter...), not
# programs (control flow, fusions) whose ops count on their own.
_SCALAR_BODIES = op_table.with_trait(op_table.INNER_LOOP, op_table.WHOLE_ARRAY)


def op_flops(op: Operation) -> Dict[str, float]:
    out = {"flops": 0.0, "transcendentals": 0.0}
    if op.name in ELEMENTWISE or op.name == "bitcast_convert":
        n = op.results[0].type.size
        out["flops"] += n
        if op.name in TRANSCENDENTAL:
            out["transcendentals"] += n
    elif op.name == "reduce":
        n = len(op.operands) // 2
        out["flops"] += sum(v.type.size for v in op.operands[:n])
    elif op.name == "reduce_window":
        n = len(op.operands) // 2
        w = int(np.prod(op.attrs["window_dimensions"]))
        out["flops"] += sum(r.type.size for r in op.results) * w
    elif op.name == "dot_general":
        lhs = op.operands[0].type
        k = 1
        for d in op.attrs.get("lhs_contracting_dimensions", ()):
            k *= lhs.shape[d]
        out["flops"] += 2.0 * op.results[0].type.size * k
    elif op.name == "convolution":
        rhs = op.operands[1].type
        ki = rhs.shape[op.attrs["kernel_input_feature_dimension"]]
        spatial = 1
        for d in op.attrs["kernel_spatial_dimensions"]:
            spatial *= rhs.shape[d]
        out["flops"] += 2.0 * op.results[0].type.size * ki * spatial
    for r in op.regions:
        if op.name in _SCALAR_BODIES:
            continue  # scalar bodies: counted above
        for inner in r.ops:
            f = op_flops(inner)
            out["flops"] += f["flops"]
            out["transcendentals"] += f["transcendentals"]
    return out


def cost_analysis(optimized) -> dict:
    main = optimized.module.main
    kernels = 0
    fusions = 0
    flops = 0.0
    trans = 0.0
    bytes_accessed = 0.0
    for op in main.ops:
        if not is_kernel(op):
            continue
        kernels += 1
        fusions += op.name == "fusion"
        f = op_flops(op)
        flops += f["flops"]
        trans += f["transcendentals"]
        bytes_accessed += sum(nbytes(v.type) for v in inputs_of(op))
        bytes_accessed += sum(nbytes(r.type) for r in op.results)
    return {"kernels": kernels, "fusions": fusions, "unfused kernels": kernels - fusions,
            "flops": flops, "transcendentals": trans, "bytes accessed": bytes_accessed}


def memory_analysis(optimized) -> MemoryAnalysis:
    main = optimized.module.main
    ba = optimized.buffers
    return MemoryAnalysis(
        argument_size_in_bytes=sum(nbytes(a.type) for a in main.args),
        output_size_in_bytes=sum(nbytes(v.type) for v in main.body.outputs),
        temp_size_in_bytes=ba.arena_size,
        alias_size_in_bytes=ba.alias_size,
        constant_size_in_bytes=sum(int(c.nbytes) for c in ba.constants),
    )
