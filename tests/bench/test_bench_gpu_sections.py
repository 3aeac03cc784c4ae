"""The GPU sections of the bench (bench/interop.py, bench/coldstart.py) where they need no GPU:
the per-call timer, the tables, and the fresh-process timer's result line, failure and limit."""
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repo root holds bench/

from bench import coldstart, interop


def test_per_call_gives_wall_and_host_time_per_call():
    synced = []

    def fn():
        time.sleep(0.0005)
        return 1

    def sync(out):
        synced.append(out)
        time.sleep(0.002)  # the "GPU" finishing after the loop: counted in wall, not in host
    wall, host = interop.per_call(fn, sync, reps=3, min_loop_s=0.005)
    assert 0.0005 <= host < wall
    assert synced and all(s == 1 for s in synced)


def test_interop_table_shows_times_and_extras():
    row = {"case": "simple_mlp", "args": 5, "status": "ok", "us": {"hlo(hlo)": 20.0, "hlo(torch)": 30.0},
           "extra_us_per_arg": {"torch": 2.0}, "extra_host_us_per_arg": {"torch": 1.5}}
    text = interop.format_table([row, {"case": "x", "status": "wrong", "note": "differs"}])
    assert "simple_mlp" in text and "+2.00" in text and "+1.50" in text and "x" in text and "wrong" in text


def test_a_fresh_process_is_timed_to_its_result_line_and_failures_are_rows():
    env = dict(os.environ)
    assert 0 < coldstart.first_result_s("print('RESULT', 1)", [], env) < 30
    with pytest.raises(RuntimeError, match="exit 3"):
        coldstart.first_result_s("import sys; sys.exit(3)", [], env)
    with pytest.raises(RuntimeError, match="no result within"):
        coldstart.first_result_s("import time; time.sleep(30)", [], env, timeout_s=0.5)
    text = coldstart.format_table({"repeats": 5, "peer_repeats": 3, "hlo_over_floor_s": 0.05,
                                   "rows": {"driver floor": {"median_s": 0.5, "min_s": 0.4, "max_s": 0.6},
                                            "jax": {"error": "RuntimeError: no result within 60 s"}}})
    assert "+50 ms" in text and "jax" in text and "error" in text
