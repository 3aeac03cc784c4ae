"""``python -m hlo.opt``: run optimization passes on an IR text file and print the result.

    python -m hlo.opt --passes=canonicalize,cse,dce model.hlo
    python -m hlo.opt --pipeline --target=cpu model.hlo          # the whole pipeline
    python -m hlo.opt --list                                       # the registered passes
    cat model.hlo | python -m hlo.opt --passes=fusion -

The module is verified after every pass (``--no-verify`` skips it). What a pass decided (fusion
decisions, layouts, the schedule's peaks, the buffer plan) is printed after the module as
``//`` comments, so the output still parses. ``--dump-dir=DIR`` writes the module after every
pass into DIR, as the pipeline's dumps do. Errors (unreadable file, malformed IR, unknown pass)
print one message and exit with status 1.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def _comment(text: str) -> str:
    return "\n".join("// " + line if line else "//" for line in text.splitlines())


def main(argv: Optional[List[str]] = None) -> int:
    from hlo.ir.errors import IRError
    from hlo.ir.nesting import call_with_stack_for, region_depth
    from hlo.ir.parser import parse_module
    from hlo.ir.targets import TARGETS, info
    from hlo.passes.options import Options
    from hlo.passes.pipeline import PipelineError
    from hlo.passes.registry import registered_passes
    from hlo.runtime.target import current

    ap = argparse.ArgumentParser(prog="python -m hlo.opt", description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", help="IR text file ('-' for standard input)")
    ap.add_argument("--passes", default="", help="comma-separated pass names, run in order")
    ap.add_argument("--pipeline", action="store_true", help="run the target's whole pipeline")
    ap.add_argument("--target", default="cpu", choices=TARGETS)
    ap.add_argument("--no-verify", action="store_true", help="do not verify between passes")
    ap.add_argument("--no-fusion", action="store_true", help="with --pipeline: leave fusion out")
    ap.add_argument("--donate", default="", help="with --pipeline: donated argument numbers, e.g. 0,2")
    ap.add_argument("--dump-dir", default=None, help="write the module after every pass here")
    ap.add_argument("--dump-filter", default=None, help="regex: which passes' outputs to dump")
    ap.add_argument("--times", action="store_true", help="print each pass's time (as comments)")
    ap.add_argument("--list", action="store_true", help="list the registered passes and exit")
    a = ap.parse_args(argv)

    if a.list:
        for name, doc in registered_passes().items():
            print(f"{name:<24} {doc}")
        return 0
    if a.file is None:
        ap.print_usage(sys.stderr)
        print("python -m hlo.opt: error: give an IR file (or '-' for standard input)", file=sys.stderr)
        return 1
    if not a.passes and not a.pipeline:
        print("python -m hlo.opt: error: give --passes=a,b,... or --pipeline", file=sys.stderr)
        return 1
    name = "<stdin>" if a.file == "-" else a.file
    try:
        if a.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(a.file, "rb") as fh:
                data = fh.read()
    except OSError as e:
        print(f"python -m hlo.opt: error: cannot read {a.file}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        print(f"python -m hlo.opt: error: {name}:{line}: not UTF-8 text (byte {e.start}: "
              f"0x{data[e.start]:02x}); IR text is UTF-8", file=sys.stderr)
        return 1
    try:
        module = parse_module(text, name)
    except IRError as e:
        print(f"{name}:{e}", file=sys.stderr)
        return 1
    try:
        donate = tuple(int(x) for x in a.donate.split(",") if x.strip())
    except ValueError:
        print(f"python -m hlo.opt: error: --donate takes argument numbers like 0,2, got {a.donate!r}",
              file=sys.stderr)
        return 1
    try:
        # the cpu target's options (this machine's: the thread count products split over, ...)
        # as a compile for it takes them
        machine = current(a.target).pass_options() if info(a.target).machine_pass_options else {}
        opts = Options.from_any({**machine, "verify": not a.no_verify, "fusion": not a.no_fusion,
                                 "donate_argnums": donate, "dump_filter": a.dump_filter})
    except ValueError as e:
        print(f"python -m hlo.opt: error: {e}", file=sys.stderr)
        return 1

    try:
        # deep control-flow nests need the stack their depth does (as a compile's passes do)
        return call_with_stack_for(module, _run, a, module, opts)
    except (PipelineError, IRError, ValueError) as e:
        print(f"python -m hlo.opt: error: {e}", file=sys.stderr)
        return 1
    except RecursionError:
        print(f"python -m hlo.opt: error: {name}: the program nests too deeply for a pass "
              f"(regions {region_depth(module)} deep)", file=sys.stderr)
        return 1


def _run(a, module, opts) -> int:
    from hlo.ir.printer import print_module
    from hlo.passes.dump import Dumper
    from hlo.passes.options import PassConfig
    from hlo.passes.pipeline import Runner, optimize
    from hlo.passes.registry import create_pass

    reports: List[str] = []
    if a.pipeline:
        opt = optimize(module, a.target, dump_dir=a.dump_dir, options=opts)
        out = opt.text()
        if opt.decisions:
            reports.append("\n".join(opt.decisions))
        reports.append(opt.buffers.text())
        times = opt.pass_times
    else:
        names = [n.strip() for n in a.passes.split(",") if n.strip()]
        config = PassConfig(a.target, opts, [])
        try:
            passes = [create_pass(n, config) for n in names]
        except KeyError as e:
            print(f"python -m hlo.opt: error: {e.args[0]}", file=sys.stderr)
            return 1
        dumper = Dumper(a.dump_dir, a.dump_filter) if a.dump_dir else None
        if dumper is not None:
            dumper.input(module)
        runner = Runner(config, dumper)
        for p in passes:
            runner.run(p, module)
            rep = p.report()
            if rep:
                reports.append(rep)
        out = print_module(module)
        times = runner.times
    sys.stdout.write(out)
    for rep in reports:
        sys.stdout.write("\n" + _comment(rep) + "\n")
    if a.times:
        sys.stdout.write("\n" + _comment("\n".join(f"{n}: {t * 1e3:.3f} ms" for n, t in times)) + "\n")
    return 0

