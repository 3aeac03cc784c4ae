"""Every op of the op table on the CUDA backend: the CPU backend's IR programs
(``tests/backends``: elementwise ops over every element type, shape ops, reductions, dots,
convolutions, windows, sort, scatter, control flow, fusions) compiled to PTX that ptxas accepts;
with a CUDA device, also run and compared with the reference interpreter."""
import cuda_helpers
import numpy as np
import pytest
import test_cpu_complex
import test_cpu_elementwise
import test_cpu_ops
from test_cpu_complex import test_binary as test_complex_binary
from test_cpu_complex import test_complex_real_imag_and_conversions
from test_cpu_complex import test_reduce_and_dot_general as test_complex_reduce_and_dot
from test_cpu_complex import test_unary as test_complex_unary
from test_cpu_elementwise import (
    test_bitcast_convert,
    test_compare,
    test_convert,
    test_exact_float_unary,
    test_float_binary,
    test_float_binary_transcendental,
    test_int_binary,
    test_int_unary,
    test_is_finite,
    test_pred_binary,
    test_reduce_precision,
    test_select_clamp,
    test_transcendental_unary,
)
from test_cpu_ops import (
    test_broadcast_reshape_transpose,
    test_convolution_2d,
    test_convolution_groups_and_lhs_dilation,
    test_dot_general,
    test_dot_mixed_precision_result,
    test_gather,
    test_gather_batching,
    test_reduce_f32,
    test_reduce_types,
    test_reduce_variadic_argmax,
    test_reduce_window,
    test_scatter_add_with_out_of_bounds,
    test_slices_pad_concat_reverse,
    test_sort_dim0,
    test_sort_stable_multi_operand,
    test_while_if_case_call,
    test_while_swapping_state,
)

from hlo.ir.ops import OPS


@pytest.fixture(autouse=True)
def _on_cuda(monkeypatch):
    """The CPU tests' ``check`` compiles for cuda; their module's random generator is a fresh
    one for each test and restored after (the CPU tests draw the same inputs in any order)."""
    for m in (test_cpu_complex, test_cpu_elementwise, test_cpu_ops):
        monkeypatch.setattr(m, "check", cuda_helpers.check)
        if hasattr(m, "rng"):
            monkeypatch.setattr(m, "rng", np.random.default_rng(42))


def _ops_named(fn) -> set:
    """Op names a test function exercises: those in its ``op`` parameters and in IR text of its
    module's sources (``= name(``, and ``unary_src("name"`` / ``binary_src("name"``)."""
    import inspect
    import re
    names = set()
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "parametrize" and mark.args[0] in ("op", "op,dt"):
            names.update(v if isinstance(v, str) else v[0] for v in mark.args[1])
    src = inspect.getsource(inspect.getmodule(fn))
    names.update(re.findall(r"= (\w+)[( ]", src) + re.findall(r'_src\("(\w+)"', src))
    return names


def test_every_op_of_the_op_table_is_exercised():
    """The programs above reach every op of the op table (fusion comes from the pipeline)."""
    import test_cuda_kernels
    tests = [v for k, v in globals().items() if k.startswith("test_") and callable(v) and k !=
             "test_every_op_of_the_op_table_is_exercised"]
    covered = set().union(*(_ops_named(f) for f in tests + [test_cuda_kernels.test_reductions]))
    covered.add("fusion")  # every program above runs through the pipeline's fusion
    from hlo.backends import cuda
    declined = set(cuda.declined_ops())  # refused at compile time (tests/frontend/test_callbacks.py)
    assert sorted(set(OPS) - covered - declined) == []
