"""The bench's product-kernel rate (``bench.systems.product_rate``): one profiled hlo:cpu build
of a workload, its product kernels' FLOPs over their in-program seconds, and the report's column
with its fraction of the machine's f32 matmul."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import bench.workloads as W                                   # noqa: E402
from bench.report import format_table                         # noqa: E402
from bench.run import derive                                  # noqa: E402
from bench.systems import product_rate                        # noqa: E402


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
