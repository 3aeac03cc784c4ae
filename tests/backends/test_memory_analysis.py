"""``memory_analysis()`` tells what a call allocates: its temp size is the executable's arena,
the buffer plan plus the scratch the CPU lowering adds past it (a heavy op inside a fusion, the
values a loop carries), so the figure users check before running is the one the runtime uses."""
import numpy as np

import hlo
import hlo.numpy as hnp


def _allocated(compiled) -> set:
    exe = compiled._artifact.executable
    return {raw.nbytes - 64 for raw in exe._arena_mem.values()}  # 64: alignment slack


def test_a_heavy_op_inside_a_fusion_counts_its_scratch():
    n = 300  # issue 20: the (n, n) product before the dot was left out (4 KB reported, 4 MB used)
    f = hlo.jit(lambda x: ((hnp.ones((n, n)) * x) @ hnp.ones((n, 1))).sum())
    c = f.lower(np.float32(2.0)).compile()
    temp = c.memory_analysis().temp_size_in_bytes
    assert temp >= n * n * 4
    np.testing.assert_allclose(c(np.float32(2.0)), 2.0 * n * n, rtol=1e-5)
    assert _allocated(c) == {temp}


def test_loop_carried_scratch_is_counted():
    def f(x):
        return hlo.lax.fori_loop(0, 3, lambda i, v: hnp.tanh(v) @ v, x)
    x = np.eye(16, dtype=np.float32) * 0.5
    c = hlo.jit(f).lower(x).compile()
    temp = c.memory_analysis().temp_size_in_bytes
    c(x)
    assert temp > 0 and _allocated(c) == {temp}
