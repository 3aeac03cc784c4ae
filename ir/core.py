"""The in-memory IR: values, operations, regions, functions and modules.

The IR is SSA. A ``Value`` is produced by exactly one operation result or is an argument of a
region. An ``Operation`` has a name from the op table (``hlo.ir.ops``), operands, attributes,
results and nested regions (reduce bodies, while conditions, fusion bodies...). A ``Region`` is a
single block: arguments, an ordered list of operations and the values it yields. A ``Function``
is a named region; a ``Module`` is an ordered set of functions whose entry point is ``main``.

Use lists are not maintained: passes that need them compute them (``uses()``), which keeps
every mutation a plain list edit and impossible to leave half-updated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set

from .types import TensorType


@dataclass(frozen=True)
class Location:
    """A source position, printed as ``loc("file.py":12)``; usually the user's own line."""

    file: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def text(self) -> str:
        f = self.file.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'loc("{f}":{self.line})'


class Value:
    """An SSA value: an operation result or a region argument."""

    __slots__ = ("type", "owner", "index", "__weakref__")

    def __init__(self, type: TensorType, owner: Any, index: int):
        self.type = type
        self.owner = owner  # Operation (for a result) or Region (for an argument)
        self.index = index

    @property
    def is_arg(self) -> bool:
        return isinstance(self.owner, Region)

    @property
    def op(self) -> Optional["Operation"]:
        """The producing operation, or None for a region argument."""
        return self.owner if isinstance(self.owner, Operation) else None

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self) -> str:
        where = f"arg{self.index}" if self.is_arg else f"{self.owner.name}#{self.index}"
        return f"<Value {where}: {self.type}>"


class Operation:
    """One operation. Its shape rules and verification live in its ``OpDef`` (``hlo.ir.ops``)."""

    __slots__ = ("name", "operands", "attrs", "results", "regions", "loc", "parent", "__weakref__")

    def __init__(self, name: str, operands: Sequence[Value], attrs: Optional[Dict[str, Any]],
                 result_types: Sequence[TensorType], regions: Sequence["Region"] = (),
                 loc: Optional[Location] = None):
        self.name = name
        self.operands: List[Value] = list(operands)
        self.attrs: Dict[str, Any] = dict(attrs or {})
        self.results: List[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions: List[Region] = list(regions)
        for r in self.regions:
            r.parent_op = self
        self.loc = loc
        self.parent: Optional[Region] = None

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"'{self.name}' has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def result_types(self) -> List[TensorType]:
        return [r.type for r in self.results]

    @property
    def operand_types(self) -> List[TensorType]:
        return [v.type for v in self.operands]

    def region(self, name: str) -> "Region":
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(f"'{self.name}' has no region '{name}'")

    def walk(self) -> Iterator["Operation"]:
        """This op, then every op nested in its regions, in order."""
        yield self
        if self.regions:
            yield from _walk([iter(r.ops) for r in reversed(self.regions)])

    def defined_inside(self) -> Set["Value"]:
        """Values defined inside this op's regions (region arguments and results of nested
        ops, at any depth): what a read from inside is not a capture of."""
        out: Set[Value] = set()
        for r in self.regions:
            out.update(r.args)
            for inner in r.walk():
                out.update(inner.results)
                for rr in inner.regions:
                    out.update(rr.args)
        return out

    def __repr__(self) -> str:
        return f"<Operation {self.name} -> {', '.join(str(t) for t in self.result_types)}>"


def _walk(stack: List[Iterator[Operation]]) -> Iterator[Operation]:
    """Every op of the op lists on ``stack`` (the last first) and of their nested regions, in
    order: iterative, so a walk costs one step per op at any nesting depth (a recursive
    ``yield from`` passes each op up through one generator per level)."""
    while stack:
        for op in stack[-1]:
            yield op
            if op.regions:
                stack.extend(iter(r.ops) for r in reversed(op.regions))
                break
        else:
            stack.pop()


class Region:
    """A single-block region: arguments, operations in order, and the values it yields."""

    def __init__(self, arg_types: Sequence[TensorType] = (), name: str = "body"):
        self.name = name
        self.args: List[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: List[Operation] = []
        self.outputs: List[Value] = []
        self.output_loc: Optional[Location] = None
        self.parent_op: Optional[Operation] = None

    @property
    def arg_types(self) -> List[TensorType]:
        return [a.type for a in self.args]

    @property
    def output_types(self) -> List[TensorType]:
        return [v.type for v in self.outputs]

    def add_arg(self, type: TensorType) -> Value:
        v = Value(type, self, len(self.args))
        self.args.append(v)
        return v

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(index, op)
        return op

    def walk(self) -> Iterator[Operation]:
        return _walk([iter(self.ops)])

    def replace_all_uses(self, old: Value, new: Value) -> None:
        """Replace ``old`` by ``new`` in this region, its nested regions and its outputs."""
        for op in self.walk():
            op.operands = [new if v is old else v for v in op.operands]
        for r in self._all_regions():
            r.outputs = [new if v is old else v for v in r.outputs]

    def _all_regions(self) -> Iterator["Region"]:
        yield self
        for op in self.walk():
            yield from op.regions


class Function:
    """A named function: a region whose arguments are the parameters and whose outputs are the
    results. ``visibility`` is "public" or "private" (private ones are only called)."""

    def __init__(self, name: str, arg_types: Sequence[TensorType] = (),
                 visibility: str = "public", loc: Optional[Location] = None):
        self.name = name
        self.body = Region(arg_types, name="body")
        self.visibility = visibility
        self.loc = loc
        self.module: Optional[Module] = None
        # symbolic dimensions whose value is a scalar integer argument (issue 38, the StableHLO
        # dimension arguments): argument index -> symbol; printed `%arg0: s64[] {dim = b}`
        self.dim_args: Dict[int, str] = {}
        # sharding annotations (ir/sharding_attr.ValueSharding), argument / result index ->
        # sharding; printed `%arg0: f32[8] {sharding = "mesh<batch=2> [{batch}]"}`
        self.arg_shardings: Dict[int, Any] = {}
        self.result_shardings: Dict[int, Any] = {}

    @property
    def args(self) -> List[Value]:
        return self.body.args

    @property
    def arg_types(self) -> List[TensorType]:
        return self.body.arg_types

    @property
    def result_types(self) -> List[TensorType]:
        return self.body.output_types

    @property
    def ops(self) -> List[Operation]:
        return self.body.ops

    def walk(self) -> Iterator[Operation]:
        return self.body.walk()

    def __repr__(self) -> str:
        return f"<Function {self.name}({', '.join(map(str, self.arg_types))}) -> " \
               f"({', '.join(map(str, self.result_types))})>"


class Module:
    """An ordered set of functions. The entry point is ``main`` unless told otherwise."""

    def __init__(self, name: str = "module"):
        self.name = name
        self.functions: Dict[str, Function] = {}

    def add(self, fn: Function) -> Function:
        if fn.name in self.functions:
            raise ValueError(f"function @{fn.name} is already defined in module @{self.name}")
        fn.module = self
        self.functions[fn.name] = fn
        return fn

    def remove(self, name: str) -> None:
        del self.functions[name]

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"module @{self.name} has no function @{name}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    @property
    def main(self) -> Function:
        return self["main"]

    def walk(self) -> Iterator[Operation]:
        for fn in self.functions.values():
            yield from fn.walk()

    def __str__(self) -> str:
        from .printer import print_module
        return print_module(self)

    def clone(self) -> "Module":
        from .clone import clone_module
        return clone_module(self)


def uses(region: Region) -> Dict[Value, List[Operation]]:
    """Map each value used inside ``region`` (including nested regions) to its user ops."""
    out: Dict[Value, List[Operation]] = {}
    for op in region.walk():
        for v in op.operands:
            out.setdefault(v, []).append(op)
    return out
