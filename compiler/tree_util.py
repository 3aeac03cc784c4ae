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
