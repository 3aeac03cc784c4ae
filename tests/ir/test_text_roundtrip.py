"""The text form round-trips: print(parse(print(m))) == print(m) for random valid modules, and
parsed constants keep every bit (NaN payloads, -0.0, infinities, hex blobs)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_gen import build_module

from hlo.ir import parse_module, print_module, verify_module


@st.composite
def modules(draw):
    return build_module(draw)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules())
def test_print_parse_print_is_identity(m):
    verify_module(m)
    text = print_module(m)
    again = parse_module(text)
    assert print_module(again) == text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules())
def test_parsed_constants_keep_every_bit(m):
    again = parse_module(print_module(m))
    a = [op.attrs["value"] for op in m.walk() if op.name == "constant"]
    b = [op.attrs["value"] for op in again.walk() if op.name == "constant"]
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        xb = x.astype(np.uint8) if x.dtype == np.bool_ else np.ascontiguousarray(x).view(np.uint8)
        yb = y.astype(np.uint8) if y.dtype == np.bool_ else np.ascontiguousarray(y).view(np.uint8)
        assert np.array_equal(xb, yb)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_float_constant_specials_roundtrip(dtype):
    import ml_dtypes
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    u = np.dtype(f"u{dt.itemsize}")
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, 1e-3], dt)
    bits = vals.view(u).copy()
    nan_bits = np.array(np.nan, dt).view(u)
    payload = (nan_bits | u.type(1)).astype(u)
    neg_nan = (nan_bits | u.type(1 << (8 * dt.itemsize - 1))).astype(u)
    allbits = np.concatenate([bits, np.array([payload, neg_nan], u)]).view(dt)
    tname = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}[dtype]
    from hlo.ir import Builder, Function, Module
    m = Module("m")
    fn = m.add(Function("main"))
    fn.body.outputs = [Builder(fn.body).value("constant", attrs={"value": allbits})]
    text = print_module(m)
    assert f"{tname}[10]" in text
    got = parse_module(text).main.body.ops[0].attrs["value"]
    assert np.array_equal(got.view(u), allbits.view(u))
