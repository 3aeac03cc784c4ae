"""The StableHLO conformance runner: ``python -m hlo.conformance DIR [--target interpreter]``.

Runs every test of a folder of StableHLO test vectors (``stablehlo/tests/interpret`` or
``stablehlo/testdata``) on an hlo target and compares with the tests' own expectations.

A file is split at ``// -----`` lines; each chunk is one test whose entry is ``@main`` or its
only function. The chunk is imported with ``hlo.ir.stablehlo.import_with_checks``: its check
ops (``check.expect_*`` or ``custom_call @check.*``) are removed and the values they compare
become extra results of the entry, which is compiled for the target through
``hlo.staging.stages.Lowered(module).compile(target)`` (the one place that knows the targets) and run
without arguments; then each check is evaluated in Python with the semantics of StableHLO's
reference checker (``hlo.ir.stablehlo.checks``).

Each test ends as:

- passed: every check holds;
- unsupported: a quantized element type, a token, tuple or dynamic type that cannot be
  flattened, an op outside the op table (tokens, ``interpreter.print``, ...), an op the
  target declines (collectives on compiled targets, so far), or no check ops at all, unless the file's RUN lines FileCheck the
  interpreter's printed results: then those results are printed as the reference interpreter
  prints them and matched against the chunk's patterns (``conformance_filecheck``);
- failed: anything else, including a crash, an error or a time-out while importing or running.

One line is printed per failed or unsupported test (``-q`` keeps only failures), then
``conformance: P passed, F failed, U unsupported``. With ``--check-export`` every passing test
is also exported to StableHLO, verified by jaxlib and re-imported, and must print identically.
The exit code is 0 unless the runner itself could not run (bad arguments, missing folder).
With ``--no-constant-folding`` the pipeline runs without its constant-folding pass, so the
target computes every op (the tests' inputs are constants: otherwise hlo's numpy evaluator
computes most of each test at compile time).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from hlo.ir.stablehlo.requires import MissingExtraError, require_jax, require_jaxlib
from hlo.ir.targets import info

from .conformance_pool import default_jobs, run_tasks

SPLIT = re.compile(r"^// -----[ \t]*$", re.M)


@dataclass(frozen=True)
class Case:
    """One test: a chunk of a file. ``line`` is where the chunk starts (1-based)."""

    root: str
    path: str  # relative to root
    index: int
    line: int

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class Result:
    status: str  # "passed", "failed" or "unsupported"
    message: str = ""
    entry: str = ""
    export: Optional[str] = None  # with --check-export, for passed tests: "ok" or what broke
    seconds: float = 0.0
    category: str = ""  # for unsupported tests: the op or the kind of type, for the tally


@dataclass
class Options:
    target: str = "interpreter"
    check_export: bool = False
    # False (``--no-constant-folding``): the pipeline's constant-folding pass is left out, so the
    # target computes every op (a test's inputs are constants: with folding on, hlo's numpy
    # evaluator computes most of the program at compile time and the target only copies it)
    constant_folding: bool = True

    def pass_options(self) -> Optional[dict]:
        """The pipeline options (``hlo.passes.options.Options`` fields) of every compile."""
        return None if self.constant_folding else {"disabled_passes": frozenset({"constant-folding"})}


def compile_for(module, options: Options, target: Optional[str] = None):
    """``module`` compiled for ``target`` (default ``options.target``) with the runner's
    pipeline options: ``Lowered(module).compile(target)``, or with ``--no-constant-folding``
    the same through ``compile_module(..., options=...)``."""
    from hlo.staging.stages import Compiled, Lowered
    from hlo.staging.targets import compile_module, resolve_target
    lowered = Lowered(module)
    t = target or options.target
    po = options.pass_options()
    if po is None:
        return lowered.compile(target=t)
    return Compiled(lowered, compile_module(module, resolve_target(t), options=po))


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------

def discover(root: str) -> List[Case]:
    """Every test chunk of every ``.mlir`` file under ``root`` (sorted, stable)."""
    cases = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(".mlir"):
                continue
            full = os.path.join(dirpath, fn)
            with open(full, encoding="utf-8") as f:
                text = f.read()
            for i, (start, chunk) in enumerate(_chunks(text)):
                if re.search(r"\bfunc\.func\b", chunk):
                    cases.append(Case(root, os.path.relpath(full, root), i, start))
    cases.sort(key=lambda c: (c.path, c.index))
    return cases


def _chunks(text: str) -> List[Tuple[int, str]]:
    """(first line, text) of each ``// -----`` chunk; the text keeps its file line numbers by
    starting with as many newlines as precede it."""
    out, pos, line = [], 0, 1
    for m in SPLIT.finditer(text):
        out.append((line, text[pos:m.start()]))
        line += text.count("\n", pos, m.end())
        pos = m.end()
    out.append((line, text[pos:]))
    return [(ln, "\n" * (ln - 1) + t) for ln, t in out]


def chunk_text(case: Case) -> str:
    with open(os.path.join(case.root, case.path), encoding="utf-8") as f:
        return _chunks(f.read())[case.index][1]


# --------------------------------------------------------------------------------------------
# Running one test
# --------------------------------------------------------------------------------------------

def run_case(case: Case, options: Options) -> Result:
    """Import, run and check one test (in this process)."""
    t0 = time.monotonic()
    r = _run_case(case, options)
    r.seconds = time.monotonic() - t0
    if r.status == "failed":
        note = upstream_disabled(case)
        if note:
            r.message += f" [upstream: {note}]"
    return r


_DISABLED = re.compile(r"^// RUN-DISABLED(\([^)]*\))?", re.M)


def upstream_disabled(case: Case) -> str:
    """``RUN-DISABLED(reason)`` when the file's interpreter run is disabled upstream."""
    with open(os.path.join(case.root, case.path), encoding="utf-8") as f:
        head = f.read(2000)
    m = _DISABLED.search(head)
    return m.group(0)[3:] if m else ""


def _entry_in_text(text: str) -> str:
    """The entry's name read from the text (for messages about tests that did not import)."""
    names = re.findall(r"func\.func\s+(?:public\s+|private\s+)?@\"?([\w.$-]+)", text)
    if "main" in names:
        return "main"
    return names[0] if len(names) == 1 else ""


def _unsupported(e) -> str:
    s = str(e)
    return s[len("unsupported: "):] if s.startswith("unsupported: ") else s


def _category(e) -> str:
    if e.what.startswith("type ") or e.what.startswith("quantized"):
        return e.reason.split(";")[0] if e.reason else e.what
    return e.what.split(" ")[0]


def _first_line(e: BaseException) -> str:
    s = str(e).strip().split("\n")[0]
    return f"{type(e).__name__}: {s}" if not s.startswith(type(e).__name__) else s


def _run_case(case: Case, options: Options) -> Result:
    from hlo.ir.stablehlo import UnsupportedError, import_with_checks
    text = chunk_text(case)
    try:
        module, checks = import_with_checks(text, source_name=case.path)
    except UnsupportedError as e:
        return Result("unsupported", _unsupported(e), _entry_in_text(text), category=_category(e))
    except Exception as e:
        return Result("failed", "import: " + _first_line(e), _entry_in_text(text))
    from ..staging.stablehlo import entry_name, rename_entry_to_main
    entry = entry_name(module)
    if entry is None:
        return Result("failed", "no entry function: the module has no @main and several functions")
    fn = module[entry]
    if entry not in checks and (fn.dim_args or any(not t.is_static for t in fn.arg_types)):
        from .conformance_dynamic import run_dynamic  # shape-polymorphic: testdata/dynamic
        status, message = run_dynamic(text, module, entry, options.target)
        result = Result(status, message, entry, category="dynamic reference" if status == "unsupported" else "")
        if status == "passed" and options.check_export:
            from .conformance_dynamic import check_export as check_symbolic_export
            result.export = check_symbolic_export(module)
        return result
    printed = None
    if entry not in checks:
        printed = _printed_expectations(case, text)
        if isinstance(printed, str):
            return Result("unsupported", printed, entry, category="no check ops")
    if fn.args:
        return Result("unsupported", f"@{entry} takes arguments; the test passes them on the command line",
                      entry, category="entry with arguments")
    try:
        rename_entry_to_main(module, entry)
    except Exception as e:
        return Result("failed", "entry: " + _first_line(e), entry)
    from . import conformance_parallel as cp
    if info(options.target).compiled and cp.has_run_parallel(module):
        # the programs of interpreter.run_parallel compiled for the target, run on its devices
        try:
            results = cp.run_on_target(module, options.target, lambda m: compile_for(m, options))
        except Exception as e:
            return _declined(e, options, entry) or Result("failed", "run_parallel: " + _first_line(e), entry)
        return _finish(case, options, module, fn, checks, entry, printed, results)
    try:
        compiled = compile_for(module, options)
    except Exception as e:
        return _declined(e, options, entry) or Result("failed", "compile: " + _first_line(e), entry)
    try:
        results = compiled()
    except Exception as e:
        return Result("failed", "run: " + _first_line(e), entry)
    return _finish(case, options, module, fn, checks, entry, printed, results)


def _declined(e: BaseException, options: Options, entry: str) -> Optional[Result]:
    """An unsupported result when ``e`` is an op the target's backend declines, with its
    reason (``check_declined_ops``)."""
    from hlo.errors import UnsupportedError as Declined
    m = re.search(r"(\S+) cannot be compiled for target", str(e))
    if isinstance(e, Declined) and m:
        return Result("unsupported", _first_line(e), entry, category=f"{m.group(1)} on {options.target}")
    return None


def _finish(case, options, module, fn, checks, entry, printed, results) -> Result:
    from hlo.ir.stablehlo.checks import evaluate_all
    try:
        if printed is not None:
            failures = _check_printed(printed, results, fn)
        else:
            failures = evaluate_all(checks[entry], results)
    except Exception as e:
        return Result("failed", "check: " + _first_line(e), entry)
    if failures:
        more = f" (+{len(failures) - 1} more failing checks)" if len(failures) > 1 else ""
        return Result("failed", failures[0] + more, entry)
    result = Result("passed", "", entry)
    if options.check_export:
        result.export = check_export(module)
    return result


def _printed_expectations(case: Case, text: str):
    """The (run, directives) pairs of a test without check ops whose file's RUN lines
    FileCheck the interpreter's printed results (``conformance_filecheck``), or why there are
    none (a string)."""
    from . import conformance_filecheck as fc
    none = "no check ops (the upstream test compares printed output)"
    with open(os.path.join(case.root, case.path), encoding="utf-8") as f:
        whole = f.read()
    try:
        runs = fc.runs(whole)
        prefixes = [run.prefix for run in runs]
        pairs = [(run, fc.directives(text, run.prefix, prefixes)) for run in runs]
    except fc.Unsupported as e:
        return f"{none}: {e}"
    pairs = [(run, ds) for run, ds in pairs if ds]
    return pairs if pairs else none


def _check_printed(printed, results, fn) -> List[str]:
    from hlo.ir.stablehlo.typemap import tensor_to_mlir_text

    from . import conformance_filecheck as fc
    types = [tensor_to_mlir_text(t) for t in fn.body.output_types]
    out = []
    for run, ds in printed:
        msg = fc.filecheck(fc.render(results, types, run.dense), ds, run.prefix)
        if msg is not None:
            out.append(msg)
    return out


def check_export(module) -> str:
    """"ok" when ``module`` exports to StableHLO that jaxlib verifies and re-imports to the
    same text; otherwise what went wrong."""
    from hlo.ir import print_module
    from hlo.ir.stablehlo import export_module, import_module
    try:
        text = export_module(module)
    except Exception as e:
        return "export: " + _first_line(e)
    try:
        again = import_module(text)
    except Exception as e:
        return "re-import: " + _first_line(e)
    a, b = print_module(module).split("\n"), print_module(again).split("\n")
    if a == b:
        return "ok"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"re-import differs at line {i + 1}: {x.strip()!r} became {y.strip()!r}"
    return f"re-import differs: {len(a)} lines became {len(b)}"


# --------------------------------------------------------------------------------------------
# Running many
# --------------------------------------------------------------------------------------------

def _task(arg):
    case, options = arg
    try:
        return asdict(run_case(case, options))
    except BaseException as e:  # run_case reports errors itself; this covers the unexpected
        return asdict(Result("failed", "runner: " + _first_line(e)))


def run_all(cases: Sequence[Case], options: Options, jobs: int, timeout: float,
            progress=None) -> Dict[Case, Result]:
    results: Dict[Case, Result] = {}
    tasks = [(c, options) for c in cases]
    if jobs <= 1 and timeout <= 0:
        for c in cases:
            results[c] = run_case(c, options)
            if progress:
                progress(c, results[c])
        return results
    for i, res in run_tasks(
            _task, tasks, jobs, timeout if timeout > 0 else float("inf"),
            on_timeout=lambda arg, t: asdict(Result("failed", f"timed out after {t:g} s", seconds=t)),
            on_crash=lambda arg, code: asdict(Result("failed", f"crashed (worker exit code {code})")),
            fork=info(options.target).fork_safe):
        results[cases[i]] = Result(**res)
        if progress:
            progress(cases[i], results[cases[i]])
    return results


def validate_target(target: str) -> Optional[str]:
    """None if ``target`` compiles a trivial module, else the reason it cannot."""
    import numpy as np

    from hlo.ir import Builder, Function, Module
    from hlo.staging.stages import Lowered
    m = Module("probe")
    fn = m.add(Function("main"))
    c = Builder(fn.body).value("constant", attrs={"value": np.array(1.0, np.float32)})
    fn.body.outputs = [c]
    try:
        Lowered(m).compile(target=target)
    except Exception as e:
        return _first_line(e)
    return None


def summary_line(results: Dict[Case, Result]) -> str:
    n = {s: sum(1 for r in results.values() if r.status == s) for s in ("passed", "failed", "unsupported")}
    return f"conformance: {n['passed']} passed, {n['failed']} failed, {n['unsupported']} unsupported"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hlo.conformance",
                                description="Run a folder of StableHLO test vectors on an hlo target.")
    p.add_argument("folder", help="a folder of .mlir test vectors (searched recursively)")
    p.add_argument("--target", default="interpreter", help="hlo target to run on (default: interpreter)")
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="run a fixed pseudo-random sample of N tests (see --seed)")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    p.add_argument("--filter", default="", metavar="REGEX", help="only tests whose name matches")
    p.add_argument("--jobs", "-j", type=int, default=default_jobs(), help="worker processes (default: cores)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per test (default 120; 0: none)")
    p.add_argument("--no-constant-folding", action="store_true",
                   help="leave the constant-folding pass out, so the target computes every op "
                        "(not numpy at compile time)")
    p.add_argument("--check-export", action="store_true",
                   help="also export each passing test, verify it with jaxlib and re-import it")
    p.add_argument("--quiet", "-q", action="store_true", help="print failed tests only")
    p.add_argument("--verbose", "-v", action="store_true", help="print passing tests too")
    p.add_argument("--json", metavar="FILE", help="write every result to FILE as JSON")
    a = p.parse_args(argv)
    # the collective tests' grids (interpreter.run_parallel, up to 5 processes) need devices
    os.environ.setdefault("HLO_CPU_DEVICES", "8")

    if not os.path.isdir(a.folder):
        print(f"conformance: no such folder: {a.folder}", file=sys.stderr)
        return 2
    try:  # the test vectors are StableHLO, parsed by jaxlib; dynamic ones are checked against jax
        require_jaxlib("python -m hlo.conformance")
        require_jax("python -m hlo.conformance")
    except MissingExtraError as e:
        print(f"conformance: {e}", file=sys.stderr)
        return 2
    why = validate_target(a.target)
    if why is not None:
        print(f"conformance: target {a.target!r} cannot run: {why}", file=sys.stderr)
        return 2
    cases = discover(a.folder)
    if a.filter:
        rx = re.compile(a.filter)
        cases = [c for c in cases if rx.search(c.name)]
    if a.sample and a.sample < len(cases):
        cases = sorted(random.Random(a.seed).sample(cases, a.sample), key=lambda c: (c.path, c.index))
    options = Options(target=a.target, check_export=a.check_export,
                      constant_folding=not a.no_constant_folding)

    def show(case: Case, r: Result) -> None:
        name = f"{case.name} @{r.entry}" if r.entry else case.name
        if r.status == "failed" or (r.status == "unsupported" and not a.quiet) or a.verbose:
            print(f"{name}: {r.status}" + (f": {r.message}" if r.message else ""), flush=True)
        if r.export not in (None, "ok"):
            print(f"{name}: export failed: {r.export}", flush=True)

    t0 = time.monotonic()
    results = run_all(cases, options, a.jobs, a.timeout, progress=show)
    elapsed = time.monotonic() - t0

    unsupported: Dict[str, int] = {}
    for r in results.values():
        if r.status == "unsupported":
            k = r.category or r.message
            unsupported[k] = unsupported.get(k, 0) + 1
    if unsupported:
        print("unsupported by reason: " + ", ".join(
            f"{k} {n}" for k, n in sorted(unsupported.items(), key=lambda kv: (-kv[1], kv[0]))))
    if a.check_export:
        exported = [r for r in results.values() if r.status == "passed"]
        ok = sum(1 for r in exported if r.export == "ok")
        print(f"export: {ok} of {len(exported)} passing tests export, verify with jaxlib and "
              f"re-import identically")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"folder": a.folder, "target": a.target, "seconds": round(elapsed, 1),
                       "results": [dict(name=c.name, **asdict(r)) for c, r in
                                   sorted(results.items(), key=lambda kv: (kv[0].path, kv[0].index))]},
                      f, indent=1)
    print(summary_line(results), flush=True)
    return 0

