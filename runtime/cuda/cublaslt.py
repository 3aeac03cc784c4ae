"""A small ctypes binding to cuBLASLt: the matrix products of ``LibraryCall("cublaslt",
"matmul", ...)`` steps.

The library is found in an NVIDIA wheel, by soname, or else with
``cuda.pathfinder.load_nvidia_dynamic_lib("cublasLt")`` (``_open_library``); ``start_loading``
opens it in the background (``hlo.load`` does, for a program with matrix products).
``Lt(ctx)`` is one handle per context.
``Lt.plan(params)`` builds, once per distinct ``MatmulParams`` and pointer alignment, a
``MatmulPlan``: the matmul descriptor (compute / scale type, transposes, epilogue), the four
matrix layouts (column-major; batched strided) and the algorithm cuBLASLt's heuristic picks
for them (with ``HLO_CUBLASLT_AUTOTUNE=1``, the fastest of its candidates on this device,
timed once a process: ``cublaslt_tune``). ``MatmulPlan.run(a, b, c, bias, d, workspace, stream)`` is one ``cublasLtMatmul``.
``params`` is a ``matmul_params.MatmulParams``, which the CUDA backend's planner fills.

Enum values are those of ``cublasLt.h`` / ``cublas_api.h`` / ``library_types.h`` (CUDA 12 and
13 agree on them); ``HEADER_ENUMS`` lists each with its header name, and a GPU test checks them
against the header installed beside the library.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Dict, Optional, Tuple

from . import cublaslt_tune, driver
from .errors import CublasError, CudaUnavailableError
from .matmul_params import MatmulParams, Matrix

# cudaDataType_t (library_types.h)
CUDA_R_16F = 2
CUDA_R_32F = 0
CUDA_R_64F = 1
CUDA_R_16BF = 14
# cublasComputeType_t (cublas_api.h)
CUBLAS_COMPUTE_32F = 68
CUBLAS_COMPUTE_32F_FAST_TF32 = 77
CUBLAS_COMPUTE_32F_FAST_16BF = 75
CUBLAS_COMPUTE_32F_FAST_16F = 74
CUBLAS_COMPUTE_64F = 70
# cublasOperation_t
CUBLAS_OP_N = 0
CUBLAS_OP_T = 1
# cublasLtMatmulDescAttributes_t
CUBLASLT_MATMUL_DESC_TRANSA = 3
CUBLASLT_MATMUL_DESC_TRANSB = 4
CUBLASLT_MATMUL_DESC_EPILOGUE = 7
CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8
CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
# cublasLtMatrixLayoutAttribute_t
CUBLASLT_MATRIX_LAYOUT_ORDER = 1
CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5
CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
CUBLASLT_ORDER_COL = 0
# cublasLtMatmulPreferenceAttributes_t
CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7
CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
# cublasLtEpilogue_t
EPILOGUES = {"DEFAULT": 1, "RELU": 2, "BIAS": 4, "RELU_BIAS": 6, "GELU": 32, "GELU_BIAS": 36}

DATA_TYPES = {"f16": CUDA_R_16F, "bf16": CUDA_R_16BF, "f32": CUDA_R_32F, "f64": CUDA_R_64F}
COMPUTE_TYPES = {"32F": CUBLAS_COMPUTE_32F, "32F_FAST_TF32": CUBLAS_COMPUTE_32F_FAST_TF32,
                 "32F_FAST_16BF": CUBLAS_COMPUTE_32F_FAST_16BF,
                 "32F_FAST_16F": CUBLAS_COMPUTE_32F_FAST_16F, "64F": CUBLAS_COMPUTE_64F}
ITEMSIZE = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}

# Every enum value above with its name in the headers (the GPU test parses the header).
HEADER_ENUMS = {
    "CUDA_R_16F": CUDA_R_16F, "CUDA_R_32F": CUDA_R_32F, "CUDA_R_64F": CUDA_R_64F,
    "CUDA_R_16BF": CUDA_R_16BF, "CUBLAS_COMPUTE_32F": CUBLAS_COMPUTE_32F,
    "CUBLAS_COMPUTE_32F_FAST_TF32": CUBLAS_COMPUTE_32F_FAST_TF32,
    "CUBLAS_COMPUTE_32F_FAST_16BF": CUBLAS_COMPUTE_32F_FAST_16BF,
    "CUBLAS_COMPUTE_32F_FAST_16F": CUBLAS_COMPUTE_32F_FAST_16F,
    "CUBLAS_COMPUTE_64F": CUBLAS_COMPUTE_64F, "CUBLAS_OP_N": CUBLAS_OP_N, "CUBLAS_OP_T": CUBLAS_OP_T,
    "CUBLASLT_MATMUL_DESC_TRANSA": CUBLASLT_MATMUL_DESC_TRANSA,
    "CUBLASLT_MATMUL_DESC_TRANSB": CUBLASLT_MATMUL_DESC_TRANSB,
    "CUBLASLT_MATMUL_DESC_EPILOGUE": CUBLASLT_MATMUL_DESC_EPILOGUE,
    "CUBLASLT_MATMUL_DESC_BIAS_POINTER": CUBLASLT_MATMUL_DESC_BIAS_POINTER,
    "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE": CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
    "CUBLASLT_MATRIX_LAYOUT_ORDER": CUBLASLT_MATRIX_LAYOUT_ORDER,
    "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT": CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
    "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET": CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
    "CUBLASLT_ORDER_COL": CUBLASLT_ORDER_COL,
    "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES": CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES": CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES": CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES": CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES": CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
    **{f"CUBLASLT_EPILOGUE_{k}": v for k, v in EPILOGUES.items()},
}

WORKSPACE_BYTES = 32 << 20  # what cuBLAS recommends for Hopper
_HEURISTIC_RESULT_BYTES = 96  # cublasLtMatmulHeuristicResult_t: algo[64] + size_t + int + float + int[4]
_STATUS = {0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
           7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
           11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
           14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
           16: "CUBLAS_STATUS_LICENSE_ERROR"}

_lib = None
_lib_lock = threading.Lock()


# cuBLASLt's sonames, newest first, and where NVIDIA's wheels put each (``nvidia/<dir>/lib``)
_SONAMES = (("libcublasLt.so.13", "cu13"), ("libcublasLt.so.12", "cublas"))


def _open_library() -> ctypes.CDLL:
    """Open cuBLASLt without importing cuda.pathfinder where that can be helped (its import
    takes about 45 ms): the copy in an NVIDIA wheel beside this interpreter's packages (torch's,
    or ``nvidia-cublas``), then the soname through the dynamic loader's own search (a copy the
    process has already loaded, LD_LIBRARY_PATH, the loader cache), then
    ``cuda.pathfinder.load_nvidia_dynamic_lib`` (conda, CUDA_HOME, ...)."""
    import importlib.util
    import os
    try:
        spec = importlib.util.find_spec("nvidia")
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
    except (ImportError, ValueError):
        roots = []
    for soname, folder in _SONAMES:
        for root in roots:
            path = os.path.join(root, folder, "lib", soname)
            if os.path.exists(path):
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    pass
    for soname, _ in _SONAMES:
        try:
            return ctypes.CDLL(soname)
        except OSError:
            pass
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        path = load_nvidia_dynamic_lib("cublasLt").abs_path
    except ImportError as e:
        raise CudaUnavailableError(f"cuBLASLt (libcublasLt) was not found, and cuda-pathfinder, "
                                   f"which looks further, is not installed (pip install 'hlo[cuda]'): "
                                   f"{e}") from None
    except Exception as e:
        raise CudaUnavailableError(f"cuBLASLt (libcublasLt) was not found: {e}") from None
    return ctypes.CDLL(path)


def library() -> ctypes.CDLL:
    """The cuBLASLt shared library with the signatures used here (opened once; a caller while
    another thread opens it waits for that)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = _open_library()
        P, I, U64, I64, SZ = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_size_t
        sigs = {
            "cublasLtCreate": [P], "cublasLtDestroy": [P],
            "cublasLtMatmulDescCreate": [P, I, I], "cublasLtMatmulDescDestroy": [P],
            "cublasLtMatmulDescSetAttribute": [P, I, P, SZ],
            "cublasLtMatrixLayoutCreate": [P, I, U64, U64, I64], "cublasLtMatrixLayoutDestroy": [P],
            "cublasLtMatrixLayoutSetAttribute": [P, I, P, SZ],
            "cublasLtMatmulPreferenceCreate": [P], "cublasLtMatmulPreferenceDestroy": [P],
            "cublasLtMatmulPreferenceSetAttribute": [P, I, P, SZ],
            "cublasLtMatmulAlgoGetHeuristic": [P, P, P, P, P, P, P, I, P, P],
            "cublasLtMatmul": [P, P, P, P, P, P, P, P, P, P, P, P, P, P, SZ, P],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        lib.cublasLtGetVersion.restype = ctypes.c_size_t
        lib.cublasLtGetVersion.argtypes = []
        _lib = lib
        return lib


def start_loading() -> Optional[threading.Thread]:
    """Begin opening the library in the background (the dynamic loader maps and relocates a
    few hundred MB: tens of ms without the GIL); ``library()`` waits for it."""
    if _lib is None:
        return driver.in_background(library, name="hlo-cublaslt-load")
    return None


def version() -> int:
    return int(library().cublasLtGetVersion())


def _check(status: int, call: str, what: str = "") -> None:
    if status != 0:
        name = _STATUS.get(status, f"cublasStatus {status}")
        raise CublasError(f"{call} failed: {name}" + (f" while {what}" if what else ""), call, name)


def _set(fn, obj, attr: int, value: ctypes._SimpleCData, call: str) -> None:
    _check(fn(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), call, f"setting attribute {attr}")


class Lt:
    """A cuBLASLt handle in a context, with the plans made so far."""

    def __init__(self, ctx: "driver.Context"):
        self.ctx = ctx
        self.lib = library()
        ctx.make_current()
        h = ctypes.c_void_p()
        _check(self.lib.cublasLtCreate(ctypes.byref(h)), "cublasLtCreate")
        self.handle = h
        self._plans: Dict[Tuple, "MatmulPlan"] = {}

    def plan(self, params: MatmulParams, align: Tuple[int, ...] = (256, 256, 256, 256, 256),
             workspace_bytes: int = WORKSPACE_BYTES) -> "MatmulPlan":
        """The plan for ``params`` (cached: the heuristic runs once per shape and alignment).
        ``align``: the byte alignment the A, B, C, D and bias pointers have
        (``pointer_alignment``). The process's first plan also pays cuBLASLt's one-time
        set-up (about 70 ms on an H200); storing the chosen algorithm in a saved file would
        not avoid it: measured there, ``cublasLtMatmulAlgoCheck`` of a stored algorithm took
        as long, and without either the first ``cublasLtMatmul`` did."""
        key = (params, align, workspace_bytes)
        p = self._plans.get(key)
        if p is None:
            p = self._plans[key] = MatmulPlan(self, params, align, workspace_bytes)
        return p

    def __del__(self):
        try:
            self.lib.cublasLtDestroy(self.handle)
        except Exception:
            pass


def _alignment(addr: int) -> int:
    """The largest power of two up to 256 that divides ``addr``."""
    return 256 if addr % 256 == 0 else addr & -addr


class MatmulPlan:
    """Descriptors and algorithm for one matrix product shape (see ``gemm.py`` for params)."""

    def __init__(self, lt: Lt, params: MatmulParams, align, workspace_bytes: int):
        lib = self.lib = lt.lib
        self.lt = lt
        self.params = params
        self._objs = []  # (destroy function, handle) to release
        try:
            self._build(lib, lt, params, align, workspace_bytes)
        except Exception:
            self._release()
            raise

    def _build(self, lib, lt, p: MatmulParams, align, workspace_bytes):
        try:
            ctype = COMPUTE_TYPES[p.compute]
            stype = DATA_TYPES[p.scale]
            epi = p.epilogue
            epi_code = EPILOGUES[epi]
        except KeyError as e:
            raise CublasError(f"cublaslt.matmul: unsupported parameter {e} in {p!r}") from None
        desc = ctypes.c_void_p()
        _check(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), ctype, stype), "cublasLtMatmulDescCreate")
        self._objs.append((lib.cublasLtMatmulDescDestroy, desc))
        self.desc = desc
        set_desc = lib.cublasLtMatmulDescSetAttribute
        _set(set_desc, desc, CUBLASLT_MATMUL_DESC_TRANSA,
             ctypes.c_int32(CUBLAS_OP_T if p.trans_a else CUBLAS_OP_N), "cublasLtMatmulDescSetAttribute")
        _set(set_desc, desc, CUBLASLT_MATMUL_DESC_TRANSB,
             ctypes.c_int32(CUBLAS_OP_T if p.trans_b else CUBLAS_OP_N), "cublasLtMatmulDescSetAttribute")
        self.has_bias = p.has_bias
        if epi_code != EPILOGUES["DEFAULT"]:
            _set(set_desc, desc, CUBLASLT_MATMUL_DESC_EPILOGUE, ctypes.c_uint32(epi_code),
                 "cublasLtMatmulDescSetAttribute")
        if self.has_bias:
            _set(set_desc, desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                 ctypes.c_int32(DATA_TYPES[p.bias_type]),
                 "cublasLtMatmulDescSetAttribute")
            self._bias = ctypes.c_void_p(0)
            # a pointer of the real one's alignment, for the heuristic; the real one is set per call
            _set(set_desc, desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ctypes.c_void_p(align[4]),
                 "cublasLtMatmulDescSetAttribute")
        batch = p.batch
        self.a_desc = self._layout(lib, p.a, batch)
        self.b_desc = self._layout(lib, p.b, batch)
        self.d_desc = self._layout(lib, p.d, batch)
        self.c_desc = self._layout(lib, p.c, batch) if p.c is not None else self.d_desc
        pref = ctypes.c_void_p()
        _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "cublasLtMatmulPreferenceCreate")
        self._objs.append((lib.cublasLtMatmulPreferenceDestroy, pref))
        sp = lib.cublasLtMatmulPreferenceSetAttribute
        _set(sp, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(workspace_bytes),
             "cublasLtMatmulPreferenceSetAttribute")
        for attr, a in zip((CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES),
                           align[:4]):
            _set(sp, pref, attr, ctypes.c_uint32(a), "cublasLtMatmulPreferenceSetAttribute")
        want = cublaslt_tune.CANDIDATES if cublaslt_tune.ENABLED else 1
        result = (ctypes.c_uint8 * (_HEURISTIC_RESULT_BYTES * want))()
        count = ctypes.c_int(0)
        lt.ctx.make_current()
        st = lib.cublasLtMatmulAlgoGetHeuristic(lt.handle, desc, self.a_desc, self.b_desc, self.c_desc,
                                                self.d_desc, pref, want, result, ctypes.byref(count))
        base = ctypes.addressof(result)
        # each result: algo (64 bytes), workspaceSize (size_t), state (cublasStatus_t), ...
        found = [base + i * _HEURISTIC_RESULT_BYTES for i in range(count.value if st == 0 else 0)
                 if ctypes.c_int.from_address(base + i * _HEURISTIC_RESULT_BYTES + 72).value == 0]
        if not found:
            name = _STATUS.get(st, f"cublasStatus {st}")
            raise CublasError(f"cuBLASLt has no algorithm for this matrix product ({name}, "
                              f"{count.value} found): {p.describe()}", "cublasLtMatmulAlgoGetHeuristic", name)
        self._result = result
        scale = ctypes.c_double if p.scale == "f64" else ctypes.c_float
        self._alpha = scale(p.alpha)
        self._beta = scale(p.beta)
        self.alpha = ctypes.addressof(self._alpha)
        self.beta = ctypes.addressof(self._beta)
        sizes = [ctypes.c_size_t.from_address(r + 64).value for r in found]
        key = (lt.ctx.device, p, tuple(align), workspace_bytes)
        pick = cublaslt_tune.fastest(self, key, found, sizes)
        self.candidates = len(found)
        self.algo = found[pick]  # the algo is the first 64 bytes of the result
        self.workspace_size = sizes[pick]

    def _layout(self, lib, m: Matrix, batch: int):
        lay = ctypes.c_void_p()
        _check(lib.cublasLtMatrixLayoutCreate(ctypes.byref(lay), DATA_TYPES[m.dtype], m.rows,
                                              m.cols, m.ld), "cublasLtMatrixLayoutCreate",
               f"describing a {m.rows}x{m.cols} matrix (ld {m.ld})")
        self._objs.append((lib.cublasLtMatrixLayoutDestroy, lay))
        if batch > 1:
            sl = lib.cublasLtMatrixLayoutSetAttribute
            _set(sl, lay, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, ctypes.c_int32(batch),
                 "cublasLtMatrixLayoutSetAttribute")
            _set(sl, lay, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(m.batch_stride),
                 "cublasLtMatrixLayoutSetAttribute")
        return lay

    def set_bias(self, bias: int) -> None:
        """Point the descriptor at the bias vector ``bias`` (a device address)."""
        if bias != self._bias.value:
            self._bias.value = bias
            _set(self.lib.cublasLtMatmulDescSetAttribute, self.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                 self._bias, "cublasLtMatmulDescSetAttribute")

    def operand_bytes(self) -> Dict[str, int]:
        """Bytes each of A, B, C (when the product has one), D and the bias span."""
        p = self.params
        out = {n: _matrix_bytes(m, p.batch) for n, m in (("a", p.a), ("b", p.b), ("c", p.c), ("d", p.d))
               if m is not None}
        if self.has_bias:
            out["bias"] = p.m * ITEMSIZE[p.bias_type]
        return out

    def describe(self) -> str:
        return self.params.describe()

    def run(self, a: int, b: int, c: int, bias: int, d: int, workspace: int, stream: int) -> None:
        """One ``cublasLtMatmul`` (D = alpha op(A) op(B) + beta C, then the epilogue) queued on
        ``stream`` (a raw handle). ``c`` is D when the product has no C operand."""
        lib = self.lib
        if self.has_bias and bias != self._bias.value:
            self.set_bias(bias)
        st = lib.cublasLtMatmul(self.lt.handle, self.desc, self.alpha, a, self.a_desc, b, self.b_desc,
                                self.beta, c, self.c_desc, d, self.d_desc, self.algo, workspace,
                                self.workspace_size, stream)
        if st != 0:
            _check(st, "cublasLtMatmul", self.params.describe())

    def _release(self):
        for fn, h in reversed(self._objs):
            try:
                fn(h)
            except Exception:
                pass
        self._objs = []

    def __del__(self):
        self._release()


def _matrix_bytes(m: Matrix, batch: int) -> int:
    """Bytes a (batched, column-major) matrix of the params spans."""
    one = m.ld * (m.cols - 1) + m.rows
    return (one + m.batch_stride * (batch - 1)) * ITEMSIZE[m.dtype]


def pointer_alignment(*addrs: int) -> Tuple[int, ...]:
    return tuple(_alignment(a) if a else 256 for a in addrs)
