"""A numpy model of what cuBLASLt computes for a ``cublaslt.matmul`` params dict (the schema of
``hlo.backends.cuda.gemm``): column-major strided matrices, transposes, batches, epilogues.
Float64 throughout, so the planner's params can be checked without a GPU."""
import numpy as np


def _stored(buf: np.ndarray, m: dict, batch_index: int) -> np.ndarray:
    """The matrix as stored: column-major, element (r, c) at r + c * ld."""
    base = batch_index * m["batch_stride"]
    rows, cols, ld = m["rows"], m["cols"], m["ld"]
    assert ld >= max(rows, 1), "cuBLASLt requires ld >= rows"
    idx = base + np.arange(rows)[:, None] + ld * np.arange(cols)[None, :]
    assert idx.max() < buf.size, "the params address past the buffer"
    return buf[idx], idx


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def lt_matmul(p: dict, bufs: dict, d_buf: np.ndarray) -> None:
    """Run the params on flat element buffers ``bufs`` ("a", "b", optionally "c" and "bias"),
    writing ``d_buf`` (flat, float64) as cuBLASLt would."""
    m, n, k = p["m"], p["n"], p["k"]
    for bi in range(p["batch"]):
        A, _ = _stored(bufs["a"], p["a"], bi)
        B, _ = _stored(bufs["b"], p["b"], bi)
        opA = A.T if p["trans_a"] else A
        opB = B.T if p["trans_b"] else B
        assert opA.shape == (m, k) and opB.shape == (k, n), (opA.shape, opB.shape, p)
        D = p["alpha"] * (opA.astype(np.float64) @ opB.astype(np.float64))
        if p["beta"]:
            C, _ = _stored(bufs["c"] if "c" in p else d_buf, p.get("c", p["d"]), bi)
            D = D + p["beta"] * C
        epi = p["epilogue"]
        if "BIAS" in epi:
            D = D + bufs["bias"].astype(np.float64)[:, None]
        if epi.startswith("RELU"):
            D = np.maximum(D, 0)
        elif epi.startswith("GELU"):
            D = gelu_tanh(D)
        _, idx = _stored(d_buf, p["d"], bi)
        assert D.shape == (m, n)
        d_buf[idx] = D
