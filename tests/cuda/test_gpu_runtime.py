"""The CUDA runtime on a GPU (marked ``gpu``: skipped without one): PTX kernels through
CudaExecutable with launches, copies, constants, the arena, while and switch; cuBLASLt
matrix products against numpy in float64; DLPack / CUDA-array-interface exchange with torch,
jax and cupy; donation; out-of-memory and launch errors that leave the executable usable."""
import os
import shutil
import subprocess
import tempfile
import threading

import ml_dtypes
import numpy as np
import pytest

from hlo.backends.cuda.gemm import plan_dot
from hlo.ir.types import BY_NAME, TensorType
from hlo.runtime.signature import ArgumentError
from hlo.runtime.steps import BufRef, Copy, Launch, Switch, While, steps_to_json

pytestmark = pytest.mark.gpu

N = 1000
BLOCK = 128
GRID = ((N + BLOCK - 1) // BLOCK, 1, 1)


@pytest.fixture(scope="module")
def ptx():
    from cuda_test_kernels import ptx as make
    return make()


def sig(dtype, shape, layout=None):
    d = {"dtype": dtype, "shape": list(shape)}
    if layout is not None:
        d["layout"] = list(layout)
    return d


def make_exe(code, steps, inputs, outputs, arena=0, consts=(), aliases=(), kernels=None, graphs=None):
    from cuda_test_kernels import NAMES

    from hlo.runtime.cuda import CudaExecutable, encode_constants
    m = {"format": 1, "target": {"name": "cuda", "arch": "sm_90"}, "name": "test executable",
         "inputs": inputs, "outputs": outputs, "arena_size": arena,
         "constants": encode_constants(consts), "kernels": NAMES if kernels is None else kernels,
         "steps": steps_to_json(steps), "aliases": [list(a) for a in aliases]}
    return CudaExecutable(code, m, graphs=graphs)


def ref(kind, index, nbytes, offset=0):
    return BufRef(kind, index, offset, nbytes)


def launch(name, refs, scalars=(), grid=GRID, block=(BLOCK, 1, 1), what=""):
    return Launch(name, list(refs), [False] * (len(refs) - 1) + [True], grid, block, 0,
                  list(scalars), what)


NB = N * 4
X, OUT0, OUT1, OUT2 = ref("input", 0, NB), ref("output", 0, NB), ref("output", 1, NB), ref("output", 2, NB)


def test_launch_copy_constant_arena(ptx):
    c = np.linspace(-1, 1, N).astype(np.float32)
    t = ref("arena", 0, NB, 256)
    steps = [launch("add_one", [X, t], [("i32", N)], what="fusion.0"),
             launch("add", [t, ref("const", 0, NB), OUT0], [("i32", N)]),
             launch("scale", [X, OUT1], [("i32", N), ("f32", 2.5)]),
             Copy(OUT2, X, NB)]
    exe = make_exe(ptx, steps, [sig("f32", [N])], [sig("f32", [N])] * 3, arena=256 + NB, consts=[c.tobytes()])
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    o0, o1, o2 = exe(x)
    np.testing.assert_array_equal(np.asarray(o0), x + 1 + c)
    np.testing.assert_array_equal(np.asarray(o1), x * np.float32(2.5))
    np.testing.assert_array_equal(np.asarray(o2), x)
    # a result feeds the next call in place (no host round trip)
    again = exe(o0)[0]
    np.testing.assert_array_equal(np.asarray(again), x + 1 + c + 1 + c)
    assert "DeviceArray(" in repr(o1) and o1.shape == (N,) and o1.dtype == np.float32


def test_while_and_switch(ptx):
    cnt, pred = ref("arena", 0, 4), ref("arena", 0, 1, 64)
    k = ref("input", 1, 4)
    steps = [Copy(OUT0, X, NB),
             launch("zero_i32", [cnt], grid=(1, 1, 1), block=(1, 1, 1)),
             While([launch("lt_i32", [cnt, k, pred], grid=(1, 1, 1), block=(1, 1, 1))], pred,
                   [launch("add_one", [OUT0, OUT0], [("i32", N)]),
                    launch("inc_i32", [cnt], grid=(1, 1, 1), block=(1, 1, 1))]),
             Switch(k, False, [[launch("scale", [OUT0, OUT0], [("i32", N), ("f32", 2.0)])],
                               [launch("add_one", [OUT0, OUT0], [("i32", N)])],
                               []]),
             Switch(ref("input", 2, 1), True, [[launch("scale", [OUT0, OUT0], [("i32", N), ("f32", -1.0)])], []])]
    exe = make_exe(ptx, steps, [sig("f32", [N]), sig("s32", []), sig("pred", [])], [sig("f32", [N])], arena=128)
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    for kk in (-2, 0, 1, 2, 5):
        for p in (True, False):
            want = x.copy()
            for _ in range(max(kk, 0)):  # one f32 rounding per loop trip, as on the GPU
                want = want + np.float32(1)
            want = want * np.float32(2) if kk == 0 else want + np.float32(1) if kk == 1 else want
            want = -want if p else want
            got = exe(x, np.int32(kk), np.bool_(p))[0]
            np.testing.assert_array_equal(np.asarray(got), want.astype(np.float32), err_msg=f"k={kk} p={p}")


def test_cubin_and_layouts(ptx):
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if not os.path.exists(ptxas):
        pytest.skip("no ptxas")
    with tempfile.TemporaryDirectory() as d:
        open(os.path.join(d, "k.ptx"), "w").write(ptx)
        subprocess.run([ptxas, "-arch=sm_90", os.path.join(d, "k.ptx"), "-o", os.path.join(d, "k.cubin")], check=True)
        cubin = open(os.path.join(d, "k.cubin"), "rb").read()
    # a column-major [40, 25] input and result: the elementwise kernel runs on the physical order
    exe = make_exe(cubin, [launch("add_one", [X, OUT0], [("i32", N)])],
                   [sig("f32", [40, 25], [0, 1])], [sig("f32", [40, 25], [0, 1])])
    x = np.random.default_rng(2).standard_normal((40, 25)).astype(np.float32)
    out = exe(x)[0]
    assert out.strides == (4, 160)
    np.testing.assert_array_equal(np.asarray(out), x + 1)


def test_bad_ptx_shows_the_jit_log():
    from hlo.runtime.cuda import driver
    from hlo.runtime.cuda.errors import CudaError
    from hlo.runtime.cuda.module import Module
    bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus.instr; ret; }\n"
    with pytest.raises(CudaError) as e:
        Module(driver.get_context(0), bad)
    assert "cuModuleLoadDataEx" in str(e.value) and "JIT log" in str(e.value), str(e.value)


def test_argument_errors(ptx):
    exe = make_exe(ptx, [launch("add_one", [X, OUT0], [("i32", N)])], [sig("f32", [N])], [sig("f32", [N])])
    with pytest.raises(ArgumentError, match="expected 1 argument"):
        exe()
    with pytest.raises(ArgumentError, match=r"expected f32\[1000\], got float64"):
        exe(np.zeros(N))
    with pytest.raises(ArgumentError, match=r"got float32\[999\]"):
        exe(np.zeros(N - 1, np.float32))


def test_launch_failure_names_the_kernel_and_the_executable_stays_usable(ptx):
    from hlo.runtime.cuda.errors import KernelLaunchError
    bad = launch("add_one", [X, OUT0], [("i32", N)], grid=(1, 1, 1), block=(4096, 1, 1), what="fusion.bad")
    steps = [Switch(ref("input", 1, 4), False, [[bad], [launch("add_one", [X, OUT0], [("i32", N)])]])]
    exe = make_exe(ptx, steps, [sig("f32", [N]), sig("s32", [])], [sig("f32", [N])])
    x = np.ones(N, np.float32)
    with pytest.raises(KernelLaunchError, match=r"add_one \(fusion.bad\).*block \(4096, 1, 1\)"):
        exe(x, np.int32(0))
    np.testing.assert_array_equal(np.asarray(exe(x, np.int32(1))[0]), x + 1)


@pytest.mark.whole_gpu  # another test process sharing the GPU meanwhile could not allocate
def test_out_of_memory_then_usable(ptx):
    from hlo.runtime.cuda import driver
    from hlo.runtime.cuda.errors import CudaOutOfMemoryError
    ctx = driver.get_context(0)
    with pytest.raises(CudaOutOfMemoryError, match="arena"):
        make_exe(ptx, [], [sig("f32", [N])], [sig("f32", [N])], arena=1 << 50)
    big = 1 << 28  # 1 GiB of f32
    exe = make_exe(ptx, [launch("add_one", [X, ref("output", 0, NB)], [("i32", N)])],
                   [sig("f32", [N])], [sig("f32", [big])])
    x = np.ones(N, np.float32)
    exe(x)[0].block_until_ready()
    exe._pool.clear()  # the dropped result's buffer, kept by the executable for reuse
    exe.synchronize()
    ctx.trim_pool()  # the driver's pool keeps freed memory for reuse: give it back to the OS
    free, _ = ctx.mem_info()
    hog = ctx.alloc(free - (512 << 20))  # leave 512 MiB: the 1 GiB result cannot fit
    try:
        with pytest.raises(CudaOutOfMemoryError, match=r"result 0 \(f32\[268435456\]\)") as e:
            exe(x)
        assert "free of" in str(e.value)
    finally:
        ctx.free(hog)
    out = exe(x)[0]
    np.testing.assert_array_equal(np.asarray(out)[:N], x + 1)


def test_donation_reuses_the_buffer(ptx):
    exe = make_exe(ptx, [launch("add_one", [X, X], [("i32", N)])], [sig("f32", [N])], [sig("f32", [N])],
                   aliases=[(0, 0)])
    x = np.arange(N, dtype=np.float32)
    a = exe(x)[0]  # numpy: the staging copy becomes the result
    np.testing.assert_array_equal(np.asarray(a), x + 1)
    ptr = a.device_ptr
    b = exe(a)[0]
    assert b.device_ptr == ptr and a.is_deleted()
    with pytest.raises(RuntimeError, match="donated"):
        np.asarray(a)
    np.testing.assert_array_equal(np.asarray(b), x + 2)


def test_concurrent_callers_get_their_own_arena(ptx):
    t = ref("arena", 0, NB)
    exe = make_exe(ptx, [launch("add_one", [X, t], [("i32", N)]), launch("scale", [t, OUT0], [("i32", N), ("f32", 3.0)])],
                   [sig("f32", [N])], [sig("f32", [N])], arena=NB)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x = rng.standard_normal(N).astype(np.float32)
            got = np.asarray(exe(x)[0])
            if not np.array_equal(got, (x + 1) * np.float32(3)):
                errors.append(seed)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


# -- cuBLASLt ----------------------------------------------------------------------------------

def T(shape, dtype, layout=None):
    return TensorType(tuple(shape), BY_NAME[dtype], layout)


def dims(lb=(), rb=(), lc=(), rc=()):
    return {"lhs_batching_dimensions": lb, "rhs_batching_dimensions": rb,
            "lhs_contracting_dimensions": lc, "rhs_contracting_dimensions": rc}


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


MATMULS = [
    # (lhs shape, rhs shape, dims, dtype, out dtype, precision, epilogue, tolerance)
    ((128, 256), (256, 64), dims(lc=(1,), rc=(0,)), "f32", "f32", None, "DEFAULT", 1e-5),
    ((37, 53), (53, 29), dims(lc=(1,), rc=(0,)), "f32", "f32", None, "DEFAULT", 1e-5),
    ((37, 53), (29, 53), dims(lc=(1,), rc=(1,)), "f32", "f32", None, "DEFAULT", 1e-5),
    ((53, 37), (53, 29), dims(lc=(0,), rc=(0,)), "f32", "f32", None, "DEFAULT", 1e-5),
    ((8, 64, 32), (8, 32, 48), dims((0,), (0,), (2,), (1,)), "f32", "f32", None, "DEFAULT", 1e-5),
    ((512, 512), (512, 512), dims(lc=(1,), rc=(0,)), "f32", "f32", "tf32", "DEFAULT", 3e-3),
    ((256, 384), (384, 128), dims(lc=(1,), rc=(0,)), "bf16", "bf16", None, "DEFAULT", 1e-2),
    ((256, 384), (384, 128), dims(lc=(1,), rc=(0,)), "bf16", "f32", None, "DEFAULT", 1e-2),
    ((4, 96, 64), (4, 64, 80), dims((0,), (0,), (2,), (1,)), "f16", "f16", None, "DEFAULT", 1e-2),
    ((64, 96), (96, 128), dims(lc=(1,), rc=(0,)), "f32", "f32", None, "BIAS", 1e-5),
    ((64, 96), (96, 128), dims(lc=(1,), rc=(0,)), "f32", "f32", None, "RELU_BIAS", 1e-5),
    ((64, 96), (96, 128), dims(lc=(1,), rc=(0,)), "bf16", "bf16", None, "GELU_BIAS", 1e-2),
    ((64, 96), (96, 128), dims(lc=(1,), rc=(0,)), "f32", "f32", None, "GELU", 1e-5),
    ((16, 24), (24, 8), dims(lc=(1,), rc=(0,)), "f64", "f64", None, "DEFAULT", 1e-12),
]


def _gemm_exe(ptx, lhs, rhs, out, plan, bias=None):
    refs = [ref("input", 0, lhs.nbytes), ref("input", 1, rhs.nbytes)]
    ins = [sig(lhs.dtype.name, lhs.shape), sig(rhs.dtype.name, rhs.shape)]
    b = None
    if bias is not None:
        b = ref("input", 2, bias.nbytes)
        ins.append(sig(bias.dtype.name, bias.shape))
    step = plan.library_call(refs[0], refs[1], ref("output", 0, out.nbytes), bias=b, what="dot.1")
    return make_exe(ptx, [step], ins, [sig(out.dtype.name, out.shape)])


@pytest.mark.parametrize("case", range(len(MATMULS)))
def test_cublaslt_matmul(ptx, case):
    ls, rs, d, dt, odt, prec, epi, tol = MATMULS[case]
    lhs, rhs = T(ls, dt), T(rs, dt)
    lb, lc = d["lhs_batching_dimensions"], d["lhs_contracting_dimensions"]
    rb, rc = d["rhs_batching_dimensions"], d["rhs_contracting_dimensions"]
    oshape = [ls[i] for i in lb] + [s for i, s in enumerate(ls) if i not in lb + lc] + \
        [s for i, s in enumerate(rs) if i not in rb + rc]
    out = T(oshape, odt)
    rng = np.random.default_rng(case)
    x = rng.standard_normal(ls).astype(lhs.dtype.np_dtype)
    y = rng.standard_normal(rs).astype(rhs.dtype.np_dtype)
    bias = bias_t = None
    if "BIAS" in epi:
        bias = rng.standard_normal(oshape[-1]).astype(out.dtype.np_dtype)
        bias_t = T(bias.shape, odt)
    plan = plan_dot(lhs, rhs, out, d, precision=prec, epilogue=epi, bias=bias_t,
                    bias_dim=len(oshape) - 1 if bias is not None else None)
    assert plan, plan
    exe = _gemm_exe(ptx, lhs, rhs, out, plan, bias_t)
    got = np.asarray(exe(x, y, *([bias] if bias is not None else []))[0]).astype(np.float64)
    xs = x.astype(np.float64).transpose(list(lb) + [i for i in range(len(ls)) if i not in lb + lc] + list(lc))
    ys = y.astype(np.float64).transpose(list(rb) + list(rc) + [i for i in range(len(rs)) if i not in rb + rc])
    want = np.matmul(xs, ys)
    if bias is not None:
        want = want + bias.astype(np.float64)
    want = np.maximum(want, 0) if "RELU" in epi else gelu(want) if "GELU" in epi else want
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"matmul {ls}x{rs} {dt}->{odt} {prec or 'highest'} {epi}: rel err {err:.2e}")
    assert err < tol, err


def test_cublaslt_enums_match_the_header():
    import re

    from cuda.pathfinder import find_nvidia_header_directory, load_nvidia_dynamic_lib

    from hlo.runtime.cuda import cublaslt
    dirs = [os.path.join(os.path.dirname(os.path.dirname(load_nvidia_dynamic_lib("cublasLt").abs_path)), "include"),
            "/usr/local/cuda/include"]
    try:
        dirs.insert(0, find_nvidia_header_directory("cublas"))
    except Exception:
        pass
    text = ""
    for name in ("cublasLt.h", "cublas_api.h", "library_types.h"):
        for d in dirs:
            if d and os.path.exists(os.path.join(d, name)):
                text += open(os.path.join(d, name)).read()
                break
    if "cublasLtMatmul" not in text:
        pytest.skip("cublasLt.h not found")
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    values = {}
    for body in re.findall(r"enum\s*\w*\s*\{(.*?)\}", text, flags=re.S):
        nxt = 0
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, expr = item.partition("=")
            name = name.strip()
            if expr.strip():
                e = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: str(values.get(m.group(0), "None")), expr)
                try:
                    nxt = int(eval(e.replace("ull", "").replace("u", ""), {}))
                except Exception:
                    continue
            values[name] = nxt
            nxt += 1
    missing = [k for k in cublaslt.HEADER_ENUMS if k not in values]
    wrong = {k: (v, values[k]) for k, v in cublaslt.HEADER_ENUMS.items() if k in values and values[k] != v}
    assert not wrong, wrong
    assert not missing, missing


# -- exchange with other libraries -------------------------------------------------------------

def _add_one_exe(ptx, aliases=()):
    return make_exe(ptx, [launch("add_one", [X, OUT0], [("i32", N)])], [sig("f32", [N])], [sig("f32", [N])],
                    aliases=aliases)


def test_torch_round_trip(ptx):
    torch = pytest.importorskip("torch")
    exe = _add_one_exe(ptx)
    t = torch.arange(N, dtype=torch.float32, device="cuda") * 2  # produced on torch's stream
    out = exe(t)[0]
    back = torch.from_dlpack(out)
    assert back.data_ptr() == out.device_ptr
    torch.testing.assert_close(back, t + 1)
    t2 = torch.as_tensor(out, device="cuda")  # through __cuda_array_interface__
    torch.testing.assert_close(t2, t + 1)
    # donated torch memory is another library's: copied on the device first (with a
    # DonationWarning), never written; the copy becomes the result
    from hlo.ir.errors import DonationWarning
    exe2 = make_exe(ptx, [launch("add_one", [X, X], [("i32", N)])], [sig("f32", [N])], [sig("f32", [N])],
                    aliases=[(0, 0)])
    u = torch.zeros(N, dtype=torch.float32, device="cuda")
    with pytest.warns(DonationWarning, match="another library"):
        r = exe2(u)[0].block_until_ready()
    assert r.device_ptr != u.data_ptr() and float(u.sum()) == 0
    np.testing.assert_array_equal(np.asarray(r), np.ones(N, np.float32))
    bf = torch.ones(N, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ArgumentError, match="bfloat16"):
        exe(bf)
    with pytest.raises(ArgumentError, match="strides"):
        exe(torch.zeros(2 * N, device="cuda")[::2])


def test_jax_round_trip(ptx):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("jax has no GPU here")
    import jax.numpy as jnp
    exe = _add_one_exe(ptx)
    j = jnp.arange(N, dtype=jnp.float32) * 3
    out = exe(j)[0]
    back = jax.dlpack.from_dlpack(out)
    np.testing.assert_array_equal(np.asarray(back), np.asarray(j) + 1)


def test_cupy_round_trip(ptx):
    cp = pytest.importorskip("cupy")
    exe = _add_one_exe(ptx)
    c = cp.arange(N, dtype=cp.float32) - 5
    out = exe(c)[0]
    np.testing.assert_array_equal(cp.asnumpy(cp.from_dlpack(out)), cp.asnumpy(c) + 1)
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(out)), cp.asnumpy(c) + 1)


def test_bf16_results_through_dlpack(ptx):
    torch = pytest.importorskip("torch")
    lhs, rhs, out = T((32, 16), "bf16"), T((16, 8), "bf16"), T((32, 8), "bf16")
    exe = _gemm_exe(ptx, lhs, rhs, out, plan_dot(lhs, rhs, out, dims(lc=(1,), rc=(0,))))
    a = torch.randn(32, 16, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(16, 8, dtype=torch.bfloat16, device="cuda")
    r = torch.from_dlpack(exe(a, b)[0])
    assert r.dtype == torch.bfloat16
    torch.testing.assert_close(r.float(), (a.float() @ b.float()), rtol=2e-2, atol=2e-2)
    assert np.asarray(exe(a, b)[0]).dtype == ml_dtypes.bfloat16


# -- CUDA graphs against the step walk ---------------------------------------------------------

def _programs():
    """(steps, inputs, outputs, arena bytes, constants, argument maker) of executables that
    exercise every kind of graph node and the control flow that splits segments."""
    c = np.linspace(-1, 1, N).astype(np.float32)
    t, u = ref("arena", 0, NB, 256), ref("arena", 0, NB, 256 + NB)
    f32n = [sig("f32", [N])]
    out = []
    # launches, a constant, the arena, a result -> result copy and an argument -> arena copy
    out.append(([launch("add_one", [X, t], [("i32", N)]), launch("add", [t, ref("const", 0, NB), OUT0], [("i32", N)]),
                 Copy(OUT1, OUT0, NB), launch("scale", [OUT1, OUT1], [("i32", N), ("f32", 2.5)]),
                 Copy(u, X, NB), launch("add", [u, OUT1, OUT2], [("i32", N)])],
                f32n, f32n * 3, 256 + 2 * NB, [c.tobytes()], lambda rng: [rng.standard_normal(N).astype(np.float32)]))
    # ten kernels in a chain
    out.append(([launch("add_one", [X, OUT0], [("i32", N)])] + [launch("add_one", [OUT0, OUT0], [("i32", N)])] * 9,
                f32n, f32n, 0, [], lambda rng: [rng.standard_normal(N).astype(np.float32)]))
    # while and switch around segments
    cnt, pred, k = ref("arena", 0, 4), ref("arena", 0, 1, 64), ref("input", 1, 4)
    out.append(([Copy(OUT0, X, NB), launch("zero_i32", [cnt], grid=(1, 1, 1), block=(1, 1, 1)),
                 While([launch("lt_i32", [cnt, k, pred], grid=(1, 1, 1), block=(1, 1, 1))], pred,
                       [launch("add_one", [OUT0, OUT0], [("i32", N)]), launch("scale", [OUT0, OUT0], [("i32", N), ("f32", 0.5)]),
                        launch("inc_i32", [cnt], grid=(1, 1, 1), block=(1, 1, 1))]),
                 Switch(k, False, [[launch("scale", [OUT0, OUT0], [("i32", N), ("f32", 2.0)]), launch("add_one", [OUT0, OUT0], [("i32", N)])],
                                   [launch("add_one", [OUT0, OUT0], [("i32", N)])], []])],
                [sig("f32", [N]), sig("s32", [])], f32n, 128, [],
                lambda rng: [rng.standard_normal(N).astype(np.float32), np.int32(rng.integers(-1, 4))]))
    # a cuBLASLt product between kernels: an argument, the arena and a result as its operands
    lhs, rhs, prod = T((40, 25), "f32"), T((25, 25), "f32"), T((40, 25), "f32")
    plan = plan_dot(lhs, rhs, prod, dims(lc=(1,), rc=(0,)))
    mm = plan.library_call(t, ref("input", 1, rhs.nbytes), OUT0, what="dot.1")
    out.append(([launch("add_one", [X, t], [("i32", N)]), mm, launch("scale", [OUT0, OUT1], [("i32", N), ("f32", 3.0)])],
                [sig("f32", [40, 25]), sig("f32", [25, 25])], [sig("f32", [40, 25])] * 2, 256 + NB, [],
                lambda rng: [rng.standard_normal((40, 25)).astype(np.float32), rng.standard_normal((25, 25)).astype(np.float32)]))
    return out


@pytest.mark.parametrize("case", range(4))
def test_graphs_match_the_step_walk(ptx, case):
    """The same executable with every run of steps as a CUDA graph (graphs=1) and as a step
    walk (graphs=0): identical results, call after call, with arguments and results at
    new addresses (patched nodes) and at the same ones (no patching)."""
    from hlo.runtime.cuda import DeviceArray
    steps, ins, outs, arena, consts, make_args = _programs()[case]
    walk = make_exe(ptx, steps, ins, outs, arena=arena, consts=consts, graphs=0)
    fast = make_exe(ptx, steps, ins, outs, arena=arena, consts=consts, graphs=1)
    assert not any(r[0] == 5 for r in walk._slots[0].records)
    assert any(r[0] == 5 for r in fast._slots[0].records)
    rng = np.random.default_rng(case)
    kept = []
    for call in range(6):
        args = make_args(rng)
        if call % 2:  # device arguments (a new address each time) instead of numpy ones
            args = [_on_device(ptx, a) for a in args]
        a = [np.asarray(r) for r in walk(*args)]
        res = fast(*args)
        if call < 3:
            kept.append(res)  # kept alive: the next call's results land at other addresses
        b = [np.asarray(r) for r in res]
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y, err_msg=f"call {call}")
        assert all(isinstance(r, DeviceArray) for r in res)


_IDENTITY = {}


def _on_device(ptx, a):
    """``a`` as a DeviceArray (through an executable that copies its argument)."""
    if not np.ndim(a):
        return a
    key = (a.dtype.str, a.shape)
    if key not in _IDENTITY:
        s = [sig(a.dtype.name.replace("float", "f"), a.shape)]
        _IDENTITY[key] = make_exe(ptx, [Copy(ref("output", 0, a.nbytes), ref("input", 0, a.nbytes), a.nbytes)], s, s)
    return _IDENTITY[key](a)[0]


def test_graph_patches_changed_addresses(ptx):
    """Dispatch as a one-node graph: the input and the result move between calls and the node
    follows them; the same input at the same address is patched no more."""
    exe = make_exe(ptx, [launch("add_one", [X, OUT0], [("i32", N)])], [sig("f32", [N])], [sig("f32", [N])], graphs=1)
    xs = [exe(np.full(N, float(i), np.float32))[0] for i in range(4)]
    outs = [exe(x)[0] for x in xs for _ in range(2)]
    for i, o in enumerate(outs):  # xs[j] holds j + 1
        np.testing.assert_array_equal(np.asarray(o), np.full(N, i // 2 + 2, np.float32))
    assert len({o.device_ptr for o in outs}) == len(outs)  # every result kept: all at new addresses
    del outs
    y = exe(xs[0])[0]
    y.block_until_ready()
    ptr = y.device_ptr
    del y
    z = exe(xs[0])[0]  # the dropped result's memory comes back from the pool
    assert z.device_ptr == ptr
    np.testing.assert_array_equal(np.asarray(z), np.full(N, 2, np.float32))


def test_two_threads_calling_one_graph_executable(ptx):
    t = ref("arena", 0, NB)
    steps = [launch("add_one", [X, t], [("i32", N)]), launch("scale", [t, t], [("i32", N), ("f32", 3.0)]),
             launch("add", [t, X, OUT0], [("i32", N)])]
    exe = make_exe(ptx, steps, [sig("f32", [N])], [sig("f32", [N])], arena=NB, graphs=2)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        from hlo.runtime.cuda import driver
        driver.get_context(0)
        pending = []
        for _ in range(60):
            x = rng.standard_normal(N).astype(np.float32)
            dx = exe(x)[0]  # device input, fed back in: args at new addresses every call
            pending.append((x, exe(dx)[0]))
        f = lambda v: (v + np.float32(1)) * np.float32(3) + v
        for x, r in pending:
            want = f(f(x))
            if not np.array_equal(np.asarray(r), want.astype(np.float32)):
                errors.append(seed)
                break
    threads = [threading.Thread(target=work, args=(s,)) for s in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(exe._slots) >= 1


def test_products_at_new_addresses_split_the_segment(ptx):
    """Results kept by the caller put a product's result at a new address every call; after
    CAPTURES_BEFORE_SPLIT captures the segment splits (the product a direct call between
    graphs) and the results stay those of the step walk."""
    from hlo.runtime.cuda.graph import CAPTURES_BEFORE_SPLIT, GRAPH
    steps, ins, outs, arena, consts, make_args = _programs()[3]
    walk = make_exe(ptx, steps, ins, outs, arena=arena, consts=consts, graphs=0)
    fast = make_exe(ptx, steps, ins, outs, arena=arena, consts=consts, graphs=1)
    rng = np.random.default_rng(7)
    kept = []
    for call in range(CAPTURES_BEFORE_SPLIT + 4):
        args = [_on_device(ptx, a) for a in make_args(rng)]
        a, b = walk(*args), fast(*args)
        kept.append((args, a, b))
    for call, (_, a, b) in enumerate(kept):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=f"call {call}")
    segs = [r[1] for r in fast._slots[0].records if r[0] == GRAPH]
    assert segs and all(s._parts is not None for s in segs)


def test_the_driver_pool_keeps_freed_memory_and_a_big_result_reuses_it(ptx):
    """The default pool's release threshold is raised (``Context.keeps_freed_memory``): a result
    bigger than the executable's own BufferPool keeps, dropped between calls, is allocated
    again from what the pool kept, and results stay right."""
    from hlo.runtime.cuda import driver
    assert driver.get_context(0).keeps_freed_memory
    n = 80 << 20  # 320 MiB of f32: above the BufferPool's 256 MiB
    nb = 4 * n
    exe = make_exe(ptx, [launch("add_one", [ref("input", 0, nb), ref("output", 0, nb)], [("i32", n)],
                                grid=((n + BLOCK - 1) // BLOCK, 1, 1))],
                   [sig("f32", [n])], [sig("f32", [n])])
    exe._pool.max_bytes = 256 << 20  # (the executable's own pool would keep it: see below)
    x = np.arange(n, dtype=np.float32) % 1000
    for _ in range(3):
        y = exe(x)[0]
        got = np.asarray(y)
        del y
        np.testing.assert_array_equal(got, x + 1)


def test_a_big_result_comes_back_through_the_executables_pool(ptx):
    """Where the driver's pool keeps freed memory anyway, the executable's BufferPool keeps
    results of up to 1/16 of the device's memory: a dropped 320 MiB result's buffer is the next
    call's result (no driver allocation), and results stay right."""
    from hlo.runtime.cuda import driver
    ctx = driver.get_context(0)
    assert ctx.keeps_freed_memory
    n = 80 << 20
    nb = 4 * n
    exe = make_exe(ptx, [launch("add_one", [ref("input", 0, nb), ref("output", 0, nb)], [("i32", n)],
                                grid=((n + BLOCK - 1) // BLOCK, 1, 1))],
                   [sig("f32", [n])], [sig("f32", [n])])
    assert exe._pool.max_bytes == max(256 << 20, ctx.total_memory // 16) >= nb
    import hlo
    x = np.arange(n, dtype=np.float32) % 1000
    xd = hlo.device_put(x)  # on the device already: no argument copy to allocate
    y = exe(xd)[0]
    ptr = y._buf.ptr
    np.testing.assert_array_equal(np.asarray(y), x + 1)
    held = exe._pool.held
    del y
    assert exe._pool.held == held + nb
    y = exe(xd)[0]
    assert y._buf.ptr == ptr and exe._pool.held == held
    np.testing.assert_array_equal(np.asarray(y), x + 1)
