"""Next-row prefetch in the CPU backend's row kernels (backends/cpu/kernels.py): emitted for rows
of a row-major input of at least PREFETCH_MIN_ROW_BYTES whose passes are cheap (layernorm), not
for rows that keep a row cache of an expensive value (softmax's exp), never past the last row;
results are bit-identical with the prefetch switched off."""
import re

import numpy as np
import pytest
from cpu_helpers import check, compile_text
from test_cpu_fusion import LAYERNORM, SOFTMAX

import hlo.backends.cpu.kernels as K

rng = np.random.default_rng(61)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _prefetches(ir_text: str) -> int:
    return len(re.findall(r"call void @\"?llvm\.prefetch", ir_text))


def _ln(n, m):
    return LAYERNORM.format(n=n, m=m, inv=1.0 / m)


@pytest.mark.parametrize("n,m", [(2, 512), (7, 1024), (33, 640)])
def test_layernorm_rows_prefetch_and_match_the_interpreter(n, m):
    src = _ln(n, m)
    exe = compile_text(src)
    assert _prefetches(exe.ir_text) >= 1
    # one row ahead in cache lines, and only while row + 1 < rows
    assert len(re.findall(rf"icmp slt i64 %\S+, {n}\b", exe.ir_text)) >= 1
    assert re.search(rf"icmp slt i64 %\"?pf\"?, {m * 4 // 64}\b", exe.ir_text)
    args = [f32(n, m) * 3 + 1, f32(m), f32(m)]
    got = check(src, args, rtol=2e-5, atol=2e-5)
    saved = K.PREFETCH_MIN_ROW_BYTES
    K.PREFETCH_MIN_ROW_BYTES = 0
    try:
        plain = compile_text(src)
        assert _prefetches(plain.ir_text) == 0
        ref = plain.run(args)
    finally:
        K.PREFETCH_MIN_ROW_BYTES = saved
    for g, r in zip(got, ref):
        assert np.array_equal(np.asarray(g), np.asarray(r))


def test_single_row_layernorm():
    # one row takes the split-reduction path (no row kernel, so nothing to prefetch)
    check(_ln(1, 1024), [f32(1, 1024), f32(1024), f32(1024)], rtol=2e-5, atol=2e-5)


def test_short_rows_are_not_prefetched():
    # 256 floats = 1 KiB a row: below PREFETCH_MIN_ROW_BYTES, the hardware prefetcher keeps up
    assert 256 * 4 < K.PREFETCH_MIN_ROW_BYTES
    src = _ln(16, 256)
    assert _prefetches(compile_text(src).ir_text) == 0
    check(src, [f32(16, 256), f32(256), f32(256)], rtol=2e-5, atol=2e-5)


def test_softmax_rows_with_a_row_cache_are_not_prefetched():
    src = SOFTMAX.format(n=9, m=2048)
    exe = compile_text(src)
    assert _prefetches(exe.ir_text) == 0
    x = f32(9, 2048) * 5
    x[3, 7] = np.inf
    x[4, :] = -np.inf
    x[5, 11] = np.nan
    check(src, [x], rtol=3e-6, atol=1e-30)


def test_prefetch_is_capped_at_prefetch_max_bytes():
    saved = K.PREFETCH_MAX_BYTES
    K.PREFETCH_MAX_BYTES = 1024
    try:
        text = compile_text(_ln(4, 2048)).ir_text
    finally:
        K.PREFETCH_MAX_BYTES = saved
    # the prefetch loop runs 1024 / 64 = 16 times, not 2048 * 4 / 64 = 128
    assert re.search(r"icmp slt i64 %\"?pf\"?, 16\b", text), "prefetch loop bound"
