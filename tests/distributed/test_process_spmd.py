"""The devices and arrays of a run of several processes, seen from one process (no MPI needed:
the run's ``ProcessInfo`` is set as ``hlo.distributed.initialize()`` sets it); the runs
themselves are test_mpi_spmd.py's."""
import numpy as np
import pytest

import hlo
from hlo.runtime import processes
from hlo.runtime.processes import DistributedError, ProcessInfo
from hlo.sharding import Mesh, NamedSharding, P


@pytest.fixture
def second_of_two():
    """This process as process 1 of 2 of an MPI run."""
    old = processes.current()
    processes.set_current(ProcessInfo(1, 2, transport="mpi", source="test"))
    yield
    processes.set_current(old)


def test_one_process_local_devices_and_local_data_are_the_whole():
    assert hlo.local_devices("cpu") == hlo.devices("cpu")
    x = np.arange(12.0).reshape(4, 3)
    mesh = Mesh(hlo.devices("cpu")[:1], ("batch",))
    a = hlo.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), x)
    assert a.is_fully_addressable
    np.testing.assert_array_equal(np.asarray(a), x)
    with pytest.raises(hlo.errors.ShapeError, match="global_shape"):
        hlo.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), x, (8, 3))


def test_devices_of_a_run_of_two(second_of_two):
    devs = hlo.devices("cpu")
    assert [d.id for d in devs] == [0, 1]
    assert [d.process_index for d in devs] == [0, 1]
    assert hlo.local_devices("cpu") == [devs[1]]


def test_process_local_data_is_this_process_block(second_of_two):
    mesh = Mesh(hlo.devices("cpu"), ("batch",))
    local = np.arange(6.0).reshape(2, 3)
    a = hlo.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), local)
    assert a.shape == (4, 3) and not a.is_fully_addressable
    [shard] = a.addressable_shards
    assert shard.device == hlo.devices("cpu")[1] and shard.index == (slice(2, 4), slice(0, 3))
    np.testing.assert_array_equal(shard.data, local)
    with pytest.raises(hlo.errors.ArgumentTypeError, match=r"partitions \[0\] are held by other processes"):
        np.asarray(a)
    # replicated: this process's block is the whole array
    r = hlo.make_array_from_process_local_data(NamedSharding(mesh, P()), local)
    np.testing.assert_array_equal(np.asarray(r), local)
    with pytest.raises(hlo.errors.ShapeError, match=r"shape \(3, 3\), got local data of shape \(2, 3\)"):
        hlo.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), local, (6, 3))


def test_a_mesh_without_this_process_is_an_error(second_of_two):
    mesh = Mesh(hlo.devices("cpu")[:1], ("batch",))
    f = hlo.shard_map(lambda x: x, mesh, in_specs=P(), out_specs=P())
    with pytest.raises(DistributedError, match="process 1 of 2 has no device in the mesh"):
        f(np.ones(3, np.float32))


def test_torchrun_style_runs_have_no_cpu_collectives():
    old = processes.current()
    processes.set_current(ProcessInfo(0, 2, transport="tcp", source="RANK/WORLD_SIZE"))
    try:
        with pytest.raises(DistributedError, match="launch it with `mpirun -n 2"):
            hlo.devices("cpu")
    finally:
        processes.set_current(old)


def test_jit_with_in_shardings_takes_a_sharded_array_as_it_is():
    mesh = Mesh(hlo.devices("cpu")[:1], ("batch",))
    sh = NamedSharding(mesh, P("batch"))
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(4, 3)
    a = hlo.make_array_from_process_local_data(sh, x)
    f = hlo.jit(lambda v: hlo.numpy.tanh(v).sum(axis=0), in_shardings=sh,
                out_shardings=NamedSharding(mesh, P()))
    np.testing.assert_allclose(np.asarray(f(a)), np.tanh(x).sum(axis=0), rtol=1e-6, atol=1e-6)
