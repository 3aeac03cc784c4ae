"""Multi-process runs under ``mpirun -n 2 --oversubscribe`` (Open MPI from the system's
packages and mpi4py: ``make mpi``; skipped, with the reason, where either is absent): the MPI
transport's collectives against numpy (``mpi_cases.py``, run by both processes), and what
happens when a process dies or hangs mid-run (``mpi_failure.py``): the other fails with a clear
message, in bounded time."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from hlo.runtime.cpu import mpi_collectives

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MPIRUN = shutil.which("mpirun")
_why = ("no mpirun on PATH (make mpi installs Open MPI)" if MPIRUN is None
        else mpi_collectives.unavailable_reason())
pytestmark = pytest.mark.skipif(_why is not None, reason=f"MPI absent: {_why}")


def mpirun(args, timeout_env="20", extra=(), limit=120):
    """Run ``mpirun -n 2 --oversubscribe <extra> python <args>`` from the repository root:
    (exit status, output, seconds)."""
    env = dict(os.environ, HLO_DISTRIBUTED_TIMEOUT=timeout_env, PYTHONUNBUFFERED="1")
    if os.geteuid() == 0:  # Open MPI refuses root without both of these
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(v, None)
    cmd = [MPIRUN, "-n", "2", "--oversubscribe", *extra, sys.executable, *args]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} still ran after {limit} s: a hang. Output:\n{e.stdout}")
    return p.returncode, p.stdout, time.monotonic() - t0


def test_collectives_against_numpy_on_two_processes():
    rc, out, _ = mpirun(["-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider",
                         os.path.join(HERE, "mpi_cases.py")])
    assert rc == 0, out
    # both processes' pytest exit 0 (mpirun's status); the two outputs may interleave, so
    # their summary lines are not counted
    assert " passed" in out and "failed" not in out, out


def test_a_killed_process_ends_the_run_with_a_message_naming_it():
    """SIGKILL on process 1 mid-run: the launcher ends process 0 and says which process died
    and how, well within a minute."""
    rc, out, wall = mpirun([os.path.join(HERE, "mpi_failure.py"), "kill"])
    assert rc != 0, out
    assert "process 0: first all_reduce done" in out, out
    assert "no failure was noticed" not in out, out
    assert "rank 1" in out and "signal 9" in out, out
    assert wall < 60, f"took {wall:.1f} s:\n{out}"


def test_a_hung_process_makes_the_other_fail_after_the_timeout():
    """Process 1 stops taking part (sleeps): process 0's all-reduce fails after
    HLO_DISTRIBUTED_TIMEOUT seconds with a message naming the collective and itself, and it
    aborts the job, so that the hung process ends too."""
    rc, out, wall = mpirun([os.path.join(HERE, "mpi_failure.py"), "hang"], timeout_env="3")
    assert rc != 0, out
    assert "DistributedTimeoutError: hlo.distributed: all_reduce(sum, float32[65536]) on process 0 " \
           "of 2 did not complete within 3 s (HLO_DISTRIBUTED_TIMEOUT)" in out, out
    assert "no failure was noticed" not in out, out
    assert wall < 60, f"took {wall:.1f} s:\n{out}"


def test_a_killed_process_under_recovery_is_caught_by_the_timeout():
    """With --enable-recovery the launcher leaves the other processes running after one dies;
    the timeout still ends process 0 with its message, and its abort ends the job (mpirun's own
    report of the abort does not always get printed under recovery: not checked)."""
    rc, out, wall = mpirun([os.path.join(HERE, "mpi_failure.py"), "kill"], timeout_env="3",
                           extra=["--enable-recovery"])
    assert "on process 0 of 2 did not complete within 3 s" in out, out
    assert "process 0 of 2 will abort the MPI job when it exits" in out, out
    assert wall < 60, f"took {wall:.1f} s:\n{out}"


def test_a_mismatched_program_is_an_error_naming_both_sides():
    """Process 1's all-reduce has 16 elements, process 0's 65,536: without the check MPI writes
    past process 1's buffer; with it (the default) both fail at once, saying what each called."""
    rc, out, wall = mpirun([os.path.join(HERE, "mpi_failure.py"), "mismatch"])
    assert rc != 0, out
    assert "the mismatched all_reduce returned" not in out, out
    msg = ("call different collectives (seen on process {}): process 0 calls all_reduce(sum, "
           "float32[65536]); process 1 calls all_reduce(sum, float32[16])")
    assert msg.format("0 of 2") in out or msg.format("1 of 2") in out, out
    assert wall < 60, f"took {wall:.1f} s:\n{out}"


def test_initialize_refuses_a_process_id_that_contradicts_mpi(tmp_path):
    prog = tmp_path / "contradict.py"
    # each process writes its own file: the two processes' output through mpirun may interleave
    prog.write_text("import os, sys, hlo\n"
                    "from hlo.distributed import DistributedError\n"
                    "out = open(os.path.join(sys.argv[1], 'out.' + os.environ['OMPI_COMM_WORLD_RANK']), 'w')\n"
                    "try:\n"
                    "    hlo.distributed.initialize(process_id=5)\n"
                    "except DistributedError as e:\n"
                    "    out.write('refused: ' + str(e))\n")
    rc, out, _ = mpirun([str(prog), str(tmp_path)])
    assert rc == 0, out
    for rank in (0, 1):
        text = (tmp_path / f"out.{rank}").read_text()
        assert text.startswith("refused: initialize(process_id=5) contradicts the MPI launcher"), text
        assert f"with process_id {rank} " in text, text
