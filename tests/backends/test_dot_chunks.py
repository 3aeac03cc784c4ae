"""A product whose A a row prologue computes (softmax, layer norm) runs in chunks of rows where
A is large (``backends/cpu/dot_chunks.py``): here the chunk is made small through
``dot_chunks.CHUNK_BYTES``, so that small products take the chunked path (a shorter last
chunk included), and the results are compared with the interpreter's and numpy's."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_helpers import check, compile_text
from test_cpu_fusion import PROLOGUE

import hlo
import hlo.numpy as hnp
from hlo.backends.cpu import dot_chunks
from hlo.backends.cpu.dot import chunk_rows


@pytest.fixture
def small_chunks(monkeypatch):
    # one register tile of rows a thread: the least chunk there is
    monkeypatch.setattr(dot_chunks, "CHUNK_BYTES", 1)


@pytest.mark.parametrize("m,threads", [(100, 1), (100, 2), (61, 2)])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_softmax_prologue_in_chunks_matches_the_interpreter(small_chunks, m, threads, dtype):
    src = PROLOGUE.format(m=m, k=50, n=30).replace("f32", dtype)
    rng = np.random.default_rng(0)
    npt = np.float32 if dtype == "f32" else np.float64
    a = [rng.standard_normal((m, 50)).astype(npt), rng.standard_normal((50, 30)).astype(npt)]
    tol = 1e-5 if dtype == "f32" else 1e-12
    check(src, a, rtol=tol, atol=tol, threads=threads)
    exe = compile_text(src, threads=threads)
    rows = chunk_rows(m, 50, np.dtype(npt).itemsize, threads)
    assert rows is not None and rows < m
    n = -(-m // rows)
    assert f"in {n} chunks of {rows} rows" in exe.steps_text
    # two kernels (the row kernel, a GEMM), a third for a shorter last chunk; called once a chunk
    assert len(exe.kernels) == (2 if m % rows == 0 else 3)
    assert exe.steps_text.count("row-wise prologue") == n


def test_a_small_product_is_not_split():
    exe = compile_text(PROLOGUE.format(m=100, k=50, n=30), threads=2)
    assert "row-wise prologue" in exe.steps_text and "chunks" not in exe.steps_text


def _ln_linear_gelu_res(x, w, b):
    h = hnp.mean(x, axis=-1, keepdims=True)
    d = x - h
    v = hnp.mean(d * d, axis=-1, keepdims=True)
    y = (d / hnp.sqrt(v + 1e-5)) @ w + b
    return 0.5 * y * (1 + hnp.tanh(0.7978845608 * (y + 0.044715 * y ** 3))) + x


def _reference(x, w, b):
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    d = x - x.mean(-1, keepdims=True)
    y = d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) @ w + b
    return 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3))) + x


@pytest.mark.parametrize("chunked", [False, True])
def test_layer_norm_product_temp_is_one_chunk(monkeypatch, chunked):
    """ln_linear_gelu_res's shape of program, small: chunked, its temporary is one chunk of A's
    rows, not A."""
    if chunked:
        monkeypatch.setattr(dot_chunks, "CHUNK_BYTES", 1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 24, 40)).astype(np.float32)
    w = (rng.standard_normal((40, 40)) / 6).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    with hlo.config.override(cache=False):
        c = hlo.jit(_ln_linear_gelu_res).lower(x, w, b).compile()
    np.testing.assert_allclose(c(x, w, b), _reference(x, w, b), rtol=1e-5, atol=1e-5)
    temp = c.memory_analysis().temp_size_in_bytes
    whole = x.nbytes
    if chunked:
        assert 0 < temp < whole // 2
    else:
        assert temp >= whole



def test_chunked_product_saves_and_loads(small_chunks, tmp_path):
    """The chunks call one kernel several times on other constants: a saved executable keeps
    its steps and constants, and a fresh load computes the same."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 30, 40)).astype(np.float32)
    w = (rng.standard_normal((40, 40)) / 6).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    path = tmp_path / "ln.hlox"
    with hlo.config.override(cache=False):
        c = hlo.jit(_ln_linear_gelu_res).lower(x, w, b).compile()
        c.save(path)
    loaded = hlo.load(path)
    np.testing.assert_array_equal(np.asarray(loaded(x, w, b)), np.asarray(c(x, w, b)))
    np.testing.assert_allclose(loaded(x, w, b), _reference(x, w, b), rtol=1e-5, atol=1e-5)
    assert loaded.memory_analysis().temp_size_in_bytes == c.memory_analysis().temp_size_in_bytes
