"""What the bench prints and writes: machine description, the one table, and the JSON file."""
from __future__ import annotations

import json
import math
import os
import platform
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional


def machine_info(gpu_name: Optional[str] = None) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "memory_GiB": mem_gib, "platform": platform.platform(),
            "python": platform.python_version(), "loadavg_at_start": load_average()}
    if gpu_name:
        info["gpu"] = gpu_name
    return info


def load_average():
    """1-minute load average: other processes on a shared machine show up in the timings."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def cpu_seconds_elsewhere():
    """(CPU seconds the machine spent busy outside this process, CPU seconds the hypervisor
    gave to other guests) so far, or None where /proc/stat is missing. Their growth while a
    row is timed shows that the row ran on less than the whole machine: another process (or
    guest) holding one of two cores makes a two-thread kernel run at one-thread speed."""
    try:
        f = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, IndexError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = f
    busy = (user + nice + system + irq + softirq) / tick
    mine = sum(os.times()[:2])  # this process's user + system time
    return busy - mine, steal / tick


def machine_slug(info: dict, gpu: bool) -> str:
    name = info.get("gpu") if gpu and info.get("gpu") else f"{info['cpu']} {info['cores']}c"
    name = re.sub(r"\(r\)|\(tm\)|processor|\d+-core", "", name.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:48]


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def fmt_time(s: Optional[float]) -> str:
    if s is None:
        return ""
    if s < 1e-7:  # the c row's calls from C (dispatch: a few ns)
        return f"{s * 1e9:.0f}ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f}us"
    if s < 1:
        return f"{s * 1e3:.2f}ms"
    return f"{s:.2f}s"


def fmt_bytes(b: Optional[int]) -> str:
    if b is None:
        return ""
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b / k:.1f}{unit}"
    return f"{b}B"


COLUMNS = ["workload", "system", "median", "min", "max", "calls", "vs best peer", "first call",
           "compile", "kernels", "temp", "GB/s (%copy)", "GFLOP/s", "products GFLOP/s (%mm, %unset)", "check"]


def table_rows(results: list) -> tuple:
    """(rows of cells, notes) for the results in order; notes are numbered footnotes."""
    rows, notes = [], []
    for r in results:
        note = r.get("note") or ""
        cell_note = ""
        if note:
            notes.append(f"{r['case']} / {r['system']}: {note}")
            cell_note = f"[{len(notes)}]"
        if r["status"] != "ok":
            status = {"skipped": "skipped", "unavailable": "unavailable", "error": "ERROR",
                      "wrong": "WRONG"}[r["status"]]
            rows.append([r["case"], r["system"]] + [""] * 12 + [f"{status} {cell_note}".strip()])
            continue
        bw = ""
        if r.get("GBps") is not None:
            bw = f"{r['GBps']:.1f}"
            if r.get("bw_fraction") is not None:
                bw += f" ({100 * r['bw_fraction']:.0f}%)"
        prod = ""
        if r.get("product_GFLOPs") is not None:
            prod = f"{r['product_GFLOPs']:.1f}"
            parts = [f"{100 * r[k]:.0f}%" for k in ("product_fraction_of_matmul", "product_fraction_of_numpy_unset")
                     if r.get(k) is not None]
            if parts:
                prod += f" ({', '.join(parts)})"
        ratio = r.get("ratio_to_best_peer")
        rows.append([
            r["case"], r["system"], fmt_time(r["median_s"]), fmt_time(r["min_s"]), fmt_time(r["max_s"]),
            str(r["calls"]), f"x{ratio:.2f}" if ratio is not None else "", fmt_time(r["first_call_s"]),
            fmt_time(r.get("compile_s")),
            "" if r.get("kernels") is None else str(r["kernels"]), fmt_bytes(r.get("temp_bytes")), bw,
            "" if r.get("GFLOPs") is None else f"{r['GFLOPs']:.1f}", prod, f"ok {cell_note}".strip(),
        ])
    return rows, notes


def format_table(results: list) -> str:
    rows, notes = table_rows(results)
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)]
    right = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(COLUMNS), line(["-" * w for w in widths])]
    prev = None
    for row in rows:
        if prev is not None and row[0] != prev:
            out.append("")
        shown = row if row[0] != prev else [""] + row[1:]
        prev = row[0]
        out.append(line(shown))
    summary = geomean_summary(results)
    if summary:
        out += ["", "geometric mean of (median / fastest peer's median) over the cases each system ran:"]
        out += [f"  {name:16} x{g:.2f}  ({n} cases)" for name, g, n in summary]
    if notes:
        out.append("")
        out += [f"[{i}] {n}" for i, n in enumerate(notes, 1)]
    return "\n".join(out)


def geomean_summary(results: list) -> list:
    """(system, geometric mean of its ratios to the fastest peer, number of cases), table order."""
    ratios: dict = {}
    for r in results:
        if r["status"] == "ok" and r.get("ratio_to_best_peer"):
            ratios.setdefault(r["system"], []).append(r["ratio_to_best_peer"])
    return [(name, math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) for name, xs in ratios.items()]


def write_json(path: Path, payload: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, sort_keys=False, default=_json_default) + "\n")
    return path


def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:
        pass
    return str(o)


def finish_side_by_side(json_path: Optional[str], head: dict, rows: list, wrong: list) -> int:
    """The end of a side-by-side script (``bench.loops``, ``bench.gpu_ops``): the rows to
    ``json_path`` (with ``head``'s fields) when given; exit status 1, naming them, where hlo
    and jax.jit disagreed."""
    if json_path:
        with open(json_path, "w") as fh:
            json.dump({**head, "rows": rows}, fh, indent=1)
    if wrong:
        print(f"hlo and jax.jit disagree on: {', '.join(wrong)}")
        return 1
    return 0
