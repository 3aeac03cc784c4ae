"""bench/spmd.py: hlo.shard_map next to jax's shard_map (one device count, quick sizes, in a
fresh process as the bench runs it), and the check that fails a row where they disagree. No
timing is asserted."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repo root holds bench/

pytest.importorskip("jax")

from bench import spmd


def test_both_systems_agree_on_two_devices():
    rows = spmd.run(devices=(2,), quick=True, min_time=0.0)
    assert [r["row"] for r in rows] == ["dp_train_step", "tp_mlp"], rows
    assert all(r.get("status") is None for r in rows), rows
    assert rows[0]["update_rel_err_vs_jax"] < 1e-3 and rows[1]["rel_err_vs_jax"] < 1e-5
    assert "dp_train_step" in spmd.format_table(rows)


def test_a_disagreement_fails_the_row():
    rows = spmd.check([{"row": "tp_mlp", "devices": 2, "hlo_s": 1.0, "jax_s": 1.0,
                        "hlo_collective_s_per_step": 0.0, "rel_err_vs_jax": 0.5}])
    assert rows[0]["status"] == "wrong" and "differ by 0.5" in rows[0]["note"]
    assert "wrong" in spmd.format_table(rows)
