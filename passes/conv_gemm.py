"""Convolutions as products (pass ``conv-gemm``, cpu): a ``convolution`` becomes products the
CPU backend runs on its register-tiled GEMM (threads, the output fusion's epilogue and all), a
depthwise one a sum of its taps' products (one vectorized loop kernel after fusion).

Computed as written (``elemental._op_convolution``), a convolution is a scalar loop per output
element at 0.6-5 GFLOP/s; the GEMM runs at 70-330. The forward convolutions and the gradient
forms jax emits are one pattern once normalized: x transposed to x[B, S..., C], w to
w[K..., I, O]; the window reversal (``window_reversal``) reverses w; the padding and the lhs
dilation (an input gradient's, a transposed convolution's) are a ``pad`` of x (edge and
interior; negative edges a slice after it). What remains has strides s and rhs dilation d:

    out[b, o, f] = sum over taps k and features c of x'[b, o*s + k*d, c] * w[k, c, f]

Per convolution, with the reason in the decision log (``conv-gemm: ...``):

- ``gemm`` (at most as many taps T as output positions P: the forward convolutions): one
  product of the im2col A[G, B, O..., T, c] = x'[g, b, o*s + k*d, c] (T strided slices of x',
  one a tap, stacked by one concatenate, which the CPU's loop kernel writes row by row:
  ``backends/cpu/concat_rows.py``) and w[G, T, c, og]. Feature groups
  (``feature_group_count``: input and output features in G blocks) and batch groups
  (``batch_group_count``: the lhs batch in G blocks) are the product's batch dimension, leading,
  so that A's row-major order is the product's own and the product reads it as written.
- ``positions`` (more taps than output positions, no feature groups: a weight gradient, whose
  "window" is the image and whose output the kernel's few positions): one product per output
  position p of w and x's strided window at p, both read in their own layouts (the GEMM takes
  strided views; no im2col), the P results stacked. 3x3 weight gradient: 9 products
  [C_out x N*H*W] x [N*H*W x C_in], not an im2col of 784 slices.
- ``depthwise`` (feature groups of one input feature and at most ``DEPTHWISE_MAX_MULTIPLIER``
  output features each, f32/f64 computed in their own type): no product worth a GEMM (a
  contraction of one feature); the sum over taps of the tap's strided slice of x' times that
  tap's weights broadcast over batch and positions, which fusion makes one loop kernel
  vectorized along the features.
- An lhs-dilated ``gemm`` convolution whose dilated dimensions have stride 1 and rhs dilation
  1 (a transposed convolution, a strided convolution's input gradient) first splits into
  phases (``split_phases``): along a dimension dilated by D, output o = D*j + r reads only the
  taps k = k0 + D*m, k0 = (lo - r) mod D; the others meet the dilation's zeros (3/4 of a 2x2
  dilation's products). Each phase is a convolution without the dilation, rewritten in turn;
  the phases' results are interleaved.
- ``window_sums`` (a depthwise convolution's weight gradient as jax emits it: batch groups of
  one lhs batch element and one output feature each, f32/f64): per output position, x's
  window there times w, summed over all but the output features (a sum kept along the
  minor dimension, which the CPU reads in memory order); 3x3 depthwise on x[8,56,56,128]: 539
  -> 11.7 ms (jax.jit 250).
- A ``gemm`` convolution whose im2col would pass ``IM2COL_MAX_BYTES`` is first split along its
  batch into convolutions whose im2col fits, rewritten in turn, their results concatenated.
- Kept as a convolution (the elemental loop): complex and pred types, empty convolutions, and
  other batch groups of fewer than ``MIN_GROUP_WIDTH`` output features (products one column
  wide).

The pass runs before layout assignment and only where ``Options.conv_products_for(target)``
(cpu; the interpreter keeps convolutions, the reference the rewrite is tested against, unless
``conv_products=True``) and cuda, where the products are cuBLASLt's: the bench's eight
convolution families on an H200, hlo:cuda / jax.jit with the elemental convolution kernels ->
as products: strided 11.0 -> 1.53x, dilated NCHW 4.45 -> 4.80x (the one that lost),
depthwise 1.39 -> 1.17x, depthwise weight gradient 189 -> 4.5x, grouped 3.98 -> 2.52x,
transposed 6.9 -> 0.96x, strided input+weight gradient 125 -> 2.03x, conv + batch norm + relu
with gradients 35 -> 2.1x).
"""
from __future__ import annotations

import itertools
from typing import List, Optional, Sequence, Tuple

import numpy as np

from hlo.ir.builder import Builder
from hlo.ir.core import Module, Operation, Region, Value
from hlo.ir.types import TensorType

from .base import MainPass, register_pass
from .util import Labels, control_bodies, erase_ops, replace_values

# A depthwise convolution (one input feature a group) with at most this many output features a
# group becomes a sum of taps (more: the product of each group is wide enough for the GEMM).
DEPTHWISE_MAX_MULTIPLIER = 4
# A batch-grouped convolution with fewer output features per group than this is kept (its
# product would be a column or two wide).
MIN_GROUP_WIDTH = 4
# An im2col larger than this is made in pieces: the convolution is split along its batch into
# convolutions whose im2col fits (each rewritten in turn; their results concatenated), so that a
# large batch does not need T times its input in one temporary.
IM2COL_MAX_BYTES = 256 << 20


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


class _Conv:
    """A convolution's attributes, read once."""

    def __init__(self, op: Operation):
        a = op.attrs
        self.op = op
        self.x, self.w = op.operands
        self.out = op.results[0]
        self.nsp = nsp = self.x.type.rank - 2
        self.ws = list(a.get("window_strides") or (1,) * nsp)
        self.pad = [tuple(p) for p in (a.get("padding") or ((0, 0),) * nsp)]
        self.ld = list(a.get("lhs_dilation") or (1,) * nsp)
        self.rd = list(a.get("rhs_dilation") or (1,) * nsp)
        self.rev = list(a.get("window_reversal") or (False,) * nsp)
        self.ib, self.ifd, self.isp = a["input_batch_dimension"], a["input_feature_dimension"], list(a["input_spatial_dimensions"])
        self.ki, self.ko, self.ksp = (a["kernel_input_feature_dimension"], a["kernel_output_feature_dimension"],
                                      list(a["kernel_spatial_dimensions"]))
        self.ob, self.of, self.osp = (a["output_batch_dimension"], a["output_feature_dimension"],
                                      list(a["output_spatial_dimensions"]))
        self.fgc, self.bgc = int(a.get("feature_group_count", 1)), int(a.get("batch_group_count", 1))
        xs, wsh, osh = self.x.type.shape, self.w.type.shape, self.out.type.shape
        self.B, self.C = xs[self.ib], xs[self.ifd]
        self.I, self.O = wsh[self.ki], wsh[self.ko]
        self.K = [wsh[d] for d in self.ksp]
        self.OS = [osh[d] for d in self.osp]
        self.groups = max(self.fgc, self.bgc)
        self.og = self.O // self.groups          # output features a group

    def text(self) -> str:
        g = (f", {self.fgc} feature groups" if self.fgc > 1 else "") + \
            (f", {self.bgc} batch groups" if self.bgc > 1 else "")
        return (f"{self.x.type.dtype}[{','.join(map(str, self.x.type.shape))}] * "
                f"[{','.join(map(str, self.w.type.shape))}]{g}")


def plan(cv: _Conv) -> Tuple[Optional[str], str]:
    """(how, why) for a convolution the pass rewrites, how one of "gemm", "positions",
    "depthwise", "window_sums" (the module docstring says what each is); (None, why not) else."""
    et = cv.x.type.dtype
    if et.is_complex or et.is_pred:
        return None, f"{et} convolutions stay loops"
    if cv.out.type.size == 0 or cv.x.type.size == 0 or cv.w.type.size == 0:
        return None, "an empty convolution"
    if (cv.fgc > 1 and cv.I == 1 and cv.og <= DEPTHWISE_MAX_MULTIPLIER and et.is_float
            and cv.out.type.dtype == et and et.name in ("f32", "f64")):
        return "depthwise", (f"depthwise ({cv.fgc} groups of one input feature, {cv.og} output "
                             f"feature{'s' if cv.og > 1 else ''} each): a sum of {_prod(cv.K)} taps' products")
    if (cv.bgc > 1 and cv.og == 1 and cv.B == cv.bgc and et.name in ("f32", "f64")
            and cv.out.type.dtype == et):
        return "window_sums", (f"a depthwise weight gradient ({cv.bgc} batch groups of one element and one output "
                               f"feature): {_prod(cv.OS)} sums over batch, features and window of x's window "
                               "times w, kept along the output features")
    if cv.bgc > 1 and cv.og < MIN_GROUP_WIDTH:
        return None, (f"{cv.bgc} batch groups of {cv.og} output feature{'s' if cv.og > 1 else ''}: "
                      "a product that narrow gains nothing on the GEMM")
    taps, positions = _prod(cv.K), _prod(cv.OS)
    m = cv.x.type.shape[cv.ib] // cv.bgc * positions
    if taps > positions and cv.fgc == 1:
        b_rows = cv.x.type.shape[cv.ib] // cv.bgc
        return "positions", (f"{positions} products (one an output position) of [{cv.og} x {taps * cv.I}] x "
                             f"[{taps * cv.I} x {b_rows}]" + (f" in {cv.groups} groups" if cv.groups > 1 else "")
                             + ", each reading its window of the input in place of an im2col")
    by = "tap" if taps <= positions else "output position"
    return "gemm", (f"a product of [{m} x {taps * cv.I}] x [{taps * cv.I} x {cv.og}]"
                    + (f" in {cv.groups} groups" if cv.groups > 1 else "")
                    + f", its im2col gathered by {min(taps, positions)} slices (one a {by})")


def _clone_body(body: Region) -> Region:
    from hlo.ir.clone import clone_region
    return clone_region(body, {})


class _Rewriter:
    def __init__(self, b: Builder, cv: _Conv):
        self.b = b
        self.cv = cv

    def t(self, shape: Sequence[int], dtype=None) -> TensorType:
        return TensorType(list(shape), dtype if dtype is not None else self.cv.x.type.dtype)

    def transpose(self, v: Value, perm: Sequence[int]) -> Value:
        if list(perm) == list(range(len(perm))):
            return v
        return self.b.value("transpose", [v], attrs={"permutation": list(perm)})

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        if list(v.type.shape) == list(shape):
            return v
        return self.b.value("reshape", [v], result_types=[TensorType(list(shape), v.type.dtype)])

    def slice(self, v: Value, start, limit, strides) -> Value:
        if list(start) == [0] * len(start) and list(limit) == list(v.type.shape) and all(s == 1 for s in strides):
            return v
        return self.b.value("slice", [v], attrs={"start_indices": list(start), "limit_indices": list(limit),
                                                  "strides": list(strides)})

    def concat(self, parts: List[Value], dim: int) -> Value:
        if len(parts) == 1:
            return parts[0]
        return self.b.value("concatenate", parts, attrs={"dimension": dim})

    def operands(self) -> Tuple[Value, Value]:
        """x'[B, P..., C] (padded, lhs-dilated) and w[K..., I, O] (window reversed)."""
        cv, b = self.cv, self.b
        x = self.transpose(cv.x, [cv.ib] + cv.isp + [cv.ifd])
        w = self.transpose(cv.w, cv.ksp + [cv.ki, cv.ko])
        rev = [i for i in range(cv.nsp) if cv.rev[i]]
        if rev:
            w = b.value("reverse", [w], attrs={"dimensions": rev})
        lo = [0] + [p[0] for p in cv.pad] + [0]
        hi = [0] + [p[1] for p in cv.pad] + [0]
        interior = [0] + [d - 1 for d in cv.ld] + [0]
        if any(lo) or any(hi) or any(interior):
            zero = b.value("constant", attrs={"value": np.zeros((), x.type.dtype.np_dtype)})
            x = b.value("pad", [x, zero], attrs={"edge_padding_low": [max(p, 0) for p in lo],
                                                  "edge_padding_high": [max(p, 0) for p in hi],
                                                  "interior_padding": interior})
            if any(p < 0 for p in lo + hi):   # negative padding: cut the edges off
                shape = x.type.shape
                x = self.slice(x, [-min(p, 0) for p in lo], [n + min(p, 0) for n, p in zip(shape, hi)],
                               [1] * len(shape))
        return x, w

    def im2col(self, x: Value, lead: int) -> Tuple[Value, int]:
        """A[pre..., O..., T, c] (one slice a tap) or A[pre..., P, K..., c] (one slice an output
        position): x[pre..., o*s + k*d, c], ``pre`` the ``lead`` + 1 dimensions before x's
        spatial ones, o and k row-major; and how many of A's last dimensions are the contraction.
        The slices are stacked by one concatenate along a dimension other than the last, whose
        loop kernel visits each slice by rows (``backends.cpu.concat_rows``)."""
        cv = self.cv
        nsp = cv.nsp
        shape = list(x.type.shape)
        pre, c = shape[:lead + 1], shape[-1]
        ones = [1] * (lead + 1)
        T, P = _prod(cv.K), _prod(cv.OS)
        parts = []
        if T <= P:
            for k in itertools.product(*[range(n) for n in cv.K]):
                start = [0] * (lead + 1) + [k[i] * cv.rd[i] for i in range(nsp)] + [0]
                limit = pre + [k[i] * cv.rd[i] + cv.ws[i] * (cv.OS[i] - 1) + 1 for i in range(nsp)] + [c]
                tap = self.slice(x, start, limit, ones + cv.ws + [1])
                parts.append(self.reshape(tap, pre + cv.OS + [1, c]))
            return self.concat(parts, lead + 1 + nsp), 2
        for o in itertools.product(*[range(n) for n in cv.OS]):
            start = [0] * (lead + 1) + [o[i] * cv.ws[i] for i in range(nsp)] + [0]
            limit = pre + [o[i] * cv.ws[i] + cv.rd[i] * (cv.K[i] - 1) + 1 for i in range(nsp)] + [c]
            win = self.slice(x, start, limit, ones + cv.rd + [1])
            parts.append(self.reshape(win, pre + [1] + cv.K + [c]))
        return self.concat(parts, lead + 1), nsp + 1

    def finish(self, r: Value) -> Value:
        """r[B, O..., F] (or r[B, P, F]) laid out as the convolution's result."""
        cv = self.cv
        r = self.reshape(r, [r.type.shape[0]] + cv.OS + [cv.O])
        perm = [0] * (cv.nsp + 2)
        perm[cv.ob] = 0
        perm[cv.of] = cv.nsp + 1
        for i, d in enumerate(cv.osp):
            perm[d] = 1 + i
        return self.transpose(r, perm)

    def gemm(self) -> Value:
        """The groups lead: x[G, B', P..., c] and A[G, B', O..., T, c], so that A's row-major
        order is the product's own (batch, rows, contraction) and the product reads it as the
        loop kernel wrote it."""
        cv, b = self.cv, self.b
        x, w = self.operands()                           # [B, P..., C], [K..., I, O]
        nsp, G, og = cv.nsp, cv.groups, cv.og
        B, C = x.type.shape[0], x.type.shape[-1]
        ps = list(x.type.shape[1:-1])
        if cv.fgc > 1:
            cg = C // G
            x = self.transpose(self.reshape(x, [B] + ps + [G, cg]), [nsp + 1, 0] + list(range(1, nsp + 1)) + [nsp + 2])
        elif cv.bgc > 1:
            cg = C
            x = self.reshape(x, [G, B // G] + ps + [C])
        else:
            cg = C
        lead = 1 if G > 1 else 0
        a, nc = self.im2col(x, lead)
        contraction = list(range(a.type.rank - nc, a.type.rank))
        kdims = [_prod(cv.K)] if nc == 2 else list(cv.K)
        if G > 1:   # w[K..., cg, G, og] -> [G, K..., cg, og]
            w = self.reshape(w, list(cv.K) + [cg, G, og])
            w = self.transpose(w, [nsp + 1] + list(range(nsp + 1)) + [nsp + 2])
            w = self.reshape(w, [G] + kdims + [cg, og])
        else:
            w = self.reshape(w, kdims + [cg, og])
        rows = [a.type.shape[d] for d in range(a.type.rank - nc)]
        attrs = {"lhs_contracting_dimensions": contraction,
                 "rhs_contracting_dimensions": list(range(lead, lead + nc))}
        if G > 1:
            attrs.update(lhs_batching_dimensions=[0], rhs_batching_dimensions=[0])
        r = b.value("dot_general", [a, w], attrs=attrs, result_types=[self.t(rows + [og], cv.out.type.dtype)])
        if G > 1:   # [G, B', O..., og] -> [B', O..., G, og] -> [B', O..., G * og]
            k = r.type.rank
            r = self.transpose(r, list(range(1, k - 1)) + [0, k - 1])
            r = self.reshape(r, list(r.type.shape[:-2]) + [G * og])
        return self.finish(r)

    def own_layout_operands(self) -> Tuple[Value, Value]:
        """x padded and lhs-dilated, w window-reversed, both in their own dimension orders."""
        cv, b = self.cv, self.b
        x, w = cv.x, cv.w
        rev = [cv.ksp[i] for i in range(cv.nsp) if cv.rev[i]]
        if rev:
            w = b.value("reverse", [w], attrs={"dimensions": rev})
        r = x.type.rank
        lo, hi, interior = [0] * r, [0] * r, [0] * r
        for i, d in enumerate(cv.isp):
            lo[d], hi[d], interior[d] = cv.pad[i][0], cv.pad[i][1], cv.ld[i] - 1
        if any(lo) or any(hi) or any(interior):
            zero = b.value("constant", attrs={"value": np.zeros((), x.type.dtype.np_dtype)})
            x = b.value("pad", [x, zero], attrs={"edge_padding_low": [max(p, 0) for p in lo],
                                                  "edge_padding_high": [max(p, 0) for p in hi],
                                                  "interior_padding": interior})
            if any(p < 0 for p in lo + hi):
                shape = x.type.shape
                x = self.slice(x, [-min(p, 0) for p in lo], [n + min(p, 0) for n, p in zip(shape, hi)], [1] * r)
        return x, w

    def per_position(self) -> Value:
        """One product an output position p: w contracted with x's window at p (x[.., p*s +
        k*d, ..] over the taps k), both read in their own layouts; out[b, p, f] stacked from
        them. A weight gradient's: per tap of the forward kernel, x's strided window times the
        output gradient, each a product of the whole batch and image deep."""
        cv, b = self.cv, self.b
        x, w = self.own_layout_operands()
        r = x.type.rank
        G, og = cv.groups, cv.og
        Bx = x.type.shape[cv.ib]
        rows = []
        for o in itertools.product(*[range(n) for n in cv.OS]):
            start, limit, strides = [0] * r, list(x.type.shape), [1] * r
            for i, d in enumerate(cv.isp):
                start[d] = o[i] * cv.ws[i]
                limit[d] = start[d] + cv.rd[i] * (cv.K[i] - 1) + 1
                strides[d] = cv.rd[i]
            win = self.slice(x, start, limit, strides)
            if G > 1:   # batch groups: x's batch (G, Bo), w's output features (G, og), G the product's batch
                ws_ = list(win.type.shape)
                xg = self.reshape(win, ws_[:cv.ib] + [G, Bx // G] + ws_[cv.ib + 1:])
                wsh = list(w.type.shape)
                wg = self.reshape(w, wsh[:cv.ko] + [G, og] + wsh[cv.ko + 1:])

                def after(dims, split):
                    return [d + 1 if d > split else d for d in dims]
                lc = after([cv.ki] + cv.ksp, cv.ko)
                rc = after([cv.ifd] + cv.isp, cv.ib)
                p = b.value("dot_general", [wg, xg], attrs={
                    "lhs_batching_dimensions": [cv.ko], "rhs_batching_dimensions": [cv.ib],
                    "lhs_contracting_dimensions": lc, "rhs_contracting_dimensions": rc},
                    result_types=[self.t([G, og, Bx // G], cv.out.type.dtype)])
                p = self.reshape(p, [cv.O, Bx // G])
            else:
                p = b.value("dot_general", [w, win], attrs={
                    "lhs_contracting_dimensions": [cv.ki] + cv.ksp, "rhs_contracting_dimensions": [cv.ifd] + cv.isp},
                    result_types=[self.t([cv.O, Bx], cv.out.type.dtype)])
            rows.append(self.reshape(p, [1] + list(p.type.shape)))
        st_ = self.concat(rows, 0)                           # [P, O, B']
        st_ = self.reshape(st_, cv.OS + list(st_.type.shape[1:]))
        perm = [0] * (cv.nsp + 2)
        perm[cv.ob] = cv.nsp + 1
        perm[cv.of] = cv.nsp
        for i, d in enumerate(cv.osp):
            perm[d] = i
        return self.transpose(st_, perm)

    def window_sums(self) -> Value:
        """A depthwise convolution's weight gradient (batch groups of one lhs batch element and
        one output feature each): per output position p, out[p, g] = the sum over features c and
        taps k of x[g, p*s + k*d, c] * w[k, c, g], an elementwise product of x's window at p
        (transposed to w's dimension order) and w, reduced over all but w's output features: a
        sum kept along the features, which the CPU reads in memory order."""
        cv, b = self.cv, self.b
        x, w = self.own_layout_operands()
        r = x.type.rank
        et = w.type.dtype
        src = {cv.ko: cv.ib, cv.ki: cv.ifd, **{cv.ksp[i]: cv.isp[i] for i in range(cv.nsp)}}
        perm = [src[j] for j in range(r)]
        body = Region([TensorType([], et)] * 2, name="body")
        total = Builder(body).value("add", list(body.args))
        body.outputs = [total]
        zero = b.value("constant", attrs={"value": np.zeros((), et.np_dtype)})
        rows = []
        for o in itertools.product(*[range(n) for n in cv.OS]):
            start, limit, strides = [0] * r, list(x.type.shape), [1] * r
            for i, d in enumerate(cv.isp):
                start[d] = o[i] * cv.ws[i]
                limit[d] = start[d] + cv.rd[i] * (cv.K[i] - 1) + 1
                strides[d] = cv.rd[i]
            win = self.transpose(self.slice(x, start, limit, strides), perm)
            prod = b.value("multiply", [win, w])
            red = b.op("reduce", [prod, zero], attrs={"dimensions": [j for j in range(r) if j != cv.ko]},
                       regions=[_clone_body(body)]).results[0]
            rows.append(self.reshape(red, [1, cv.O]))
        st_ = self.reshape(self.concat(rows, 0), cv.OS + [cv.O, 1])
        perm_out = [0] * (cv.nsp + 2)
        perm_out[cv.ob] = cv.nsp + 1
        perm_out[cv.of] = cv.nsp
        for i, d in enumerate(cv.osp):
            perm_out[d] = i
        return self.transpose(st_, perm_out)

    def depthwise(self) -> Value:
        """sum over taps k of x'[b, o*s + k*d, g] (repeated og times) * w[k, 0, g*og + j]."""
        cv, b = self.cv, self.b
        x, w = self.operands()                            # x'[B, P..., C], w[K..., 1, O]
        nsp, B, C = cv.nsp, x.type.shape[0], x.type.shape[-1]
        et = x.type.dtype
        full = [B] + cv.OS + [cv.O]
        total = None
        for k in itertools.product(*[range(n) for n in cv.K]):
            start = [0] + [k[i] * cv.rd[i] for i in range(nsp)] + [0]
            limit = [B] + [k[i] * cv.rd[i] + cv.ws[i] * (cv.OS[i] - 1) + 1 for i in range(nsp)] + [C]
            tap = self.slice(x, start, limit, [1] + cv.ws + [1])    # [B, O..., C]
            if cv.og > 1:
                tap = b.value("broadcast_in_dim", [tap], attrs={"broadcast_dimensions": list(range(nsp + 2))},
                              result_types=[self.t([B] + cv.OS + [C, cv.og])])
                tap = self.reshape(tap, full)
            wk = self.slice(w, list(k) + [0, 0], [i + 1 for i in k] + [1, cv.O], [1] * (nsp + 2))
            wk = self.reshape(wk, [cv.O])
            wk = b.value("broadcast_in_dim", [wk], attrs={"broadcast_dimensions": [nsp + 1]},
                         result_types=[self.t(full, et)])
            term = b.value("multiply", [tap, wk])
            total = term if total is None else b.value("add", [total, term])
        assert total is not None
        return self.finish(total)


def phase_dims(cv: _Conv) -> List[int]:
    """The spatial dimensions an lhs-dilated convolution splits into phases along: those with
    lhs dilation, provided each has stride 1 and rhs dilation 1 (jax's transposed convolutions
    and the input gradients of strided ones); [] where any does not."""
    dims = [i for i in range(cv.nsp) if cv.ld[i] > 1]
    if any(cv.ws[i] != 1 or cv.rd[i] != 1 for i in dims):
        return []
    return dims


def split_phases(b: Builder, cv: _Conv, dims: List[int]) -> Tuple[Value, List[Operation]]:
    """An lhs-dilated convolution as the interleave of its phases. Along a dimension dilated by
    D, output o = D*j + r reads only the taps k with (r + k - lo) divisible by D (the others meet
    the dilation's zeros): k = k0 + D*m with k0 = (lo - r) mod D, at input j + e0 + m, e0 =
    (r + k0 - lo) / D. Each phase r is a convolution without that dilation, of the kernel's taps
    k0, k0 + D, ... and edge padding -e0 before; the phases' results are interleaved (stacked
    next to the dimension, reshaped, cut to its size). A phase without taps is zeros. Returns
    the result and the phase convolutions (to be rewritten in turn)."""
    x, w = cv.x, cv.w
    et = cv.out.type.dtype
    rev = [cv.ksp[i] for i in range(cv.nsp) if cv.rev[i]]
    if rev:
        w = b.value("reverse", [w], attrs={"dimensions": rev})
    n = [x.type.shape[cv.isp[i]] for i in range(cv.nsp)]
    made: List[Operation] = []

    def phase(rs: Tuple[int, ...]) -> Value:
        pad, ld = list(cv.pad), list(cv.ld)
        osh = list(cv.out.type.shape)
        start, limit, strides = [0] * w.type.rank, list(w.type.shape), [1] * w.type.rank
        empty = False
        for i, r in zip(dims, rs):
            D, K, lo = cv.ld[i], cv.K[i], cv.pad[i][0]
            J = -(-(cv.OS[i] - r) // D)
            k0 = (lo - r) % D
            kr = max(0, -(-(K - k0) // D))
            e0 = (r + k0 - lo) // D
            osh[cv.osp[i]] = J
            ld[i] = 1
            pad[i] = (-e0, J + kr - 1 - n[i] + e0)
            kd = cv.ksp[i]
            start[kd], strides[kd] = k0, D
            empty |= kr == 0
        t = TensorType(osh, et)
        if empty:
            zero = b.value("constant", attrs={"value": np.zeros((), et.np_dtype)})
            return b.value("broadcast_in_dim", [zero], attrs={"broadcast_dimensions": []}, result_types=[t])
        wr = b.value("slice", [w], attrs={"start_indices": start, "limit_indices": limit, "strides": strides})
        attrs = dict(cv.op.attrs)
        attrs.update(padding=[list(p) for p in pad], lhs_dilation=ld, window_reversal=[False] * cv.nsp)
        op = b.op("convolution", [x, wr], attrs=attrs, result_types=[t])
        made.append(op)
        return op.results[0]

    def interleave(ys: List[Optional[Value]], i: int) -> Value:
        """ys[r] (phase r along spatial dimension i) interleaved into that dimension."""
        D, size, p = cv.ld[i], cv.OS[i], cv.osp[i]
        jmax = -(-size // D)
        parts = []
        for y in ys:
            if y is None:   # a phase without outputs (the dimension is shorter than D): zeros
                sh = list(ys[0].type.shape)
                zero = b.value("constant", attrs={"value": np.zeros((), et.np_dtype)})
                y = b.value("broadcast_in_dim", [zero], attrs={"broadcast_dimensions": []},
                            result_types=[TensorType(sh, et)])
            sh = list(y.type.shape)
            if sh[p] < jmax:
                zero = b.value("constant", attrs={"value": np.zeros((), et.np_dtype)})
                hi = [0] * len(sh)
                hi[p] = jmax - sh[p]
                y = b.value("pad", [y, zero], attrs={"edge_padding_low": [0] * len(sh), "edge_padding_high": hi,
                                                      "interior_padding": [0] * len(sh)})
                sh = list(y.type.shape)
            parts.append(b.value("reshape", [y], result_types=[TensorType(sh[:p + 1] + [1] + sh[p + 1:], et)]))
        st = b.value("concatenate", parts, attrs={"dimension": p + 1})
        sh = list(st.type.shape)
        flat = b.value("reshape", [st], result_types=[TensorType(sh[:p] + [jmax * D] + sh[p + 2:], et)])
        if jmax * D == size:
            return flat
        fs = list(flat.type.shape)
        lim = list(fs)
        lim[p] = size
        return b.value("slice", [flat], attrs={"start_indices": [0] * len(fs), "limit_indices": lim,
                                                "strides": [1] * len(fs)})

    def build(prefix: Tuple[int, ...]) -> Value:
        k = len(prefix)
        if k == len(dims):
            return phase(prefix)
        i = dims[k]
        ys = [build(prefix + (r,)) if r < cv.OS[i] else None for r in range(cv.ld[i])]
        return interleave(ys, dims[k])

    return build(()), made


def im2col_bytes(cv: _Conv) -> int:
    """The bytes of the im2col a ``gemm`` rewrite makes: T taps x C features per output row."""
    return cv.B * _prod(cv.OS) * _prod(cv.K) * cv.C * cv.x.type.dtype.itemsize


def split_batch(b: Builder, cv: _Conv, pieces: int) -> Tuple[Value, List[Operation]]:
    """The convolution as ``pieces`` convolutions of consecutive parts of its batch, their
    results concatenated along the output's batch dimension."""
    per = -(-cv.B // pieces)
    made: List[Operation] = []
    outs = []
    for lo in range(0, cv.B, per):
        hi = min(cv.B, lo + per)
        start, limit = [0] * cv.x.type.rank, list(cv.x.type.shape)
        start[cv.ib], limit[cv.ib] = lo, hi
        xs = b.value("slice", [cv.x], attrs={"start_indices": start, "limit_indices": limit,
                                              "strides": [1] * cv.x.type.rank})
        osh = list(cv.out.type.shape)
        osh[cv.ob] = hi - lo
        op = b.op("convolution", [xs, cv.w], attrs=dict(cv.op.attrs), result_types=[TensorType(osh, cv.out.type.dtype)])
        made.append(op)
        outs.append(op.results[0])
    return b.value("concatenate", outs, attrs={"dimension": cv.ob}), made


@register_pass("conv-gemm", "convolutions as an im2col gather and one product (the GEMM); depthwise as a sum of taps")
class ConvGemm(MainPass):
    name = "conv-gemm"
    decision_prefix = "conv-gemm"

    def run_main(self, module: Module) -> bool:
        convs = [(region, op) for region in control_bodies(module.main.body) for op in region.ops
                 if op.name == "convolution"]
        if not convs or not self.options.conv_products_for(self.config.target):
            return False
        if any(c.results[0].type.layout is not None for _, c in convs):
            self.log("not run: the module has layouts (the pass runs before layout assignment)")
            return False
        labels = Labels.for_module(module)
        for _, op in convs:
            labels(op)
        changed = False
        while convs:
            region, op = convs.pop(0)
            cv = _Conv(op)
            how, why = plan(cv)
            if how is None:
                self.log(f"kept {labels(op)} ({cv.text()}): {why}")
                continue
            name = labels(op)
            big = how == "gemm" and cv.bgc == 1 and cv.B > 1 and im2col_bytes(cv) > IM2COL_MAX_BYTES
            if big:
                pieces = min(cv.B, -(-im2col_bytes(cv) // IM2COL_MAX_BYTES))
                b = Builder(region, op.loc, index=region.ops.index(op))
                y, made = split_batch(b, cv, pieces)
                replace_values(region, {op.results[0]: y})
                erase_ops(region, [op])
                self.log(f"{name} ({cv.text()}): its im2col ({im2col_bytes(cv) >> 20} MiB) past "
                         f"{IM2COL_MAX_BYTES >> 20} MiB: {len(made)} convolutions of parts of its batch "
                         f"({', '.join(labels(m) for m in made)})")
                convs = [(region, m) for m in made] + convs
                changed = True
                continue
            dims = phase_dims(cv) if how == "gemm" else []
            if dims:
                b = Builder(region, op.loc, index=region.ops.index(op))
                y, made = split_phases(b, cv, dims)
                replace_values(region, {op.results[0]: y})
                erase_ops(region, [op])
                self.log(f"{name} ({cv.text()}): lhs dilation {[cv.ld[i] for i in dims]}: "
                         f"{_prod(cv.ld[i] for i in dims)} phases, each a convolution without the "
                         f"dilation's zeros ({', '.join(labels(m) for m in made) or 'all zeros'})")
                convs = [(region, m) for m in made] + convs
                changed = True
                continue
            b = Builder(region, op.loc, index=region.ops.index(op))
            rw = _Rewriter(b, cv)
            y = {"gemm": rw.gemm, "positions": rw.per_position, "depthwise": rw.depthwise,
                 "window_sums": rw.window_sums}[how]()
            replace_values(region, {op.results[0]: y})
            erase_ops(region, [op])
            self.log(f"{name} ({cv.text()}): {why}")
            changed = True
        return changed

