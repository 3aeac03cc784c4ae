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

    def _key(self):
        return (self.kind, self.aux, self.children)

    def __eq__(self, other):
        return isinstance(other, PyTreeDef) and self._key() == other._key()

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        return tree_unflatten(self, leaves)

    def __repr__(self):
        return f"PyTreeDef({self._str()})"

    def _str(self) -> str:
        if self.kind is _LEAF:
            return "*"
        if self.kind is type(None):
            return "None"
        inner = [c._str() for c in self.children]
        if self.kind is tuple:
            return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
        if self.kind is list:
            return "[" + ", ".join(inner) + "]"
        if self.kind is dict:
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.aux, inner)) + "}"
        return f"{getattr(self.kind, '__name__', self.kind)}(" + ", ".join(inner) + ")"


_LEAF_DEF = PyTreeDef(_LEAF, None, ())  # every leaf's treedef (immutable, so shared)


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
    return None


def _rebuild(kind, aux, children):
    if kind is type(None):
        return None
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
    td = _flatten(tree, is_leaf, None, out, ())
    return out, td


def _flatten_leaves(x, is_leaf, leaves):
    node = None if is_leaf is not None and is_leaf(x) else _flatten_node(x, False)
    if node is None:
        leaves.append(x)
        return _LEAF_DEF
    kind, aux, children, _ = node
    return PyTreeDef(kind, aux, tuple([_flatten_leaves(c, is_leaf, leaves) for c in children]))


def _flatten(x, is_leaf, leaves, paths, path):
    if is_leaf is not None and is_leaf(x):
        node = None
    else:
        node = _flatten_node(x)
    if node is None:
        if leaves is not None:
            leaves.append(x)
        if paths is not None:
            paths.append((path, x))
        return _LEAF_DEF
    kind, aux, children, keys = node
    return PyTreeDef(kind, aux, tuple(_flatten(c, is_leaf, leaves, paths, path + (k,))
                                       for c, k in zip(children, keys)))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]):
    it = iter(leaves)
    out = _unflatten(treedef, it)
    try:
        next(it)
    except StopIteration:
        return out
    raise ValueError(f"too many leaves for {treedef}")


def _unflatten(td: PyTreeDef, it):
    if td.kind is _LEAF:
        try:
            return next(it)
        except StopIteration:
            raise ValueError("too few leaves for the tree structure") from None
    return _rebuild(td.kind, td.aux, [_unflatten(c, it) for c in td.children])


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
    """A short sentence on where two structures first differ, or None if equal."""
    if a == b:
        return None
    where = keystr(path) or "the top level"
    if a.kind != b.kind:
        return f"at {where}: {_kind_name(a)} became {_kind_name(b)}"
    if a.aux != b.aux or len(a.children) != len(b.children):
        if a.kind is dict:
            return f"at {where}: dict keys {list(a.aux)} became {list(b.aux)}"
        if len(a.children) != len(b.children):
            return f"at {where}: {_kind_name(a)} of length {len(a.children)} became length {len(b.children)}"
        return f"at {where}: static metadata {a.aux!r} became {b.aux!r}"
    keys = _child_keys(a)
    for ca, cb, k in zip(a.children, b.children, keys):
        d = describe_difference(ca, cb, path + (k,))
        if d:
            return d
    return f"at {where}: structure changed"


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
