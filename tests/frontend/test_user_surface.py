"""What a user meets (issue 34): tracebacks that end in the user's code, a clear message for a
missing API name, ShapeDtypeStruct's dimension errors, and jax interop (jax-registered pytrees,
``jax.ShapeDtypeStruct``, numpy dtype names in the CLI). Compared with jax where they overlap."""
import inspect
import os
import subprocess
import sys
import traceback

import numpy as np
import pytest

import hlo
import hlo.nn
import hlo.numpy as hnp
import hlo.random
from hlo.base.source_info import is_internal_file

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

X = np.arange(4, dtype=np.float32)
HERE = os.path.abspath(__file__)


# ------------------------------------------------------------------------------------------------
# Tracebacks: plain Python exceptions raised while tracing lose hlo's frames
# ------------------------------------------------------------------------------------------------

def _wrong_count(x, y):
    return x + y


def _setitem(x):
    x[0] = 1.0  # MARK
    return x


def _missing_attr(x):
    return hnp.no_such_function(x)  # MARK


def _bad_broadcast(x):
    return x + hnp.ones((3,))  # MARK


MISTAKES = {
    "argument count": (_wrong_count, TypeError),
    "setitem": (_setitem, TypeError),
    "missing attribute": (_missing_attr, AttributeError),
    "broadcast": (_bad_broadcast, ValueError),
}


def _marked_line(fn):
    src, start = inspect.getsourcelines(fn)
    return next((start + i for i, s in enumerate(src) if "# MARK" in s), None)


def _raise(fn, jit=hlo.jit):
    try:
        jit(fn)(X)  # the user's call
    except Exception as e:
        return e
    raise AssertionError("no exception")


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_traceback_of_a_mistake_keeps_only_the_users_frames(name):
    fn, kind = MISTAKES[name]
    e = _raise(fn)
    assert isinstance(e, kind)
    frames = traceback.extract_tb(e.__traceback__)
    internal = [f for f in frames if is_internal_file(f.filename)]
    # the only hlo frame left is the API boundary's re-raise (as jax keeps traceback_util's)
    assert all(f.name == "wrapper" and f.filename.endswith("boundary.py") for f in internal), internal
    user = [(f.filename, f.lineno) for f in frames if f.filename == HERE]
    assert (HERE, inspect.getsourcelines(_raise)[1] + 2) in user, frames
    mark = _marked_line(fn)
    if mark is not None:  # the user's own line that went wrong is there
        assert (HERE, mark) == user[-1], frames
    text = "".join(traceback.format_exception(e))
    if sys.version_info >= (3, 11):  # (exception notes are new in 3.11)
        assert "HLO_TRACEBACK=full" in text  # the note says how to see everything
    assert len(text.splitlines()) <= 14, text  # jax's own: 7-14 lines
    # jax raises the same kind of exception for the same mistake
    je = _raise(fn, jax.jit)
    assert isinstance(je, (TypeError, AttributeError, ValueError))
    if name != "broadcast":  # jax: TypeError for shapes, hlo: ShapeError (a ValueError)
        assert type(je) is type(e) or isinstance(e, type(je))


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_full_tracebacks_on_request(name):
    fn, _ = MISTAKES[name]
    with hlo.config.override(traceback_filtering=False):
        e = _raise(fn)
    frames = traceback.extract_tb(e.__traceback__)
    internal = {os.path.basename(f.filename) for f in frames if is_internal_file(f.filename)}
    assert {"jit.py", "tracer.py"} <= internal, frames
    assert "HLO_TRACEBACK" not in "".join(traceback.format_exception(e))


def test_hlo_traceback_full_environment_variable(tmp_path):
    script = tmp_path / "user.py"
    script.write_text("import numpy as np, hlo\n"
                      "def f(x):\n"
                      "    x[0] = 1.0\n"
                      "    return x\n"
                      "hlo.jit(f, target='interpreter')(np.ones(3, np.float32))\n")
    out = {}
    for mode in ("", "full"):
        env = dict(os.environ, HLO_TRACEBACK=mode)
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 1 and "traced arrays are immutable" in r.stderr, r.stderr
        out[mode] = r.stderr
    hlo_dir = os.path.dirname(os.path.dirname(hlo.base.source_info.__file__))
    frames = lambda text: [ln for ln in text.splitlines() if ln.strip().startswith("File ")]
    assert [f for f in frames(out[""]) if hlo_dir in f and "boundary.py" not in f] == []
    assert 'user.py", line 3' in out[""] and 'user.py", line 5' in out[""]
    assert len([f for f in frames(out["full"]) if hlo_dir in f]) >= 5
    assert 'user.py", line 3' in out["full"]


def test_hlo_errors_still_start_at_the_users_line():
    # hlo's own errors are filtered as before: the message names the user's line
    def f(x):
        return x.reshape(5)  # MARK
    with pytest.raises(hlo.errors.HloError) as e:
        hlo.jit(f)(X)
    assert str(e.value).startswith(f"{HERE}:{_marked_line(f)}")
    frames = traceback.extract_tb(e.value.__traceback__)
    assert frames[-1].filename == HERE and frames[-1].lineno == _marked_line(f)


# ------------------------------------------------------------------------------------------------
# Missing names
# ------------------------------------------------------------------------------------------------

def test_numpy_functions_in_numpy_submodules_run_as_hlo_numpy():
    # (jax refuses numpy's functions on its tracers; hlo runs them as hlo.numpy's)
    for f, ref, jref in [(lambda x: np.linalg.norm(x), np.linalg.norm, jnp.linalg.norm),
                         (lambda x: np.fft.fft(x), np.fft.fft, jnp.fft.fft)]:
        np.testing.assert_allclose(hlo.jit(f)(X), ref(X.astype(np.float64)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(hlo.jit(f)(X), jax.jit(jref)(X), rtol=1e-5, atol=1e-5)
    with pytest.raises(hlo.errors.TracerArrayConversionError,
                       match="hlo.numpy has no function roots"):
        hlo.jit(lambda x: np.roots(x))(X)


@pytest.mark.parametrize("module, name, suggestion, in_jax", [
    ("hlo.numpy", "sine", "hlo.numpy.sin", False),
    ("hlo.numpy", "ufunc", None, True),
    ("hlo.numpy.linalg", "nrm", "hlo.numpy.linalg.norm", False),
    ("hlo.lax", "cosh_", "hlo.lax.cosh", False),
    ("hlo.lax", "create_token", None, True),
    ("hlo.nn", "rellu", "hlo.nn.relu", False),
    ("hlo.lax", "rng_uniform", None, True),
    ("hlo.random", "normall", "hlo.random.normal", False),
    ("hlo.random", "key_impl", None, True),
])
def test_a_missing_name_suggests_the_nearest_and_says_whether_jax_has_it(module, name, suggestion,
                                                                         in_jax):
    mod = sys.modules[module]
    with pytest.raises(AttributeError) as e:
        getattr(mod, name)
    msg = str(e.value)
    assert msg.startswith(f"module {module!r} has no attribute {name!r}")
    if suggestion:
        assert f"did you mean {suggestion}" in msg
    jax_module = module.replace("hlo.", "jax.", 1)
    assert (f"{jax_module}.{name} exists in jax; hlo does not have it yet" in msg) == in_jax
    assert hasattr(sys.modules.get(jax_module) or __import__(jax_module, fromlist=["x"]), name) == in_jax
    assert not hasattr(mod, name)  # and hasattr / getattr(..., None) keep working


def test_the_list_of_jax_names_is_jaxs():
    from hlo.base import jax_names, missing
    for jm, names in jax_names.JAX_NAMES.items():
        assert sorted(names) == missing.jax_public_names(jm), (
            f"{jm} changed in jax {jax.__version__}: python -m hlo.base.missing rewrites the list")


def test_asking_for_a_missing_name_imports_no_jax():
    code = ("import sys, hlo, hlo.numpy as hnp\n"
            "assert not hasattr(hnp, 'ufunc')\n"
            "try:\n    hnp.ufunc\nexcept AttributeError as e:\n    assert 'jax.numpy' in str(e)\n"
            "assert 'jax' not in sys.modules, 'jax imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------------------------
# ShapeDtypeStruct
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, kind, text", [
    ((None, 4), TypeError, "dimension 0 of shape (None, 4) is None: unknown dimensions are not "
                           "supported; give the size, or name a symbolic one"),
    ((3, "2a"), TypeError, "dimension 1 of shape (3, '2a') is '2a', not a size or a dimension "
                           "expression (unexpected 'a' in dimension '2a')"),
    ((3, b"a"), TypeError, "dimension 1 of shape (3, b'a') is b'a' of type bytes, not an int"),
    ((3, 2.5), TypeError, "dimension 1 of shape (3, 2.5) is 2.5 of type float"),
    ((-1,), ValueError, "dimension 0 of shape (-1,) is negative"),
    (None, TypeError, "shape must be a tuple of ints, got None"),
])
def test_shape_dtype_struct_names_the_bad_dimension(shape, kind, text):
    with pytest.raises(kind) as e:
        hlo.ShapeDtypeStruct(shape, np.float32)
    assert text in str(e.value)


def test_shape_dtype_struct_accepts_numpy_ints_and_a_bare_int():
    assert hlo.ShapeDtypeStruct((np.int64(3), 4), np.float32).shape == (3, 4)
    assert hlo.ShapeDtypeStruct(5, np.float32).shape == (5,)


# ------------------------------------------------------------------------------------------------
# jax interop
# ------------------------------------------------------------------------------------------------

@jax.tree_util.register_pytree_node_class
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten(self):
        return (self.a, self.b), "meta"

    @classmethod
    def tree_unflatten(cls, aux, children):
        assert aux == "meta"
        return cls(*children)


class Point:
    def __init__(self, x, scale):
        self.x, self.scale = x, scale


jax.tree_util.register_pytree_node(Point, lambda p: ((p.x,), p.scale),
                                   lambda scale, ch: Point(ch[0], scale))


def test_jax_registered_pytrees_are_pytrees_for_hlo():
    def f(p, q):
        return Pair(p.a * q.scale + q.x, p.a - p.b), Point(p.b, q.scale)
    args = (Pair(X, X * 3), Point(X + 1, 2.0))
    for _ in range(2):  # the second call runs the cached executable
        (r, s), (jr, js) = hlo.jit(f)(*args), jax.jit(f)(*args)
        assert type(r) is Pair and type(s) is Point and s.scale == 2.0
        for a, b in [(r.a, jr.a), (r.b, jr.b), (s.x, js.x)]:
            np.testing.assert_allclose(a, np.asarray(b))
    leaves, td = hlo.tree_util.tree_flatten(args)
    assert len(leaves) == 3
    assert hlo.tree_util.tree_unflatten(td, leaves)[1].scale == 2.0
    g = hlo.grad(lambda p: (p.a * p.b).sum())(Pair(X, X + 1))
    assert type(g) is Pair
    np.testing.assert_allclose(g.a, X + 1)


def test_jax_shape_dtype_struct_stands_in_for_an_array():
    f = lambda x: x * 2
    a = hlo.jit(f).lower(jax.ShapeDtypeStruct((3, 4), jnp.bfloat16)).as_text()
    b = hlo.jit(f).lower(hlo.ShapeDtypeStruct((3, 4), jnp.bfloat16)).as_text()
    assert a == b and "bf16[3,4]" in a
    c = hlo.jit(f).lower(jax.ShapeDtypeStruct((2,), np.float32)).compile()
    np.testing.assert_array_equal(c(np.ones(2, np.float32)), [2, 2])
    with pytest.raises(hlo.errors.ArgumentTypeError, match="only in f.lower"):
        hlo.jit(f)(jax.ShapeDtypeStruct((2,), np.float32))


@pytest.mark.parametrize("spec, short", [("float32[4,8]", "f32[4,8]"), ("bfloat16[2]", "bf16[2]"),
                                         ("int8[3,1]", "s8[3,1]"), ("bool[]", "pred[]"),
                                         ("float8_e4m3fn[2]", "f8e4m3fn[2]")])
def test_cli_accepts_numpy_dtype_names(spec, short):
    from hlo.tools.cli import parse_spec
    a, b = parse_spec(spec), parse_spec(short)
    assert a == b


def test_cli_names_both_spellings_for_an_unknown_dtype():
    from hlo.tools.cli import CliError, parse_spec
    with pytest.raises(CliError, match="unknown element type 'floot32'.*float32"):
        parse_spec("floot32[4]")


# ------------------------------------------------------------------------------------------------
# Feedback: the compile's stages in the log, and a progress line for long compiles
# ------------------------------------------------------------------------------------------------

def _chain(x):
    for i in range(3):
        x = hnp.tanh(x @ x.T) + i
    return x


def _stages(records, what):
    return [r.getMessage().split(": ", 1)[1].split(" ")[0]
            for r in records if r.name == "hlo.compile" and r.getMessage().startswith(what)]


def test_compile_stages_are_logged_as_they_end(caplog):
    import logging
    x = np.ones((4, 4), np.float32)
    with caplog.at_level(logging.INFO, logger="hlo"), hlo.config.override(cache=False):
        hlo.jit(_chain, target="cpu")(x)
    assert _stages(caplog.records, "hlo.jit(_chain)") == [
        "trace", "cache", "passes", "codegen", "llvm", "load", "compiled"]
    last = caplog.records[-1].getMessage()
    assert "compiled in" in last and "llvm" in last and "passes" in last
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="hlo"):
        lowered = hlo.jit(_chain).lower(x)  # lowering alone, then compiling: two entries
        lowered.compile(target="interpreter")
    assert _stages(caplog.records, "hlo.jit(_chain)") == ["trace", "traced", "passes", "compiled"]


def test_a_failed_compile_says_so_in_the_log(caplog):
    import logging
    with caplog.at_level(logging.INFO, logger="hlo"), pytest.raises(ValueError):
        hlo.jit(_bad_broadcast)(X)
    assert _stages(caplog.records, "hlo.jit(_bad_broadcast)") == ["trace", "failed"]


def test_no_compile_log_unless_asked(caplog):
    import logging
    with caplog.at_level(logging.WARNING, logger="hlo"):
        hlo.jit(_chain, target="interpreter")(np.ones((2, 2), np.float32))
    assert not [r for r in caplog.records if r.name == "hlo.compile"]


def test_hlo_log_compile_prints_stages_to_stderr():
    code = ("import numpy as np, hlo, hlo.numpy as hnp\n"
            "hlo.jit(lambda x: hnp.sin(x) * 2, target='interpreter')(np.ones(3, np.float32))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, HLO_LOG="compile"))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("hlo.compile: hlo.jit(<lambda>): trace ")
    assert lines[-1].startswith("hlo.compile: hlo.jit(<lambda>): compiled in ")
    assert "hlo: compiling" not in r.stderr  # the log replaces the progress line


def test_progress_line_for_long_compiles(monkeypatch):
    import io

    from hlo.staging import progress
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)  # every compile counts as long here
    monkeypatch.setattr(progress, "TICK_S", 0.01)
    with hlo.config.override(compile_progress=True, cache=False):
        hlo.jit(_chain, target="cpu")(np.ones((4, 4), np.float32))
    text = err.getvalue()
    assert text.startswith("\rhlo: compiling hlo.jit(_chain): "), text
    assert text.endswith("\n") and text.count("\n") == 1
    assert "\rhlo: hlo.jit(_chain) compiled in " in text and "llvm" in text
    # not a terminal (as here), and not forced: no line and no timer thread
    err.truncate(0), err.seek(0)
    monkeypatch.setattr(progress.threading, "Timer", None)  # would fail if one were started
    with hlo.config.override(cache=False):
        hlo.jit(_chain, target="cpu")(np.ones((5, 5), np.float32))
    assert err.getvalue() == ""


# ------------------------------------------------------------------------------------------------
# LLVM IR and assembly of a cpu executable
# ------------------------------------------------------------------------------------------------

def test_llvm_ir_and_assembly_of_a_cpu_executable(tmp_path):
    from hlo.runtime.cpu.abi import ENTRY
    f = hlo.jit(lambda x: hnp.tanh(x) * 2)
    x = np.ones(64, np.float32)
    with hlo.config.override(cache=False):
        c = f.lower(x).compile(target="cpu")
    llvm, asm = c.as_text("llvm"), c.as_text("asm")
    assert "define" in llvm and ENTRY in llvm
    assert ".text" in asm and f"{ENTRY}:" in asm
    assert c.as_text("llvm") == llvm  # the same pipeline again: the same text
    d = tmp_path / "dump"
    c2 = f.lower(x).compile(target="cpu", dump_dir=str(d))  # (a compile with a dump is not cached)
    assert (d / "asm.s").read_text() == c2.as_text("asm") == asm
    assert (d / "llvm.opt.ll").read_text() == llvm
    assert ENTRY in (d / "llvm.ll").read_text()  # as emitted, before LLVM's passes
    np.testing.assert_allclose(c2(x), np.tanh(x) * 2, rtol=1e-6)


def test_llvm_listing_is_refused_clearly_where_there_is_none(tmp_path):
    c = hlo.jit(lambda x: x + 1).lower(X).compile(target="interpreter")
    with pytest.raises(ValueError, match=r"as_text\('llvm'\) is for target 'cpu'"):
        c.as_text("llvm")
    with pytest.raises(ValueError, match=r"as_text\('sass'\) is for target 'cuda'"):
        c.as_text("sass")
    with pytest.raises(ValueError, match="unknown dialect 'cubin'"):
        c.as_text("cubin")
    with hlo.config.override(cache=True, cache_dir=str(tmp_path / "cache")):
        hlo.jit(lambda x: x + 1).lower(X).compile(target="cpu")
        cached = hlo.jit(lambda x: x + 1).lower(X).compile(target="cpu")
    assert cached.from_cache
    with pytest.raises(ValueError, match="loaded .from the compilation cache or a .hlox file"):
        cached.as_text("asm")
