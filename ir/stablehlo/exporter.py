"""hlo IR -> StableHLO text that jaxlib's MLIR parses and verifies.

Each op is written in MLIR's generic form (``%3 = "stablehlo.add"(%1, %2) : (...) -> ...``),
with hlo's flattened attributes folded back into StableHLO's struct attributes; the text is
then parsed and verified by jaxlib and returned as MLIR prints it, locations included, in
generic op form unless the pretty form is asked for. Locations become
``loc("file":line:0)``; ops without one get ``loc(unknown)``, so
``import_module(export_module(m))`` reproduces ``m`` exactly for every module the importer
produces.

What does not survive: layouts (StableHLO tensors have none) and ``fusion`` ops, which have
no StableHLO equivalent and are exported by inlining their fused region in place of the op
(the region's ops are written where the fusion was, reading the fusion's operands).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ..core import Function, Location, Module, Operation, Region, Value
from ..sharding_attr import ValueSharding
from ..verifier import verify_module
from . import mlir_bridge as mb
from . import opmap
from .dynamic_export import SymbolSources, needs_dynamic_form, write_dynamic_op
from .errors import StableHLOError
from .requires import require_jaxlib
from .typemap import dense_text, tensor_to_mlir_text


def export_module(module: Module, pretty: bool = False, verify: bool = True) -> str:
    """StableHLO text of ``module``, parsed and verified by jaxlib, as MLIR prints it with
    locations: in generic op form by default, which keeps every location; ``pretty=True`` gives
    the custom form (``stablehlo.add %0, %1 : tensor<4xf32>``), easier to read, but MLIR's
    compact form of a reduce whose body is one binary op drops that op's location.
    ``verify=False`` returns the generated text without running jaxlib at all (so it works
    without the ``stablehlo`` extra)."""
    if verify:
        require_jaxlib("hlo.ir.stablehlo.export_module")
    verify_module(module)
    text = _Writer(module).module()
    if not verify:
        return text
    parsed = mb.parse_and_verify(text, f"export of module @{module.name}")
    return mb.print_module(parsed, debug_info=True, generic=not pretty)


def _symbol(name: str) -> str:
    return "@" + name if all(c.isalnum() or c in "_.$-" for c in name) and not name[0].isdigit() \
        else '@"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _loc(loc: Optional[Location]) -> str:
    if loc is None:
        return "loc(unknown)"
    f = loc.file.replace("\\", "\\\\").replace('"', '\\"')
    return f'loc("{f}":{loc.line}:0)'


def _symbolic(fn: Function) -> bool:
    if fn.dim_args or any(not t.is_static for t in fn.arg_types):
        return True
    return any(not r.type.is_static for op in fn.walk() for r in op.results)


def _meshes(m: Module) -> Dict[tuple, str]:
    """The distinct meshes of ``m``'s sharding annotations, each with its ``sdy.mesh`` symbol."""
    out: Dict[tuple, str] = {}
    for fn in m.functions.values():
        for sh in list(fn.arg_shardings.values()) + list(fn.result_shardings.values()):
            out.setdefault(sh.mesh, "mesh" if not out else f"mesh_{len(out)}")
    return out


def _types(vals) -> str:
    return ", ".join(tensor_to_mlir_text(v.type) for v in vals)


class _Writer:
    def __init__(self, module: Module):
        self.m = module
        self.lines: List[str] = []

    def module(self) -> str:
        self.meshes = _meshes(self.m)
        if self.meshes:   # as jax.jit(f, in_shardings=...).lower(...) writes them (Shardy)
            sizes = {int(np.prod([n for _, n in mesh], dtype=np.int64)) for mesh in self.meshes}
            if len(sizes) > 1:
                raise StableHLOError(f"module @{self.m.name}: its sharding annotations are over "
                                     f"meshes of different sizes {sorted(sizes)}")
            out = [f"module {_symbol(self.m.name)} attributes {{mhlo.num_partitions = "
                   f"{sizes.pop()} : i32, mhlo.num_replicas = 1 : i32}} {{"]
            for mesh, sym in self.meshes.items():
                out.append(f"  sdy.mesh @{sym} = " + ValueSharding(mesh, ()).sdy_mesh() + " loc(unknown)")
        else:
            out = [f"module {_symbol(self.m.name)} {{"]
        for fn in self.m.functions.values():
            out.extend(self.function(fn))
        out.append("} loc(unknown)")
        return "\n".join(out) + "\n"

    # -- functions and regions --------------------------------------------------------------
    def function(self, fn: Function) -> List[str]:
        self.names: Dict[Value, str] = {}
        self.counter = 0
        self.lines = []
        args = ", ".join(f"{self.define(a)}: {tensor_to_mlir_text(a.type)}"
                         f"{self._sharding(fn.arg_shardings.get(i))} {_loc(fn.loc)}"
                         for i, a in enumerate(fn.args))
        # symbolic dimensions (dynamic_export.py): where each size comes from in this function
        self.src = SymbolSources(fn, self.names, tensor_to_mlir_text) if _symbolic(fn) else None
        results = ", ".join(tensor_to_mlir_text(t) + self._sharding(fn.result_shardings.get(i))
                            for i, t in enumerate(fn.result_types))
        vis = "private " if fn.visibility == "private" else ""
        head = f"  func.func {vis}{_symbol(fn.name)}({args}) -> ({results}) {{"
        self.ops(fn.body.ops, 2)
        outs = fn.body.outputs
        ret = f'"func.return"({", ".join(self.use(v) for v in outs)}) : ({_types(outs)}) -> () ' \
              f'{_loc(fn.body.output_loc)}'
        self.lines.append("    " + ret)
        return [head] + self.lines + [f"  }} {_loc(fn.loc)}"]

    def _sharding(self, sh: Optional[ValueSharding]) -> str:
        return "" if sh is None else f" {{sdy.sharding = {sh.sdy(self.meshes[sh.mesh])}}}"

    def define(self, v: Value) -> str:
        name = f"%v{self.counter}"
        self.counter += 1
        self.names[v] = name
        return name

    def use(self, v: Value) -> str:
        try:
            return self.names[v]
        except KeyError:
            raise StableHLOError(f"value {v!r} is used outside its scope") from None

    def ops(self, ops: List[Operation], depth: int) -> None:
        for op in ops:
            if op.name == "fusion":
                self.inline_fusion(op, depth)
            else:
                self.op(op, depth)

    def inline_fusion(self, op: Operation, depth: int) -> None:
        body = op.regions[0]
        for a, v in zip(body.args, op.operands):
            self.names[a] = self.use(v)
        self.ops(body.ops, depth)
        for r, v in zip(op.results, body.outputs):
            self.names[r] = self.use(v)

    def region(self, r: Region, depth: int, terminator: str, loc: Optional[Location]) -> str:
        ind = "  " * depth
        args = ", ".join(f"{self.define(a)}: {tensor_to_mlir_text(a.type)} {_loc(loc)}" for a in r.args)
        saved = self.lines
        self.lines = []
        self.ops(r.ops, depth + 1)
        outs = r.outputs
        self.lines.append("  " * (depth + 1) + f'"{terminator}"({", ".join(self.use(v) for v in outs)}) '
                          f": ({_types(outs)}) -> () {_loc(r.output_loc)}")
        body = self.lines
        self.lines = saved
        return f"{{\n{ind}^bb0({args}):\n" + "\n".join(body) + f"\n{ind}}}"

    # -- ops --------------------------------------------------------------------------------
    def op(self, op: Operation, depth: int) -> None:
        ind = "  " * depth
        if self.src is not None and needs_dynamic_form(op):
            write_dynamic_op(op, self.src, self.use, self.define, _types, tensor_to_mlir_text,
                             _loc(op.loc), self.lines, ind)
            return
        operands = ", ".join(self.use(v) for v in op.operands)
        if op.name == "run_parallel":  # the test vectors' interpreter.run_parallel of functions
            from .run_parallel import export_programs
            results = ", ".join(self.define(r) for r in op.results)
            sig = f"({_types(op.operands)}) -> ({', '.join(tensor_to_mlir_text(t) for t in op.result_types)})"
            self.lines.append(f'{ind}{results}{" = " if op.results else ""}"interpreter.run_parallel"'
                              f'({operands}) {{{export_programs(op, _symbol)}}} : {sig} {_loc(op.loc)}')
            return
        attrs = self.attrs(op)
        regions = ""
        if op.regions:
            regions = " (" + ", ".join(self.region(r, depth + 1, "stablehlo.return", op.loc) for r in op.regions) + ")"
        results = ", ".join(self.define(r) for r in op.results)
        lhs = f"{results} = " if op.results else ""
        name = "func.call" if op.name == "call" else "stablehlo." + op.name
        props = f" <{{{attrs}}}>" if attrs else ""
        rtypes = ", ".join(tensor_to_mlir_text(t) for t in op.result_types)
        sig = f"({_types(op.operands)}) -> ({rtypes})"
        self.lines.append(f'{ind}{lhs}"{name}"({operands}){props}{regions} : {sig} {_loc(op.loc)}')

    def attrs(self, op: Operation) -> str:
        a = op.attrs
        if op.name == "constant":
            t = op.results[0].type
            return f"value = {dense_text(a['value'], t)} : {tensor_to_mlir_text(t)}"
        if op.name == "call":
            return f"callee = {_symbol(a['callee'])}"
        parts = []
        struct = opmap.STRUCT_ATTRS.get(op.name)
        simple = dict(opmap.SIMPLE_ATTRS.get(op.name, {}))
        unknown = set(a) - set(simple) - set(struct[1] if struct else ())
        if unknown:  # a new attribute in the op table that this exporter does not know yet
            raise StableHLOError(f"cannot export attribute(s) {', '.join(sorted(unknown))} of "
                                 f"'{op.name}'{' at ' + str(op.loc) if op.loc else ''}")
        if struct is not None:
            key, text = opmap.write_struct(op.name, a)
            parts.append(f"{key} = {text}")
        values = {k: v for k, v in a.items() if k in simple}
        x = op.operands[0].type if op.operands else None
        if op.name == "slice" and "strides" not in values:
            values["strides"] = opmap.ones(x.rank)
        if op.name == "convolution":  # StableHLO requires both group counts
            values.setdefault("feature_group_count", 1)
            values.setdefault("batch_group_count", 1)
        for k in sorted(values):
            parts.append(f"{k} = {simple[k][1](values[k])}")
        return ", ".join(parts)
