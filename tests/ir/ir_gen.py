"""A hypothesis-driven generator of random valid modules, for the text-form tests.

``build_module(draw)`` makes a module with several functions (private helpers called from
``@main``), ops of most kinds (elementwise, data movement, reduce, sort, while, if, case, fusion
with regions that read enclosing values, dot_general, call), every element type, rank-0 and
zero-sized shapes, constants with NaNs (any payload), infinities and -0.0, large constants
(printed as hex), layouts, source locations and string attributes with escapes. Every op is made
through ``Builder``, which verifies it; an op the draw makes invalid is simply not added.
"""
from __future__ import annotations

from typing import List

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from hlo.ir import (
    ALL_ELEMENT_TYPES,
    Builder,
    Function,
    Location,
    Module,
    Region,
    TensorType,
    VerifyError,
    scalar,
)
from hlo.ir.ops import BINARY_ELEMENTWISE, COMPARE_TYPES, COMPARISON_DIRECTIONS, UNARY_ELEMENTWISE

ETYPES = list(ALL_ELEMENT_TYPES)
FILES = ["model.py", "a b/c.py", 'we"ird\\name.py', "x.py", "new\nline\t.py"]


def _rand_array(draw, et, shape):
    n = int(np.prod(shape, dtype=np.int64))
    dt = et.np_dtype
    kind = draw(st.sampled_from(["bits", "small", "splat"]))
    if kind == "splat" or n == 0:
        v = _one_value(draw, et)
        return np.full(shape, v, dtype=dt)
    if kind == "small":
        seed = draw(st.integers(0, 2**32 - 1))
        vals = np.random.default_rng(seed).integers(-3, 4, n)
        if et.is_pred:
            return (vals > 0).reshape(shape)
        if et.is_unsigned:
            vals = np.abs(vals)
        return vals.astype(dt).reshape(shape)
    seed = draw(st.integers(0, 2**32 - 1))
    raw = np.random.default_rng(seed).integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    if et.is_pred:
        return (raw[:n] & 1).astype(bool).reshape(shape)
    if et.bits < 8:  # 2/4-bit integers, 4/6-bit floats: one byte each, the bits above are 0
        raw &= np.uint8((1 << et.bits) - 1)
    return raw.view(dt).reshape(shape).copy()


def _one_value(draw, et):
    if et.is_pred:
        return draw(st.booleans())
    if et.is_int:
        info = ml_dtypes.iinfo(et.np_dtype)
        return draw(st.sampled_from([0, 1, int(info.min), int(info.max), 7]))
    return draw(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -3.25, 1e-3]))


class Gen:
    def __init__(self, draw, module: Module):
        self.draw = draw
        self.module = module
        self.helpers: List[Function] = []

    # -- small draws --------------------------------------------------------------------------
    def etype(self):
        return self.draw(st.sampled_from(ETYPES))

    def shape(self, max_rank=3):
        rank = self.draw(st.integers(0, max_rank))
        return tuple(self.draw(st.integers(0, 4)) for _ in range(rank))

    def ttype(self, layout=False):
        shape = self.shape()
        lay = None
        if layout and shape and self.draw(st.booleans()):
            lay = tuple(self.draw(st.permutations(list(range(len(shape))))))
        return TensorType(shape, self.etype(), lay)

    def loc(self):
        if self.draw(st.booleans()):
            return None
        return Location(self.draw(st.sampled_from(FILES)), self.draw(st.integers(0, 999)))

    # -- ops ----------------------------------------------------------------------------------
    def try_op(self, b: Builder, name, operands, attrs=None, result_types=None, regions=()):
        try:
            return b.op(name, operands, attrs=attrs, result_types=result_types, regions=regions,
                        loc=self.loc())
        except VerifyError:
            return None

    def constant(self, b, t: TensorType = None):
        if t is None:
            if self.draw(st.integers(0, 9)) == 0:
                t = TensorType((self.draw(st.integers(257, 300)),), self.etype())  # hex form
            else:
                t = TensorType(self.shape(), self.etype())
        v = _rand_array(self.draw, t.dtype, t.shape)
        return b.op("constant", [], attrs={"value": v}, loc=self.loc()).result

    def pick(self, pool, pred=lambda v: True):
        cands = [v for v in pool if pred(v)]
        if not cands:
            return None
        return self.draw(st.sampled_from(cands))

    def scalar_region(self, et, nargs, name, op_name):
        r = Region([scalar(et)] * nargs, name=name)
        rb = Builder(r)
        op = self.try_op(rb, op_name, [r.args[0], r.args[1]])
        if op is None:
            return None
        r.outputs = [op.result]
        return r

    def add_ops(self, b: Builder, pool: list, count: int, depth: int):
        for _ in range(count):
            kind = self.draw(st.sampled_from(
                ["const", "unary", "binary", "compare", "convert", "bcast", "reshape",
                 "transpose", "slice", "reverse", "pad", "concat", "iota", "reduce", "sort",
                 "select", "while", "if", "case", "fusion", "call", "dot", "bitcast",
                 "reduce_precision", "clamp"]))
            op = self.one_op(b, kind, pool, depth)
            if op is not None:
                pool.extend(op.results)

    def one_op(self, b, kind, pool, depth):
        d = self.draw
        x = self.pick(pool)
        if kind == "const" or x is None:
            v = self.constant(b)
            return v.op
        t = x.type
        if kind == "unary":
            return self.try_op(b, d(st.sampled_from(UNARY_ELEMENTWISE)), [x])
        if kind == "binary":
            y = self.pick(pool, lambda v: v.type.without_layout() == t.without_layout()) or x
            return self.try_op(b, d(st.sampled_from(BINARY_ELEMENTWISE)), [x, y])
        if kind == "compare":
            y = self.pick(pool, lambda v: v.type.without_layout() == t.without_layout()) or x
            attrs = {"comparison_direction": d(st.sampled_from(COMPARISON_DIRECTIONS))}
            if d(st.booleans()):
                attrs["compare_type"] = d(st.sampled_from(COMPARE_TYPES))
            return self.try_op(b, "compare", [x, y], attrs)
        if kind == "convert":
            return self.try_op(b, "convert", [x], result_types=[TensorType(t.shape, self.etype())])
        if kind == "bitcast":
            return self.try_op(b, "bitcast_convert", [x], result_types=[TensorType(t.shape, self.etype())])
        if kind == "reduce_precision":
            return self.try_op(b, "reduce_precision", [x], {"exponent_bits": d(st.integers(1, 8)),
                                                             "mantissa_bits": d(st.integers(0, 10))})
        if kind == "bcast":
            extra = d(st.integers(0, 2))
            shape = tuple(d(st.integers(1, 3)) for _ in range(extra)) + t.shape
            return self.try_op(b, "broadcast_in_dim", [x], {"broadcast_dimensions": list(range(extra, extra + t.rank))},
                               result_types=[TensorType(shape, t.dtype)])
        if kind == "reshape":
            return self.try_op(b, "reshape", [x], result_types=[TensorType((t.size,), t.dtype)])
        if kind == "transpose":
            return self.try_op(b, "transpose", [x], {"permutation": d(st.permutations(list(range(t.rank))))})
        if kind == "slice":
            st_, li = [], []
            for n in t.shape:
                a = d(st.integers(0, n))
                st_.append(a)
                li.append(d(st.integers(a, n)))
            attrs = {"start_indices": st_, "limit_indices": li}
            if d(st.booleans()):
                attrs["strides"] = [d(st.integers(1, 3)) for _ in t.shape]
            return self.try_op(b, "slice", [x], attrs)
        if kind == "reverse":
            return self.try_op(b, "reverse", [x], {"dimensions": sorted(set(d(st.lists(st.integers(0, max(t.rank - 1, 0)), max_size=t.rank)))) if t.rank else []})
        if kind == "pad":
            pv = self.constant(b, TensorType((), t.dtype))
            return self.try_op(b, "pad", [x, pv], {
                "edge_padding_low": [d(st.integers(-1, 2)) for _ in t.shape],
                "edge_padding_high": [d(st.integers(-1, 2)) for _ in t.shape],
                "interior_padding": [d(st.integers(0, 2)) for _ in t.shape]})
        if kind == "concat":
            if not t.rank:
                return None
            y = self.pick(pool, lambda v: v.type.without_layout() == t.without_layout()) or x
            return self.try_op(b, "concatenate", [x, y], {"dimension": d(st.integers(0, t.rank - 1))})
        if kind == "iota":
            shape = tuple(d(st.integers(0, 4)) for _ in range(d(st.integers(1, 3))))
            return self.try_op(b, "iota", [], {"iota_dimension": d(st.integers(0, len(shape) - 1))},
                               result_types=[TensorType(shape, self.etype())])
        if kind == "select":
            p = self.pick(pool, lambda v: v.type.dtype.is_pred and v.type.rank == 0)
            if p is None:
                p = self.constant(b, TensorType((), ETYPES[0]))
            y = self.pick(pool, lambda v: v.type.without_layout() == t.without_layout()) or x
            return self.try_op(b, "select", [p, x, y])
        if kind == "clamp":
            lo = self.constant(b, TensorType((), t.dtype))
            return self.try_op(b, "clamp", [lo, x, lo])
        if kind == "reduce":
            if not t.rank:
                return None
            body = self.scalar_region(t.dtype, 2, "body", d(st.sampled_from(["add", "maximum", "or", "multiply"])))
            if body is None:
                return None
            init = self.constant(b, TensorType((), t.dtype))
            dims = sorted(set(d(st.lists(st.integers(0, t.rank - 1), min_size=1, max_size=t.rank))))
            return self.try_op(b, "reduce", [x, init], {"dimensions": dims}, regions=[body])
        if kind == "sort":
            if not t.rank:
                return None
            cmp_r = Region([scalar(t.dtype)] * 2, name="comparator")
            c = self.try_op(Builder(cmp_r), "compare", list(cmp_r.args), {"comparison_direction": "LT"})
            if c is None:
                return None
            cmp_r.outputs = [c.result]
            return self.try_op(b, "sort", [x], {"dimension": d(st.integers(-t.rank, t.rank - 1)),
                                                "is_stable": d(st.booleans())}, regions=[cmp_r])
        if kind == "while":
            if depth > 1:
                return None
            i0 = b.value("constant", [], attrs={"value": np.array(self.draw(st.integers(-2, 3)), np.int32)})
            cond = Region([scalar(ETYPES[3]), t], name="cond")
            cb = Builder(cond)
            lim = cb.value("constant", [], attrs={"value": np.array(3, np.int32)})
            cond.outputs = [cb.value("compare", [cond.args[0], lim], attrs={"comparison_direction": "LT"})]
            body = Region([scalar(ETYPES[3]), t], name="body")
            bb = Builder(body)
            one = bb.value("constant", [], attrs={"value": np.array(1, np.int32)})
            inner = list(body.args) + [x]  # the body may read values from outside
            self.add_ops(bb, inner, d(st.integers(0, 3)), depth + 1)
            body.outputs = [bb.value("add", [body.args[0], one]), body.args[1]]
            return self.try_op(b, "while", [i0, x], regions=[cond, body])
        if kind in ("if", "case"):
            if depth > 1:
                return None
            n = 2 if kind == "if" else d(st.integers(1, 3))
            names = ["true_branch", "false_branch"] if kind == "if" else [f"branch{i}" for i in range(n)]
            regions = []
            for nm_ in names:
                r = Region([], name=nm_)
                rb = Builder(r)
                inner = [x]
                self.add_ops(rb, inner, d(st.integers(0, 2)), depth + 1)
                r.outputs = [x]
                regions.append(r)
            pt = ETYPES[0] if kind == "if" else ETYPES[3]
            p = self.constant(b, TensorType((), pt))
            return self.try_op(b, kind, [p], regions=regions)
        if kind == "fusion":
            if depth > 1:
                return None
            r = Region([t], name="fused")
            rb = Builder(r)
            inner = list(r.args) + [self.pick(pool)]  # reads an enclosing value too
            self.add_ops(rb, inner, d(st.integers(1, 3)), depth + 1)
            r.outputs = [d(st.sampled_from(inner))]
            attrs = {"kind": d(st.sampled_from(["loop", "input", "output", "multi"]))}
            if d(st.booleans()):
                attrs["name"] = d(st.sampled_from(["f0", 'quote"d', "back\\slash", "new\nline", "tab\there"]))
            return self.try_op(b, "fusion", [x], attrs, regions=[r])
        if kind == "call":
            if not self.helpers:
                return None
            fn = d(st.sampled_from(self.helpers))
            args = [self.pick(pool, lambda v, a=a: v.type.without_layout() == a.without_layout())
                    for a in fn.arg_types]
            if any(a is None for a in args):
                return None
            return self.try_op(b, "call", args, {"callee": fn.name}, result_types=fn.result_types)
        if kind == "dot":
            if t.rank != 2 or not t.dtype.is_float:
                return None
            y = self.constant(b, TensorType((t.shape[1], d(st.integers(0, 3))), t.dtype))
            rt = None
            if d(st.booleans()):
                rt = [TensorType((t.shape[0], y.type.shape[1]), d(st.sampled_from([e for e in ETYPES if e.is_float])))]
            return self.try_op(b, "dot_general", [x, y], {"lhs_contracting_dimensions": [1],
                                                            "rhs_contracting_dimensions": [0]}, result_types=rt)
        return None

    def function(self, name, visibility, depth=0) -> Function:
        d = self.draw
        args = [self.ttype(layout=True) for _ in range(d(st.integers(0, 3)))]
        fn = Function(name, args, visibility, self.loc())
        b = Builder(fn.body)
        pool = list(fn.args)
        self.add_ops(b, pool, d(st.integers(1, 8)), depth)
        outs = d(st.lists(st.sampled_from(pool), min_size=1, max_size=3)) if pool else []
        fn.body.outputs = outs
        return fn


def build_module(draw) -> Module:
    m = Module(draw(st.sampled_from(["m", "module", "my.mod-1"])))
    g = Gen(draw, m)
    for i in range(draw(st.integers(0, 2))):
        fn = g.function(f"helper{i}", "private")
        m.add(fn)
        g.helpers.append(fn)
    m.add(g.function("main", "public"))
    return m
