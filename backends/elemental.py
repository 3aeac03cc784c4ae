"""The elemental emitter: the LLVM value of a tensor's element at an index.

``ElementalEmitter.at(value, index)`` returns the register value of ``value`` at ``index`` (a
tuple of i64 LLVM values, one per dimension). Values bound to a *source* (a buffer in memory, a
scalar register, a per-row register) are read from it; any other value is computed from its
defining op, pulling its operands in recursively, which is how fused producers end up inlined
into their consumers' loops (XLA's elemental IR emitter idea). Both the CPU backend and the
later CUDA backend drive this class; they differ in loop structure, not in op semantics.

Ops whose element needs a loop (reduce, reduce_window, convolution, dot_general) emit that loop
at the current builder position. Within one element, repeated requests for the same value at
the same index object are answered from a cache (scoped to loop bodies and region bodies).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import llvmlite.ir as ir
import numpy as np

from hlo.ir.core import Region, Value
from hlo.ir.ops import BINARY_ELEMENTWISE, UNARY_ELEMENTWISE
from hlo.ir.types import TensorType
from hlo.ir.types import f32 as F32_T
from hlo.ir.types import f64 as F64_T
from hlo.ir.types import s64 as S64_T

from . import complex_ops, scalar_ops
from .llvm_util import (
    I1,
    I64,
    NSW,
    ModuleContext,
    clamp_i64,
    elem_ptr,
    entry_alloca,
    for_range,
    i64,
    linear_offset,
    load_reg,
    reg_constant,
    reg_type,
    storage_align,
    strides_of,
)
from .scalar_ops import UnsupportedOp

# ------------------------------------------------------------------------------------------
# Sources
# ------------------------------------------------------------------------------------------

class BufferSource:
    """A tensor stored in memory at ``ptr`` with the strides of its (physical) layout."""

    def __init__(self, ptr: ir.Value, ttype: TensorType, align: Optional[int] = None):
        self.ptr = ptr
        self.type = ttype
        self.strides = strides_of(ttype)
        self.align = align

    def read(self, em: "ElementalEmitter", idx) -> ir.Value:
        b = em.b
        if self.type.size == 0:
            return reg_constant(self.type.dtype, 0)
        off = linear_offset(b, idx, self.strides)
        p = elem_ptr(b, self.ptr, self.type.dtype, off)
        return load_reg(b, p, self.type.dtype, storage_align(self.type.dtype))


class RegisterSource:
    """A value held in a register. ``at_index`` (optional): the only index it may be read at
    (the current row of a row-fused kernel); reading it elsewhere is a backend bug."""

    def __init__(self, value: ir.Value, at_index: Optional[Tuple[ir.Value, ...]] = None):
        self.value = value
        self.at_index = at_index

    def read(self, em: "ElementalEmitter", idx) -> ir.Value:
        if self.at_index is not None:
            if len(idx) != len(self.at_index) or any(a is not b for a, b in zip(idx, self.at_index)):
                raise AssertionError("row-level value read outside its row")
        return self.value


class RowCacheSource:
    """One row of a tensor kept in a (stack) buffer by a row kernel: elements of the current row
    only, read at the trailing ``len(inner_shape)`` dimensions of the index."""

    def __init__(self, ptr: ir.Value, inner_shape: Sequence[int], ty: ir.Type):
        self.ptr = ptr
        self.k = len(inner_shape)
        self.strides = [int(np.prod(inner_shape[d + 1:])) for d in range(self.k)]
        self.ty = ty

    def offset(self, b: ir.IRBuilder, idx) -> ir.Value:
        inner = tuple(idx)[len(idx) - self.k:] if self.k else ()
        return linear_offset(b, inner, self.strides)

    def write(self, b: ir.IRBuilder, idx, val: ir.Value) -> None:
        b.store(val, b.gep(self.ptr, [self.offset(b, idx)], inbounds=True, source_etype=self.ty))

    def read(self, em: "ElementalEmitter", idx) -> ir.Value:
        b = em.b
        return b.load(b.gep(self.ptr, [self.offset(b, idx)], inbounds=True, source_etype=self.ty),
                      typ=self.ty)


class _Frame(dict):
    pass


# Ops whose operands are read at the result's own index (when their shapes are the result's).
_SAME_INDEX = frozenset(UNARY_ELEMENTWISE) | frozenset(BINARY_ELEMENTWISE) | {
    "compare", "select", "clamp", "convert", "reduce_precision"}


def _key(v: Value, idx) -> tuple:
    return (id(v),) + tuple(id(i) for i in idx)


# ------------------------------------------------------------------------------------------
# The emitter
# ------------------------------------------------------------------------------------------

REASSOC_OPS = ("fadd", "fmul")


def _float_minmax_body(op) -> Optional[str]:
    """"maximum" / "minimum" if ``op`` is a one-input float reduce whose body is exactly that op
    of its two arguments (the LLVM intrinsic's name), else None."""
    if len(op.operands) != 2 or not op.operands[0].type.dtype.is_float:
        return None
    body = op.regions[0]
    if len(body.ops) != 1 or len(body.outputs) != 1:
        return None
    bop = body.ops[0]
    if bop.name not in ("maximum", "minimum") or body.outputs[0] is not bop.results[0]:
        return None
    if set(bop.operands) != set(body.args) or len(set(bop.operands)) != 2:
        return None
    return bop.name


# Float sums: the error of one accumulator grows with the values it adds (a float32 running sum
# of 2^26 uniform values stalls once its spacing passes the values: 1.6% low on [2^20, 64]).
# Every float sum (a one-input reduce whose body adds its arguments; means, variances, the
# generated dots' contractions) accumulates in blocks of at most SUM_BLOCK values: a block
# starts at -0.0 (the exact additive identity) in the block type (f32 for f32 and the narrower
# floats, which are added without rounding in between: XLA's excess precision; f64 for f64),
# LLVM spreads it over vector lanes, and each block's total is added to a wide accumulator
# (f64) that starts at the init value and is rounded once at the end. The block is whole
# innermost reduced dimensions plus a run of the next one, so a block has more than
# SUM_BLOCK / 2 values (or all of them). Error: at most (SUM_BLOCK + 1) * u * sum(|x|) plus the
# final rounding, u the block type's unit roundoff, whatever the length (the f64 additions of
# the block totals add n / SUM_BLOCK * 2^-53 * sum(|x|)); typically ~sqrt(SUM_BLOCK / lanes) * u.
SUM_BLOCK = 4096


def float_sum_types(op):
    """``(block type, wide type)`` of a one-input reduce whose body adds its two arguments in a
    real float type (see ``SUM_BLOCK``), else None."""
    if op.name != "reduce" or len(op.operands) != 2:
        return None
    et = op.operands[0].type.dtype
    if not et.is_float or op.results[0].dtype != et:
        return None
    body = op.regions[0]
    if len(body.ops) != 1 or len(body.outputs) != 1:
        return None
    bop = body.ops[0]
    if bop.name != "add" or body.outputs[0] is not bop.results[0]:
        return None
    if set(bop.operands) != set(body.args) or len(set(bop.operands)) != 2:
        return None
    return (F64_T if et.bits == 64 else F32_T), F64_T


def block_sum_hooks(b: ir.IRBuilder, blk, blk_ty, wide, wide_ty):
    """``(start_block, end_block)`` for ``blocked_loops`` of a scalar blocked sum: the block's
    accumulator ``blk`` starts at -0.0 (the identity that keeps a sum of -0.0s -0.0), and its
    total is widened and added to the wide accumulator ``wide`` (see ``SUM_BLOCK``)."""
    def start_block():
        b.store(ir.Constant(blk_ty, -0.0), blk)

    def end_block():
        tot = b.load(blk, typ=blk_ty)
        tot = b.fpext(tot, wide_ty) if blk_ty != wide_ty else tot
        b.store(b.fadd(b.load(wide, typ=wide_ty), tot), wide)
    return start_block, end_block


def blocked_loops(b: ir.IRBuilder, levels, block: int, start_block, end_block, element,
                  interleave: Optional[int] = None) -> None:
    """Nested loops over ``levels`` [(key, lo, hi, extent)] (outermost first; ``lo``/``hi`` ints
    or i64 values, ``extent`` an int at least ``hi - lo``) cut into blocks: the innermost levels
    whose extents multiply to at most ``block`` run whole inside a block, with a run of
    ``block // (their product)`` iterations of the next level (the rest of the levels loop
    around the blocks). ``start_block()`` runs before each block, ``end_block()`` after it,
    ``element(ivs)`` once per iteration (``ivs``: key -> induction variable). The innermost
    level gets the vectorizer's ``interleave`` hint."""
    inner = 1
    j = len(levels) - 1
    while j >= 0 and levels[j][3] * inner <= block:
        inner *= levels[j][3]
        j -= 1
    ivs = {}
    last = len(levels) - 1

    def run(k):
        if k == len(levels):
            element(ivs)
            return
        key, lo, hi, _ = levels[k]
        with for_range(b, lo, hi, f"r{key}", interleave=interleave if k == last else None) as i:
            ivs[key] = i
            run(k + 1)

    def outer(k):
        if k < j:
            key, lo, hi, _ = levels[k]
            with for_range(b, lo, hi, f"r{key}") as i:
                ivs[key] = i
                outer(k + 1)
            return
        if j < 0:
            start_block()
            run(0)
            end_block()
            return
        key, lo, hi, _ = levels[j]
        run_len = max(1, block // inner)
        hi_v = hi if isinstance(hi, ir.Value) else i64(hi)
        with for_range(b, lo, hi, f"blk{key}", step=run_len) as j0:
            end = b.add(j0, i64(run_len), flags=NSW)
            end = b.select(b.icmp_signed("<", end, hi_v), end, hi_v)
            start_block()
            with for_range(b, j0, end, f"r{key}",
                           interleave=interleave if j == last else None) as i:
                ivs[key] = i
                run(j + 1)
            end_block()

    outer(0)


class ElementalEmitter:
    def __init__(self, ctx: ModuleContext, builder: ir.IRBuilder, sources: Dict[Value, Any]):
        self.ctx = ctx
        self.b = builder
        self.sources: Dict[Value, Any] = dict(sources)   # each has read(emitter, index)
        self.frames: List[_Frame] = [_Frame()]
        self._keep: List[object] = []  # keeps index objects alive so their ids stay unique
        # the loop vectorizer's interleave hint for the innermost loop of in-place reductions
        # (set by kernels whose reductions are long inner loops: the row kernels)
        self.inner_interleave: Optional[int] = None
        # reduce inputs whose elements are also handed to a sink as the reduction computes them
        # (value -> sink(full index, register value)): row kernels keep an expensive input
        # (softmax's exp) of the current row so the row's outputs read it back instead of
        # computing it again
        self.reduce_input_sinks: Dict[Value, object] = {}
        # reduce ops whose loop also runs a side computation on each iteration (op ->
        # side(full index)): row kernels fold the next row's max into the current row's exp-sum
        # pass (see kernels.emit_row_kernel)
        self.reduce_sides: Dict[object, object] = {}
        # the most values a float sum adds in its block type before the wide total takes them
        # (``SUM_BLOCK``; a GPU thread, which adds them one by one, takes fewer)
        self.sum_block = SUM_BLOCK

    # -- caching -------------------------------------------------------------------------

    def push(self):
        self.frames.append(_Frame())

    def pop(self):
        self.frames.pop()

    def _lookup(self, key):
        for f in reversed(self.frames):
            if key in f:
                return f[key]
        return None

    def _remember(self, v: Value, idx, val):
        self._keep.append(idx)
        self.frames[-1][_key(v, idx)] = val

    # -- public API ----------------------------------------------------------------------

    def at(self, v: Value, idx: Sequence[ir.Value]) -> ir.Value:
        idx = tuple(idx)
        if len(idx) != v.type.rank:
            raise AssertionError(f"index of rank {len(idx)} for {v.type}")
        key = _key(v, idx)
        got = self._lookup(key)
        if got is not None:
            return got
        src = self.sources.get(v)
        if src is not None:
            val = src.read(self, idx)
        else:
            op = v.op
            if op is None:
                raise AssertionError(f"region argument {v} has no source bound")
            if self._same_index(v):
                return self._emit_chain(v, idx)
            val = self._emit(op, v.index, idx)
        self._remember(v, idx, val)
        return val

    def _same_index(self, v: Value) -> bool:
        """``v`` is an elementwise op's result whose operands are read at ``v``'s own index."""
        op = v.op
        return op is not None and op.name in _SAME_INDEX and v not in self.sources and \
            all(o.type.shape == v.type.shape for o in op.operands)

    def _emit_chain(self, v: Value, idx) -> ir.Value:
        """``at(v, idx)`` for an elementwise ``v``, without recursion along elementwise chains:
        the elementwise values ``v`` reads at the same index are emitted first, deepest first,
        in the order recursion would emit them (operand 0's before operand 1's), so each one's
        ``_emit`` finds its elementwise operands cached. A chain of thousands of fused ops costs
        no Python stack; only other ops (movement, reductions) recurse, one level each."""
        stack = [(v, False)]
        while stack:
            u, ready = stack.pop()
            if self._lookup(_key(u, idx)) is not None:
                continue
            if ready:
                self._remember(u, idx, self._emit(u.op, u.index, idx))
                continue
            stack.append((u, True))
            for o in reversed(u.op.operands):
                if self._same_index(o) and self._lookup(_key(o, idx)) is None:
                    stack.append((o, False))
        return self._lookup(_key(v, idx))

    def scalar_region(self, region: Region, args: Sequence[ir.Value], reassoc: bool = False) -> List[ir.Value]:
        """Evaluate a region of scalar ops (a reduce body, comparator...) on register args."""
        saved = {a: self.sources.get(a) for a in region.args}
        for a, v in zip(region.args, args):
            self.sources[a] = RegisterSource(v)
        self.push()
        try:
            outs = [self.at(o, ()) for o in region.outputs]
        finally:
            self.pop()
            for a, s in saved.items():
                if s is None:
                    self.sources.pop(a, None)
                else:
                    self.sources[a] = s
        if reassoc:
            for o in outs:
                if isinstance(o, ir.Instruction) and o.opname in REASSOC_OPS:
                    if "reassoc" not in o.flags:
                        o.flags.append("reassoc")
        return outs

    # -- op dispatch ---------------------------------------------------------------------

    def _emit(self, op, result_index: int, idx) -> ir.Value:
        name = op.name
        fn = getattr(self, "_op_" + name, None)
        if fn is not None:
            return fn(op, result_index, idx)
        from hlo.ir.ops import BINARY_ELEMENTWISE, UNARY_ELEMENTWISE
        if name in UNARY_ELEMENTWISE or name == "is_finite":
            x = self.at(op.operands[0], idx)
            return scalar_ops.unary(self.ctx, self.b, name, op.operands[0].dtype, x)
        if name in BINARY_ELEMENTWISE:
            x = self.at(op.operands[0], idx)
            y = self.at(op.operands[1], idx)
            return scalar_ops.binary(self.ctx, self.b, name, op.operands[0].dtype, x, y)
        raise UnsupportedOp(f"'{name}' cannot be computed element by element")

    # -- elementwise with special operands ----------------------------------------------

    def _op_compare(self, op, ri, idx):
        x = self.at(op.operands[0], idx)
        y = self.at(op.operands[1], idx)
        return scalar_ops.compare(self.ctx, self.b, op.attrs["comparison_direction"],
                                  op.attrs.get("compare_type"), op.operands[0].dtype, x, y)

    def _op_select(self, op, ri, idx):
        p, a, c = op.operands
        pv = self.at(p, idx if p.type.rank else ())
        return self.b.select(pv, self.at(a, idx), self.at(c, idx))

    def _op_clamp(self, op, ri, idx):
        lo, x, hi = op.operands
        xv = self.at(x, idx)
        lov = self.at(lo, idx if lo.type.rank else ())
        hiv = self.at(hi, idx if hi.type.rank else ())
        et = x.dtype
        m = scalar_ops.binary(self.ctx, self.b, "maximum", et, xv, lov)
        return scalar_ops.binary(self.ctx, self.b, "minimum", et, m, hiv)

    def _op_convert(self, op, ri, idx):
        x = self.at(op.operands[0], idx)
        return scalar_ops.convert(self.ctx, self.b, x, op.operands[0].dtype, op.results[0].dtype)

    def _op_complex(self, op, ri, idx):
        re_ = self.at(op.operands[0], idx)
        im = self.at(op.operands[1], idx)
        return complex_ops.make(self.b, reg_type(op.results[0].dtype), re_, im)

    def _op_real(self, op, ri, idx):
        x = self.at(op.operands[0], idx)
        return self.b.extract_value(x, 0) if op.operands[0].dtype.is_complex else x

    def _op_imag(self, op, ri, idx):
        x = self.at(op.operands[0], idx)
        if op.operands[0].dtype.is_complex:
            return self.b.extract_value(x, 1)
        return ir.Constant(x.type, 0.0)

    def _op_reduce_precision(self, op, ri, idx):
        x = self.at(op.operands[0], idx)
        return scalar_ops.reduce_precision(self.ctx, self.b, x, op.operands[0].dtype,
                                           op.attrs["exponent_bits"], op.attrs["mantissa_bits"])

    def _op_bitcast_convert(self, op, ri, idx):
        from .llvm_util import bits_to_reg, reg_to_bits
        b = self.b
        x_t, r_t = op.operands[0].type, op.results[0].type
        xe, re_ = x_t.dtype, r_t.dtype
        xb, rb = xe.bits, re_.bits  # pred counts 1 bit, as in StableHLO
        if xb == rb:
            bits = reg_to_bits(b, self.at(op.operands[0], idx), xe)
            return bits_to_reg(b, bits, re_)
        rty = ir.IntType(rb)
        if xb > rb:  # one operand element -> the last result dimension's parts, little end first
            bits = reg_to_bits(b, self.at(op.operands[0], idx[:-1]), xe)
            sh = b.mul(idx[-1], i64(rb))
            part = b.lshr(bits, b.trunc(sh, bits.type) if bits.type.width < 64 else
                          (b.zext(sh, bits.type) if bits.type.width > 64 else sh))
            return bits_to_reg(b, b.trunc(part, rty), re_)
        acc = ir.Constant(rty, 0)
        for k in range(rb // xb):
            part = reg_to_bits(b, self.at(op.operands[0], tuple(idx) + (i64(k),)), xe)
            acc = b.or_(acc, b.shl(b.zext(part, rty), ir.Constant(rty, k * xb)))
        return bits_to_reg(b, acc, re_)

    # -- leaves --------------------------------------------------------------------------

    def _op_constant(self, op, ri, idx):
        v = op.attrs["value"]
        et = op.results[0].dtype
        flat = v.reshape(-1)
        if flat.size == 0:
            return reg_constant(et, 0)
        if (flat == flat[0]).all() or (et.is_float and np.isnan(flat.astype(np.float64)).all()
                                      and len(set(flat.view(f"u{et.itemsize}").tolist())) == 1):
            return reg_constant(et, flat[0])
        g = self.ctx.constant_global(np.ascontiguousarray(v))
        src = BufferSource(g, TensorType(v.shape, et))
        return src.read(self, idx)

    def _op_iota(self, op, ri, idx):
        i = idx[op.attrs["iota_dimension"]]
        return scalar_ops.convert(self.ctx, self.b, i, S64_T, op.results[0].dtype)

    # -- pure re-indexing ----------------------------------------------------------------

    def _op_broadcast_in_dim(self, op, ri, idx):
        x = op.operands[0]
        dims = op.attrs["broadcast_dimensions"]
        oidx = tuple(i64(0) if x.shape[k] == 1 and op.results[0].shape[d] != 1 else idx[d]
                     for k, d in enumerate(dims))
        return self.at(x, oidx)

    def _op_reshape(self, op, ri, idx):
        x = op.operands[0]
        return self.at(x, reshape_index(self.b, idx, op.results[0].shape, x.shape))

    def _op_transpose(self, op, ri, idx):
        perm = op.attrs["permutation"]
        oidx = [None] * len(perm)
        for i, p in enumerate(perm):
            oidx[p] = idx[i]
        return self.at(op.operands[0], oidx)

    def _op_reverse(self, op, ri, idx):
        x = op.operands[0]
        dims = set(op.attrs["dimensions"])
        oidx = [self.b.sub(i64(x.shape[d] - 1), i) if d in dims else i for d, i in enumerate(idx)]
        return self.at(x, oidx)

    def _op_slice(self, op, ri, idx):
        x = op.operands[0]
        st = op.attrs["start_indices"]
        sd = op.attrs.get("strides") or (1,) * x.type.rank
        b = self.b
        oidx = []
        for d, i in enumerate(idx):
            v = i if sd[d] == 1 else b.mul(i, i64(sd[d]), flags=NSW)
            oidx.append(v if st[d] == 0 else b.add(v, i64(st[d]), flags=NSW))
        return self.at(x, oidx)

    def _start(self, v: Value) -> ir.Value:
        """A start-index scalar as i64 (sign- or zero-extended)."""
        s = self.at(v, ())
        if s.type.width < 64:
            return self.b.sext(s, I64) if v.dtype.is_signed else self.b.zext(s, I64)
        return s

    def _op_dynamic_slice(self, op, ri, idx):
        x = op.operands[0]
        sizes = op.attrs["slice_sizes"]
        b = self.b
        oidx = []
        for d, i in enumerate(idx):
            s = clamp_i64(b, self._start(op.operands[1 + d]), 0, x.shape[d] - sizes[d])
            oidx.append(b.add(s, i, flags=NSW))
        return self.at(x, oidx)

    def _op_dynamic_update_slice(self, op, ri, idx):
        x, u = op.operands[0], op.operands[1]
        if u.type.size == 0:
            return self.at(x, idx)
        b = self.b
        inside = ir.Constant(I1, 1)
        uidx = []
        for d, i in enumerate(idx):
            s = clamp_i64(b, self._start(op.operands[2 + d]), 0, x.shape[d] - u.shape[d])
            rel = b.sub(i, s)
            ok = b.and_(b.icmp_signed(">=", rel, i64(0)), b.icmp_signed("<", rel, i64(u.shape[d])))
            inside = b.and_(inside, ok)
            uidx.append(clamp_i64(b, rel, 0, u.shape[d] - 1))
        return b.select(inside, self.at(u, uidx), self.at(x, idx))

    def _op_concatenate(self, op, ri, idx):
        d = op.attrs["dimension"]
        b = self.b
        parts = [(v, v.shape[d]) for v in op.operands if v.shape[d] > 0]
        off = 0
        offs = []
        for v, n in parts:
            offs.append(off)
            off += n
        result = None
        for (v, n), o in reversed(list(zip(parts, offs))):
            local = b.sub(idx[d], i64(o)) if o else idx[d]
            local = clamp_i64(b, local, 0, n - 1)
            val = self.at(v, tuple(idx[:d]) + (local,) + tuple(idx[d + 1:]))
            if result is None:
                result = val
            else:
                result = b.select(b.icmp_signed("<", idx[d], i64(o + n)), val, result)
        return result

    def _op_pad(self, op, ri, idx):
        x, pv = op.operands
        lo, it = op.attrs["edge_padding_low"], op.attrs["interior_padding"]
        b = self.b
        pad_val = self.at(pv, ())
        if x.type.size == 0:
            return pad_val
        valid = ir.Constant(I1, 1)
        oidx = []
        for d, i in enumerate(idx):
            n = x.shape[d]
            t = b.sub(i, i64(lo[d])) if lo[d] else i
            ok = b.icmp_signed(">=", t, i64(0))
            if it[d]:
                q = b.sdiv(t, i64(it[d] + 1))
                r = b.srem(t, i64(it[d] + 1))
                ok = b.and_(ok, b.icmp_signed("==", r, i64(0)))
            else:
                q = t
            ok = b.and_(ok, b.icmp_signed("<", q, i64(n)))
            valid = b.and_(valid, ok)
            oidx.append(clamp_i64(b, q, 0, n - 1))
        return b.select(valid, self.at(x, oidx), pad_val)

    def _op_gather(self, op, ri, idx):
        x, si = op.operands
        a = op.attrs
        b = self.b
        off = tuple(a.get("offset_dims", ()))
        col = tuple(a.get("collapsed_slice_dims", ()))
        ob = tuple(a.get("operand_batching_dims", ()))
        ib = tuple(a.get("start_indices_batching_dims", ()))
        sim = tuple(a["start_index_map"])
        ivd = a["index_vector_dim"]
        ss = a["slice_sizes"]
        rank = op.results[0].type.rank
        batch_dims = [d for d in range(rank) if d not in off]
        batch_index = [idx[d] for d in batch_dims]
        full = [i64(0)] * x.type.rank
        # start indices
        for k, od in enumerate(sim):
            sidx = list(batch_index)
            if ivd < si.type.rank:
                sidx.insert(ivd, i64(k))
            s = self.at(si, sidx)
            s = b.sext(s, I64) if s.type.width < 64 and si.dtype.is_signed else (
                b.zext(s, I64) if s.type.width < 64 else s)
            full[od] = clamp_i64(b, s, 0, x.shape[od] - ss[od])
        # batching dims
        for odim, sdim in zip(ob, ib):
            pos = sdim if sdim < ivd else sdim - 1
            full[odim] = b.add(full[odim], batch_index[pos])
        # offsets
        offset_operand_dims = [d for d in range(x.type.rank) if d not in col and d not in ob]
        for k, od in enumerate(offset_operand_dims):
            full[od] = b.add(full[od], idx[off[k]])
        return self.at(x, full)

    # -- ops with an inner loop ----------------------------------------------------------

    def _reduce_loop(self, dims_extents, body_fn):
        """Nested loops over ``dims_extents`` [(dim, extent)], outermost first; ``body_fn(ivs)``
        runs in the innermost body with a dict dim -> induction variable."""
        ivs = {}

        def rec(k):
            if k == len(dims_extents):
                body_fn(ivs)
                return
            d, n = dims_extents[k]
            last = k == len(dims_extents) - 1
            with for_range(self.b, 0, n, name=f"r{d}",
                           interleave=self.inner_interleave if last else None) as i:
                ivs[d] = i
                rec(k + 1)

        self.push()
        try:
            rec(0)
        finally:
            self.pop()

    def _accumulators(self, inits):
        accs = []
        for v in inits:
            slot = entry_alloca(self.b, v.type)
            self.b.store(v, slot)
            accs.append(slot)
        return accs

    def _op_reduce(self, op, ri, idx):
        n = len(op.operands) // 2
        inputs, inits = op.operands[:n], op.operands[n:]
        dims = op.attrs["dimensions"]
        in_t = inputs[0].type
        body = op.regions[0]
        b = self.b
        init_vals = [self.at(v, ()) for v in inits]
        accs = self._accumulators(init_vals)
        kept = [d for d in range(in_t.rank) if d not in dims]
        # Loop over reduced dims in physical order (major first) so the innermost is contiguous.
        order = [d for d in reversed(in_t.minor_to_major) if d in dims]
        loops = [(d, in_t.shape[d]) for d in order]
        minmax = _float_minmax_body(op)
        sum_types = float_sum_types(op)
        if in_t.size > 0 and sum_types is not None:
            self._blocked_sum(op, idx, init_vals[0], accs[0], kept, dims, loops, sum_types)
        elif in_t.size > 0:
            def body_fn(ivs, exact=True, sinks=True):
                full = [None] * in_t.rank
                for k, d in enumerate(kept):
                    full[d] = idx[k]
                for d in dims:
                    full[d] = ivs[d]
                xs = [self.at(v, full) for v in inputs]
                for v, x in zip(inputs, xs):
                    sink = self.reduce_input_sinks.get(v) if sinks else None
                    if sink is not None:
                        sink(full, x)
                side = self.reduce_sides.get(op) if sinks else None
                if side is not None:
                    side(full)
                cur = [b.load(a, typ=t.type) for a, t in zip(accs, init_vals)]
                if exact:
                    new = self.scalar_region(body, cur + xs, reassoc=True)
                else:
                    new = [self.ctx.math.call(self.ctx, b, minmax, [cur[0], xs[0]],
                                              fastmath=("nsz", "reassoc"))]
                for a, v in zip(accs, new):
                    b.store(v, a)
            self._reduce_loop(loops, lambda ivs: body_fn(ivs, exact=minmax is None))
            if minmax is not None:
                # ``nsz`` lets a vectorized max/min skip ordering -0 below +0 (3 instructions a
                # vector instead of 10 on AVX2); only a zero result can have the wrong sign, and
                # then the reduction runs again exactly (rare: the extreme itself is a zero).
                zero = b.fcmp_ordered("==", b.load(accs[0], typ=init_vals[0].type),
                                      ir.Constant(init_vals[0].type, 0.0))
                with b.if_then(zero, likely=False):
                    b.store(init_vals[0], accs[0])
                    self._reduce_loop(loops, lambda ivs: body_fn(ivs, exact=True, sinks=False))
        outs = [b.load(a, typ=t.type) for a, t in zip(accs, init_vals)]
        for k, r in enumerate(op.results):
            self._remember(r, idx, outs[k])
        return outs[ri]

    def _blocked_sum(self, op, idx, init_val, acc, kept, dims, loops, sum_types) -> None:
        """A float sum (``float_sum_types``) into ``acc`` (which holds ``init_val``): blocks of
        at most SUM_BLOCK values in the block type, their totals added in the wide type."""
        b = self.b
        v = op.operands[0]
        in_t = v.type
        et = in_t.dtype
        blk_et, wide_et = sum_types
        blk_ty, wide_ty = reg_type(blk_et), reg_type(wide_et)
        wide = entry_alloca(b, wide_ty)
        blk = entry_alloca(b, blk_ty)
        b.store(scalar_ops.convert(self.ctx, b, init_val, et, wide_et), wide)
        sink = self.reduce_input_sinks.get(v)
        side = self.reduce_sides.get(op)

        def element(ivs):
            full = [None] * in_t.rank
            for k, d in enumerate(kept):
                full[d] = idx[k]
            for d in dims:
                full[d] = ivs[d]
            self.push()
            x = self.at(v, full)
            if sink is not None:
                sink(full, x)
            if side is not None:
                side(full)
            # narrow floats' registers are f32 already: no rounding between the additions
            x = b.fpext(x, blk_ty) if x.type != blk_ty else x
            b.store(b.fadd(b.load(blk, typ=blk_ty), x, flags=("reassoc",)), blk)
            self.pop()

        start_block, end_block = block_sum_hooks(b, blk, blk_ty, wide, wide_ty)

        levels = [(d, 0, n, n) for d, n in loops]
        self.push()
        try:
            blocked_loops(b, levels, self.sum_block, start_block, end_block, element,
                          interleave=self.inner_interleave)
        finally:
            self.pop()
        b.store(scalar_ops.convert(self.ctx, b, b.load(wide, typ=wide_ty), wide_et, et), acc)

    def _op_reduce_window(self, op, ri, idx):
        n = len(op.operands) // 2
        inputs, inits = op.operands[:n], op.operands[n:]
        in_t = inputs[0].type
        r = in_t.rank
        a = op.attrs
        wd = a["window_dimensions"]
        ws = a.get("window_strides") or (1,) * r
        bd = a.get("base_dilations") or (1,) * r
        wdl = a.get("window_dilations") or (1,) * r
        pad = a.get("padding") or ((0, 0),) * r
        b = self.b
        body = op.regions[0]
        init_vals = [self.at(v, ()) for v in inits]
        accs = self._accumulators(init_vals)
        loops = [(d, wd[d]) for d in range(r)]

        def body_fn(ivs):
            valid = ir.Constant(I1, 1)
            full = []
            for d in range(r):
                # position in the padded, base-dilated input
                p = b.add(b.mul(idx[d], i64(ws[d])), b.mul(ivs[d], i64(wdl[d])))
                p = b.sub(p, i64(pad[d][0]))
                ok = b.icmp_signed(">=", p, i64(0))
                if bd[d] > 1:
                    ok = b.and_(ok, b.icmp_signed("==", b.srem(p, i64(bd[d])), i64(0)))
                    q = b.sdiv(p, i64(bd[d]))
                else:
                    q = p
                ok = b.and_(ok, b.icmp_signed("<", q, i64(in_t.shape[d])))
                valid = b.and_(valid, ok)
                full.append(clamp_i64(b, q, 0, max(in_t.shape[d] - 1, 0)))
            if in_t.size > 0:
                xs = [b.select(valid, self.at(v, full), iv) for v, iv in zip(inputs, init_vals)]
            else:
                xs = list(init_vals)
            cur = [b.load(acc, typ=t.type) for acc, t in zip(accs, init_vals)]
            new = self.scalar_region(body, cur + xs)
            for acc, v in zip(accs, new):
                b.store(v, acc)

        self._reduce_loop(loops, body_fn)
        outs = [b.load(acc, typ=t.type) for acc, t in zip(accs, init_vals)]
        for k, res in enumerate(op.results):
            self._remember(res, idx, outs[k])
        return outs[ri]

    def _mac(self, acc_et, accs, x, y, xe):
        """acc += convert(x) * convert(y) in the accumulator type."""
        b = self.b
        xa = scalar_ops.convert(self.ctx, b, x, xe, acc_et)
        ya = scalar_ops.convert(self.ctx, b, y, xe, acc_et)
        cur = b.load(accs, typ=xa.type)
        if acc_et.is_complex:
            s = scalar_ops.binary(self.ctx, b, "add", acc_et, cur,
                                  scalar_ops.binary(self.ctx, b, "multiply", acc_et, xa, ya))
        elif acc_et.is_float:
            prod = b.fmul(xa, ya)
            s = b.fadd(cur, prod, flags=("reassoc", "contract"))
            prod.flags.append("contract")
        elif acc_et.is_pred:
            s = b.or_(cur, b.and_(xa, ya))
        else:
            s = b.add(cur, b.mul(xa, ya))
        b.store(s, accs)

    @staticmethod
    def accumulator_type(et):
        """Dot/convolution accumulate f16/bf16 and the narrower floats in f32, everything else
        in its own type."""
        from hlo.ir.types import f32
        return f32 if et.is_narrow_float else et

    def _op_dot_general(self, op, ri, idx):
        lhs, rhs = op.operands
        a = op.attrs
        lb, rb = tuple(a.get("lhs_batching_dimensions", ())), tuple(a.get("rhs_batching_dimensions", ()))
        lc, rc = tuple(a.get("lhs_contracting_dimensions", ())), tuple(a.get("rhs_contracting_dimensions", ()))
        out_et = op.results[0].dtype
        acc_et = self.accumulator_type(out_et)
        b = self.b
        lfree = [d for d in range(lhs.type.rank) if d not in lb and d not in lc]
        rfree = [d for d in range(rhs.type.rank) if d not in rb and d not in rc]
        nb = len(lb)
        li = [None] * lhs.type.rank
        rii = [None] * rhs.type.rank
        for k in range(nb):
            li[lb[k]] = idx[k]
            rii[rb[k]] = idx[k]
        for k, d in enumerate(lfree):
            li[d] = idx[nb + k]
        for k, d in enumerate(rfree):
            rii[d] = idx[nb + len(lfree) + k]
        acc = entry_alloca(b, reg_type(acc_et))
        b.store(reg_constant(acc_et, 0), acc)
        loops = [(k, lhs.shape[lc[k]]) for k in range(len(lc))]

        def body_fn(ivs):
            l2, r2 = list(li), list(rii)
            for k in range(len(lc)):
                l2[lc[k]] = ivs[k]
                r2[rc[k]] = ivs[k]
            self.push()
            self._mac(acc_et, acc, self.at(lhs, l2), self.at(rhs, r2), lhs.dtype)
            self.pop()

        if not acc_et.is_float:
            self._reduce_loop(loops, body_fn)
            v = b.load(acc, typ=reg_type(acc_et))
            return scalar_ops.convert(self.ctx, b, v, acc_et, out_et)
        # a float contraction sums in blocks, as a float reduce does (``SUM_BLOCK``)
        acc_ty, wide_ty = reg_type(acc_et), reg_type(F64_T)
        wide = entry_alloca(b, wide_ty)
        b.store(ir.Constant(wide_ty, 0.0), wide)

        start_block, end_block = block_sum_hooks(b, acc, acc_ty, wide, wide_ty)

        self.push()
        try:
            blocked_loops(b, [(k, 0, n, n) for k, n in loops], self.sum_block, start_block, end_block,
                          body_fn, interleave=self.inner_interleave)
        finally:
            self.pop()
        return scalar_ops.convert(self.ctx, b, b.load(wide, typ=wide_ty), F64_T, out_et)

    def _op_convolution(self, op, ri, idx):
        lhs, rhs = op.operands
        a = op.attrs
        nsp = lhs.type.rank - 2
        ws = a.get("window_strides") or (1,) * nsp
        pad = a.get("padding") or ((0, 0),) * nsp
        ld = a.get("lhs_dilation") or (1,) * nsp
        rd = a.get("rhs_dilation") or (1,) * nsp
        rev = a.get("window_reversal") or (False,) * nsp
        ib, ifd, isp = a["input_batch_dimension"], a["input_feature_dimension"], a["input_spatial_dimensions"]
        ki, ko, ksp = a["kernel_input_feature_dimension"], a["kernel_output_feature_dimension"], a["kernel_spatial_dimensions"]
        obd, ofd, osp = a["output_batch_dimension"], a["output_feature_dimension"], a["output_spatial_dimensions"]
        fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
        out_et = op.results[0].dtype
        acc_et = self.accumulator_type(out_et)
        b = self.b
        c_out = rhs.shape[ko]
        kin = rhs.shape[ki]
        n_out = op.results[0].shape[obd]
        o_b, o_f = idx[obd], idx[ofd]
        # feature groups: output feature f uses input features [g*kin, (g+1)*kin)
        if fgc > 1:
            g = b.sdiv(o_f, i64(c_out // fgc))
            in_feat_base = b.mul(g, i64(kin))
        else:
            in_feat_base = i64(0)
        if bgc > 1:
            g = b.sdiv(o_f, i64(c_out // bgc))
            in_batch = b.add(b.mul(g, i64(n_out)), o_b)
        else:
            in_batch = o_b
        acc = entry_alloca(b, reg_type(acc_et))
        b.store(reg_constant(acc_et, 0), acc)
        if lhs.type.size == 0 or rhs.type.size == 0:
            return scalar_ops.convert(self.ctx, b, b.load(acc, typ=reg_type(acc_et)), acc_et, out_et)
        loops = [("c", kin)] + [(s, rhs.shape[ksp[s]]) for s in range(nsp)]

        def body_fn(ivs):
            valid = ir.Constant(I1, 1)
            li = [None] * lhs.type.rank
            kidx = [None] * rhs.type.rank
            li[ib] = in_batch
            li[ifd] = b.add(in_feat_base, ivs["c"])
            kidx[ki] = ivs["c"]
            kidx[ko] = o_f
            for s in range(nsp):
                k = ivs[s]
                ksize = rhs.shape[ksp[s]]
                kidx[ksp[s]] = b.sub(i64(ksize - 1), k) if rev[s] else k
                p = b.add(b.mul(idx[osp[s]], i64(ws[s])), b.mul(k, i64(rd[s])))
                p = b.sub(p, i64(pad[s][0]))
                ok = b.icmp_signed(">=", p, i64(0))
                if ld[s] > 1:
                    ok = b.and_(ok, b.icmp_signed("==", b.srem(p, i64(ld[s])), i64(0)))
                    q = b.sdiv(p, i64(ld[s]))
                else:
                    q = p
                n = lhs.shape[isp[s]]
                ok = b.and_(ok, b.icmp_signed("<", q, i64(n)))
                valid = b.and_(valid, ok)
                li[isp[s]] = clamp_i64(b, q, 0, n - 1)
            x = self.at(lhs, li)
            zero = reg_constant(lhs.dtype, 0)
            x = b.select(valid, x, zero)
            self._mac(acc_et, acc, x, self.at(rhs, kidx), lhs.dtype)

        self._reduce_loop(loops, body_fn)
        v = b.load(acc, typ=reg_type(acc_et))
        return scalar_ops.convert(self.ctx, b, v, acc_et, out_et)


def reshape_index(b: ir.IRBuilder, idx, out_shape, in_shape):
    """Map a result index of a reshape to the operand index (row-major logical order).

    Reshapes that only insert or drop unit dimensions pass the index values through unchanged
    (so per-row values stay recognizable); others linearize and split."""
    out_nz = [(i, s) for i, s in enumerate(out_shape) if s != 1]
    in_nz = [(i, s) for i, s in enumerate(in_shape) if s != 1]
    if [s for _, s in out_nz] == [s for _, s in in_nz]:
        res = [i64(0)] * len(in_shape)
        for (oi, _), (ii, _) in zip(out_nz, in_nz):
            res[ii] = idx[oi]
        return tuple(res)
    lin = None
    for i, s in zip(idx, out_shape):
        lin = i if lin is None else b.add(b.mul(lin, i64(s), flags=NSW), i, flags=NSW)
    if lin is None:
        lin = i64(0)
    res = []
    rem = lin
    for k in range(len(in_shape) - 1, -1, -1):
        s = in_shape[k]
        if k == 0:
            res.append(rem)
        elif s == 1:
            res.append(i64(0))
        else:
            res.append(b.urem(rem, i64(s)))
            rem = b.udiv(rem, i64(s))
    return tuple(reversed(res))


def elemental_ops(math) -> frozenset:
    """The ops ``ElementalEmitter`` computes element by element, read from its dispatch: those
    with an ``_op_<name>`` method, and the elementwise arithmetic ops (``UNARY_ELEMENTWISE`` /
    ``BINARY_ELEMENTWISE`` of the op table) that ``scalar_ops`` emits for every element type the
    op accepts with the target's math policy ``math``, tried on a scratch function (an op it
    raises ``UnsupportedOp`` for is left out). Backends report these in their ``lowered_ops()``; the op table's completeness test uses it."""
    from hlo.ir import ops as op_table
    from hlo.ir.types import ALL_ELEMENT_TYPES
    out = {n[len("_op_"):] for n in dir(ElementalEmitter) if n.startswith("_op_")}
    ctx = ModuleContext("elemental_ops", math=math)
    for name in op_table.UNARY_ELEMENTWISE + op_table.BINARY_ELEMENTWISE:
        if name in out:
            continue
        d = op_table.OPS[name]
        accepts = op_table.TYPE_CLASSES[d.element_types]
        try:
            for et in ALL_ELEMENT_TYPES:
                if not accepts(et):
                    continue
                ty = reg_type(et)
                fn = ir.Function(ctx.module, ir.FunctionType(ty, [ty] * d.num_operands),
                                 name=ctx.unique(f"{name}_{et.name}"))
                b = ir.IRBuilder(fn.append_basic_block())
                if d.num_operands == 1:
                    scalar_ops.unary(ctx, b, name, et, fn.args[0])
                else:
                    scalar_ops.binary(ctx, b, name, et, *fn.args)
        except UnsupportedOp:
            continue
        out.add(name)
    return frozenset(out)
