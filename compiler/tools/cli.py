"""``hlo``: the command-line tool (``hlo ...`` or ``python -m hlo ...``).

    hlo compile model.py:layer --arg f32[16,64,512] --arg f32[512,512] -o layer.hlox
    hlo compile model.py:layer --arg f32[8,4] --static n=3 --target cpu --dump-dir dump/ -o l.hlox
    hlo run layer.hlox --input x.npy --input w.npy [--output-dir out/]
    hlo inspect layer.hlox                 # signature, kernels, buffer plan, memory, the IR
    hlo export-c layer.hlox -o build/ --name layer   # build/liblayer.so + build/layer.h (C API)
    hlo opt --pipeline --target=cpu m.hlo  # the passes tool (python -m hlo.opt), same arguments
    hlo cache [info|clear]                 # the persistent compilation cache

``compile`` imports the file, finds the function (a plain function or an ``hlo.jit`` one),
traces it for the ``--arg`` shapes (``--static name=value`` passes a Python literal as a static
argument), compiles it and saves an ``.hlox`` executable; progress (each stage and its time)
goes to stderr. ``run`` loads an executable and calls it on ``.npy`` / ``.npz`` inputs, writing
``.npy`` outputs (or printing their shapes and a summary). Errors print one line and exit with
status 2 (a malformed command line) or 1 (anything else): never a traceback, unless
``--traceback`` (or ``HLO_CLI_TRACEBACK=1``) asks for one.
"""
from __future__ import annotations

import argparse
import ast
import math
import os
import re
import sys
import time
import traceback
from typing import Any, List, Optional, Sequence, Tuple

PROG = "hlo"


class CliError(Exception):
    """A user error: printed as one line, exit status ``status``."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2)."""

    def error(self, message):
        raise CliError(f"{message} (see '{self.prog} --help')", 2)


# ----------------------------------------------------------------------------------------------
# Argument specs: f32[16,64,512]
# ----------------------------------------------------------------------------------------------

_SPEC = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*\[(.*)\]\s*$")


def parse_spec(text: str):
    """``f32[16,64,512]`` (or ``f32[]`` for a scalar; numpy's dtype names too:
    ``float32[16,64,512]``, ``bfloat16[8]``, ``int8[4]``) -> ``hlo.ShapeDtypeStruct``."""
    from hlo.ir.types import BY_NAME
    m = _SPEC.match(text)
    if not m:
        raise CliError(f"bad --arg {text!r}: expected a type like f32[16,64,512] (element type, then "
                       "the dimensions in brackets; f32[] for a scalar)", 2)
    dt, dims = m.group(1), m.group(2).strip()
    numpy_names = {t.np_dtype.name: name for name, t in BY_NAME.items()}  # float32 -> f32, ...
    dt = numpy_names.get(dt, dt)
    if dt not in BY_NAME:
        raise CliError(f"bad --arg {text!r}: unknown element type {m.group(1)!r} (known: "
                       f"{', '.join(BY_NAME)}, or numpy's names: {', '.join(numpy_names)})", 2)
    shape = []
    if dims:
        for d in dims.split(","):
            d = d.strip()
            if not d.isdigit():
                hint = ""
                if any(c.isalpha() for c in d):
                    hint = (" (a symbolic dimension: a .hlox holds one compile for static shapes; "
                            "symbolic ones work through f.lower(hlo.ShapeDtypeStruct(...)).compile(), "
                            "compiled per size at the call)")
                raise CliError(f"bad --arg {text!r}: dimension {d!r} is not a non-negative integer{hint}", 2)
            shape.append(int(d))
    nbytes = math.prod(shape) * BY_NAME[dt].np_dtype.itemsize
    if nbytes >= 2 ** 63:
        raise CliError(f"bad --arg {text!r}: {nbytes} bytes, more than an array can hold (2**63)", 2)
    import hlo
    return hlo.ShapeDtypeStruct(tuple(shape), BY_NAME[dt].np_dtype)


_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def parse_static(text: str) -> Tuple[str, Any]:
    """``name=value``: value is a Python literal (3, 0.5, (1, 2), 'gelu', True) or a bare word
    (gelu, taken as a string); anything else is refused."""
    name, eq, value = text.partition("=")
    name = name.strip()
    if not eq or not name.isidentifier():
        raise CliError(f"bad --static {text!r}: expected name=value, e.g. --static heads=8", 2)
    try:
        v = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if not _WORD.match(value.strip()):
            raise CliError(f"bad --static {text!r}: {value.strip()!r} is not a Python literal (a "
                           "number, string, tuple, list, dict, True/False/None); a bare word such "
                           "as gelu is taken as a string", 2) from None
        v = value.strip()
    if isinstance(v, list):
        v = tuple(v)
    return name, v


# ----------------------------------------------------------------------------------------------
# Loading the user's function
# ----------------------------------------------------------------------------------------------

def _user_frame(tb, path: str) -> str:
    """``file:line`` of the deepest frame of the traceback in the user's file (else the last)."""
    frames = traceback.extract_tb(tb)
    ap = os.path.abspath(path)
    mine = [f for f in frames if os.path.abspath(f.filename) == ap]
    f = (mine or frames or [None])[-1]
    return f"{f.filename}:{f.lineno}: " if f is not None else ""


def load_function(target: str):
    """``path/to/file.py:function`` (or ``file.py:Class.method``) -> the object."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise CliError(f"bad function {target!r}: expected path/to/file.py:function", 2)
    if not all(p.isidentifier() for p in name.split(".")):
        raise CliError(f"bad function {target!r}: {name!r} is not a Python name", 2)
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; expected a Python file")
    import importlib.util
    mod_name = "_hlo_cli_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: cannot be imported as a Python module (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise CliError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
    except BaseException as e:  # SystemExit, KeyboardInterrupt in the user's file
        if isinstance(e, KeyboardInterrupt):
            raise
        raise CliError(f"{_user_frame(e.__traceback__, path)}importing {path} failed: "
                       f"{type(e).__name__}: {e}") from None
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            have = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise CliError(f"{path} has no function {name!r}"
                           + (f" (it defines: {', '.join(have[:12])})" if have else ""))
        obj = getattr(obj, part)
    if not callable(obj):
        raise CliError(f"{path}:{name} is a {type(obj).__name__}, not a function")
    return obj


# ----------------------------------------------------------------------------------------------
# Progress
# ----------------------------------------------------------------------------------------------

class Progress:
    """Stage names and their times on stderr: ``tracing... 0.05s, passes... 1.2s, ...``."""

    def __init__(self, stream, quiet: bool):
        self.stream = stream
        self.quiet = quiet
        self.stage: Optional[str] = None
        self.t0 = 0.0
        self.stages: List[Tuple[str, float]] = []

    def __call__(self, stage: str) -> None:
        self._end()
        self.stage, self.t0 = stage, time.perf_counter()
        if not self.quiet:
            sep = ", " if self.stages else f"{PROG} compile: "
            self.stream.write(f"{sep}{stage}...")
            self.stream.flush()

    def _end(self) -> None:
        if self.stage is None:
            return
        dt = time.perf_counter() - self.t0
        self.stages.append((self.stage, dt))
        if not self.quiet:
            self.stream.write(f" {dt:.2f}s")
            self.stream.flush()
        self.stage = None

    def finish(self, note: str = "") -> None:
        self._end()
        if not self.quiet and self.stages:
            self.stream.write((f" ({note})" if note else "") + "\n")
            self.stream.flush()

    def abort(self) -> None:
        if not self.quiet and (self.stages or self.stage):
            self.stream.write(" failed\n")
            self.stream.flush()
        self.stage = None


# ----------------------------------------------------------------------------------------------
# Commands
# ----------------------------------------------------------------------------------------------

def _fmt_bytes(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def cmd_compile(a) -> int:
    import hlo
    from hlo.errors import HloError
    from hlo.staging import targets
    specs = [parse_spec(s) for s in a.arg]
    statics = dict(parse_static(s) for s in a.static)
    out = a.output
    if not out.endswith(".hlox"):
        raise CliError(f"-o {out!r}: the output must be a .hlox file", 2)
    folder = os.path.dirname(out)
    if folder and not os.path.isdir(folder):
        raise CliError(f"-o {out!r}: no such folder {folder!r} (create it first)", 2)
    if a.target is not None:
        targets.check_target_name(a.target)
    if a.target == "interpreter":
        raise CliError("--target interpreter: the interpreter has no native code to save; "
                       "use --target cpu")
    fn = load_function(a.function)
    if isinstance(fn, hlo.JitFunction):
        static_names = tuple(fn._static_argnames) + tuple(n for n in statics if n not in fn._static_argnames)
        jf = hlo.jit(fn.fun, static_argnames=static_names, donate_argnums=fn._donate_argnums,
                     target=a.target or fn.target)
    else:
        jf = hlo.jit(fn, static_argnames=tuple(statics), target=a.target)
    progress = Progress(sys.stderr, a.quiet)
    token = targets._progress.set(progress)
    try:
        progress("tracing")
        try:
            lowered = jf.lower(*specs, **statics)
        except (TypeError, ValueError) as e:
            if isinstance(e, HloError):
                raise
            raise CliError(f"{a.function}: cannot trace for the given arguments: {e}") from None
        compiled = lowered.compile(target=a.target, dump_dir=a.dump_dir)
        progress("writing")
        compiled.save(out)
        progress.finish("from the compilation cache" if compiled.from_cache else "")
    except BaseException:
        progress.abort()
        raise
    finally:
        targets._progress.reset(token)
    sig = lowered.signature_text()
    outs = ", ".join(o.strip_weak().str_short() for o in lowered.out_avals)
    extra = []
    try:
        extra.append(f"{compiled.cost_analysis()['kernels']} kernels")
        extra.append(f"temp {_fmt_bytes(compiled.memory_analysis().temp_size_in_bytes)}")
    except Exception:  # analyses are a summary nicety; the file is written either way
        pass
    print(f"wrote {out} ({_fmt_bytes(os.path.getsize(out))}): {sig} -> ({outs}) for {compiled.target}"
          + (f", {', '.join(extra)}" if extra else ""))
    if a.dump_dir:
        print(f"pass dumps in {a.dump_dir}")
    return 0


def _load_executable(path: str, describe_only: bool = False):
    """The executable at ``path``, loaded to run, or with ``describe_only`` only its manifest
    and IR (``hlo.aot.describe``: nothing in the file runs)."""
    from hlo import aot
    from hlo.runtime.hlox import ExecutableError
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    try:
        return aot.describe(path) if describe_only else aot.load(path)
    except ExecutableError as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise CliError(f"{path}: cannot read: {e.strerror or e}") from None


def _read_inputs(paths: Sequence[str], names: Sequence[str]) -> List[Tuple[str, Any]]:
    """(label, array) per input, in argument order."""
    import numpy as np
    out: List[Tuple[str, Any]] = []
    for p in paths:
        if not os.path.exists(p):
            raise CliError(f"--input {p}: no such file")
        try:
            with open(p, "rb") as fh:
                head = fh.read(6)
        except OSError as e:
            raise CliError(f"--input {p}: cannot read: {e.strerror or e}") from None
        if head != b"\x93NUMPY" and head[:4] != b"PK\x03\x04":
            raise CliError(f"--input {p}: not a .npy or .npz file (numpy's np.save / np.savez "
                           "write them)")
        try:
            data = np.load(p, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise CliError(f"--input {p}: not a readable .npy or .npz file ({e})") from None
        if isinstance(data, np.ndarray):
            out.append((p, data))
            continue
        with data:
            keys = list(data.files)
            if len(paths) == 1 and names and set(keys) == set(names) and len(keys) == len(names):
                keys = list(names)  # an .npz whose arrays are named like the arguments
            out.extend((f"{p}[{k}]", data[k]) for k in keys)
    return out


def cmd_run(a) -> int:
    import numpy as np
    exe = _load_executable(a.model)
    names = list(exe.arg_names)
    specs = [t.str_short() for t in exe.in_avals]
    sig = _signature(exe)
    inputs = _read_inputs(a.input, names)
    if len(inputs) != len(specs):
        raise CliError(f"{a.model} takes {len(specs)} input(s), got {len(inputs)} array(s) from "
                       f"--input (signature: {sig})")
    for i, ((label, arr), name, t) in enumerate(zip(inputs, names, specs)):
        got = _type_of(arr)
        if got != t:
            raise CliError(f"input {i} ({name}, from {label}) is {got}; {a.model} takes {t} there "
                           f"(signature: {sig})")
    arrays = [arr for _, arr in inputs]
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        results = exe.run_flat(arrays)
        for r in results:  # cuda results are asynchronous: time the computation, not the queueing
            getattr(r, "block_until_ready", int)()
        times.append(time.perf_counter() - t0)
    if a.output_dir:
        os.makedirs(a.output_dir, exist_ok=True)
        for i, r in enumerate(results):
            p = os.path.join(a.output_dir, f"output_{i}.npy")
            np.save(p, np.asarray(r))
            print(f"wrote {p}: {_type_of(r)}")
    else:
        for i, r in enumerate(results):
            r = np.asarray(r)
            line = f"output {i}: {_type_of(r)}"
            if r.size and (np.issubdtype(r.dtype, np.number) or r.dtype.name == "bfloat16"):
                f = r.astype(np.float64)
                line += f"  min {f.min():.6g}  max {f.max():.6g}  mean {f.mean():.6g}"
            print(line)
            print("  " + np.array2string(r, threshold=8, edgeitems=2, precision=5).replace("\n", "\n  "))
    if len(times) == 1:
        print(f"ran in {times[0] * 1e3:.2f} ms (the first call includes one-time set-up; "
              "--repeat N times more calls)", file=sys.stderr)
    else:
        rest = sorted(times[1:])
        print(f"first call {times[0] * 1e3:.2f} ms; median of the next {len(rest)}: "
              f"{rest[len(rest) // 2] * 1e3:.2f} ms", file=sys.stderr)
    return 0


def _dtype_name(dt) -> str:
    from hlo.ir.types import element_type
    try:
        return element_type(dt).name
    except Exception:
        return str(dt)


def _type_of(r) -> str:
    import numpy as np
    r = np.asarray(r)
    return f"{_dtype_name(r.dtype)}[{','.join(str(d) for d in r.shape)}]"


def _signature(exe) -> str:
    outs = ", ".join(t.str_short() for t in exe.out_avals)
    return f"{exe.signature_text()} -> ({outs})"


def cmd_inspect(a) -> int:
    exe = _load_executable(a.model, describe_only=True)
    m = exe.manifest
    rt = m.get("runtime") or {}
    w = sys.stdout.write
    w(f"{a.model}: hlo executable, format {m.get('format_version')}, written by hlo "
      f"{m.get('hlo_version', '?')} ({_fmt_bytes(os.path.getsize(a.model))})\n")
    w(f"signature: {_signature(exe)}\n")
    donated = (m.get("signature") or {}).get("donated") or []
    if donated:
        w(f"donated arguments: {', '.join(exe.arg_names[i] for i in donated)}\n")
    tgt = m.get("target") or {}
    w(f"target: {tgt.get('kind')} {tgt.get('triple')} " + (f"arch={tgt.get('arch')}" if tgt.get('kind') == 'cuda' else f"cpu={tgt.get('cpu')}") + "\n")
    kernels = list(rt.get("kernels") or [])
    w(f"native kernels ({len(kernels)}):" + "".join(f"\n  {k}" for k in kernels) + "\n")
    if exe.cores:  # library code the object calls, a code section each
        w(f"library code ({len(exe.cores)}):" + "".join(f"\n  {c} (section code.cpu.core.{i})"
                                                   for i, c in enumerate(exe.cores)) + "\n")
    libs = rt.get("libraries") or []
    if libs:
        w(f"libraries: {', '.join(libs)}\n")
    cost = exe.cost_analysis()
    w("cost: " + ", ".join(f"{k} {_num(v)}" for k, v in cost.items()) + "\n")
    mem = exe.memory_analysis()
    w(f"memory: arguments {_fmt_bytes(mem.argument_size_in_bytes)}, outputs "
      f"{_fmt_bytes(mem.output_size_in_bytes)}, temp (arena) {_fmt_bytes(mem.temp_size_in_bytes)}, "
      f"aliased {_fmt_bytes(mem.alias_size_in_bytes)}, constants "
      f"{_fmt_bytes(mem.constant_size_in_bytes)}\n")
    plan = "\n".join((m.get("buffer_plan") or {}).get("text") or [])
    if plan:
        w("buffer plan:\n" + _indent(plan) + "\n")
    steps = m.get("call_sequence") or []
    if steps:
        w("call sequence:\n" + _indent("\n".join(steps)) + "\n")
    if not a.no_ir:
        w("optimized IR:\n" + _indent(exe.as_text()) + "\n")
    return 0


def _indent(text: str) -> str:
    return "\n".join("  " + line if line else "" for line in text.rstrip("\n").splitlines())


def _num(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return f"{int(v):,}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def cmd_export_c(a) -> int:
    from hlo.backends.cpu.export_c import ExportError
    from hlo.errors import UnsupportedError
    exe = _load_executable(a.model)
    if os.path.exists(a.output) and not os.path.isdir(a.output):
        raise CliError(f"-o {a.output!r}: exists and is not a folder", 2)
    try:
        out = exe.export_c(a.output, a.name)
    except (ExportError, UnsupportedError) as e:
        raise CliError(f"{a.model}: {e}") from None
    print(f"wrote {out.library} ({_fmt_bytes(os.path.getsize(out.library))}) and {out.header}: "
          f"{_signature(exe)}; build against it: see {out.header}")
    return 0


def cmd_cache(a) -> int:
    from hlo.staging import cache as cc
    if a.action == "clear":
        cc.clear()
        print(f"cleared {cc.entries_dir()}")
        return 0
    entries = cc._scan(cc.entries_dir())
    total = sum(s for _, s, _ in entries)
    state = "on" if cc.enabled() else "off"
    print(f"compilation cache: {state}, {cc.entries_dir()}")
    print(f"{len(entries)} {'entry' if len(entries) == 1 else 'entries'}, {_fmt_bytes(total)} (bound {_fmt_bytes(cc.max_bytes())}, "
          "least recently used evicted past it)")
    from hlo.runtime.cpu import code_library as lib
    if not lib.enabled():
        print("library code: off (HLO_LIBRARY=0)")
    else:
        objs = lib.contents()
        print(f"library code: {lib.library_dir()}, {len(objs)} objects of this build "
              f"({_fmt_bytes(sum(s for _, s in objs))}; python -m hlo.backends.cpu.build_library builds them all)")
    return 0


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------

def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="hlo: compile, run and inspect array programs.")
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks of errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("compile", help="trace, compile and save a function as a .hlox executable",
                       description="Trace FILE.py:FUNCTION for the given argument types, compile it "
                       "and save the executable.")
    c.add_argument("function", metavar="FILE.py:FUNCTION")
    c.add_argument("--arg", action="append", default=[], metavar="TYPE",
                   help="one positional array argument, e.g. f32[16,64,512] (repeat, in order)")
    c.add_argument("--static", action="append", default=[], metavar="NAME=VALUE",
                   help="a static (compile-time) keyword argument; VALUE is a Python literal")
    c.add_argument("-o", "--output", required=True, metavar="OUT.hlox")
    c.add_argument("--target", default=None, help="cpu or cuda (default: the default target)")
    c.add_argument("--dump-dir", default=None, help="write the IR after every pass here")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(fn=cmd_compile)

    r = sub.add_parser("run", help="run a .hlox executable on .npy/.npz inputs",
                       description="Load MODEL.hlox and call it on the inputs (in argument order).")
    r.add_argument("model", metavar="MODEL.hlox")
    r.add_argument("--input", action="extend", nargs="+", default=[], metavar="FILE",
                   help=".npy (one array) or .npz (its arrays in order, or by argument name)")
    r.add_argument("--repeat", type=_positive_int, default=1, metavar="N",
                   help="call it N times and report the first call's and the median time")
    r.add_argument("--output-dir", default=None,
                   help="write output_<i>.npy here (default: print shapes and a summary)")
    r.set_defaults(fn=cmd_run)

    i = sub.add_parser("inspect", help="signature, kernels, buffer plan, memory and IR of a .hlox",
                       description="Describe a saved executable.")
    i.add_argument("model", metavar="MODEL.hlox")
    i.add_argument("--no-ir", action="store_true", help="leave the optimized IR out")
    i.set_defaults(fn=cmd_inspect)

    x = sub.add_parser("export-c", help="write a .hlox executable as a C library (lib<name>.so + <name>.h)",
                       description="Write MODEL.hlox (target cpu) as a shared library and its header, "
                       "which a C program links and runs without Python.")
    x.add_argument("model", metavar="MODEL.hlox")
    x.add_argument("-o", "--output", required=True, metavar="FOLDER",
                   help="where lib<name>.so and <name>.h go (created if missing)")
    x.add_argument("--name", default=None,
                   help="the library's name, a C identifier: its functions are <name>_run, ... "
                   "(default: the function's name)")
    x.set_defaults(fn=cmd_export_c)

    o = sub.add_parser("opt", help="run passes on IR text (python -m hlo.opt; 'hlo opt -h')",
                       add_help=False)
    o.set_defaults(fn=None)

    k = sub.add_parser("cache", help="the persistent compilation cache: info, clear")
    k.add_argument("action", nargs="?", default="info", choices=("info", "clear"))
    k.set_defaults(fn=cmd_cache)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    show_tb = os.environ.get("HLO_CLI_TRACEBACK", "") not in ("", "0")
    if "--traceback" in argv:
        show_tb = True
    # ``hlo opt ...`` hands everything after "opt" to the passes tool unchanged.
    rest = [x for x in argv if x != "--traceback"]
    if rest and rest[0] == "opt":
        from hlo.tools.opt import main as opt_main
        return opt_main(rest[1:])
    try:
        parser = build_parser()
        a = parser.parse_args(rest)
        if a.command is None:
            parser.print_help(sys.stderr)
            return 2
        return a.fn(a)
    except CliError as e:
        return _fail(e, str(e), e.status, show_tb)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `hlo inspect m.hlox | head`: stop quietly, like other tools
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 141
    except SystemExit as e:  # argparse's --help
        return e.code if isinstance(e.code, int) else 0
    except Exception as e:  # one line, never a traceback
        from hlo.errors import HloError
        msg = str(e).strip() or type(e).__name__
        if not isinstance(e, HloError):
            msg = f"{type(e).__name__}: {msg}"
        return _fail(e, msg, 1, show_tb)


def _fail(e: BaseException, msg: str, status: int, show_tb: bool) -> int:
    if show_tb:
        traceback.print_exception(type(e), e, e.__traceback__)
    print(f"{PROG}: error: {' '.join(msg.split())}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
