"""Compositions of transformations against jax (values and output structure) on every target:
jit(vmap(grad)), grad(vmap), jacrev(jacfwd), jacfwd/jacrev/hessian with argnums and has_aux,
custom_vjp / custom_jvp under grad, vmap and jit (and their error messages), and checkpoint:
inside scan, and the temp bytes the buffer plan saves with it."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp

f32 = np.float32


def _same(a, b, tol=1e-4):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def _mlp(np_):
    def loss(p, x, y):
        h = np_.tanh(x @ p["w1"] + p["b1"])
        return ((h @ p["w2"] - y) ** 2).mean()
    return loss


def _params(rng):
    return {"w1": rng.standard_normal((5, 8)).astype(f32) * 0.3, "b1": np.zeros(8, f32),
            "w2": rng.standard_normal((8, 2)).astype(f32) * 0.3}


def test_per_example_grads_jit_vmap_grad(target):
    rng = np.random.default_rng(0)
    p, x, y = _params(rng), rng.standard_normal((16, 5)).astype(f32), rng.standard_normal((16, 2)).astype(f32)
    got = hlo.jit(hlo.vmap(hlo.grad(_mlp(hnp)), in_axes=(None, 0, 0)), target=target)(p, x, y)
    want = jax.jit(jax.vmap(jax.grad(_mlp(jnp)), in_axes=(None, 0, 0)))(p, x, y)
    _same(got, want)


def test_grad_of_vmap_and_vmap_of_vmap(target):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5)).astype(f32)

    def f(np_, vmap):
        return lambda x: vmap(lambda r: np_.sin(r) @ r)(x).sum()

    _same(hlo.jit(hlo.grad(f(hnp, hlo.vmap)), target=target)(x[0]), jax.grad(f(jnp, jax.vmap))(x[0]))
    _same(hlo.jit(hlo.vmap(hlo.vmap(lambda r: hnp.sin(r) @ r)), target=target)(x),
          jax.vmap(jax.vmap(lambda r: jnp.sin(r) @ r))(x))


@pytest.mark.parametrize("argnums", [0, (0, 1)])
@pytest.mark.parametrize("has_aux", [False, True])
def test_jacobians(argnums, has_aux, target):
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(3).astype(f32), rng.standard_normal((3, 2)).astype(f32)

    def f(np_):
        def g(x, w):
            out = {"a": np_.tanh(x @ w), "b": (x ** 3).sum() * w[0, 0]}
            return (out, x.sum()) if has_aux else out
        return g

    for name in ("jacfwd", "jacrev", "hessian"):
        got = hlo.jit(getattr(hlo, name)(f(hnp), argnums=argnums, has_aux=has_aux), target=target)(x, w)
        want = getattr(jax, name)(f(jnp), argnums=argnums, has_aux=has_aux)(x, w)
        _same(got, want)


def test_jacrev_of_jacfwd(target):
    x = np.linspace(-1, 1, 4).astype(f32)
    f = lambda np_: lambda x: np_.sin(x) * x.sum()
    _same(hlo.jit(hlo.jacrev(hlo.jacfwd(f(hnp))), target=target)(x), jax.jacrev(jax.jacfwd(f(jnp)))(x))


def _custom_vjp(np_, custom_vjp):
    @functools.partial(custom_vjp, nondiff_argnums=(0, 1))
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)

    def bwd(lo, hi, res, g):
        return (np_.clip(g, lo, hi),)

    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


def _custom_vjp_nondiff(np_, custom_vjp):
    @custom_vjp
    def f(x, y):
        return np_.sin(x) * y

    def fwd(x, y):
        return f(x, y), (np_.cos(x), np_.sin(x), y)

    def bwd(res, g):
        c, s, y = res
        return (c * g * y * 2.0, (s * g).sum())

    f.defvjp(fwd, bwd)
    return f


def test_custom_vjp_under_grad_vmap_jit(target):
    x = np.linspace(-1, 1, 5).astype(f32)
    hf, jf = _custom_vjp_nondiff(hnp, hlo.custom_vjp), _custom_vjp_nondiff(jnp, jax.custom_vjp)
    y = f32(3.0)
    _same(hlo.jit(hlo.grad(lambda x, y: hf(x, y).sum(), argnums=(0, 1)), target=target)(x, y),
          jax.grad(lambda x, y: jf(x, y).sum(), argnums=(0, 1))(x, y))
    # grad of a custom_vjp under vmap, and vmap inside grad
    _same(hlo.jit(hlo.vmap(hlo.grad(lambda x, y: hf(x, y).sum()), in_axes=(0, None)), target=target)(x[:, None], y),
          jax.vmap(jax.grad(lambda x, y: jf(x, y).sum()), in_axes=(0, None))(x[:, None], y))
    _same(hlo.jit(hlo.grad(lambda x: hlo.vmap(lambda r: hf(r, y).sum())(x).sum()), target=target)(x[:, None]),
          jax.grad(lambda x: jax.vmap(lambda r: jf(r, y).sum())(x).sum())(x[:, None]))
    hc, jc = _custom_vjp(hnp, hlo.custom_vjp), _custom_vjp(jnp, jax.custom_vjp)
    g = lambda c, np_: lambda x: (c(-0.1, 0.1, x) * 5.0).sum()
    _same(hlo.jit(hlo.grad(g(hc, hnp)), target=target)(x), jax.grad(g(jc, jnp))(x))


def test_custom_jvp(target):
    def make(np_, custom_jvp):
        @custom_jvp
        def f(x, y):
            return np_.sin(x) * y

        @f.defjvp
        def f_jvp(primals, tangents):
            x, y = primals
            xd, yd = tangents
            return f(x, y), np_.cos(x) * xd * y * 3.0 + np_.sin(x) * yd
        return f

    hf, jf = make(hnp, hlo.custom_jvp), make(jnp, jax.custom_jvp)
    x, y = np.linspace(0, 1, 5).astype(f32), f32(2.0)
    _same(hlo.jit(hlo.grad(lambda x, y: hf(x, y).sum(), argnums=(0, 1)), target=target)(x, y),
          jax.grad(lambda x, y: jf(x, y).sum(), argnums=(0, 1))(x, y))
    _same(hlo.jit(hlo.vmap(hlo.grad(hf), in_axes=(0, None)), target=target)(x, y),
          jax.vmap(jax.grad(jf), in_axes=(0, None))(x, y))
    _same(hlo.jit(hlo.jacfwd(hf), target=target)(x, y), jax.jacfwd(jf)(x, y))
    _same(hf(x, y), jf(x, y))


def test_custom_rule_errors():
    @hlo.custom_vjp
    def f(x):
        return x * 2

    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        f(np.ones(3, f32))
    f.defvjp(lambda x: x * 2, lambda r, g: (g,))
    with pytest.raises(TypeError, match="must produce a pair .list or tuple of length two. "
                                        "representing primal outputs and residuals"):
        hlo.grad(lambda x: f(x).sum())(np.ones(3, f32))
    f.defvjp(lambda x: (x * 2, None), lambda r, g: g)
    with pytest.raises(TypeError, match="bwd rule .* must produce a tuple of length equal to the number"):
        hlo.grad(lambda x: f(x).sum())(np.ones(3, f32))
    f.defvjp(lambda x: (x * 2, None), lambda r, g: (g.sum(),))
    with pytest.raises(TypeError, match=r"test_transforms.py:\d+: .*same shape/dtypes as the args tuple"):
        hlo.grad(lambda x: f(x).sum())(np.ones(3, f32))

    @hlo.custom_jvp
    def h(x):
        return x

    h.defjvp(lambda p, t: (p[0], (t[0], t[0])))
    with pytest.raises(TypeError, match="must produce primal and tangent outputs with equal container"):
        hlo.grad(lambda x: h(x).sum())(np.ones(3, f32))


def test_checkpoint_inside_scan(target):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 4)).astype(f32) * 0.5
    xs = rng.standard_normal((5, 4)).astype(f32)

    def f(np_, lax_, ck):
        def loss(w, xs):
            def step(c, x):
                return ck(lambda c, x: np_.tanh(c @ w + x))(c, x), c.sum()
            c, ys = lax_.scan(step, np_.zeros(4, np.float32), xs)
            return (c ** 2).sum() + ys.sum()
        return loss

    _same(hlo.jit(hlo.grad(f(hnp, hlo.lax, hlo.checkpoint)), target=target)(w, xs),
          jax.grad(f(jnp, jax.lax, jax.checkpoint))(w, xs))


def _deep_mlp(np_, ck, policy=None):
    def layer(x, w1, w2):
        return np_.tanh(np_.tanh(x @ w1) @ w2)

    def loss(ws, x):
        for w1, w2 in ws:
            x = (ck(layer, policy=policy) if policy is not None else ck(layer))(x, w1, w2)
        return (x ** 2).sum()
    return loss


def test_checkpoint_saves_temp_bytes_in_the_buffer_plan():
    """Four layers with a 4x-wide hidden activation: without checkpoint the backward pass keeps
    every hidden activation; with it, only each layer's input (plus one recomputed layer)."""
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((64, 256)).astype(f32) * 0.1,
           rng.standard_normal((256, 64)).astype(f32) * 0.1) for _ in range(4)]
    x = rng.standard_normal((128, 64)).astype(f32)
    plain = hlo.jit(hlo.grad(_deep_mlp(hnp, lambda f: f)), target="cpu")
    ck = hlo.jit(hlo.grad(_deep_mlp(hnp, hlo.checkpoint)), target="cpu")
    want = jax.grad(_deep_mlp(jnp, jax.checkpoint))(ws, x)
    _same(ck(ws, x), want)
    _same(plain(ws, x), want)
    t_plain = plain.lower(ws, x).compile().memory_analysis().temp_size_in_bytes
    t_ck = ck.lower(ws, x).compile().memory_analysis().temp_size_in_bytes
    hidden = 128 * 256 * 4
    assert t_ck + 2 * hidden <= t_plain, (t_ck, t_plain)
    # the recomputation survives the passes: the optimized program computes the first layer's
    # hidden activation twice (forward, and again behind the optimization barrier)
    text = ck.lower(ws, x).compile().as_text()
    assert "optimization_barrier" in text
    # policy: saving the dots keeps them instead of recomputing (more temp than no policy)
    saved = hlo.jit(hlo.grad(_deep_mlp(hnp, hlo.checkpoint, hlo.checkpoint_policies.dots_saveable)),
                    target="cpu")
    _same(saved(ws, x), want)
    assert saved.lower(ws, x).compile().memory_analysis().temp_size_in_bytes > t_ck
