"""hlo.shard_map with hlo.lax's collectives over mesh axes, on CPU devices in one process:
each collective against numpy on 1, 2, 4 and 8 devices, a data-parallel gradient against the
single-device one, a Megatron-style tensor-parallel MLP against the unsharded one, gradients
through the collectives, vmap of them, device_put and the global array."""
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.runtime.cpu import devices as cpu_devices
from hlo.sharding import Mesh, NamedSharding, P


@pytest.fixture(autouse=True)
def eight_devices(monkeypatch):
    monkeypatch.setenv("HLO_CPU_DEVICES", "8")
    cpu_devices.reset()
    yield
    cpu_devices.reset()


def mesh(*shape, names=None):
    n = int(np.prod(shape))
    names = names or ("x", "y", "z")[:len(shape)]
    return Mesh(np.array(hlo.devices("cpu")[:n]).reshape(shape), names)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_collectives_over_one_axis(n):
    m = mesh(n)
    x = rand(2 * n, 3 * n)
    blocks = np.split(x, n, axis=0)

    def f(b):
        return (hlo.lax.psum(b, "x"), hlo.lax.pmean(b, "x"), hlo.lax.pmax(b, "x"), hlo.lax.pmin(b, "x"),
                hlo.lax.all_gather(b, "x"), hlo.lax.all_gather(b, "x", axis=1, tiled=True),
                hlo.lax.psum_scatter(b, "x", scatter_dimension=1, tiled=True),
                hlo.lax.all_to_all(b, "x", 1, 0, tiled=True),
                hlo.lax.ppermute(b, "x", [(i, (i + 1) % n) for i in range(n)]),
                hlo.lax.axis_index("x").reshape(1))
    outs = hlo.shard_map(f, m, in_specs=P("x"), out_specs=P("x"))(x)
    got = [np.split(np.asarray(o), n, axis=0) for o in outs]
    total = sum(blocks[1:], blocks[0])
    for i in range(n):
        np.testing.assert_allclose(got[0][i], total, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[1][i], total / n, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got[2][i], np.max(np.stack(blocks), 0))
        np.testing.assert_array_equal(got[3][i], np.min(np.stack(blocks), 0))
        np.testing.assert_array_equal(got[4][i], np.stack(blocks))
        np.testing.assert_array_equal(got[5][i], np.concatenate(blocks, axis=1))
        np.testing.assert_allclose(got[6][i], total[:, 3 * i:3 * i + 3], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got[7][i], np.concatenate([b[:, 3 * i:3 * i + 3] for b in blocks], 0))
        np.testing.assert_array_equal(got[8][i], blocks[(i - 1) % n])
        assert int(got[9][i][0]) == i


def test_collectives_over_one_axis_of_a_2d_mesh():
    m = mesh(2, 4)  # x: 2, y: 4
    x = rand(2, 4, 3)

    def f(b):  # b: [1, 1, 3]
        return (hlo.lax.psum(b, "y"), hlo.lax.psum(b, "x"), hlo.lax.psum(b, ("x", "y")),
                hlo.lax.axis_index("x").reshape(1, 1, 1), hlo.lax.axis_index("y").reshape(1, 1, 1))
    sy, sx, sxy, ix, iy = hlo.shard_map(f, m, in_specs=P("x", "y"), out_specs=P("x", "y"))(x)
    np.testing.assert_allclose(np.asarray(sy), np.broadcast_to(x.sum(1, keepdims=True), x.shape), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(sx), np.broadcast_to(x.sum(0, keepdims=True), x.shape), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(sxy), np.broadcast_to(x.sum((0, 1), keepdims=True), x.shape),
                               rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(ix)[..., 0], np.repeat([[0], [1]], 4, axis=1))
    np.testing.assert_array_equal(np.asarray(iy)[..., 0], np.tile(np.arange(4), (2, 1)))


def _loss(w, x, y):
    h = hnp.tanh(x @ w["w1"] + w["b1"])
    p = h @ w["w2"]
    return hnp.mean((p - y) ** 2)


@pytest.mark.parametrize("n", [2, 4])
def test_data_parallel_gradient_equals_the_single_device_gradient(n):
    w = {"w1": rand(8, 16, seed=1), "b1": rand(16, seed=2), "w2": rand(16, 4, seed=3)}
    x, y = rand(32, 8, seed=4), rand(32, 4, seed=5)

    def step(w, x, y):
        g = hlo.grad(_loss)(w, x, y)
        return hlo.lax.pmean(g, "batch")
    m = Mesh(hlo.devices("cpu")[:n], ("batch",))
    g = hlo.shard_map(step, m, in_specs=(P(), P("batch"), P("batch")), out_specs=P())(w, x, y)
    want = hlo.grad(_loss)(w, x, y)
    for k in w:
        np.testing.assert_allclose(np.asarray(g[k]), np.asarray(want[k]), rtol=2e-5, atol=2e-6)
        assert g[k].sharding == NamedSharding(m, P())


def test_megatron_tensor_parallel_mlp_equals_the_unsharded_one():
    x, w1, w2 = rand(8, 16, seed=1), rand(16, 32, seed=2), rand(32, 16, seed=3)

    def mlp(x, w1, w2):
        return hnp.maximum(x @ w1, 0) @ w2

    def tp(x, w1, w2):  # w1 column-sharded, w2 row-sharded: one all-reduce
        return hlo.lax.psum(hnp.maximum(x @ w1, 0) @ w2, "model")
    for n in (2, 4):
        m = Mesh(hlo.devices("cpu")[:n], ("model",))
        out = hlo.shard_map(tp, m, in_specs=(P(), P(None, "model"), P("model", None)), out_specs=P())(x, w1, w2)
        np.testing.assert_allclose(np.asarray(out), np.asarray(mlp(x, w1, w2)), rtol=1e-5, atol=1e-5)


def test_the_gradient_of_psum_is_a_psum():
    # L = sum over devices j of sum(psum_i(x_i^2)): dL/dx_i = n * 2 x_i (every device's result
    # depends on x_i)
    n = 4
    m = mesh(n)
    x = rand(n * 3)

    def f(b):
        return hlo.grad(lambda v: hnp.sum(hlo.lax.psum(v * v, "x")))(b)
    g = hlo.shard_map(f, m, in_specs=P("x"), out_specs=P("x"))(x)
    np.testing.assert_allclose(np.asarray(g), n * 2 * x, rtol=1e-6)


def test_gradients_of_all_gather_and_psum_scatter_and_ppermute():
    n = 4
    m = mesh(n)
    x = rand(n * 2, 3)
    c = rand(n * 2, 3, seed=7)  # weights on the gathered result

    def f(b, cw):
        gath = lambda v: hnp.sum(hlo.lax.all_gather(v, "x", tiled=True) * cw)
        scat = lambda v: hnp.sum(hlo.lax.psum_scatter(v, "x", tiled=True) ** 2)
        perm = lambda v: hnp.sum(hlo.lax.ppermute(v, "x", [(i, (i + 1) % n) for i in range(n)]) * v)
        return hlo.grad(gath)(b), hlo.grad(scat)(hlo.lax.all_gather(b, "x", tiled=True)), hlo.grad(perm)(b)
    gg, gs, gp = hlo.shard_map(f, m, in_specs=(P("x"), P()), out_specs=(P("x"), P("x"), P("x")))(x, c)
    # all_gather: every device's loss reads all blocks with weights c: dL/dx_i = n * c[block i]
    np.testing.assert_allclose(np.asarray(gg), n * c, rtol=1e-6)
    # psum_scatter of the gathered x (the same on every device): device i keeps
    # y_i = sum_j v_j[block i] = n x[block i] and L_i = |y_i|^2, so dL/dv_j = concat_i 2 y_i = 2 n x
    full = np.asarray(gs).reshape(n, n * 2, 3)
    for i in range(n):
        np.testing.assert_allclose(full[i], 2 * n * x, rtol=1e-5)
    # ppermute: L_j = sum(x_{j-1} * x_j): dL/dx_i = x_{i-1} + x_{i+1}
    blocks = np.split(x, n)
    want = np.concatenate([blocks[(i - 1) % n] + blocks[(i + 1) % n] for i in range(n)])
    np.testing.assert_allclose(np.asarray(gp), want, rtol=1e-6)


def test_vmap_of_a_function_with_collectives():
    n = 4
    m = mesh(n)
    x = rand(5, n * 2)

    def f(b):  # b: [5, 2]; vmap over the 5 rows, psum and all_gather per row
        return hlo.vmap(lambda r: (hlo.lax.psum(r, "x"), hlo.lax.all_gather(r, "x", tiled=True)))(b)
    s, g = hlo.shard_map(f, m, in_specs=P(None, "x"), out_specs=(P(None, "x"), P(None, "x")))(x)
    blocks = np.split(x, n, axis=1)
    total = sum(blocks[1:], blocks[0])
    for i, blk in enumerate(np.split(np.asarray(s), n, axis=1)):
        np.testing.assert_allclose(blk, total, rtol=1e-6)
    for blk in np.split(np.asarray(g), n, axis=1):
        np.testing.assert_array_equal(blk, x)


def test_device_put_and_the_global_array():
    m = mesh(2, 2)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = hlo.device_put(x, NamedSharding(m, P("x", "y")))
    assert a.shape == (4, 6) and a.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(a), x)
    shards = a.addressable_shards
    assert [s.device.id for s in shards] == [0, 1, 2, 3]
    assert shards[1].index == (slice(0, 2), slice(3, 6))
    np.testing.assert_array_equal(shards[3].data, x[2:, 3:])
    # a sharded argument laid out as the in_spec says is used as it is
    out = hlo.shard_map(lambda b: b * 2, m, in_specs=P("x", "y"), out_specs=P("x", "y"))(a)
    np.testing.assert_array_equal(np.asarray(out), 2 * x)
    r = hlo.device_put(x, NamedSharding(m, P(None, "y")))  # replicated along x
    np.testing.assert_array_equal(np.asarray(r), x)
    assert len(r.addressable_shards) == 4 and r.addressable_shards[2].index == (slice(0, 4), slice(0, 3))


def test_errors_name_what_is_wrong():
    m = mesh(4)
    with pytest.raises(hlo.errors.ShapeError, match="unbound axis name 'y'"):
        hlo.shard_map(lambda b: hlo.lax.psum(b, "y"), m, in_specs=P("x"), out_specs=P("x"))(rand(8))
    with pytest.raises(hlo.errors.ShapeError, match="does not split into 4 blocks"):
        hlo.shard_map(lambda b: b, m, in_specs=P("x"), out_specs=P("x"))(rand(6))
    with pytest.raises(hlo.errors.ShapeError, match="unbound axis name"):
        hlo.jit(lambda b: hlo.lax.psum(b, "x"))(rand(4))
    with pytest.raises(hlo.errors.ShapeError, match="names axis 'q'"):
        NamedSharding(m, P("q"))
    sm = hlo.shard_map(lambda b: b, m, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(hlo.errors.UnsupportedError, match="inside a traced function"):
        hlo.jit(lambda v: sm(v))(rand(8))


@pytest.mark.parametrize("n", [2, 4])
def test_a_data_parallel_sgd_step_of_the_transformer_layer(n, tmp_path):
    """The bench's transformer layer (8 heads), batch sharded over n devices, gradients
    averaged with pmean: the same step as on one device, within float32 tolerance, compiled
    once."""
    from bench.workloads import Ops, _in_transformer, transformer_layer
    ops = Ops(hnp, grad=hlo.grad)
    rng = np.random.default_rng(0)
    x, *params = _in_transformer(rng, {"x": (8, 4, 64), "ffn": 128}, np.float32)
    y = rand(8, 4, 64, seed=9)
    lr = 0.1

    def loss(params, x, y):
        return hnp.mean((transformer_layer(ops, x, *params) - y) ** 2)

    def step(params, x, y):
        g = hlo.lax.pmean(hlo.grad(loss)(params, x, y), "batch")
        return [p - lr * gp for p, gp in zip(params, g)]

    m = Mesh(hlo.devices("cpu")[:n], ("batch",))
    sm = hlo.shard_map(step, m, in_specs=(P(), P("batch"), P("batch")), out_specs=P())
    new = sm(params, x, y)
    g1 = hlo.grad(loss)(params, x, y)
    for p, q, g in zip(params, new, g1):
        np.testing.assert_allclose(np.asarray(q) - p, -lr * np.asarray(g), rtol=1e-3, atol=2e-6)
    again = sm([np.asarray(q) for q in new], x, y)  # a second step: the same executable
    assert len(sm._compiled) == 1 and len(again) == len(params)
    sm.save(tmp_path / "step.hlox", params, x, y)  # saved with its mesh, loaded, the same step
    loaded = hlo.aot.load_sharded(tmp_path / "step.hlox")
    for q, r in zip(new, loaded(params, x, y)):
        np.testing.assert_array_equal(np.asarray(q), np.asarray(r))


def test_a_sharded_program_saves_and_loads_in_a_fresh_process(tmp_path):
    import subprocess
    import sys
    m = mesh(4)

    def step(w, x):
        return w - 0.1 * hlo.lax.pmean(hlo.grad(lambda w: hnp.mean((x @ w) ** 2))(w), "x")
    sm = hlo.shard_map(step, m, in_specs=(P(), P("x")), out_specs=P())
    w, x = rand(6, 3, seed=1), rand(8, 6, seed=2)
    path = tmp_path / "step.hlox"
    sm.save(path, hlo.ShapeDtypeStruct(w.shape, w.dtype), x)
    want = np.asarray(sm(w, x))
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x.npy", x)
    code = ("import numpy as np, hlo\n"
            f"f = hlo.aot.load_sharded({str(path)!r})\n"
            f"out = f(np.load({str(tmp_path / 'w.npy')!r}), np.load({str(tmp_path / 'x.npy')!r}))\n"
            f"np.save({str(tmp_path / 'out.npy')!r}, np.asarray(out))\n")
    import os
    env = dict(os.environ, HLO_CPU_DEVICES="4")
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), want)
    env["HLO_CPU_DEVICES"] = "2"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "runs on a mesh of 4 CPU devices" in r.stderr
    with pytest.raises(hlo.LoadError, match="load it with hlo.aot.load_sharded"):
        hlo.load(path)


@pytest.mark.parametrize("which", ["pmax", "pmin"])
def test_gradients_of_pmax_and_pmin_are_jax_reduce_max_over_the_devices(which):
    """jax has no rule for pmax / pmin (jax-ml/jax#7167); the reference is jax.grad of the same
    program written globally, the devices as an array dimension reduced by jnp.max / jnp.min:
    the summed cotangent goes to the devices whose operand equals the result, ties split."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    n = 4
    m = mesh(n)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, (n * 2, 3)).astype(np.float32)   # small integers: many ties
    c = rand(n * 2, 3, seed=6)                                # device i's weights c_i
    red = getattr(hlo.lax, which)

    def f(b, cw):
        return hlo.grad(lambda v: hnp.sum(red(v * v, "x") * cw))(b)
    g = hlo.shard_map(f, m, in_specs=(P("x"), P("x")), out_specs=P("x"))(x, c)
    jred = jnp.max if which == "pmax" else jnp.min

    def total(xg):  # the sum over devices i of device i's loss
        return jnp.sum(jred((xg * xg).reshape(n, 2, 3), axis=0)[None] * c.reshape(n, 2, 3))
    want = jax.grad(total)(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-6, atol=1e-6)
    assert np.count_nonzero(np.asarray(g)) < x.size   # the rule chose devices (with ties)


def test_the_gradient_of_all_to_all_is_all_to_all_back():
    n = 4
    m = mesh(n)
    x = rand(2 * n, 2 * n)  # device i: x_i [2, 8]
    c = rand(2 * n, 2, seed=3)  # weights on each device's [8, 2] result

    def f(b, cw):
        return hlo.grad(lambda v: hnp.sum(hlo.lax.all_to_all(v, "x", 1, 0, tiled=True) * cw))(b)
    g = hlo.shard_map(f, m, in_specs=(P("x"), P()), out_specs=P("x"))(x, c)
    # y_j stacks x_i[:, 2j:2j+2] at rows 2i:2i+2, so dL/dx_i[:, 2j:2j+2] = c[2i:2i+2]
    want = np.concatenate([np.tile(c[2 * i:2 * i + 2], (1, n)) for i in range(n)])
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)
