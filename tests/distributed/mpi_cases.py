"""The MPI transport's collectives against numpy, run by every process of an MPI job:

    mpirun -n 2 --oversubscribe python -m pytest -q -p no:cacheprovider tests/distributed/mpi_cases.py

(``tests/distributed/test_mpi.py`` runs that command in ``make test``; the file is not named
``test_*`` so that a plain pytest run does not collect it). Every process runs the same tests in
the same order; each builds every process's inputs from a seed and the process index, so each
knows the whole expected result and checks its part against numpy.
"""
import os

import ml_dtypes
import numpy as np
import pytest

import hlo
from hlo.runtime.cpu import mpi_collectives as mc
from hlo.runtime.processes import DistributedError

# a failing check on one process must not leave the others waiting for minutes
os.environ.setdefault("HLO_DISTRIBUTED_TIMEOUT", "30")
hlo.distributed.initialize()
W = hlo.distributed.cpu_transport()
R, N = W.rank, W.size

DTYPES = ["float32", "float64", "int8", "int32", "int64", "uint8", "uint32", "bool", "complex64",
          "float16", "bfloat16"]


def dt(name):
    return np.dtype(getattr(ml_dtypes, name)) if name == "bfloat16" else np.dtype(name)


def inputs(dtype, shape, seed=0):
    """Every process's input (a list, index = process), the same on every process."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N):
        if dtype.kind == "b":
            a = rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            a = rng.integers(0, 5, shape)
        elif dtype.kind == "c":
            a = rng.integers(-4, 5, shape) + 1j * rng.integers(-4, 5, shape)
        else:  # small integers: exact in every float format, so sums and products are exact
            a = rng.integers(-3, 4, shape).astype(np.float64)
        out.append(np.asarray(a).astype(dtype))
    return out


def reference(xs, op):
    f = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op]
    if xs[0].dtype.kind == "b":
        f = np.logical_or if op in ("sum", "max") else np.logical_and
    acc = xs[0]
    for x in xs[1:]:
        acc = f(acc, x).astype(xs[0].dtype)
    return acc


def ops_for(dtype):
    return ["sum", "prod"] if dtype.kind == "c" else ["sum", "prod", "min", "max"]


def test_world():
    assert (hlo.distributed.process_index(), hlo.distributed.process_count()) == (R, N)
    assert N >= 2, "run with mpirun -n 2 or more"
    assert mc.thread_level() == "multiple"


@pytest.mark.parametrize("name", DTYPES)
def test_all_reduce(name):
    d = dt(name)
    for op in ops_for(d):
        xs = inputs(d, (3, 5), seed=len(op))
        got = W.all_reduce(xs[R], op=op)
        assert got.dtype == d and got.shape == (3, 5)
        np.testing.assert_array_equal(got.astype(np.float64) if name == "bfloat16" else got,
                                      reference(xs, op).astype(np.float64) if name == "bfloat16"
                                      else reference(xs, op), err_msg=f"{name} {op}")


@pytest.mark.parametrize("name", ["int32", "uint8", "bool"])
def test_bitwise_reductions_and_stablehlo_names(name):
    d = np.dtype(name)
    xs = [(np.arange(16) * (i + 3) % 7).astype(d) for i in range(N)]
    for op, f in (("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                  ("add", np.add), ("maximum", np.maximum), ("minimum", np.minimum)):
        want = xs[0]
        for x in xs[1:]:
            want = f(want, x).astype(d)
        np.testing.assert_array_equal(W.all_reduce(xs[R], op=op), want, err_msg=f"{name} {op}")
        np.testing.assert_array_equal(W.all_reduce(xs[R], op=op, ordered=True), want, err_msg=f"{name} {op}")


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float64"])
def test_ordered_reductions_are_a_fold_in_rank_order_bit_for_bit(name):
    """``ordered=True``: the same bits as folding the processes' values in rank order (what the
    in-process collectives compute), with values whose sums round."""
    d = dt(name)
    rng = np.random.default_rng(42)
    xs = [(rng.standard_normal(257) * 10.0 ** rng.integers(-3, 4, 257)).astype(d) for _ in range(N)]
    assert xs[0].dtype == d
    want = xs[0]
    for x in xs[1:]:
        want = np.add(want, x).astype(d)
    got = W.all_reduce(xs[R], op="add", ordered=True)
    assert got.tobytes() == want.tobytes()
    rs = W.reduce_scatter(np.concatenate([xs[R]] * N), op="sum", ordered=True)
    assert rs.tobytes() == want.tobytes()


def test_all_reduce_in_place_and_into_a_given_buffer():
    xs = inputs(np.dtype("float32"), (7,))
    buf = xs[R].copy()
    assert W.all_reduce(buf, buf) is buf
    np.testing.assert_array_equal(buf, reference(xs, "sum"))
    out = np.full(7, -1.0, np.float32)
    assert W.all_reduce(xs[R], out, op="max") is out
    np.testing.assert_array_equal(out, reference(xs, "max"))


@pytest.mark.parametrize("name", ["float32", "int64", "bool", "bfloat16", "float8_e4m3fn"])
def test_all_gather(name):
    d = np.dtype(getattr(ml_dtypes, name, None) or name)
    xs = inputs(d, (2, 3), seed=3)
    got = W.all_gather(xs[R])
    assert got.shape == (2 * N, 3)
    np.testing.assert_array_equal(got.view(np.uint8), np.concatenate(xs).view(np.uint8))


@pytest.mark.parametrize("name", ["float32", "int32", "float16", "bfloat16"])
def test_reduce_scatter(name):
    d = dt(name)
    for op in ("sum", "max"):
        xs = inputs(d, (2 * N, 3), seed=5)
        got = W.reduce_scatter(xs[R], op=op)
        assert got.shape == (2, 3)
        want = reference(xs, op)[2 * R:2 * R + 2]
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_all_to_all():
    xs = inputs(np.dtype("int32"), (N * 2, 4), seed=7)
    got = W.all_to_all(xs[R])
    want = np.concatenate([xs[i][2 * R:2 * R + 2] for i in range(N)])
    np.testing.assert_array_equal(got, want)


def test_permute_ring_and_partial():
    xs = inputs(np.dtype("float64"), (4,), seed=9)
    ring = [(i, (i + 1) % N) for i in range(N)]
    np.testing.assert_array_equal(W.permute(xs[R], pairs=ring), xs[(R - 1) % N])
    # only process 0 sends, to the last; everyone else receives zeros (collective_permute)
    got = W.permute(xs[R], pairs=[(0, N - 1)])
    np.testing.assert_array_equal(got, xs[0] if R == N - 1 else np.zeros(4))
    # a process that sends to itself keeps its value
    np.testing.assert_array_equal(W.permute(xs[R], pairs=[(i, i) for i in range(N)]), xs[R])


def test_broadcast():
    for root in range(N):
        buf = np.arange(6, dtype=np.int16) * (R + 1)
        assert W.broadcast(buf, root) is buf
        np.testing.assert_array_equal(buf, np.arange(6, dtype=np.int16) * (root + 1))


def test_non_blocking_collectives_overlap():
    xs = inputs(np.dtype("float32"), (N * 3,), seed=11)
    reqs = [W.iall_reduce(xs[R]), W.iall_gather(xs[R]), W.ireduce_scatter(xs[R], op="min"),
            W.iall_to_all(xs[R]), W.ipermute(xs[R], pairs=[(i, (i + 1) % N) for i in range(N)]),
            W.ibarrier()]
    s, g, rs, a2a, p, b = mc.wait_all(reqs)
    np.testing.assert_array_equal(s, reference(xs, "sum"))
    np.testing.assert_array_equal(g, np.concatenate(xs))
    np.testing.assert_array_equal(rs, reference(xs, "min")[3 * R:3 * R + 3])
    np.testing.assert_array_equal(a2a, np.concatenate([xs[i][3 * R:3 * R + 3] for i in range(N)]))
    np.testing.assert_array_equal(p, xs[(R - 1) % N])
    assert b is None and all(r.test() for r in reqs)


def test_buffers_pass_without_copies():
    """A view over raw memory (buffer_at, as over the arena) is written where it lies."""
    backing = np.zeros(16, np.float64)
    view = mc.buffer_at(backing.ctypes.data + 8 * 4, (2, 4), np.float64)
    view[...] = R + 1
    W.all_reduce(view, view)
    np.testing.assert_array_equal(backing[4:12], sum(range(1, N + 1)))
    assert not backing[:4].any() and not backing[12:].any()


def test_groups():
    if N < 2:
        pytest.skip("needs two processes")
    solo = W.group([R])
    assert solo.size == 1 and solo.rank == 0
    np.testing.assert_array_equal(solo.all_reduce(np.array([R + 1.0])), [R + 1.0])
    rev = W.group(list(reversed(range(N))))  # ranks in the group follow the list's order
    assert rev.rank == N - 1 - R
    got = rev.all_gather(np.array([R], np.int64))
    np.testing.assert_array_equal(got, list(reversed(range(N))))
    assert W.group(range(N)) is W


def test_clear_errors_before_any_communication():
    with pytest.raises(DistributedError, match="C-contiguous"):
        W.all_reduce(np.zeros((4, 4))[:, ::2])
    with pytest.raises(DistributedError, match="not one of sum, prod, min, max, and, or, xor"):
        W.all_reduce(np.zeros(3), op="mean")
    with pytest.raises(DistributedError, match="xor of float32 values is not defined"):
        W.all_reduce(np.zeros(3, np.float32), op="xor")
    with pytest.raises(DistributedError, match="max of complex"):
        W.all_reduce(np.zeros(3, np.complex64), op="max")
    with pytest.raises(DistributedError, match="equal blocks"):
        W.reduce_scatter(np.zeros(2 * N + 1))
    with pytest.raises(DistributedError, match="receive buffer holds"):
        W.all_gather(np.zeros(3), np.zeros(3))
    with pytest.raises(DistributedError, match="source of one pair"):
        W.permute(np.zeros(3), pairs=[(0, 1), (0, 0)])
    with pytest.raises(DistributedError, match="not in the group"):
        W.group([(R + 1) % N])
    # the transport is still usable after refused calls
    np.testing.assert_array_equal(W.all_reduce(np.ones(2)), np.full(2, N))


def test_nccl_unique_id_bootstrap_over_mpi():
    """Process 0's NCCL unique id reaches every process over MPI (the one-process-per-GPU
    bootstrap; the ids need no GPU)."""
    from hlo.runtime.cuda import nccl
    why = nccl.unavailable_reason()
    if why is not None:
        pytest.skip(f"NCCL absent: {why}")
    uid = nccl.bootstrap_unique_id(R, W)
    assert len(uid) == nccl.UNIQUE_ID_BYTES
    every = W.all_gather(np.frombuffer(uid, np.uint8).copy())
    assert all(every[i * len(uid):(i + 1) * len(uid)].tobytes() == uid for i in range(N))


def test_the_comparison_can_be_left_out():
    """HLO_DISTRIBUTED_CHECK=0 (here: the transport's flag, on both processes alike) runs the
    collectives without comparing first; the results are the same."""
    xs = inputs(np.dtype("float32"), (N * 2,), seed=13)
    checked = [W.all_reduce(xs[R]), W.all_gather(xs[R]), W.reduce_scatter(xs[R], op="max"),
               W.permute(xs[R], pairs=[(i, (i + 1) % N) for i in range(N)])]
    W.check = False
    try:
        unchecked = [W.all_reduce(xs[R]), W.all_gather(xs[R]), W.reduce_scatter(xs[R], op="max"),
                     W.permute(xs[R], pairs=[(i, (i + 1) % N) for i in range(N)])]
    finally:
        W.check = True
    for a, b in zip(checked, unchecked):
        np.testing.assert_array_equal(a, b)
