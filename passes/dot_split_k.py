"""Split-K (pass ``dot-split-k``): a product of few rows whose right-hand side streams from
memory is computed as ``parts`` products over equal ranges of its contraction, one per thread,
and their partial results are summed.

    y = x @ w                                      x: [32, 1024], w: [1024, 512]
 -> p = dot_general(reshape(x, [32, 2, 512]), reshape(w, [2, 512, 512]), batch 1/0)
    y = reshape(slice(p, 0)) + reshape(slice(p, 1))

A product of few rows reads each element of its RHS only a few times, so streaming the RHS
from L3 or memory is most of its cost. Split by columns (as the CPU's GEMM splits a product
over its threads), each thread reads half of every row of the RHS; split along the
contraction, each thread reads one contiguous range of whole rows, which streams faster
(8x1024x1024: 34 -> 47 GB/s of RHS on two threads). The partial results then cost one more
pass: their sum, into which the product's epilogue fuses. Two threads of an AVX-512 Xeon
(2 MiB L2 a core), x @ w + b, one process in alternation, us a call before -> after:
32x512x1024 124 -> 122, 32x1024x512 118 -> 114, 16x1024x1024 163 -> 131, 8x1024x1024 122 ->
89, 64x512x1024 250 -> 237, 128x1024x1024 919 -> 877, 128x784x512 333 -> 317, 32x4096x256
305 -> 247; simple_mlp (both products split) 251 -> 236 and 243 -> 233. Where the RHS stays
in L2 or the parts are shallow, the sum costs more than the split saves: 32x512x512 60 -> 63,
8x512x512 20.7 -> 21.7, 16x256x4096 145 -> 180 (parts of 128).

A product is split when (every refusal is in the decision log with its reason):
- the options ask for parts (``Options.dot_split_k``, on cpu only: a compile for the CPU gives
  its thread count) and the module has no layouts yet (the pass runs before layout assignment);
- it is a floating-point product (f32 or f64 operands and result) with one contracting
  dimension and no batch dimensions, in ``@main`` (at top level or in a loop's or a
  conditional's body);
- its contraction divides into the parts, each at least ``MIN_DEPTH`` deep;
- each part's RHS has at least ``Options.dot_split_k_min_rhs_bytes`` (a compile for the CPU:
  3/8 of a core's L2), so it would not stay in cache from call to call;
- the partial results move little next to the RHS: (parts + 1) x rows <= contraction / 2
  (each part writes its rows x columns; the sum reads them all and writes the result).
"""
from __future__ import annotations

from typing import List

from hlo.ir.builder import Builder
from hlo.ir.core import Module, Operation, Region
from hlo.ir.types import TensorType

from .base import MainPass, register_pass
from .util import Labels, control_bodies, erase_ops, replace_values

# The least depth of a part's contraction (16x256x4096 in parts of 128: 145 -> 180 us).
MIN_DEPTH = 256
# (parts + 1) x rows at most this fraction of the contraction.
MAX_ROWS_PER_DEPTH = 0.5
FLOATS = ("f32", "f64")


def _shape_text(dot: Operation) -> str:
    lhs, rhs = dot.operand_types
    return f"{dot.operand_types[0].dtype}[{','.join(map(str, lhs.shape))}] x [{','.join(map(str, rhs.shape))}]"


@register_pass("dot-split-k", "split the contraction of a few-row product whose RHS streams from memory over the threads")
class DotSplitK(MainPass):
    name = "dot-split-k"
    decision_prefix = "dot-split-k"

    def run_main(self, module: Module) -> bool:
        # products anywhere in @main: at top level and in the bodies of loops and conditionals
        # (a scan over time steps runs its few-row products once a step)
        dots = [(region, op) for region in control_bodies(module.main.body) for op in region.ops
                if op.name == "dot_general"]
        if not dots:
            return False
        parts, min_bytes = self.options.dot_split_k_for(self.config.target)
        if parts < 2:
            return False
        if any(d.results[0].type.layout is not None for _, d in dots):
            self.log("not run: the module has layouts (the pass runs before layout assignment)")
            return False
        labels = Labels.for_module(module)
        for _, op in dots:  # labels in program order: dot_general.0 is the first product
            labels(op)
        changed = False
        for region, d in dots:
            why = self._refusal(d, parts, min_bytes)
            if why:
                self.log(f"not split: {labels(d)} ({_shape_text(d)}): {why}")
                continue
            self._rewrite(region, d, parts)
            k = d.operand_types[0].shape[d.attrs["lhs_contracting_dimensions"][0]]
            self.log(f"split {labels(d)} ({_shape_text(d)}) into {parts} products of {k // parts} "
                     f"of its {k} contracting elements, one a thread, then their sum")
            changed = True
        return changed

    def _refusal(self, d: Operation, parts: int, min_bytes: int) -> str:
        a = d.attrs
        lhs, rhs = d.operand_types
        out = d.result_types[0]
        if lhs.dtype.name not in FLOATS or rhs.dtype != lhs.dtype or out.dtype != lhs.dtype:
            return "not an f32 or f64 product"
        if a.get("lhs_batching_dimensions") or a.get("rhs_batching_dimensions"):
            return "it has batch dimensions"
        lc, rc = list(a.get("lhs_contracting_dimensions", ())), list(a.get("rhs_contracting_dimensions", ()))
        if len(lc) != 1 or len(rc) != 1:
            return "it has no contracting dimension or several"
        K = lhs.shape[lc[0]]
        M = lhs.size // max(1, K)
        N = rhs.size // max(1, K)
        if K % parts or K // parts < MIN_DEPTH:
            return f"its contraction ({K}) does not divide into {parts} parts of at least {MIN_DEPTH}"
        part_bytes = K // parts * N * rhs.dtype.itemsize
        if part_bytes < min_bytes:
            return (f"a part's RHS ({part_bytes >> 10} KiB) stays in cache (the least that streams: "
                    f"{min_bytes >> 10} KiB)")
        if (parts + 1) * M > MAX_ROWS_PER_DEPTH * K:
            return (f"its {M} rows: the partial results ({parts} x {M} x {N}) would move more than "
                    f"the RHS saves")
        return ""

    def _rewrite(self, region: Region, d: Operation, parts: int) -> None:
        lhs, rhs = d.operands
        lc, rc = d.attrs["lhs_contracting_dimensions"][0], d.attrs["rhs_contracting_dimensions"][0]
        K = lhs.type.shape[lc]
        out = d.results[0]
        b = Builder(region, d.loc, index=region.ops.index(d) + 1)

        def split(v, dim):   # [.., K, ..] -> [.., parts, K / parts, ..]
            shape = list(v.type.shape)
            shape[dim:dim + 1] = [parts, K // parts]
            return b.value("reshape", [v], result_types=[TensorType(shape, v.type.dtype)])

        p_t = TensorType([parts] + list(out.type.shape), out.type.dtype)
        p = b.value("dot_general", [split(lhs, lc), split(rhs, rc)],
                    attrs={"lhs_batching_dimensions": [lc], "rhs_batching_dimensions": [rc],
                           "lhs_contracting_dimensions": [lc + 1], "rhs_contracting_dimensions": [rc + 1]},
                    result_types=[p_t])
        terms: List = []
        for s in range(parts):
            start = [s] + [0] * out.type.rank
            limit = [s + 1] + list(out.type.shape)
            piece = b.value("slice", [p], attrs={"start_indices": start, "limit_indices": limit,
                                                  "strides": [1] * (out.type.rank + 1)})
            terms.append(b.value("reshape", [piece], result_types=[out.type]))
        total = terms[0]
        for t in terms[1:]:
            total = b.value("add", [total, t])
        replace_values(region, {out: total})
        erase_ops(region, [d])
