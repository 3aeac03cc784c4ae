"""StableHLO's collectives imported into hlo's op table, run by the interpreter's parallel runs,
and exported back (jaxlib verifies the text; re-import prints identically)."""
import numpy as np
import pytest

pytest.importorskip("jaxlib")

from hlo.ir import print_module
from hlo.ir.interpreter import run, run_parallel
from hlo.ir.stablehlo import export_module, import_module

PROGRAM = """
module @collectives {
  func.func @main(%a: tensor<4xf32>, %b: tensor<2x4xi32>) -> (tensor<4xf32>, tensor<4x4xi32>, tensor<2x2xi32>, tensor<4x2xi32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<ui32>, tensor<ui32>) {
    %0 = "stablehlo.all_reduce"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.maximum %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.all_gather"(%b) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xi32>) -> tensor<4x4xi32>
    %2 = "stablehlo.reduce_scatter"(%b) ({
      ^bb0(%x: tensor<i32>, %y: tensor<i32>):
        %s = stablehlo.add %x, %y : tensor<i32>
        stablehlo.return %s : tensor<i32>
    }) {scatter_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xi32>) -> tensor<2x2xi32>
    %3 = "stablehlo.all_to_all"(%b) {split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 2 : i64,
        replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xi32>) -> tensor<4x2xi32>
    %4 = "stablehlo.collective_permute"(%b) {source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>} : (tensor<2x4xi32>) -> tensor<2x4xi32>
    %5 = "stablehlo.collective_broadcast"(%b) {replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>} : (tensor<2x4xi32>) -> tensor<2x4xi32>
    %6 = stablehlo.replica_id : tensor<ui32>
    %7 = stablehlo.partition_id : tensor<ui32>
    return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4xf32>, tensor<4x4xi32>, tensor<2x2xi32>, tensor<4x2xi32>, tensor<2x4xi32>, tensor<2x4xi32>, tensor<ui32>, tensor<ui32>
  }
}
"""


def test_collectives_import_with_their_attributes():
    m = import_module(PROGRAM)
    text = print_module(m)
    assert "all_reduce(%arg0) {channel_id = 1, replica_groups = [[0, 1], [2]], use_global_device_ids = true}" in text
    assert "collective_permute(%arg1) {source_target_pairs = [[0, 1], [1, 0]]}" in text  # handle 0: none
    assert "replica_id() : u32[]" in text


def test_collectives_export_and_reimport_identically():
    m = import_module(PROGRAM)
    again = import_module(export_module(m))
    assert print_module(again) == print_module(m)


def test_imported_collectives_run_as_two_replicas():
    # (flattened ids over a grid of 2 replicas x 1 partition: the ids are the replicas)
    m = import_module(PROGRAM.replace("dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>",
                                      "dense<[[0, 1]]> : tensor<1x2xi64>"))
    a = [np.array([1, 5, 2, 0], np.float32), np.array([3, 1, 2, 7], np.float32)]
    b = [np.arange(8, dtype=np.int32).reshape(2, 4), 10 * np.arange(8, dtype=np.int32).reshape(2, 4)]
    outs = run_parallel(m, [[a[0], b[0]], [a[1], b[1]]], num_replicas=2)
    for i, (r0, r1, r2, r3, r4, r5, rid, pid) in enumerate(outs):
        np.testing.assert_array_equal(r0, np.maximum(a[0], a[1]))
        np.testing.assert_array_equal(r1, np.concatenate(b, axis=0))
        np.testing.assert_array_equal(r2, (b[0] + b[1])[:, 2 * i:2 * i + 2])
        np.testing.assert_array_equal(r3, np.concatenate([x[:, 2 * i:2 * i + 2] for x in b], axis=0))
        np.testing.assert_array_equal(r4, b[1 - i])
        np.testing.assert_array_equal(r5, b[1])
        assert (int(rid), int(pid)) == (i, 0)


def test_run_parallel_of_the_test_vectors_imports_and_exports():
    text = """
module @m {
  func.func @p() -> tensor<ui32> {
    %r = stablehlo.partition_id : tensor<ui32>
    return %r : tensor<ui32>
  }
  func.func @main() -> (tensor<ui32>, tensor<ui32>, tensor<ui32>) {
    %results:3 = "interpreter.run_parallel"() {programs = [[@p, @p, @p]]} : () -> (tensor<ui32>, tensor<ui32>, tensor<ui32>)
    return %results#0, %results#1, %results#2 : tensor<ui32>, tensor<ui32>, tensor<ui32>
  }
}
"""
    m = import_module(text)
    assert "run_parallel() {num_partitions = 3, num_replicas = 1}" in print_module(m)
    assert [int(x) for x in run(m, [])] == [0, 1, 2]
    assert print_module(import_module(export_module(m))) == print_module(m)


NEWER = """
module @m {
  func.func @main(%a: tensor<2xi64>, %b: tensor<2xi64>, %root: tensor<2xi32>) -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) {
    %r:2 = "stablehlo.collective_broadcast"(%a, %b, %root) {
      replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>,
      has_dynamic_root
    } : (tensor<2xi64>, tensor<2xi64>, tensor<2xi32>) -> (tensor<2xi64>, tensor<2xi64>)
    %s = "stablehlo.collective_reduce"(%a) ({
      ^bb0(%x: tensor<i64>, %y: tensor<i64>):
        %0 = stablehlo.add %x, %y : tensor<i64>
        stablehlo.return %0 : tensor<i64>
    }) {replica_groups = dense<[[2, 0], [1, -1]]> : tensor<2x2xi64>} : (tensor<2xi64>) -> tensor<2xi64>
    return %r#0, %r#1, %s : tensor<2xi64>, tensor<2xi64>, tensor<2xi64>
  }
}
"""


def test_collective_forms_newer_than_jaxlib_are_written_with_hlo_ops():
    from hlo.ir.stablehlo.newer_syntax import rewrite
    assert '"hlo_newer.collective_reduce"(' in rewrite(NEWER)
    assert '"hlo_newer.collective_broadcast"(' in rewrite(NEWER)
    plain = '"stablehlo.collective_broadcast"(%a) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (t) -> t'
    assert rewrite(plain) == plain  # (the form jaxlib parses stays)
    m = import_module(NEWER)
    text = print_module(m)
    assert "all_gather" in text and "all_reduce" in text and "collective_reduce" not in text
    a = [np.array([1, 2]), np.array([3, 4]), np.array([5, 6])]
    b = [10 * x for x in a]
    root = np.array([2, 1], np.int32)
    outs = run_parallel(m, [[a[i], b[i], root] for i in range(3)], num_replicas=3)
    for i, (r0, r1, s) in enumerate(outs):
        np.testing.assert_array_equal(r0, a[2])   # data 0 from the group's position 2
        np.testing.assert_array_equal(r1, b[1])   # data 1 from position 1
        # groups [2, 0] and [1]: replica 2 opens the first and gets a2 + a0, replica 1 its own
        want = {2: a[2] + a[0], 1: a[1], 0: np.zeros(2, np.int64)}[i]
        np.testing.assert_array_equal(s, want)
    assert print_module(import_module(export_module(m))) == text
