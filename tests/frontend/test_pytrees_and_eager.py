"""hlo.tree_util against jax.tree_util, and hlo.numpy / hlo.lax / hlo.nn called outside
hlo.jit (each call compiled on its own and run on the default target)."""
import collections
import dataclasses

import jax
import numpy as np
import pytest

import hlo
import hlo.numpy as hnp
from hlo import tree_util as tu

NT = collections.namedtuple("NT", "a b")


@dataclasses.dataclass
class DC:
    x: object
    y: object
    tag: str = "t"


tu.register_dataclass(DC, data_fields=["x", "y"], meta_fields=["tag"])
jax.tree_util.register_dataclass(DC, data_fields=["x", "y"], meta_fields=["tag"])

TREES = [
    1, None, (), [], {}, (1, 2), [1, [2, (3, None)]], {"b": 1, "a": [2, 3], "c": {"z": 4, "y": None}},
    NT(1, (2, 3)), collections.OrderedDict([("z", 1), ("a", 2)]), DC(1, [2, 3]),
    collections.defaultdict(list, {"k": [1, 2]}), (np.ones(2), {"w": np.zeros(3)}),
]


@pytest.mark.parametrize("tree", TREES, ids=[type(t).__name__ + str(i) for i, t in enumerate(TREES)])
def test_flatten_unflatten_matches_jax(tree):
    leaves, td = tu.tree_flatten(tree)
    jleaves, jtd = jax.tree_util.tree_flatten(tree)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
    assert td.num_leaves == jtd.num_leaves
    rebuilt = tu.tree_unflatten(td, leaves)
    assert type(rebuilt) is type(tree)
    assert jax.tree_util.tree_structure(rebuilt) == jtd
    paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(tree)[0]]
    jpaths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    assert paths == jpaths
    assert hash(td) == hash(tu.tree_structure(tree)) and td == tu.tree_structure(tree)


def test_tree_map_and_differences():
    t = {"a": [1, 2], "b": (3,)}
    assert tu.tree_map(lambda x, y: x + y, t, t) == {"a": [2, 4], "b": (6,)}
    with pytest.raises(ValueError, match="structures differ"):
        tu.tree_map(lambda x, y: x, t, {"a": [1], "b": (3,)})
    d = tu.describe_difference(tu.tree_structure({"a": [1, 2]}), tu.tree_structure({"a": [1, 2, 3]}))
    assert d == "at ['a']: list of length 2 became length 3"
    d = tu.describe_difference(tu.tree_structure((1, {"k": 1})), tu.tree_structure((1, {"j": 1})))
    assert "dict keys ['k'] became ['j']" in d
    assert tu.tree_leaves([1, None, (2,)]) == [1, 2]
    with pytest.raises(ValueError, match="too few leaves"):
        tu.tree_unflatten(tu.tree_structure((1, 2)), [1])


def test_custom_nodes_can_be_registered_once():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))
    leaves, td = tu.tree_flatten([Pair(1, Pair(2, 3))])
    assert leaves == [1, 2, 3]
    out = tu.tree_unflatten(td, [4, 5, 6])
    assert out[0].b.b == 6
    with pytest.raises(ValueError, match="already registered"):
        tu.register_pytree_node(Pair, lambda p: ((), None), lambda aux, ch: None)


def test_hlo_numpy_outside_jit_runs_eagerly():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with hlo.config.override(target="interpreter"):
        y = hnp.sin(x) + 1  # hnp.sin returns a numpy array; "+ 1" is numpy's
        assert isinstance(y, np.ndarray)
        np.testing.assert_allclose(y, np.sin(x) + 1, rtol=1e-6)
        assert hnp.zeros((2, 2)).dtype == np.float32 and hnp.arange(4).dtype == np.int32
        np.testing.assert_array_equal(hnp.concatenate([x, x], axis=0), np.concatenate([x, x]))
        np.testing.assert_allclose(hlo.nn.softmax(x), jax.nn.softmax(x), rtol=1e-6)
        np.testing.assert_array_equal(hlo.lax.dynamic_slice(x, (1, 1), (1, 2)), x[1:, 1:3])
        s, i = hnp.sort(x[::-1], axis=0), hnp.argmax(x, axis=1)
        np.testing.assert_array_equal(s, np.sort(x[::-1], axis=0))
        np.testing.assert_array_equal(i, [2, 2])
        assert hnp.add(x, 2.5).dtype == np.float32  # Python scalars stay weakly typed
        assert hnp.add(x.astype(np.float16), 2.5).dtype == np.float16
        with pytest.raises(hlo.errors.ShapeError, match="add: shapes"):
            hnp.add(x, np.ones(4))
