"""Shapes too large for a 64-bit index (issue 35): an array's byte size must fit in an int64 on
every target (CPU and CUDA index with i64), so a larger shape is refused where it is made, at
trace time (a ShapeError at the user's line, naming the dimension) and at parse time (a
ParseError at the type). They had compiled, and memory_analysis reported 7.4e19 bytes."""
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo.errors import ShapeError
from hlo.ir.errors import ParseError
from hlo.ir.parser import parse_module
from hlo.ir.types import INDEX_MAX

MAX = INDEX_MAX  # 2**63 - 1


def _text(t):
    return f"func @main(%a: {t}) -> ({t}) {{\n  return(%a)\n}}\n"


@pytest.mark.parametrize("t, dim", [
    (f"f32[{MAX}]", 0), ("f32[4294967296,4294967296]", 1), (f"u8[2,{MAX // 2 + 1}]", 1),
    ("f64[1048576,1048576,1048576]", 2), (f"c128[3,{MAX // 48 + 1},1]", 1)])
def test_parser_refuses_a_type_past_the_index(t, dim):
    with pytest.raises(ParseError, match=rf"1:16: error: shape .* too large: dimension {dim} ") as e:
        parse_module(_text(t))
    assert "2^63 - 1" in str(e.value)


def test_types_up_to_the_index_parse():
    for t in (f"u8[{MAX}]", f"f32[{MAX // 4}]", f"u8[0,{MAX}]", f"f64[{MAX},0]"):
        parse_module(_text(t))


def test_sizes_are_refused_exactly_past_the_index_property():
    # property: over random shapes around the bound, a type is made iff its bytes fit in int64
    rng = np.random.default_rng(35)
    for _ in range(300):
        rank = int(rng.integers(1, 5))
        dims = [int(2 ** rng.uniform(0, 64 / rank + 2)) for _ in range(rank)]
        dt = ["u8", "s16", "f32", "f64", "c128"][int(rng.integers(5))]
        size = {"u8": 1, "s16": 2, "f32": 4, "f64": 8, "c128": 16}[dt]
        n = 1
        for d in dims:
            n *= d
        t = f"{dt}[{','.join(map(str, dims))}]"
        if n * size <= MAX:
            parse_module(_text(t))
        else:
            with pytest.raises(ParseError, match="too large"):
                parse_module(_text(t))


def test_trace_time_errors_name_the_users_line():
    def broad(x):
        return hnp.broadcast_to(x, (2 ** 31, 2 ** 31, 4)).sum()  # the line named

    with pytest.raises(ShapeError, match=r"test_size_limits.py:\d+: shape \[2147483648, 2147483648, 4\] "
                                         r"of f32 is too large: dimension 1") as e:
        hlo.jit(broad)(np.float32(1))
    assert e.value.location.line == broad.__code__.co_firstlineno + 1

    with pytest.raises(ShapeError, match="dimension 1 .*too large|too large: dimension 1"):
        hlo.jit(lambda x: x + 1).lower(hlo.ShapeDtypeStruct((2 ** 40, 2 ** 40), np.float32))
    with pytest.raises(ShapeError, match="too large"):
        hlo.make_ir(lambda x: hnp.zeros((2 ** 40, 2 ** 30), np.float32).sum() + x)(np.float32(1))


def test_a_large_shape_that_fits_still_traces():
    # 2^61 f32 elements (2^63 bytes minus 4): no allocation at trace time, so it traces
    m = hlo.make_ir(lambda x: x * 2)(hlo.ShapeDtypeStruct((2 ** 61 - 1,), np.float32))
    assert m.main.arg_types[0].shape == (2 ** 61 - 1,)
