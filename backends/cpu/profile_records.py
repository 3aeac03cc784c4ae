"""What a profiled CPU build reports per timed step (``compile(optimized, profile=True)``):
the records of the manifest's ``profile`` entry, one per counter slot of the program
(``entry.timed_steps`` order), which the runtime turns into times (``hlo.runtime.cpu.profile``).

A record names the step (its kernel, ``copy`` or ``host_call#N``), the op it was lowered from
(``op``: a fusion's kind and name, or the op's name, then its result types; empty for the copies
of results that no op made; ``value``: that op's first result as the optimized IR prints it,
``%3``, and ``loc``: its user's ``file:line``, where it has them), the step's own description (``what``), the control flow around
it (``where``: '' at the top level, ``while0.body``, ...) and, for a product kernel, the FLOPs
of one run (``2*B*M*K*N`` of its floating-point ``dot_general``; 0 for an integer one), the
product's ``gemm`` shape ``[B, M, K, N]`` and its operands' ``dtype``, and ``split_sum`` for a
kernel that sums a product's partial results (``split_sum_of``: the product split along its
contraction by pass ``dot-split-k``; the sum carries what was the product's epilogue, so its
time counts as the product's, ``hlo.runtime.cpu.profile.Profile.product_gflops``). A product kernel is
a kernel the CPU's ``dot`` lowering emits for the matrix product itself (``product_kernels``:
the ``gemm`` family; not the loops that copy its operands into a canonical form or its result
out of one, which do no arithmetic of the product).
"""
from __future__ import annotations

from math import prod
from typing import Dict, List

from hlo.ir.core import Operation
from hlo.runtime.steps import Copy, HostCall, KernelCall

PRODUCT_KERNEL_PREFIX = "k.gemm"  # KernelBuilder names "gemm", "gemm_loop", "gemm_tiled"


def gemm_shape(dot: Operation) -> tuple:
    """(B, M, K, N) of a dot_general: batch, lhs free, contracting and rhs free sizes."""
    lhs, rhs = dot.operands
    a = dot.attrs
    lb, rb = list(a.get("lhs_batching_dimensions", ())), list(a.get("rhs_batching_dimensions", ()))
    lc, rc = list(a.get("lhs_contracting_dimensions", ())), list(a.get("rhs_contracting_dimensions", ()))
    lfree = [d for d in range(lhs.type.rank) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.type.rank) if d not in rb and d not in rc]
    size = lambda v, ds: prod(v.type.shape[d] for d in ds)
    return size(lhs, lb), size(lhs, lfree), size(lhs, lc), size(rhs, rfree)


def dot_flops(dot: Operation) -> int:
    """2*B*M*K*N of a floating-point dot_general (0 for other element types)."""
    if not dot.operands[0].dtype.is_float:
        return 0
    return 2 * prod(gemm_shape(dot))


def product_kernels(new_steps, dot: Operation) -> Dict[int, Operation]:
    """id(step) -> ``dot`` for the product kernels among the steps its lowering appended."""
    return {id(s): dot for s in new_steps
            if isinstance(s, KernelCall) and s.name.startswith(PRODUCT_KERNEL_PREFIX)}


def describe_op(op: Operation) -> str:
    """``fusion output output_fusion.5 -> f32[128,512]`` / ``reduce -> f32[512]``."""
    what = op.name
    if op.name == "fusion":
        what = f"fusion {op.attrs.get('kind', 'loop')} {op.attrs.get('name', '')}".rstrip()
    return f"{what} -> {', '.join(str(r.type) for r in op.results)}"


def split_sum_of(op: Operation, partials) -> bool:
    """Whether fusion ``op`` sums a product's partial results: it reads a value of
    ``partials`` (the results of product kernels' ops), of S >= 2 parts along its first
    dimension, only through one-index-wide slices of that dimension, one for every part."""
    if op is None or op.name != "fusion" or not op.regions:
        return False
    body = op.regions[0]
    for arg, v in zip(body.args, op.operands):
        if v not in partials or v.type.rank < 2 or v.type.shape[0] < 2:
            continue
        users = [u for u in body.walk() if any(x is arg for x in u.operands)]
        parts = set()
        for u in users:
            a = u.attrs
            if (u.name != "slice" or a["limit_indices"][0] - a["start_indices"][0] != 1
                    or any(a["start_indices"][1:]) or list(a["limit_indices"][1:]) != list(v.type.shape[1:])
                    or any(x != 1 for x in a.get("strides") or ())):
                break
            parts.add(a["start_indices"][0])
        else:
            if parts == set(range(v.type.shape[0])):
                return True
    return False


def profile_steps(timed: list, origin: Dict[int, Operation], products: Dict[int, Operation],
                  names: Dict = None) -> List[dict]:
    """The manifest's records for ``timed`` (``entry.timed_steps``: (step, where) pairs), in
    slot order. ``names``: the optimized module's printed value names
    (``hlo.ir.printer.value_names(main)``): a record then has the op's ``value`` (``%3``) and
    the user's line ``loc``, as the optimized IR prints them."""
    out = []
    partials = {v for s, _ in timed if id(s) in products and origin.get(id(s)) is not None
                for v in origin[id(s)].results}
    for s, where in timed:
        op = origin.get(id(s))
        if isinstance(s, KernelCall):
            name, what = s.name, s.what
        elif isinstance(s, Copy):
            name, what = "copy", f"{s.src} -> {s.dst} ({s.nbytes} bytes)"
        elif isinstance(s, HostCall):
            name, what = f"host_call#{s.site}", s.what
        else:  # pragma: no cover - timed_steps lists only these
            raise TypeError(f"not a timed step: {s!r}")
        rec = {"name": name, "op": describe_op(op) if op is not None else "", "what": what,
               "where": where, "flops": 0}
        if op is not None and names and op.results and op.results[0] in names:
            rec["value"] = names[op.results[0]]
        if op is not None and op.loc is not None:
            rec["loc"] = str(op.loc)
        dot = products.get(id(s))
        if dot is not None:
            rec.update(flops=dot_flops(dot), gemm=list(gemm_shape(dot)), dtype=dot.operands[0].dtype.name)
        elif isinstance(s, KernelCall) and split_sum_of(op, partials):
            rec["split_sum"] = True
        out.append(rec)
    return out
