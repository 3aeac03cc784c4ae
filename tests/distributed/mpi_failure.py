"""A run in which process 1 fails mid-run, for tests/distributed/test_mpi.py's failure tests:

    mpirun -n 2 --oversubscribe python tests/distributed/mpi_failure.py kill|hang|mismatch

Process 1 takes part in a first all-reduce, then ``kill``s itself (SIGKILL: no clean-up, as a
crash or the OOM killer) or ``hang``s (sleeps, as a process stuck elsewhere or one running a
different program); process 0 goes on with its all-reduces and must fail with a clear error
within a bounded time rather than wait forever. With ``mismatch``, process 1 calls its
second all-reduce on fewer elements than process 0 (a program that differs across processes):
both must fail, naming what each called.
"""
import os
import signal
import sys
import time

import numpy as np

import hlo

mode = sys.argv[1]
hlo.distributed.initialize()
w = hlo.distributed.cpu_transport()
x = np.ones(1 << 16, np.float32)
w.all_reduce(x)
print(f"process {w.rank}: first all_reduce done", flush=True)
if mode == "mismatch":
    w.all_reduce(x if w.rank == 0 else x[:16])
    print(f"process {w.rank}: the mismatched all_reduce returned", flush=True)
if w.rank == 1:
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)
for i in range(1000):
    w.all_reduce(x)
print("process 0 finished: no failure was noticed", flush=True)
