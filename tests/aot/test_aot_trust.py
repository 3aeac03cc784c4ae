"""The trust model of saved executables: a file is native code, so the loader refuses anything
but a well-formed manifest (schema: types, ranges, agreement of signature, runtime records and
IR) with ``LoadError``, names libraries from a fixed list only, and ``recompile=True`` runs a
file from its IR alone. Crafted files are written with the project's own container writer, so
their checksums are valid."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from aot_util import REPO

import hlo
import hlo.numpy as hnp
from hlo.runtime import hlox
from hlo.runtime.hlox import LoadError

HERE = os.path.dirname(os.path.abspath(__file__))
X = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
W = np.linspace(-0.5, 0.5, 24, dtype=np.float32).reshape(8, 3)


def f(x, w):
    return {"y": hnp.tanh(x @ w + 1.0).sum(axis=1), "z": x * 2.0}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("trust")
    path = d / "f.hlox"
    hlo.aot.compile(f, X, W, target="cpu").save(path)
    return path


def _edited(path, tmp_path, edit, name="edited.hlox"):
    """A copy of ``path`` with ``edit(manifest, sections)`` applied, checksum recomputed."""
    p = hlox.read(path)
    manifest, sections = json.loads(json.dumps(p.manifest)), dict(p.sections)
    edit(manifest, sections)
    out = tmp_path / name
    out.write_bytes(hlox.dumps(hlox.Payload(manifest, sections)))
    return out


def _set(path_in_manifest, value):
    def edit(m, s):
        obj = m
        for k in path_in_manifest[:-1]:
            obj = obj[k]
        obj[path_in_manifest[-1]] = value
    return edit


def test_a_library_path_is_refused_and_its_code_never_runs(saved, tmp_path):
    cc = shutil.which("cc")
    marker = tmp_path / "constructor-ran"
    if cc is None:
        lib = "libm.so.6"
    else:
        src = tmp_path / "evil.c"
        src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void run(void) '
                       f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
        lib = str(tmp_path / "evil.so")
        subprocess.run([cc, "-shared", "-fPIC", "-o", lib, str(src)], check=True)
    bad = _edited(saved, tmp_path, _set(["runtime", "libraries"], [lib]))
    with pytest.raises(LoadError, match="never names a library by path"):
        hlo.load(bad)
    with pytest.raises(LoadError):
        hlo.load(bad, recompile=True)
    p = subprocess.run([sys.executable, "-m", "hlo", "inspect", "--no-ir", str(bad)],
                       capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert p.returncode == 1 and "never names a library by path" in p.stderr
    assert not marker.exists()


@pytest.mark.parametrize("field, value", [
    (["target", "triple"], 1), (["runtime", "libraries"], 7), (["runtime", "libraries"], ["libc.so.6"]),
    (["runtime", "inputs", 0, "layout"], [2 ** 63, 0]), (["runtime", "inputs", 0, "layout"], [0, 0]),
    (["runtime", "arena_size"], -1), (["runtime", "arena_size"], 2 ** 64),
    (["runtime", "inputs", 0, "shape"], [4, 9]), (["runtime", "inputs", 0, "dtype"], "f64"),
    (["runtime", "entry"], "../x"), (["runtime", "outputs"], []), (["runtime"], None),
    (["signature", "inputs", 1, "shape"], [8, 3, 1]), (["signature", "in_tree"], {"leaf": 1}),
    (["signature", "out_tree"], {"tuple": [{"bogus": 1}]}), (["signature", "arg_names"], ["x"]),
    (["signature", "donated"], [5]), (["signature", "name"], 3), (["target", "features"], "avx2"),
    (["target", "kind"], "../cpu"), (["analyses", "memory", "temp_size_in_bytes"], 2 ** 40),
    (["analyses", "cost", "flops"], [1]), (["imports"], ["a b"]), (["buffer_plan", "arena_size"], 99),
    (["sections"], []), (["call_sequence"], "k"),
    # donation: an output returned as an input's memory must be a distinct input of its size
    (["runtime", "aliases"], [[0, 5]]), (["runtime", "aliases"], [[0, 0]]), (["runtime", "aliases"], "x"),
    (["runtime", "aliases"], [[1, 0], [1, 0]]), (["runtime", "inputs_written"], [0, 0]),
    (["runtime", "inputs_written"], [7]), (["runtime", "inputs_written"], 0),
])
def test_malformed_fields_raise_load_error(saved, tmp_path, field, value):
    bad = _edited(saved, tmp_path, _set(field, value))
    for recompile in (False, True):
        with pytest.raises(LoadError):
            hlo.load(bad, recompile=recompile)
    with pytest.raises(LoadError):
        hlo.aot.describe(bad)


def test_the_ir_must_agree_with_the_signature(saved, tmp_path):
    def shrink(m, s):
        s["ir"] = s["ir"].replace(b"f32[4,8]", b"f32[4,7]", 1)
    with pytest.raises(LoadError, match="IR section's @main inputs"):
        hlo.load(_edited(saved, tmp_path, shrink))


def test_recompile_runs_a_file_whose_native_code_is_junk(saved, tmp_path):
    want = hlo.load(saved)(X, W)

    def junk(m, s):
        s["code.cpu"] = os.urandom(len(s["code.cpu"]))
        s["code.cpu.pool"] = b"\xcc" * 64
    bad = _edited(saved, tmp_path, junk)
    exe = hlo.load(bad, recompile=True)
    assert exe.executable is None  # no stored code was linked
    got = exe(X, W)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6)
    np.testing.assert_array_equal(got["z"], want["z"])
    assert exe.memory_analysis().temp_size_in_bytes >= 0


def test_inspect_never_loads_or_links_the_native_code(saved, tmp_path):
    """``hlo inspect`` reads the manifest and the IR section only (``hlo.aot.describe``): a file
    whose native code is junk (``int3`` traps: linking or running it would kill the process)
    and whose target names another CPU is described in full, and nothing is linked or loaded."""
    def junk(m, s):
        s["code.cpu"] = b"\xcc" * len(s["code.cpu"])
        s["code.cpu.pool"] = b"\xcc" * 64
        m["target"]["cpu"] = "another-cpu"
    bad = _edited(saved, tmp_path, junk)
    exe = hlo.aot.describe(bad)
    assert exe.executable is None
    assert exe.signature_text() == "f(x: f32[4,8], w: f32[8,3])"
    assert "tanh" in exe.as_text() and exe.memory_analysis().temp_size_in_bytes >= 0
    with pytest.raises(LoadError, match="description only"):
        exe(X, W)
    # The process running ``hlo inspect`` stops at once if anything links code or loads a library.
    probe = ("import sys, llvmlite.binding as llvm\n"
             "from hlo.runtime.cpu import loader\n"
             "def refuse(*a, **k): raise SystemExit('native code or a library was loaded')\n"
             "loader.LoadedObject.__init__ = loader.load_library = refuse\n"
             "llvm.load_library_permanently = llvm.create_mcjit_compiler = refuse\n"
             "from hlo.tools.cli import main\n"
             "sys.exit(main(['inspect', sys.argv[1]]))\n")
    p = subprocess.run([sys.executable, "-c", probe, str(bad)], capture_output=True, text=True,
                       cwd=str(REPO), timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "signature: f(x: f32[4,8], w: f32[8,3])" in p.stdout
    assert "target: cpu" in p.stdout and "cpu=another-cpu" in p.stdout
    assert "optimized IR:" in p.stdout and "tanh" in p.stdout


def test_recompile_refuses_an_ir_that_does_not_parse(saved, tmp_path):
    def mangle(m, s):
        s["ir"] = s["ir"].replace(b"tanh", b"tanx", 1)
    with pytest.raises(LoadError, match="IR section is not a valid program"):
        hlo.load(_edited(saved, tmp_path, mangle), recompile=True)


def _fuzz(saved, tmp_path, n, seed):
    np.savez(tmp_path / "in.npz", X, W)
    env = dict(os.environ, HLO_CACHE="0", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.join(HERE, "hlox_fuzz.py"), str(saved),
                        str(tmp_path / "in.npz"), str(n), str(seed)],
                       capture_output=True, text=True, env=env, timeout=7200)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    counts = report["counts"]
    assert sum(counts.values()) == n
    assert not report["bad"], json.dumps(report, indent=1)[:4000]
    return counts


def test_fuzzed_files_are_refused_or_run_correctly_under_recompile_sample(saved, tmp_path):
    counts = _fuzz(saved, tmp_path, 16, seed=1)
    assert counts.get("refused", 0) > 0


@pytest.mark.slow
def test_fuzzed_files_are_refused_or_run_correctly_under_recompile_1000(saved, tmp_path):
    counts = _fuzz(saved, tmp_path, 1000, seed=2)
    print(counts)


def _core_edit(how):
    def edit(m, s):
        first = "code.cpu.core.0"
        if how == "missing":
            del s[first]
        elif how == "changed":
            s[first] = s[first][:64] + bytes([s[first][64] ^ 0xFF]) + s[first][65:]
        elif how == "junk with its sha256":
            import hashlib
            s[first] = b"\xcc" * 256
            m["runtime"]["cores"][0]["sha256"] = hashlib.sha256(s[first]).hexdigest()
        elif how == "extra":
            s["code.cpu.core.7"] = s[first]
        elif how == "listed twice":
            m["runtime"]["cores"].append(m["runtime"]["cores"][0])
        elif how == "a symbol of the process":
            m["runtime"]["cores"][0]["symbol"] = "system"
    return edit


@pytest.mark.parametrize("how,match", [
    ("missing", "no native code section 'code.cpu.core.0'"),
    ("changed", "not the library code .*sha256 differs"),
    ("junk with its sha256", "does not define hlo.gemm_core"),
    ("extra", "code.cpu.core.7 that the manifest does not list"),
    ("listed twice", "runtime.cores: lists one symbol twice"),
    ("a symbol of the process", r"runtime.cores\[0\].symbol"),
])
def test_the_library_code_sections_are_checked(saved, tmp_path, how, match):
    """The GEMM's library code travels as ``code.cpu.core.<i>`` sections, one per entry of the
    runtime's ``cores`` (symbol and sha256): a missing, changed, unlisted or ill-named one is a
    ``LoadError`` before anything is linked."""
    assert hlo.aot.describe(saved).cores   # the program has a product: it calls a body
    with pytest.raises(LoadError, match=match):
        hlo.load(_edited(saved, tmp_path, _core_edit(how)))


@pytest.fixture(scope="module")
def saved_cuda(tmp_path_factory):
    """A CUDA program's file (compiled here, no GPU needed: loading one only reads it)."""
    from hlo.errors import TargetUnavailableError
    try:
        c = hlo.jit(lambda x, w: hnp.tanh(x @ w) + hnp.sin(x).sum(), target="cuda").lower(X, W).compile()
    except TargetUnavailableError as e:
        pytest.skip(f"cannot compile for cuda here: {e}")
    path = tmp_path_factory.mktemp("cuda") / "f.hlox"
    c.save(str(path))
    return path


def test_malformed_cuda_step_lists_and_manifest_fields_are_load_errors(saved_cuda, tmp_path):
    # issue 35: a malformed step list raised a bare ValueError / KeyError('steps') from hlo.load.
    # Every edit of the step list (70%) or another manifest field is a LoadError naming the file.
    import random

    from hlox_fuzz import load_outcome, manifest_case
    data = saved_cuda.read_bytes()
    rng = random.Random(35)
    counts, bad = {}, []
    for i in range(250):
        what, edited = manifest_case(rng, data)
        res = load_outcome(edited, str(tmp_path / "case.hlox"))
        counts[res["outcome"]] = counts.get(res["outcome"], 0) + 1
        if res["outcome"] == "error":
            bad.append((what, res))
    assert not bad, bad[:5]
    assert counts.get("refused", 0) > 100


@pytest.mark.parametrize("edit, field", [
    (lambda r: r.pop("steps"), "runtime.steps"),
    (lambda r: r.update(steps={"a": 1}), "runtime.steps"),
    (lambda r: r.update(steps=[7]), "runtime.steps"),
    (lambda r: r["steps"][0].update(grid=[1, 1]), "runtime.steps"),
    (lambda r: r["steps"][0].pop("refs"), "runtime.steps"),
])
def test_a_malformed_cuda_step_list_names_the_file_and_the_field(saved_cuda, tmp_path, edit, field):
    payload = hlox.loads(saved_cuda.read_bytes())
    m = json.loads(json.dumps(payload.manifest))
    edit(m["runtime"])
    path = tmp_path / "bad.hlox"
    path.write_bytes(hlox.dumps(hlox.Payload(m, payload.sections)))
    with pytest.raises(hlox.CorruptFileError) as e:
        hlo.load(str(path))
    assert str(path) in str(e.value) and field in str(e.value)
