"""The CUDA runtime's parts that need no GPU: imports, the no-GPU errors, manifest checks, and
the step walk (launch records, copies, while, switch) against a simulated driver."""
import ctypes
import subprocess
import sys

import numpy as np
import pytest

from hlo.runtime.cuda import driver, launch
from hlo.runtime.cuda.errors import CudaError, CudaOutOfMemoryError, CudaUnavailableError
from hlo.runtime.cuda.executable import Manifest, encode_constants
from hlo.runtime.cuda.target import arch_runs_on
from hlo.runtime.steps import BufRef, Copy, KernelCall, Launch, LibraryCall, Switch, While, steps_to_json


def test_import_hlo_loads_no_cuda_bindings():
    code = ("import sys, hlo, hlo.runtime.cuda, hlo.runtime.cuda.executable, hlo.backends.cuda.gemm; "
            "print('cuda.bindings' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_bindings_is_cuda_unavailable(monkeypatch):
    monkeypatch.setattr(driver, "cu", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails
    with pytest.raises(CudaUnavailableError, match="cuda-bindings"):
        driver.bindings()


def test_no_gpu_error_is_clear():
    try:
        driver.get_context(0)
    except CudaUnavailableError as e:
        assert "driver" in str(e) or "device" in str(e) or "cuda-bindings" in str(e)
    else:
        pytest.skip("this machine has a GPU")


def test_error_classes():
    assert issubclass(CudaUnavailableError, CudaError) and issubclass(CudaError, RuntimeError)
    assert issubclass(CudaOutOfMemoryError, MemoryError)


# -- manifests -------------------------------------------------------------------------------

def manifest(step_list, **kw):
    m = {"format": 1, "target": {"name": "cuda", "arch": "sm_90"},
         "inputs": [{"dtype": "f32", "shape": [4]}], "outputs": [{"dtype": "f32", "shape": [4]}],
         "arena_size": 64, "constants": encode_constants([np.arange(4, dtype=np.float32).tobytes()]),
         "kernels": ["add_one"], "steps": steps_to_json(step_list)}
    m.update(kw)
    return m


ADD = Launch("add_one", [BufRef("input", 0, 0, 16), BufRef("output", 0, 0, 16)], [False, True],
             (1, 1, 1), (32, 1, 1), 0, [("i32", 4)], "fusion.1")


def test_manifest_parses():
    m = Manifest(manifest([ADD], aliases=[[0, 0]],
                          inputs=[{"dtype": "f32", "shape": [2, 2], "layout": [0, 1]}],
                          outputs=[{"dtype": "f32", "shape": [2, 2], "layout": [0, 1]}]))
    assert m.arch == "sm_90" and m.kernels == ["add_one"] and m.aliases == {0: 0}
    assert m.inputs[0].strides == (4, 8) and m.constants[0] == np.arange(4, dtype=np.float32).tobytes()
    assert m.steps[0] == ADD and not m.uses_cublaslt


@pytest.mark.parametrize("change,match", [
    ({"format": 2}, "format"),
    ({"target": {"name": "cpu"}}, "target"),
    ({"target": {"name": "cuda", "arch": "gfx90a"}}, "arch"),
    ({"constants": ["not base64!"]}, "constant"),
    ({"kernels": ["other"]}, "not among the kernels"),
    ({"aliases": [[0, 3]]}, "does not exist"),
    ({"aliases": [[0, 0]], "outputs": [{"dtype": "f32", "shape": [8]}]}, "differ"),
    ({"inputs": [{"dtype": "f32", "shape": [2, 2], "layout": [0, 0]}]}, "permutation"),
    ({"steps": [{"step": "launch", "name": "add_one"}]}, "malformed"),
])
def test_manifest_errors(change, match):
    with pytest.raises(ValueError, match=match):
        Manifest(manifest([ADD], **change))


def test_arch_compatibility():
    assert arch_runs_on("sm_90", 90) and arch_runs_on("sm_80", 90) and arch_runs_on("sm_90", 100)
    assert not arch_runs_on("sm_90", 89) and not arch_runs_on("sm_90a", 100) and arch_runs_on("sm_90a", 90)
    assert arch_runs_on("sm_100f", 103) and not arch_runs_on("sm_100f", 120) and not arch_runs_on("sm_100f", 90)
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        arch_runs_on("compute_90", 90)


def test_loader_and_executable_share_the_arch_check():
    """The saved-executable loader (CudaTarget.check_loadable) takes sm_90a code on an sm_90
    GPU and refuses it elsewhere, exactly as CudaExecutable does."""
    from hlo.runtime.cuda.target import CudaTarget
    from hlo.runtime.hlox import TargetMismatchError
    entry = {"triple": "nvptx64-nvidia-cuda", "arch": "sm_90a"}
    CudaTarget.for_arch(90).check_loadable(entry, "the executable")
    for sm in (89, 100):
        with pytest.raises(TargetMismatchError, match="compiled for sm_90a, this GPU is sm_"):
            CudaTarget.for_arch(sm).check_loadable(entry, "the executable")
    with pytest.raises(TargetMismatchError, match="not a CUDA architecture"):
        CudaTarget.for_arch(90).check_loadable(dict(entry, arch="sm_9x"), "the executable")
    with pytest.raises(ValueError, match="malformed GPU arch"):
        Manifest(manifest([ADD], target={"name": "cuda", "arch": "sm_9x"}))
    assert Manifest(manifest([ADD], target={"name": "cuda", "arch": "sm_90a"})).arch == "sm_90a"


# -- the step walk against a simulated driver ------------------------------------------------

BASE = 1 << 20  # simulated device addresses start here


class FakeDriver:
    """Just enough of cuda.bindings.driver for launch.run: device memory is a byte array;
    kernels are simulated by name."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.mem = np.zeros(1 << 16, np.uint8)
        self.launches = []

    def view(self, addr, dtype, n=1):
        off = addr - BASE
        return self.mem[off:off + n * np.dtype(dtype).itemsize].view(dtype)

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, shm, stream, params, extra):
        argv = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        ptr = lambda j: ctypes.c_uint64.from_address(argv[j]).value
        self.launches.append(func)
        if func == "add_one":
            n = ctypes.c_int32.from_address(argv[2]).value
            self.view(ptr(1), np.float32, n)[:] = self.view(ptr(0), np.float32, n) + 1
        elif func == "zero_i32":
            self.view(ptr(0), np.int32)[0] = 0
        elif func == "inc_i32":
            self.view(ptr(0), np.int32)[0] += 1
        elif func == "lt_i32":
            self.view(ptr(2), np.uint8)[0] = self.view(ptr(0), np.int32)[0] < self.view(ptr(1), np.int32)[0]
        else:
            raise AssertionError(func)
        return (0,)

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        self.mem[dst - BASE:dst - BASE + n] = self.mem[src - BASE:src - BASE + n].copy()
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        ctypes.memmove(dst, self.mem[src - BASE:].ctypes.data, n)
        return (0,)


class FakeStream:
    handle = ptr = 7

    def synchronize(self, what=""):
        pass


class FakeModule:
    class ctx:
        handle = 3

    def function(self, name):
        return name


def _install(monkeypatch, f):
    monkeypatch.setattr(driver, "cu", f)
    monkeypatch.setattr(driver, "OK", 0)
    return f


@pytest.fixture
def fake(monkeypatch):
    return _install(monkeypatch, FakeDriver())


def env_for(fake, host):
    arena = BASE + 4096
    return launch.Env(FakeModule(), FakeStream(), [BASE + 8192], [16], arena, 256, [16, 4], [16],
                       None, 0, ctypes.addressof(host))


def test_walk_while_switch_copy(fake):
    n = 4
    x, k, y = BASE + 0, BASE + 64, BASE + 128  # input 0 (f32[4]), input 1 (s32[]), output 0
    fake.view(x, np.float32, n)[:] = [1, 2, 3, 4]
    fake.view(k, np.int32)[0] = 3
    cnt, pred = BufRef("arena", 0, 0, 4), BufRef("arena", 0, 64, 1)
    out = BufRef("output", 0, 0, 16)
    steps = [
        Copy(out, BufRef("input", 0, 0, 16), 16),
        Launch("zero_i32", [cnt], [True], (1, 1, 1), (1, 1, 1)),
        While([Launch("lt_i32", [cnt, BufRef("input", 1, 0, 4), pred], [False, False, True], (1, 1, 1), (1, 1, 1))],
              pred,
              [Launch("add_one", [out, out], [False, True], (1, 1, 1), (32, 1, 1), 0, [("i32", n)]),
               Launch("inc_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))]),
        Switch(BufRef("input", 1, 0, 4), False,
               [[], [Launch("add_one", [out, out], [False, True], (1, 1, 1), (32, 1, 1), 0, [("i32", n)])],
                [Launch("zero_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))]]),
    ]
    host = (ctypes.c_uint8 * 8)()
    env = env_for(fake, host)
    recs = launch.build(steps, env)
    launch.run(recs, ([x, k], [y]), env)
    np.testing.assert_array_equal(fake.view(y, np.float32, n), [4, 5, 6, 7])  # x + 3 (k = 3)
    assert fake.launches.count("add_one") == 3 and fake.launches.count("lt_i32") == 4
    assert fake.launches[-1] == "zero_i32"  # selector 3 is out of range: the last branch
    # the same records, other buffers: only the patched pointers change
    x2, y2 = BASE + 256, BASE + 320
    fake.view(x2, np.float32, n)[:] = 10
    fake.view(k, np.int32)[0] = 1
    launch.run(recs, ([x2, k], [y2]), env)
    np.testing.assert_array_equal(fake.view(y2, np.float32, n), [12] * 4)  # 1 loop + branch 1


def test_a_while_with_a_trip_count_runs_its_body_that_often_and_never_its_condition(fake):
    """A known trip count (``passes.trip_count``): the body's records are queued that many times;
    the condition is not launched and no predicate is read back (no wait for the device)."""
    n = 4
    x, k, y = BASE + 0, BASE + 64, BASE + 128
    fake.view(x, np.float32, n)[:] = [1, 2, 3, 4]
    cnt, pred = BufRef("arena", 0, 0, 4), BufRef("arena", 0, 64, 1)
    out = BufRef("output", 0, 0, 16)
    loop = While([Launch("lt_i32", [cnt, BufRef("input", 1, 0, 4), pred], [False, False, True], (1, 1, 1), (1, 1, 1))],
                 pred,
                 [Launch("add_one", [out, out], [False, True], (1, 1, 1), (32, 1, 1), 0, [("i32", n)]),
                  Launch("inc_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))], trip_count=5)
    steps = [Copy(out, BufRef("input", 0, 0, 16), 16), Launch("zero_i32", [cnt], [True], (1, 1, 1), (1, 1, 1)), loop]
    host = (ctypes.c_uint8 * 8)()
    env = env_for(fake, host)
    reads = []
    monkeypatch_read = fake.cuMemcpyDtoHAsync
    fake.cuMemcpyDtoHAsync = lambda *a: (reads.append(a), monkeypatch_read(*a))[1]
    launch.run(launch.build(steps, env), ([x, k], [y]), env)
    np.testing.assert_array_equal(fake.view(y, np.float32, n), [6, 7, 8, 9])
    assert fake.launches.count("add_one") == 5 and "lt_i32" not in fake.launches and reads == []


def test_graphs_unroll_a_counted_loop_into_the_segment_around_it_or_into_a_repeated_segment(monkeypatch):
    """With a known trip count and a graphable body, the loop's steps become graph nodes: all of
    them in the enclosing segment while steps x records <= UNROLL_NODES, else a segment of
    UNROLL_NODES // records steps launched trip_count // that times, the rest joining the next
    segment. A loop without a trip count keeps its condition and a segment per step."""
    from hlo.runtime.cuda import graph
    rec = lambda name: (launch.LAUNCH, None, None, (), name, "")
    cond, where = [rec("lt")], (None, "arena", 0, 0)
    body = [rec("f"), rec("g")]
    names = lambda seg: [r[4] for r in seg.records]

    out = graph.graphify([rec("a"), (launch.WHILE, cond, where, body, 3), rec("b")], None, 1)
    assert len(out) == 1 and out[0][0] == launch.GRAPH
    assert names(out[0][1]) == ["a"] + ["f", "g"] * 3 + ["b"]

    monkeypatch.setattr(graph, "UNROLL_NODES", 4)
    out = graph.graphify([rec("a"), (launch.WHILE, cond, where, body, 5), rec("b")], None, 1)
    assert [r[0] for r in out] == [launch.GRAPH, launch.WHILE, launch.GRAPH]
    assert names(out[0][1]) == ["a"]
    w = out[1]
    assert w[4] == 2 and len(w[3]) == 1 and names(w[3][0][1]) == ["f", "g"] * 2
    assert names(out[2][1]) == ["f", "g", "b"]

    out = graph.graphify([(launch.WHILE, cond, where, body, None)], None, 1)
    assert out[0][0] == launch.WHILE and out[0][4] is None and names(out[0][3][0][1]) == ["f", "g"]


@pytest.mark.parametrize("step,match", [
    (Launch("add_one", [BufRef("arena", 0, 250, 16)], [True], (1, 1, 1), (1, 1, 1)), "outside the arena"),
    (Launch("add_one", [BufRef("input", 3, 0, 4)], [True], (1, 1, 1), (1, 1, 1)), "there are 2"),
    (Launch("add_one", [BufRef("output", 0, 8, 16)], [True], (1, 1, 1), (1, 1, 1)), "outside output 0"),
    (Launch("add_one", [BufRef("const", 1, 0, 4)], [True], (1, 1, 1), (1, 1, 1)), "constant 1 does not exist"),
    (Copy(BufRef("output", 0, 0, 4), BufRef("input", 0, 0, 4), 16), "do not fit"),
    (LibraryCall("cublas", "gemm", [], []), "not supported"),
    (KernelCall("k", [], [], 1, False), "CPU kernel"),
])
def test_build_rejects_bad_steps(fake, step, match):
    host = (ctypes.c_uint8 * 8)()
    with pytest.raises(ValueError, match=match):
        launch.build([step], env_for(fake, host))


# -- CUDA graphs against a simulated driver ---------------------------------------------------

class FakeGraphDriver(FakeDriver):
    """FakeDriver plus CUDA graphs, with the driver's copy semantics: adding a node or setting
    its parameters in an executable graph copies the parameter values; launching the
    executable graph runs its nodes in order."""

    SIGS = {"add_one": "ppi", "zero_i32": "p", "inc_i32": "p", "lt_i32": "ppp"}

    class CUDA_KERNEL_NODE_PARAMS:
        pass

    class CUDA_MEMCPY3D:
        pass

    class CUmemorytype:
        CU_MEMORYTYPE_DEVICE = 2

    def __init__(self):
        super().__init__()
        self.graph_launches = self.set_params = self.instantiated = 0

    def _kernel(self, p):
        argv = ctypes.cast(p.kernelParams, ctypes.POINTER(ctypes.c_void_p))
        vals = [(ctypes.c_uint64 if c == "p" else ctypes.c_int32).from_address(argv[j]).value
                for j, c in enumerate(self.SIGS[p.func])]
        vals = [(ctypes.c_uint64 if c == "p" else ctypes.c_int32)(v) for c, v in zip(self.SIGS[p.func], vals)]
        arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        return ("kernel", p.func, (p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ),
                vals, arr)

    def cuGraphCreate(self, flags):
        return (0, [])

    def cuGraphAddKernelNode(self, g, deps, n, p):
        assert list(deps) == ([g[-1]] if g else [])  # a chain in step order
        g.append(self._kernel(p))
        return (0, g[-1])

    def cuGraphAddMemcpyNode(self, g, deps, n, m, ctx):
        g.append(("copy", m.dstDevice, m.srcDevice, m.WidthInBytes))
        return (0, g[-1])

    def cuGraphInstantiate(self, g, flags):
        self.instantiated += 1
        return (0, {"order": [id(n) for n in g], "nodes": {id(n): n for n in g}})

    def cuGraphExecKernelNodeSetParams(self, exe, node, p):
        self.set_params += 1
        exe["nodes"][id(node)] = self._kernel(p)
        return (0,)

    def cuGraphExecMemcpyNodeSetParams(self, exe, node, m, ctx):
        self.set_params += 1
        exe["nodes"][id(node)] = ("copy", m.dstDevice, m.srcDevice, m.WidthInBytes)
        return (0,)

    def cuGraphLaunch(self, exe, stream):
        self.graph_launches += 1
        for i in exe["order"]:
            n = exe["nodes"][i]
            if n[0] == "kernel":
                self.cuLaunchKernel(n[1], *n[2], 0, stream, ctypes.addressof(n[4]), None)
            else:
                self.cuMemcpyDtoDAsync(n[1], n[2], n[3], stream)
        return (0,)

    def cuGraphExecDestroy(self, exe):
        return (0,)

    def cuGraphDestroy(self, g):
        return (0,)


@pytest.fixture
def fake_graphs(monkeypatch):
    return _install(monkeypatch, FakeGraphDriver())


def _kinds(records):
    from hlo.runtime.cuda.graph import GRAPH
    names = {launch.LAUNCH: "launch", launch.COPY: "copy", launch.WHILE: "while",
             launch.SWITCH: "switch", GRAPH: "graph"}
    out = []
    for r in records:
        if r[0] == launch.WHILE:
            out.append(("while", _kinds(r[1]), _kinds(r[3])))
        elif r[0] == launch.SWITCH:
            out.append(("switch", [_kinds(b) for b in r[3]]))
        else:
            out.append(names[r[0]] + (str(len(r[1].records)) if r[0] == GRAPH else ""))
    return out


def _graph_program(n):
    cnt, pred, t = BufRef("arena", 0, 0, 4), BufRef("arena", 0, 64, 1), BufRef("arena", 0, 128, 16)
    x, k, out = BufRef("input", 0, 0, 16), BufRef("input", 1, 0, 4), BufRef("output", 0, 0, 16)
    add = lambda a, b: Launch("add_one", [a, b], [False, True], (1, 1, 1), (32, 1, 1), 0, [("i32", n)])
    zero = Launch("zero_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))
    return [
        add(x, t), Copy(out, t, 16), add(out, out),       # a segment of 3 (the copy: arena -> result)
        Copy(t, x, 16),                                   # input -> arena: graphable, joins the next
        zero,
        While([Launch("lt_i32", [cnt, k, pred], [False, False, True], (1, 1, 1), (1, 1, 1))], pred,
              [add(out, out), Launch("inc_i32", [cnt], [True], (1, 1, 1), (1, 1, 1))]),
        Switch(k, False, [[add(out, out)], [add(out, out), add(out, out)], [zero]]),
        Copy(out, x, 0),                                  # nothing to copy: dropped from segments
    ]


def test_graphify_splits_at_control_flow(fake_graphs):
    from hlo.runtime.cuda import graph
    host = (ctypes.c_uint8 * 8)()
    env = env_for(fake_graphs, host)
    recs = launch.build(_graph_program(4), env)
    assert _kinds(graph.graphify(recs, env, 2)) == [
        "graph5", ("while", ["launch"], ["graph2"]), ("switch", [["launch"], ["graph2"], ["launch"]])]
    assert _kinds(graph.graphify(recs, env, 1)) == [
        "graph5", ("while", ["graph1"], ["graph2"]), ("switch", [["graph1"], ["graph2"], ["graph1"]])]
    assert _kinds(graph.graphify(recs, env, 6)) == _kinds(recs)[:-1]  # the empty copy goes
    # a copy from an argument to a result (maybe the same memory, when donated) stays a step
    both = launch.build([Copy(BufRef("output", 0, 0, 16), BufRef("input", 0, 0, 16), 16)] * 2, env)
    assert _kinds(graph.graphify(both, env, 1)) == ["copy", "copy"]


def test_graphs_match_the_walk_and_patch_only_what_changed(fake_graphs):
    from hlo.runtime.cuda import graph
    n = 4
    host = (ctypes.c_uint8 * 8)()
    env = env_for(fake_graphs, host)
    walk = launch.build(_graph_program(n), env)
    graphs = graph.graphify(launch.build(_graph_program(n), env), env, 1)
    rng = np.random.default_rng(0)
    k = BASE + 64
    results = []
    for step, (x, y, kk) in enumerate([(BASE, BASE + 128, 2), (BASE, BASE + 128, 0), (BASE + 256, BASE + 320, 1),
                                       (BASE + 256, BASE + 128, 3), (BASE + 256, BASE + 128, -1)]):
        vals = rng.standard_normal(n).astype(np.float32)
        fake_graphs.view(k, np.int32)[0] = kk
        got = []
        for recs in (walk, graphs):
            fake_graphs.view(x, np.float32, n)[:] = vals
            fake_graphs.view(y, np.float32, n)[:] = np.nan
            before = fake_graphs.set_params
            launch.run(recs, ([x, k], [y]), env)
            got.append(fake_graphs.view(y, np.float32, n).copy())
            if recs is graphs:
                results.append(fake_graphs.set_params - before)
        np.testing.assert_array_equal(got[0], got[1], err_msg=f"call {step}")
        assert not np.isnan(got[1]).any()
    # call 0 builds every segment it reaches; call 1 (same addresses) patches nothing; call 2
    # moves the argument and the result; call 3 moves only the result back
    assert results[1] == 0 and results[2] > 0 and 0 < results[3] < results[2], results
    assert fake_graphs.instantiated == 6  # each segment once (the switch's branch 0 and 2 ran too)


# -- event pools and garbage-collected cycles ------------------------------------------------

class _EventDriver:
    """cuEventCreate / cuEventRecord / cuEventDestroy, recording which handles were destroyed."""

    class CUevent_flags:
        CU_EVENT_DISABLE_TIMING = 2

    def __init__(self):
        self.next, self.destroyed, self.recorded = 1, set(), []

    def cuEventCreate(self, flags):
        self.next += 1
        return 0, self.next

    def cuEventDestroy(self, h):
        self.destroyed.add(h)
        return (0,)

    def cuEventRecord(self, h, stream):
        assert h not in self.destroyed, "recorded a destroyed event"
        self.recorded.append(h)
        return (0,)


def test_an_event_finalized_in_a_cycle_never_comes_back_from_its_pool(monkeypatch):
    """A collected cycle runs every finalizer: the event's (destroying its handle) and the
    completion's (handing the event back to a pool that outlives the cycle). The pool must not
    give that event out again (on the GPU: CUDA_ERROR_CONTEXT_IS_DESTROYED at cuEventRecord)."""
    import gc

    from hlo.runtime.cuda import array
    fake = _EventDriver()
    monkeypatch.setattr(driver, "cu", fake)
    monkeypatch.setattr(driver, "OK", 0)
    stream = type("S", (), {"handle": 7})()
    pool: list = []
    class Holder:  # what a result, its executable and a closure make in real programs
        pass

    for _ in range(20):
        h = Holder()
        h.done = array.Completion(stream, "test", pool)
        h.event = h.done.event  # recorded: the completion owns an event now
        h.me = h  # a cycle: only the collector frees it, finalizing all it reaches at once
        del h
        gc.collect()
    live = array.Completion(stream, "test", pool)
    live.event  # records a pooled event only if its handle is still alive
    assert all(e.handle is not None for e in pool)


def test_an_input_known_finished_orders_no_more_waits(monkeypatch):
    """``Completion.order_after``: the first consumer waits on the producer's event (no query);
    a later one queries first, and once the query says finished, nothing is asked again. While
    the producer runs, every consumer waits (a query that says "not yet" is followed by a wait)."""
    from hlo.runtime.cuda import array
    fake = _EventDriver()
    monkeypatch.setattr(driver, "cu", fake)
    monkeypatch.setattr(driver, "OK", 0)
    finished = {"now": False}
    queries = []

    def cuEventQuery(h):
        queries.append(h)
        return (0,) if finished["now"] else (600,)  # CUDA_ERROR_NOT_READY
    fake.cuEventQuery = cuEventQuery
    fake.CUresult = type("R", (), {"CUDA_ERROR_NOT_READY": 600})
    waits = []
    consumer = type("C", (), {"wait": lambda self, ev: waits.append(ev.handle)})()
    producer = type("P", (), {"handle": 7})()
    done = array.Completion(producer, "producer", [])
    done.order_after(consumer)
    assert len(waits) == 1 and queries == []  # first use: a wait, no query
    done.order_after(consumer)
    assert len(waits) == 2 and len(queries) == 1  # still running: queried, then waited
    finished["now"] = True
    done.order_after(consumer)
    assert len(waits) == 2 and len(queries) == 2  # finished: no wait
    for _ in range(5):
        done.order_after(consumer)
    assert len(waits) == 2 and len(queries) == 2 and done.complete  # known: nothing asked again
