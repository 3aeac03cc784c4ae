"""The GEMM's shared bodies as library code (``hlo.backends.cpu.gemm_library``): compiled once
per process, linked into every program that calls them, kept in the library folder
(``hlo.runtime.cpu.code_library``), carried by saved executables; every column and row tail of
the one generic body, against numpy. Building the library ahead: test_gemm_library_build.py."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from cpu_helpers import compile_text

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _product(m, k, n, bt=False):
    b = f"f32[{n},{k}]" if bt else f"f32[{k},{n}]"
    dims = "rhs_contracting_dimensions = [1]" if bt else "rhs_contracting_dimensions = [0]"
    return f"""module @m

func @main(%a: f32[{m},{k}], %b: {b}) -> (f32[{m},{n}]) {{
  %0 = dot_general(%a, %b) {{lhs_contracting_dimensions = [1], {dims}}} : f32[{m},{n}]
  return(%0)
}}
"""


def _check(exe, m, k, n, bt, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if bt else (k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ (b.T if bt else b).astype(np.float64)
    np.testing.assert_allclose(exe.run([a, b])[0], ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_every_column_and_row_tail_of_the_generic_body(monkeypatch):
    """Column tails of every width up to two panels (each vector count of the masked tail panel,
    its lanes known at run time only) and row counts that leave every remainder of the
    register tile (tails in power-of-two tiles), with B contiguous and gathered, 1 and 2 threads:
    all equal numpy (float64)."""
    from hlo.backends.cpu.gemm_tiled import register_tile, tile_rows, vector_lanes
    from hlo.ir.types import f32
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    MR, NV = register_tile()
    panel = NV * vector_lanes(f32)
    widths = sorted({1, 2, panel - 1, panel, panel + 1, 2 * panel + 3} |
                    {v * vector_lanes(f32) + d for v in range(1, NV + 1) for d in (-1, 0)})
    rows = sorted({1, MR - 1, MR, MR + 1, 2 * MR + MR // 2, tile_rows(1) + 3, 3 * tile_rows(1) - 1})
    seed = 0
    for n in widths:
        for m in rows:
            for bt in (False, True):
                seed += 1
                exe = compile_text(_product(m, 37, n, bt), threads=1 + seed % 2)
                _check(exe, m, 37, n, bt, seed)


def test_two_programs_share_one_compiled_body(monkeypatch):
    """Two different programs in one process call the same body: it is compiled (and linked)
    once, and neither program's own object defines it."""
    from hlo.backends.cpu import gemm_library
    from hlo.runtime.cpu import elf, loader
    monkeypatch.setenv("HLO_CPU_GEMM", "generated")
    first = compile_text(_product(33, 70, 130))
    second = compile_text(_product(200, 16, 24))
    assert first.manifest["cores"] == second.manifest["cores"]
    sym = first.manifest["cores"][0]["symbol"]
    assert gemm_library.compiles[sym] + gemm_library.library_hits[sym] == 1
    assert loader.link_counts[sym] == 1
    for exe in (first, second):
        defined, undefined = elf.symbols(exe.object_code)
        assert sym in undefined and sym not in defined
        assert gemm_library.describe(sym) in exe.ir_text   # the dump says where the body lives
        assert f'declare void @"{sym}"' in exe.ir_text
    _check(first, 33, 70, 130, False)
    _check(second, 200, 16, 24, False)


def test_the_body_key_covers_its_code():
    """The symbol's digest changes with the body's code (another tile setting), so a cached
    object is never used for a body it was not compiled from."""
    import hlo.backends.cpu.gemm_tiled as gt
    from hlo.backends.cpu.gemm_tiled import library_body
    before = library_body("f32", "contig", False)
    before_ir = before.ir_text()
    old = gt.FILL_PREFETCH_ROWS
    try:
        gt.FILL_PREFETCH_ROWS = 0
        changed = library_body("f32", "contig", False)
        changed_ir = changed.ir_text()   # emitted lazily: while the setting holds
    finally:
        gt.FILL_PREFETCH_ROWS = old
    assert changed.symbol != before.symbol and changed_ir != before_ir
    assert library_body("f32", "contig", False) is before


_SCRIPT = """
import json, sys
import numpy as np
import hlo
from hlo.backends.cpu import gemm_library
m, k, n = map(int, sys.argv[1:4])
f = hlo.jit(lambda a, b: a @ b)
a = np.ones((m, k), np.float32)
b = np.ones((k, n), np.float32)
out = f(a, b)
assert np.all(out == k), out
print(json.dumps({"compiles": sum(gemm_library.compiles.values()),
                  "hits": sum(gemm_library.library_hits.values())}))
"""


def _run(args, env):
    p = subprocess.run([sys.executable, "-c", _SCRIPT, *map(str, args)], capture_output=True,
                       text=True, env=env, cwd=REPO, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _objects(folder):
    return sorted(e.path for build in os.scandir(folder) for e in os.scandir(build.path)
                  if e.name.startswith("hlo.gemm_core."))


def test_the_library_folder_keeps_the_body_across_processes(tmp_path):
    """A process compiles the body and keeps it in the library folder; a later process compiling
    another program, with a fresh compilation cache or with the cache off, reads it from there
    instead of compiling it; with the library off it compiles it and writes nothing."""
    lib = tmp_path / "lib"
    env = dict(os.environ, HLO_CACHE_DIR=str(tmp_path / "cache"), HLO_CACHE="1",
               HLO_LIBRARY_DIR=str(lib), HLO_CPU_GEMM="generated")
    assert _run((64, 48, 40), env) == {"compiles": 1, "hits": 0}
    kept = _objects(lib)
    assert len(kept) == 1
    assert _run((65, 32, 24), dict(env, HLO_CACHE_DIR=str(tmp_path / "fresh"))) == {"compiles": 0, "hits": 1}
    assert _run((66, 32, 24), dict(env, HLO_CACHE="0")) == {"compiles": 0, "hits": 1}
    before = {p: os.stat(p).st_mtime_ns for p in kept}
    assert _run((67, 32, 24), dict(env, HLO_LIBRARY="0")) == {"compiles": 1, "hits": 0}
    assert {p: os.stat(p).st_mtime_ns for p in _objects(lib)} == before


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "not the body"])
def test_a_damaged_library_object_is_ignored_and_built_again(tmp_path, damage):
    """An object that fails its checksum, or that is intact but does not define the body (a
    file copied over it), is deleted, compiled again and replaced by a good one."""
    lib = tmp_path / "lib"
    env = dict(os.environ, HLO_CACHE_DIR=str(tmp_path / "cache"), HLO_LIBRARY_DIR=str(lib),
               HLO_CPU_GEMM="generated")
    assert _run((64, 48, 40), env) == {"compiles": 1, "hits": 0}
    path, = _objects(lib)
    good = open(path, "rb").read()
    if damage == "flip a byte":
        bad = bytearray(good)
        bad[100] ^= 0xFF
    elif damage == "truncate":
        bad = good[:len(good) // 2]
    else:   # an intact file (its checksum holds) of something else: its ELF check fails
        other = good[:-32][:64] + b"\0" * 64
        bad = other + hashlib.sha256(other).digest()
    open(path, "wb").write(bytes(bad))
    assert _run((65, 32, 24), env) == {"compiles": 1, "hits": 0}
    assert _run((66, 32, 24), env) == {"compiles": 0, "hits": 1}
    assert open(path, "rb").read() == good   # the same code, compiled again


def test_a_saved_executable_carries_its_body_to_a_fresh_process(tmp_path):
    """Saved, then loaded and run in a fresh process: the body comes from the file's code
    section (nothing compiled, the code generator never imported)."""
    import hlo
    x = np.linspace(-1, 1, 50 * 30, dtype=np.float32).reshape(50, 30)
    w = np.linspace(-1, 1, 30 * 20, dtype=np.float32).reshape(30, 20)
    compiled = hlo.aot.compile(lambda x, w: x @ w, x, w, target="cpu")
    path = tmp_path / "mm.hlox"
    compiled.save(path)
    desc = hlo.aot.describe(path)
    assert desc.cores and desc.cores[0].startswith("hlo.gemm_core.f32.")
    np.savez(tmp_path / "in.npz", x, w)
    script = ("import sys, numpy as np, hlo\n"
              "d = sys.argv[1]\n"
              "exe = hlo.load(d + '/mm.hlox')\n"
              "a = np.load(d + '/in.npz')\n"
              "np.save(d + '/out.npy', np.asarray(exe(a['arr_0'], a['arr_1'])))\n"
              "from hlo.runtime.cpu import loader\n"
              "assert list(loader.link_counts.values()) == [1], loader.link_counts\n"
              "assert 'hlo.backends.cpu.gemm_library' not in sys.modules\n"
              "assert 'hlo.backends.cpu.gemm_tiled' not in sys.modules\n")
    p = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                       env=dict(os.environ, HLO_CACHE="0"), cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    p = subprocess.run([sys.executable, "-m", "hlo", "inspect", "--no-ir", str(path)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"library code (1):\n  {desc.cores[0]} (section code.cpu.core.0)" in p.stdout


def test_a_body_whose_production_failed_is_produced_again(tmp_path, monkeypatch):
    """A failed compile (or read) is not remembered: the request that got the error sees it,
    and the next one produces the body."""
    from hlo.backends.cpu import gemm_library, gemm_tiled
    from hlo.runtime.cpu import code_library
    monkeypatch.setenv("HLO_LIBRARY_DIR", str(tmp_path / "lib"))
    spec = gemm_library.core_spec("f32", "contig", False, True, gemm_tiled.core_knobs() + ("retry test",),
                                  gemm_tiled.emit_core)
    real, calls = code_library.fetch, []

    def failing_once(*a):
        calls.append(a[0])
        if len(calls) == 1:
            raise RuntimeError("LLVM failed")
        return real(*a)
    monkeypatch.setattr(code_library, "fetch", failing_once)
    with pytest.raises(RuntimeError, match="LLVM failed"):
        gemm_library.object_code(spec)
    obj = gemm_library.object_code(spec)
    assert code_library.defines(obj, spec.symbol) and calls == [spec.symbol] * 2
    assert gemm_library.object_code(spec) is obj and len(calls) == 2   # kept from then on
