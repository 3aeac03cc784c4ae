"""The one check of a call's inputs against a compiled signature, shared by ``Compiled``
(``hlo.staging.stages``) and ``LoadedExecutable`` (``hlo.staging.saved``): the pytree structure
(or, for a bare module, positional arrays only and their count), then every leaf's shape and
dtype. Standard library and ``tree_util`` only: a saved executable's load path uses it.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from ..tree_util import PyTreeDef, describe_difference, tree_flatten

# check_leaf(index, leaf) -> (the flat array, None) or (None, "x is f32[3] (compiled for f32[4])")
LeafCheck = Callable[[int, object], Tuple[object, Optional[str]]]


def plain_name(name: str) -> str:
    """``x`` for the argument name ``argument 'x'`` (other names as they are)."""
    return name[len("argument "):].strip("'") if name.startswith("argument '") else name


def readable_difference(diff: str) -> str:
    """A ``describe_difference`` text about the ``(args, kwargs)`` pair, in the user's words:
    ``[0][i]`` is positional argument i, ``[1]['k']`` keyword argument k."""
    for prefix, words in (("at [0]", "positional arguments"), ("at [1]", "keyword arguments")):
        if diff.startswith(prefix):
            return words + " " + diff[len(prefix):].lstrip(": ")
    return diff


def flatten_inputs(args, kwargs, *, in_tree: Optional[PyTreeDef], n_inputs: int, signature: str,
                   check_leaf: LeafCheck, error: type, made: str = "compiled for",
                   advice: str = "") -> List:
    """The flat arrays of a call ``(*args, **kwargs)`` of the executable ``signature`` (its
    text, e.g. ``f(x: f32[4])``), or ``error`` naming what differs. ``in_tree`` None means a
    bare module: ``n_inputs`` positional arrays. ``made`` ("compiled for", "saved with") and
    ``advice`` (appended to the leaf message) word the errors."""
    if in_tree is None:
        if kwargs:
            raise error(f"{signature} takes positional arrays only, got keyword arguments "
                        f"{', '.join(sorted(kwargs))}")
        leaves: Sequence = list(args)
        if len(leaves) != n_inputs:
            raise error(f"{signature} takes {n_inputs} arrays, called with {len(leaves)}")
    else:
        leaves, tree = tree_flatten((tuple(args), dict(kwargs)))
        if tree != in_tree:
            diff = describe_difference(in_tree, tree) or "different structure"
            raise error(f"called with arguments whose structure differs from the one {signature} "
                        f"was {made} ({readable_difference(diff)}); pass only the non-static "
                        "arguments, in the same containers")
    out, problems = [], []
    for i, leaf in enumerate(leaves):
        arr, problem = check_leaf(i, leaf)
        if problem is not None:
            problems.append(problem)
        else:
            out.append(arr)
    if problems:
        raise error(f"{signature} was called with arguments it was not compiled for: "
                    + "; ".join(problems) + advice)
    return out
