"""The bench's workloads and harness at tiny sizes: every system's implementation agrees with the
float64 reference, the check rejects wrong answers, and the CLI writes its JSON. No timing is
ever asserted here (the bench is the only place timings live)."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repo root holds bench/

from bench import workloads as W
from bench.check import check_outputs
from bench.run import main, run_one
from bench.systems import (
    Bound,
    HloSystem,
    IreeSystem,
    JaxSystem,
    NumpySystem,
    System,
    TorchCompileSystem,
    TorchSystem,
    xla_entry_opcodes,
)

QUICK = W.select(None, "quick")
SEED = W.select(None, "quick", ["seed"])
FAMILIES = W.select(None, "quick", ["families"])
FAST = dict(min_time=0.001, max_time=2.0)


def _has(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package (e.g. iree) is not installed
        return False


def _ok(case, system):
    inputs = case.inputs()
    refs = W.reference(case, inputs)
    r = run_one(case, system, inputs, refs, **FAST)
    assert r["status"] == "ok", f"{case.name} / {system.name}: {r['status']}: {r['note']}"
    assert r["err_over_tolerance"] <= 1.0
    return r


# ---------------------------------------------------------------- the definitions themselves

def test_nn_helpers_match_independent_formulas():
    import jax
    nn = W.NN(np)
    x = np.random.default_rng(0).standard_normal((5, 7))
    np.testing.assert_allclose(nn.gelu_tanh(x), np.asarray(jax.nn.gelu(x.astype(np.float32), approximate=True)),
                               rtol=1e-6, atol=1e-6)
    s = nn.softmax(x)
    np.testing.assert_allclose(s.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.log(s), nn.log_softmax(x), rtol=1e-12, atol=1e-12)
    y = nn.layer_norm(x, eps=0.0)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(nn.relu(x), np.where(x > 0, x, 0.0))


def test_transformer_reference_matches_a_direct_attention():
    case = W.Case(W.BY_ID["transformer_layer"], "quick", "f32")
    inputs = [a.astype(np.float64) for a in case.inputs()]
    x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2 = inputs
    B, S, D = x.shape
    H, Dh = W.N_HEADS, D // W.N_HEADS
    q, k, v = x @ wq + bq, x @ wk + bk, x @ wv + bv
    heads = []
    for h in range(H):                                            # per head, per batch, as loops
        sl = slice(h * Dh, (h + 1) * Dh)
        out = np.empty((B, S, Dh))
        for b in range(B):
            sc = q[b, :, sl] @ k[b, :, sl].T / math.sqrt(Dh)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            out[b] = (p / p.sum(-1, keepdims=True)) @ v[b, :, sl]
        heads.append(out)
    attn = np.concatenate(heads, -1) @ wo + bo

    def ln(t, g, be):
        return (t - t.mean(-1, keepdims=True)) / np.sqrt(t.var(-1, keepdims=True) + 1e-5) * g + be
    h1 = ln(x + attn, g1, be1)
    ff = h1 @ w1 + b1
    ff = 0.5 * ff * (1 + np.tanh(math.sqrt(2 / math.pi) * (ff + 0.044715 * ff ** 3))) @ w2 + b2
    np.testing.assert_allclose(W.reference(case, case.inputs())[0], ln(h1 + ff, g2, be2), rtol=1e-10, atol=1e-10)


def test_manual_backprop_matches_jax_grad():
    import jax
    import jax.numpy as jnp
    case = W.Case(W.BY_ID["mlp_train_step"], "quick", "f32")
    inputs = case.inputs()
    manual = W.flatten(W.mlp_train_step_manual(W.Ops(np), *inputs))
    auto = W.flatten(jax.jit(lambda *a: W.mlp_train_step(W.Ops(jnp, jax.grad), *a))(*inputs))
    chk = check_outputs("f32", inputs, [np.asarray(a) for a in auto], [m.astype(np.float64) for m in manual],
                        case.workload.delta_of)
    assert chk.ok, chk.message


def test_inputs_are_deterministic_and_sized():
    for case in W.select(None, "cpu"):
        if case.workload.id in ("tinyops", "softmax"):
            continue                                             # big; same generator as below
        a, b = case.inputs(), case.inputs()
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert W.Case(W.BY_ID["layernorm"], "cpu", "f32").dims["x"] == (8192, 1024)
    assert W.Case(W.BY_ID["tinyops"], "gpu", "f32").dims["x"] == (16384, 16384)
    gpu = {c.name for c in W.select(None, "gpu")}
    assert {"ln_linear_gelu_res[f16]", "transformer_layer", "transformer_layer[bf16]"} <= gpu
    with pytest.raises(SystemExit, match="unknown workload"):
        W.select(["nope"], "cpu")


# ---------------------------------------------------------------- the check

def test_check_rejects_wrong_answers():
    case = W.Case(W.BY_ID["layernorm"], "quick", "f32")
    inputs = case.inputs()
    refs = W.reference(case, inputs)
    good = [r.astype(np.float32) for r in refs]
    assert check_outputs("f32", inputs, good, refs).ok
    assert not check_outputs("f32", inputs, [good[0] * (1 + 1e-3)], refs).ok
    assert not check_outputs("f32", inputs, [good[0][:, :-1]], refs).ok
    assert not check_outputs("f32", inputs, [], refs).ok
    nan = good[0].copy()
    nan[0, 0] = np.nan
    assert not check_outputs("f32", inputs, [nan], refs).ok
    wrong_eps = W.NN(np).layer_norm(inputs[0].astype(np.float64), inputs[1], inputs[2], eps=1e-1)
    assert not check_outputs("f32", inputs, [wrong_eps], refs).ok


def test_check_compares_updates_not_parameters():
    case = W.Case(W.BY_ID["mlp_train_step"], "quick", "f32")
    inputs = case.inputs()
    refs = W.reference(case, inputs)
    outs = [r.astype(np.float32) for r in refs]
    assert check_outputs("f32", inputs, outs, refs, case.workload.delta_of).ok
    # a 5% wrong gradient of w1: compared as an update, it cannot hide under w1's magnitude
    bad = list(outs)
    bad[0] = (inputs[0] + 1.05 * (refs[0] - inputs[0])).astype(np.float32)
    assert not check_outputs("f32", inputs, bad, refs, case.workload.delta_of).ok


def test_run_one_reports_a_wrong_system_and_does_not_time_it():
    class Off(System):
        name = "off-by-one"

        def bind(self, case, inputs):
            class B(Bound):
                def call(self):
                    return [r + 1.0 for r in W.reference(case, inputs)]
            return B()

    case = QUICK[0]
    inputs = case.inputs()
    r = run_one(case, Off(False, True), inputs, W.reference(case, inputs), **FAST)
    assert r["status"] == "wrong" and "median_s" not in r and "reference" in r["note"]


def test_xla_entry_opcodes():
    text = """HloModule m
fused_computation {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}
ENTRY main {
  a = f32[4]{0} parameter(0)
  c = f32[] constant(1)
  f = f32[4]{0} fusion(a), kind=kLoop, calls=fused_computation
  d = f32[2,2]{1,0} custom-call(f), custom_call_target="x"
  t = (f32[4]{0}, f32[2,2]{1,0}) tuple(f, d)
  g = f32[4]{0} get-tuple-element(t), index=0
  ROOT b = f32[4]{0} bitcast(g)
}
"""
    assert xla_entry_opcodes(text) == {"parameter": 1, "constant": 1, "fusion": 1, "custom-call": 1,
                                       "tuple": 1, "get-tuple-element": 1, "bitcast": 1}


# ---------------------------------------------------------------- every system vs the reference

@pytest.mark.parametrize("case", QUICK, ids=lambda c: c.name)
def test_numpy_and_jax_agree_with_reference(case):
    _ok(case, NumpySystem(False, True))
    r = _ok(case, JaxSystem(False, True))
    assert r["kernels"] >= 1 and r["temp_bytes"] >= 0


@pytest.mark.skipif(not _has("torch"), reason="torch not installed (bench/requirements-peers.txt)")
@pytest.mark.parametrize("case", SEED, ids=lambda c: c.name)
def test_torch_agrees_with_reference(case):
    _ok(case, TorchSystem(False, True))


@pytest.mark.skipif(not _has("torch"), reason="torch not installed (bench/requirements-peers.txt)")
@pytest.mark.parametrize("wid", ["tinyops", "mlp_train_step", "per_example_grads"])
def test_torch_compile_agrees_with_reference(wid):
    _ok(W.Case(W.BY_ID[wid], "quick", "f32"), TorchCompileSystem(False, True))


@pytest.mark.slow
@pytest.mark.skipif(not _has("torch"), reason="torch not installed (bench/requirements-peers.txt)")
@pytest.mark.parametrize("case", SEED, ids=lambda c: c.name)
def test_torch_compile_agrees_with_reference_everywhere(case):
    _ok(case, TorchCompileSystem(False, True))


@pytest.mark.skipif(not (_has("iree.compiler") and _has("iree.runtime")),
                    reason="IREE not installed (bench/requirements-peers.txt)")
@pytest.mark.parametrize("wid", ["tinyops", "transformer_layer", "mlp_train_step", "per_example_grads"])
def test_iree_agrees_with_reference(wid):
    _ok(W.Case(W.BY_ID[wid], "quick", "f32"), IreeSystem(False, True))


@pytest.mark.parametrize("case", QUICK, ids=lambda c: c.name)
def test_hlo_interpreter_agrees_or_says_why_not(case):
    system = HloSystem(False, True, "interpreter")
    why = system.unavailable()
    if why:
        pytest.skip(why)
    inputs = case.inputs()
    r = run_one(case, system, inputs, W.reference(case, inputs), **FAST)
    assert r["status"] in ("ok", "skipped"), f"{r['status']}: {r['note']}"
    if r["status"] == "skipped":
        assert r["note"]


@pytest.mark.parametrize("case", FAMILIES, ids=lambda c: c.name)
def test_hlo_cpu_runs_the_families_as_the_reference_does(case):
    """The families section (bench/families.py) on hlo:cpu at tiny sizes: imported from jax's
    StableHLO where the workload says so, else traced; the interpreter skips them with a reason."""
    system = HloSystem(False, True, "cpu")
    if system.unavailable():
        pytest.skip(system.unavailable())
    r = _ok(case, system)
    assert r["kernels"] >= 1
    assert "compiled targets" in run_one(case, HloSystem(False, True, "interpreter"), case.inputs(),
                                         W.reference(case, case.inputs()), **FAST)["note"]


def test_the_families_references_are_independent_of_their_bodies():
    """Each family's numpy reference is written apart from its jax body: the two agree on
    inputs with ties and edges (max pooling's first maximum, repeated tokens)."""
    import jax
    import jax.numpy as jnp
    for case in FAMILIES:
        inputs = case.inputs()
        if case.workload.id == "maxpool_grad":
            inputs[0] = np.round(inputs[0]).astype(np.float32)   # ties: the first maximum is chosen
        want = W.reference(case, inputs)
        got = W.flatten(jax.jit(lambda *a: case.workload.fn(W.Ops(jnp, jax.grad, jax.vmap, jax.lax), *a))(*inputs))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-5, atol=1e-5, err_msg=case.name)


def test_per_example_reference_is_each_examples_own_gradient():
    """The einsum-batched manual reference equals mlp_train_step_manual's gradient on each example
    alone (a batch of one, recovered from the SGD update)."""
    case = W.Case(W.BY_ID["per_example_grads"], "quick", "f32")
    inputs = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in case.inputs()]
    w1, b1, w2, b2, x, labels = inputs
    per = W.reference(case, case.inputs())
    assert [g.shape for g in per] == [(len(x),) + p.shape for p in (w1, b1, w2, b2)]
    for n in range(len(x)):
        step = W.mlp_train_step_manual(W.Ops(np), w1, b1, w2, b2, x[n:n + 1], labels[n:n + 1])
        for g, p, new in zip(per, (w1, b1, w2, b2), step):
            np.testing.assert_allclose(g[n], (p - new) / W.LEARNING_RATE, rtol=1e-9, atol=1e-12)


def test_hlo_without_vmap_skips_per_example_grads_with_a_reason(monkeypatch):
    import types
    monkeypatch.setitem(sys.modules, "hlo", types.SimpleNamespace(grad=lambda f: f, jit=None))
    case = W.Case(W.BY_ID["per_example_grads"], "quick", "f32")
    assert HloSystem(False, True, "cpu").skip(case) == "skipped: hlo.vmap not implemented"
    assert HloSystem(False, True, "cpu").skip(W.Case(W.BY_ID["mlp_train_step"], "quick", "f32")) is None


# ---------------------------------------------------------------- the command line

def test_cli_quick_prints_table_and_writes_json(tmp_path, capsys):
    rc = main(["--quick", "--systems", "numpy,jax", "--workloads", "tinyops,dispatch", "--out", str(tmp_path),
               "--min-time", "0.001"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "tinyops" in printed and "jax.jit" in printed and "cpu limits" in printed
    files = list(tmp_path.glob("cpu-quick_*_partial.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert {r["system"] for r in data["results"]} == {"numpy", "jax.jit"}
    assert {c["case"] for c in data["cases"]} == {"tinyops", "dispatch"}
    assert data["limits"]["cpu"]["copy_GBps"] > 0 and data["machine"]["cores"] >= 1
    for r in data["results"]:
        assert r["status"] == "ok" and r["min_s"] <= r["median_s"] <= r["max_s"]
    tiny = [r for r in data["results"] if r["case"] == "tinyops"]
    assert all("bw_fraction" in r for r in tiny)
    assert min(r["ratio_to_best_peer"] for r in tiny) == 1.0


def test_cli_rejects_unknown_names():
    with pytest.raises(SystemExit, match="unknown system"):
        main(["--quick", "--systems", "numpy,matlab"])
    with pytest.raises(SystemExit, match="unknown hlo target"):
        main(["--quick", "--target", "tpu"])
