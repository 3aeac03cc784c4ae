"""``compile(target="cuda", profile=True)``: the same PTX, a manifest naming each kernel's op as
the optimized IR does, and at run time CUDA events around every step (``hlo.runtime.cuda.
profile``). Without a GPU: the build, the records' wrapping and the event arithmetic (through a
stand-in driver); on a GPU (marked ``gpu``, skipped elsewhere): counts, times and the timeline."""
import re
import types

import numpy as np
import pytest
from trace_format import check_trace_event_format

import hlo
import hlo.numpy as hnp
from hlo import config
from hlo.errors import UnsupportedError
from hlo.runtime.cpu.profile import NotProfiledError
from hlo.runtime.cuda import launch
from hlo.runtime.cuda import profile as cprof

RNG = np.random.default_rng(0)


def mlp(x, w1, w2):
    h = hnp.maximum(x @ w1, 0.0)
    return hnp.tanh(h @ w2), h.sum(axis=0)


ARGS = [RNG.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 80), (80, 48))]


@pytest.fixture(scope="module")
def builds():
    low = hlo.jit(mlp).lower(*ARGS)
    with config.override(cache=False):
        return low.compile("cuda", profile=True), low.compile("cuda")


def test_a_profiled_cuda_build_is_the_same_code_and_names_its_kernels(builds):
    prof, plain = builds
    p, u = prof._artifact.executable, plain._artifact.executable
    assert p.ptx == u.ptx and p.profiled and not u.profiled
    kernels = p.manifest["profile"]["kernels"]
    assert kernels and set(kernels) <= set(p.kernels)
    text = prof.as_text()
    for name, info in kernels.items():
        what = info["op"].split(" -> ")[0].split()
        what = what[2] if what[0] == "fusion" else what[0]
        assert re.search(rf"^\s*{info['value']}(, %\d+)* = ({re.escape(what)}\(|fusion\(.*name = \"{what}\")",
                         text, re.M), (name, info)
        assert info["loc"].startswith("test_cuda_profile.py:"), info
    with pytest.raises(NotProfiledError, match="profile=True"):
        plain.profile()


def test_only_the_interpreter_refuses_to_profile():
    with pytest.raises(UnsupportedError, match="'cpu' and 'cuda'"):
        hlo.jit(mlp).lower(*ARGS).compile("interpreter", profile=True)


# -- the records' wrapping and the events' arithmetic, with a stand-in driver --------------------

def _launch(name):
    return (launch.LAUNCH, (), [], (), name, f"{name} at m.py:1", None)


def test_every_launch_copy_and_product_is_timed_in_walk_order():
    loop = (launch.WHILE, [_launch("cond")], None, [_launch("body"), (launch.COPY, None, None, 64)], 3)
    switch = (launch.SWITCH, None, True, [[_launch("yes")], [_launch("no")]])
    descs = []
    out = cprof.timed_records([_launch("a"), loop, switch], descs,
                              {"a": {"value": "%0", "loc": "m.py:1", "op": "fusion loop f.0 -> f32[4]"}})
    assert [d["name"] for d in descs] == ["a", "cond", "body", "copy", "yes", "no"]
    assert [d["where"] for d in descs] == ["", "while0.cond", "while0.body", "while0.body",
                                         "switch1.branch0", "switch1.branch1"]
    assert descs[0]["value"] == "%0" and descs[0]["loc"] == "m.py:1" and "value" not in descs[1]
    assert out[0] == (launch.TIMED, 0, _launch("a"))
    assert out[1][0] == launch.WHILE and out[1][4] == 3 and out[1][3][1][:2] == (launch.TIMED, 3)
    assert [b[0][1] for b in out[2][3]] == [4, 5]


class FakeDriver:
    """Events on a clock that advances 1 us per record; elapsed times in ms."""

    def __init__(self):
        self.OK = 0
        self.now = 0.0
        self.created = 0
        self.destroyed = 0
        self.synced = 0
        self.times = {}
        drv = self

        class Cu:
            @staticmethod
            def cuEventCreate(flags):
                assert flags == 0  # timing enabled
                drv.created += 1
                return (0, types.SimpleNamespace(n=drv.created))

            @staticmethod
            def cuEventRecord(e, stream):
                drv.now += 1e-3
                drv.times[id(e)] = drv.now
                return (0,)

            @staticmethod
            def cuEventElapsedTime(a, b):
                return (0, drv.times[id(b)] - drv.times[id(a)])

            @staticmethod
            def cuStreamSynchronize(stream):
                drv.synced += 1
                return (0,)

            @staticmethod
            def cuEventDestroy(e):
                drv.destroyed += 1
                return (0,)
        self.cu = Cu

    def check(self, ret, call, what=""):
        assert ret[0] == 0, call
        return ret[1] if len(ret) == 2 else None


def test_event_pairs_fold_into_counters_and_spans():
    drv = FakeDriver()
    t = cprof.EventTimer([{"name": "a", "op": "", "what": "", "where": "", "flops": 0},
                          {"name": "b", "op": "", "what": "", "where": "", "flops": 10}], drv)
    for _ in range(3):  # call: start, a (2 records), b (2 records), end
        c = t.start("s")
        e = t.start("s")
        t.stop(0, e, "s")
        e = t.start("s")
        t.stop(1, e, "s")
        t.stop_call(c, "s")
    p = t.profile("s")
    assert p.calls == 3 and [s.calls for s in p.steps] == [3, 3]
    assert [round(s.seconds * 1e9) for s in p.steps] == [3000, 3000]  # 1 us each, 3 calls
    assert round(p.seconds * 1e9) == 3 * 5000
    assert len(p.events) == 9 and p.dropped == 0 and drv.synced == 1
    spans = check_trace_event_format(p.trace())
    assert {e["tid"] for e in spans} == {1}
    made = drv.created  # 6 a call (the first start is the time origin, kept)
    c = t.start("s")
    t.stop_call(c, "s")
    assert drv.created == made  # read events came back to the pool
    t.reset("s")
    assert t.profile("s").calls == 0 and len(t.profile("s").events) == 0
    t.release()
    assert drv.destroyed == drv.created


def test_held_events_are_read_every_few_thousand_pairs(monkeypatch):
    monkeypatch.setattr(cprof, "FOLD_EVERY", 4)
    drv = FakeDriver()
    t = cprof.EventTimer([{"name": "a", "op": "", "what": "", "where": "", "flops": 0}], drv)
    for _ in range(5):
        c = t.start("s")
        t.stop_call(c, "s")
    assert drv.synced == 1 and len(t.pending) == 1  # read once at 4 pairs, one held since
    assert t.profile("s").calls == 5


# -- on a GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_a_gpu_each_step_is_timed_and_the_timeline_exports(builds, tmp_path):
    import json
    prof, plain = builds
    outs = [np.asarray(o) for o in prof(*ARGS)]
    for a, b in zip(outs, [np.asarray(o) for o in plain(*ARGS)]):
        np.testing.assert_array_equal(a, b)
    prof.reset_profile()
    for _ in range(3):
        prof(*ARGS)
    p = prof.profile()
    assert p.calls == 3 and p.steps and all(s.calls == 3 for s in p.steps), p.report()
    assert all(s.seconds > 0 for s in p.steps)
    assert sum(s.seconds for s in p.steps) <= p.seconds * 1.001 + 1e-6, p.report()
    prof.profile().export_trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    spans = check_trace_event_format(trace)
    assert len([e for e in spans if e["cat"] == "call"]) == 3
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"GPU stream"}
    assert any(re.fullmatch(r"%\d+ \S+", e["name"]) for e in spans if e["cat"] == "kernel")


def test_a_cached_profiled_cuda_build_names_the_lines_compiled_now(tmp_path):
    """The cache maps a hit's kernel lines onto the function compiled now (no GPU needed)."""
    import importlib.util
    import textwrap

    def module(name, body):
        p = tmp_path / f"{name}.py"
        p.write_text(textwrap.dedent(body))
        spec = importlib.util.spec_from_file_location(f"cuda_profile_{name}", p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    src = """
        import hlo.numpy as hnp

        def g(x):
            return hnp.tanh(x) * 2.0
    """
    a = module("mod_a", src)
    b = module("mod_b", "\n\n" + textwrap.dedent(src))
    x = np.ones((4, 8), np.float32)
    with config.override(cache=True, cache_dir=str(tmp_path / "cache")):
        ca = hlo.jit(a.g).lower(x).compile("cuda", profile=True)
        cb = hlo.jit(b.g).lower(x).compile("cuda", profile=True)
    from hlo.staging.cache import CachedArtifact
    assert isinstance(cb._artifact, CachedArtifact)
    locs = [k["loc"] for k in cb._artifact.executable.manifest["profile"]["kernels"].values()]
    assert locs and all(loc.startswith("mod_b.py:") for loc in locs), locs
    assert all(k["loc"].startswith("mod_a.py:")
               for k in ca._artifact.executable.manifest["profile"]["kernels"].values())


def test_a_saved_profiled_cuda_build_loads_profiled_and_a_bad_record_is_refused(builds, tmp_path):
    import json

    from hlo import aot
    from hlo.runtime import hlox
    from hlo.runtime.hlox import CorruptFileError
    prof, _ = builds
    prof.save(tmp_path / "p.hlox")
    loaded = hlo.load(tmp_path / "p.hlox")
    assert loaded._runtime_executable().profiled
    payload = hlox.loads(aot.dumps(prof))
    name = next(iter(payload.manifest["runtime"]["profile"]["kernels"]))
    payload.manifest["runtime"]["profile"]["kernels"][name]["loc"] = 12
    with pytest.raises(CorruptFileError, match=r"runtime\.profile\.kernels\[.*\]\.loc"):
        aot.loads(hlox.dumps(payload))
    assert json.dumps(payload.manifest)
