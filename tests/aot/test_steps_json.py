"""The step tree's JSON form (``hlo.runtime.steps``): what a saved executable carries."""
import json

import pytest

from hlo.runtime.steps import (
    BufRef,
    Copy,
    KernelCall,
    Launch,
    LibraryCall,
    Switch,
    While,
    describe_steps,
    steps_from_json,
    steps_to_json,
)


def _tree():
    a, o, t = BufRef("input", 0, 0, 64), BufRef("output", 1, 0, 64), BufRef("arena", 0, 128, 4)
    return [
        KernelCall("k0", [a, o], [False, True], 16, True, "loop"),
        Launch("g0", [a, o], [False, True], (4, 1, 1), (128, 1, 1), 256, [("i32", 7), ("f32", 0.5)], "row"),
        LibraryCall("cublaslt", "matmul", [a, o], [False, True], {"m": 4, "n": 4, "k": 4}),
        Copy(o, a, 64),
        While([KernelCall("c", [t], [True], 1, False)], t, [Copy(o, a, 64)]),
        Switch(t, False, [[Copy(o, a, 8)], []]),
    ]


def test_round_trip_through_json_text():
    tree = _tree()
    back = steps_from_json(json.loads(json.dumps(steps_to_json(tree))))
    assert back == tree
    assert describe_steps(back) == describe_steps(tree)
    assert any("g0<<<(4, 1, 1), (128, 1, 1) shared=256>>>" in line for line in describe_steps(tree))


@pytest.mark.parametrize("bad", [
    {"step": "nope"},
    {"step": "copy", "dst": ["input", 0, 0, 4], "src": ["heap", 0, 0, 4], "nbytes": 4},
    {"step": "copy", "dst": ["input", -1, 0, 4], "src": ["input", 0, 0, 4], "nbytes": 4},
    {"step": "launch", "name": "k", "refs": [], "writes": [], "grid": [0, 1, 1], "block": [1, 1, 1]},
    {"step": "launch", "name": "k", "refs": [], "writes": [], "grid": [1, 1, 1], "block": [1, 1, 1],
     "scalars": [["f64", 1.0]]},
    {"step": "library", "library": "x", "fn": "y", "refs": [], "writes": [], "params": 3},
    {"step": "kernel", "name": "k"},
    "copy",
])
def test_malformed_steps_raise_value_error(bad):
    with pytest.raises(ValueError):
        steps_from_json([bad])
