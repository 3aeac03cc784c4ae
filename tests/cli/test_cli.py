"""The ``hlo`` command line: compile / run / inspect / opt / cache, and its errors (one line,
exit status 2 for a malformed command line, 1 otherwise, never a traceback).

Most cases call ``hlo.tools.cli.main`` in-process (fast); one end-to-end run goes through
``python -m hlo`` in subprocesses, as a user would."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hlo.tools.cli import main

MODEL = textwrap.dedent('''
    import hlo.numpy as hnp

    def mlp(x, w, b, scale=1.0):
        return hnp.tanh(x @ w + b) * scale

    def pair(x, y):
        return x + y, x * y

    def branchy(x):
        if x.sum() > 0:   # Python control flow on a traced value
            return x
        return -x

    NOT_A_FUNCTION = 3

    import hlo

    @hlo.jit(static_argnames=("n",))
    def powered(x, n=2):
        return x ** n
''')


def run_cli(*args, cwd=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "hlo", *args], capture_output=True, text=True,
                          cwd=cwd, env=e, timeout=300)


@pytest.fixture
def model(tmp_path):
    p = tmp_path / "model.py"
    p.write_text(MODEL)
    return p


def test_end_to_end_subprocess(tmp_path, model):
    """compile (with a static argument and progress on stderr), inspect, run (with and without
    --output-dir) through ``python -m hlo``; the outputs match numpy."""
    out = tmp_path / "mlp.hlox"
    r = run_cli("compile", f"{model}:mlp", "--arg", "f32[4,8]", "--arg", "f32[8,3]", "--arg", "f32[3]",
                "--static", "scale=2.0", "-o", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for stage in ("tracing...", "cache...", "passes...", "codegen...", "writing..."):
        assert stage in r.stderr
    assert "wrote" in r.stdout and "mlp(x: f32[4,8], w: f32[8,3], b: f32[3]) -> (f32[4,3])" in r.stdout
    assert out.exists()

    r = run_cli("inspect", str(out))
    assert r.returncode == 0, r.stderr
    for piece in ("signature: mlp(x: f32[4,8], w: f32[8,3], b: f32[3]) -> (f32[4,3])", "native kernels (",
                  "memory: arguments 236 B, outputs 48 B", "optimized IR:", "func @main", "tanh"):
        assert piece in r.stdout

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (8, 3), (3,)))
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "wb.npz", w=w, b=b)
    r = run_cli("run", str(out), "--input", str(tmp_path / "x.npy"), str(tmp_path / "wb.npz"),
                "--output-dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "output_0.npy")
    ref = np.tanh(x.astype(np.float64) @ w + b) * 2.0
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)

    r = run_cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "wb.npz"))
    assert r.returncode == 0, r.stderr
    assert "output 0: f32[4,3]" in r.stdout and "min" in r.stdout and "mean" in r.stdout

    # a bad command line through the real entry point: one line, status 2, no traceback
    r = run_cli("compile", f"{model}:mlp", "--arg", "f32[16,x]", "-o", str(out))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "dimension 'x'" in r.stderr


def _err(capsys, *argv):
    status = main(list(argv))
    err = capsys.readouterr().err
    lines = [l for l in err.strip().splitlines() if not l.startswith("hlo compile: tracing")]
    assert "Traceback" not in err
    return status, lines[-1] if lines else ""


@pytest.mark.parametrize("spec, status, text", [
    ("f32[16,x]", 2, "dimension 'x' is not a non-negative integer (a symbolic dimension: a .hlox holds"),
    ("q32[3]", 2, "unknown element type 'q32'"),
    ("f32", 2, "expected a type like f32[16,64,512]"),
    ("f32[-1]", 2, "dimension '-1'"),
    ("f32[10**20,8]", 2, "dimension '10**20'"),
    ("f32[100000000000000000000,8]", 2, "more than an array can hold"),
])
def test_bad_arg_specs(capsys, model, tmp_path, spec, status, text):
    st, line = _err(capsys, "compile", f"{model}:mlp", "--arg", spec, "-o", str(tmp_path / "a.hlox"))
    assert st == status and text in line and line.startswith("hlo: error:")


def test_bad_function_references(capsys, model, tmp_path):
    o = str(tmp_path / "a.hlox")
    st, line = _err(capsys, "compile", str(model), "--arg", "f32[2]", "-o", o)
    assert st == 2 and "expected path/to/file.py:function" in line
    st, line = _err(capsys, "compile", str(tmp_path / "missing.py") + ":f", "--arg", "f32[2]", "-o", o)
    assert st == 1 and "missing.py: no such file" in line
    st, line = _err(capsys, "compile", f"{model}:nope", "--arg", "f32[2]", "-o", o)
    assert st == 1 and "has no function 'nope'" in line and "mlp" in line
    st, line = _err(capsys, "compile", f"{model}:NOT_A_FUNCTION", "-o", o)
    assert st == 1 and "not a function" in line
    st, line = _err(capsys, "compile", f"{model}:mlp", "--arg", "f32[2]", "-o", str(tmp_path / "a.bin"))
    assert st == 2 and ".hlox" in line
    st, line = _err(capsys, "compile", f"{model}:mlp", "--arg", "f32[2]", "-o", o, "--target", "tpu")
    assert st == 1 and "unknown target 'tpu'" in line
    st, line = _err(capsys, "compile")
    assert st == 2 and "required" in line
    st, line = _err(capsys, "compile", f"{model}:mlp", "--arg", "f32[2]", "-o",
                    str(tmp_path / "missing" / "dir" / "a.hlox"))
    assert st == 2 and "no such folder" in line and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("static", ["scale=foo(", "scale=[1,", "scale=1 2"])
def test_a_static_value_that_is_neither_a_literal_nor_a_word_is_refused(capsys, model, tmp_path,
                                                                         static):
    st, line = _err(capsys, "compile", f"{model}:mlp", "--arg", "f32[2]", "--static", static,
                    "-o", str(tmp_path / "a.hlox"))
    assert st == 2 and "is not a Python literal" in line and not (tmp_path / "a.hlox").exists()


def test_errors_in_the_users_code_name_the_line(capsys, tmp_path, model):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\n\nx = 1 / 0\n")
    st, line = _err(capsys, "compile", f"{bad}:f", "--arg", "f32[2]", "-o", str(tmp_path / "a.hlox"))
    assert st == 1 and f"{bad}:3:" in line and "ZeroDivisionError" in line
    syn = tmp_path / "syn.py"
    syn.write_text("def f(x):\n    return x +\n")
    st, line = _err(capsys, "compile", f"{syn}:f", "--arg", "f32[2]", "-o", str(tmp_path / "a.hlox"))
    assert st == 1 and "syn.py:2: syntax error" in line
    # Python control flow on a traced value: the tracer's error, with the user's line
    st, line = _err(capsys, "compile", f"{model}:branchy", "--arg", "f32[2]", "-o", str(tmp_path / "a.hlox"))
    assert st == 1 and "model.py:11:" in line
    # wrong number of --arg for the function
    st, line = _err(capsys, "compile", f"{model}:mlp", "--arg", "f32[2,2]", "-o", str(tmp_path / "a.hlox"))
    assert st == 1 and "mlp" in line


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A pair(x, y) executable compiled in-process (with a dump directory)."""
    d = tmp_path_factory.mktemp("saved")
    (d / "model.py").write_text(MODEL)
    out = d / "pair.hlox"
    assert main(["compile", f"{d / 'model.py'}:pair", "--arg", "f32[2,3]", "--arg", "f32[2,3]",
                 "-o", str(out), "--dump-dir", str(d / "dump"), "-q"]) == 0
    return d, out


def test_dump_dir_and_multiple_outputs(saved, capsys):
    d, out = saved
    dumps = os.listdir(d / "dump")
    flat = [f for _, _, fs in os.walk(d / "dump") for f in fs]
    assert dumps and "optimized.hlo" in flat and "buffer-assignment.txt" in flat
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", x + 1)
    capsys.readouterr()
    assert main(["run", str(out), "--input", str(d / "x.npy"), str(d / "y.npy"),
                 "--output-dir", str(d / "o")]) == 0
    np.testing.assert_array_equal(np.load(d / "o" / "output_0.npy"), x + x + 1)
    np.testing.assert_array_equal(np.load(d / "o" / "output_1.npy"), x * (x + 1))


def test_jit_decorated_function_with_static_argument(model, tmp_path, capsys):
    out = tmp_path / "p.hlox"
    assert main(["compile", f"{model}:powered", "--arg", "f32[5]", "--static", "n=3", "-o", str(out),
                 "-q"]) == 0
    assert "powered(x: f32[5])" in capsys.readouterr().out
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out), "--input", str(tmp_path / "x.npy"), "--output-dir", str(tmp_path)]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "output_0.npy"), x.astype(np.float64) ** 3, rtol=1e-6)
    st, line = _err(capsys, "compile", f"{model}:powered", "--arg", "f32[5]", "--static", "3",
                    "-o", str(out))
    assert st == 2 and "expected name=value" in line


def test_run_and_inspect_errors(saved, capsys, tmp_path):
    d, out = saved
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    np.save(tmp_path / "bad.npy", np.zeros((3, 2), np.float32))
    np.save(tmp_path / "f64.npy", np.zeros((2, 3), np.float64))
    st, line = _err(capsys, "run", str(out), "--input", str(tmp_path / "x.npy"), str(tmp_path / "bad.npy"))
    assert st == 1 and "input 1 (y" in line and "is f32[3,2]" in line and "takes f32[2,3]" in line
    st, line = _err(capsys, "run", str(out), "--input", str(tmp_path / "x.npy"), str(tmp_path / "f64.npy"))
    assert st == 1 and "is f64[2,3]" in line
    st, line = _err(capsys, "run", str(out), "--input", str(tmp_path / "x.npy"))
    assert st == 1 and "takes 2 input(s), got 1" in line
    st, line = _err(capsys, "run", str(out), "--input", str(tmp_path / "nothere.npy"))
    assert st == 1 and "no such file" in line
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    st, line = _err(capsys, "run", str(out), "--input", str(txt))
    assert st == 1 and "not a .npy or .npz file" in line and "pickle" not in line
    for cmd in ("run", "inspect"):
        st, line = _err(capsys, cmd, str(txt))
        assert st == 1 and "not an hlo executable" in line
        st, line = _err(capsys, cmd, str(tmp_path / "none.hlox"))
        assert st == 1 and "no such file" in line
    damaged = tmp_path / "damaged.hlox"
    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    st, line = _err(capsys, "inspect", str(damaged))
    assert st == 1 and "checksum" in line
    for n in ("-3", "0", "x"):
        st, line = _err(capsys, "run", str(out), "--repeat", n, "--input", str(tmp_path / "x.npy"))
        assert st == 2 and f"--repeat: '{n}' is not a positive integer" in line


def test_inspect_sections(saved, capsys):
    _, out = saved
    assert main(["inspect", str(out), "--no-ir"]) == 0
    text = capsys.readouterr().out
    assert "signature: pair(x: f32[2,3], y: f32[2,3]) -> (f32[2,3], f32[2,3])" in text
    assert "buffer plan:" in text and "call sequence:" in text and "optimized IR:" not in text


def test_opt_dispatches_to_the_passes_tool(tmp_path, capsys):
    from hlo.tools.opt import main as opt_main
    src = tmp_path / "m.hlo"
    src.write_text(textwrap.dedent('''
        module @m

        func @main(%arg0: f32[4]) -> (f32[4]) {
          %0 = add(%arg0, %arg0) : f32[4]
          %1 = multiply(%arg0, %arg0) : f32[4]
          return(%0)
        }
    '''))
    assert main(["opt", "--passes=dce", str(src)]) == 0
    via_hlo = capsys.readouterr().out
    assert opt_main(["--passes=dce", str(src)]) == 0
    direct = capsys.readouterr().out
    assert via_hlo == direct and "multiply" not in via_hlo and "add" in via_hlo
    assert main(["opt", "--passes=no-such-pass", str(src)]) == 1


def test_cache_command(capsys, tmp_path):
    from hlo import config
    with config.override(cache_dir=str(tmp_path / "c")):
        assert main(["cache"]) == 0
        out = capsys.readouterr().out
        assert str(tmp_path / "c") in out and "0 entries" in out
        import hlo
        import hlo.numpy as hnp
        hlo.jit(lambda x: hnp.sin(x) + 1, target="cpu")(np.ones(3, np.float32))
        assert main(["cache"]) == 0
        assert "1 entry" in capsys.readouterr().out
        assert main(["cache", "clear"]) == 0
        capsys.readouterr()
        assert main(["cache"]) == 0
        assert "0 entries" in capsys.readouterr().out


def test_compile_says_when_it_came_from_the_cache(capsys, tmp_path, model):
    """The second ``hlo compile`` of the same function is served by the persistent cache, and
    says so (from the executable's own ``from_cache``, not from which stages it reported)."""
    from hlo import config
    argv = ["compile", f"{model}:mlp", "--arg", "f32[4,8]", "--arg", "f32[8,3]", "--arg", "f32[3]",
            "--static", "scale=2.0", "-o", str(tmp_path / "m.hlox")]
    with config.override(cache_dir=str(tmp_path / "c")):
        assert main(argv) == 0
        assert "from the compilation cache" not in capsys.readouterr().err
        assert main(argv) == 0
        assert "from the compilation cache" in capsys.readouterr().err


def test_no_command_prints_usage(capsys):
    assert main([]) == 2
    assert "compile" in capsys.readouterr().err
