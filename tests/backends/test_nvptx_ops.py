"""The seam between the shared LLVM emitter and a GPU target, proven without a GPU: every op
of the op table that the elemental emitter computes, with a small representative type (f32,
f64, narrow floats, integers and pred where the op takes them), is emitted into an NVPTX module
(math through libdevice), compiled to PTX in a subprocess (an LLVM abort such as "Cannot
select" fails the test instead of killing the run), assembled by ``ptxas -arch=sm_90``, and
must call no external function (libdevice is linked in). Ops the elemental emitter does not
compute by design are listed with the reason; a new op of the table must be added to one of
the two lists. Skips when ptxas or libdevice is absent."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hlo.ir import ops as op_table
from hlo.ir.types import BY_NAME, TensorType

nvptx = pytest.importorskip("hlo.backends.nvptx")
REPO = Path(__file__).resolve().parents[2]
ARCH = "sm_90"

# Ops computed outside the elemental emitter, by design: whole-array kernels of a target's
# KernelEmitter, or control flow and regions that the shared lowering turns into steps.
NOT_ELEMENTAL = {
    "sort": "a whole-array kernel (KernelEmitter.sort)",
    "scatter": "a whole-array kernel (KernelEmitter.scatter)",
    "while": "control flow: a While step of the lowering",
    "if": "control flow: a Switch step of the lowering",
    "case": "control flow: a Switch step of the lowering",
    "call": "inlined by the lowering (nested steps)",
    "fusion": "a region the lowering splits into kernels",
    "optimization_barrier": "no computation: copies of the lowering",
    "host_callback": "a call back into the Python host (a HostCall step); GPU targets decline it",
    **{name: "a collective: a HostCall step into the CPU runtime's devices; GPU targets decline it"
       for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
                    "collective_broadcast", "replica_id", "partition_id")},
    "run_parallel": "the interpreter's grid of programs; compiled targets decline it",
}

PROBE_TYPES = ("pred", "s8", "s32", "s64", "u8", "u32", "f16", "bf16", "f32", "f64", "c64", "s4",
               "f8e5m2")


def _accepts(name: str, n: int):
    """The probe element types the op table accepts for an elementwise op."""
    d = op_table.get(name)
    out = []
    for et in PROBE_TYPES:
        try:
            d.infer([TensorType((4,), BY_NAME[et])] * n, {}, [])
        except Exception:
            continue
        out.append(et)
    return out


def _elementwise_cases():
    cases = []
    for name in op_table.UNARY_ELEMENTWISE:
        for et in _accepts(name, 1):
            rt = "pred" if name == "is_finite" else (
                BY_NAME[et].component.name if name == "abs" else et)
            cases.append((name, f"func @main(%arg0: {et}[5]) -> ({rt}[5]) {{\n"
                                f"  %0 = {name}(%arg0) : {rt}[5]\n  return(%0)\n}}"))
    for name in op_table.BINARY_ELEMENTWISE:
        for et in _accepts(name, 2):
            cases.append((name, f"func @main(%arg0: {et}[5], %arg1: {et}[5]) -> ({et}[5]) {{\n"
                                f"  %0 = {name}(%arg0, %arg1) : {et}[5]\n  return(%0)\n}}"))
    return cases


def _one(name, args, body, result):
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(args))
    return name, f"func @main({params}) -> ({result}) {{\n{body}\n}}"


_REDUCE = """  %0 = constant dense<{init}> : {et}[]
  %1 = reduce(%arg0, %0) {{dimensions = [1]}} : {et}[3] {{
    ^body(%2: {et}[], %3: {et}[]):
      %4 = {op}(%2, %3) : {et}[]
      return(%4)
  }}
  return(%1)"""

OTHER_CASES = [
    _one("reduce_precision", ["f32[5]"], "  %0 = reduce_precision(%arg0) {exponent_bits = 5, mantissa_bits = 10} : f32[5]\n  return(%0)", "f32[5]"),
    _one("reduce_precision", ["f64[5]"], "  %0 = reduce_precision(%arg0) {exponent_bits = 8, mantissa_bits = 0} : f64[5]\n  return(%0)", "f64[5]"),
    *[_one("compare", [f"{et}[5]", f"{et}[5]"],
           f'  %0 = compare(%arg0, %arg1) {{comparison_direction = "{d}"{ct}}} : pred[5]\n  return(%0)', "pred[5]")
      for et, d, ct in [("f32", "GT", ""), ("f64", "NE", ""), ("f32", "LT", ', compare_type = "TOTALORDER"'),
                        ("bf16", "GE", ""), ("s32", "LE", ""), ("u32", "LT", ""), ("pred", "EQ", "")]],
    *[_one("select", ["pred[5]", f"{et}[5]", f"{et}[5]"], f"  %0 = select(%arg0, %arg1, %arg2) : {et}[5]\n  return(%0)", f"{et}[5]")
      for et in ("f32", "f64", "s64", "pred")],
    *[_one("clamp", [f"{et}[]", f"{et}[5]", f"{et}[]"], f"  %0 = clamp(%arg0, %arg1, %arg2) : {et}[5]\n  return(%0)", f"{et}[5]")
      for et in ("f32", "f64", "s32", "u8")],
    *[_one("convert", [f"{a}[5]"], f"  %0 = convert(%arg0) : {b}[5]\n  return(%0)", f"{b}[5]")
      for a, b in [("f32", "s32"), ("f64", "u8"), ("f32", "s64"), ("s32", "f32"), ("u64", "f64"),
                   ("f32", "bf16"), ("f64", "f16"), ("s64", "bf16"), ("pred", "f32"), ("f64", "pred"),
                   ("s64", "s8"), ("u8", "s32"), ("f16", "f64")]],
    *[_one("bitcast_convert", [f"{a}[5]"], f"  %0 = bitcast_convert(%arg0) : {b}[5]\n  return(%0)", f"{b}[5]")
      for a, b in [("f32", "s32"), ("f64", "u64"), ("bf16", "s16"), ("s32", "f32")]],
    _one("complex", ["f32[5]", "f32[5]"], "  %0 = complex(%arg0, %arg1) : c64[5]\n  return(%0)", "c64[5]"),
    _one("real", ["c128[5]"], "  %0 = real(%arg0) : f64[5]\n  return(%0)", "f64[5]"),
    _one("imag", ["c64[5]"], "  %0 = imag(%arg0) : f32[5]\n  return(%0)", "f32[5]"),
    _one("dot_general", ["c64[3,4]", "c64[4,2]"], "  %0 = dot_general(%arg0, %arg1) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : c64[3,2]\n  return(%0)", "c64[3,2]"),
    _one("convert", ["f8e4m3fn[5]"], "  %0 = convert(%arg0) : c128[5]\n  return(%0)", "c128[5]"),
    _one("constant", ["f32[2]"], "  %0 = constant dense<[1.5, -2.0]> : f32[2]\n  %1 = add(%arg0, %0) : f32[2]\n  return(%1)", "f32[2]"),
    _one("iota", [], "  %0 = iota() {iota_dimension = 1} : s32[4,3]\n  return(%0)", "s32[4,3]"),
    _one("iota", [], "  %0 = iota() {iota_dimension = 0} : f64[4,3]\n  return(%0)", "f64[4,3]"),
    _one("broadcast_in_dim", ["f32[3,1]"], "  %0 = broadcast_in_dim(%arg0) {broadcast_dimensions = [0, 1]} : f32[3,4]\n  return(%0)", "f32[3,4]"),
    _one("reshape", ["f64[3,4]"], "  %0 = reshape(%arg0) : f64[2,6]\n  return(%0)", "f64[2,6]"),
    _one("transpose", ["s8[3,4,2]"], "  %0 = transpose(%arg0) {permutation = [2, 0, 1]} : s8[2,3,4]\n  return(%0)", "s8[2,3,4]"),
    _one("reverse", ["f32[3,4]"], "  %0 = reverse(%arg0) {dimensions = [0, 1]} : f32[3,4]\n  return(%0)", "f32[3,4]"),
    _one("slice", ["f32[6,7]"], "  %0 = slice(%arg0) {limit_indices = [6, 7], start_indices = [1, 0], strides = [3, 3]} : f32[2,3]\n  return(%0)", "f32[2,3]"),
    _one("dynamic_slice", ["f32[6,7]", "s64[]", "s64[]"], "  %0 = dynamic_slice(%arg0, %arg1, %arg2) {slice_sizes = [3, 4]} : f32[3,4]\n  return(%0)", "f32[3,4]"),
    _one("dynamic_update_slice", ["f64[6,7]", "f64[2,7]", "s32[]", "s32[]"], "  %0 = dynamic_update_slice(%arg0, %arg1, %arg2, %arg3) : f64[6,7]\n  return(%0)", "f64[6,7]"),
    _one("concatenate", ["f32[6,7]", "f32[2,7]"], "  %0 = concatenate(%arg0, %arg1) {dimension = 0} : f32[8,7]\n  return(%0)", "f32[8,7]"),
    _one("pad", ["f32[6,7]", "f32[]"], "  %0 = pad(%arg0, %arg1) {edge_padding_high = [-1, 2], edge_padding_low = [2, -1], interior_padding = [1, 0]} : f32[12,8]\n  return(%0)", "f32[12,8]"),
    _one("gather", ["f32[3,4,2]", "s32[2,2]"], "  %0 = gather(%arg0, %arg1) {collapsed_slice_dims = [0], index_vector_dim = 1, offset_dims = [1, 2], slice_sizes = [1, 4, 2], start_index_map = [0, 2]} : f32[2,4,2]\n  return(%0)", "f32[2,4,2]"),
    *[_one("reduce", [f"{et}[3,4]"], _REDUCE.format(et=et, op=op, init=init), f"{et}[3]")
      for et, op, init in [("f32", "add", "0.0"), ("f64", "maximum", "-inf"), ("f32", "minimum", "inf"),
                           ("s32", "add", "0"), ("pred", "and", "true"), ("bf16", "add", "0.0")]],
    _one("reduce_window", ["f32[2,9,8]"], """  %0 = constant dense<-inf> : f32[]
  %1 = reduce_window(%arg0, %0) {padding = [[0, 0], [1, 1], [0, 1]], window_dimensions = [1, 3, 3], window_strides = [1, 2, 2]} : f32[2,5,4] {
    ^body(%2: f32[], %3: f32[]):
      %4 = maximum(%2, %3) : f32[]
      return(%4)
  }
  return(%1)""", "f32[2,5,4]"),
    *[_one("dot_general", [f"{et}[2,3,4]", f"{et}[2,4,5]"],
           f"  %0 = dot_general(%arg0, %arg1) {{lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]}} : {rt}[2,3,5]\n  return(%0)", f"{rt}[2,3,5]")
      for et, rt in [("f32", "f32"), ("f64", "f64"), ("bf16", "f32"), ("s32", "s32")]],
    _one("convolution", ["f32[2,3,7,6]", "f32[4,3,3,2]"], "  %0 = convolution(%arg0, %arg1) {input_batch_dimension = 0, input_feature_dimension = 1, input_spatial_dimensions = [2, 3], kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0, kernel_spatial_dimensions = [2, 3], output_batch_dimension = 0, output_feature_dimension = 1, output_spatial_dimensions = [2, 3], padding = [[1, 1], [0, 1]], window_strides = [2, 2], rhs_dilation = [1, 2]} : f32[2,4,4,3]\n  return(%0)", "f32[2,4,4,3]"),
]


def all_cases():
    return _elementwise_cases() + OTHER_CASES


def emit_module(op_name: str, texts) -> str:
    """One NVPTX module with a kernel per case: thread i computes element i (row-major) of
    ``main``'s result with the shared elemental emitter."""
    import llvmlite.ir as ir

    from hlo.backends.elemental import BufferSource, ElementalEmitter
    from hlo.backends.llvm_util import I64, PTR, elem_ptr, i64, store_reg
    from hlo.ir import parse_module
    from hlo.runtime.cuda.target import CudaTarget
    target = CudaTarget.for_arch(ARCH)
    ctx = nvptx.module_context(op_name, target)
    for k, text in enumerate(texts):
        main = parse_module("module @m\n" + text + "\n").main
        (out,) = main.body.outputs
        t = out.type
        fn = nvptx.kernel(ctx, f"k{k}", [PTR] * (len(main.args) + 1))
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        sreg = lambda r: b.zext(nvptx.thread_index(ctx, b, r), I64)
        i = b.add(b.mul(sreg("ctaid"), sreg("ntid")), sreg("tid"))
        with b.if_then(b.icmp_signed("<", i, i64(t.size))):
            idx, rem = [None] * t.rank, i
            for d in reversed(range(t.rank)):
                idx[d] = b.urem(rem, i64(t.shape[d]))
                rem = b.udiv(rem, i64(t.shape[d]))
            em = ElementalEmitter(ctx, b, {a: BufferSource(fn.args[j], a.type) for j, a in enumerate(main.args)})
            v = em.at(out, idx)
            store_reg(b, v, elem_ptr(b, fn.args[-1], t.dtype, i), t.dtype)
        b.ret_void()
    return str(ctx.module)


# Run in a subprocess: compile each module to PTX, one after the other, writing each PTX file
# before starting the next, so a crash names its module.
_COMPILER = """
import json, sys
from hlo.backends import nvptx
from hlo.runtime.cuda.target import CudaTarget
target = CudaTarget.for_arch(sys.argv[2])
for name, ll, out in json.load(open(sys.argv[1])):
    print("compiling", name, flush=True)
    ptx, _ = nvptx.compile_ptx(open(ll).read(), target)
    open(out, "w").write(ptx)
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    if nvptx.find_ptxas() is None or nvptx.find_libdevice() is None:
        pytest.skip("ptxas or libdevice is not installed")
    d = tmp_path_factory.mktemp("nvptx")
    by_op = {}
    for name, text in all_cases():
        by_op.setdefault(name, []).append(text)
    jobs = []
    for name, texts in by_op.items():
        ll = d / f"{name}.ll"
        ll.write_text(emit_module(name, texts))
        jobs.append((name, str(ll), str(d / f"{name}.ptx")))
    (d / "jobs.json").write_text(json.dumps(jobs))
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", _COMPILER, str(d / "jobs.json"), ARCH],
                       capture_output=True, text=True, env=env, timeout=600)
    done = {name: Path(out).read_text() for name, _, out in jobs if Path(out).exists()}
    crashed = None
    if p.returncode != 0:
        started = [ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("compiling ")]
        crashed = (started[-1] if started else "?", p.returncode, p.stderr[-3000:])
    return by_op, done, crashed


def test_every_op_is_covered_or_excluded_with_a_reason():
    covered = {name for name, _ in all_cases()}
    assert not covered & set(NOT_ELEMENTAL)
    assert set(op_table.OPS) == covered | set(NOT_ELEMENTAL), \
        sorted(set(op_table.OPS) - covered - set(NOT_ELEMENTAL))


def test_elementwise_cases_cover_float_int_and_pred_where_taken():
    types = {}
    for name, text in _elementwise_cases():
        types.setdefault(name, set()).add(text.split(": ", 1)[1].split("[", 1)[0])
    assert {"f32", "f64"} <= types["sine"] and {"f32", "f64"} <= types["power"]
    assert {"s32", "u8", "f32", "f64"} <= types["divide"] and "pred" in types["and"]


def test_every_op_compiles_to_ptx_that_ptxas_accepts(compiled):
    by_op, done, crashed = compiled
    assert crashed is None, f"LLVM died compiling the '{crashed[0]}' kernels (status {crashed[1]}):\n{crashed[2]}"
    failures = []
    for name in by_op:
        ptx = done[name]
        ext = nvptx.unresolved_calls(ptx)
        if ext:
            failures.append(f"{name}: calls external functions {ext}")
            continue
        try:
            nvptx.ptxas_check(ptx, ARCH)
        except nvptx.PtxasError as e:
            failures.append(f"{name}: {e}")
    assert not failures, "\n".join(failures)


def test_libdevice_is_linked_only_when_called(compiled):
    by_op, done, _ = compiled
    assert "__nv_" not in done.get("add", "") and ".extern" not in done.get("add", "")
    # sin has no polynomial of hlo's own on the GPU: libdevice's, linked and inlined
    assert "sine" in done and ".extern" not in done["sine"] and "__nv_sinf" not in done["sine"].split(".entry")[0].replace(".visible", "")
