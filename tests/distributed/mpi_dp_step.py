"""The data-parallel SGD step of bench/spmd.py's transformer layer across processes, for
tests/distributed/test_mpi_spmd.py:

    mpirun -n 2 --oversubscribe python tests/distributed/mpi_dp_step.py step|kill [OUT.npz]
    HLO_CPU_DEVICES=2 python tests/distributed/mpi_dp_step.py inprocess OUT.npz

Every process builds the same parameters and global batch (seed 0), keeps its half of the
batch (``hlo.make_array_from_process_local_data``) and runs the step as one ``hlo.shard_map``
over a mesh of both processes' CPU devices: gradients averaged with ``pmean`` over MPI. ``step``
compares the new parameters with the one-process step on the whole batch (``hlo.jit``) and
process 0 writes them to OUT.npz; ``kill``: after a first step, process 1 SIGKILLs itself and
process 0 goes on stepping (it must fail, not hang). ``inprocess`` runs the step in one process
over 2 CPU devices (the in-memory collectives) and writes its parameters to OUT.npz.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np

import hlo
import hlo.numpy as hnp
from bench.spmd import LR, SIZES
from bench.workloads import Ops, _in_transformer, transformer_layer
from hlo.sharding import Mesh, NamedSharding, P

ops = Ops(hnp, grad=hlo.grad)


def loss(params, x, y):
    return hnp.mean((transformer_layer(ops, x, *params) - y) ** 2)


def dp_step(params, x, y):
    g = hlo.lax.pmean(hlo.grad(loss)(params, x, y), "batch")
    return [p - LR * gp for p, gp in zip(params, g)]


def full_step(params, x, y):
    g = hlo.grad(loss)(params, x, y)
    return [p - LR * gp for p, gp in zip(params, g)]


def data():
    sizes = SIZES["quick"]
    rng = np.random.default_rng(0)
    x, *params = _in_transformer(rng, {"x": sizes["x"], "ffn": sizes["ffn"]}, np.float32)
    y = rng.standard_normal(x.shape).astype(np.float32)
    return params, x, y


def in_process(out):
    """The same step in one process on 2 CPU devices (HLO_CPU_DEVICES=2): the in-memory
    collectives, for the test's bit-for-bit comparison."""
    params, x, y = data()
    mesh = Mesh(hlo.devices("cpu")[:2], ("batch",))
    step = hlo.shard_map(dp_step, mesh, in_specs=(P(), P("batch"), P("batch")), out_specs=P())
    np.savez(out, *[np.asarray(a) for a in step(params, x, y)])


def check_collectives(mesh, me, n):
    """Every collective across the processes against numpy, each process on its own block."""
    x = np.arange(4 * n * 4, dtype=np.float32).reshape(2 * n, 4 * n) - 7
    mine = hlo.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), x[2 * me:2 * me + 2])
    lax = hlo.lax

    def f(b):
        return (lax.all_gather(b, "batch", tiled=True),
                lax.psum_scatter(b, "batch", scatter_dimension=1, tiled=True),
                lax.ppermute(b, "batch", perm=[(i, (i + 1) % n) for i in range(n)]),
                lax.all_to_all(b, "batch", 1, 0, tiled=True),
                lax.pmax(b, "batch"), lax.psum(b.astype(hnp.int32), "batch"),
                lax.axis_index("batch").reshape(1))
    outs = hlo.shard_map(f, mesh, in_specs=P("batch"), out_specs=P("batch"))(mine)
    got = [o.addressable_shards[0].data for o in outs]
    blocks = [x[2 * i:2 * i + 2] for i in range(n)]
    want = [x, sum(blocks)[:, 4 * me:4 * me + 4], blocks[(me - 1) % n],
            np.concatenate([b[:, 4 * me:4 * me + 4] for b in blocks], axis=0),
            np.maximum.reduce(blocks), sum(b.astype(np.int32) for b in blocks), np.array([me])]
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"result {k}")
    try:
        np.asarray(outs[0])
    except hlo.errors.ArgumentTypeError as e:
        assert "held by other processes" in str(e), e
    else:
        raise AssertionError("np.asarray of a result whose blocks other processes hold")
    # hlo.jit with in_shardings (the partitioner's program) on the process-local blocks
    g = hlo.jit(lambda a: hnp.tanh(a).sum(axis=0), in_shardings=NamedSharding(mesh, P("batch")),
                out_shardings=NamedSharding(mesh, P()))
    np.testing.assert_allclose(np.asarray(g(mine)), np.tanh(x).sum(axis=0), rtol=1e-6)
    print(f"process {me}: collectives match numpy", flush=True)


def main():
    mode = sys.argv[1]
    if mode == "inprocess":
        return in_process(sys.argv[2])
    hlo.distributed.initialize()
    me, n = hlo.distributed.process_index(), hlo.distributed.process_count()
    devices = hlo.devices("cpu")
    assert [d.id for d in devices] == list(range(n)), devices
    assert hlo.local_devices("cpu") == [devices[me]], hlo.local_devices("cpu")
    assert [d.process_index for d in devices] == list(range(n))

    params, x, y = data()
    rows = x.shape[0] // n
    mesh = Mesh(devices, ("batch",))
    batch = NamedSharding(mesh, P("batch"))
    xs = hlo.make_array_from_process_local_data(batch, x[me * rows:(me + 1) * rows])
    ys = hlo.make_array_from_process_local_data(batch, y[me * rows:(me + 1) * rows])
    assert xs.shape == x.shape and not xs.is_fully_addressable
    step = hlo.shard_map(dp_step, mesh, in_specs=(P(), P("batch"), P("batch")), out_specs=P())

    new = [np.asarray(a) for a in step(params, xs, ys)]
    print(f"process {me}: first step done", flush=True)
    if mode == "step":
        ref = [np.asarray(a) for a in hlo.jit(full_step)(params, x, y)]
        err = max(float(np.max(np.abs((a - p) - (b - p)))) / max(float(np.max(np.abs(b - p))), 1e-30)
                  for a, b, p in zip(new, ref, params))
        print(f"process {me}: update relative error vs the one-process step {err:.2e}", flush=True)
        assert err < 1e-4, err
        # a second step from the first one's parameters: the programs stay in step
        again = [np.asarray(a) for a in step(new, xs, ys)]
        ref2 = [np.asarray(a) for a in hlo.jit(full_step)(ref, x, y)]
        for a, b in zip(again, ref2):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        if me == 0 and len(sys.argv) > 2:
            np.savez(sys.argv[2], *new)
        print(f"process {me}: data-parallel steps match", flush=True)
        check_collectives(mesh, me, n)
        return
    if me == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    for _ in range(1000):
        new = [np.asarray(a) for a in step(new, xs, ys)]
    print(f"process {me} finished: no failure was noticed", flush=True)


if __name__ == "__main__":
    main()
