"""The collective ops in the reference interpreter: every op against a numpy reference on 1, 2,
4 and 8 processes, replica and partition groups (default, non-default, ragged), the text form,
and the errors (bad groups, deadlocks) that must never hang."""
import numpy as np
import pytest

from hlo.ir import parse_module, print_module
from hlo.ir.errors import IRError
from hlo.ir.interpreter import InterpreterError, run, run_parallel

SIZES = (1, 2, 4, 8)
DTYPES = {"f32": np.float32, "s32": np.int32, "f64": np.float64, "u8": np.uint8}


def module(body: str, args: str, results: str) -> str:
    return f"module @m\n\nfunc @main({args}) -> ({results}) {{\n{body}\n}}\n"


def computation(op: str, dt: str) -> str:
    return (f"    ^computation(%x: {dt}[], %y: {dt}[]):\n      %s = {op}(%x, %y) : {dt}[]\n"
            f"      return(%s)\n  }}")


def inputs(n, shape, dt, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, 50, shape)).astype(DTYPES[dt]) for _ in range(n)]


def groups_text(groups):
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dt", sorted(DTYPES))
@pytest.mark.parametrize("op,ref", [("add", np.sum), ("maximum", np.max), ("minimum", np.min)])
def test_all_reduce_over_every_replica(n, dt, op, ref):
    m = parse_module(module(f"  %0 = all_reduce(%a) {{replica_groups = {groups_text([range(n)])}}} : {dt}[3,5] {{\n"
                            f"{computation(op, dt)}\n  return(%0)", f"%a: {dt}[3,5]", f"{dt}[3,5]"))
    xs = inputs(n, (3, 5), dt)
    want = ref(np.stack(xs), axis=0).astype(DTYPES[dt])
    for out in run_parallel(m, [[x] for x in xs], num_replicas=n):
        np.testing.assert_array_equal(out[0], want)


@pytest.mark.parametrize("groups", [[[0, 2], [1, 3]], [[3, 1, 0], [2]], [[1], [0], [3, 2]]])
def test_all_reduce_with_non_default_and_ragged_groups(groups):
    m = parse_module(module(f"  %0 = all_reduce(%a) {{replica_groups = {groups_text(groups)}}} : s32[4] {{\n"
                            f"{computation('add', 's32')}\n  return(%0)", "%a: s32[4]", "s32[4]"))
    xs = inputs(4, (4,), "s32")
    outs = run_parallel(m, [[x] for x in xs], num_replicas=4)
    for g in groups:
        want = sum(xs[i] for i in g)
        for i in g:
            np.testing.assert_array_equal(outs[i][0], want)


def test_all_reduce_with_a_computation_that_is_not_one_op():
    # (x + y) * 1 - 0 in s32 written with a constant: still a fold in group order
    body = ("  %0 = all_reduce(%a) {replica_groups = [[0, 1, 2]]} : s32[2] {\n"
            "    ^computation(%x: s32[], %y: s32[]):\n"
            "      %c = constant dense<2> : s32[]\n"
            "      %p = multiply(%x, %c) : s32[]\n"
            "      %s = add(%p, %y) : s32[]\n"
            "      return(%s)\n  }\n  return(%0)")
    m = parse_module(module(body, "%a: s32[2]", "s32[2]"))
    xs = [np.array([1, 2], np.int32), np.array([3, 4], np.int32), np.array([5, 6], np.int32)]
    want = (xs[0] * 2 + xs[1]) * 2 + xs[2]  # folded left to right, in group order
    for out in run_parallel(m, [[x] for x in xs], num_replicas=3):
        np.testing.assert_array_equal(out[0], want)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dim", [0, 1])
def test_all_gather(n, dim):
    shape = (2, 3)
    out_shape = (2 * n, 3) if dim == 0 else (2, 3 * n)
    m = parse_module(module(f"  %0 = all_gather(%a) {{all_gather_dim = {dim}, replica_groups = "
                            f"{groups_text([range(n)])}}} : f32[{out_shape[0]},{out_shape[1]}]\n  return(%0)",
                            "%a: f32[2,3]", f"f32[{out_shape[0]},{out_shape[1]}]"))
    xs = inputs(n, shape, "f32")
    want = np.concatenate(xs, axis=dim)
    for out in run_parallel(m, [[x] for x in xs], num_replicas=n):
        np.testing.assert_array_equal(out[0], want)


@pytest.mark.parametrize("n", SIZES)
def test_reduce_scatter(n):
    m = parse_module(module(f"  %0 = reduce_scatter(%a) {{replica_groups = {groups_text([range(n)])}, "
                            f"scatter_dimension = 1}} : s32[2,3] {{\n{computation('add', 's32')}\n  return(%0)",
                            f"%a: s32[2,{3 * n}]", "s32[2,3]"))
    xs = inputs(n, (2, 3 * n), "s32")
    total = sum(xs)
    outs = run_parallel(m, [[x] for x in xs], num_replicas=n)
    for i in range(n):
        np.testing.assert_array_equal(outs[i][0], total[:, 3 * i:3 * i + 3])


@pytest.mark.parametrize("n", SIZES)
def test_all_to_all(n):
    m = parse_module(module(f"  %0 = all_to_all(%a) {{concat_dimension = 0, replica_groups = "
                            f"{groups_text([range(n)])}, split_count = {n}, split_dimension = 1}} : "
                            f"f32[{2 * n},3]\n  return(%0)", f"%a: f32[2,{3 * n}]", f"f32[{2 * n},3]"))
    xs = inputs(n, (2, 3 * n), "f32")
    outs = run_parallel(m, [[x] for x in xs], num_replicas=n)
    for i in range(n):
        want = np.concatenate([x[:, 3 * i:3 * i + 3] for x in xs], axis=0)
        np.testing.assert_array_equal(outs[i][0], want)


@pytest.mark.parametrize("n", SIZES)
def test_collective_permute_ring_over_partitions(n):
    pairs = [[i, (i + 1) % n] for i in range(n)]
    m = parse_module(module(f"  %0 = collective_permute(%a) {{channel_id = 1, source_target_pairs = "
                            f"{pairs}}} : s32[3]\n  return(%0)", "%a: s32[3]", "s32[3]"))
    xs = inputs(n, (3,), "s32")
    outs = run_parallel(m, [[x] for x in xs], num_partitions=n)
    for i in range(n):
        np.testing.assert_array_equal(outs[i][0], xs[(i - 1) % n])


def test_collective_permute_gives_zeros_to_processes_that_are_no_target():
    m = parse_module(module("  %0 = collective_permute(%a) {source_target_pairs = [[0, 2]]} : f32[2]\n"
                            "  return(%0)", "%a: f32[2]", "f32[2]"))
    xs = [np.full(2, i + 1, np.float32) for i in range(3)]
    outs = run_parallel(m, [[x] for x in xs], num_replicas=3)
    np.testing.assert_array_equal(outs[2][0], xs[0])
    np.testing.assert_array_equal(outs[0][0], np.zeros(2, np.float32))
    np.testing.assert_array_equal(outs[1][0], np.zeros(2, np.float32))


def test_collective_broadcast_from_each_groups_first_process():
    m = parse_module(module("  %0 = collective_broadcast(%a) {replica_groups = [[2, 0], [3]]} : s32[2]\n"
                            "  return(%0)", "%a: s32[2]", "s32[2]"))
    xs = [np.full(2, i + 1, np.int32) for i in range(5)]
    outs = [o[0] for o in run_parallel(m, [[x] for x in xs], num_replicas=5)]
    for i, want in enumerate([xs[2], np.zeros(2), xs[2], xs[3], np.zeros(2)]):
        np.testing.assert_array_equal(outs[i], want)


def test_ids_and_process_groups_over_a_grid_of_replicas_and_partitions():
    # 2 replicas x 3 partitions; a cross-partition all_gather of partition ids, a cross-replica
    # all_reduce of replica ids, and a flattened-id all_reduce over every process
    body = ("  %r = replica_id() : u32[]\n  %p = partition_id() : u32[]\n"
            "  %rr = reshape(%r) : u32[1]\n  %pp = reshape(%p) : u32[1]\n"
            "  %g = all_gather(%pp) {all_gather_dim = 0, channel_id = 1, replica_groups = [[0, 1]]} : u32[6]\n"
            "  %sr = all_reduce(%rr) {replica_groups = [[0, 1]]} : u32[1] {\n" + computation("add", "u32").replace("%s", "%q") + "\n"
            "  %f = all_reduce(%pp) {channel_id = 2, replica_groups = [[0, 1, 2, 3, 4, 5]], "
            "use_global_device_ids = true} : u32[1] {\n" + computation("add", "u32") + "\n"
            "  return(%r, %p, %g, %sr, %f)")
    m = parse_module(module(body, "", "u32[], u32[], u32[6], u32[1], u32[1]"))
    outs = run_parallel(m, [[]] * 6, num_replicas=2, num_partitions=3)
    for i, (r, p, g, s, f) in enumerate(outs):
        assert (int(r), int(p)) == (i // 3, i % 3)
        # cross_replica_and_partition: replicas 0, 1 of every partition, partition-major
        np.testing.assert_array_equal(g, [0, 0, 1, 1, 2, 2])
        assert int(s[0]) == 1 and int(f[0]) == 0 + 1 + 2 + 0 + 1 + 2


def test_a_plain_run_is_one_process():
    m = parse_module(module("  %0 = all_reduce(%a) {replica_groups = [[0]]} : f32[2] {\n"
                            + computation("add", "f32") + "\n  %1 = partition_id() : u32[]\n  return(%0, %1)",
                            "%a: f32[2]", "f32[2], u32[]"))
    x = np.array([1.5, 2.5], np.float32)
    out = run(m, [x])
    np.testing.assert_array_equal(out[0], x)
    assert int(out[1]) == 0


def test_text_form_round_trips():
    text = module("  %0 = all_reduce(%a) {channel_id = 3, replica_groups = [[0, 1], [2]], "
                  "use_global_device_ids = true} : f32[4] {\n" + computation("add", "f32") + "\n"
                  "  %1 = collective_permute(%0) {source_target_pairs = [[0, 1], [1, 0]]} : f32[4]\n"
                  "  %2 = all_to_all(%1) {concat_dimension = 0, split_count = 2, split_dimension = 0} : f32[4]\n"
                  "  %3 = replica_id() : u32[]\n"
                  "  return(%2, %3)", "%a: f32[4]", "f32[4], u32[]")
    m = parse_module(text)
    assert print_module(parse_module(print_module(m))) == print_module(m)
    assert "replica_groups = [[0, 1], [2]]" in print_module(m)


@pytest.mark.parametrize("attrs,message", [
    ("{replica_groups = [[0, 1], [1]]}", "names id 1 twice"),
    ("{replica_groups = [[0], []]}", "empty group"),
    ("{replica_groups = [[0, 1]], use_global_device_ids = true}", "needs a channel_id"),
])
def test_bad_replica_groups_are_verifier_errors(attrs, message):
    with pytest.raises(IRError, match=message):
        parse_module(module(f"  %0 = all_reduce(%a) {attrs} : f32[2] {{\n" + computation("add", "f32")
                            + "\n  return(%0)", "%a: f32[2]", "f32[2]"))


def test_all_gather_result_must_fit_the_group():
    with pytest.raises(IRError, match="must be 2 x 2"):
        parse_module(module("  %0 = all_gather(%a) {all_gather_dim = 0, replica_groups = [[0, 1]]} : f32[6]\n"
                            "  return(%0)", "%a: f32[2]", "f32[6]"))


def test_a_group_naming_a_process_the_run_lacks_is_an_error():
    m = parse_module(module("  %0 = all_reduce(%a) {replica_groups = [[0, 1, 2]]} : f32[2] {\n"
                            + computation("add", "f32") + "\n  return(%0)", "%a: f32[2]", "f32[2]"))
    x = np.zeros(2, np.float32)
    with pytest.raises(InterpreterError, match="names replica 2, but the run has 2 replicas"):
        run_parallel(m, [[x], [x]], num_replicas=2)


def _branchy(true_branch_collective: bool) -> str:
    # replica 0 takes the true branch, replica 1 the false one
    t = ("      %t = all_reduce(%a) {replica_groups = [[0, 1]]} : f32[2] {\n"
         "        ^computation(%x: f32[], %y: f32[]):\n          %s = add(%x, %y) : f32[]\n"
         "          return(%s)\n      }\n      return(%t)")
    f = ("      %u = all_gather(%a) {all_gather_dim = 0, replica_groups = [[0, 1]]} : f32[4]\n"
         "      %v = slice(%u) {limit_indices = [2], start_indices = [0]} : f32[2]\n      return(%v)")
    other = f if true_branch_collective else "      return(%a)"
    body = ("  %r = replica_id() : u32[]\n  %z = constant dense<0> : u32[]\n"
            "  %c = compare(%r, %z) {comparison_direction = \"EQ\"} : pred[]\n"
            f"  %o = if(%c) : f32[2] {{\n    ^true_branch():\n{t}\n    ^false_branch():\n{other}\n  }}\n"
            "  return(%o)")
    return module(body, "%a: f32[2]", "f32[2]")


def test_a_process_that_ends_without_its_collective_is_an_error_not_a_hang():
    m = parse_module(_branchy(False))
    x = np.ones(2, np.float32)
    with pytest.raises(InterpreterError, match="ended without reaching this collective"):
        run_parallel(m, [[x], [x]], num_replicas=2)


def test_processes_meeting_at_different_collectives_is_an_error():
    m = parse_module(_branchy(True))
    x = np.ones(2, np.float32)
    with pytest.raises(InterpreterError, match="must run the same collectives in the same order"):
        run_parallel(m, [[x], [x]], num_replicas=2)


def test_processes_waiting_for_each_other_are_a_deadlock_not_a_hang():
    # replica i runs branch i: replica 0 waits for group [0, 1], replica 1 for [1, 2], replica 2
    # for [0, 2]: each waits for a process that waits elsewhere
    def branch(i, groups):
        return (f"    ^branch{i}():\n      %t{i} = all_reduce(%a) {{replica_groups = {groups}}} : f32[2] {{\n"
                f"        ^computation(%x{i}: f32[], %y{i}: f32[]):\n          %s{i} = add(%x{i}, %y{i}) : f32[]\n"
                f"          return(%s{i})\n      }}\n      return(%t{i})\n")
    body = ("  %r = replica_id() : u32[]\n  %i = convert(%r) : s32[]\n  %o = case(%i) : f32[2] {\n"
            + branch(0, "[[0, 1], [2]]") + branch(1, "[[1, 2], [0]]") + branch(2, "[[0, 2], [1]]")
            + "  }\n  return(%o)")
    m = parse_module(module(body, "%a: f32[2]", "f32[2]"))
    x = np.ones(2, np.float32)
    with pytest.raises(InterpreterError, match="deadlock: process .* waits for"):
        run_parallel(m, [[x]] * 3, num_replicas=3)


def test_a_failing_process_fails_the_run_and_names_itself():
    m = parse_module(module("  %0 = all_reduce(%a) {replica_groups = [[0, 1]]} : f32[2] {\n"
                            + computation("add", "f32") + "\n  return(%0)", "%a: f32[2]", "f32[2]"))
    x = np.zeros(2, np.float32)
    with pytest.raises(InterpreterError, match="2 argument lists, got 1"):
        run_parallel(m, [[x]], num_replicas=2)
    with pytest.raises(InterpreterError, match="argument #0"):
        run_parallel(m, [[x], [np.zeros(3, np.float32)]], num_replicas=2)


def test_constant_folding_leaves_collectives_to_run():
    from hlo.staging.stages import Lowered
    m = parse_module(module("  %0 = partition_id() : u32[]\n  %c = constant dense<[1.0, 2.0]> : f32[2]\n"
                            "  %1 = all_reduce(%c) {replica_groups = [[0]]} : f32[2] {\n"
                            + computation("add", "f32") + "\n  return(%0, %1)", "", "u32[], f32[2]"))
    text = Lowered(m).compile(target="interpreter").as_text()
    assert "partition_id" in text and "all_reduce" in text
