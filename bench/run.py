"""Run the seed workloads on every system side by side and print one table; write JSON.

    python -m bench                                   # CPU sizes, every installed system
    python -m bench --target cpu --workloads tinyops,softmax
    python -m bench --quick                           # tiny sizes: a smoke run (CI)
    python -m bench --gpu                             # GPU sizes; jax/torch/hlo on CUDA

Every system's result is checked against the float64 numpy reference before it is timed; a
wrong result is reported and not timed, and makes the exit status 1 (as does an unexpected
error). Skips (a peer not installed, an hlo target or feature not built yet) are printed with
their reason and do not fail the run.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):                       # `python bench/run.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import limits as limits_mod
from bench.check import check_outputs
from bench.report import (
    cpu_seconds_elsewhere,
    format_table,
    geomean_summary,
    load_average,
    machine_info,
    machine_slug,
    now_utc,
    write_json,
)
from bench.systems import make_systems
from bench.timing import measure
from bench.workloads import ALL_WORKLOADS, SECTIONS, np_dtype, reference, select

RESULTS_DIR = Path(__file__).resolve().parent / "results"
HLO_TARGETS = ("interpreter", "cpu", "cuda")
BUSY_NOTE_CPU = 0.2  # of one CPU used elsewhere while a row was timed: the row gets a note
BUSY_MIN_WALL_S = 0.5  # /proc/stat counts 10 ms ticks: shorter rows (--quick) are not judged


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default=None,
                   help="hlo target(s), comma-separated: interpreter, cpu, cuda "
                        "(default: interpreter,cpu; with --gpu: cuda)")
    p.add_argument("--workloads", default=None, help="comma-separated workload ids (default: all)")
    p.add_argument("--section", default=None,
                   help="comma-separated sections: seed (the seed workloads), families (bench/families.py: "
                        "programs of the kinds users bring, issue 32) (default: both)")
    p.add_argument("--systems", default=None,
                   help="comma-separated: numpy, jax, torch, torch.compile, torch.compile-ro (CUDA graphs; --gpu), iree, hlo, c (the export to C, timed from C; default: all, c beside hlo:cpu)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and short timing: a smoke run")
    p.add_argument("--gpu", action="store_true", help="GPU sizes; jax, torch and hlo on CUDA")
    p.add_argument("--out", default=None,
                   help="directory for the JSON (default: bench/results; --quick writes none unless given)")
    p.add_argument("--min-time", type=float, default=None,
                   help="seconds of timed calls per row at least (default 1, --quick 0.02)")
    p.add_argument("--max-time", type=float, default=20.0,
                   help="seconds per row past which a slow system gets fewer calls (default 20)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run: cases not started by then are recorded as skipped "
                        "and the table and JSON are still written (for the device tool's time limit)")
    p.add_argument("--no-unset-reference", action="store_true",
                   help="cpu sizes: do not time numpy with the OPENBLAS_* variables unset in alternation with "
                        "hlo:cpu's product kernels (bench/numpy_unset.py; ~8 s per workload with products)")
    p.add_argument("--list", action="store_true", help="print the workloads and their sizes, then exit")
    p.add_argument("--no-interop", action="store_true",
                   help="--gpu: leave out the interop section (hlo fed torch / jax / cupy arrays, bench/interop.py)")
    p.add_argument("--no-spmd", action="store_true",
                   help="CPU: leave out the spmd section (hlo.shard_map next to jax's on 1/2/4 CPU devices, bench/spmd.py)")
    p.add_argument("--no-coldstart", action="store_true",
                   help="--gpu: leave out the coldstart section (fresh processes to a first result, bench/coldstart.py)")
    return p.parse_args(argv)


def _setup_environment(gpu: bool) -> None:
    """Settings that must precede importing torch / jax / hlo: Inductor and hlo compile into fresh
    caches (a warm cache would hide compile time; Inductor in-process with one thread, since its
    worker pool would otherwise stall what runs next); jax must not grab most of the GPU that
    torch also uses."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inductor-")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # hlo's persistent compilation cache would turn hlo's first call into a cache hit on a
    # second run; jax's and Inductor's first calls compile cold, so hlo's does too.
    os.environ["HLO_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-hlo-cache-")
    if gpu:
        try:
            import jax
            # Same math as torch (no TF32 for f32 products) and hlo.
            jax.config.update("jax_default_matmul_precision", "highest")
        except ImportError:
            pass


def _case_bytes(case, inputs, refs) -> int:
    item = np_dtype(case.dtype).itemsize
    return int(sum(a.nbytes for a in inputs) + sum(r.size * item for r in refs))


def run_one(case, system, inputs, refs, min_time, max_time) -> dict:
    r = {"case": case.name, "workload": case.workload.id, "dtype": case.dtype, "system": system.name,
         "device": system.device, "status": "ok", "note": ""}
    reason = system.skip(case)
    if reason:
        r.update(status="skipped", note=reason)
        return r
    try:
        bound = system.bind(case, inputs)
        t0 = time.perf_counter()
        out = bound.first()
        bound.sync(out)
        r["first_call_s"] = time.perf_counter() - t0
        outs = bound.host(out)
    except NotImplementedError as e:
        r.update(status="skipped", note=f"not implemented: {_first_line(e)}")
        return r
    except Exception as e:
        missing = system.missing_feature(e)
        if missing:
            r.update(status="skipped", note=missing)
        else:
            r.update(status="error", note=f"{type(e).__name__}: {_first_line(e)}")
        return r
    chk = check_outputs(case.dtype, inputs, outs, refs, case.workload.delta_of)
    r["max_rel_err"] = chk.max_rel_err
    r["err_over_tolerance"] = chk.worst
    if not chk.ok:
        r.update(status="wrong", note=f"does not match the float64 reference: {chk.message}")
        return r
    del out, outs
    busy0, wall0 = cpu_seconds_elsewhere(), time.perf_counter()
    try:
        if hasattr(bound, "measure"):  # timed by the system itself (the c row: in C)
            t = bound.measure(min_time, max_time)
        else:
            t = measure(bound.call, bound.sync, min_time=min_time, max_time=max_time)
    except Exception as e:
        r.update(status="error", note=f"while timing: {type(e).__name__}: {_first_line(e)}")
        return r
    r.update(median_s=t.median_s, min_s=t.min_s, max_s=t.max_s, calls=t.calls, batch=t.batch)
    notes = [t.note] if t.note else []
    busy1 = cpu_seconds_elsewhere()
    wall = time.perf_counter() - wall0
    if busy0 is not None and busy1 is not None and wall >= BUSY_MIN_WALL_S:
        # fractions of one CPU used outside this process / stolen by the hypervisor meanwhile
        r["other_cpu"] = round(max(busy1[0] - busy0[0], 0.0) / wall, 3)
        r["steal_cpu"] = round((busy1[1] - busy0[1]) / wall, 3)
        if r["other_cpu"] + r["steal_cpu"] >= BUSY_NOTE_CPU:
            notes.append(f"other processes used {r['other_cpu']:.0%} and the hypervisor "
                         f"{r['steal_cpu']:.0%} of a CPU while this row was timed")
    try:
        r.update(bound.stats())
    except NotImplementedError as e:
        notes.append(f"no kernel/temp figures: {_first_line(e)}")
    except Exception as e:
        notes.append(f"no kernel/temp figures: {type(e).__name__}: {_first_line(e)}")
    r["note"] = "; ".join(notes)
    return r


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def _release_memory(gpu: bool) -> None:
    gc.collect()
    if gpu and "torch" in sys.modules:
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def unset_reference(args, mode: str, live: list, cases: list):
    """numpy with the OPENBLAS_* variables unset in a child process (``bench.numpy_unset``), handed
    to hlo:cpu, whose product kernels' profiled run alternates with its bursts: for runs at cpu
    sizes with hlo:cpu and a case with matrix products, unless ``--no-unset-reference``."""
    from bench.numpy_unset import UnsetMatmul
    hlo_cpu = [s for s in live if getattr(s, "target", None) == "cpu"]
    if mode != "cpu" or args.no_unset_reference or not hlo_cpu or not any(c.flops() for c in cases):
        return None
    ref = UnsetMatmul()
    hlo_cpu[0].product_reference = ref
    return ref


def derive(results, cases_info, limits) -> None:
    """Fill in ratios to the fastest peer, bandwidth, GFLOP/s and the product kernels' rate as a
    fraction of the machine's f32 matmul."""
    best = {}
    for r in results:
        if r["status"] == "ok" and r["is_peer"]:
            best[r["case"]] = min(best.get(r["case"], float("inf")), r["median_s"])
    for r in results:
        if r["status"] != "ok":
            continue
        info = cases_info[r["case"]]
        if r["case"] in best:
            r["ratio_to_best_peer"] = r["median_s"] / best[r["case"]]
        if info["memory_bound"]:
            r["GBps"] = info["bytes"] / r["median_s"] / 1e9
            copy = (limits.get(r["device"]) or {}).get("copy_GBps")
            if copy:
                r["bw_fraction"] = r["GBps"] / copy
        if info["flops"]:
            r["GFLOPs"] = info["flops"] / r["median_s"] / 1e9
        matmul = (limits.get(r["device"]) or {}).get("matmul_GFLOPs_f32")
        if r.get("product_GFLOPs") is not None and matmul:
            r["product_fraction_of_matmul"] = r["product_GFLOPs"] / matmul


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        for w in ALL_WORKLOADS:
            print(f"{w.id:20} [{w.section}] {w.what}")
            for mode in ("cpu", "gpu", "quick"):
                print(f"{'':22}{mode:6} {','.join(w.dtypes[mode]):10} {w.dims[mode]}")
        return 0
    mode = "quick" if args.quick else ("gpu" if args.gpu else "cpu")
    min_time = args.min_time if args.min_time is not None else (0.02 if args.quick else 1.0)
    targets = [t for t in (args.target or ("cuda" if args.gpu else "interpreter,cpu")).split(",") if t]
    bad = [t for t in targets if t not in HLO_TARGETS]
    if bad:
        raise SystemExit(f"unknown hlo target(s) {', '.join(bad)}; known: {', '.join(HLO_TARGETS)}")
    names = [s for s in args.systems.split(",") if s] if args.systems else None
    workload_ids = [w for w in args.workloads.split(",") if w] if args.workloads else None
    sections = [x for x in args.section.split(",") if x] if args.section else None
    bad = [x for x in sections or () if x not in SECTIONS]
    if bad:
        raise SystemExit(f"unknown section(s) {', '.join(bad)}; known: {', '.join(SECTIONS)}")
    cases = select(workload_ids, mode, sections)
    systems = make_systems(names, targets, gpu=args.gpu, quick=args.quick)
    _setup_environment(args.gpu)

    started = now_utc()
    t_start = time.perf_counter()
    load0 = load_average()                            # before our own limit measurements load the CPU
    unavailable, live = {}, []
    for s in systems:
        why = s.unavailable()
        if why:
            unavailable[s.name] = why
        else:
            live.append(s)
    lim = {"cpu": limits_mod.cpu_limits(quick=args.quick)}
    if args.gpu:
        lim["gpu"] = limits_mod.gpu_limits(quick=args.quick)
    machine = machine_info((lim.get("gpu") or {}).get("device_name"))
    machine["loadavg_at_start"] = load0
    versions = {}
    for s in live:
        try:
            versions.update(s.versions())
        except Exception as e:
            versions[s.name] = f"unknown ({type(e).__name__})"

    print(f"bench: {mode} sizes, {machine['cpu']} ({machine['cores']} cores)"
          + (f", {machine['gpu']}" if machine.get("gpu") else "") + f", {started:%Y-%m-%d %H:%M} UTC")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    c = lim["cpu"]
    print(f"cpu limits: copy {c['copy_GBps']:.1f} GB/s (numpy 1 thread {c['copy_GBps_numpy_1thread']:.1f}"
          + (f", torch {c['torch_threads']} threads {c['copy_GBps_torch_threads']:.1f}" if "copy_GBps_torch_threads" in c else "")
          + f"), f32 matmul {c['matmul_GFLOPs_f32']:.1f} GFLOP/s (numpy n={c['matmul_n']})")
    if args.gpu:
        g = lim["gpu"]
        if g:
            print(f"gpu limits: copy {g['copy_GBps']:.0f} GB/s, matmul f32 {g['matmul_GFLOPs_f32']:.0f} "
                  f"bf16 {g['matmul_GFLOPs_bf16']:.0f} GFLOP/s (torch, n={g['matmul_n']})")
        else:
            print("gpu limits: not measured (torch with CUDA is needed for them)")
    for name, why in unavailable.items():
        print(f"not run: {name}: {why}")
    load = machine.get("loadavg_at_start")
    if load is not None and load > 0.5 * (machine["cores"] or 1):
        print(f"note: load average {load} on {machine['cores']} cores: other processes are running, "
              "so timings (thread pools above all) will be noisy")
    sys.stdout.flush()

    results, cases_info = [], {}
    def over_budget():
        return args.budget is not None and time.perf_counter() - t_start > args.budget

    def budget_row(case, s):
        return {"case": case.name, "workload": case.workload.id, "dtype": case.dtype, "system": s.name,
                "device": s.device, "status": "skipped", "is_peer": s.is_peer,
                "note": f"not started: the run's --budget of {args.budget:g} s was spent"}

    unset_ref = unset_reference(args, mode, live, cases)
    try:
        for case in cases:
            if over_budget():
                results += [budget_row(case, s) for s in live]
                continue
            inputs = case.inputs()
            t0 = time.perf_counter()
            refs = reference(case, inputs)
            ref_s = time.perf_counter() - t0
            cases_info[case.name] = {
                "case": case.name, "workload": case.workload.id, "what": case.workload.what, "dtype": case.dtype,
                "shapes": case.shapes(inputs), "bytes": _case_bytes(case, inputs, refs), "flops": case.flops(),
                "memory_bound": case.workload.memory_bound, "reference_s": ref_s,
                "section": case.workload.section, "imported": case.workload.imported,
            }
            print(f"{case.name}: {cases_info[case.name]['shapes']}", file=sys.stderr)
            for s in live:
                if over_budget():
                    results.append(budget_row(case, s))
                    continue
                r = run_one(case, s, inputs, refs, min_time, args.max_time)
                r["is_peer"] = s.is_peer
                results.append(r)
                shown = f"{r['median_s'] * 1e3:.3f} ms" if r["status"] == "ok" else r["status"]
                print(f"  {s.name:14} {shown}  {r['note']}".rstrip(), file=sys.stderr)
                _release_memory(args.gpu)
            del inputs, refs
            _release_memory(args.gpu)
    finally:
        if unset_ref is not None:
            unset_ref.close()
    if unset_ref is not None and unset_ref.rates:
        lim["cpu"]["matmul_GFLOPs_f32_numpy_unset"] = statistics.median(unset_ref.rates)
        lim["cpu"]["matmul_GFLOPs_f32_numpy_unset_range"] = [min(unset_ref.rates), max(unset_ref.rates)]

    machine["loadavg_at_end"] = load_average()
    derive(results, cases_info, lim)
    print()
    print(format_table(results))
    unset = lim["cpu"].get("matmul_GFLOPs_f32_numpy_unset")
    if unset is not None:
        lo, hi = lim["cpu"]["matmul_GFLOPs_f32_numpy_unset_range"]
        print(f"\n%unset: hlo:cpu's product kernels over numpy's f32 matmul with OPENBLAS_* unset, timed in "
              f"alternating bursts (median of the rounds' ratios); numpy unset: median {unset:.1f} GFLOP/s "
              f"({lo:.1f}-{hi:.1f} over {len(unset_ref.rates)} bursts)")
    failed = [r for r in results if r["status"] in ("wrong", "error")]
    sections = {}
    if args.gpu and not args.quick and "cuda" in targets:
        if not args.no_interop:
            from bench import interop
            left = None if args.budget is None else max(0.0, args.budget - (time.perf_counter() - t_start))
            rows = interop.run(workload_ids, budget_s=left)
            sections["interop"] = rows
            print("\n" + interop.format_table(rows))
            failed += [{"case": r["case"], "system": "interop"} for r in rows if r.get("status") in ("wrong", "error")]
        if not args.no_coldstart:
            from bench import coldstart
            res = coldstart.run()
            sections["coldstart"] = res
            print("\n" + coldstart.format_table(res))

    spmd_section: dict = {}
    if not args.gpu and not args.quick and not args.no_spmd and "cpu" in targets \
            and not (args.workloads or args.systems or args.section):
        from bench import spmd
        rows = spmd.run()
        spmd_section["spmd"] = rows  # (not in ``sections``: a file name of its own is for one section alone)
        print("\n" + spmd.format_table(rows))
        failed += [{"case": f"{r['row']}x{r['devices']}", "system": "spmd"} for r in rows
                   if r.get("status") in ("wrong", "error")]

    out_dir = Path(args.out) if args.out else (None if args.quick else RESULTS_DIR)
    if out_dir is not None:
        # a narrowed run never replaces the full run's file (bench/results/.gitignore drops it)
        # (one whole section is a run of its own: ``cpu-families_...json``)
        partial = bool(args.workloads or args.systems or args.target or (sections and len(sections) > 1))
        section = f"-{sections[0]}" if sections and len(sections) == 1 else ""
        name = f"{'gpu' if args.gpu else 'cpu'}{'-quick' if args.quick else ''}{section}_" \
               f"{machine_slug(machine, args.gpu)}_{started:%Y-%m-%d}{'_partial' if partial else ''}.json"
        payload = {
            "bench": "hlo seed workloads (issue 4)", "schema": 1, "date": started.isoformat(timespec="seconds"),
            "mode": mode, "argv": sys.argv[1:] if argv is None else list(argv), "machine": machine,
            "versions": versions, "limits": lim, "unavailable": unavailable,
            "settings": {"min_time_s": min_time, "max_time_s": args.max_time, "hlo_targets": targets,
                         "jax_default_matmul_precision": "highest" if args.gpu else "default"},
            "cases": list(cases_info.values()), "results": results,
            "geomean_ratio_to_best_peer": {n: {"geomean": g, "cases": k} for n, g, k in geomean_summary(results)},
            **sections, **spmd_section,
        }
        path = write_json(out_dir / name, payload)
        print(f"\nwrote {path}")
    if failed:
        print(f"\n{len(failed)} row(s) failed: " + ", ".join(f"{r['case']}/{r['system']}" for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
