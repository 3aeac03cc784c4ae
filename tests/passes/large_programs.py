"""Large generated programs for the fusion passes' scaling tests: a seeded mix of elementwise
chains, diamonds (a value read by two branches that join again), row reductions broadcast back,
dots with bias epilogues, transposes and slices, so that every fusion kind and most refusal
reasons occur many times. ``large_program(n_ops, seed)`` returns a Module with about ``n_ops``
top-level ops; shapes are small so that the interpreter can run it."""
from __future__ import annotations

import random

import numpy as np

from hlo.ir.builder import Builder
from hlo.ir.core import Function, Module, Region
from hlo.ir.types import TensorType, f32

UNARY = ["negate", "abs", "tanh", "exponential", "logistic", "sine"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


def _add_body() -> Region:
    r = Region([TensorType((), f32), TensorType((), f32)], name="body")
    r.outputs = [Builder(r).value("add", list(r.args))]
    return r


def large_program(n_ops: int = 2000, seed: int = 0, rows: int = 4, cols: int = 6) -> Module:
    rng = random.Random(seed)
    S, K = (rows, cols), (rows,)
    fn = Function("main", [TensorType(S, f32), TensorType(S, f32), TensorType((cols, cols), f32),
                           TensorType((cols,), f32)])
    m = Module("large")
    m.add(fn)
    b = Builder(fn.body)
    x, y, w, bias = fn.args
    pool = [x, y]          # values of shape S
    outs = []

    def V(name, operands, attrs=None, result_types=None):
        return b.value(name, operands, attrs=attrs, result_types=result_types)

    def recent():
        return pool[-1 - min(len(pool) - 1, int(rng.expovariate(0.5)))]

    zero = V("constant", [], {"value": np.array(0.0, np.float32)})
    while len(fn.body.ops) < n_ops:
        kind = rng.choices(["chain", "diamond", "reduce", "dot", "transpose", "slice", "out"],
                           [6, 3, 2, 1, 1, 1, 1])[0]
        a = recent()
        if kind == "chain":
            for _ in range(rng.randint(1, 6)):
                a = V(rng.choice(UNARY), [a]) if rng.random() < 0.5 else \
                    V(rng.choice(BINARY), [a, rng.choice(pool)])
            pool.append(a)
        elif kind == "diamond":
            left = V(rng.choice(UNARY), [a])
            right = V(rng.choice(BINARY), [a, rng.choice(pool)])
            pool.append(V(rng.choice(BINARY), [left, right]))
        elif kind == "reduce":
            r = b.op("reduce", [a, zero], {"dimensions": [1]}, regions=[_add_body()]).results[0]
            r = V("multiply", [r, V("broadcast_in_dim", [V("constant", [], {"value": np.array(1.0 / cols, np.float32)})],
                                    {"broadcast_dimensions": []}, result_types=[TensorType(K, f32)])])
            back = V("broadcast_in_dim", [r], {"broadcast_dimensions": [0]}, result_types=[TensorType(S, f32)])
            pool.append(V("subtract", [a, back]))
        elif kind == "dot":
            d = V("dot_general", [a, w], {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]})
            bb = V("broadcast_in_dim", [bias], {"broadcast_dimensions": [1]}, result_types=[TensorType(S, f32)])
            pool.append(V("tanh", [V("add", [d, bb])]))
        elif kind == "transpose" and rows == cols:
            pool.append(V("transpose", [a], {"permutation": [1, 0]}))
        elif kind == "slice":
            s = V("slice", [a], {"start_indices": [0, 1], "limit_indices": [rows, cols]})
            pool.append(V("concatenate", [s, V("slice", [a], {"start_indices": [0, 0], "limit_indices": [rows, 1]})],
                          {"dimension": 1}))
        elif kind == "out":
            outs.append(a)
    fn.body.outputs = [pool[-1]] + outs[-8:]
    return m
