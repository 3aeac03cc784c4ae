"""SPMD programs across processes under ``mpirun -n 2 --oversubscribe`` (skipped, with the
reason, where MPI or mpi4py is absent: ``make mpi``): the data-parallel SGD step of
bench/spmd.py's transformer layer, the batch split over the 2 processes
(``hlo.make_array_from_process_local_data``) and the gradients averaged with ``pmean`` over
MPI, gives the one-process result; a process killed mid-run makes the run fail with a message,
in bounded time. The run itself is ``mpi_dp_step.py``."""
import os
import subprocess
import sys

import numpy as np
from test_mpi import HERE, ROOT, mpirun, pytestmark  # noqa: F401  (the MPI skip)

SCRIPT = os.path.join(HERE, "mpi_dp_step.py")


def test_data_parallel_step_over_two_processes_is_the_one_process_step(tmp_path):
    out = tmp_path / "mpi.npz"
    rc, text, _ = mpirun([SCRIPT, "step", str(out)])
    assert rc == 0, text
    # each process checked two steps against hlo.jit of the whole batch (float32 tolerance)
    assert text.count("data-parallel steps match") == 2, text
    # every other collective across the processes, against numpy (all_gather, psum_scatter,
    # ppermute, all_to_all, pmax, an int32 psum, axis_index)
    assert text.count("collectives match numpy") == 2, text
    # and the step equals, bit for bit, the same shard_map on 2 CPU devices of one process:
    # the all-reduce over MPI folds in the group's order, as the in-memory one does
    ref = tmp_path / "inprocess.npz"
    env = dict(os.environ, HLO_CPU_DEVICES="2")
    for v in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
              "RANK", "WORLD_SIZE"):
        env.pop(v, None)
    p = subprocess.run([sys.executable, SCRIPT, "inprocess", str(ref)], cwd=ROOT, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout
    got, want = np.load(out), np.load(ref)
    assert len(got.files) == len(want.files) == 16
    for k in want.files:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_a_killed_process_fails_the_data_parallel_run():
    """Process 1 SIGKILLs itself after the first step: mpirun ends process 0 (in its next
    step's all-reduce) and names the process and the signal, well within a minute."""
    rc, out, wall = mpirun([SCRIPT, "kill"])
    assert rc != 0, out
    assert "process 0: first step done" in out, out
    assert "no failure was noticed" not in out, out
    assert "rank 1" in out and "signal 9" in out, out
    assert wall < 60, f"took {wall:.1f} s:\n{out}"


def test_a_killed_process_under_recovery_fails_the_other_with_the_timeout():
    """With --enable-recovery the launcher lets process 0 run on: its step's all-reduce fails
    after HLO_DISTRIBUTED_TIMEOUT seconds naming the collective, the process and the program's
    op, and it aborts the job."""
    rc, out, wall = mpirun([SCRIPT, "kill"], timeout_env="3", extra=["--enable-recovery"])
    assert "process 0: first step done" in out, out
    assert "no failure was noticed" not in out, out
    assert "DistributedTimeoutError: hlo.distributed: all_reduce(sum, float32" in out, out
    assert "on process 0 of 2 did not complete within 3 s (HLO_DISTRIBUTED_TIMEOUT)" in out, out
    assert "[the program's 'all_reduce'" in out and "partition 0]" in out, out
    assert wall < 60, f"took {wall:.1f} s:\n{out}"
