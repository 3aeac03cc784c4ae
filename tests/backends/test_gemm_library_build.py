"""The CPU's library code built ahead (``python -m hlo.backends.cpu.build_library``, run by
``make install``): afterwards a fresh process with an empty compilation cache compiles only its
programs (no GEMM body, no worker pool), whatever the operands' layouts; and a forked child can
compile while its parent's library thread was busy."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Products in every layout the generated GEMM handles (transposed and strided operands, a
# product computed as C^T = B^T A^T, batches, f32 and f64): each process counts the LLVM
# compiles (``compile_ir`` calls) and the bodies compiled and read.
_PROGRAMS = """
import json
import numpy as np
import hlo
from hlo.backends.cpu import gemm_library, llvm_pipeline
calls = []
_compile_ir = llvm_pipeline.compile_ir
def counting(text, *a, **k):
    calls.append(text.count("\\n"))
    return _compile_ir(text, *a, **k)
llvm_pipeline.compile_ir = counting
rng = np.random.default_rng(0)
cases = [
    (lambda a, b: a @ b, (96, 80), (80, 72)),
    (lambda a, b: a.T @ b, (80, 96), (80, 72)),
    (lambda a, b: a @ b.T, (96, 80), (72, 80)),
    (lambda a, b: (a @ b).T, (5, 80), (80, 300)),
    (lambda a, b: a.T @ b.T, (80, 96), (72, 80)),
    (lambda a, b: a[:, ::2] @ b, (96, 160), (80, 72)),
    (lambda a, b: (a.T[:, ::2] @ b).T, (160, 7), (80, 200)),
    (lambda a, b: a @ b, (4, 40, 48), (4, 48, 56)),
]
programs = 0
for dtype in (np.float32, np.float64):
    for fn, sa, sb in cases:
        a = rng.standard_normal(sa).astype(dtype)
        b = rng.standard_normal(sb).astype(dtype)
        f = hlo.jit(fn)
        out = np.asarray(f(a, b))
        np.testing.assert_allclose(out, fn(a.astype(np.float64), b.astype(np.float64)), rtol=1e-4, atol=1e-4)
        programs += 1
from hlo.runtime.cpu import loader
print(json.dumps({"used": sorted(loader.link_counts), "programs": programs, "llvm_compiles": len(calls),
                  "body_compiles": sum(gemm_library.compiles.values()),
                  "body_reads": sum(gemm_library.library_hits.values())}))
"""


def _python(args, env, timeout=600):
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return p.stdout


def test_a_built_library_leaves_a_fresh_process_only_its_programs_to_compile(tmp_path):
    env = dict(os.environ, HLO_LIBRARY_DIR=str(tmp_path / "lib"), HLO_CACHE_DIR=str(tmp_path / "cache"),
               HLO_CPU_GEMM="generated")
    out = _python(["-m", "hlo.backends.cpu.build_library"], env)
    assert "0 of" in out.splitlines()[0] and "built hlo.gemm_core.f64.gather" in out
    assert "built worker pool" in out
    again = _python(["-m", "hlo.backends.cpu.build_library"], env).splitlines()
    have, total = re.search(r"(\d+) of (\d+) objects present$", again[0]).groups()
    assert have == total and len(again) == 1   # everything was there: nothing compiled

    r = json.loads(_python(["-c", _PROGRAMS], env).strip().splitlines()[-1])
    assert r["body_compiles"] == 0 and r["body_reads"] == len(r["used"])
    assert r["llvm_compiles"] == r["programs"]   # each program's own module, nothing else
    from hlo.backends.cpu import build_library
    built = {spec.symbol.rsplit(".", 1)[0] for spec in build_library.bodies()}
    used = {s.rsplit(".", 1)[0] for s in r["used"]}
    assert used <= built, used - built   # the build's list covers what programs ask for
    assert len(used) >= 6, used          # and the programs above reach most of it


_FORK = """
import os, sys
import numpy as np
import hlo
from hlo.backends.cpu import gemm_library
from hlo.backends.cpu.gemm_tiled import library_body
a = np.ones((64, 48), np.float32)
assert np.all(hlo.jit(lambda a, b: a @ b)(a, a.T) == 48)
gemm_library.request(library_body("f64", "contig", False))   # the library thread is busy
pid = os.fork()
if pid == 0:
    x = np.ones((40, 30), np.float64)
    ok = np.all(np.asarray(hlo.jit(lambda a, b: a @ b + 1)(x, x.T)) == 31)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_compiles_while_the_parent_builds_a_body(tmp_path):
    """Forked while the library thread compiles a body: the child (which has no such thread)
    produces its bodies itself, and nothing it inherited is held."""
    env = dict(os.environ, HLO_LIBRARY="0", HLO_CACHE_DIR=str(tmp_path / "cache"), HLO_CPU_GEMM="generated")
    _python(["-c", _FORK], env, timeout=120)
