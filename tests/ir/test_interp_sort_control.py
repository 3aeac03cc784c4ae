"""Interpreter: sort (key comparators like JAX's, generic comparators through the vectorized merge
sort and the element-by-element fallback, stability, NaNs) and control flow (while, if, case,
call, fusion, regions reading enclosing values)."""
from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_same, jax_x64, module_from, region, run_op, sample

from hlo.ir import scalar, tensor
from hlo.ir.interpreter import run

jax = pytest.importorskip("jax")
lax = jax.lax


def _types(dt, payload):
    return [dt, dt] + ([payload, payload] if payload is not None else [])


def _lt(dt, ctype=None, direction="LT", payload=None):
    def fn(b, x, y, *rest):
        attrs = {"comparison_direction": direction}
        if ctype:
            attrs["compare_type"] = ctype
        return [b.value("compare", [x, y], attrs=attrs)]
    return region(_types(dt, payload), fn, name="comparator")


def _jax_style_comparator(dtypes, num_keys):
    """What jax.lax.sort writes: canonicalize -0 and NaN, then TOTALORDER lexicographic LT."""
    def fn(b, *args):
        def canon(x, dt):
            if np.dtype(dt).kind != "f":
                return x
            zero = b.value("constant", [], attrs={"value": np.array(0, dt)})
            nan = b.value("constant", [], attrs={"value": np.array(np.nan, dt)})
            is0 = b.value("compare", [x, zero], attrs={"comparison_direction": "EQ", "compare_type": "FLOAT"})
            x = b.value("select", [is0, zero, x])
            isnan = b.value("compare", [x, x], attrs={"comparison_direction": "NE", "compare_type": "FLOAT"})
            return b.value("select", [isnan, nan, x])

        def ct(dt):
            return {"f": "TOTALORDER", "i": "SIGNED", "u": "UNSIGNED", "b": "UNSIGNED"}[np.dtype(dt).kind]
        result = None
        for k in reversed(range(num_keys)):
            a, c = canon(args[2 * k], dtypes[k]), canon(args[2 * k + 1], dtypes[k])
            lt = b.value("compare", [a, c], attrs={"comparison_direction": "LT", "compare_type": ct(dtypes[k])})
            if result is None:
                result = lt
            else:
                eq = b.value("compare", [a, c], attrs={"comparison_direction": "EQ", "compare_type": ct(dtypes[k])})
                result = b.value("or", [lt, b.value("and", [eq, result])])
        return [result]
    return region([d for d in dtypes for _ in (0, 1)], fn, name="comparator")


def _generic_comparator(dt, payload=None):
    """|a| < |b| computed through abs: not a plain key compare of arguments, but a key function."""
    def fn(b, x, y, *rest):
        return [b.value("compare", [b.value("abs", [x]), b.value("abs", [y])],
                        attrs={"comparison_direction": "LT"})]
    return region(_types(dt, payload), fn, name="comparator")


def _mixed_comparator(dt, payload=None):
    """(x mod 3, x) lexicographic, written with select: not a key comparator the fast path
    parses, so it runs the vectorized merge sort."""
    def fn(b, x, y, *rest):
        three = b.value("constant", [], attrs={"value": np.array(3, dt)})
        xm, ym = b.value("remainder", [x, three]), b.value("remainder", [y, three])
        ne = b.value("compare", [xm, ym], attrs={"comparison_direction": "NE"})
        lt_m = b.value("compare", [xm, ym], attrs={"comparison_direction": "LT"})
        lt = b.value("compare", [x, y], attrs={"comparison_direction": "LT"})
        return [b.value("select", [ne, lt_m, lt])]
    return region(_types(dt, payload), fn, name="comparator")


def _unbatchable_lt(dt, payload=None):
    def fn(b, x, y, *rest):
        r = b.value("reshape", [x], result_types=[tensor((1,), dt)])
        x2 = b.value("reshape", [r], result_types=[tensor((), dt)])
        return [b.value("compare", [x2, y], attrs={"comparison_direction": "LT"})]
    return region(_types(dt, payload), fn, name="comparator")


@pytest.mark.parametrize("dt", [np.float32, np.int8, np.uint32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_jax_style_vs_jax(dt, dim):
    rng = np.random.default_rng(0)
    x = sample(rng, dt, (6, 40))
    got = run_op("sort", x, attrs={"dimension": dim, "is_stable": True}, regions=[_jax_style_comparator([dt], 1)])
    want = np.asarray(lax.sort(x, dimension=dim % 2))
    assert_same(got, want)


def test_sort_two_keys_and_payload_vs_jax():
    rng = np.random.default_rng(1)
    k1 = rng.integers(0, 3, (4, 50)).astype(np.float32)
    k1[0, :5] = [np.nan, -0.0, 0.0, -np.nan, np.inf]
    k2 = rng.integers(-5, 5, (4, 50)).astype(np.int32)
    pay = rng.standard_normal((4, 50)).astype(np.float64)
    got = run_op("sort", k1, k2, pay, attrs={"dimension": 1, "is_stable": True},
                 regions=[_jax_style_comparator([np.float32, np.int32, np.float64], 2)])
    with jax_x64():
        want = [np.asarray(w) for w in lax.sort((k1, k2, pay), dimension=1, num_keys=2)]
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("kind", ["plain", "totalorder", "descending", "abs", "mixed", "unbatchable"])
def test_sort_comparator_paths_are_stable(kind, monkeypatch):
    from hlo.ir.interp import sorting
    used = []
    for name in ("_merge_sort_perm", "_python_sort_perm", "_key_sort_perm"):
        orig = getattr(sorting, name)
        monkeypatch.setattr(sorting, name, lambda *a, _o=orig, _n=name: used.append(_n) or _o(*a))
    rng = np.random.default_rng(2)
    dt = np.dtype(np.int32)
    keys = rng.integers(-4, 5, (3, 37)).astype(dt)
    payload = np.broadcast_to(np.arange(37, dtype=np.int32), keys.shape).copy()
    p = np.dtype(np.int32)
    if kind == "plain":
        comp, key = _lt(dt, payload=p), keys
    elif kind == "totalorder":
        keys = keys.astype(np.float32)
        dt = keys.dtype
        comp, key = _lt(dt, "TOTALORDER", payload=p), keys
    elif kind == "descending":
        comp, key = _lt(dt, direction="GT", payload=p), -keys.astype(np.int64)
    elif kind == "abs":
        comp, key = _generic_comparator(dt, payload=p), np.abs(keys)
    elif kind == "mixed":
        comp, key = _mixed_comparator(dt, payload=p), np.fmod(keys, 3) * 100 + keys
    else:
        comp, key = _unbatchable_lt(dt, payload=p), keys

    def fn(b, x, pl):
        return b.op("sort", [x, pl], attrs={"dimension": 1, "is_stable": True}, regions=[comp]).results
    m = module_from([tensor(keys.shape, dt), tensor(keys.shape, np.int32)], fn)
    sk, sp = run(m, [keys, payload])
    order = np.argsort(key, axis=1, kind="stable")
    assert_same(sp, np.take_along_axis(payload, order, 1))
    assert_same(sk, np.take_along_axis(keys, order, 1))
    path = {"mixed": "_merge_sort_perm", "unbatchable": "_python_sort_perm"}.get(kind, "_key_sort_perm")
    assert path in used and (path == "_key_sort_perm" or used[-1] == path), used


def test_sort_large_generic_uses_vectorized_merge_sort():
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, (2, 3000)).astype(np.int32)
    got = run_op("sort", x, attrs={"dimension": 1}, regions=[_mixed_comparator(np.dtype(np.int32))])
    assert_same(got, np.take_along_axis(x, np.argsort(np.fmod(x, 3) * 10000 + x, axis=1, kind="stable"), 1))


def test_sort_rank0_and_length1():
    assert_same(run_op("sort", np.array(3.0), regions=[_lt(np.dtype(np.float64))]), np.array(3.0))
    x = np.arange(4.0).reshape(4, 1)
    assert_same(run_op("sort", x, attrs={"dimension": 1}, regions=[_lt(np.dtype(np.float64))]), x)


# ------------------------------------------------------------------------------------------
# Control flow and calls
# ------------------------------------------------------------------------------------------

def test_while_loop_factorial():
    def main(b, n):
        one = b.value("constant", [], attrs={"value": np.array(1, np.int64)})
        cond = region([np.int64, np.int64], lambda rb, i, acc: [
            rb.value("compare", [i, n], attrs={"comparison_direction": "LE"})], name="cond")  # reads %n
        body = region([np.int64, np.int64], lambda rb, i, acc: [
            rb.value("add", [i, one]), rb.value("multiply", [acc, i])], name="body")
        return b.op("while", [one, one], regions=[cond, body]).results[1:]
    m = module_from([scalar(np.int64)], main)
    assert int(run(m, [np.array(10, np.int64)])[0]) == 3628800
    assert int(run(m, [np.array(0, np.int64)])[0]) == 1


def _case_module(nbranches):
    def main(b, i, x):
        branches = []
        for k in range(nbranches):
            c = np.array(float(k + 1), np.float32)
            branches.append(region([], lambda rb, c=c: [
                rb.value("multiply", [x, rb.value("constant", [], attrs={"value": c})])], name=f"branch{k}"))
        return b.op("case", [i], regions=branches).results
    return module_from([scalar(np.int32), scalar(np.float32)], main)


def test_case_out_of_range_runs_last_branch():
    m = _case_module(3)
    x = np.array(2.0, np.float32)
    for i, want in [(0, 2.0), (1, 4.0), (2, 6.0), (3, 6.0), (-1, 6.0), (2**31 - 1, 6.0)]:
        assert float(run(m, [np.array(i, np.int32), x])[0]) == want


def test_if_selects_branch():
    def main(b, p, x):
        t = region([], lambda rb: [rb.value("negate", [x])], name="true_branch")
        f = region([], lambda rb: [x], name="false_branch")
        return b.op("if", [p], regions=[t, f]).results
    m = module_from([scalar(np.bool_), tensor((3,), np.float32)], main)
    x = np.array([1, -2, 3], np.float32)
    assert_same(run(m, [np.array(True), x])[0], -x)
    assert_same(run(m, [np.array(False), x])[0], x)


def test_call_and_fusion():
    from hlo.ir import Builder, Function, Module
    m = Module("t")
    helper = Function("sq", [tensor((4,), np.float32)], visibility="private")
    m.add(helper)
    hb = Builder(helper.body)
    helper.body.outputs = [hb.value("multiply", [helper.args[0], helper.args[0]])]
    main = Function("main", [tensor((4,), np.float32), tensor((4,), np.float32)])
    m.add(main)
    b = Builder(main.body)
    c = b.op("call", [main.args[0]], attrs={"callee": "sq"}, result_types=[tensor((4,), np.float32)]).result
    fused = region([tensor((4,), np.float32)], lambda rb, a: [rb.value("add", [a, main.args[1]])], name="fused")
    f = b.op("fusion", [c], attrs={"kind": "loop"}, regions=[fused]).result  # reads %arg1 from outside
    main.body.outputs = [f]
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    assert_same(run(m, [x, y])[0], x * x + y)
    assert_same(run(m, [x], function="sq")[0], x * x)
