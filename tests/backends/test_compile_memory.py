"""Compiling keeps no native memory: LLVM's pass pipeline is freed after each run (llvmlite
never frees its ModulePassManager by itself), and a dropped jitted function frees its
executables. RSS is read from /proc (Linux)."""
import gc
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


LOOP = """
define void @scale(float* noalias %a, float* noalias %b, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %pa = getelementptr float, float* %a, i64 %i
  %pb = getelementptr float, float* %b, i64 %i
  %x = load float, float* %pa
  %y = fmul float %x, 2.0
  store float %y, float* %pb
  %i1 = add i64 %i, 1
  %c = icmp slt i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}
"""


def test_the_llvm_pipeline_frees_its_pass_manager():
    from hlo.backends.cpu.llvm_pipeline import compile_ir
    for _ in range(20):  # warm: LLVM's one-time tables, the allocator's pools
        compile_ir(LOOP)
    gc.collect()
    before = _rss_kib()
    n = 100
    for _ in range(n):
        compile_ir(LOOP)
    gc.collect()
    per_run = (_rss_kib() - before) / n
    assert per_run < 8, f"{per_run:.1f} KiB kept per LLVM compile (an unfreed O3 pipeline: ~65)"


COMPILES = """
import gc, os, sys
os.environ["HLO_CACHE"] = "0"
import numpy as np
import hlo, hlo.numpy as hnp

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))

def compile_and_drop(i):
    f = hlo.jit(lambda x: hnp.sin(x) * (i + 1.0) + hnp.exp(x).sum())
    f(np.ones((8, 16), np.float32))

for i in range(50):
    compile_and_drop(i)
gc.collect(); before = rss()
n = int(sys.argv[1])
for i in range(n):
    compile_and_drop(1000 + i)
gc.collect()
print((rss() - before) / n)
"""


@pytest.mark.slow
def test_300_compiles_of_dropped_functions_keep_at_most_20_kib_each():
    p = subprocess.run([sys.executable, "-c", COMPILES, "300"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    per_compile = float(p.stdout.strip())
    assert per_compile <= 20, f"{per_compile:.1f} KiB kept per compile"
