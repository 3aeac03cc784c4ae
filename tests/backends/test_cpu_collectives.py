"""Collectives on the CPU target: several devices in one process (``HLO_CPU_DEVICES``), one
compiled program run on each (``run_spmd``), collectives in memory. Every collective against a
numpy reference (and the interpreter) on 1, 2, 4 and 8 devices, for element types of every
class the ops take, with default, non-default and ragged groups."""
import ml_dtypes
import numpy as np
import pytest

from hlo.ir import parse_module
from hlo.ir.interpreter import run_parallel as interpret_parallel
from hlo.runtime.cpu import devices as cpu_devices
from hlo.staging.stages import Lowered

SIZES = (1, 2, 4, 8)
DTYPES = {"f32": np.float32, "s32": np.int32, "bf16": ml_dtypes.bfloat16, "u8": np.uint8,
          "f64": np.float64}


@pytest.fixture(autouse=True)
def eight_devices(monkeypatch):
    monkeypatch.setenv("HLO_CPU_DEVICES", "8")
    cpu_devices.reset()
    yield
    cpu_devices.reset()


def _comp(op, dt, k):
    return (f"    ^computation(%x{k}: {dt}[], %y{k}: {dt}[]):\n      %s{k} = {op}(%x{k}, %y{k}) : {dt}[]\n"
            f"      return(%s{k})\n  }}")


def _program(n: int, dt: str) -> str:
    """Every collective over ``n`` replicas on an operand x: dt[2, 4n]."""
    g = "[" + ", ".join(map(str, range(n))) + "]"
    ring = [[i, (i + 1) % n] for i in range(n)]
    rev = "[" + ", ".join(map(str, reversed(range(n)))) + "]"
    w = 4 * n
    return f"""module @m

func @main(%a: {dt}[2,{w}]) -> ({dt}[2,{w}], {dt}[2,{w}], {dt}[{2 * n},{w}], {dt}[2,4], {dt}[{2 * n},4], {dt}[2,{w}], {dt}[2,{w}], u32[], u32[]) {{
  %0 = all_reduce(%a) {{replica_groups = [{g}]}} : {dt}[2,{w}] {{
{_comp('add', dt, 0)}
  %1 = all_reduce(%a) {{replica_groups = [{rev}]}} : {dt}[2,{w}] {{
{_comp('maximum', dt, 1)}
  %2 = all_gather(%a) {{all_gather_dim = 0, replica_groups = [{g}]}} : {dt}[{2 * n},{w}]
  %3 = reduce_scatter(%a) {{replica_groups = [{g}], scatter_dimension = 1}} : {dt}[2,4] {{
{_comp('add', dt, 3)}
  %4 = all_to_all(%a) {{concat_dimension = 0, replica_groups = [{g}], split_count = {n}, split_dimension = 1}} : {dt}[{2 * n},4]
  %5 = collective_permute(%a) {{source_target_pairs = {ring}}} : {dt}[2,{w}]
  %6 = collective_broadcast(%a) {{replica_groups = [{rev}]}} : {dt}[2,{w}]
  %7 = replica_id() : u32[]
  %8 = partition_id() : u32[]
  return(%0, %1, %2, %3, %4, %5, %6, %7, %8)
}}
"""


def _inputs(n, dt, shape):
    rng = np.random.default_rng(n)
    return [rng.integers(0, 40, shape).astype(DTYPES[dt]) for _ in range(n)]


def _reference(xs, i, dt):
    n = len(xs)
    t = DTYPES[dt]
    total = xs[0]
    for x in xs[1:]:
        total = (total + x).astype(t)
    return [total, np.max(np.stack(xs), axis=0), np.concatenate(xs, axis=0),
            total[:, 4 * i:4 * i + 4], np.concatenate([x[:, 4 * i:4 * i + 4] for x in xs], axis=0),
            xs[(i - 1) % n], xs[n - 1], np.uint32(i), np.uint32(0)]


@pytest.mark.parametrize("dt", sorted(DTYPES))
@pytest.mark.parametrize("n", SIZES)
def test_every_collective_against_numpy_and_the_interpreter(n, dt):
    m = parse_module(_program(n, dt))
    exe = Lowered(m).compile(target="cpu")
    xs = _inputs(n, dt, (2, 4 * n))
    outs = cpu_devices.run_spmd(lambda i, a: exe(*a), [[x] for x in xs], num_replicas=n)
    interp = interpret_parallel(m, [[x] for x in xs], num_replicas=n)
    for i in range(n):
        for k, (got, want, ref) in enumerate(zip(outs[i], _reference(xs, i, dt), interp[i])):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want, dtype=np.asarray(got).dtype),
                                          err_msg=f"result {k} of process {i}")
            np.testing.assert_array_equal(np.asarray(got), ref, err_msg=f"result {k} vs the interpreter")


@pytest.mark.parametrize("groups", [[[0, 2], [1, 3]], [[3, 1, 0], [2]], [[1], [0], [3, 2]]])
def test_all_reduce_with_uneven_and_non_default_groups(groups):
    text = ("module @m\n\nfunc @main(%a: f32[5]) -> (f32[5]) {\n"
            f"  %0 = all_reduce(%a) {{replica_groups = {groups}}} : f32[5] {{\n{_comp('add', 'f32', 0)}\n"
            "  return(%0)\n}\n")
    exe = Lowered(parse_module(text)).compile(target="cpu")
    xs = _inputs(4, "f32", (5,))
    outs = cpu_devices.run_spmd(lambda i, a: exe(*a), [[x] for x in xs], num_replicas=4)
    for g in groups:
        want = xs[g[0]]
        for j in g[1:]:
            want = want + xs[j]
        for i in g:
            np.testing.assert_array_equal(outs[i][0], want)


def test_partitions_and_a_pred_all_reduce():
    text = ("module @m\n\nfunc @main(%a: pred[3]) -> (pred[3], pred[3], u32[]) {\n"
            f"  %0 = all_reduce(%a) {{channel_id = 1, replica_groups = [[0], [1]]}} : pred[3] {{\n{_comp('and', 'pred', 0)}\n"
            f"  %1 = all_reduce(%a) {{channel_id = 2, replica_groups = [[0, 1, 2, 3]], use_global_device_ids = true}} : pred[3] {{\n{_comp('or', 'pred', 1)}\n"
            "  %2 = partition_id() : u32[]\n  return(%0, %1, %2)\n}\n")
    exe = Lowered(parse_module(text)).compile(target="cpu")
    xs = [np.array([True, True, False]), np.array([True, False, False]),
          np.array([True, True, False]), np.array([False, True, False])]
    # 2 replicas x 2 partitions: channel 1 without global ids groups replica 0 over every partition
    outs = cpu_devices.run_spmd(lambda i, a: exe(*a), [[x] for x in xs], num_replicas=2, num_partitions=2)
    for i, (r0, r1, pid) in enumerate(outs):
        group = [0, 1] if i < 2 else [2, 3]
        np.testing.assert_array_equal(r0, np.logical_and(xs[group[0]], xs[group[1]]))
        np.testing.assert_array_equal(r1, np.logical_or.reduce(xs))
        assert int(pid) == i % 2


def test_one_process_outside_a_run():
    text = ("module @m\n\nfunc @main(%a: s32[2]) -> (s32[2], u32[]) {\n"
            f"  %0 = all_reduce(%a) {{replica_groups = [[0]]}} : s32[2] {{\n{_comp('add', 's32', 0)}\n"
            "  %1 = replica_id() : u32[]\n  return(%0, %1)\n}\n")
    exe = Lowered(parse_module(text)).compile(target="cpu")
    out = exe(np.array([3, 4], np.int32))
    np.testing.assert_array_equal(out[0], [3, 4])
    assert int(out[1]) == 0


def test_a_computation_that_is_not_one_reduction_op_is_refused_on_cpu():
    text = ("module @m\n\nfunc @main(%a: f32[2]) -> (f32[2]) {\n"
            "  %0 = all_reduce(%a) {replica_groups = [[0]]} : f32[2] {\n"
            "    ^computation(%x: f32[], %y: f32[]):\n      %s = add(%x, %y) : f32[]\n"
            "      %t = multiply(%s, %s) : f32[]\n      return(%t)\n  }\n  return(%0)\n}\n")
    with pytest.raises(Exception, match="computation must be one add/multiply"):
        Lowered(parse_module(text)).compile(target="cpu")


def test_more_processes_than_devices_is_an_error(monkeypatch):
    monkeypatch.setenv("HLO_CPU_DEVICES", "2")
    cpu_devices.reset()
    with pytest.raises(cpu_devices.DeviceCountError, match="set HLO_CPU_DEVICES=4"):
        cpu_devices.run_spmd(lambda i, a: [], [[]] * 4, num_replicas=4)


def test_a_bad_device_count_is_an_error(monkeypatch):
    monkeypatch.setenv("HLO_CPU_DEVICES", "two")
    cpu_devices.reset()
    with pytest.raises(cpu_devices.DeviceCountError, match="is not a device count"):
        cpu_devices.device_count()


def test_hlo_devices_lists_the_cpu_devices():
    import hlo
    assert [d.id for d in hlo.devices("cpu")] == list(range(8))
    assert all(d.platform == "cpu" for d in hlo.devices("cpu"))


def test_a_failing_process_fails_the_run_without_hanging():
    text = ("module @m\n\nfunc @main(%a: f32[2]) -> (f32[2]) {\n"
            f"  %0 = all_reduce(%a) {{replica_groups = [[0, 1]]}} : f32[2] {{\n{_comp('add', 'f32', 0)}\n"
            "  return(%0)\n}\n")
    exe = Lowered(parse_module(text)).compile(target="cpu")

    def call(i, a):
        if i == 1:
            raise ValueError("process 1 cannot start")
        return exe(*a)

    x = np.zeros(2, np.float32)
    with pytest.raises(Exception, match="process 1 cannot start"):
        cpu_devices.run_spmd(call, [[x], [x]], num_replicas=2)


def test_a_program_with_collectives_saves_and_loads(tmp_path):
    import hlo
    text = ("module @m\n\nfunc @main(%a: f32[3]) -> (f32[3]) {\n"
            f"  %0 = all_reduce(%a) {{replica_groups = [[0, 1]]}} : f32[3] {{\n{_comp('add', 'f32', 0)}\n"
            "  return(%0)\n}\n")
    path = tmp_path / "ar.hlox"
    Lowered(parse_module(text)).compile(target="cpu").save(path)
    loaded = hlo.load(path)
    xs = [np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)]
    outs = cpu_devices.run_spmd(lambda i, a: loaded(*a), [[x] for x in xs], num_replicas=2)
    for o in outs:
        np.testing.assert_array_equal(np.asarray(o[0] if isinstance(o, (list, tuple)) else o), xs[0] + xs[1])


def test_a_program_with_collectives_is_not_exported_to_c(tmp_path):
    from hlo.backends.cpu.export_c.spec import ExportError
    text = ("module @m\n\nfunc @main(%a: f32[3]) -> (f32[3]) {\n"
            f"  %0 = all_reduce(%a) {{replica_groups = [[0, 1]]}} : f32[3] {{\n{_comp('add', 'f32', 0)}\n"
            "  return(%0)\n}\n")
    with pytest.raises(ExportError, match="holds collectives"):
        Lowered(parse_module(text)).compile(target="cpu").export_c(tmp_path / "lib", "ar")
