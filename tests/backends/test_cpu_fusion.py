"""Fused regions written by hand in IR text (loop, row-wise reductions, output fusions), thread
counts, concurrent calls and argument checking on the CPU backend."""
import threading

import numpy as np
import pytest
from cpu_helpers import assert_close, check, compile_text

from hlo.runtime.signature import ArgumentError

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


LOOP = """module @m
func @main(%arg0: f32[64,48], %arg1: f32[48]) -> (f32[64,48], f32[64,48]) {
  %0, %1 = fusion(%arg0, %arg1) {kind = "multi"} : f32[64,48], f32[64,48] {
    ^fused(%2: f32[64,48], %3: f32[48]):
      %4 = broadcast_in_dim(%3) {broadcast_dimensions = [1]} : f32[64,48]
      %5 = multiply(%2, %4) : f32[64,48]
      %6 = tanh(%5) : f32[64,48]
      %7 = exponential(%5) : f32[64,48]
      return(%6, %7)
  }
  return(%0, %1)
}
"""

SOFTMAX = """module @m
func @main(%arg0: f32[{n},{m}]) -> (f32[{n},{m}]) {{
  %0 = fusion(%arg0) {{kind = "input"}} : f32[{n},{m}] {{
    ^fused(%1: f32[{n},{m}]):
      %2 = constant dense<-inf> : f32[]
      %3 = reduce(%1, %2) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%4: f32[], %5: f32[]):
          %6 = maximum(%4, %5) : f32[]
          return(%6)
      }}
      %7 = broadcast_in_dim(%3) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
      %8 = subtract(%1, %7) : f32[{n},{m}]
      %9 = exponential(%8) : f32[{n},{m}]
      %10 = constant dense<0.0> : f32[]
      %11 = reduce(%9, %10) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%12: f32[], %13: f32[]):
          %14 = add(%12, %13) : f32[]
          return(%14)
      }}
      %15 = broadcast_in_dim(%11) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
      %16 = divide(%9, %15) : f32[{n},{m}]
      return(%16)
  }}
  return(%0)
}}
"""

LAYERNORM = """module @m
func @main(%arg0: f32[{n},{m}], %arg1: f32[{m}], %arg2: f32[{m}]) -> (f32[{n},{m}], f32[{n}]) {{
  %0, %1 = fusion(%arg0, %arg1, %arg2) {{kind = "input"}} : f32[{n},{m}], f32[{n}] {{
    ^fused(%2: f32[{n},{m}], %3: f32[{m}], %4: f32[{m}]):
      %5 = constant dense<0.0> : f32[]
      %6 = reduce(%2, %5) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%7: f32[], %8: f32[]):
          %9 = add(%7, %8) : f32[]
          return(%9)
      }}
      %10 = constant dense<{inv}> : f32[{n}]
      %11 = multiply(%6, %10) : f32[{n}]
      %12 = reshape(%11) : f32[{n},1]
      %13 = broadcast_in_dim(%12) {{broadcast_dimensions = [0, 1]}} : f32[{n},{m}]
      %14 = subtract(%2, %13) : f32[{n},{m}]
      %15 = multiply(%14, %14) : f32[{n},{m}]
      %16 = reduce(%15, %5) {{dimensions = [1]}} : f32[{n}] {{
        ^body(%17: f32[], %18: f32[]):
          %19 = add(%17, %18) : f32[]
          return(%19)
      }}
      %20 = multiply(%16, %10) : f32[{n}]
      %21 = constant dense<1.0e-5> : f32[{n}]
      %22 = add(%20, %21) : f32[{n}]
      %23 = rsqrt(%22) : f32[{n}]
      %24 = broadcast_in_dim(%23) {{broadcast_dimensions = [0]}} : f32[{n},{m}]
      %25 = multiply(%14, %24) : f32[{n},{m}]
      %26 = broadcast_in_dim(%3) {{broadcast_dimensions = [1]}} : f32[{n},{m}]
      %27 = broadcast_in_dim(%4) {{broadcast_dimensions = [1]}} : f32[{n},{m}]
      %28 = multiply(%25, %26) : f32[{n},{m}]
      %29 = add(%28, %27) : f32[{n},{m}]
      return(%29, %11)
  }}
  return(%0, %1)
}}
"""

LINEAR = """module @m
func @main(%arg0: f32[{b},{k}], %arg1: f32[{k},{n}], %arg2: f32[{n}]) -> (f32[{b},{n}]) {{
  %0 = fusion(%arg0, %arg1, %arg2) {{kind = "output"}} : f32[{b},{n}] {{
    ^fused(%1: f32[{b},{k}], %2: f32[{k},{n}], %3: f32[{n}]):
      %4 = dot_general(%1, %2) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{b},{n}]
      %5 = broadcast_in_dim(%3) {{broadcast_dimensions = [1]}} : f32[{b},{n}]
      %6 = add(%4, %5) : f32[{b},{n}]
      %7 = constant dense<0.0> : f32[{b},{n}]
      %8 = maximum(%6, %7) : f32[{b},{n}]
      return(%8)
  }}
  return(%0)
}}
"""


def test_loop_fusion_multi_output():
    check(LOOP, [f32(64, 48), f32(48)], rtol=1e-5, atol=1e-6)
    exe = compile_text(LOOP)
    assert len(exe.kernels) == 1  # both outputs in one loop nest


def test_softmax_row_fusion():
    src = SOFTMAX.format(n=37, m=300)
    x = f32(37, 300) * 3
    x[3, 5] = np.nan
    check(src, [x], rtol=1e-5, atol=1e-7)
    exe = compile_text(src)
    assert "row-fused" in exe.steps_text and len(exe.kernels) == 1


def test_layernorm_row_fusion_with_keepdims_reshape():
    n, m = 19, 130
    src = LAYERNORM.format(n=n, m=m, inv=1.0 / m)
    check(src, [f32(n, m) + 3, f32(m), f32(m)], rtol=1e-4, atol=1e-5)
    assert "row-fused" in compile_text(src).steps_text


def test_output_fusion_in_place_epilogue():
    src = LINEAR.format(b=33, k=40, n=24)
    check(src, [f32(33, 40), f32(40, 24), f32(24)], rtol=1e-5, atol=1e-5)
    # the dot writes the output buffer and the epilogue runs in place: no scratch needed
    assert "arena" not in compile_text(src).steps_text


def test_fusion_with_non_row_reduce_materializes():
    src = """module @m
func @main(%arg0: f32[20,30]) -> (f32[20,30]) {
  %0 = fusion(%arg0) {kind = "input"} : f32[20,30] {
    ^fused(%1: f32[20,30]):
      %2 = constant dense<0.0> : f32[]
      %3 = reduce(%1, %2) {dimensions = [0]} : f32[30] {
        ^body(%4: f32[], %5: f32[]):
          %6 = add(%4, %5) : f32[]
          return(%6)
      }
      %7 = broadcast_in_dim(%3) {broadcast_dimensions = [1]} : f32[20,30]
      %8 = subtract(%1, %7) : f32[20,30]
      return(%8)
  }
  return(%0)
}
"""
    check(src, [f32(20, 30)], rtol=1e-5, atol=1e-5)
    exe = compile_text(src)
    assert "row-fused" not in exe.steps_text and "arena" in exe.steps_text


def test_column_reduce_with_fused_producer():
    src = """module @m
func @main(%arg0: f32[300,70]) -> (f32[70]) {
  %0 = fusion(%arg0) {kind = "input"} : f32[70] {
    ^fused(%1: f32[300,70]):
      %2 = multiply(%1, %1) : f32[300,70]
      %3 = constant dense<0.0> : f32[]
      %4 = reduce(%2, %3) {dimensions = [0]} : f32[70] {
        ^body(%5: f32[], %6: f32[]):
          %7 = add(%5, %6) : f32[]
          return(%7)
      }
      return(%4)
  }
  return(%0)
}
"""
    check(src, [f32(300, 70)], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("src,args,tol", [
    (SOFTMAX.format(n=512, m=1024), lambda: [f32(512, 1024)], 0),
    (LOOP.replace("64,48", "1024,512").replace("f32[48]", "f32[512]").replace("%3: f32[48]", "%3: f32[512]"),
     lambda: [f32(1024, 512), f32(512)], 0),
    # BLAS may pick different micro-kernels for different row blocks: equal up to rounding
    (LINEAR.format(b=256, k=128, n=256), lambda: [f32(256, 128), f32(128, 256), f32(256)], 1e-5),
])
def test_threads_give_identical_results(src, args, tol):
    a = args()
    one = compile_text(src, threads=1).run(a)
    exe = compile_text(src, threads=2)
    assert "parallel" in exe.steps_text
    two = exe.run(a)
    for x, y in zip(one, two):
        assert_close(y, x, rtol=tol, atol=tol)


def test_concurrent_calls_from_python_threads():
    src = SOFTMAX.format(n=64, m=256)
    exe = compile_text(src)
    inputs = [f32(64, 256) for _ in range(8)]
    expected = [exe.run([x])[0] for x in inputs]
    errors = []

    def worker(k):
        try:
            for _ in range(20):
                for i in range(k, len(inputs), 4):
                    got = exe.run([inputs[i]])[0]
                    if not np.array_equal(got, expected[i]):
                        errors.append(i)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_argument_errors_are_clear():
    exe = compile_text(SOFTMAX.format(n=4, m=8))
    with pytest.raises(ArgumentError, match=r"expected 1 argument"):
        exe.run([])
    with pytest.raises(ArgumentError, match=r"argument 0: expected f32\[4,8\], got float64\[4,8\]"):
        exe.run([np.zeros((4, 8))])
    with pytest.raises(ArgumentError, match=r"expected f32\[4,8\], got float32\[8,4\]"):
        exe.run([np.zeros((8, 4), np.float32)])


def test_non_contiguous_inputs_are_accepted():
    exe = compile_text(SOFTMAX.format(n=8, m=6))
    x = f32(6, 8).T  # a transposed view
    ref = compile_text(SOFTMAX.format(n=8, m=6)).run([np.ascontiguousarray(x)])[0]
    np.testing.assert_array_equal(exe.run([x])[0], ref)


def test_executable_reloads_from_object_code():
    from hlo.runtime.cpu.executable import Executable
    exe = compile_text(LINEAR.format(b=8, k=16, n=4))
    again = Executable.from_object(exe.object_code, exe.manifest)
    a = [f32(8, 16), f32(16, 4), f32(4)]
    np.testing.assert_array_equal(exe.run(a)[0], again.run(a)[0])


RESIDUAL = """module @m
func @main(%arg0: f32[{b},{k}], %arg1: f32[{k},{n}], %arg2: f32[{n}], %arg3: f32[{b},{n}]) -> (f32[{b},{n}]) {{
  %0 = fusion(%arg0, %arg1, %arg2, %arg3) {{kind = "output"}} : f32[{b},{n}] {{
    ^fused(%1: f32[{b},{k}], %2: f32[{k},{n}], %3: f32[{n}], %4: f32[{b},{n}]):
      %5 = dot_general(%1, %2) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{b},{n}]
      %6 = broadcast_in_dim(%3) {{broadcast_dimensions = [1]}} : f32[{b},{n}]
      %7 = add(%5, %6) : f32[{b},{n}]
      %8 = tanh(%7) : f32[{b},{n}]
      %9 = add(%8, %4) : f32[{b},{n}]
      return(%9)
  }}
  return(%0)
}}
"""


@pytest.mark.parametrize("b,k,n", [(64, 96, 600), (700, 96, 64), (5, 7, 3)])
def test_output_fusion_epilogue_per_gemm_block(b, k, n):
    src = RESIDUAL.format(b=b, k=k, n=n)
    args = [f32(b, k), f32(k, n), f32(n), f32(b, n)]
    check(src, args, rtol=1e-5, atol=1e-5)
    exe = compile_text(src, threads=2)
    assert len(exe.kernels) == 1  # the epilogue runs inside the GEMM kernel, block by block
    one = compile_text(src, threads=1).run(args)[0]
    assert_close(exe.run(args)[0], one, rtol=1e-5, atol=1e-5)


def test_saved_object_runs_in_a_fresh_process(tmp_path):
    """Object code + manifest + the library code it calls (the GEMM's body) are all a later
    process needs: no tracing, no compiling."""
    import json
    import subprocess
    import sys
    exe = compile_text(RESIDUAL.format(b=40, k=16, n=24))
    assert exe.manifest["cores"] and set(exe.core_objects) == {c["symbol"] for c in exe.manifest["cores"]}
    (tmp_path / "code.o").write_bytes(exe.object_code)
    (tmp_path / "manifest.json").write_text(json.dumps(exe.manifest))
    for i, sym in enumerate(exe.core_objects):
        (tmp_path / f"core{i}.o").write_bytes(exe.core_objects[sym])
    (tmp_path / "cores.json").write_text(json.dumps(list(exe.core_objects)))
    args = [f32(40, 16), f32(16, 24), f32(24), f32(40, 24)]
    np.savez(tmp_path / "args.npz", *args)
    script = (
        "import json, sys, numpy as np\n"
        "import hlo.backends.lower as lower\n"
        "from hlo.runtime.cpu.executable import Executable\n"
        "d = sys.argv[1]\n"
        "lower.Lowering = None  # loading must not lower or compile any program\n"
        "cores = {s: open(f'{d}/core{i}.o', 'rb').read() for i, s in enumerate(json.load(open(d + '/cores.json')))}\n"
        "exe = Executable.from_object(open(d + '/code.o', 'rb').read(), json.load(open(d + '/manifest.json')),\n"
        "                             cores=cores)\n"
        "a = np.load(d + '/args.npz')\n"
        "np.save(d + '/out.npy', exe.run([a[f'arr_{i}'] for i in range(4)])[0])\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), exe.run(args)[0])


def test_foreign_cpu_features_are_refused():
    from hlo.runtime.cpu.executable import Executable
    from hlo.runtime.hlox import TargetMismatchError
    exe = compile_text(LINEAR.format(b=2, k=3, n=4))
    m = dict(exe.manifest)
    m["target"] = dict(m["target"], features=m["target"]["features"] + ",+imaginary-feature")
    with pytest.raises(TargetMismatchError, match="imaginary-feature"):
        Executable.from_object(exe.object_code, m)


@pytest.mark.parametrize("shape,dims,op,init,split", [
    ((600, 500), [0, 1], "add", "0.0", True),          # full reduction
    ((3000, 100), [0], "add", "0.0", True),            # column reduction to few outputs
    ((2, 700, 300), [1, 2], "maximum", "5.0", True),   # any init is fine for max
    ((520, 3, 170), [0, 2], "add", "0.0", True),       # reduced dims around a kept one
    ((600, 500), [0, 1], "add", "1.5", False),         # init applied once: not split
])
def test_big_reductions_split_over_threads(shape, dims, op, init, split):
    rt = "f32[" + ",".join(str(s) for i, s in enumerate(shape) if i not in dims) + "]"
    src = f"""module @m
func @main(%arg0: f32[{','.join(map(str, shape))}]) -> ({rt}) {{
  %0 = constant dense<{init}> : f32[]
  %1 = reduce(%arg0, %0) {{dimensions = {dims}}} : {rt} {{
    ^body(%2: f32[], %3: f32[]):
      %4 = {op}(%2, %3) : f32[]
      return(%4)
  }}
  return(%1)
}}
"""
    x = f32(*shape)
    exe = compile_text(src, threads=2)
    assert ("partial" in exe.steps_text) == split
    check(src, [x], rtol=1e-4, atol=1e-2, threads=2)


PROLOGUE = """module @m
func @main(%arg0: f32[{m},{k}], %arg1: f32[{k},{n}]) -> (f32[{m},{n}]) {{
  %0 = fusion(%arg0, %arg1) {{kind = "output"}} : f32[{m},{n}] {{
    ^fused(%1: f32[{m},{k}], %2: f32[{k},{n}]):
      %3 = constant dense<-inf> : f32[]
      %4 = reduce(%1, %3) {{dimensions = [1]}} : f32[{m}] {{
        ^body(%5: f32[], %6: f32[]):
          %7 = maximum(%5, %6) : f32[]
          return(%7)
      }}
      %8 = broadcast_in_dim(%4) {{broadcast_dimensions = [0]}} : f32[{m},{k}]
      %9 = subtract(%1, %8) : f32[{m},{k}]
      %10 = exponential(%9) : f32[{m},{k}]
      %11 = constant dense<0.0> : f32[]
      %12 = reduce(%10, %11) {{dimensions = [1]}} : f32[{m}] {{
        ^body(%13: f32[], %14: f32[]):
          %15 = add(%13, %14) : f32[]
          return(%15)
      }}
      %16 = broadcast_in_dim(%12) {{broadcast_dimensions = [0]}} : f32[{m},{k}]
      %17 = divide(%10, %16) : f32[{m},{k}]
      %18 = dot_general(%17, %2) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{m},{n}]
      %19 = tanh(%18) : f32[{m},{n}]
      return(%19)
  }}
  return(%0)
}}
"""


def test_row_prologue_of_a_dot_operand_is_one_kernel():
    src = PROLOGUE.format(m=70, k=50, n=30)
    check(src, [f32(70, 50), f32(50, 30)], rtol=1e-5, atol=1e-6)
    exe = compile_text(src)
    assert "row-wise prologue" in exe.steps_text
    assert len(exe.kernels) == 2  # the softmax rows, then the GEMM with its epilogue


def test_large_outputs_recycle_memory_once_dropped():
    src = LOOP.replace("64,48", "1024,512").replace("f32[48]", "f32[512]").replace("%3: f32[48]", "%3: f32[512]")
    exe = compile_text(src)
    a = [f32(1024, 512), f32(512)]
    first = exe.run(a)
    ref = [o.copy() for o in first]
    addrs = {o.ctypes.data for o in first}
    del first  # the caller drops the outputs: their memory goes back to the pool
    again = exe.run(a)
    assert {o.ctypes.data for o in again} == addrs
    for o, r in zip(again, ref):
        np.testing.assert_array_equal(o, r)
        assert o.flags.c_contiguous and o.flags.writeable
    kept = exe.run(a)  # outputs still alive are never handed out twice
    assert not ({o.ctypes.data for o in kept} & {o.ctypes.data for o in again})


@pytest.mark.parametrize("rows,cols,pooled", [(128, 512, True), (128, 48, False), (2, 512, False)])
def test_several_medium_outputs_recycle_memory_too(rows, cols, pooled):
    """Two outputs of 128 x 48 f32 (24 KiB each, 48 KiB a call) are plain arrays; two of
    128 x 512 (256 KiB each) come from the pool: freed together they exceed glibc's trim
    threshold, so malloc returned their pages after every call and the next call faulted them
    in again (129 us a call instead of 8). Results match the interpreter's either way."""
    from hlo.runtime import output_pool
    src = LOOP.replace("64,48", f"{rows},{cols}").replace("f32[48]", f"f32[{cols}]")
    a = [f32(rows, cols), f32(cols)]
    check(src, a, rtol=2e-6, atol=1e-6)
    exe = compile_text(src)
    first = exe.run(a)
    assert all(isinstance(o.base, output_pool._Block) for o in first) == pooled
    addrs = {o.ctypes.data for o in first}
    del first
    if pooled:
        assert {o.ctypes.data for o in exe.run(a)} == addrs


def test_call_threshold():
    from hlo.runtime.output_pool import CALL_MIN_BYTES, MIN_BYTES, PAGE, call_threshold
    assert call_threshold([CALL_MIN_BYTES]) == MIN_BYTES            # one output: malloc keeps it
    assert call_threshold([CALL_MIN_BYTES // 2] * 2) == PAGE          # two that total the limit
    assert call_threshold([CALL_MIN_BYTES, 8]) == MIN_BYTES           # a scalar beside it
    assert call_threshold([PAGE - 1] * 100) == MIN_BYTES              # small ones never
