"""Saving a Compiled and loading it back: signatures and pytrees, analyses, argument checks,
refusals (wrong target, CPU features, symbols, runtime interface, corrupt bytes), and a fuzz loop
of byte flips and truncations that must never crash the process or link any code."""
from __future__ import annotations

import collections
import hashlib
import random
import struct

import numpy as np
import pytest
from aot_util import LinkCounter, forbidden, run_python

import hlo
import hlo.numpy as hnp
from hlo import aot
from hlo.runtime import hlox

S = hlo.ShapeDtypeStruct


def model(x, params, scale):
    h = hnp.tanh(x @ params["w"] + params["b"]) * scale
    return {"h": h, "stats": (hnp.sum(h, axis=1), hnp.max(x))}, [hnp.exp(params["b"])]


def _specs():
    return (S((4, 8), "float32"), {"w": S((8, 16), "float32"), "b": S((16,), "float32")}, 2.0)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 8)).astype(np.float32),
            {"w": rng.standard_normal((8, 16)).astype(np.float32),
             "b": rng.standard_normal(16).astype(np.float32)}, 2.0)


@pytest.fixture(scope="module")
def compiled():
    return aot.compile(model, *_specs(), target="cpu")


@pytest.fixture(scope="module")
def saved(compiled, tmp_path_factory):
    path = tmp_path_factory.mktemp("aot") / "model.hlox"
    compiled.save(path)
    return path


def _same_tree(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            _same_tree(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_tree(x, y)
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_round_trip_in_process(compiled, saved):
    exe = hlo.load(saved)
    assert isinstance(exe, hlo.LoadedExecutable)
    x, p, s = _inputs()
    _same_tree(compiled(x, p, s), exe(x, p, s))
    # against numpy in float64
    h = np.tanh(x.astype(np.float64) @ p["w"] + p["b"]) * 2.0
    out = exe(x, p, 2.0)
    np.testing.assert_allclose(out[0]["h"], h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[0]["stats"][0], h.sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[1][0], np.exp(p["b"].astype(np.float64)), rtol=1e-6)
    # keyword arguments are part of the structure, as for the Compiled
    with pytest.raises(hlox.InputMismatchError, match="positional arguments tuple of length 3 became length 1"):
        exe(x, params=p, scale=s)


def test_signature_text_and_analyses(compiled, saved):
    exe = hlo.load(saved)
    assert [a.shape for a in exe.in_avals] == [a.shape for a in compiled.in_avals]
    assert [a.dtype for a in exe.out_avals] == [a.dtype for a in compiled.out_avals]
    assert exe.signature_text() == "model(x: f32[4,8], params['b']: f32[16], params['w']: f32[8,16], scale: f32[])"
    assert exe.as_text() == compiled.as_text()
    assert exe.cost_analysis() == pytest.approx(compiled.cost_analysis())
    assert exe.memory_analysis().temp_size_in_bytes == compiled.memory_analysis().temp_size_in_bytes
    assert str(exe.memory_analysis()) == str(compiled.memory_analysis())
    m = exe.manifest
    assert m["format_version"] == hlox.FORMAT_VERSION == exe.format_version
    assert m["target"]["kind"] == "cpu" and m["target"]["triple"]
    assert m["signature"]["in_tree"] == {"tuple": [{"tuple": [{"leaf": 1}, {"dict": [
        ["b", {"leaf": 1}], ["w", {"leaf": 1}]]}, {"leaf": 1}]}, {"dict": []}]}
    assert m["call_sequence"] and m["buffer_plan"]["text"][0].startswith("buffer assignment")
    assert "cpu" in repr(exe) and "f32[4,16]" in repr(exe)


def test_dumps_loads_and_determinism(compiled):
    data = aot.dumps(compiled)
    assert data == aot.dumps(compiled)
    exe = aot.loads(data)
    x, p, s = _inputs(1)
    _same_tree(exe(x, p, s), compiled(x, p, s))


def test_loading_twice_and_calling_concurrently(saved):
    import threading
    a, b = hlo.load(saved), hlo.load(saved)
    x, p, s = _inputs(2)
    ref = a(x, p, s)
    results = []

    def work():
        for _ in range(20):
            results.append(b(x, p, s))
    ts = [threading.Thread(target=work) for _ in range(3)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    for r in results:
        _same_tree(r, ref)


def test_wrong_arguments_are_refused_clearly(saved):
    exe = hlo.load(saved)
    x, p, s = _inputs()
    with pytest.raises(hlo.ExecutableError) as e:
        exe(x[:2], p, s)
    assert isinstance(e.value, TypeError)
    assert "x is float32[2,8] (saved for f32[4,8])" in str(e.value)
    with pytest.raises(hlox.InputMismatchError, match=r"params\['w'\] is float64\[8,16\]"):
        exe(x, {"w": p["w"].astype(np.float64), "b": p["b"]}, s)
    with pytest.raises(hlox.InputMismatchError, match="structure differs"):
        exe(x, {"w": p["w"]}, s)
    with pytest.raises(hlox.InputMismatchError, match="structure differs"):
        exe(x, p)
    with pytest.raises(hlox.InputMismatchError, match="scale is a Python bool"):
        exe(x, p, True)
    with pytest.raises(hlox.InputMismatchError, match="scale is a str"):
        exe(x, p, "2")
    # a Python int fills a float scalar, like hlo.jit accepts it
    _same_tree(exe(x, p, 2), exe(x, p, 2.0))


def test_flat_signature_of_a_bare_module(tmp_path):
    from hlo.ir import parse_module
    from hlo.staging.stages import Lowered
    text = """module @m

func @main(%arg0: f32[3], %arg1: f32[3]) -> (f32[3], f32[]) {
  %0 = multiply(%arg0, %arg1) : f32[3]
  %1 = constant dense<0.0> : f32[]
  %2 = reduce(%0, %1) {dimensions = [0]} : f32[] {
    ^body(%3: f32[], %4: f32[]):
      %5 = add(%3, %4) : f32[]
      return(%5)
  }
  return(%0, %2)
}
"""
    c = Lowered(parse_module(text)).compile("cpu")
    c.save(tmp_path / "m.hlox")
    exe = hlo.load(tmp_path / "m.hlox")
    a, b = np.arange(3, dtype=np.float32), np.full(3, 2, np.float32)
    out = exe(a, b)
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[0], a * b)
    assert out[1] == 6.0
    with pytest.raises(hlox.InputMismatchError, match="takes 2 arrays, called with 1"):
        exe(a)
    with pytest.raises(hlox.InputMismatchError, match="positional arrays only"):
        exe(a, b=b)


def test_static_and_jit_functions(tmp_path):
    f = hlo.jit(lambda x, n: x * n + 1, static_argnums=(1,))
    c = aot.compile(f, S((5,), "int32"), 3)
    c.save(tmp_path / "f.hlox")
    exe = hlo.load(tmp_path / "f.hlox")
    x = np.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(exe(x), x * 3 + 1)
    c2 = aot.compile(lambda x, n: x - n, S((2,), "float64"), 4, static_argnums=(1,))
    np.testing.assert_array_equal(aot.loads(aot.dumps(c2))(np.ones(2)), np.full(2, -3.0))
    with pytest.raises(TypeError, match="pass static_argnums"):
        aot.compile(f, S((5,), "int32"), 3, static_argnums=(1,))


def test_containers_json_cannot_describe_refuse_to_save(tmp_path):
    Pair = collections.namedtuple("Pair", "a b")
    c = aot.compile(lambda p: p.a + p.b, Pair(S((2,), "float32"), S((2,), "float32")))
    with pytest.raises(hlox.SaveError, match="container .*Pair.*cannot describe"):
        c.save(tmp_path / "p.hlox")
    assert not (tmp_path / "p.hlox").exists()
    c = aot.compile(lambda d: d[(1, 2)] * 2, {(1, 2): S((2,), "float32")})
    with pytest.raises(hlox.SaveError, match=r"dict key \(1, 2\) of type tuple"):
        aot.dumps(c)
    c = aot.compile(lambda x: collections.OrderedDict(b=x, a=x + 1), S((2,), "float32"))
    out = aot.loads(aot.dumps(c))(np.zeros(2, np.float32))
    assert type(out) is collections.OrderedDict and list(out) == ["b", "a"]


def test_interpreter_target_has_nothing_to_save(tmp_path):
    c = aot.compile(lambda x: x + 1, S((2,), "float32"), target="interpreter")
    with pytest.raises(hlox.SaveError, match="target 'interpreter' has no native code"):
        c.save(tmp_path / "i.hlox")


# --------------------------------------------------------------------------------------------
# Refusals: every one before any code is linked
# --------------------------------------------------------------------------------------------

def _edited(data: bytes, edit) -> bytes:
    payload = hlox.loads(data)
    edit(payload.manifest, payload.sections)
    return hlox.dumps(payload)


REFUSALS = [
    ("unknown target", lambda m, s: m["target"].update(kind="tpu"),
     hlox.TargetMismatchError, "compiled for target 'tpu'; this hlo loads executables for 'cpu', 'cuda' only"),
    ("cuda kind without its code", lambda m, s: m["target"].update(kind="cuda"),
     hlox.CorruptFileError, "no native code section 'code.cuda'"),
    ("other architecture", lambda m, s: m["target"].update(triple="riscv64-unknown-linux-gnu"),
     hlox.TargetMismatchError, "compiled for riscv64-unknown-linux-gnu, this machine is"),
    ("other OS", lambda m, s: m["target"].update(triple=m["target"]["triple"].split("-")[0] + "-apple-darwin23"),
     hlox.TargetMismatchError, "apple-darwin23"),
    ("missing CPU feature", lambda m, s: m["target"].update(features=m["target"]["features"] + ",+hlo-imaginary-isa"),
     hlox.TargetMismatchError, "features this one .* lacks: hlo-imaginary-isa"),
    ("unresolvable symbol", lambda m, s: m["imports"].append("hlo_no_such_function_anywhere"),
     hlox.LoadError, "does not provide: hlo_no_such_function_anywhere"),
    ("runtime interface", lambda m, s: m["runtime"].update(format=99),
     hlox.FormatVersionError, "runtime interface 99"),
    ("no code section", lambda m, s: s.pop("code.cpu"),
     hlox.CorruptFileError, "no native code section 'code.cpu'"),
    ("malformed signature", lambda m, s: m["signature"].update(inputs=[{"dtype": "f99", "shape": [1]}]),
     hlox.CorruptFileError, "malformed manifest"),
    ("malformed tree", lambda m, s: m["signature"].update(in_tree={"set": []}),
     hlox.CorruptFileError, "malformed manifest"),
    ("wrong leaf count", lambda m, s: m["signature"].update(out_tree={"leaf": 1}),
     hlox.CorruptFileError, "malformed manifest"),
]


@pytest.mark.parametrize("name,edit,cls,msg", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_happen_before_linking(compiled, monkeypatch, name, edit, cls, msg):
    data = _edited(aot.dumps(compiled), edit)
    links = LinkCounter(monkeypatch)
    with pytest.raises(cls, match=msg):
        aot.loads(data, what="edited.hlox")
    assert links.count == 0


def test_a_newer_format_version_is_refused_by_name(compiled, tmp_path):
    data = bytearray(aot.dumps(compiled))
    struct.pack_into("<I", data, 8, hlox.FORMAT_VERSION + 1)
    body = bytes(data[:-32])
    (tmp_path / "new.hlox").write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(hlo.LoadError, match=f"format version {hlox.FORMAT_VERSION + 1}, by a newer hlo"):
        hlo.load(tmp_path / "new.hlox")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        hlo.load(tmp_path / "absent.hlox")
    with pytest.raises(hlo.LoadError, match="is a directory"):
        hlo.load(tmp_path)


def test_fuzz_byte_flips_and_truncations_never_link_or_crash(monkeypatch):
    c = aot.compile(lambda x: hnp.sum(x * 2.0), S((3,), "float32"))
    data = aot.dumps(c)
    rng = random.Random(1234)
    links = LinkCounter(monkeypatch)
    kinds = collections.Counter()
    for i in range(400):
        b = bytearray(data)
        if i % 3 == 0:
            b = b[:rng.randrange(len(data))]
        else:
            for _ in range(rng.choice((1, 1, 2, 8))):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            if b == data:
                continue
        with pytest.raises(hlox.LoadError) as e:
            aot.loads(bytes(b))
        kinds[type(e.value).__name__] += 1
    assert links.count == 0
    assert kinds["CorruptFileError"] > 300
    assert aot.loads(data)(np.ones(3, np.float32)) == 6.0   # the original still loads


# --------------------------------------------------------------------------------------------
# A fresh process: hlo.load imports no tracer, passes or code generator
# --------------------------------------------------------------------------------------------

def test_fresh_process_loads_without_the_compiler(saved, tmp_path):
    x, p, s = _inputs(3)
    np.savez(tmp_path / "in.npz", x=x, w=p["w"], b=p["b"])
    code = """
import json, sys
import numpy as np
import hlo
exe = hlo.load(sys.argv[1])
d = np.load(sys.argv[2])
out = exe(d["x"], {"w": d["w"], "b": d["b"]}, 2.0)
np.savez(sys.argv[3], h=out[0]["h"], s0=out[0]["stats"][0], s1=out[0]["stats"][1], e=out[1][0])
print(json.dumps({"modules": sorted(sys.modules), "cost": exe.cost_analysis(),
                  "temp": exe.memory_analysis().temp_size_in_bytes, "ir": exe.as_text()}))
"""
    res = run_python(code, str(saved), str(tmp_path / "in.npz"), str(tmp_path / "out.npz"))
    assert forbidden(res["modules"]) == []
    assert "hlo.aot" in res["modules"] and "hlo.runtime.cpu.executable" in res["modules"]
    exe = hlo.load(saved)
    assert res["ir"] == exe.as_text() and res["cost"] == exe.cost_analysis()
    got = np.load(tmp_path / "out.npz")
    ref = exe(x, p, s)
    np.testing.assert_array_equal(got["h"], ref[0]["h"])
    np.testing.assert_array_equal(got["s0"], ref[0]["stats"][0])
    np.testing.assert_array_equal(got["s1"], ref[0]["stats"][1])
    np.testing.assert_array_equal(got["e"], ref[1][0])


def test_import_hlo_is_light_and_the_frontend_loads_on_first_use():
    code = """
import json, sys
import hlo
light = sorted(m for m in sys.modules if m.startswith("hlo"))
f = hlo.jit(lambda x: x * 2)
print(json.dumps({"light": light, "after": sorted(sys.modules), "has": [hasattr(hlo, n) for n in
      ("numpy", "lax", "nn", "grad", "Compiled", "ShapeDtypeStruct", "load", "aot", "LoadError")]}))
"""
    res = run_python(code)
    # hlo.config's target names come from the target table (hlo.ir.targets: a table; hlo.ir's
    # package imports its modules on first use)
    assert res["light"] == ["hlo", "hlo.base", "hlo.base.fork_safety", "hlo.config", "hlo.ir",
                            "hlo.ir.targets", "hlo.tree_util"]
    assert "hlo.tracing.tracer" in res["after"] and "hlo.numpy" in res["after"]
    assert all(res["has"])


def test_saving_an_executable_that_came_from_the_compilation_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HLO_CACHE", "1")
    monkeypatch.setenv("HLO_CACHE_DIR", str(tmp_path / "cache"))

    def g(x):
        return hnp.cumsum(hnp.sin(x) * 3.0, axis=0)
    first = aot.compile(g, S((6,), "float32"))
    second = aot.compile(g, S((6,), "float32"))          # a persistent-cache hit: no passes ran
    assert getattr(second._artifact.optimize_result, "from_cache", False)
    x = np.linspace(0, 1, 6, dtype=np.float32)
    a, b = aot.loads(aot.dumps(first)), aot.loads(aot.dumps(second))
    np.testing.assert_array_equal(a(x), b(x))
    assert b.cost_analysis() == a.cost_analysis()
    assert b.manifest["call_sequence"] == a.manifest["call_sequence"]
    np.testing.assert_allclose(b(x), np.cumsum(np.sin(x.astype(np.float64)) * 3.0), rtol=1e-5)
