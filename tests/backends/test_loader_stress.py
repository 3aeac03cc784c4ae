"""Many executables linked into one process (the whole suite compiles hundreds): each one is
its own MCJIT engine with its own target machine, and every object defines the same global
names (``hlo_run``, ``hlo_run_py``, ``hlo_pool_ptr``). These tests compile many small distinct
programs in one process, some kept alive, some dropped (their engines freed while others
load), some compiled from several threads at once, and check every result against numpy."""
import gc
import os
import platform
import subprocess
import sys
import threading

import numpy as np
import pytest

from hlo.backends.cpu import compile_module
from hlo.ir import parse_module

# Program shapes, cycled: a parallel elementwise kernel (through the worker pool), a constant
# table (read-only data), a row reduction, a matrix product (BLAS), an integer scatter-free
# select, a while loop.
_TEMPLATES = [
    ("""module @p{k}
func @main(%x: f32[512,300]) -> (f32[512,300]) {{
  %c = constant dense<{f}.5> : f32[]
  %b = broadcast_in_dim(%c) {{broadcast_dimensions = []}} : f32[512,300]
  %0 = multiply(%x, %b) : f32[512,300]
  %1 = exponential(%0) : f32[512,300]
  return(%1)
}}
""", lambda k, x: np.exp(x * np.float32(k % 7 + 0.5)), (512, 300)),
    ("""module @c{k}
func @main(%x: s32[5]) -> (s32[5]) {{
  %c = constant dense<[{k}, 3, -7, {k}, 11]> : s32[5]
  %0 = add(%x, %c) : s32[5]
  return(%0)
}}
""", lambda k, x: x + np.array([k, 3, -7, k, 11], np.int32), (5,)),
    ("""module @r{k}
func @main(%x: f32[7,{n}]) -> (f32[7]) {{
  %z = constant dense<0.0> : f32[]
  %0 = reduce(%x, %z) {{dimensions = [1]}} : f32[7] {{
    ^body(%a: f32[], %b: f32[]):
      %s = add(%a, %b) : f32[]
      return(%s)
  }}
  return(%0)
}}
""", lambda k, x: x.astype(np.float64).sum(1), (7, None)),
    ("""module @d{k}
func @main(%x: f32[{n},16]) -> (f32[{n},{n}]) {{
  %0 = dot_general(%x, %x) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]}} : f32[{n},{n}]
  return(%0)
}}
""", lambda k, x: x.astype(np.float64) @ x.astype(np.float64).T, (None, 16)),
    ("""module @w{k}
func @main(%x: s32[]) -> (s32[]) {{
  %0 = while(%x) : s32[] {{
    ^cond(%a: s32[]):
      %lim = constant dense<{lim}> : s32[]
      %p = compare(%a, %lim) {{comparison_direction = "LT"}} : pred[]
      return(%p)
    ^body(%b: s32[]):
      %one = constant dense<{k}> : s32[]
      %n = add(%b, %one) : s32[]
      return(%n)
  }}
  return(%0)
}}
""", None, ()),
]


def _program(k: int):
    """Program number ``k``: (IR text, input, expected output, tolerance)."""
    text, ref, shape = _TEMPLATES[k % len(_TEMPLATES)]
    n = 3 + k % 11
    rng = np.random.default_rng(k)
    if ref is None:  # the while loop: count up from 0 by k+1 until >= lim
        step, lim = k + 1, 50 + k
        src = text.format(k=step, lim=lim)
        x = np.array(0, np.int32)
        want = np.array(-(-lim // step) * step, np.int32)
        return src, x, want, 0
    src = text.format(k=k, n=n, f=k % 7)
    shape = tuple(n if d is None else d for d in shape)
    if "s32" in src.split("\n")[1]:
        x = rng.integers(-100, 100, shape).astype(np.int32)
    else:
        x = (rng.standard_normal(shape) * (0.01 if k % len(_TEMPLATES) == 0 else 1)).astype(np.float32)
    return src, x, ref(k, x), 2e-5


def _compile_and_check(k: int):
    src, x, want, tol = _program(k)
    exe = compile_module(parse_module(src))
    got = exe.run([x])[0]
    if tol:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"program {k}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"program {k}")
    return exe, x, got


def _stress(count: int, offset: int):
    kept = []
    for k in range(offset, offset + count):
        exe, x, got = _compile_and_check(k)
        if k % 3 == 0:
            kept.append((exe, x, got))  # stays linked while later ones load
        del exe
        if k % 17 == 0:
            gc.collect()  # free the dropped engines now, between loads
    for exe, x, got in kept:  # every kept executable still runs, with its own code and data
        again = exe.run([x])[0]
        np.testing.assert_array_equal(again, got)


def test_fifty_executables_in_one_process():
    _stress(50, offset=1000)


@pytest.mark.slow
def test_five_hundred_executables_in_one_process():
    _stress(500, offset=2000)


def test_compiling_from_several_threads_at_once():
    errors = []

    def work(t):
        try:
            for k in range(3000 + t * 100, 3000 + t * 100 + 6):
                _compile_and_check(k)
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


# An address space laid out so that an object's sections cannot all be near each other unless
# they are allocated as one block: a 4 GiB reservation with a few free pages just above it and
# no gap above it that could hold the program's 1.2 MB constant table. LLVM's default memory
# manager put the code in the small hole and the constants below the wall, more than 2 GiB
# away, and aborted the process in finalize_object (RuntimeDyldELF: `isInt<32>(RealOffset)`);
# the hundreds of executables the suite loads, next to jax and torch, did the same by chance.
_FAR_SECTIONS = r'''
import ctypes, mmap
import numpy as np
from hlo.backends.cpu import compile_module
from hlo.ir import parse_module
from hlo.runtime.cpu.executable import Executable

N = 300000
vals = np.arange(N, dtype=np.float32) * np.float32(0.5)
src = ("module @m\n"
       f"func @main(%x: f32[{N}]) -> (f32[{N}]) {{\n"
       f'  %c = constant dense<"0x{vals.tobytes().hex()}"> : f32[{N}]\n'
       f"  %0 = add(%x, %c) : f32[{N}]\n"
       "  return(%0)\n}\n")
exe = compile_module(parse_module(src))
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
NORESERVE = 0x4000


def reserve(n):
    a = libc.mmap(None, n, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | NORESERVE, -1, 0)
    assert a is not None and a != ctypes.c_void_p(-1).value, "mmap failed"
    return a


GB, MB, PAGE = 1 << 30, 1 << 20, mmap.PAGESIZE
wall = reserve(4 * GB)
for _ in range(100000):  # take every gap above the wall that could hold the constants
    a = reserve(MB)
    if a < wall:
        libc.munmap(a, MB)
        break
libc.munmap(wall + 4 * GB - 16 * PAGE, 16 * PAGE)
x = np.ones(N, np.float32)
got = Executable(exe.object_code, exe.manifest).run([x])[0]
assert np.array_equal(got, x + vals)
print("linked and ran")
'''


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")),
                    reason="lays out the address space with Linux x86-64 mmap")
def test_sections_of_one_object_stay_within_reach_of_each_other():
    r = subprocess.run([sys.executable, "-c", _FAR_SECTIONS], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ))
    assert r.returncode == 0 and "linked and ran" in r.stdout, (r.returncode, r.stderr[-2000:])


# An object that calls an external function (a stub through the GOT) and has no writable
# section: llvmlite's one-block memory manager would reserve no read-write memory for the GOT
# and abort; the loader must see that and use LLVM's default memory manager for it.
_CALLS_ABS = """
declare i32 @abs(i32)

define i32 @twice_abs(i32 %x) {
  %a = call i32 @abs(i32 %x)
  %b = add i32 %a, %a
  ret i32 %b
}
"""


@pytest.mark.parametrize("writable", [False, True])
def test_objects_with_external_calls_link_with_or_without_writable_data(writable):
    import ctypes

    from hlo.backends.cpu.llvm_pipeline import compile_ir
    from hlo.runtime.cpu.loader import LoadedObject, one_block_fits
    text = _CALLS_ABS + ("@counter = global i64 0\n" if writable else "")
    obj, _, _ = compile_ir(text, opt_level=0)
    assert one_block_fits(obj) == writable
    lo = LoadedObject(obj, ["twice_abs"])
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(lo.address("twice_abs"))
    assert fn(-21) == 42


def test_executables_link_as_one_block():
    """Every object the CPU backend emits has a writable section, so it gets the one-block
    memory manager, also when it calls BLAS and has no parallel kernel."""
    from hlo.runtime.cpu.loader import one_block_fits
    src = """module @m
func @main(%a: f32[3,4], %b: f32[4,5]) -> (f32[3,5]) {
  %0 = dot_general(%a, %b) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[3,5]
  return(%0)
}
"""
    exe = compile_module(parse_module(src))
    assert one_block_fits(exe.object_code)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_allclose(exe.run([a, b])[0], a @ b, rtol=1e-6)
