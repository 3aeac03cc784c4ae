"""Printing and calling Python from compiled code: ``hlo.debug.print`` and ``hlo.pure_callback``
on the cpu and interpreter targets (in program order, with run-time values, in loops and
branches, under vmap and grad), and the errors: a wrong result from the callback, a target that
cannot call back, saving, the persistent cache."""
import os

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.errors import CallbackError, UnsupportedError
from hlo.runtime.hlox import SaveError

TARGETS = ["cpu", "interpreter"]
HERE = os.path.basename(__file__)


def lines(capsys):
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("target", TARGETS)
def test_prints_in_program_order_with_runtime_values(target, capsys):
    def f(x, w):
        hlo.debug.print("x {} w {w}", x, w=w)
        y = x * 2.0
        hlo.debug.print("y {y} sum {s}", y=y, s=y.sum())
        return y + w

    g = hlo.jit(f, target=target)
    x = np.arange(3, dtype=np.float32)
    for w in (np.float32(1.0), np.float32(-2.5)):
        out = g(x, w)
        np.testing.assert_allclose(out, x * 2 + w)
        assert lines(capsys) == [f"x {x} w {w}", f"y {x * 2} sum {(x * 2).sum()}"]


@pytest.mark.parametrize("target", TARGETS)
def test_every_loop_iteration_and_the_branch_taken_print(target, capsys):
    def f(x, n):
        def body(i, c):
            hlo.debug.print("iter {i}: {c}", i=i, c=c)
            return c * 2.0

        c = hlo.lax.fori_loop(0, n, body, x)
        return hlo.lax.cond(c.sum() > 10.0,
                            lambda c: (hlo.debug.print("big {}", c), c - 1.0)[1],
                            lambda c: (hlo.debug.print("small {}", c), c + 1.0)[1], c)

    g = hlo.jit(f, target=target)
    x = np.array([1.0, 2.0], np.float32)
    out = g(x, np.int32(3))
    np.testing.assert_allclose(out, x * 8 - 1)
    assert lines(capsys) == [f"iter {i}: {x * 2 ** i}" for i in range(3)] + [f"big {x * 8}"]
    g(x, np.int32(1))
    assert lines(capsys) == [f"iter 0: {x}", f"small {x * 2}"]


@pytest.mark.parametrize("target", TARGETS)
def test_pure_callback_results_feed_later_computation(target, capsys):
    calls = []

    def host(a, b):
        calls.append((a.copy(), b.copy()))
        return {"s": np.sin(a) * b, "n": np.array(a.size, np.int32)}

    def f(x):
        y = x + 1.0
        r = hlo.pure_callback(host, {"s": hlo.ShapeDtypeStruct((4,), np.float32),
                                     "n": hlo.ShapeDtypeStruct((), np.int32)}, y, b=2.0)
        return r["s"] * 3.0 + r["n"]

    x = np.linspace(0, 1, 4, dtype=np.float32)
    out = hlo.jit(f, target=target)(x)
    np.testing.assert_allclose(out, np.sin(x + 1) * 2 * 3 + 4, rtol=1e-6)
    np.testing.assert_allclose(calls[0][0], x + 1)


def test_a_callback_reads_operands_in_any_layout():
    seen = []

    def f(x):
        y = x * 2.0
        hlo.debug.callback(lambda v: seen.append(v), y)  # y may be stored transposed
        return hnp.transpose(y) + 1.0

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(hlo.jit(f, target="cpu")(x), (x * 2).T + 1)
    np.testing.assert_array_equal(seen[0], x * 2)


@pytest.mark.parametrize("target", TARGETS)
def test_vmap_prints_once_per_example_and_batches_pure_callback(target, capsys):
    def f(x, y):
        hlo.debug.print("x {x} y {y}", x=x, y=y)
        return x * y

    xs = np.arange(3, dtype=np.float32)
    out = hlo.jit(hlo.vmap(f, in_axes=(0, None)), target=target)(xs, np.float32(2))
    np.testing.assert_allclose(out, xs * 2)
    assert lines(capsys) == [f"x {x} y 2.0" for x in xs]

    shapes = []

    def host(a, b):
        shapes.append((a.shape, b.shape))
        return a + b

    for method, want in [("sequential", [((3,), (3,))] * 2), ("expand_dims", [((2, 3), (1, 3))]),
                         ("broadcast_all", [((2, 3), (2, 3))])]:
        shapes.clear()

        def g(a, b, method=method):
            return hlo.pure_callback(host, hlo.ShapeDtypeStruct(a.shape, a.dtype), a, b,
                                     vmap_method=method)

        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.ones(3, np.float32)
        out = hlo.jit(hlo.vmap(g, in_axes=(0, None)), target=target)(a, b)
        np.testing.assert_allclose(out, a + b)
        assert shapes == want, method


def test_vmap_of_a_pure_callback_without_vmap_method_names_the_line():
    def g(a):
        return hlo.pure_callback(np.sin, hlo.ShapeDtypeStruct(a.shape, a.dtype), a)  # the line

    with pytest.raises(UnsupportedError, match=rf"{HERE}:\d+: hlo.vmap of hlo.pure_callback: it needs vmap_method"):
        hlo.vmap(g)(np.ones((2, 3), np.float32))


@pytest.mark.parametrize("target", TARGETS)
def test_grad_prints_the_primal_once_and_pure_callback_has_no_derivative(target, capsys):
    def loss(w):
        y = hnp.tanh(w) * 3.0
        hlo.debug.print("loss {}", y.sum())
        return y.sum()

    w = np.array([0.1, -0.4], np.float32)
    g = hlo.jit(hlo.grad(loss), target=target)(w)
    np.testing.assert_allclose(g, 3 * (1 - np.tanh(w) ** 2), rtol=1e-5)
    assert lines(capsys) == [f"loss {np.float32((np.tanh(w) * 3).sum())}"]

    def bad(w):
        return hlo.pure_callback(np.sin, hlo.ShapeDtypeStruct(w.shape, w.dtype), w).sum()

    with pytest.raises(UnsupportedError, match=rf"{HERE}:\d+: hlo.pure_callback has no derivative"):
        hlo.jit(hlo.grad(bad), target=target)(w)


@pytest.mark.parametrize("target", TARGETS)
def test_the_backward_pass_does_not_print_again(target, capsys):
    """Loops, branches and checkpoints recompute their forward ops in the backward pass; their
    prints run once, in the forward pass (as in jax)."""
    def loss(w):
        def body(i, c):
            hlo.debug.print("it {} {}", i, c)
            return c * w

        c = hlo.lax.fori_loop(0, 2, body, w)
        c = hlo.lax.cond(c.sum() > 0, lambda c: (hlo.debug.print("T {}", c), c * 2.0)[1],
                         lambda c: c, c)
        c = hlo.checkpoint(lambda c: (hlo.debug.print("ck {}", c), hnp.sin(c))[1])(c)
        return c.sum()

    w = np.array([0.5, 1.0], np.float32)
    g = hlo.jit(hlo.grad(loss), target=target)(w)
    c2 = w ** 3
    np.testing.assert_allclose(g, np.cos(2 * c2) * 2 * 3 * w ** 2, rtol=1e-5)
    assert lines(capsys) == [f"it 0 {w}", f"it 1 {w * w}", f"T {c2}", f"ck {2 * c2}"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fast", [True, False])
def test_a_wrong_result_or_an_exception_in_the_callback_is_raised_by_the_call(target, fast):
    def f(x):
        return hlo.pure_callback(lambda a: np.zeros(5, np.float32),
                                 hlo.ShapeDtypeStruct((3,), np.float32), x) + 1.0  # line

    g = hlo.jit(f, target=target)
    x = np.ones(3, np.float32)
    for _ in range(2 if fast else 1):  # the second call takes jit's fast path
        with pytest.raises(CallbackError, match=rf"{HERE}:\d+: the callback of hlo.pure_callback "
                                                r"returned float32\[5\] for result 0, expected float32\[3\]"):
            g(x)

    class Boom(Exception):
        pass

    def host(a):
        raise Boom("from the host")

    h = hlo.jit(lambda x: hlo.pure_callback(host, hlo.ShapeDtypeStruct((3,), np.float32), x),
                target=target)
    for _ in range(2):
        with pytest.raises(Boom, match="from the host"):
            h(x)
    # the executable still works after a failed call
    ok = hlo.jit(lambda x: hlo.pure_callback(np.cos, hlo.ShapeDtypeStruct((3,), np.float32), x),
                 target=target)
    np.testing.assert_allclose(ok(x), np.cos(x))


def test_callbacks_run_outside_a_trace(capsys):
    hlo.debug.print("eager {} {k}", np.float32(1.5), k=np.arange(2))
    assert lines(capsys) == ["eager 1.5 [0 1]"]
    out = hlo.pure_callback(lambda a: a * 2, hlo.ShapeDtypeStruct((2,), np.int64), np.arange(2))
    np.testing.assert_array_equal(out, [0, 2])


def test_a_program_with_a_callback_cannot_be_saved(tmp_path):
    def f(x):
        hlo.debug.print("x {}", x)
        return x + 1.0

    c = hlo.jit(f, target="cpu").lower(np.ones(3, np.float32)).compile()
    with pytest.raises(SaveError, match=r"calls back into Python \(hlo.debug.print at .*"
                                        r"cannot hold the Python callable"):
        c.save(str(tmp_path / "f.hlox"))
    assert not (tmp_path / "f.hlox").exists()


def test_a_program_with_a_callback_is_not_put_in_the_persistent_cache(tmp_path, monkeypatch, capsys):
    from hlo.staging import cache as compile_cache
    monkeypatch.setenv("HLO_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HLO_CACHE", "1")

    def f(x):
        hlo.debug.print("v {}", x)
        return x * 3.0

    x = np.ones(2, np.float32)
    hlo.jit(f, target="cpu")(x)
    hlo.jit(f, target="cpu")(x)  # a second trace: a fresh callable, compiled again
    assert lines(capsys) == ["v [1. 1.]"] * 2
    assert not any(n.endswith(".hlox") for _, _, fs in os.walk(tmp_path) for n in fs)
    low = hlo.jit(f, target="cpu").lower(x)
    assert "calls back into Python" in compile_cache.bypass_reason("cpu", None, low.ir)


def test_a_target_that_cannot_call_back_refuses_at_compile_time():
    from hlo.backends.kernel_emitter import KernelEmitter
    from hlo.staging.targets import check_declined_ops

    def f(x):
        hlo.debug.print("x {}", x)  # the line named
        return x

    low = hlo.jit(f).lower(np.ones(2, np.float32))
    with pytest.raises(UnsupportedError, match=rf"{HERE}:\d+: hlo.debug.print cannot be compiled "
                                               r"for target 'gpu': this target cannot call back"):
        check_declined_ops(low.ir, "gpu", KernelEmitter.declined_ops())


def test_cuda_refuses_a_print_at_compile_time():
    def f(x):
        hlo.debug.print("x {}", x)
        return x

    with pytest.raises(UnsupportedError, match=rf"{HERE}:\d+: hlo.debug.print cannot be compiled for target 'cuda'"):
        hlo.jit(f).lower(np.ones(2, np.float32)).compile("cuda")


def test_passes_keep_order_and_never_merge_drop_or_fold_callbacks(capsys):
    def f(x):
        hlo.debug.print("a {}", x)
        hlo.debug.print("a {}", x)  # identical: not merged
        c = hlo.pure_callback(lambda: np.float32(7), hlo.ShapeDtypeStruct((), np.float32))  # constant operands: not folded
        hlo.pure_callback(lambda v: (print("unused ran"), v)[1],
                          hlo.ShapeDtypeStruct((2,), np.float32), x)  # result unused: not dropped
        hlo.lax.fori_loop(0, 2, lambda i, v: (hlo.debug.print("loop {}", i), v)[1], x)  # result unused
        hlo.debug.print("b {}", c)
        return x + c

    out = hlo.jit(f, target="cpu")(np.zeros(2, np.float32))
    np.testing.assert_allclose(out, [7, 7])
    assert lines(capsys) == ["a [0. 0.]", "a [0. 0.]", "unused ran", "loop 0", "loop 1", "b 7.0"]


def test_the_ir_of_a_print():
    def f(x):
        hlo.debug.print("x {}", x)
        return x

    text = hlo.jit(f).lower(np.ones(2, np.float32)).as_text()
    assert 'host_callback(%arg0) {callback_id = ' in text and 'what = "hlo.debug.print"} : ()' in text


# --- issue 35: lossless result casts; the user's exception through loops --------------------

@pytest.mark.parametrize("target", TARGETS)
def test_a_wider_integer_result_that_does_not_fit_is_a_callback_error(target):
    # [300, -200, 5] declared int8 was cast silently to [44, 56, 5]
    def f(x):
        return hlo.pure_callback(lambda v: np.array([300, -200, 5], np.int64),
                                 hlo.ShapeDtypeStruct((3,), np.int8), x)
    with pytest.raises(CallbackError, match=r"test_callbacks.py:\d+: .*value 300 \(element 0\) "
                                            r"int8 cannot hold") as e:
        hlo.jit(f, target=target)(np.float32(1))
    assert "44" not in str(e.value)


def test_result_casts_are_kept_exactly_when_the_values_survive():
    # property: over random integer results and declared types, a cast happens iff every
    # value survives it, and then gives the same values
    rng = np.random.default_rng(35)
    kinds = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.bool_]
    for trial in range(60):
        src = kinds[rng.integers(len(kinds))]
        dst = kinds[rng.integers(len(kinds))]
        if not np.can_cast(src, dst, "same_kind"):
            continue
        info = np.iinfo(src) if src is not np.bool_ else None
        big = rng.random() < 0.5
        lo, hi = (int(info.min), int(info.max)) if info is not None and big else (0, 2)
        vals = rng.integers(lo, hi, size=4, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)
        out = vals.astype(src)

        def f(x, out=out, dst=dst):
            return hlo.pure_callback(lambda v: out, hlo.ShapeDtypeStruct((4,), dst), x)
        with np.errstate(all="ignore"):
            survives = np.array_equal(out.astype(dst).astype(src), out)
        if survives:
            np.testing.assert_array_equal(hlo.jit(f, target="interpreter")(np.float32(0)),
                                          out.astype(dst))
        else:
            with pytest.raises(CallbackError, match="cannot hold"):
                hlo.jit(f, target="interpreter")(np.float32(0))


def test_float_results_may_round_but_not_overflow():
    def f(x, v):
        return hlo.pure_callback(lambda _: v, hlo.ShapeDtypeStruct((2,), np.float32), x)
    got = hlo.jit(lambda x: f(x, np.array([0.1, -2.5])))(np.float32(0))
    np.testing.assert_array_equal(got, np.array([0.1, -2.5], np.float32))
    with pytest.raises(CallbackError, match="1e\\+300"):
        hlo.jit(lambda x: f(x, np.array([1.0, 1e300])))(np.float32(0))


class _Boom(Exception):
    pass


@pytest.mark.parametrize("target", TARGETS)
def test_a_callback_raising_inside_a_loop_raises_the_users_exception(target):
    def cb(x):
        if x > 2:
            raise _Boom("from the callback")
        return x

    def f(x):
        def body(i, acc):
            return acc + hlo.pure_callback(cb, hlo.ShapeDtypeStruct((), np.float32), acc)
        return hlo.lax.fori_loop(0, 5, body, x)
    with pytest.raises(_Boom, match="from the callback"):
        hlo.jit(f, target=target)(np.float32(1))
