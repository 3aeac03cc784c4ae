"""hlo.config's ``matmul_precision``: its values, its environment variable, and its place in the
compile keys (the cuda target's; the cpu target ignores it). The GPU side (TF32 products) is
tests/cuda/test_gpu_runtime.py's cuBLASLt cases."""
import numpy as np
import pytest

import hlo
from hlo import config
from hlo.passes.options import Options
from hlo.staging.targets import compile_options


def test_values_and_errors(monkeypatch):
    monkeypatch.delenv("HLO_MATMUL_PRECISION", raising=False)
    assert config.read("matmul_precision") is None and config.resolved_matmul_precision() == "highest"
    with config.override(matmul_precision="tf32"):
        assert config.resolved_matmul_precision() == "tf32" and hlo.config.matmul_precision == "tf32"
    assert config.resolved_matmul_precision() == "highest"
    with pytest.raises(ValueError, match=r"unknown matmul precision 'bf16' in hlo.config.update.*'highest' or 'tf32'"):
        config.update("matmul_precision", "bf16")
    with pytest.raises(TypeError):
        config.update("matmul_precision", 32)
    monkeypatch.setenv("HLO_MATMUL_PRECISION", "TF32")
    assert config.resolved_matmul_precision() == "tf32"
    with config.override(matmul_precision="highest"):  # the setting beats the variable
        assert config.resolved_matmul_precision() == "highest"
    monkeypatch.setenv("HLO_MATMUL_PRECISION", "fast")
    with pytest.raises(ValueError, match="'fast' in HLO_MATMUL_PRECISION"):
        config.resolved_matmul_precision()


def test_options_carry_it_for_cuda_only(monkeypatch):
    monkeypatch.delenv("HLO_MATMUL_PRECISION", raising=False)
    assert compile_options((1,), None, "cpu") == {"donated_args": (1,)}
    assert compile_options((), None, "cuda") == {"matmul_precision": "highest"}
    with config.override(matmul_precision="tf32"):
        opts = compile_options((), None, "cuda")
        assert opts == {"matmul_precision": "tf32"}
        assert Options.from_any(opts).matmul_precision == "tf32"
    with pytest.raises(ValueError, match="matmul_precision must be one of highest, tf32"):
        Options.from_any({"matmul_precision": "bf16"})


def test_persistent_key_names_the_precision(monkeypatch):
    from hlo.staging import cache as cc
    monkeypatch.delenv("HLO_MATMUL_PRECISION", raising=False)
    monkeypatch.setenv("HLO_CUDA_ARCH", "sm_90")  # a cuda key without a GPU
    ir = hlo.jit(lambda a, b: a @ b).lower(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)).ir
    hi = cc.make_key(ir, "cuda", compile_options((), None, "cuda"))
    with config.override(matmul_precision="tf32"):
        tf = cc.make_key(ir, "cuda", compile_options((), None, "cuda"))
        cpu_tf = cc.make_key(ir, "cpu", compile_options((), None, "cpu"))
    assert hi.digest != tf.digest and cc._differing(hi.parts, tf.parts) == ["options"]
    assert cpu_tf.digest == cc.make_key(ir, "cpu", compile_options((), None, "cpu")).digest


def test_cpu_ignores_it_and_jit_does_not_recompile(monkeypatch):
    monkeypatch.delenv("HLO_MATMUL_PRECISION", raising=False)
    f = hlo.jit(lambda a, b: a @ b, target="cpu")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    want = np.asarray(f(a, b))
    gen = config.generation
    with config.override(matmul_precision="tf32"):
        assert config.generation > gen
        got = np.asarray(f(a, b))  # the cpu computes full float32 regardless
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(want, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert f.cache_info().misses == 1


def test_jit_keys_name_the_precision_on_cuda(monkeypatch):
    """hlo.jit's own cache: a cuda signature under another precision is another entry (and the
    fast path's entries are dropped when the setting changes)."""
    monkeypatch.delenv("HLO_MATMUL_PRECISION", raising=False)
    jf = hlo.jit(lambda a: a, target="cuda")
    args = (np.ones(3, np.float32),)
    hi = jf._signature(args, {}, allow_struct=False).key
    with config.override(matmul_precision="tf32"):
        tf = jf._signature(args, {}, allow_struct=False).key
    cpu = hlo.jit(lambda a: a, target="cpu")
    assert hi != tf and hi[:-1] == tf[:-1]
    assert cpu._signature(args, {}, allow_struct=False).key[-1] is None
