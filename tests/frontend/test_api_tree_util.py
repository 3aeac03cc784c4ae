"""hlo.tree_util's functions added for jax's surface (issue 34), each against jax.tree_util."""
import collections
import dataclasses
import operator

import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
import hlo.tree_util as tu

jtu = pytest.importorskip("jax.tree_util")

Point = collections.namedtuple("Point", "x y")
TREES = [
    {"b": (1, 2), "a": [3, {"c": 4}]},
    [1, None, (2, 3)],
    Point(1, [2, 3]),
    (5,),
]


def _jkey(k):  # a jax key entry as hlo's string form
    return str(k)


@pytest.mark.parametrize("tree", TREES)
def test_paths_reductions_and_one_level_flattening_match_jax(tree):
    assert tu.tree_reduce(operator.add, tree) == jtu.tree_reduce(operator.add, tree)
    assert tu.tree_reduce(operator.add, tree, 100) == jtu.tree_reduce(operator.add, tree, 100)
    assert tu.tree_reduce_associative(operator.add, tree) == jtu.tree_reduce_associative(operator.add, tree)
    assert tu.tree_all(tree) == jtu.tree_all(tree)
    assert tu.tree_all(tu.tree_map(lambda x: x - 1, tree)) == jtu.tree_all(jtu.tree_map(lambda x: x - 1, tree))
    h = [(tu.keystr(p), x) for p, x in tu.tree_leaves_with_path(tree)]
    j = [("".join(map(_jkey, p)), x) for p, x in jtu.tree_leaves_with_path(tree)]
    assert h == j
    hm = tu.tree_map_with_path(lambda p, x, y: (tu.keystr(p), x + y), tree, tree)
    jm = jtu.tree_map_with_path(lambda p, x, y: ("".join(map(_jkey, p)), x + y), tree, tree)
    assert hm == jm
    hc, haux = tu.flatten_one_level(tree)
    jc, jaux = jtu.flatten_one_level(tree)
    assert list(hc) == list(jc)
    hk = [str(k) for k, _ in tu.flatten_one_level_with_keys(tree)[0]]
    jk = [str(k) for k, _ in jtu.flatten_one_level_with_keys(tree)[0]]
    if isinstance(tree, Point):  # jax 0.10 names both fields .x here; its paths say .x, .y
        jk = [".x", ".y"]
    assert hk == jk
    assert tu.is_tree_node(type(tree)) == jtu.is_tree_node(type(tree))


def test_leaves_and_nodes():
    for xs in ([1, 2.0, np.ones(2)], [1, (2,)], [None]):
        assert tu.all_leaves(xs) == jtu.all_leaves(xs)
    assert tu.is_tree_node(int) is False and tu.is_tree_node(dict) is True
    with pytest.raises(ValueError, match="can't flatten a leaf"):
        tu.flatten_one_level(3)
    with pytest.raises(TypeError, match="no leaves and no identity"):
        tu.tree_reduce_associative(operator.add, ())
    assert tu.tree_reduce_associative(operator.add, (), identity=0) == 0
    assert isinstance(tu.KeyPath, object) and callable(tu.KeyPath)


def test_broadcast_and_transpose_match_jax():
    prefix, full = (1, {"a": 2}), ((3, 4), {"a": [5, 6]})
    assert tu.tree_broadcast(prefix, full) == jtu.tree_broadcast(prefix, full)
    with pytest.raises(ValueError, match="does not match"):
        tu.tree_broadcast([1, 2], (3, 4))
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    outer, inner = tu.tree_structure([0, 0, 0]), tu.tree_structure({"a": 0, "b": 0})
    j = jtu.tree_transpose(jtu.tree_structure([0, 0, 0]), jtu.tree_structure({"a": 0, "b": 0}), tree)
    assert tu.tree_transpose(outer, inner, tree) == j
    assert tu.tree_transpose(outer, None, tree) == j
    with pytest.raises(TypeError, match="is not the outer structure"):
        tu.tree_transpose(outer, tu.tree_structure((0, 0)), tree)


def test_registrations_with_keys_static_nodes_and_partial_through_jit():
    @tu.register_pytree_with_keys_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten_with_keys(self):
            return [(tu.GetAttrKey("a"), self.a), (tu.GetAttrKey("b"), self.b)], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    @tu.register_static
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        scale: float

    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Pair(1, 2))] == [".a", ".b"]
    assert tu.tree_leaves([Cfg(2.0), 1]) == [1]

    @hlo.jit
    def f(p, cfg, g):
        return g(p.a * cfg.scale + p.b)

    g = tu.Partial(hnp.add, np.float32(10))
    out = f(Pair(np.float32(1), np.float32(2)), Cfg(3.0), g)
    np.testing.assert_allclose(out, 15.0)
    leaves, td = tu.tree_flatten(g)
    assert len(leaves) == 1 and tu.tree_unflatten(td, leaves)(1.0) == 11.0
