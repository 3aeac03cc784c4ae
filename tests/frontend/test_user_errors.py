"""Every frontend error says what went wrong and points at the user's own line (this file),
never at hlo's internals; tracebacks of hlo errors keep only the user's frames."""
import inspect
import traceback

import numpy as np
import pytest

import hlo
import hlo.lax as hlax
import hlo.numpy as hnp
from hlo import errors

X = np.ones((4, 8), np.float32)
HERE = __file__


def _line(fn, marker):
    """The line number in this file of the line of ``fn`` containing ``marker``."""
    src, start = inspect.getsourcelines(fn)
    for i, s in enumerate(src):
        if marker in s:
            return start + i
    raise AssertionError(marker)


def _jit(f, **kw):
    return hlo.jit(f, target="interpreter", **kw)


def _assert_user_traceback(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not hlo.base.source_info.is_internal_file(f.filename)]
    internal = [f for f in frames if hlo.base.source_info.is_internal_file(f.filename)]
    assert user and user[-1].filename == HERE
    # only the re-raising wrapper of the API boundary may remain
    assert all(f.name == "wrapper" and f.filename.endswith("boundary.py") for f in internal), internal


def test_python_if_on_a_traced_value():
    def f(x, limit):
        if x.sum() > limit:  # MARK-if
            return x
        return -x
    with pytest.raises(errors.TracerBoolConversionError) as e:
        _jit(f)(X, 3)
    msg = str(e.value)
    line = _line(f, "MARK-if")
    assert msg.startswith(f"{HERE}:{line}: Python `if`")
    assert f"the traced pred[] computed by 'compare' at test_user_errors.py:{line}" in msg
    assert "depends on arguments x and limit" in msg
    assert "hlo.numpy.where" in msg and "hlo.lax.cond" in msg
    assert "static_argnames=('limit',)" in msg  # only the scalar argument is suggested
    assert isinstance(e.value, TypeError)
    _assert_user_traceback(e.value)


def test_bool_of_an_argument_and_logical_operators():
    def g(flag):
        return 1.0 if flag else 0.0  # MARK-flag
    with pytest.raises(errors.TracerBoolConversionError, match=r"the traced f32\[\]\{weak\} argument flag") as e:
        _jit(g)(1.0)
    assert str(e.value).startswith(f"{HERE}:{_line(g, 'MARK-flag')}:")

    def h(x):
        return (x > 0) and (x < 2)
    with pytest.raises(errors.TracerBoolConversionError):
        _jit(h)(X)


def test_int_float_and_index_conversions():
    def f_int(x):
        return hnp.zeros(int(x[0, 0]))  # MARK-int
    with pytest.raises(errors.TracerIntegerConversionError, match="int\\(\\) needs a concrete value") as e:
        _jit(f_int)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(f_int, 'MARK-int')}:")
    assert "Shapes, axes, loop bounds" in str(e.value)

    def f_range(n):
        return sum(range(n))  # MARK-range
    with pytest.raises(errors.TracerIntegerConversionError, match="range") as e:
        _jit(f_range)(3)
    assert str(e.value).startswith(f"{HERE}:{_line(f_range, 'MARK-range')}:")
    assert "static_argnames=('n',)" in str(e.value)

    def f_float(x):
        return float(x.sum())  # MARK-float
    with pytest.raises(errors.ConcretizationError, match="float\\(\\)") as e:
        _jit(f_float)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(f_float, 'MARK-float')}:")

    def f_numpy(x):
        return np.asarray(x) + 1  # MARK-np
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.asarray") as e:
        _jit(f_numpy)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(f_numpy, 'MARK-np')}:")

    def f_item(x):
        return x[0, 0].item()
    with pytest.raises(errors.ConcretizationError, match=r"\.item\(\)"):
        _jit(f_item)(X)


def test_numpy_ufuncs_on_traced_values_run_as_hlo_numpy():
    out = _jit(lambda x: np.sin(x) + np.add(np.ones(8, np.float32), x))(X)
    np.testing.assert_allclose(out, np.sin(X) + 1 + X, rtol=1e-6)
    with pytest.raises(errors.TracerArrayConversionError, match="numpy.add.reduce"):
        _jit(lambda x: np.add.reduce(x))(X)


def test_leaked_tracer_used_after_its_trace():
    saved = []

    def keep(x):
        saved.append(x * 2)  # MARK-made
        return x
    _jit(keep)(X)

    def use(y):
        return y + saved[0]  # MARK-use
    with pytest.raises(errors.TracerLeakError) as e:
        _jit(use)(X)
    msg = str(e.value)
    assert msg.startswith(f"{HERE}:{_line(use, 'MARK-use')}:")
    assert f"made at test_user_errors.py:{_line(keep, 'MARK-made')}" in msg
    assert "hlo.jit(test_leaked_tracer_used_after_its_trace.<locals>.keep)" in msg
    assert "return them from the function" in msg
    _assert_user_traceback(e.value)
    with pytest.raises(errors.TracerLeakError, match="outside of any hlo.jit"):
        saved[0] + 1  # used outside of any trace
    with pytest.raises(errors.TracerLeakError, match="outside of any hlo.jit"):
        _jit(lambda y: y * 2)(saved[0])


def test_leaked_tracer_between_regions():
    box = []

    def first(a, b):
        box.append(a)
        return a + b

    def second(a, b):
        return a + box[0]

    def f(x):
        y = hlax.reduce(x, 0.0, first, (0,))
        return hlax.reduce(y, 0.0, second, (0,))
    with pytest.raises(errors.TracerLeakError, match="after that trace finished"):
        _jit(f)(X)


def test_shape_mismatch_names_the_op_both_shapes_and_the_line():
    def f(x, y):
        return x + y  # MARK-add
    with pytest.raises(errors.ShapeError) as e:
        _jit(f)(X, np.ones(5, np.float32))
    assert str(e.value) == f"{HERE}:{_line(f, 'MARK-add')}: add: shapes (4, 8) and (5,) cannot be broadcast together"
    assert isinstance(e.value, ValueError)
    _assert_user_traceback(e.value)

    def g(x, w):
        return x @ w  # MARK-mm
    with pytest.raises(errors.ShapeError) as e:
        _jit(g)(X, np.ones((7, 3), np.float32))
    assert str(e.value).startswith(f"{HERE}:{_line(g, 'MARK-mm')}: matmul:")
    assert "(4, 8)" in str(e.value) and "(7, 3)" in str(e.value)

    def h(x):
        return hnp.concatenate([x, x[:, :3].T])  # MARK-cat
    with pytest.raises(errors.ShapeError, match=r"concatenate: .*\(4, 8\), \(3, 4\)") as e:
        _jit(h)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(h, 'MARK-cat')}:")

    def k(x):
        return hnp.einsum("ij,jk->ik", x, x)  # MARK-ein
    with pytest.raises(errors.ShapeError, match=r"einsum 'ij,jk->ik': index 'j' has size 8 in one operand and 4") as e:
        _jit(k)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(k, 'MARK-ein')}:")


def test_dtype_mismatch_names_the_op_both_dtypes_and_the_line():
    def f(x):
        return hlax.add(x, x.astype(hnp.float16))  # MARK-lax
    with pytest.raises(errors.DTypeError) as e:
        _jit(f)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(f, 'MARK-lax')}: lax.add requires arguments to have the "
                                   "same dtype, got float32, float16")
    assert isinstance(e.value, TypeError)

    def g(x):
        return hnp.bitwise_and(x, 3)  # MARK-bit
    with pytest.raises(errors.DTypeError, match="bitwise_and is only defined for integers") as e:
        _jit(g)(X)
    assert str(e.value).startswith(f"{HERE}:{_line(g, 'MARK-bit')}:")


def test_unsupported_argument_types_name_the_argument():
    f = _jit(lambda x, opts: x)
    with pytest.raises(errors.ArgumentTypeError, match=r"argument opts has type str.*static_argnums") as e:
        f(X, "fast")  # MARK-call
    assert str(e.value).startswith(f"{HERE}:{_line(test_unsupported_argument_types_name_the_argument, 'MARK-call')}:")
    with pytest.raises(errors.ArgumentTypeError, match=r"argument opts\['a'\]\[1\] has type object"):
        f(X, {"a": [1.0, object()]})
    with pytest.raises(errors.ArgumentTypeError, match="dtype float128, which hlo does not support"):
        f(X, np.ones(2, np.longdouble))
    with pytest.raises(errors.ArgumentTypeError, match="ShapeDtypeStruct.*only in f.lower"):
        f(X, hlo.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(errors.ArgumentTypeError, match="returned a str at output"):
        _jit(lambda x: {"a": "text"})(X)


def test_calling_a_compiled_with_another_signature():
    c = _jit(lambda a, b: a * b).lower(X, np.float32(2)).compile()
    with pytest.raises(errors.SignatureMismatchError) as e:
        c(np.ones((4, 9), np.float32), np.float32(2))  # MARK-sig
    msg = str(e.value)
    assert msg.startswith(f"{HERE}:{_line(test_calling_a_compiled_with_another_signature, 'MARK-sig')}:")
    assert "<lambda>(a: f32[4,8], b: f32[]) was called with arguments it was not compiled for: " \
           "a is f32[4,9] (compiled for f32[4,8])" in msg
    with pytest.raises(errors.SignatureMismatchError, match=r"b is s32\[\] \(compiled for f32\[\]\)"):
        c(X, np.int32(2))
    with pytest.raises(errors.SignatureMismatchError, match="structure differs"):
        c(X)
    np.testing.assert_array_equal(c(X, 2.0), X * 2)  # a Python float fits an f32[] parameter


def test_other_clear_errors():
    with pytest.raises(NotImplementedError, match=r"where\(condition\) with one argument"):
        _jit(lambda x: hnp.where(x > 0))(X)
    with pytest.raises(IndexError, match="axis 2 is out of bounds for an array of rank 2"):
        _jit(lambda x: hnp.sum(x, axis=2))(X)
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of shape \(4, 8\) \(size 32\) into shape \(3, 5\)"):
        _jit(lambda x: x.reshape(3, 5))(X)
    with pytest.raises(TypeError, match="dtype float128 is not supported by hlo"):
        _jit(lambda x: x.astype(np.longdouble))(X)
    with pytest.raises(OverflowError, match="Python int 300 is out of range for uint8"):
        _jit(lambda x: x.astype(np.uint8) + 300)(X)
