"""Sharding annotations on a function's arguments and results (``Function.arg_shardings``,
``Function.result_shardings``): the mesh (axis names and sizes, in order) and, per array
dimension, the mesh axes it is split over (major to minor), as Shardy's ``#sdy.sharding``.

Text form (hlo IR), an argument or result attribute::

    func @main(%arg0: f32[8,4] {sharding = "mesh<batch=2, model=1> [{batch}, {}]"}) -> (f32[8,4] {sharding = "mesh<batch=2, model=1> [{batch}, {}]"})

StableHLO form (what ``jax.jit(f, in_shardings=...).lower(...).as_text()`` emits): a module-level
``sdy.mesh @mesh = <["batch"=2, "model"=1]>`` and ``sdy.sharding = #sdy.sharding<@mesh,
[{"batch"}, {}]>`` on the argument or result (``ir/stablehlo/exporter.py`` and
``importer.py``). The annotation describes the program before partitioning
(``ShardedJit.lowered_ir``); the partitioner's per-partition program carries none.
"""
from __future__ import annotations

import re
from typing import Sequence, Tuple

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TEXT = re.compile(r"\s*mesh<([^>]*)>\s*\[(.*)\]\s*\Z")
_SDY_MESH = re.compile(r"\s*(?:#sdy\.mesh)?<\s*\[(.*)\]\s*>\s*\Z")
_SDY_SHARDING = re.compile(r"\s*#sdy\.sharding<\s*@([\w.$-]+)\s*,\s*\[(.*)\]\s*>\s*\Z")


class ShardingSyntaxError(ValueError):
    """A sharding annotation that does not read (the parsers turn it into their own error)."""


class ValueSharding:
    """``mesh``: ((axis name, size), ...); ``dims``: per array dimension, a tuple of axis names."""

    __slots__ = ("mesh", "dims")

    def __init__(self, mesh: Sequence[Tuple[str, int]], dims: Sequence[Sequence[str]]):
        self.mesh = tuple((str(n), int(s)) for n, s in mesh)
        self.dims = tuple(tuple(d) for d in dims)
        names = [n for n, _ in self.mesh]
        for n, s in self.mesh:
            if not _NAME.match(n):
                raise ShardingSyntaxError(f"mesh axis name {n!r} is not an identifier")
            if s < 1:
                raise ShardingSyntaxError(f"mesh axis {n} has size {s}")
        if len(set(names)) != len(names):
            raise ShardingSyntaxError(f"mesh axes {names} repeat a name")
        used = [a for d in self.dims for a in d]
        for a in used:
            if a not in names:
                raise ShardingSyntaxError(f"axis {a!r} is not an axis of the mesh ({', '.join(names)})")
        if len(set(used)) != len(used):
            raise ShardingSyntaxError(f"a mesh axis splits two dimensions: {self.text()}")

    @classmethod
    def of(cls, mesh_shape, dims) -> "ValueSharding":
        """From ``Mesh.shape`` (a dict, in axis order) and axes per dimension."""
        return cls(list(mesh_shape.items()), dims)

    def __eq__(self, other):
        return isinstance(other, ValueSharding) and (self.mesh, self.dims) == (other.mesh, other.dims)

    def __hash__(self):
        return hash((self.mesh, self.dims))

    def __repr__(self):
        return f"ValueSharding({self.text()!r})"

    def text(self) -> str:
        mesh = ", ".join(f"{n}={s}" for n, s in self.mesh)
        return f"mesh<{mesh}> [" + ", ".join("{" + ", ".join(d) + "}" for d in self.dims) + "]"

    def check_rank(self, rank: int) -> None:
        if len(self.dims) != rank:
            raise ShardingSyntaxError(f"sharding {self.text()!r} has {len(self.dims)} dimensions "
                                      f"for a value of rank {rank}")

    # -- Shardy (StableHLO) form -----------------------------------------------------------
    def sdy_mesh(self) -> str:
        return "<[" + ", ".join(f'"{n}"={s}' for n, s in self.mesh) + "]>"

    def sdy(self, mesh_symbol: str) -> str:
        dims = ", ".join("{" + ", ".join(f'"{a}"' for a in d) + "}" for d in self.dims)
        return f"#sdy.sharding<@{mesh_symbol}, [{dims}]>"


def _dims(body: str, quoted: bool) -> Tuple[Tuple[str, ...], ...]:
    body = body.strip()
    if not body:
        return ()
    out = []
    for m in re.finditer(r"\{([^{}]*)\}\s*(,|\Z)", body):
        inner = m.group(1).strip()
        names = [x.strip() for x in inner.split(",")] if inner else []
        if quoted:
            if not all(len(x) >= 2 and x[0] == x[-1] == '"' for x in names):
                raise ShardingSyntaxError(f"expected quoted axis names in {{{inner}}}")
            names = [x[1:-1] for x in names]
        out.append(tuple(names))
    if "".join(re.findall(r"\{[^{}]*\}\s*,?", body)).replace(" ", "") != body.replace(" ", ""):
        raise ShardingSyntaxError(f"expected dimensions like [{{batch}}, {{}}], found [{body}]")
    return tuple(out)


def _mesh(body: str, quoted: bool):
    out = []
    for part in [p.strip() for p in body.split(",") if p.strip()]:
        name, eq, size = part.partition("=")
        name, size = name.strip(), size.strip()
        if quoted:
            if not (len(name) >= 2 and name[0] == name[-1] == '"'):
                raise ShardingSyntaxError(f"expected a quoted axis name, found {name}")
            name = name[1:-1]
        if not eq or not size.isdigit():
            raise ShardingSyntaxError(f"expected an axis like batch=2, found {part!r}")
        out.append((name, int(size)))
    return out


def parse_sharding(text: str) -> ValueSharding:
    """The hlo text form ``mesh<batch=2> [{batch}, {}]``."""
    m = _TEXT.match(text)
    if not m:
        raise ShardingSyntaxError(f"expected a sharding like \"mesh<batch=2> [{{batch}}, {{}}]\", "
                                  f"found {text!r}")
    return ValueSharding(_mesh(m.group(1), False), _dims(m.group(2), False))


def parse_sdy(mesh_text: str, sharding_text: str) -> ValueSharding:
    """From an ``sdy.mesh``'s ``<["batch"=2]>`` and an ``#sdy.sharding<@mesh, [...]>``."""
    if re.search(r"\?|\bpriority\b|replicated=|unreduced=|\}p\d|device_ids", mesh_text + sharding_text):
        raise ShardingSyntaxError(f"open dimensions, priorities, explicit replicated or unreduced "
                                  f"axes and device orders of Shardy are not supported yet: "
                                  f"{sharding_text} over {mesh_text}")
    mm = _SDY_MESH.match(mesh_text)
    sm = _SDY_SHARDING.match(sharding_text)
    if not mm or not sm:
        raise ShardingSyntaxError(f"cannot read the Shardy sharding {sharding_text} over mesh {mesh_text}")
    return ValueSharding(_mesh(mm.group(1), True), _dims(sm.group(2), True))


def sdy_mesh_symbol(sharding_text: str) -> str:
    m = re.match(r"\s*#sdy\.sharding<\s*@([\w.$-]+)", sharding_text)
    if not m:
        raise ShardingSyntaxError(f"cannot read the Shardy sharding {sharding_text} (an inline "
                                  f"mesh is not supported yet)")
    return m.group(1)


__all__ = ["ValueSharding", "ShardingSyntaxError", "parse_sharding", "parse_sdy", "sdy_mesh_symbol"]
