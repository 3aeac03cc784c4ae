"""All-reduce bandwidth across processes: hlo's transports beside torch.distributed's, in the
same processes, on the same buffers' sizes.

    python -m bench.collectives --cpu            # mpirun -n 2: hlo over MPI vs torch gloo
    python -m bench.collectives --gpu            # one process per GPU (torchrun-style, all GPUs):
                                                 # hlo's NCCL binding vs torch.distributed nccl
    python -m bench.collectives --gpu --nprocs 2 --sizes 1M,256M

Each size is timed as the best of ``--repeats`` rounds of ``--iters`` back-to-back all-reduces
(sum, float32), after a warm-up; the table gives each system's bus bandwidth (NCCL's measure:
bytes x 2(n-1)/n per second, comparable across process counts) and hlo's as a fraction of
torch's. Process 0 prints the table and writes JSON to ``--out`` (default bench/results/). A
system that is absent (no torch, no MPI, no NCCL) is a ``skipped: why`` row, never an error.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_sizes(text: str):
    out = []
    for part in text.split(","):
        part = part.strip().upper().rstrip("B")
        mult = UNITS.get(part[-1:], 1)
        out.append(int(float(part[:-1] if part[-1:] in UNITS else part) * mult))
    return out


def bus_bw(nbytes: int, seconds: float, n: int) -> float:
    return nbytes / seconds * (2 * (n - 1) / n) / 1e9 if n > 1 else nbytes / seconds / 1e9


def best_of(run_iters, sync, iters: int, repeats: int) -> float:
    run_iters(2)
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run_iters(iters)
        sync()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


# --- workers (every process runs one) ----------------------------------------------------------

def cpu_worker(args) -> list:
    import numpy as np

    import hlo
    hlo.distributed.initialize()
    w = hlo.distributed.cpu_transport()
    n, rank = w.size, w.rank
    tdist = None
    try:
        import torch
        import torch.distributed as tdist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        port = w.broadcast(np.array([_free_port() if rank == 0 else 0], np.int64), 0)[0]
        os.environ["MASTER_PORT"] = str(int(port))
        tdist.init_process_group("gloo", rank=rank, world_size=n)
    except Exception as e:  # a peer that cannot start is a skipped row
        torch_why = f"torch.distributed gloo: {type(e).__name__}: {e}"
        tdist = None
    rows = []
    for size in args.sizes:
        x = np.ones(size // 4, np.float32)
        y = np.empty_like(x)

        def hlo_iters(k):
            for _ in range(k):
                w.all_reduce(x, y)
        t = best_of(hlo_iters, w.barrier, args.iters, args.repeats)
        row = {"bytes": size, "processes": n, "hlo_mpi_s": t, "hlo_mpi_busbw": bus_bw(size, t, n)}
        if tdist is not None:
            tx = torch.from_numpy(x.copy())

            def torch_iters(k):
                for _ in range(k):
                    tdist.all_reduce(tx)
            tt = best_of(torch_iters, tdist.barrier, args.iters, args.repeats)
            row.update(torch_gloo_s=tt, torch_gloo_busbw=bus_bw(size, tt, n))
        else:
            row["torch_gloo"] = f"skipped: {torch_why}"
        rows.append(row)
    if tdist is not None:
        tdist.destroy_process_group()
    hlo.distributed.shutdown()
    return rows if rank == 0 else []


def gpu_worker(args) -> list:
    import numpy as np

    import hlo
    from hlo.runtime.cuda import driver, nccl
    hlo.distributed.initialize()
    rank, n = hlo.distributed.process_index(), hlo.distributed.process_count()
    device = hlo.distributed.local_process_index()
    ctx = driver.get_context(device)
    ctx.make_current()
    stream = ctx.create_stream()
    if n == 1:  # a communicator of one: its id needs no exchange
        uid = nccl.unique_id()
    else:
        via = hlo.distributed.rendezvous() or hlo.distributed.cpu_transport()
        uid = nccl.bootstrap_unique_id(rank, via, "bench/nccl", n)
    comm = nccl.Communicator.init_rank(n, uid, rank, device)
    torch_why = None
    try:
        import torch
        import torch.distributed as tdist
        torch.cuda.set_device(device)
        os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 1)
        tdist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", device))
    except Exception as e:
        torch_why, tdist = f"torch.distributed nccl: {type(e).__name__}: {e}", None
    rows = []
    for size in args.sizes:
        count = size // 4
        buf = ctx.alloc(size)
        host = np.full(count, 1.0, np.float32)
        driver.memcpy_htod(buf, host.ctypes.data, size, stream)
        comm.all_reduce(buf, buf, count, "float32", "sum", stream)  # checked once: every element is n
        comm.wait(stream, "the bench's check")
        driver.memcpy_dtoh(host.ctypes.data, buf, size, stream)
        value_ok = bool(np.all(host == n))

        def hlo_iters(k):
            for _ in range(k):
                comm.all_reduce(buf, buf, count, "float32", "sum", stream)
        t = best_of(hlo_iters, lambda: comm.wait(stream, "the bench's all-reduces"), args.iters, args.repeats)
        row = {"bytes": size, "processes": n, "hlo_nccl_s": t, "hlo_nccl_busbw": bus_bw(size, t, n), "hlo_value_ok": value_ok}
        ctx.free(buf)
        if tdist is not None:
            tx = torch.ones(count, dtype=torch.float32, device=f"cuda:{device}")

            def torch_iters(k):
                for _ in range(k):
                    tdist.all_reduce(tx)
            tt = best_of(torch_iters, torch.cuda.synchronize, args.iters, args.repeats)
            row.update(torch_nccl_s=tt, torch_nccl_busbw=bus_bw(size, tt, n))
            del tx
        else:
            row["torch_nccl"] = f"skipped: {torch_why}"
        rows.append(row)
    if tdist is not None:
        tdist.destroy_process_group()
    comm.destroy()
    hlo.distributed.shutdown()
    return rows if rank == 0 else []


# --- launching ------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def launch_cpu(args) -> int:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("skipped: no mpirun (make mpi installs Open MPI)")
        return 0
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpirun, "-n", str(args.nprocs or 2), "--oversubscribe", sys.executable, "-m", "bench.collectives",
           "--worker", "cpu", *_passthrough(args)]
    return subprocess.call(cmd, cwd=ROOT, env=env)


def launch_gpu(args) -> int:
    try:
        from hlo.runtime.cuda import driver
        ngpu = driver.device_count()
    except Exception as e:
        print(f"skipped: no GPU ({e})")
        return 0
    n = args.nprocs or ngpu
    if n > ngpu:
        print(f"skipped: {n} processes need {n} GPUs; this machine has {ngpu}")
        return 0
    port = _free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-m", "bench.collectives", "--worker", "gpu",
                                       *_passthrough(args)], cwd=ROOT, env=env))
    return max(p.wait() for p in procs)


def _passthrough(args):
    return ["--sizes", ",".join(str(s) for s in args.sizes), "--iters", str(args.iters),
            "--repeats", str(args.repeats), "--out", args.out]


def report(kind: str, rows: list, out_dir: str) -> None:
    n = rows[0]["processes"]
    ours, theirs = ("hlo_mpi", "torch_gloo") if kind == "cpu" else ("hlo_nccl", "torch_nccl")
    print(f"all-reduce (sum, f32) bus bandwidth, GB/s ({kind}, {n} processes)")
    print(f"{'bytes':>12}  {ours:>10}  {theirs:>10}  {'hlo/torch':>9}")
    for r in rows:
        a = r.get(f"{ours}_busbw")
        b = r.get(f"{theirs}_busbw")
        ratio = f"{a / b:9.2f}" if a and b else f"{'-':>9}"
        print(f"{r['bytes']:>12}  {a:10.2f}  " + (f"{b:10.2f}" if b else f"{'-':>10}") + f"  {ratio}"
              + (f"   {r[theirs]}" if theirs in r else ""))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"collectives_{kind}_{time.strftime('%Y-%m-%d')}.json")
    with open(path, "w") as f:
        json.dump({"kind": kind, "host": platform.node(), "rows": rows}, f, indent=1)
    print(f"wrote {path}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--nprocs", type=int, default=0)
    p.add_argument("--sizes", type=parse_sizes, default=None)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--worker", choices=("cpu", "gpu"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        if args.sizes is None:
            raise SystemExit("--worker needs --sizes")
        rows = cpu_worker(args) if args.worker == "cpu" else gpu_worker(args)
        if rows:
            report(args.worker, rows, args.out)
        return 0
    if not (args.cpu or args.gpu):
        p.error("say --cpu or --gpu")
    status = 0
    if args.cpu:
        if args.sizes is None:
            args.sizes = parse_sizes("4K,256K,4M,64M")
        status |= launch_cpu(args)
    if args.gpu:
        if args.sizes is None or args.cpu:
            args.sizes = parse_sizes("1M,16M,256M")
        status |= launch_gpu(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
