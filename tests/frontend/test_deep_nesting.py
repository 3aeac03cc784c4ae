"""No recursion limits (issue 35): pytrees 5,000 deep as arguments, results and in a saved
executable's signature; control flow nested 300 deep (jax's depth at its default limit); IR text
nested 5,000 deep refused with a ParseError naming the depth (and parsed when under the limit),
also through ``hlo opt``."""
import collections
import random
import subprocess
import sys

import numpy as np
import pytest

import hlo
import hlo.lax as lax
from hlo import tree_util as tu
from hlo.ir.errors import ParseError
from hlo.ir.parser import MAX_NESTING, parse_module
from hlo.ir.printer import print_module

DEEP = 5000


def nest(x, n, kind=tuple):
    for i in range(n):
        x = (x,) if kind is tuple else [x] if kind is list else {"k": x}
    return x


def unnest(t):
    while isinstance(t, (tuple, list, dict)):
        t = t["k"] if isinstance(t, dict) else t[0]
    return t


# --- tree_util --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", [tuple, list, dict])
def test_tree_util_walks_5000_deep_structures(kind):
    tree = nest(3, DEEP, kind)
    leaves, td = tu.tree_flatten(tree)
    assert leaves == [3] and td.num_leaves == 1 and td.num_nodes == DEEP + 1
    back = tu.tree_unflatten(td, [7])
    assert unnest(back) == 7
    td2 = tu.tree_structure(back)
    assert td2 == td and hash(td2) == hash(td) and td2 is not td
    assert repr(td).count("*") == 1
    paths, td3 = tu.tree_flatten_with_path(tree)
    assert td3 == td and len(paths[0][0]) == DEEP and paths[0][1] == 3
    mapped = tu.tree_map(lambda v: v + 1, tree)
    assert unnest(mapped) == 4 and tu.tree_structure(mapped) == td
    # a difference at the bottom is found and named
    other = tu.tree_structure(nest((1, 2), DEEP - 1, kind) if kind is not dict else
                              nest({"k": 1, "j": 2}, DEEP - 1, kind))
    assert td != other
    assert "at " in tu.describe_difference(td, other)


def _random_tree(r, depth=0):
    k = r.randrange(7 if depth < 5 else 1)
    if k == 0:
        return r.choice([1, 2.5, np.float32(3), None])
    kids = [_random_tree(r, depth + 1) for _ in range(r.randrange(4))]
    if k == 1:
        return tuple(kids)
    if k == 2:
        return kids
    if k == 3:
        return {f"k{i}": c for i, c in enumerate(kids)}
    if k == 4:
        return collections.OrderedDict((f"z{i}", c) for i, c in enumerate(kids))
    if k == 5:
        return collections.namedtuple("P", "a b")(*(kids + [0, 0])[:2])
    return nest(tuple(kids), r.randrange(1, 200))  # a deep chain in a broad tree


def test_flatten_matches_the_paths_and_round_trips_random_trees():
    # the fast recursive walk (first levels) and the iterative one (deeper) agree everywhere
    r = random.Random(35)
    for _ in range(150):
        t = _random_tree(r)
        leaves, td = tu.tree_flatten(t)
        paths, td2 = tu.tree_flatten_with_path(t)
        assert td == td2 and hash(td) == hash(td2)
        assert [id(v) for _, v in paths] == [id(v) for v in leaves]
        back = tu.tree_unflatten(td, leaves)
        assert tu.tree_structure(back) == td
        assert repr(tu.tree_structure(back)) == repr(td)
        assert tu.tree_leaves(back) == leaves


# --- jit, save, load ----------------------------------------------------------------------------

def deep_fn(t):
    x = unnest(t)
    out = x * 2.0
    for _ in range(DEEP):
        out = [out]
    return out, {"sum": x.sum()}


X = np.arange(3, dtype=np.float32)


def test_jit_takes_and_returns_5000_deep_pytrees():
    out, extra = hlo.jit(deep_fn)(nest(X, DEEP))
    np.testing.assert_array_equal(unnest(out), X * 2)
    assert float(extra["sum"]) == 3.0
    assert tu.tree_structure(out) == tu.tree_structure(nest(0, DEEP, list))


def test_a_5000_deep_signature_is_saved_and_loaded(tmp_path):
    from hlo.staging.saved import tree_from_json, tree_to_json
    c = hlo.jit(deep_fn).lower(nest(X, DEEP)).compile()
    path = str(tmp_path / "deep.hlox")
    c.save(path)
    loaded = hlo.load(path)
    out, extra = loaded(nest(X + 1, DEEP))
    np.testing.assert_array_equal(unnest(out), (X + 1) * 2)
    assert tu.tree_structure(out) == tu.tree_structure(nest(0, DEEP, list))
    with pytest.raises(TypeError, match="became"):  # the structure differs 4,999 levels down
        loaded(nest(X, DEEP - 1))
    # deep structures are written flat (JSON nests ~1,000 deep at most); shallow ones as before
    j = tree_to_json(tu.tree_structure(nest(0, DEEP)))
    assert list(j) == ["nodes"] and len(j["nodes"]) == DEEP + 1
    assert tree_from_json(j) == tu.tree_structure(nest(0, DEEP))
    assert tree_to_json(tu.tree_structure(((0, 1), {"a": 2}))) == \
        {"tuple": [{"tuple": [{"leaf": 1}, {"leaf": 1}]}, {"dict": [["a", {"leaf": 1}]]}]}


@pytest.mark.parametrize("nodes", [
    [], "leaf", [["tuple", 2], "leaf"], ["leaf", "leaf"], [["tuple", -1]], [["dict", [1.5]]],
    [["set", 1], "leaf"], [["tuple", True], "leaf"], [["list", 10 ** 9]]])
def test_malformed_flat_trees_are_refused(nodes):
    from hlo.runtime.manifest_schema import _Bad, _leaves
    from hlo.staging.saved import tree_from_json
    with pytest.raises(ValueError):
        tree_from_json({"nodes": nodes})
    with pytest.raises(_Bad):
        _leaves({"nodes": nodes}, "signature.in_tree")


# --- control flow -------------------------------------------------------------------------------

def _nested_cond(n):
    def body(x):
        if n == 0:
            return x + 1.0
        return lax.cond(x[0] > -1e9, _nested_cond(n - 1), lambda y: y - 1.0, x)
    return body


def test_cond_nested_300_deep_traces_compiles_and_runs():
    limit = sys.getrecursionlimit()
    f = hlo.jit(_nested_cond(300))
    np.testing.assert_array_equal(f(np.zeros(2, np.float32)), [1.0, 1.0])
    assert sys.getrecursionlimit() == limit  # raised while tracing only


def test_cond_nested_1000_deep_traces():
    m = hlo.make_ir(_nested_cond(1000))(np.zeros(2, np.float32))
    assert sum(op.name == "if" for op in m.walk()) == 1000


# --- the parser ---------------------------------------------------------------------------------

def attr_text(n):
    return ("func @main(%a: f32[2]) -> (f32[2]) {\n  %b = transpose(%a) {permutation = "
            + "[" * n + "0" + "]" * n + "} : f32[2]\n  return(%b)\n}\n")


def regions_text(n):
    out = ["func @main(%p: pred[], %a: f32[2]) -> (f32[2]) {"]
    for k in range(n):
        out += [f"%r{k} = if(%p) : f32[2] {{", "^true_branch():"]
    out.append("%rz = add(%a, %a) : f32[2]")
    for k in reversed(range(n)):
        out += [f"return(%r{k + 1})" if k + 1 < n else "return(%rz)",
                "^false_branch():", "return(%a)", "}"]
    out += ["return(%r0)", "}"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("text, what", [
    (attr_text(DEEP), f"nested more than {MAX_NESTING} deep"),
    (regions_text(DEEP), f"nested more than {MAX_NESTING} deep"),
    (attr_text(40), "attribute list nested more than 16 deep"),
    ("func @main() -> (f32[1]) {\n %c = constant dense<" + "[" * 100 + "1.0" + "]" * 100
     + "> : f32[1]\n return(%c)\n}\n", "dense literal nested more than 64 deep"),
])
def test_parser_refuses_deep_nesting_with_a_parse_error(text, what):
    with pytest.raises(ParseError, match=what) as e:
        parse_module(text)
    assert e.value.line >= 1


def test_parser_reads_regions_nested_under_the_limit():
    m = parse_module(regions_text(1500))
    text = print_module(m)
    assert text.count("if(") == 1500
    assert print_module(parse_module(text)) == text


def _opt(path):
    return subprocess.run([sys.executable, "-m", "hlo", "opt", str(path), "--passes=cse,dce"],
                          capture_output=True, text=True, timeout=600)


def test_cli_opt_on_deep_and_undecodable_files_prints_one_line(tmp_path):
    p = tmp_path / "deep.hlo"
    p.write_text(attr_text(DEEP))
    r = _opt(p)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"nested more than {MAX_NESTING} deep" in r.stderr
    b = tmp_path / "latin1.hlo"
    b.write_bytes(b"func @main(%a: f32[2]) -> (f32[2]) {\n  return(%a) // caf\xe9\n}\n")
    r = _opt(b)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "not UTF-8" in r.stderr and ":2:" in r.stderr
    ok = tmp_path / "nest.hlo"
    ok.write_text(regions_text(400))
    r = _opt(ok)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("if(") == 400
