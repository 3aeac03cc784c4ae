"""The timeline of a profiled CPU build (``compiled.profile().export_trace(path)``): valid Trace
Event Format JSON (what Perfetto and chrome://tracing read: complete events with times and
durations, properly nested on each thread's track, thread names as metadata); one call span a
call and one span per step run, whose durations sum exactly to the profile's counters; spans
named as the optimized IR names what they ran; a parallel kernel's chunks inside its span."""
import json
import re
import threading

import numpy as np
import pytest
from trace_format import check_trace_event_format

import hlo
import hlo.numpy as hnp
from hlo.backends.cpu.entry import TRACE_EVENTS
from hlo.runtime.cpu.profile import NotProfiledError

RNG = np.random.default_rng(0)


def mlp(x, w1, w2):
    h = hnp.maximum(x @ w1, 0.0)
    return hnp.tanh(h @ w2), h.sum(axis=0)


ARGS = [RNG.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 80), (80, 48))]


@pytest.fixture(scope="module")
def profiled():
    c = hlo.jit(mlp).lower(*ARGS).compile(profile=True)
    c.reset_profile()
    return c


def test_the_trace_is_trace_event_json_with_a_span_per_call_and_step(profiled, tmp_path):
    profiled.reset_profile()
    for _ in range(3):
        profiled(*ARGS)
    prof = profiled.profile()
    path = tmp_path / "trace.json"
    prof.export_trace(path)
    trace = json.loads(path.read_text())
    spans = check_trace_event_format(trace)
    calls = [e for e in spans if e["cat"] == "call"]
    assert len(calls) == 3 == prof.calls
    steps = [e for e in spans if e["cat"] not in ("call", "chunk")]
    for s in prof.steps:  # one span a run of each step, and their time is the counters' exactly
        mine = [e for e in steps if e["args"]["step"] == s.index]
        assert len(mine) == s.calls == 3
        assert sum(e["dur"] for e in mine) == pytest.approx(s.seconds * 1e6, abs=1e-3)
    assert sum(e["dur"] for e in calls) == pytest.approx(prof.seconds * 1e6, abs=1e-3)
    assert trace["otherData"]["dropped_events"] == 0
    # every step's span lies in a call's span on the same thread
    for e in steps:
        assert any(c["tid"] == e["tid"] and c["ts"] <= e["ts"] and
                   e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-6 for c in calls), e
    assert prof.export_chrome_trace is not None  # torch.profiler's name


def test_spans_are_named_as_the_optimized_ir_names_what_they_ran(profiled):
    profiled.reset_profile()
    profiled(*ARGS)
    text = profiled.as_text()
    spans = check_trace_event_format(profiled.profile().trace())
    named = [e for e in spans if e["cat"] in ("kernel", "product")]
    assert named
    for e in named:
        m = re.fullmatch(r"(%\d+) (\S+)", e["name"])
        assert m, e["name"]
        value, what = m.groups()
        assert re.search(rf"^\s*{value}(, %\d+)* = ({re.escape(what)}\(|fusion\(.*name = \"{re.escape(what)}\")",
                         text, re.M), (e["name"], text)
        assert e["args"]["source"].startswith("test_trace.py:"), e
    product = next(e for e in named if e["cat"] == "product")
    assert product["args"]["flops"] == 2 * 64 * 96 * 80 or product["args"]["flops"] == 2 * 64 * 80 * 48


def test_a_parallel_kernels_chunks_lie_inside_its_span():
    x = RNG.standard_normal((512, 1024)).astype(np.float32)
    c = hlo.jit(lambda x: hnp.tanh(x) * 2.0 + 1.0).lower(x).compile(profile=True)
    c.reset_profile()
    c(x)
    spans = check_trace_event_format(c.profile().trace())
    chunks = [e for e in spans if e["cat"] == "chunk"]
    steps = {e["args"]["step"]: e for e in spans if e["cat"] == "kernel"}
    if not chunks:
        pytest.skip("the kernel ran as one piece here (a single worker)")
    for ch in chunks:
        parent = steps[ch["args"]["step"]]
        assert parent["ts"] <= ch["ts"] and ch["ts"] + ch["dur"] <= parent["ts"] + parent["dur"] + 1e-6
        assert ch["name"] == parent["name"] + " (chunk)"


def test_a_loop_steps_spans_once_per_iteration():
    def loop(x):
        def body(c):
            i, v = c
            return i + 1, hnp.sin(v) * 0.5 + v.sum() * 1e-3
        return hlo.lax.while_loop(lambda c: c[0] < 5, body, (hnp.int32(0), x))[1]
    x = RNG.standard_normal(64).astype(np.float32)
    c = hlo.jit(loop).lower(x).compile(profile=True)
    c.reset_profile()
    c(x)
    prof = c.profile()
    spans = check_trace_event_format(prof.trace())
    body = [s for s in prof.steps if "body" in s.where]
    assert body and all(s.calls == 5 for s in body)
    for s in body:
        mine = [e for e in spans if e["cat"] != "chunk" and e.get("args", {}).get("step") == s.index]
        assert len(mine) == 5 and all(e["args"]["where"] == s.where for e in mine)


def test_calls_from_two_threads_are_on_their_own_tracks(profiled):
    profiled.reset_profile()
    both = threading.Barrier(2)  # alive together: a thread that ended may lend its id to the next

    def work():
        both.wait()
        for _ in range(4):
            profiled(*ARGS)
        both.wait()
    ts = [threading.Thread(target=work) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    trace = profiled.profile().trace()
    spans = check_trace_event_format(trace)  # (overlapping calls would break nesting on one track)
    calls = [e for e in spans if e["cat"] == "call"]
    assert len(calls) == 8 and len({e["tid"] for e in calls}) == 2
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert sum(n.startswith("calling thread") for n in names) == 2


def test_past_its_capacity_the_buffer_keeps_the_first_spans_and_counts_the_rest():
    x = np.ones(8, np.float32)
    c = hlo.jit(lambda x: x + 1.0).lower(x).compile(profile=True)
    c.reset_profile()
    per_call = None
    n = 0
    while True:
        c(x)
        n += 1
        if per_call is None:
            per_call = len(c.profile().events)
        if n * per_call > TRACE_EVENTS + 5:
            break
    prof = c.profile()
    assert len(prof.events) == TRACE_EVENTS and prof.dropped == n * per_call - TRACE_EVENTS
    trace = prof.trace()
    check_trace_event_format(trace)
    assert trace["otherData"]["dropped_events"] == prof.dropped
    c.reset_profile()
    c(x)
    assert len(c.profile().events) == per_call and c.profile().dropped == 0


def test_an_unprofiled_build_has_no_timeline():
    c = hlo.jit(mlp).lower(*ARGS).compile()
    with pytest.raises(NotProfiledError, match="profile=True"):
        c.profile()
    with pytest.raises(NotProfiledError, match="profile=True"):
        c._artifact.executable.trace_events()


def test_a_saved_profiled_build_keeps_its_timeline(profiled, tmp_path):
    profiled.save(tmp_path / "p.hlox")
    loaded = hlo.load(tmp_path / "p.hlox")
    loaded(*ARGS)
    spans = check_trace_event_format(loaded.profile().trace())
    assert len([e for e in spans if e["cat"] == "call"]) == 1
