"""The bench's product-kernel rate (``bench.systems.product_rate``): one profiled hlo:cpu build
of a workload, its product kernels' FLOPs over their in-program seconds, and the report's column
with its fraction of the machine's f32 matmul."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import bench.workloads as W
from bench.report import format_table
from bench.run import derive
from bench.systems import product_rate


def _lowered(wid):
    import hlo
    import hlo.numpy as hnp
    case = W.Case(W.BY_ID[wid], "quick", "f32")
    inputs = case.inputs()
    ops = W.Ops(hnp, hlo.grad, hlo.vmap)
    return case, hlo.jit(lambda *a: case.workload.fn(ops, *a), target="cpu").lower(*inputs), inputs


def test_a_workload_with_products_reports_their_rate_and_its_fraction_of_matmul():
    case, low, inputs = _lowered("mlp_train_step")
    st = product_rate(low, inputs)
    assert st["product_GFLOPs"] > 0 and st["product_kernels"] == 5
    assert 0 < st["product_share"] <= 1
    r = {"case": case.name, "system": "hlo:cpu", "device": "cpu", "status": "ok", "is_peer": False,
         "median_s": 1e-3, "min_s": 1e-3, "max_s": 1e-3, "calls": 3, "first_call_s": 0.1, **st}
    info = {case.name: {"memory_bound": False, "flops": case.flops(), "bytes": 1}}
    derive([r], info, {"cpu": {"matmul_GFLOPs_f32": 2 * st["product_GFLOPs"]}})
    assert r["product_fraction_of_matmul"] == pytest.approx(0.5)
    assert f"{st['product_GFLOPs']:.1f} (50%)" in format_table([r])


def test_a_workload_without_products_reports_nothing():
    _, low, inputs = _lowered("softmax")
    assert product_rate(low, inputs) == {}


class _Reference:
    """Stands in for ``bench.numpy_unset.UnsetMatmul``: a fixed sequence of rates."""

    def __init__(self, rates):
        self.queue, self.rates = list(rates), []

    def rate(self):
        g = self.queue.pop(0)
        self.rates.append(g)
        return g


def test_with_a_reference_the_rounds_alternate_and_the_fraction_is_the_median_of_their_ratios():
    case, low, inputs = _lowered("simple_mlp")
    ref = _Reference([1e6, 1e7, 1e8])
    st = product_rate(low, inputs, ref, rounds=3)
    assert ref.queue == [] and ref.rates == [1e6, 1e7, 1e8]      # one burst per round
    assert st["product_rounds"] == 3 and st["numpy_unset_GFLOPs"] == 1e7
    lo, hi = st["product_fraction_of_numpy_unset_range"]
    assert 0 < lo <= st["product_fraction_of_numpy_unset"] <= hi
    # each round's ratio is its own rate over its own reference: the rates are alike, the
    # references 1:10:100 apart, so the extremes are about 100x apart and the median ~the middle round's
    assert hi / lo > 10
    assert st["product_fraction_of_numpy_unset"] == pytest.approx(st["product_GFLOPs"] / 1e7, rel=0.5)
    r = {"case": case.name, "system": "hlo:cpu", "device": "cpu", "status": "ok", "is_peer": False,
         "median_s": 1e-3, "min_s": 1e-3, "max_s": 1e-3, "calls": 3, "first_call_s": 0.1,
         **{**st, "product_fraction_of_numpy_unset": 0.85}}
    derive([r], {case.name: {"memory_bound": False, "flops": case.flops(), "bytes": 1}},
           {"cpu": {"matmul_GFLOPs_f32": 2 * st["product_GFLOPs"]}})
    assert f"{st['product_GFLOPs']:.1f} (50%, 85%)" in format_table([r])


def test_the_unset_reference_runs_numpy_without_the_openblas_variables(monkeypatch):
    from bench.numpy_unset import OPENBLAS_VARS, UnsetMatmul
    for v in OPENBLAS_VARS:
        monkeypatch.setenv(v, "Haswell" if v.endswith("CORETYPE") else "512")
    with UnsetMatmul(sizes=(64,), burst_s=0.01, settle_s=0) as ref:
        with open(f"/proc/{ref._proc.pid}/environ", "rb") as f:
            names = {e.split(b"=", 1)[0].decode() for e in f.read().split(b"\0") if e}
        assert "PATH" in names and not names & set(OPENBLAS_VARS)
        assert ref.rate() > 0 and ref.rate() > 0 and len(ref.rates) == 2
    assert ref._proc.poll() == 0
