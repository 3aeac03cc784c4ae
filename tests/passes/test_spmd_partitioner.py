"""The SPMD partitioner (passes/spmd_partitioner.py): IR text in, per-partition IR text out,
with its decisions; and hlo.jit(in_shardings=...) against the unsharded program."""
import sys
from pathlib import Path

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.ir import parse_module, print_module
from hlo.passes.spmd_partitioner import PartitionError, partition, partition_annotated
from hlo.runtime.cpu import devices as cpu_devices
from hlo.sharding import Mesh, NamedSharding, P

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repo root holds bench/

PROGRAM = """module @m

func @main(%x: f32[8,4], %w: f32[4,2], %b: f32[2]) -> (f32[8,2], f32[2], f32[2,8]) {
  %0 = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[8,2]
  %1 = broadcast_in_dim(%b) {broadcast_dimensions = [1]} : f32[8,2]
  %2 = add(%0, %1) : f32[8,2]
  %c = constant dense<0.0> : f32[]
  %3 = reduce(%2, %c) {dimensions = [0]} : f32[2] {
    ^body(%p: f32[], %q: f32[]):
      %s = add(%p, %q) : f32[]
      return(%s)
  }
  %4 = transpose(%2) {permutation = [1, 0]} : f32[2,8]
  return(%2, %3, %4)
}
"""

PARTITIONED = """module @m

func @main(%arg0: f32[4,4], %arg1: f32[4,2], %arg2: f32[2]) -> (f32[4,2], f32[2], f32[2,4]) {
  %0 = dot_general(%arg0, %arg1) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[4,2]
  %1 = broadcast_in_dim(%arg2) {broadcast_dimensions = [1]} : f32[4,2]
  %2 = add(%0, %1) : f32[4,2]
  %3 = constant dense<0.0> : f32[]
  %4 = reduce(%2, %3) {dimensions = [0]} : f32[2] {
    ^body(%5: f32[], %6: f32[]):
      %7 = add(%5, %6) : f32[]
      return(%7)
  }
  %8 = all_reduce(%4) {channel_id = 1, replica_groups = [[0, 1]], use_global_device_ids = true} : f32[2] {
    ^computation(%9: f32[], %10: f32[]):
      %11 = add(%9, %10) : f32[]
      return(%11)
  }
  %12 = transpose(%2) {permutation = [1, 0]} : f32[2,4]
  return(%2, %8, %12)
}
"""


def test_a_batch_sharded_program():
    out, shardings, decisions = partition(parse_module(PROGRAM), {"batch": 2},
                                          [(("batch",), ()), ((), ()), ((),)])
    assert print_module(out) == PARTITIONED
    assert shardings == [(("batch",), ()), ((),), ((), ("batch",))]
    assert decisions == [
        "broadcast to the block: f32[2] -> f32[4,2] instead of f32[8,2] (its sharded dimensions "
        "[('batch',), ()] are broadcast ones)",
        "all_reduce (add): 'reduce' over dimensions [0] sharded over ['batch']: local reductions, "
        "then one across the partitions"]


def test_the_shardings_can_be_read_from_the_annotations():
    annotated = PROGRAM.replace("%x: f32[8,4]", '%x: f32[8,4] {sharding = "mesh<batch=2> [{batch}, {}]"}')
    assert annotated != PROGRAM
    out, shardings, decisions = partition_annotated(parse_module(annotated))
    assert print_module(out) == PARTITIONED
    want = partition(parse_module(PROGRAM), {"batch": 2}, [(("batch",), ()), ((), ()), ((),)])
    assert (shardings, decisions) == (want[1], want[2])
    # a requested result sharding, and the errors
    res = annotated.replace("-> (f32[8,2], f32[2], f32[2,8])",
                            '-> (f32[8,2], f32[2], f32[2,8] {sharding = "mesh<batch=2> [{}, {batch}]"})')
    assert partition_annotated(parse_module(res))[1][2] == ((), ("batch",))
    with pytest.raises(PartitionError, match="no sharding annotations"):
        partition_annotated(parse_module(PROGRAM))
    two = res.replace('"mesh<batch=2> [{}, {batch}]"', '"mesh<batch=4> [{}, {batch}]"')
    with pytest.raises(PartitionError, match="2 different meshes"):
        partition_annotated(parse_module(two))


def test_a_contracting_dimension_sharded_on_both_sides_is_an_all_reduce():
    text = ("module @m\n\nfunc @main(%x: f32[2,8], %w: f32[8,3]) -> (f32[2,3]) {\n"
            "  %0 = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[2,3]\n"
            "  return(%0)\n}\n")
    out, sh, dec = partition(parse_module(text), {"model": 4}, [((), ("model",)), (("model",), ())])
    t = print_module(out)
    assert "func @main(%arg0: f32[2,2], %arg1: f32[2,3]) -> (f32[2,3])" in t
    assert "all_reduce(%0) {channel_id = 1, replica_groups = [[0, 1, 2, 3]], use_global_device_ids = true} : f32[2,3]" in t
    assert sh == [((), ())] and dec == ["all_reduce (add): 'dot_general' contracts dimensions sharded "
                                        "over ['model']: local products, summed across the partitions"]


def test_an_op_without_a_rule_runs_on_gathered_values():
    text = ("module @m\n\nfunc @main(%x: f32[8,4]) -> (f32[2,4]) {\n"
            "  %0 = slice(%x) {limit_indices = [2, 4], start_indices = [0, 0]} : f32[2,4]\n"
            "  return(%0)\n}\n")
    out, sh, dec = partition(parse_module(text), {"batch": 4, "model": 2}, [(("batch",), ())])
    t = print_module(out)
    assert "all_gather(%arg0) {all_gather_dim = 0, channel_id = 1, replica_groups = [[0, 2, 4, 6], [1, 3, 5, 7]], use_global_device_ids = true} : f32[8,4]" in t
    assert sh == [((), ())]
    assert dec == ["all_gather: dimension 0 of f32[2,4] over ['batch']: 'slice' runs on whole values "
                   "(no partitioning rule for it)"]


def test_a_requested_result_sharding_slices_a_whole_value():
    text = "module @m\n\nfunc @main(%x: f32[8]) -> (f32[8]) {\n  %0 = exponential(%x) : f32[8]\n  return(%0)\n}\n"
    out, sh, dec = partition(parse_module(text), {"i": 2}, [((),)], [(("i",),)])
    t = print_module(out)
    assert "partition_id() : u32[]" in t and "dynamic_slice(" in t and "-> (f32[4])" in t
    assert sh == [(("i",),)] and dec[0].startswith("slice: f32[8] to its block f32[4]")


@pytest.mark.parametrize("sharding,message", [
    ([(("batch",),)], "a sharding of rank 1"),
    ([(("nope",), ())], "names axis 'nope'"),
    ([(("batch", "batch"), ())], "uses an axis twice"),
])
def test_bad_shardings_are_errors(sharding, message):
    text = "module @m\n\nfunc @main(%x: f32[6,4]) -> (f32[6,4]) {\n  return(%x)\n}\n"
    with pytest.raises(PartitionError, match=message):
        partition(parse_module(text), {"batch": 2}, sharding)
    with pytest.raises(PartitionError, match="does not split into 4 blocks"):
        partition(parse_module(text), {"batch": 4}, [(("batch",), ())])


@pytest.fixture
def four_devices(monkeypatch):
    monkeypatch.setenv("HLO_CPU_DEVICES", "4")
    cpu_devices.reset()
    yield Mesh(hlo.devices("cpu")[:4], ("batch",))
    cpu_devices.reset()


def test_jit_with_in_shardings_trains_as_the_unsharded_program(four_devices):
    from bench.workloads import Ops, _in_train, mlp_train_step
    ops = Ops(hnp, grad=hlo.grad)
    args = _in_train(np.random.default_rng(0), {"batch": 32, "d_in": 16, "hidden": 8, "classes": 4},
                     np.float32)
    rep, bs = NamedSharding(four_devices, P()), NamedSharding(four_devices, P("batch"))
    f = lambda *a: mlp_train_step(ops, *a)
    g = hlo.jit(f, in_shardings=(rep, rep, rep, rep, bs, bs), out_shardings=rep)
    out, want = g(*args), hlo.jit(f)(*args)
    for o, w in zip(out, want):
        np.testing.assert_allclose(np.asarray(o), np.asarray(w), rtol=1e-5, atol=1e-6)
        assert o.sharding == rep
    assert any(d.startswith("all_reduce (add): 'dot_general'") for d in g.spmd_decisions)
    assert "all_reduce" in g.as_text()


# the seed workloads' batched arguments (dimension 0 is the batch); the others are replicated
SEED_BATCHED = {"tinyops": (0,), "ln_linear_gelu_res": (0,), "simple_mlp": (0,), "linear_relu": (0,),
                "softmax": (0,), "layernorm": (0,), "transformer_layer": (0,),
                "mlp_train_step": (4, 5), "per_example_grads": (4, 5), "dispatch": (0,)}


@pytest.fixture
def two_devices(monkeypatch):
    monkeypatch.setenv("HLO_CPU_DEVICES", "2")
    cpu_devices.reset()
    yield Mesh(hlo.devices("cpu")[:2], ("batch",))
    cpu_devices.reset()


def test_every_seed_workload_is_listed_with_its_batched_arguments():
    from bench.workloads import WORKLOADS
    assert sorted(SEED_BATCHED) == sorted(w.id for w in WORKLOADS)


@pytest.mark.parametrize("workload", sorted(SEED_BATCHED))
def test_jit_with_batch_sharded_seed_workloads(two_devices, workload):
    """Every seed workload (quick sizes), its batch split over 2 CPU devices by in_shardings,
    equals the unsharded program."""
    from bench.workloads import WORKLOADS, Ops
    w = {x.id: x for x in WORKLOADS}[workload]
    args = w.make_inputs(np.random.default_rng(1), w.dims["quick"], np.float32)
    ops = Ops(hnp, grad=hlo.grad, vmap=hlo.vmap)
    f = lambda *a: w.fn(ops, *a)
    bs, rep = NamedSharding(two_devices, P("batch")), NamedSharding(two_devices, P())
    shard = tuple(bs if i in SEED_BATCHED[workload] else rep for i in range(len(args)))
    g = hlo.jit(f, in_shardings=shard)
    out, want = g(*args), hlo.jit(f)(*args)
    outs, wants = (out, want) if isinstance(want, (tuple, list)) else ((out,), (want,))
    assert len(outs) == len(wants)
    for o, r in zip(outs, wants):
        assert o.shape == np.shape(r)
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-5, atol=1e-6)
        # data parallel: what has the batch keeps it split (the training step's updated
        # parameters and loss are whole), and nothing is gathered
        assert o.sharding == (rep if workload == "mlp_train_step" else bs)
    assert not [d for d in g.spmd_decisions if d.startswith("all_gather")]


def test_with_sharding_constraint_reshards_where_it_is_made(four_devices):
    rep, bs = NamedSharding(four_devices, P()), NamedSharding(four_devices, P("batch"))

    def f(x, w):
        h = hlo.lax.with_sharding_constraint(hnp.tanh(x), bs)  # replicated in, split from here
        return hnp.sum(h @ w, axis=0)
    x, w = np.random.rand(8, 4).astype(np.float32), np.random.rand(4, 3).astype(np.float32)
    g = hlo.jit(f, in_shardings=(rep, rep))
    out = g(x, w)
    np.testing.assert_allclose(np.asarray(out), (np.tanh(x) @ w).sum(0), rtol=1e-5)
    assert g.spmd_decisions[0].startswith("slice: f32[8,4] to its block f32[2,4]")
    assert "with_sharding_constraint" in g.spmd_decisions[0]
    assert any(d.startswith("all_reduce (add): 'reduce'") for d in g.spmd_decisions)
    # without in_shardings (one device) it is the value itself
    np.testing.assert_allclose(np.asarray(hlo.jit(f)(x, w)), (np.tanh(x) @ w).sum(0), rtol=1e-5)


def test_a_batch_sharded_transformer_training_step_needs_no_gather(four_devices):
    """The bench's transformer layer under an SGD step, batch sharded by in_shardings: the
    partitioner finds a data-parallel program (gradients all-reduced, nothing gathered) equal
    to the one-device step."""
    from bench.workloads import Ops, _in_transformer, transformer_layer
    ops = Ops(hnp, grad=hlo.grad)
    x, *params = _in_transformer(np.random.default_rng(0), {"x": (8, 4, 64), "ffn": 128}, np.float32)
    y = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)

    def step(params, x, y):
        g = hlo.grad(lambda p: hnp.mean((transformer_layer(ops, x, *p) - y) ** 2))(params)
        return [p - 0.1 * gp for p, gp in zip(params, g)]
    rep, bs = NamedSharding(four_devices, P()), NamedSharding(four_devices, P("batch"))
    g = hlo.jit(step, in_shardings=(rep, bs, bs), out_shardings=rep)
    for o, r in zip(g(params, x, y), hlo.jit(step)(params, x, y)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-5, atol=1e-6)
    assert not [d for d in g.spmd_decisions if d.startswith(("all_gather", "slice"))]
    assert sum(d.startswith("all_reduce") for d in g.spmd_decisions) >= len(params)


def test_the_lowered_program_prints_its_shardings(four_devices):
    """hlo.jit(in_shardings=, out_shardings=): the program before partitioning carries the
    shardings on @main's arguments and results (ir/sharding_attr.py), and reads back."""
    rep, bs = NamedSharding(four_devices, P()), NamedSharding(four_devices, P("batch"))
    g = hlo.jit(lambda x, w: hnp.tanh(x) @ w, in_shardings=(bs, rep), out_shardings=bs)
    g(np.ones((8, 4), np.float32), np.ones((4, 3), np.float32))
    head = g.lowered_ir.splitlines()[2]
    assert head.startswith('func @main(%arg0: f32[8,4] {sharding = "mesh<batch=4> [{batch}, {}]"}, '
                           '%arg1: f32[4,3] {sharding = "mesh<batch=4> [{}, {}]"}) -> '
                           '(f32[8,3] {sharding = "mesh<batch=4> [{batch}, {}]"})'), head
    assert print_module(parse_module(g.lowered_ir)) == g.lowered_ir
    assert "sharding =" not in g.as_text()   # the per-partition program carries none
