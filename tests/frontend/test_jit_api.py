"""hlo.jit's contract: pytree arguments and results, static arguments, the compilation cache and
its recompile log, staging objects (lower / compile / make_ir), targets."""
import collections
import dataclasses
import logging
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.tree_util import register_dataclass, register_pytree_node_class

Point = collections.namedtuple("Point", ["x", "y"])


@register_pytree_node_class
class Box:
    def __init__(self, value, scale):
        self.value, self.scale = value, scale

    def tree_flatten(self):
        return (self.value,), self.scale

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], aux)


@dataclasses.dataclass
class Layer:
    w: object
    b: object
    name: str = "layer"


register_dataclass(Layer, data_fields=["w", "b"], meta_fields=["name"])


def test_pytree_arguments_and_results(target):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    @hlo.jit
    def f(d, lst, pt, box, layer, nothing, scalar):
        assert nothing is None
        return {"sum": d["a"] + d["b"], "list": [lst[0] * 2, (lst[1], None)],
                "point": Point(pt.y, pt.x), "box": Box(box.value * box.scale, box.scale),
                "layer": x @ layer.w + layer.b, "scalar": scalar * 2, "const": 7}
    f = hlo.jit(f.fun, target=target)
    out = hlo.device_get(f({"b": x, "a": x + 1}, [x, x[0]], Point(x, x * 3), Box(x, 2.0),
                           Layer(np.ones((3, 2), np.float32), np.ones(2, np.float32)), None, 1.5))
    np.testing.assert_array_equal(out["sum"], 2 * x + 1)
    np.testing.assert_array_equal(out["list"][0], x * 2)
    assert out["list"][1][1] is None and isinstance(out["list"][1], tuple)
    assert isinstance(out["point"], Point) and np.array_equal(out["point"].x, x * 3)
    assert isinstance(out["box"], Box) and out["box"].scale == 2.0
    np.testing.assert_array_equal(out["box"].value, x * 2)
    np.testing.assert_array_equal(out["layer"], x @ np.ones((3, 2)) + 1)
    assert out["scalar"] == 3.0 and out["scalar"].dtype == np.float32
    assert out["const"] == 7 and out["const"].dtype == np.int32


def test_array_like_arguments(target):
    f = hlo.jit(lambda a, b, c: a + b + c, target=target)
    j = jnp.arange(3.0)  # DLPack / __array__
    out = f(j, np.float32(1), [1.0, 2.0, 3.0])  # the list is a pytree of three scalars
    np.testing.assert_allclose(out, np.arange(3.0) + 1 + np.array([1.0, 2.0, 3.0]))
    out = f(np.arange(3, dtype=np.int8), np.int8(1), 2)
    assert out.dtype == np.int8


def test_static_arguments(target):
    calls = []

    def f(x, n, *, mode="add", scale=1.0):
        calls.append((n, mode))
        y = x + n if mode == "add" else x * n
        return y * scale

    g = hlo.jit(f, static_argnums=(1,), static_argnames=("mode",), target=target)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(g(x, 2), x + 2)
    np.testing.assert_array_equal(g(x, 2, mode="mul"), x * 2)
    np.testing.assert_array_equal(g(x, n=3), x + 3)  # static by name too
    np.testing.assert_array_equal(g(x, 2, scale=0.5), (x + 2) * 0.5)  # scale is traced
    np.testing.assert_array_equal(g(x, 2, scale=3.0), (x + 2) * 3)  # same signature: cache hit
    assert len(calls) == 4
    h = hlo.jit(lambda x, shape: hnp.zeros(shape) + x, static_argnums=-1, target=target)
    assert h(1.0, (2, 2)).shape == (2, 2)
    with pytest.raises(TypeError, match=r"static argument shape .* must be hashable.*list"):
        h(1.0, [2, 2])
    with pytest.raises(ValueError, match="static_argnames 'nope' is not a parameter"):
        hlo.jit(f, static_argnames=("nope",))


def test_cache_info_and_recompile_log(caplog):
    f = hlo.jit(lambda x, y, n=1: x * n + y, static_argnames=("n",), target="interpreter")
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    f(a, b, n=1)
    f(a, b, n=1)
    assert f.cache_info() == hlo.jit.__globals__["CacheInfo"](hits=1, misses=1, entries=1)
    with hlo.config.override(log_recompiles=True), caplog.at_level(logging.WARNING, logger="hlo.recompiles"):
        f(np.ones((4, 3), np.float32), b, n=1)
        f(a, b.astype(np.float16), n=1)
        f(a, b, n=2)
        f(a, 2.0, n=1)
    msgs = [r.getMessage() for r in caplog.records if r.name == "hlo.recompiles"]
    assert len(msgs) == 4
    assert "argument x changed shape from f32[2,3] to f32[4,3]" in msgs[0]
    assert "argument y changed dtype from f32[3] to f16[3]" in msgs[1]
    assert "static argument n changed from 1 to 2" in msgs[2]
    assert "argument y changed shape and weak type" in msgs[3]
    assert all(f"called at {__file__}:" in m and "is compiling again" in m for m in msgs)
    info = f.cache_info()
    assert (info.misses, info.entries) == (5, 5)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hlo.recompiles"):
        f(np.ones((5, 3), np.float32), b)  # logging is off by default
    assert not [r for r in caplog.records if r.name == "hlo.recompiles"]
    f.clear_cache()
    assert f.cache_info().entries == 0


def test_the_executable_cache_keeps_the_most_recently_used_signatures():
    f = hlo.jit(lambda x: x * 2.0 + 1.0, target="cpu")
    xs = [np.arange(n, dtype=np.float32) for n in (2, 3, 4, 5)]
    with hlo.config.override(jit_cache_size=2):
        for x in xs[:3]:
            np.testing.assert_array_equal(f(x), x * 2 + 1)
        assert f.cache_info().entries == 2 and len(f._fast) == 2  # (2,) was dropped
        f(xs[1])  # (3,) is now the most recent: (4,) goes next
        np.testing.assert_array_equal(f(xs[3]), xs[3] * 2 + 1)
        assert f.cache_info().misses == 4
        assert {k[1][0][1] for k in f._fast} == {(3,), (5,)}
        np.testing.assert_array_equal(f(xs[0]), xs[0] * 2 + 1)  # compiled again
        assert f.cache_info().misses == 5 and f.cache_info().entries == 2
    with pytest.raises(TypeError, match="jit_cache_size"):
        hlo.config.update("jit_cache_size", 0)


def test_environment_variables_hlo_log_and_hlo_target(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import numpy as np, hlo\n"
        "f = hlo.jit(lambda x: x + 1)\n"
        "f(np.ones(2, np.float32))\n"
        "f(np.ones(3, np.float32))\n"
        "print(hlo.default_target(), f.lower(np.ones(2, np.float32)).compile().target)\n")
    env = dict(os.environ, HLO_LOG="recompiles", HLO_TARGET="interpreter")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "argument x changed shape from f32[2] to f32[3]" in r.stderr
    assert f"called at {script}:4" in r.stderr
    assert r.stdout.split() == ["interpreter", "interpreter"]


def test_staging_objects(target):
    def f(x, w, *, bias):
        return hlo.nn.relu(x @ w + bias)

    jf = hlo.jit(f, target=target)
    x, w, b = np.ones((4, 8), np.float32), np.ones((8, 2), np.float32), np.float32(-3)
    lowered = jf.lower(x, hlo.ShapeDtypeStruct((8, 2), np.float32), bias=b)
    assert isinstance(lowered, hlo.Lowered)
    assert lowered.as_text().startswith("module @jit_")
    assert "dot_general" in lowered.as_text() and lowered.ir.main.arg_types[1].shape == (8, 2)
    compiled = lowered.compile()
    assert isinstance(compiled, hlo.Compiled) and compiled.target == target
    assert "module @" in compiled.as_text()
    np.testing.assert_array_equal(compiled(x, w, bias=b), np.full((4, 2), 5.0))
    cost = compiled.cost_analysis()
    assert {"kernels", "flops", "bytes accessed"} <= set(cost) and cost["flops"] >= 2 * 4 * 8 * 2
    mem = compiled.memory_analysis()
    assert mem.argument_size_in_bytes == x.nbytes + w.nbytes + 4
    assert mem.output_size_in_bytes == 4 * 2 * 4
    assert mem.temp_size_in_bytes >= 0 and mem.alias_size_in_bytes >= 0
    with pytest.raises(TypeError, match=r"f\(x: f32\[4,8\], w: f32\[8,2\], bias: f32\[\]\) was called with "
                                        r"arguments it was not compiled for: x is f32\[4,9\]"):
        compiled(np.ones((4, 9), np.float32), w, bias=b)
    with pytest.raises(TypeError, match="structure differs"):
        compiled(x, w)
    ir = hlo.make_ir(f)(x, w, bias=b)
    assert isinstance(ir, hlo.ir.Module) and str(ir) == lowered.as_text()


def test_lowered_from_a_bare_module_has_flat_signatures(target):
    text = ("module @m\n\nfunc @main(%arg0: f32[3], %arg1: f32[3]) -> (f32[3], f32[3]) {\n"
            "  %0 = add(%arg0, %arg1) : f32[3]\n  %1 = multiply(%arg0, %arg1) : f32[3]\n"
            "  return(%0, %1)\n}\n")
    low = hlo.Lowered(hlo.ir.parse_module(text))
    c = low.compile(target)
    a, b = np.arange(3, dtype=np.float32), np.full(3, 2, np.float32)
    out = c(a, b)
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[1], a * b)
    with pytest.raises(TypeError, match="takes 2 arrays, called with 1"):
        c(a)


def test_targets():
    assert hlo.default_target() in ("cpu", "cuda")
    with hlo.config.override(target="interpreter"):
        assert hlo.default_target() == "interpreter"
    with pytest.raises(ValueError, match="unknown target 'gpu'; expected one of cpu, cuda, interpreter"):
        hlo.jit(lambda x: x, target="gpu")
    with pytest.raises(ValueError, match="unknown target"):
        hlo.config.update("target", "tpu")
    if not hlo.staging.targets.has_usable_nvidia_gpu():
        with pytest.raises(NotImplementedError, match="target 'cuda'"):
            hlo.jit(lambda x: x + 1, target="cuda")(np.ones(2, np.float32))


def test_jit_inside_jit_is_inlined_and_methods_work(target):
    inner = hlo.jit(lambda x: x * 2, target=target)

    class Model:
        def __init__(self, k):
            self.k = k

        @hlo.jit(static_argnums=0)  # self is static (hashable by identity)
        def apply(self, x):
            return x + self.k

    outer = hlo.jit(lambda x: inner(x) + 1, target=target)
    assert [op.name for op in hlo.make_ir(outer)(np.ones(2, np.float32)).main.ops].count("multiply") == 1
    np.testing.assert_array_equal(outer(np.ones(2, np.float32)), [3, 3])
    m = Model(np.float32(5))
    with hlo.config.override(target=target):
        np.testing.assert_array_equal(m.apply(np.ones(2, np.float32)), [6, 6])


def test_donated_arguments_compute_the_same(target):
    f = hlo.jit(lambda x, y: x * 2 + y, donate_argnums=(0,), target=target)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(f(x.copy(), x), x * 3)
    assert f.lower(x, x).donated == (0,)


def test_garbage_collector_is_held_off_while_compiling_and_restored_after():
    """A compile runs with the cyclic collector off (its cost grows with the whole process,
    not the compile); it is back on after, also when the compile fails, and a collector the
    user turned off stays off."""
    import gc
    seen = []

    def f(x):
        seen.append(gc.isenabled())
        return x + 1.0

    assert gc.isenabled()
    hlo.jit(f)(np.ones(3, np.float32))
    assert seen == [False] and gc.isenabled()

    def bad(x):
        seen.append(gc.isenabled())
        return x @ x  # f32[2,3] @ f32[2,3]: a shape error
    with pytest.raises(Exception):
        hlo.jit(bad)(np.ones((2, 3), np.float32))
    assert seen[-1] is False and gc.isenabled()

    gc.disable()
    try:
        hlo.jit(f)(np.ones(4, np.float32))
        assert not gc.isenabled()
    finally:
        gc.enable()
