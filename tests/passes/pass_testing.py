"""Helpers for the pass tests: IR text in / IR text out, FileCheck-style checks, and a
simulator that runs an optimized program on the bytes its buffer plan describes."""
from __future__ import annotations

import re
from typing import Dict, List, Sequence

import numpy as np

from hlo.ir import parse_module, print_module
from hlo.ir.clone import clone_op
from hlo.ir.core import Function, Module, Operation, Value
from hlo.ir.interpreter import run
from hlo.passes.layout import is_bitcast
from hlo.passes.options import Options, PassConfig
from hlo.passes.pipeline import verify
from hlo.passes.registry import create_pass


def run_passes(src: str, passes: Sequence[str], target: str = "cpu", options=None,
               decisions: list = None) -> str:
    """Parse ``src``, run ``passes`` (verifying after each), return the printed module."""
    m = parse_module(src)
    config = PassConfig(target, Options.from_any(options), decisions if decisions is not None else [])
    for name in passes:
        create_pass(name, config).run(m)
        verify(m)
    return print_module(m)


def normalize(text: str) -> str:
    """Expected IR written by hand, printed the way the printer prints it."""
    return print_module(parse_module(text))


def assert_ir(actual: str, expected: str) -> None:
    want = normalize(expected)
    assert actual == want, f"IR differs.\n--- got ---\n{actual}\n--- want ---\n{want}"


def filecheck(text: str, checks: str) -> None:
    """A small FileCheck: ``CHECK: s`` finds ``s`` after the previous match, ``CHECK-NEXT: s``
    on the next line, ``CHECK-NOT: s`` nowhere between the previous and the next match,
    ``CHECK-COUNT-n: s`` exactly n lines containing s in the whole text."""
    lines = text.splitlines()
    pos = 0
    pending_not: List[str] = []
    for raw in checks.strip().splitlines():
        raw = raw.strip()
        if not raw:
            continue
        m = re.match(r"(CHECK(?:-NEXT|-NOT|-COUNT-(\d+))?):\s?(.*)$", raw)
        assert m, f"bad check line {raw!r}"
        kind, count, pat = m.group(1), m.group(2), m.group(3)
        if kind == "CHECK-NOT":
            pending_not.append(pat)
            continue
        if count is not None:
            n = sum(1 for ln in lines if pat in ln)
            assert n == int(count), f"{kind}: {pat!r} found on {n} lines, want {count}\n{text}"
            continue
        if kind == "CHECK-NEXT":
            assert pos < len(lines) and pat in lines[pos], \
                f"CHECK-NEXT: {pat!r} not on line {pos + 1}: {lines[pos] if pos < len(lines) else '<end>'}\n{text}"
            hit = pos
        else:
            hit = next((i for i in range(pos, len(lines)) if pat in lines[i]), None)
            assert hit is not None, f"CHECK: {pat!r} not found after line {pos}\n{text}"
        for p in pending_not:
            for i in range(pos, hit):
                assert p not in lines[i], f"CHECK-NOT: {p!r} found on line {i + 1}: {lines[i]}\n{text}"
        pending_not = []
        pos = hit + 1
    for p in pending_not:
        for i in range(pos, len(lines)):
            assert p not in lines[i], f"CHECK-NOT: {p!r} found on line {i + 1}: {lines[i]}\n{text}"


def random_args(module: Module, seed: int = 0, special: bool = False) -> List[np.ndarray]:
    """Arguments for ``module``'s main; ``special`` puts inf, -inf, nan and -0.0 in floats."""
    rng = np.random.default_rng(seed)
    out = []
    for a in module.main.args:
        t = a.type
        if t.dtype.is_float:
            x = rng.uniform(-1, 1, t.shape).astype(t.np_dtype)
            if special and x.size:
                flat = x.reshape(-1)
                picks = rng.integers(0, flat.size, max(1, flat.size // 8))
                flat[picks] = rng.choice(np.array([np.inf, -np.inf, np.nan, -0.0], t.np_dtype), picks.size)
            out.append(x)
        elif t.dtype.is_pred:
            out.append(rng.integers(0, 2, t.shape).astype(bool))
        else:
            out.append(rng.integers(-5, 6, t.shape).astype(t.np_dtype))
    return out


# --------------------------------------------------------------------------------------------
# Buffer-level simulation
# --------------------------------------------------------------------------------------------

def rewritten(src: str, passes: Sequence[str], target: str, options=None, tol: float = 1e-6):
    """The module after ``passes`` (printed), their decision log (one string), and a check that
    it computes what ``src`` does (interpreter, random inputs, ``tol`` relative and absolute)."""
    log: list = []
    out = run_passes(src, passes, target, options, log)
    m0, m1 = parse_module(src), parse_module(out)
    args = random_args(m0)
    for a, b in zip(run(m0, args), run(m1, args)):
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    return out, "\n".join(log)


def _store(buf: bytearray, offset: int, x: np.ndarray, t) -> None:
    order = list(reversed(t.minor_to_major))  # major to minor
    phys = np.ascontiguousarray(np.transpose(np.asarray(x, dtype=t.np_dtype), order))
    raw = phys.tobytes()
    buf[offset:offset + len(raw)] = raw


def _load(buf: bytearray, offset: int, t) -> np.ndarray:
    order = list(reversed(t.minor_to_major))
    n = t.size * t.dtype.itemsize
    phys = np.frombuffer(bytes(buf[offset:offset + n]), dtype=t.np_dtype).reshape([t.shape[d] for d in order])
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return np.transpose(phys, inv).copy()


def _eval_op(op: Operation, ins: List[np.ndarray]) -> List[np.ndarray]:
    m = Module("one")
    fn = Function("main", [v.type.without_layout() for v in op.operands])
    m.add(fn)
    vmap: Dict[Value, Value] = dict(zip(op.operands, fn.args))
    new = clone_op(op, vmap)
    for r in new.results:
        r.type = r.type.without_layout()
    fn.body.append(new)
    fn.body.outputs = list(new.results)
    return run(m, ins, verify=False)


def simulate(opt, args: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Run ``opt`` (an ``Optimized``) kernel by kernel in schedule order, every top-level value
    read from and written to the bytes of its slice (with its layout): parameters, output
    buffers, the arena, the constants table. Results that differ from the interpreter's mean a
    wrong buffer plan (overlap, bad in-place, bad bitcast or layout)."""
    main = opt.module.main
    ba = opt.buffers
    spaces: Dict[tuple, bytearray] = {("temp", 0): bytearray(b"\xcd" * max(ba.arena_size, 1))}
    for i, a in enumerate(main.args):
        spaces[("param", i)] = bytearray(a.type.nbytes)
        _store(spaces[("param", i)], 0, args[i], a.type)
    for i, v in enumerate(main.body.outputs):
        spaces[("output", i)] = bytearray(b"\xcd" * max(v.type.nbytes, 1))
    for i, c in enumerate(ba.constants):
        spaces[("constant", i)] = bytearray(c.nbytes)

    def load(v):
        s = ba.slice_for(v)
        return _load(spaces[(s.kind, s.index)], s.offset, v.type)

    for op in opt.schedule:
        if is_bitcast(op):
            continue
        if op.name == "constant":
            s = ba.slice_for(op.results[0])
            _store(spaces[(s.kind, s.index)], s.offset, op.attrs["value"], op.results[0].type)
            continue
        outs = _eval_op(op, [load(v) for v in op.operands])
        for r, x in zip(op.results, outs):
            s = ba.slice_for(r)
            _store(spaces[(s.kind, s.index)], s.offset, x, r.type)
    results = []
    for i, v in enumerate(main.body.outputs):
        results.append(load(v))
    return results
