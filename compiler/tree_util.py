"""Pytrees: nested containers of arrays, as jax.tree_util defines them.

Containers are tuples, lists, dicts (flattened in sorted key order), ``None`` (a container with no
children), namedtuples, ``collections.OrderedDict`` and ``defaultdict``, and any class registered
with ``register_pytree_node`` / ``register_pytree_node_class`` / ``register_dataclass``. Everything
else is a leaf. ``tree_flatten`` returns the leaves and a hashable ``PyTreeDef`` that
``tree_unflatten`` rebuilds from; key paths (``tree_flatten_with_path``, ``keystr``) name a leaf
in messages, e.g. ``params['w'][0]``.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import operator
import sys
from typing import Any, Callable, Hashable, Iterable, List, NamedTuple, Optional, Sequence, Tuple


class _NodeType(NamedTuple):
    flatten: Callable[[Any], Tuple[Iterable[Any], Hashable]]
    unflatten: Callable[[Hashable, Iterable[Any]], Any]
    keys: Optional[Callable[[Any, Hashable], List[Any]]]  # (node, aux) -> key per child


_REGISTRY: dict = {}


def register_pytree_node(nodetype: type, flatten_func, unflatten_func, flatten_with_keys_func=None):
    """Register a container type: ``flatten_func(x) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> x``. ``aux_data`` must be hashable and comparable."""
    if nodetype in _REGISTRY or nodetype in (tuple, list, dict, type(None)):
        raise ValueError(f"{nodetype.__name__} is already registered as a pytree node")
    keys = None
    if flatten_with_keys_func is not None:
        def keys(node, aux, _f=flatten_with_keys_func):
            return [k for k, _ in _f(node)[0]]
    _REGISTRY[nodetype] = _NodeType(flatten_func, unflatten_func, keys)
    return nodetype


def register_pytree_node_class(cls):
    """Class decorator: ``cls.tree_flatten(self) -> (children, aux)`` and
    ``cls.tree_unflatten(aux, children)`` (a classmethod)."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(cls, data_fields=None, meta_fields=None):
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` are static (part of
    the tree structure). By default every field is a child."""
    fields = [f.name for f in dataclasses.fields(cls)]
    data = list(data_fields) if data_fields is not None else [f for f in fields if f not in (meta_fields or ())]
    meta = list(meta_fields) if meta_fields is not None else [f for f in fields if f not in data]

    def flatten(x):
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux, children):
        kw = dict(zip(data, children))
        kw.update(zip(meta, aux))
        return cls(**kw)

    _REGISTRY[cls] = _NodeType(flatten, unflatten, lambda node, aux: [GetAttrKey(n) for n in data])
    return cls


# --------------------------------------------------------------------------------------------
# Keys (for naming leaves)
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    idx: int

    def __str__(self):
        return f"[<flat index {self.idx}>]"


def keystr(path) -> str:
    return "".join(str(k) for k in path)


# --------------------------------------------------------------------------------------------
# Tree definitions
# --------------------------------------------------------------------------------------------

_LEAF = "leaf"


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields") and type(x) is not tuple


def _sorted_keys(d):
    try:
        return sorted(d)
    except TypeError:
        return sorted(d, key=lambda k: (type(k).__name__, repr(k)))


class PyTreeDef:
    """The structure of a pytree, without its leaves. Hashable; ``==`` compares structures."""

    __slots__ = ("kind", "aux", "children", "num_leaves", "_hash")
    num_leaves: int

    def __init__(self, kind, aux, children: Tuple["PyTreeDef", ...]):
        self.kind = kind
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if kind is _LEAF else sum(c.num_leaves for c in children)
        self._hash = None

    # Every walk over a structure is iterative (an explicit stack): a tree as deep as memory
    # allows compares, hashes, prints, flattens and rebuilds without Python's recursion limit.

    def __eq__(self, other):
        if not isinstance(other, PyTreeDef):
            return False
        stack = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a is b:
                continue
            if (a.kind is not b.kind and a.kind != b.kind) or a.num_leaves != b.num_leaves \
                    or len(a.children) != len(b.children) or a.aux != b.aux:
                return False
            stack.extend(zip(a.children, b.children))
        return True

    def __hash__(self):
        if self._hash is None:
            # children before parents: each node's hash from its children's
            stack, order = [self], []
            while stack:
                td = stack.pop()
                if td._hash is None:
                    order.append(td)
                    stack.extend(td.children)
            for td in reversed(order):
                if td._hash is None:
                    td._hash = hash((td.kind, td.aux, tuple(c._hash for c in td.children)))
        return self._hash

    @property
    def num_nodes(self) -> int:
        n, stack = 0, [self]
        while stack:
            td = stack.pop()
            n += 1
            stack.extend(td.children)
        return n

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        return tree_unflatten(self, leaves)

    def __repr__(self):
        return f"PyTreeDef({self._str()})"

    def _str(self) -> str:
        done: dict = {}  # id -> text of the nodes printed so far (children before parents)
        for td in _postorder(self):
            if td.kind is _LEAF:
                text = "*"
            elif td.kind is type(None):
                text = "None"
            else:
                inner = [done.pop(id(c)) if c is not _LEAF_DEF else "*" for c in td.children]
                if td.kind is tuple:
                    text = "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
                elif td.kind is list:
                    text = "[" + ", ".join(inner) + "]"
                elif td.kind is dict:
                    text = "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(td.aux, inner)) + "}"
                else:
                    text = f"{getattr(td.kind, '__name__', td.kind)}(" + ", ".join(inner) + ")"
            if td is not _LEAF_DEF:
                done[id(td)] = text
        return done[id(self)] if self is not _LEAF_DEF else "*"


_LEAF_DEF = PyTreeDef(_LEAF, None, ())  # every leaf's treedef (immutable, so shared)


def _postorder(td: PyTreeDef) -> List[PyTreeDef]:
    """The nodes of ``td``, every child before its parent, left to right (a shared subtree is
    listed once per place it occurs)."""
    out: List[PyTreeDef] = []
    stack = [(td, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded or not node.children:
            out.append(node)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node.children))
    return out


def _flatten_node(x, with_keys: bool = True):
    """``(kind, aux, children, keys)`` for a container, or None for a leaf. ``keys`` (one key
    object per child, for paths) is None unless ``with_keys``: plain flattening skips them."""
    t = type(x)
    if t is tuple or t is list:
        return t, None, x, [SequenceKey(i) for i in range(len(x))] if with_keys else None
    if t is dict:
        ks = _sorted_keys(x)
        return dict, tuple(ks), [x[k] for k in ks], [DictKey(k) for k in ks] if with_keys else None
    if x is None:
        return type(None), None, (), ()
    node = _REGISTRY.get(t)
    if node is not None:
        children, aux = node.flatten(x)
        children = list(children)
        keys = None
        if with_keys:
            keys = node.keys(x, aux) if node.keys else [FlattenedIndexKey(i) for i in range(len(children))]
        return t, aux, children, keys
    if t is collections.OrderedDict:
        ks = list(x)
        return t, tuple(ks), [x[k] for k in ks], [DictKey(k) for k in ks] if with_keys else None
    if t is collections.defaultdict:
        ks = _sorted_keys(x)
        return (t, (x.default_factory, tuple(ks)), [x[k] for k in ks],
                [DictKey(k) for k in ks] if with_keys else None)
    if _is_namedtuple(x):
        return t, None, tuple(x), [GetAttrKey(f) for f in t._fields] if with_keys else None
    if "jax" in sys.modules and t not in _NEVER_JAX:
        return _jax_node(x, t, with_keys)
    return None


# Leaf types hlo knows: never worth asking jax about (the common leaves stay fast).
_NEVER_JAX = frozenset({int, float, bool, complex, str, bytes})


class _JaxAux(NamedTuple):
    """The aux data of a node that jax's pytree registry flattened: jax's one-level treedef."""
    treedef: Any


def _jax_node(x, t, with_keys: bool):
    """A class registered as a pytree with jax (``jax.tree_util.register_pytree_node`` and
    friends) is a node here too, flattened one level by jax's registry. Asked only when the user
    has imported jax (``sys.modules``): hlo never imports jax for it."""
    if (getattr(t, "__module__", None) or "").startswith(("hlo.", "numpy", "jax", "jaxlib", "ml_dtypes")):
        return None
    jtu = sys.modules.get("jax.tree_util")
    if jtu is None:
        return None
    try:
        children, treedef = jtu.tree_flatten(x, is_leaf=lambda y: y is not x)
    except Exception:  # jax could not flatten it: not a jax pytree either
        return None
    if jtu.treedef_is_leaf(treedef):
        return None
    keys = [FlattenedIndexKey(i) for i in range(len(children))] if with_keys else None
    return t, _JaxAux(treedef), children, keys


def _rebuild(kind, aux, children):
    if kind is type(None):
        return None
    if type(aux) is _JaxAux:
        return sys.modules["jax.tree_util"].tree_unflatten(aux.treedef, children)
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return list(children)
    if kind is dict:
        return dict(zip(aux, children))
    node = _REGISTRY.get(kind)
    if node is not None:
        return node.unflatten(aux, children)
    if kind is collections.OrderedDict:
        return collections.OrderedDict(zip(aux, children))
    if kind is collections.defaultdict:
        return collections.defaultdict(aux[0], zip(aux[1], children))
    return kind(*children)  # namedtuple


def tree_flatten(tree, is_leaf: Optional[Callable[[Any], bool]] = None):
    """``(leaves, treedef)``: leaves in order, and the structure to rebuild the tree."""
    leaves: List[Any] = []
    return leaves, _flatten_leaves(tree, is_leaf, leaves)


def tree_flatten_with_path(tree, is_leaf=None):
    """``([(key_path, leaf), ...], treedef)``."""
    out: List[Any] = []
    td = _flatten_paths(tree, is_leaf, out, ())
    return out, td


# Flattening and rebuilding recurse (fast) for the first _RECURSE levels and walk deeper
# subtrees with an explicit stack, so no depth meets Python's recursion limit.
_RECURSE = 64


def _flatten_leaves(x, is_leaf, leaves, depth=0):
    node = None if is_leaf is not None and is_leaf(x) else _flatten_node(x, False)
    if node is None:
        leaves.append(x)
        return _LEAF_DEF
    if depth >= _RECURSE:
        return _flatten(x, is_leaf, leaves, None, None)
    kind, aux, children, _ = node
    return PyTreeDef(kind, aux, tuple([_flatten_leaves(c, is_leaf, leaves, depth + 1)
                                       for c in children]))


def _flatten_paths(x, is_leaf, paths, path):
    if is_leaf is not None and is_leaf(x):
        node = None
    else:
        node = _flatten_node(x)
    if node is None:
        paths.append((path, x))
        return _LEAF_DEF
    if len(path) >= _RECURSE:
        return _flatten(x, is_leaf, None, paths, path)
    kind, aux, children, keys = node
    return PyTreeDef(kind, aux, tuple(_flatten_paths(c, is_leaf, paths, path + (k,))
                                       for c, k in zip(children, keys)))


class _Link:
    """A key path as a linked list, deepest key first (``keys()`` spells it out)."""
    __slots__ = ("key", "parent")

    def __init__(self, key, parent):
        self.key, self.parent = key, parent

    @staticmethod
    def of(path: tuple) -> "Optional[_Link]":
        link = None
        for k in path:
            link = _Link(k, link)
        return link

    def keys(self) -> tuple:
        out, link = [], self
        while link is not None:
            out.append(link.key)
            link = link.parent
        return tuple(reversed(out))


def _flatten(x, is_leaf, leaves, paths, path):
    """The treedef of ``x``, its leaves appended to ``leaves`` and ``(path, leaf)`` pairs to
    ``paths`` (either may be None; ``path`` None: no paths kept). Iterative: a frame per
    container on an explicit stack, finished when its last child is. Paths are kept as linked
    (key, parent) pairs while walking and spelled out at the leaves (a path per level would
    cost the square of the depth)."""
    with_keys = paths is not None
    if with_keys:
        path = _Link.of(path)
    root: List[PyTreeDef] = []
    # frames: [kind, aux, children, keys, next child index, built children, path]
    stack: List[list] = []
    item, item_path = x, path
    while True:
        node = None if is_leaf is not None and is_leaf(item) else _flatten_node(item, with_keys)
        if node is None:
            if leaves is not None:
                leaves.append(item)
            if with_keys:
                paths.append((item_path.keys() if item_path is not None else (), item))
            built = _LEAF_DEF
        else:
            kind, aux, children, keys = node
            children = children if isinstance(children, (list, tuple)) else list(children)
            stack.append([kind, aux, children, keys, 0, [], item_path])
            built = None
        # finish every frame whose children are all built; descend into the next child
        while True:
            if built is not None:
                if not stack:
                    root.append(built)
                    break
                stack[-1][5].append(built)
                built = None
            frame = stack[-1]
            kind, aux, children, keys, i, kids, fpath = frame
            if i < len(children):
                frame[4] = i + 1
                item = children[i]
                item_path = _Link(keys[i], fpath) if with_keys else None
                break
            stack.pop()
            built = PyTreeDef(kind, aux, tuple(kids))
        if root:
            return root[0]


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]):
    it = iter(leaves)
    out = _unflatten(treedef, it)
    try:
        next(it)
    except StopIteration:
        return out
    raise ValueError(f"too many leaves for {treedef}")


def _unflatten(td: PyTreeDef, it, depth=0):
    if td.kind is _LEAF:
        try:
            return next(it)
        except StopIteration:
            raise ValueError("too few leaves for the tree structure") from None
    if depth >= _RECURSE:
        return _unflatten_deep(td, it)
    return _rebuild(td.kind, td.aux, [_unflatten(c, it, depth + 1) for c in td.children])


def _unflatten_deep(td: PyTreeDef, it):
    """Iterative: frames of (node, children rebuilt so far) on an explicit stack."""
    stack: List[Tuple[PyTreeDef, list]] = []
    node = td
    while True:
        if node.kind is _LEAF:
            try:
                value = next(it)
            except StopIteration:
                raise ValueError("too few leaves for the tree structure") from None
        elif node.children:
            stack.append((node, []))
            node = node.children[0]
            continue
        else:
            value = _rebuild(node.kind, node.aux, [])
        while True:
            if not stack:
                return value
            parent, built = stack[-1]
            built.append(value)
            if len(built) < len(parent.children):
                node = parent.children[len(built)]
                break
            stack.pop()
            value = _rebuild(parent.kind, parent.aux, built)


def tree_leaves(tree, is_leaf=None) -> List[Any]:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree, *rest, is_leaf=None):
    """Apply ``f`` leaf-wise; ``rest`` are trees with the same structure as ``tree``."""
    leaves, td = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(f"tree_map: structures differ: {td} and {rtd}")
        others.append(rl)
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others)])


def treedef_is_leaf(td: PyTreeDef) -> bool:
    return td.kind is _LEAF


def leaf_treedef() -> PyTreeDef:
    return _LEAF_DEF


def treedef_tuple(children: Iterable[PyTreeDef]) -> PyTreeDef:
    return PyTreeDef(tuple, None, tuple(children))


def treedef_children(td: PyTreeDef) -> List[PyTreeDef]:
    return list(td.children)


@functools.lru_cache(maxsize=64)
def positional_treedef(n: int) -> PyTreeDef:
    """The structure of ``(args, kwargs)`` for ``n`` positional leaves and no keywords."""
    return tree_structure((tuple(range(n)), {}))


def unflattener(td: PyTreeDef) -> Callable[[Sequence[Any]], Any]:
    """A function of the leaves that rebuilds ``td`` (no tree walk for one leaf or a flat
    tuple of leaves: ``hlo.jit``'s fast path returns its results through this)."""
    if td.kind is _LEAF:
        return operator.itemgetter(0)
    if td.kind is tuple and all(c.kind is _LEAF for c in td.children):
        return tuple
    return functools.partial(tree_unflatten, td)


def native_finish(td: Optional[PyTreeDef]):
    """How a native entry returns its outputs for results of structure ``td``
    (``Executable.native_call``'s ``finish``): "single", "tuple", or a function of the tuple of
    outputs (``list`` for a flat signature, ``td`` None)."""
    if td is None:
        return list
    if td.kind is _LEAF:
        return "single"
    if td.kind is tuple and all(c.kind is _LEAF for c in td.children):
        return "tuple"
    return functools.partial(tree_unflatten, td)


def describe_difference(a: PyTreeDef, b: PyTreeDef, path=()) -> Optional[str]:
    """A short sentence on where two structures first differ, or None if equal (iterative:
    the first difference in prefix order)."""
    if a == b:
        return None
    stack = [(a, b, _Link.of(tuple(path)))]
    while stack:  # each pair compared locally
        a, b, link = stack.pop()
        if a is b:
            continue
        if a.kind != b.kind:
            return f"at {_where(link)}: {_kind_name(a)} became {_kind_name(b)}"
        if a.aux != b.aux or len(a.children) != len(b.children):
            if a.kind is dict:
                return f"at {_where(link)}: dict keys {list(a.aux)} became {list(b.aux)}"
            if len(a.children) != len(b.children):
                return (f"at {_where(link)}: {_kind_name(a)} of length {len(a.children)} became "
                        f"length {len(b.children)}")
            return f"at {_where(link)}: static metadata {a.aux!r} became {b.aux!r}"
        keys = _child_keys(a)
        stack.extend(reversed([(ca, cb, _Link(k, link)) for ca, cb, k in zip(a.children, b.children, keys)]))
    return f"at {keystr(tuple(path)) or 'the top level'}: structure changed"


def _where(link: "Optional[_Link]") -> str:
    return keystr(link.keys() if link is not None else ()) or "the top level"


def _child_keys(td: PyTreeDef):
    if td.kind is dict or td.kind is collections.OrderedDict:
        return [DictKey(k) for k in td.aux]
    if td.kind is collections.defaultdict:
        return [DictKey(k) for k in td.aux[1]]
    if _is_namedtuple_type(td.kind):
        return [GetAttrKey(f) for f in td.kind._fields]
    return [SequenceKey(i) for i in range(len(td.children))]


def _is_namedtuple_type(k) -> bool:
    return isinstance(k, type) and issubclass(k, tuple) and hasattr(k, "_fields")


def _kind_name(td: PyTreeDef) -> str:
    if td.kind is _LEAF:
        return "an array"
    if td.kind is type(None):
        return "None"
    return getattr(td.kind, "__name__", str(td.kind))



# --------------------------------------------------------------------------------------------
# The rest of jax.tree_util: reductions over leaves, maps and leaves with key paths, one-level
# flattening, broadcasting a prefix tree, transposing, registrations with keys, static nodes,
# Partial
# --------------------------------------------------------------------------------------------

KeyPath = Tuple[Any, ...]  # a leaf's key path: SequenceKey, DictKey, GetAttrKey, ... entries

_NO_INIT = object()


def tree_reduce(function: Callable, tree, initializer: Any = _NO_INIT, is_leaf=None):
    """``functools.reduce(function, leaves[, initializer])`` over the tree's leaves."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INIT:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation: Callable, tree, *, identity: Any = _NO_INIT, is_leaf=None):
    """Reduce the leaves with an associative ``operation`` as a balanced tree of calls (depth
    log2 of the leaf count, as jax does); ``identity`` is the result for a tree without leaves."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INIT:
            raise TypeError("tree_reduce_associative: the tree has no leaves and no identity was given")
        return identity
    while len(leaves) > 1:
        pairs = [operation(leaves[i], leaves[i + 1]) for i in range(0, len(leaves) - 1, 2)]
        leaves = pairs + ([leaves[-1]] if len(leaves) % 2 else [])
    return leaves[0]


def tree_all(tree, *, is_leaf=None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable, is_leaf=None) -> bool:
    """Whether every element of ``iterable`` is a leaf (``is_leaf`` as in tree_flatten)."""
    if is_leaf is None:
        return all(treedef_is_leaf(tree_structure(x)) for x in iterable)
    return all(is_leaf(x) or treedef_is_leaf(tree_structure(x, is_leaf)) for x in iterable)


def is_tree_node(typ: type) -> bool:
    """Whether ``typ`` is a container type (built in or registered), not a leaf type."""
    if typ in (tuple, list, dict, type(None), collections.OrderedDict, collections.defaultdict):
        return True
    if typ in _REGISTRY:
        return True
    return issubclass(typ, tuple) and hasattr(typ, "_fields")


def _one_level(tree, with_keys: bool):
    node = _flatten_node(tree, with_keys)
    if node is None:
        raise ValueError(f"can't flatten a leaf: {type(tree).__name__} is not a pytree node")
    kind, aux, children, keys = node
    return kind, aux, list(children), keys


def flatten_one_level(tree) -> Tuple[list, Any]:
    """``(children, node_data)`` of a container (ValueError for a leaf)."""
    kind, aux, children, _ = _one_level(tree, False)
    return children, aux


def flatten_one_level_with_keys(tree) -> Tuple[list, Any]:
    """``([(key, child), ...], node_data)`` of a container."""
    kind, aux, children, keys = _one_level(tree, True)
    return list(zip(keys, children)), aux


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path: bool = False) -> list:
    """``[(key_path, leaf), ...]``."""
    if is_leaf_takes_path:
        raise NotImplementedError("tree_leaves_with_path: is_leaf_takes_path=True is not supported; "
                                  "pass is_leaf as a function of the node")
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree, *rest, is_leaf=None, is_leaf_takes_path: bool = False):
    """``tree_map`` where ``f`` also gets each leaf's key path first: ``f(path, x, *ys)``."""
    if is_leaf_takes_path:
        raise NotImplementedError("tree_map_with_path: is_leaf_takes_path=True is not supported; "
                                  "pass is_leaf as a function of the node")
    pairs, td = tree_flatten_with_path(tree, is_leaf)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(f"tree_map_with_path: structures differ: {td} and {rtd}")
        others.append(rl)
    return tree_unflatten(td, [f(p, x, *ys) for (p, x), *ys in zip(pairs, *others)])


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """``prefix_tree`` with each of its leaves repeated over the subtree of ``full_tree`` at the
    same place (``prefix_tree``'s structure must be a prefix of ``full_tree``'s)."""
    def go(p, f, path):
        if (is_leaf is not None and is_leaf(p)) or _flatten_node(p, False) is None:
            return tree_map(lambda _: p, f, is_leaf=is_leaf)
        pk, paux, pch, _ = _one_level(p, False)
        fn = _flatten_node(f, False)
        if fn is None or fn[0] is not pk or fn[1] != paux or len(fn[2]) != len(pch):
            raise ValueError(f"tree_broadcast: the prefix tree's node at {keystr(path) or 'the root'} "
                             f"({type(p).__name__}) does not match the full tree's ({type(f).__name__})")
        return _rebuild(pk, paux, [go(a, b, path + (FlattenedIndexKey(i),))
                                       for i, (a, b) in enumerate(zip(pch, fn[2]))])
    return go(prefix_tree, full_tree, ())


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """A tree of structure outer-of-inner turned into inner-of-outer (``inner_treedef`` None:
    inferred from the first outer subtree)."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = _infer_inner(outer_treedef, pytree_to_transpose)
    n_in, n_out = inner_treedef.num_leaves, outer_treedef.num_leaves
    expected = _compose(outer_treedef, inner_treedef)
    if treedef != expected:
        raise TypeError(f"tree_transpose: the tree's structure {treedef} is not the outer structure "
                        f"{outer_treedef} of the inner {inner_treedef}")
    lol = [flat[i * n_in:(i + 1) * n_in] for i in range(n_out)]
    cols = [list(c) for c in zip(*lol)] if n_in else []
    subtrees = [tree_unflatten(outer_treedef, c) for c in cols]
    return tree_unflatten(inner_treedef, subtrees)


def _compose(outer, inner):
    marker = object()
    return tree_structure(tree_unflatten(outer, [tree_unflatten(inner, [marker] * inner.num_leaves)
                                                         for _ in range(outer.num_leaves)]))


def _infer_inner(outer, tree):
    subtrees = tree_leaves(tree, is_leaf=_leaf_at(outer, tree))
    if not subtrees:
        raise ValueError("tree_transpose: cannot infer the inner structure of an empty outer tree")
    return tree_structure(subtrees[0])


def _leaf_at(outer, tree):
    """is_leaf that stops at the nodes where ``outer``'s leaves are."""
    stops = set()

    def walk(td, x):
        if treedef_is_leaf(td):
            stops.add(id(x))
            return
        _, _, children, _ = _one_level(x, False)
        for c, ch in zip(td.children, children):
            walk(c, ch)
    walk(outer, tree)
    return lambda x: id(x) in stops


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Optional[Callable] = None):
    """Register a container whose ``flatten_with_keys(x) -> ([(key, child), ...], aux)``
    names its children in key paths."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    return register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls):
    """Class decorator: ``cls.tree_flatten_with_keys(self)``, ``cls.tree_unflatten(aux,
    children)`` and optionally ``cls.tree_flatten(self)``."""
    flat = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              (lambda x: x.tree_flatten()) if flat is not None else None)
    return cls


def register_static(cls):
    """Register ``cls`` as a node without children: its instances are part of the tree's
    structure (hashable, compared with ``==``), never leaves."""
    register_pytree_node(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


class Partial(functools.partial):
    """``functools.partial`` that is a pytree: the bound arguments are its children, the function
    is static, so it can be passed into and returned from ``hlo.jit``."""

    def __new__(klass, func, *args, **kw):
        if isinstance(func, functools.partial):  # flatten nested partials, as functools does
            original = func
            func = _ClosedPartial(original)
        return super().__new__(klass, func, *args, **kw)


class _ClosedPartial:
    """A functools.partial wrapped so Partial does not merge its arguments into the tree."""

    def __init__(self, p):
        self.p = p

    def __call__(self, *a, **k):
        return self.p(*a, **k)

    def __eq__(self, other):
        return isinstance(other, _ClosedPartial) and self.p is other.p

    def __hash__(self):
        return hash(id(self.p))


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]))
