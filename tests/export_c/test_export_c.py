"""Export to C (``Compiled.export_c`` / ``hlo export-c``, ``hlo.backends.cpu.export_c``): every
seed workload (bench/workloads.py, quick sizes and dtypes) exported, the C example
(examples/c/) built against it with ``cc`` and run in a fresh process: bit for bit hlo.jit's
results at the same thread count, within float rounding at another; the error paths (a
harness that loads two libraries with dlopen) each a documented code; the harness under
AddressSanitizer; many calls with no memory growth; the README's five commands."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repo root holds bench/
from bench.workloads import WORKLOADS, Case, Ops, flatten

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None,
                                reason="export to C needs a C compiler (cc)")

CASES = [Case(w, "quick", dt) for w in WORKLOADS for dt in w.dtypes["quick"]]
EXAMPLE = REPO / "examples" / "c"
HARNESS = Path(__file__).with_name("harness.c")

# the header's status codes
OK, NULL_ARGUMENT, ARGUMENT_COUNT, FOREIGN_CONTEXT, BUSY, OOM, CPU, INVALID, MISALIGNED, OVERLAP = range(10)


def _name(case) -> str:
    return case.name.replace("[", "_").replace("]", "")


def _jit(case):
    body = case.workload.fn

    def fn(*a):
        return body(Ops(hnp, hlo.grad, hlo.vmap), *a)
    fn.__name__ = fn.__qualname__ = case.workload.id
    return hlo.jit(fn)


def _raw(arrays) -> bytes:
    return b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)


def _build_example(folder: Path, name: str) -> Path:
    r = subprocess.run(["make", "-s", "-C", str(EXAMPLE), f"EXPORT_DIR={folder}", f"MODEL={name}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return folder / f"run_{name}"


def _run(args, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, **kw)
    assert r.returncode == 0, f"{args}: {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


class Item:
    def __init__(self, case, folder, binary, inputs, expected, threads):
        self.case, self.folder, self.binary = case, folder, binary
        self.inputs, self.expected, self.threads = inputs, expected, threads

    def run(self, threads, *extra):
        out = self.folder / f"out{threads}.bin"
        r = _run([self.binary, self.inputs, "--threads", threads, "--output", out, *extra])
        return r.stdout, np.fromfile(out, np.uint8)

    def split(self, raw):
        """The outputs in ``raw`` as arrays shaped like the expected ones."""
        out, at = [], 0
        for e in self.expected:
            n = e.nbytes
            out.append(raw[at:at + n].view(e.dtype).reshape(e.shape))
            at += n
        assert at == raw.size
        return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export_c")
    items = {}
    for case in CASES:
        name = _name(case)
        folder = root / name
        inputs = case.inputs()
        f = _jit(case)
        compiled = f.lower(*inputs).compile()
        out = compiled.export_c(folder, name)
        assert (out.library, out.header) == (str(folder / f"lib{name}.so"), str(folder / f"{name}.h"))
        (folder / "inputs.bin").write_bytes(_raw(inputs))
        expected = [np.asarray(o) for o in flatten(f(*inputs))]
        items[name] = Item(case, folder, _build_example(folder, name), folder / "inputs.bin", expected,
                           compiled._runtime_executable().threads)
    return items


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = tmp_path_factory.mktemp("harness") / "harness"
    r = subprocess.run(["cc", "-O1", "-Wall", "-Werror", "-o", str(exe), str(HARNESS), "-ldl", "-lpthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_every_seed_workload_runs_from_c_bit_for_bit(exported):
    assert {it.case.workload.id for it in exported.values()} == {w.id for w in WORKLOADS}
    for name, it in exported.items():
        stdout, raw = it.run(it.threads)
        want = np.concatenate([e.reshape(-1).view(np.uint8) for e in it.expected])
        assert raw.size == want.size, name
        assert np.array_equal(raw, want), f"{name}: C results differ from hlo.jit's at {it.threads} threads"
        assert f"{it.threads} thread(s)" in stdout and "output 0 (" in stdout, stdout


def test_another_thread_count_is_within_float_rounding(exported):
    tol = {"float32": 2e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 2e-2}
    for name, it in exported.items():
        threads = 1 if it.threads > 1 else 3
        _, raw = it.run(threads)
        for k, (got, want) in enumerate(zip(it.split(raw), it.expected)):
            if want.dtype.kind not in "fc" and want.dtype.name != "bfloat16":
                np.testing.assert_array_equal(got, want, err_msg=f"{name} output {k}")
                continue
            g, w = got.astype(np.float64), want.astype(np.float64)
            scale = max(1.0, float(np.abs(w).max(initial=0)))
            err = float(np.abs(g - w).max(initial=0)) / scale
            assert err <= tol[want.dtype.name], f"{name} output {k} at {threads} threads: {err:.3g}"


def _checks(stdout: str) -> dict:
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^([a-z_0-9]+): (-?\d+)(?: \| (.*))?$", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), m.group(3) or "")
    return out


def _error_paths(harness, a: Item, b: Item, calls: int = 1, env=None):
    out = a.folder / "harness_out.bin"
    r = _run([harness, a.folder / f"lib{a.folder.name}.so", a.folder.name,
              b.folder / f"lib{b.folder.name}.so", b.folder.name, a.inputs, out, a.threads, calls],
             env=env)
    return _checks(r.stdout), np.fromfile(out, np.uint8), r


def test_error_paths_return_documented_codes(exported, harness):
    a, b = exported["transformer_layer"], exported["dispatch"]
    got, raw, _ = _error_paths(harness, a, b)
    p = a.folder.name
    expect = {
        "create_null_out": NULL_ARGUMENT, "create_negative_threads": INVALID,
        "create_too_many_threads": INVALID, "create_workspace_misaligned": INVALID,
        "create_workspace_small": INVALID, "create": OK,
        "run_null_context": NULL_ARGUMENT, "run_null_inputs": NULL_ARGUMENT,
        "run_null_outputs": NULL_ARGUMENT, "run_null_input0": NULL_ARGUMENT,
        "run_null_output0": NULL_ARGUMENT, "run_misaligned_output0": MISALIGNED,
        "run_output_overlaps_input": OVERLAP, "run_counted_inputs": ARGUMENT_COUNT,
        "run_counted_outputs": ARGUMENT_COUNT, "run_counted_ok": OK,
        "run_foreign_context": FOREIGN_CONTEXT, "run_counted_foreign_context": FOREIGN_CONTEXT,
        "threads_foreign_context": -1, "run_not_a_context": FOREIGN_CONTEXT,
        "create_caller_workspace": OK, "run_caller_workspace": OK, "run": OK, "two_threads": OK,
    }
    assert {k: got.get(k, (None,))[0] for k in expect} == expect
    assert got["run_null_input0"][1] == f"{p}_run: input 0 (a[0], f32) is NULL"
    assert "got 18 and 1" in got["run_counted_inputs"][1]
    assert "another exported library" in got["run_foreign_context"][1]
    assert got["run"][1] == ""  # a call that succeeds clears the message
    # after every error, and with the other library loaded RTLD_GLOBAL first: the right results
    want = np.concatenate([e.reshape(-1).view(np.uint8) for e in a.expected])
    assert np.array_equal(raw, want)


def test_error_paths_and_calls_under_address_sanitizer(exported, tmp_path):
    from hlo.backends.cpu.export_c import export
    asan = tmp_path / "harness_asan"
    r = subprocess.run(["cc", "-fsanitize=address", "-fno-omit-frame-pointer", "-O1", "-g", "-o", str(asan),
                        str(HARNESS), "-ldl", "-lpthread"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cc cannot build with AddressSanitizer here: {r.stderr.strip()[:200]}")
    items = {}
    for name in ("transformer_layer", "dispatch"):
        it = exported[name]
        f = _jit(it.case)
        exe = f.lower(*it.case.inputs()).compile()._runtime_executable()
        folder = tmp_path / name
        export(exe, str(folder), name, sanitize=True)  # the C runtime instrumented
        (folder / "inputs.bin").write_bytes(it.inputs.read_bytes())
        items[name] = Item(it.case, folder, None, folder / "inputs.bin", it.expected, it.threads)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23")
    got, raw, res = _error_paths(asan, items["transformer_layer"], items["dispatch"], calls=200, env=env)
    assert "ERROR: AddressSanitizer" not in res.stderr and "LeakSanitizer" not in res.stderr, res.stderr
    assert got["run"][0] == OK and got["run_null_input0"][0] == NULL_ARGUMENT
    want = np.concatenate([e.reshape(-1).view(np.uint8) for e in items["transformer_layer"].expected])
    assert np.array_equal(raw, want)


def _rss_growth(stdout: str) -> int:
    m = re.search(r"(\d+) calls: ([\d.]+) us per call, anonymous memory ([+-]\d+) KiB", stdout)
    assert m, stdout
    return int(m.group(3))


def test_many_calls_do_not_grow_memory(exported):
    it = exported["dispatch"]
    stdout, _ = it.run(it.threads, "--repeat", "100000", "--quiet")
    assert _rss_growth(stdout) <= 32, stdout  # a leak of one malloc a call: >= 3 MiB
    it = exported["transformer_layer"]
    stdout, _ = it.run(it.threads, "--repeat", "20000", "--quiet")
    assert _rss_growth(stdout) <= 32, stdout


def test_library_needs_only_libc(exported):
    if shutil.which("readelf") is None:
        pytest.skip("no readelf")
    lib = exported["transformer_layer"].folder / "libtransformer_layer.so"
    dyn = subprocess.run(["readelf", "-dW", str(lib)], capture_output=True, text=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
    assert needed and all(re.match(r"lib(c|m|pthread)\.so", n) for n in needed), needed
    syms = subprocess.run(["readelf", "--dyn-syms", "-W", str(lib)], capture_output=True, text=True).stdout
    exported_names = {ln.split()[-1] for ln in syms.splitlines()
                      if " GLOBAL " in ln and " UND " not in ln and ln.split()[-1] != "Ndx"}
    assert exported_names and all(n.startswith("transformer_layer_") for n in exported_names), exported_names


def test_header_documents_the_signature(exported):
    text = (exported["transformer_layer_bf16"].folder / "transformer_layer_bf16.h").read_text()
    assert " *   [0] a[0]: bf16[2,8,64], uint16_t (bfloat16 bits), 2048 bytes" in text
    assert "int transformer_layer_bf16_run(transformer_layer_bf16_context *ctx, const void *const *inputs, " \
           "void *const *outputs);" in text
    assert "#define TRANSFORMER_LAYER_BF16_NUM_INPUTS 17" in text
    assert "HLO_ERR_FOREIGN_CONTEXT = 3," in text
    train = (exported["mlp_train_step"].folder / "mlp_train_step.h").read_text()
    assert "[5] a[5]: s32[8], int32_t, 32 bytes" in train


def test_donated_input_from_c(tmp_path):
    f = hlo.jit(lambda x: x * 2.0 + 1.0, donate_argnums=0)
    x = np.arange(8, dtype=np.float32)
    compiled = f.lower(x).compile()
    compiled.export_c(tmp_path, "twice")
    h = (tmp_path / "twice.h").read_text()
    if "DONATED" not in h:
        pytest.skip("the program does not write its donated input here")
    assert "is input [0]'s memory" in h
    binary = _build_example(tmp_path, "twice")
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    _run([binary, tmp_path / "in.bin", "--output", tmp_path / "out.bin"])
    np.testing.assert_array_equal(np.fromfile(tmp_path / "out.bin", np.float32), x * 2 + 1)


def test_what_cannot_be_exported_says_so(tmp_path):
    from hlo.backends.cpu.export_c import ExportError
    from hlo.errors import UnsupportedError
    x = np.ones(4, np.float32)
    c = hlo.jit(lambda x: x + 1).lower(x).compile()
    for bad in ("int", "1abc", "a-b", "hlo_x", ""):
        with pytest.raises(ExportError, match="C identifier"):
            c.export_c(tmp_path, bad)

    def printing(x):
        hlo.debug.print("x {}", x)
        return x + 1
    with pytest.raises(ExportError, match="calls back into Python"):
        hlo.jit(printing).lower(x).compile().export_c(tmp_path, "p")
    with pytest.raises(ExportError, match="profiled build"):
        hlo.jit(lambda x: x + 1).lower(x).compile(profile=True).export_c(tmp_path, "p")
    interp = hlo.jit(lambda x: x + 1, target="interpreter").lower(x).compile()
    with pytest.raises(UnsupportedError, match="target 'interpreter' has no native code to export"):
        interp.export_c(tmp_path, "i")
    assert not any(tmp_path.iterdir())  # a refusal writes nothing


def test_readme_five_commands(tmp_path):
    """hlo compile, hlo export-c, make, write_inputs.py, run: the README's section, with the
    quick-size transformer; the C program's outputs are the .hlox's in Python, bit for bit."""
    from hlo.tools.cli import main
    model = tmp_path / "layer.hlox"
    args = ["compile", str(REPO / "examples" / "transformer.py") + ":layer", "--arg", "f32[2,8,64]",
            "--arg", "f32[64,192]", "--arg", "f32[64,64]", "--arg", "f32[64,128]", "--arg", "f32[128,64]",
            "--static", "heads=4", "-o", str(model), "-q"]
    assert main(args) == 0
    build = tmp_path / "build"
    assert main(["export-c", str(model), "-o", str(build)]) == 0
    binary = _build_example(build, "layer")
    _run([sys.executable, EXAMPLE / "write_inputs.py", model, build / "inputs.bin"],
         env=dict(os.environ, PYTHONPATH=str(REPO)))
    loaded = hlo.load(model)
    threads = loaded.executable.threads
    r = _run([binary, build / "inputs.bin", "--threads", threads, "--output", build / "out.bin"])
    assert "output 0 (result): f32[2,8,64] sum" in r.stdout
    raw = np.fromfile(build / "inputs.bin", np.uint8)
    ins, at = [], 0
    for spec in loaded.in_avals:
        n = int(np.prod(spec.shape)) * np.dtype(spec.dtype).itemsize
        ins.append(raw[at:at + n].view(spec.dtype).reshape(spec.shape))
        at += n
    want = np.asarray(loaded(*ins))
    assert np.array_equal(np.fromfile(build / "out.bin", np.float32).reshape(want.shape), want)
    assert main(["export-c", str(model), "-o", str(build), "--name", "void"]) == 1
    # a file one does not trust: its IR compiled afresh (hlo.load(recompile=True)), then exported
    fresh = tmp_path / "fresh"
    hlo.load(model, recompile=True).export_c(fresh, "layer")
    assert " *   [1] wqkv: f32[64,192], float, 49152 bytes" in (fresh / "layer.h").read_text()
    binary = _build_example(fresh, "layer")
    _run([binary, build / "inputs.bin", "--threads", threads, "--output", fresh / "out.bin"])
    assert np.array_equal(np.fromfile(fresh / "out.bin", np.float32).reshape(want.shape), want)


def test_cpu_check_agrees_with_llvm_on_this_cpu(tmp_path):
    """The library's own CPU check (cpuid and XCR0 in C, ``runtime_c.X86_FEATURES``) against
    LLVM's view of this host (``host().features``): every feature of the table that LLVM says
    this CPU has, the check finds; every one it says it lacks, the check reports missing."""
    from hlo.backends.cpu.export_c.runtime_c import X86_FEATURES, _cpu_check
    from hlo.runtime.cpu.target import host
    if not host().triple.startswith("x86_64"):
        pytest.skip("the CPU check is x86-64's")
    feats = host().features.split(",")
    parts = ["#include <stdio.h>", "#include <cpuid.h>"]
    names = [f[0] for f in X86_FEATURES]
    for k, n in enumerate(names):
        parts.append(_cpu_check([n]).replace("cpu_missing", f"missing_{k}").replace("feature_names", f"names_{k}"))
    parts.append("int main(void) {")
    parts += [f'    printf("%s %d\\n", "{n}", missing_{k}() >= 0);' for k, n in enumerate(names)]
    parts.append("    return 0;\n}")
    src = tmp_path / "check.c"
    src.write_text("\n".join(parts) + "\n")
    exe = tmp_path / "check"
    r = subprocess.run(["cc", "-O1", "-Wall", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    missing = dict(line.split() for line in _run([exe]).stdout.splitlines())
    checked = 0
    for n in names:
        if f"+{n}" in feats:
            assert missing[n] == "0", f"LLVM says this CPU has {n}; the library's check says it lacks it"
            checked += 1
        elif f"-{n}" in feats:
            assert missing[n] == "1", f"LLVM says this CPU lacks {n}; the library's check finds it"
            checked += 1
    assert checked >= 10


def test_generated_c_compiles_without_warnings(tmp_path):
    """The runtime and header an export writes, for programs of several shapes (one output,
    several, a donated input, no workspace), under -Wall -Wextra -Werror as C11 and the header as
    C++ too (the export itself does not stop on a warning of another compiler version)."""
    from hlo.backends.cpu.export_c.header import header
    from hlo.backends.cpu.export_c.runtime_c import source
    from hlo.backends.cpu.export_c.spec import from_executable
    progs = {"one": (hlo.jit(lambda x: x + 1), (np.ones(8, np.float32),)),
             "two": (hlo.jit(lambda x, y: (x @ y, x.sum())), (np.ones((4, 4), np.float32),) * 2),
             "don": (hlo.jit(lambda x: x * 2, donate_argnums=0), (np.ones(8, np.float32),))}
    for name, (f, args) in progs.items():
        spec = from_executable(f.lower(*args).compile()._runtime_executable(), name)
        for pool in (False, True):
            spec.uses_pool = pool
            (tmp_path / f"{name}.h").write_text(header(spec))
            (tmp_path / "runtime.c").write_text(source(spec))
            r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "runtime.c"],
                               cwd=tmp_path, capture_output=True, text=True)
            assert r.returncode == 0, f"{name}: {r.stderr}"
        if shutil.which("c++"):
            (tmp_path / "use.cpp").write_text(f'#include "{name}.h"\nint main() {{ return {name}_api_version(); }}\n')
            r = subprocess.run(["c++", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "use.cpp"],
                               cwd=tmp_path, capture_output=True, text=True)
            assert r.returncode == 0, f"{name}: {r.stderr}"


def loopy(x, n):
    """A while loop whose trip count is an argument, an if and a case (the step tree's control
    flow in the exported hlo_run)."""
    i, y = hlo.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (np.int32(0), x))
    z = hlo.lax.cond(y.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, y)
    return hlo.lax.switch(n % 3, [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: -v], z), i


def test_control_flow_from_c(tmp_path):
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    f = hlo.jit(loopy)
    f.lower(x, np.int32(0)).compile().export_c(tmp_path, "loopy")
    binary = _build_example(tmp_path, "loopy")
    for n in (0, 1, 2, 5):
        (tmp_path / "in.bin").write_bytes(x.tobytes() + np.int32(n).tobytes())
        _run([binary, tmp_path / "in.bin", "--output", tmp_path / "out.bin"])
        want = f(x, np.int32(n))
        raw = np.fromfile(tmp_path / "out.bin", np.uint8)
        assert np.array_equal(raw[:256].view(np.float32), np.asarray(want[0])), n
        assert raw[256:].view(np.int32)[0] == n
