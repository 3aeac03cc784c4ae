"""StableHLO MLIR -> hlo IR.

The text is parsed by jaxlib's MLIR bindings (so everything MLIR accepts is accepted, in
pretty or generic form), chlo ops are legalized with jaxlib's ``chlo-legalize-to-stablehlo``
pass, and the module is walked op by op:

- every StableHLO op of hlo's op table becomes the op of the same name, its struct attributes
  flattened into hlo's named attributes (``opmap.py``);
- ``func.call`` becomes ``call``; ``func.return``/``stablehlo.return`` end regions;
- spellings with an hlo equivalent are rewritten: ``dot`` -> ``dot_general``, ``broadcast`` ->
  ``broadcast_in_dim``, ``composite`` -> ``call`` of its decomposition, ``get_dimension_size``
  -> a constant, ``select_and_scatter`` -> reduce_window + scatter, and the dynamic ops (``dynamic_broadcast_in_dim``, ``dynamic_iota``,
  ``dynamic_reshape``, ``dynamic_pad``, ``dynamic_gather``, ``dynamic_conv``,
  ``real_dynamic_slice``) -> their static forms when their result types are static and their
  shape operands constant;
- ``tuple``/``get_tuple_element`` are flattened away (a tuple that reaches anything else is
  unsupported); sharding annotations (``sdy.*``, ``custom_call @Sharding``) are identities;
  ``mhlo.*``/``jax.*`` attributes and precision hints are ignored;
- the test suites' ``check.*`` ops and ``custom_call @check.*`` become extra results of their
  function when checks are collected (see ``checks.py``), and are unsupported otherwise; so do
  the records of ``interpreter.probe`` that ``check.expect_serialized_eq`` reads (``probes.py``).

Everything else (complex, f8, i2/i4 and quantized types, tokens, dynamic shapes, ops outside
the op table) raises ``UnsupportedError`` naming the op or type and its location. MLIR
file/line locations become ``Location``s; positions in text parsed from a string carry the
``source_name`` (``<stablehlo>`` by default).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import numpy as np

from .. import decompositions
from .. import ops as op_table
from ..builder import Builder
from ..clone import clone_op
from ..core import Function, Location, Module, Region, Value
from ..dim_expr import DimExpr, InconclusiveDimensionError, SymbolicDimError
from ..sharding_attr import ShardingSyntaxError, ValueSharding, parse_sdy, sdy_mesh_symbol
from ..types import TensorType, s32, s64
from ..verifier import verify_module
from . import mlir_bridge as mb
from . import opmap
from .checks import Check
from .dynamic import ShapeValues, finish_types, is_placeholder, materialize
from .errors import StableHLOError, UnsupportedError, shorten
from .probes import Probes
from .requires import require_jaxlib
from .typemap import TextAttr, array_from_attr, element_from_mlir, tensor_from_mlir, tensor_from_mlir_dims

# Ops that exist in StableHLO (or its companions) but not in hlo's op table, with a reason.
_OUTSIDE_TABLE_REASON = "op outside hlo's op table"
_COLLECTIVES = {"send", "recv", "infeed", "outfeed", "after_all", "create_token",
                "cross_replica_sum", "async_start", "async_done"}
_SDY_IDENTITY = {"sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier"}
_SHARDING_CALLS = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"}
_SYMBOL_OK = re.compile(r"[^A-Za-z0-9_.$-]")


class _Poison:
    """Stands for a value hlo cannot hold; using it raises the stored error."""

    def __init__(self, error: Exception):
        self.error = error


Source = Union[str, "os.PathLike[str]", Any]


def _names_a_path(s: str) -> bool:
    """Whether a string stands for a file: one that exists, or one line that cannot be MLIR text
    (no ``{``, ``(``, ``%``, ``@`` nor ``=``). One line of text is text, however long."""
    if "\n" in s or "\0" in s or len(s) > 4096:
        return False
    if os.path.isfile(s):
        return True
    return not any(c in s for c in "{(%@=")


def read_source(source: Source, source_name: Optional[str] = None) -> Tuple[str, str]:
    """(text, name) of a StableHLO source: text, a path, or an MLIR module object (such as
    ``jax.jit(f).lower(x).compiler_ir("stablehlo")``)."""
    if hasattr(source, "operation") and hasattr(source, "body"):
        return source.operation.get_asm(enable_debug_info=True), source_name or "<stablehlo>"
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _names_a_path(source)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise StableHLOError(f"no such StableHLO file: {shorten(path)!r} (pass text or a path)")
        with open(path, encoding="utf-8") as f:
            return f.read(), source_name or path
    if not isinstance(source, str):
        raise TypeError(f"expected StableHLO text, a path or an MLIR module, got {type(source).__name__}")
    return source, source_name or "<stablehlo>"


def import_module(source: Source, source_name: Optional[str] = None) -> Module:
    """Import StableHLO (text, a path, or an MLIR module object) as a verified hlo ``Module``."""
    require_jaxlib("hlo.ir.stablehlo.import_module")
    text, name = read_source(source, source_name)
    return _Importer(name, collect_checks=False).run(text)


def import_with_checks(source: Source, source_name: Optional[str] = None
                       ) -> Tuple[Module, Dict[str, List[Check]]]:
    """Import a test: check ops are removed and the values they compare appended to their
    function's results. Returns the module and, per function name, its checks."""
    require_jaxlib("hlo.ir.stablehlo.import_with_checks")
    text, name = read_source(source, source_name)
    imp = _Importer(name, collect_checks=True)
    module = imp.run(text)
    return module, imp.checks


class _Importer:
    def __init__(self, source_name: str, collect_checks: bool):
        self.file = source_name
        self.collect = collect_checks
        self.checks: Dict[str, List[Check]] = {}
        self.probed: Set[str] = set()  # functions that run interpreter.probe
        self.names: Dict[str, str] = {}
        self.func_ops: Dict[str, Any] = {}  # MLIR symbol -> its func.func (run_parallel's programs)
        # shape-polymorphic modules (dynamic.py): None when every type is static
        self.dyn: Optional[ShapeValues] = None
        self.deferred: Dict[str, Any] = {}  # private functions with `?` types: imported per call
        self.specialized: Dict[Any, Function] = {}
        self.meshes: Dict[str, str] = {}  # sdy.mesh symbol -> its mesh attribute's text

    # -- module and functions -------------------------------------------------------------
    def run(self, text: str) -> Module:
        mod = mb.parse(text, self.file)
        if "chlo." in text:
            mb.legalize_chlo(mod, self.file)
        with mb.context():
            return self.module(mod)

    def module(self, mod) -> Module:
        attrs = _attrs(mod.operation)
        name = attrs["sym_name"].value if "sym_name" in attrs else "module"
        m = Module(_SYMBOL_OK.sub("_", name) or "module")
        funcs = []
        for op in mod.body.operations:
            n = op.operation.name
            if n == "func.func":
                funcs.append(op)
            elif n == "sdy.mesh":
                a = op.operation.attributes
                self.meshes[a["sym_name"].value] = str(a["mesh"])
            else:
                raise UnsupportedError(n, "top-level op", self.loc(op.operation.location))
        for f in funcs:
            sym = f.operation.attributes["sym_name"].value
            self.names[sym] = self._unique(_SYMBOL_OK.sub("_", sym) or "f")
            self.func_ops[sym] = f
        if any(_dynamic_signature(f) for f in funcs):
            self.dyn = ShapeValues()
            self.module_ref = m
            for f in funcs:
                if _dynamic_signature(f) and _attrs(f.operation).get("sym_visibility") is not None \
                        and _attrs(f.operation)["sym_visibility"].value == "private":
                    self.deferred[f.operation.attributes["sym_name"].value] = f
        for f in funcs:
            if f.operation.attributes["sym_name"].value in self.deferred:
                continue
            m.add(self.function(f))
        if self.dyn is not None:
            finish_types(m, self.dyn)
        for op in m.walk():
            fname = op.attrs["callee"] if op.name == "call" else None
            if self.checks.get(fname):
                raise UnsupportedError("check op in a called function",
                                       f"@{fname} holds checks and is called", op.loc)
            if fname in self.probed:
                raise UnsupportedError("interpreter.probe in a called function",
                                       f"@{fname} probes and is called", op.loc)
        verify_module(m)
        return m

    def _unique(self, name: str) -> str:
        base, i = name, 1
        while name in self.names.values():
            name = f"{base}_{i}"
            i += 1
        return name

    def function(self, fop, arg_types: Optional[List[TensorType]] = None, name: Optional[str] = None,
                 arg_svals: Optional[List] = None) -> Function:
        op = fop.operation
        attrs = _attrs(op)
        sym = attrs["sym_name"].value
        loc = self.loc(op.location)
        vis = attrs["sym_visibility"].value if "sym_visibility" in attrs else "public"
        ir = mb.mlir()
        ftype = ir.FunctionType(attrs["function_type"].value)
        if not op.regions or not len(op.regions[0].blocks):
            raise StableHLOError(f"function @{sym} is declared without a body{_at(loc)}")
        if len(op.regions[0].blocks) > 1:
            raise UnsupportedError(f"function @{sym}", "more than one block", loc)
        dim_args: Dict[int, str] = {}
        if arg_types is None and self.dyn is not None:
            arg_types = [self.type_of(t, loc, fresh=True) for t in ftype.inputs]
            for i, t in enumerate(arg_types):  # the dimension arguments (dynamic.py)
                if t.rank or not t.dtype.is_int:
                    break
                dim_args[i] = f"d{i}"
        elif arg_types is None:
            arg_types = [tensor_from_mlir(t, loc) for t in ftype.inputs]
            for t in ftype.results:
                tensor_from_mlir(t, loc)
        fn = Function(name or self.names[sym], arg_types, "private" if vis == "private" else "public", loc)
        fn.dim_args = dim_args
        fn.arg_shardings = self._shardings(attrs.get("arg_attrs"), fn.arg_types, loc)
        fn.result_shardings = self._shardings(attrs.get("res_attrs"), [tensor_from_mlir(t, loc) for t in ftype.results]
                                              if self.dyn is None else None, loc)
        block = op.regions[0].blocks[0]
        env: Dict[Any, Any] = {}
        for ba, v in zip(block.arguments, fn.args):
            env[ba] = v
        if self.dyn is not None:
            self.dyn.register(fn.args)
            for i, sym_name in dim_args.items():
                self.dyn.svals[fn.args[i]] = (DimExpr.symbol(sym_name),)
            for v, sv in zip(fn.args, arg_svals or ()):
                if sv is not None:
                    self.dyn.svals[v] = sv
            for i, name_ in _global_constants(attrs).items():  # jax.export's dimension names
                sv = self.dyn.svals.get(fn.args[i]) if i < len(fn.args) else None
                if sv is not None and len(sv) == 1 and is_placeholder(self.dyn.resolve(sv[0])):
                    try:
                        self.dyn.unify(sv[0], DimExpr.symbol(name_))
                    except ValueError:  # not a name hlo's symbols can have: keep the placeholder
                        pass
        self.fn_checks: List[Check] = []
        self.fn_check_values: List[Value] = []
        self.probes = Probes(fn.body, _wanted_probes(block)) if self.collect else None
        self.block(block, fn.body, env, top=True)
        if self.probes is not None and self.probes.any:
            self.probed.add(fn.name)
        if self.fn_checks:
            base = len(fn.body.outputs)
            for c in self.fn_checks:
                c.actual += base
                if c.expected is not None:
                    c.expected += base
                if c.present is not None:
                    c.present += base
            fn.body.outputs = list(fn.body.outputs) + self.fn_check_values
            self.checks[fn.name] = self.fn_checks
        return fn

    def _shardings(self, arr, types, loc) -> Dict[int, ValueSharding]:
        """``sdy.sharding`` attributes of a function's arguments or results (``arg_attrs`` /
        ``res_attrs``) over the module's ``sdy.mesh``es; others (``jax.result_info``) dropped."""
        out: Dict[int, ValueSharding] = {}
        for i, d in enumerate(arr if arr is not None else ()):
            if "sdy.sharding" not in d:
                continue
            text = str(d["sdy.sharding"])
            try:
                sym = sdy_mesh_symbol(text)
                if sym not in self.meshes:
                    raise StableHLOError(f"{text} names mesh @{sym}, which the module does not "
                                         f"define{_at(loc)}")
                sh = parse_sdy(self.meshes[sym], text)
                if types is not None:
                    sh.check_rank(types[i].rank)
            except ShardingSyntaxError as e:
                raise UnsupportedError("sdy.sharding", str(e), loc) from None
            out[i] = sh
        return out

    # -- regions --------------------------------------------------------------------------
    def block(self, block, region: Region, env: Dict, top: bool = False) -> None:
        ops = list(block.operations)
        if not ops:
            raise StableHLOError("a region has no terminator")
        for mop in ops[:-1]:
            self.op(mop.operation, region, env, top)
        term = ops[-1].operation
        if term.name not in ("func.return", "stablehlo.return"):
            raise StableHLOError(f"region ends in '{term.name}', not a return{_at(self.loc(term.location))}")
        loc = self.loc(term.location)
        region.outputs = [self.value(env, v, term.name, loc) for v in term.operands]
        region.output_loc = loc

    def region(self, mregion, name: str, env: Dict, extra: Tuple[List, List[Value]] = ((), ())) -> Region:
        """The region; ``extra`` = (probe record keys, their values outside) adds loop-carried
        probe records after the block's own arguments and results (``probes.py``)."""
        blocks = list(mregion.blocks)
        if len(blocks) != 1:
            raise UnsupportedError(f"region '{name}'", f"{len(blocks)} blocks")
        block = blocks[0]
        loc = self.loc(block.owner.location) if hasattr(block, "owner") else None
        keys, outside = extra
        r = Region([self.type_of(a.type, loc, fresh=True) for a in block.arguments] + [v.type for v in outside],
                   name=name)
        for ba, v in zip(block.arguments, r.args):
            env[ba] = v
        if self.dyn is not None:
            self.dyn.register(r.args)
        if keys and name == "body":
            self.probes.bind(keys, r.args[len(block.arguments):], r)
        self.block(block, r, env)
        if keys and name == "body":
            r.outputs = list(r.outputs) + self.probes.values(keys)
        return r

    # -- values ---------------------------------------------------------------------------
    def value(self, env: Dict, mv, user: str, loc: Optional[Location]) -> Value:
        v = env.get(mv)
        if v is None:
            raise StableHLOError(f"'{user}' uses a value defined outside what was imported{_at(loc)}")
        if isinstance(v, _Poison):
            raise v.error
        if isinstance(v, list):
            raise UnsupportedError(f"tuple value used by {user}", "tuples are only flattened through "
                                   "tuple/get_tuple_element", loc)
        return v

    def loc(self, mloc) -> Optional[Location]:
        fl = mb.location_of(mloc, self.file)
        return Location(*fl) if fl is not None else None

    # -- ops ------------------------------------------------------------------------------
    def op(self, op, region: Region, env: Dict, top: bool) -> None:
        name = op.name
        loc = self.loc(op.location)
        # Types first: reading an attribute of a type jaxlib cannot decode (complex) fails.
        for v in op.operands:
            if v not in env:
                raise StableHLOError(f"'{name}' uses a value defined outside what was imported{_at(loc)}")
        if name not in ("stablehlo.tuple", "stablehlo.get_tuple_element"):
            for r in op.results:
                if not name.startswith(("check.", "stablehlo.custom_call")):
                    self.type_of(r.type, loc)
        attrs = _attrs(op, loc)
        if name.startswith("check."):
            return self.check_op(op, name, attrs, env, top, loc)
        if name == "stablehlo.custom_call":
            return self.custom_call(op, attrs, region, env, top, loc)
        if name == "stablehlo.tuple":
            env[op.results[0]] = [self._tuple_elem(env, v, loc) for v in op.operands]
            return
        if name == "stablehlo.get_tuple_element":
            t = env.get(op.operands[0])
            if not isinstance(t, list):
                raise StableHLOError(f"get_tuple_element of a non-tuple{_at(loc)}")
            env[op.results[0]] = t[int(attrs["index"].value)]
            return
        if name in _SDY_IDENTITY:
            env[op.results[0]] = self.value(env, op.operands[0], name, loc)
            return
        if name == "sdy.sharding_group":
            return
        short = name[len("stablehlo."):] if name.startswith("stablehlo.") else None
        rtypes = [self.type_of(r.type, loc) for r in op.results]
        operands = [self.value(env, v, name, loc) for v in op.operands]
        b = Builder(region, loc)
        if name == "func.call":
            callee = attrs["callee"].value
            if callee not in self.names:
                raise StableHLOError(f"call of unknown function @{callee}{_at(loc)}")
            if callee in self.deferred:
                fn = self._specialize_callee(callee, operands, loc)
                res = b.op("call", operands, {"callee": fn.name}, result_types=fn.result_types)
                return self._bind(env, op, res.results)
            res = b.op("call", operands, {"callee": self.names[callee]}, result_types=rtypes)
            return self._bind(env, op, res.results)
        if name == "interpreter.probe" and self.collect:
            self.probes.record(b, region, attrs["probe_id"].value, operands[0], loc)
            env[op.results[0]] = operands[0]
            return
        if name.startswith("hlo_newer."):  # collective forms newer than jaxlib's StableHLO
            from .newer_collectives import import_op
            return self._bind(env, op, import_op(self, op, name, attrs, operands, rtypes, b, loc))
        if name == "interpreter.run_parallel":
            from .run_parallel import import_run_parallel
            return self._bind(env, op, import_run_parallel(self, op, attrs, operands, rtypes, b, loc))
        if short is None:
            if name.startswith("interpreter."):
                raise UnsupportedError(name, "interpreter dialect op (printing, ...)", loc)
            raise UnsupportedError(name, "op from outside the StableHLO dialect", loc)
        if short in _COLLECTIVES:
            raise UnsupportedError(name, "collective, token or host-communication op", loc)
        handler = getattr(self, "op_" + short, None)
        if handler is not None:
            results = handler(op, attrs, operands, rtypes, b, env, loc)
            return self._bind(env, op, results)
        if short not in op_table.OPS or short in ("fusion", "call"):
            raise UnsupportedError(name, _OUTSIDE_TABLE_REASON, loc)
        self._bind(env, op, self._table_op(op, short, attrs, operands, rtypes, b, env, loc))

    def _table_op(self, op, short, attrs, operands, rtypes, b, env, loc, extra=((), ())):
        """The op of hlo's table that ``op`` is; ``extra`` as ``region`` takes it."""
        opdef = op_table.OPS[short]
        hlo_attrs = self.read_attrs(short, op.name, attrs, loc)
        if self.dyn is not None:
            self.dyn.unify_operands(short, operands, hlo_attrs, opdef.has(op_table.ELEMENTWISE),
                                    rtypes[0] if len(rtypes) == 1 else None)
        regions = []
        if op.regions:
            rnames = op_table.region_names(opdef, len(op.regions))
            regions = [self.region(r, rn, env, extra) for r, rn in zip(op.regions, rnames)]
            if self.dyn is not None and short in ("while", "if", "case"):
                self._unify_regions(short, operands, regions)
        rtypes = list(rtypes) + [v.type for v in extra[1]]
        if self.dyn is not None:
            rtypes = [t if t is None else self.dyn.type(t) for t in rtypes]
        if any(t is None for t in rtypes):
            rtypes = self._dynamic_results(op, short, opdef, operands, hlo_attrs, regions, rtypes, loc)
        return b.op(short, list(operands) + list(extra[1]), hlo_attrs, result_types=rtypes,
                    regions=regions).results

    # -- shape-polymorphic modules (dynamic.py) ----------------------------------------------
    def type_of(self, t, loc, fresh: bool = False) -> Optional[TensorType]:
        """``tensor_from_mlir``; in a shape-polymorphic module a ``?`` is a fresh placeholder
        (``fresh``: arguments) or makes the type None (results: inferred from the operands)."""
        if self.dyn is None or _static_or_not_tensor(t):
            return tensor_from_mlir(t, loc)
        if not fresh:
            tensor_from_mlir_dims(t, loc, lambda: None)  # element type and encoding checks
            return None
        return tensor_from_mlir_dims(t, loc, self.dyn.fresh)

    def _dynamic_results(self, op, short, opdef, operands, attrs, regions, rtypes, loc):
        if short in ("convert", "bitcast_convert") and len(operands) == 1:
            et = element_from_mlir(op.results[0].type.element_type, loc)
            if short == "bitcast_convert" and et.itemsize != operands[0].type.dtype.itemsize:
                raise UnsupportedError(f"{op.name} with a dynamic shape", "changes the element width", loc)
            return [TensorType(operands[0].type.shape, et)]
        if opdef.result_type_given:
            raise UnsupportedError(f"{op.name} with a dynamic result type", "hlo cannot infer it", loc)
        try:
            inferred = opdef.infer([v.type for v in operands], opdef.normalize_attrs(attrs), list(regions))
        except (op_table.OpError, InconclusiveDimensionError, SymbolicDimError) as e:
            raise StableHLOError(f"{op.name}: {e}{_at(loc)}") from None
        if inferred is None:
            raise UnsupportedError(f"{op.name} with a dynamic result type", "hlo cannot infer it", loc)
        out = []
        for mr, given, inf in zip(op.results, rtypes, inferred):
            if given is not None:
                out.append(given)
            else:
                et = element_from_mlir(mr.type.element_type, loc)
                out.append(TensorType(inf.shape, et))
        return out

    def _unify_regions(self, short, operands, regions) -> None:
        if short == "while":
            for r in regions:
                for a, v in zip(r.args, operands):
                    self.dyn.unify_shapes(a.type.shape, v.type.shape)
            body = regions[-1]
            for a, v in zip(body.args, body.outputs):
                self.dyn.unify_shapes(a.type.shape, v.type.shape)
        else:
            first = regions[0].outputs
            for r in regions[1:]:
                for a, v in zip(first, r.outputs):
                    self.dyn.unify_shapes(a.type.shape, v.type.shape)

    def _specialize_callee(self, callee: str, operands: List[Value], loc) -> Function:
        """The deferred private function imported for these operand types (one per signature)."""
        types = [self.dyn.type(v.type) for v in operands]
        svals = [self.dyn.dims_of(v) for v in operands]
        key = (callee, tuple(types), tuple(svals))
        fn = self.specialized.get(key)
        if fn is None:
            base = self.names[callee]
            name = base if not any(k[0] == callee for k in self.specialized) else self._unique(base)
            self.names.setdefault(f"\0{name}", name)
            saved = (getattr(self, "fn_checks", None), getattr(self, "fn_check_values", None), self.probes)
            fn = self.function(self.deferred[callee], arg_types=types, name=name, arg_svals=svals)
            self.fn_checks, self.fn_check_values, self.probes = saved
            self.module_ref.add(fn)
            self.specialized[key] = fn
        return fn

    def _bind(self, env, op, results) -> None:
        for mr, v in zip(op.results, results):
            env[mr] = v
        if self.dyn is not None and results:
            self.dyn.register(results)
            hop = results[0].op
            if hop is not None:
                self.dyn.track(hop.name, hop.operands, hop.attrs, hop.results)

    def _tuple_elem(self, env, mv, loc):
        v = env.get(mv)
        if isinstance(v, list):
            return v
        return self.value(env, mv, "stablehlo.tuple", loc)

    def read_attrs(self, short: str, full: str, attrs: Dict, loc) -> Dict[str, Any]:
        """hlo attributes of a table op from its MLIR attributes; unknown ones are unsupported."""
        simple = opmap.SIMPLE_ATTRS.get(short, {})
        struct = opmap.STRUCT_ATTRS.get(short)
        out: Dict[str, Any] = {}
        for k, a in attrs.items():
            if k in simple:
                out[k] = simple[k][0](a)
            elif struct is not None and k == struct[0]:
                out.update(opmap.read_struct(short, a))
            elif short == "constant" and k == "value":
                continue
            elif opmap.ignored_attr(k):
                continue
            else:
                raise UnsupportedError(f"attribute '{k}' of {full}", "hlo has no equivalent", loc)
        out = {k: v for k, v in out.items() if v is not None}
        return opmap.drop_defaults(op_table.OPS[short], out)

    # -- ops that need more than a name and attributes --------------------------------------
    def op_constant(self, op, attrs, operands, rtypes, b, env, loc):
        value = array_from_attr(attrs["value"], rtypes[0])
        return b.op("constant", [], {"value": value}, result_types=rtypes).results

    def op_dot(self, op, attrs, operands, rtypes, b, env, loc):
        lhs, rhs = operands
        if lhs.type.rank not in (1, 2) or rhs.type.rank not in (1, 2):
            raise StableHLOError(f"stablehlo.dot needs operands of rank 1 or 2{_at(loc)}")
        a = {"lhs_contracting_dimensions": (lhs.type.rank - 1,), "rhs_contracting_dimensions": (0,)}
        self._only_hints("stablehlo.dot", attrs, loc)
        return b.op("dot_general", [lhs, rhs], a, result_types=rtypes).results

    def op_broadcast(self, op, attrs, operands, rtypes, b, env, loc):
        sizes = opmap.read_ints(attrs["broadcast_sizes"])
        x = operands[0]
        dims = tuple(range(len(sizes), len(sizes) + x.type.rank))
        return b.op("broadcast_in_dim", [x], {"broadcast_dimensions": dims}, result_types=rtypes).results

    def op_dynamic_broadcast_in_dim(self, op, attrs, operands, rtypes, b, env, loc):
        rt = self._shaped_result(op, operands[1], rtypes[0], "output_dimensions", loc)
        dims = opmap.read_ints(attrs["broadcast_dimensions"])
        if self.dyn is not None:
            x = operands[0]
            for i, d in enumerate(dims):
                if i < x.type.rank and d < rt.rank and x.type.shape[i] != 1:
                    self.dyn.unify(x.type.shape[i], rt.shape[d])
            rt = self.dyn.type(rt)
        return b.op("broadcast_in_dim", [operands[0]], {"broadcast_dimensions": dims},
                    result_types=[rt]).results

    def op_dynamic_iota(self, op, attrs, operands, rtypes, b, env, loc):
        rt = self._shaped_result(op, operands[0], rtypes[0], "output_shape", loc)
        return b.op("iota", [], {"iota_dimension": opmap.read_int(attrs["iota_dimension"])},
                    result_types=[rt]).results

    def op_dynamic_reshape(self, op, attrs, operands, rtypes, b, env, loc):
        rt = self._shaped_result(op, operands[1], rtypes[0], "output_shape", loc)
        if self.dyn is not None:
            self.dyn.unify_reshape(operands[0].type, rt)
            rt = self.dyn.type(rt)
        return b.op("reshape", [operands[0]], {}, result_types=[rt]).results

    def _shaped_result(self, op, shape_v: Value, given: Optional[TensorType], what: str, loc) -> TensorType:
        """A dynamic op's result type: its shape operand's known dimensions (dynamic.py) or
        the static type MLIR gives."""
        dims = self.dyn.dims_of(shape_v) if self.dyn is not None else None
        if dims is not None:
            et = element_from_mlir(op.results[0].type.element_type, loc)
            t = TensorType(dims, et)
            if given is not None and given.shape != t.shape:
                raise StableHLOError(f"{what} {list(dims)} does not match the result type {given}{_at(loc)}")
            return t
        if given is None:
            raise UnsupportedError(f"{op.name} with a computed {what}",
                                   "the shape operand is not a computation of dimension sizes", loc)
        self._check_shape_operand(shape_v, given, what, loc)
        return given

    def op_get_dimension_size(self, op, attrs, operands, rtypes, b, env, loc):
        d = opmap.read_int(attrs["dimension"])
        size = operands[0].type.shape[d]
        if isinstance(size, DimExpr):
            args = self._dim_arg_values()
            if size.symbols() <= args.keys():
                return [materialize(b, size, rtypes[0], args, loc)]
            # a size no dimension argument holds: the count of a vector of ones of that size
            # (exact for any size; after specialization it folds to a constant)
            et = rtypes[0]
            one = b.value("constant", [], attrs={"value": np.array(1, dtype=et.np_dtype)})
            zero = b.value("constant", [], attrs={"value": np.array(0, dtype=et.np_dtype)})
            ones = b.value("broadcast_in_dim", [one], attrs={"broadcast_dimensions": ()},
                           result_types=[TensorType((size,), et.dtype)])
            body = Region([et, et], name="body")
            body.outputs = [Builder(body, loc).value("add", list(body.args))]
            res = b.op("reduce", [ones, zero], {"dimensions": (0,)}, regions=[body]).results
            self.dyn.svals[res[0]] = (size,)
            return res
        return b.op("constant", [], {"value": np.array(size, dtype=rtypes[0].np_dtype)},
                    result_types=rtypes).results

    def _dim_arg_values(self) -> Dict[str, Value]:
        out = {}
        for v, dims in self.dyn.svals.items():
            if v.is_arg and len(dims) == 1 and isinstance(dims[0], DimExpr) and v.type.rank == 0:
                syms = dims[0].symbols()
                if len(syms) == 1 and dims[0] == DimExpr.symbol(next(iter(syms))):
                    out.setdefault(next(iter(syms)), v)
        return out

    def op_dynamic_pad(self, op, attrs, operands, rtypes, b, env, loc):
        x, pv, lo, hi, interior = operands
        a = {"edge_padding_low": self._known_ints(lo, "stablehlo.dynamic_pad", loc),
             "edge_padding_high": self._known_ints(hi, "stablehlo.dynamic_pad", loc),
             "interior_padding": self._known_ints(interior, "stablehlo.dynamic_pad", loc)}
        return b.op("pad", [x, pv], a, result_types=self._given_or_inferred(op, "pad", [x, pv], a, rtypes, loc)).results

    def op_real_dynamic_slice(self, op, attrs, operands, rtypes, b, env, loc):
        x, st, li, sd = operands
        n = "stablehlo.real_dynamic_slice"
        strides = self._known_ints(sd, n, loc)
        starts, limits = self._known_ints(st, n, loc, False), self._known_ints(li, n, loc, False)
        if starts is not None and limits is None and self.dyn is not None:
            limits = self.dyn.dims_of(li)  # symbolic limits: a slice with symbolic bounds
            if limits is not None:
                self.dyn.unify_slice_operand(x, limits)
        if starts is not None and limits is not None:
            a = {"start_indices": starts, "limit_indices": tuple(limits), "strides": strides}
            return b.op("slice", [x], opmap.drop_defaults(op_table.OPS["slice"], a),
                        result_types=self._given_or_inferred(op, "slice", [x], a, rtypes, loc)).results
        if any(s != 1 for s in strides):
            raise UnsupportedError(f"{n} with computed start indices and strides other than 1",
                                   "hlo's slices have constant bounds", loc)
        rt = rtypes[0]
        if rt is None or not rt.is_static:
            sdims, ldims = (self.dyn.dims_of(st), self.dyn.dims_of(li)) if self.dyn else (None, None)
            if sdims is None or ldims is None:
                raise UnsupportedError(f"{n} with a computed result shape",
                                       "its start and limit are not computations of dimension sizes", loc)
            shape = tuple(lim - s0 for s0, lim in zip(sdims, ldims))
            self.dyn.unify_slice_operand(x, ldims)
            shape = tuple(self.dyn.resolve(d) for d in shape)
            rt = TensorType(shape, element_from_mlir(op.results[0].type.element_type, loc))
        # Unit strides and a static result: a dynamic_slice of the result's size. (Out-of-range
        # starts are undefined behaviour for real_dynamic_slice; dynamic_slice clamps them.)
        starts_v = []
        for d in range(x.type.rank):
            s1 = b.value("slice", [st], attrs={"start_indices": (d,), "limit_indices": (d + 1,)})
            starts_v.append(b.value("reshape", [s1], result_types=[TensorType((), st.type.dtype)]))
        return b.op("dynamic_slice", [x] + starts_v, {"slice_sizes": rt.shape}, result_types=[rt]).results

    def _known_ints(self, v: Value, user: str, loc, required: bool = True):
        """A shape operand's values when they are constant (a constant op, or a computation of
        constants: dynamic.py); UnsupportedError when ``required``, else None."""
        if _is_const(v):
            return self._const_ints(v, user, loc)
        dims = self.dyn.dims_of(v) if self.dyn is not None else None
        if dims is not None and all(isinstance(d, int) for d in dims):
            return tuple(dims)
        if required:
            self._const_array(v, user, loc)  # raises the usual UnsupportedError
        return None

    def op_dynamic_gather(self, op, attrs, operands, rtypes, b, env, loc):
        x, idx, sizes = operands
        a = {k: v for k, v in attrs.items() if k != "dimension_numbers"}
        hlo = self.read_attrs("gather", "stablehlo.dynamic_gather", a, loc)
        hlo.update(opmap.read_struct("gather", attrs["dimension_numbers"]))
        hlo["slice_sizes"] = self._known_ints(sizes, "stablehlo.dynamic_gather", loc)
        hlo = opmap.drop_defaults(op_table.OPS["gather"], hlo)
        return b.op("gather", [x, idx], hlo, result_types=self._given_or_inferred(op, "gather", [x, idx], hlo, rtypes, loc)).results

    def op_dynamic_conv(self, op, attrs, operands, rtypes, b, env, loc):
        lhs, rhs, pad = operands
        hlo = self.read_attrs("convolution", "stablehlo.dynamic_conv", attrs, loc)
        p = np.asarray(self._known_ints(pad, "stablehlo.dynamic_conv", loc))
        hlo["padding"] = tuple((int(lo), int(hi)) for lo, hi in p.reshape(-1, 2))
        hlo = opmap.drop_defaults(op_table.OPS["convolution"], hlo)
        return b.op("convolution", [lhs, rhs], hlo,
                    result_types=self._given_or_inferred(op, "convolution", [lhs, rhs], hlo, rtypes, loc)).results

    def _given_or_inferred(self, op, short, operands, attrs, rtypes, loc):
        if all(t is not None for t in rtypes):
            return rtypes
        return self._dynamic_results(op, short, op_table.OPS[short], operands, attrs, [], rtypes, loc)

    def op_triangular_solve(self, op, attrs, operands, rtypes, b, env, loc):
        # expressed with hlo's own ops (ir/decompositions.py)
        from jaxlib.mlir.dialects import stablehlo
        flags = {k: opmap.read_bool(attrs[k]) for k in ("left_side", "lower", "unit_diagonal")}
        kind = stablehlo.TransposeAttr(attrs["transpose_a"]).value
        self._only_hints("stablehlo.triangular_solve",
                         {k: v for k, v in attrs.items() if k not in flags and k != "transpose_a"}, loc)
        if self.dyn is not None:  # batch dimensions of a and b are one size
            ta, tb = operands[0].type, operands[1].type
            self.dyn.unify_shapes(ta.shape[:-2], tb.shape[:-2])
        x = decompositions.triangular_solve(b, operands[0], operands[1], transpose_a=kind, **flags)
        return [x]

    def op_fft(self, op, attrs, operands, rtypes, b, env, loc):
        # expressed with hlo's own ops (ir/decompositions.py)
        from jaxlib.mlir.dialects import stablehlo
        kind = stablehlo.FftTypeAttr(attrs["fft_type"]).value
        lengths = opmap.read_ints(attrs["fft_length"])
        self._only_hints("stablehlo.fft", {k: v for k, v in attrs.items()
                                           if k not in ("fft_type", "fft_length")}, loc)
        try:
            return [decompositions.fft(b, operands[0], kind, lengths)]
        except ValueError as e:
            raise StableHLOError(f"stablehlo.fft: {e}{_at(loc)}") from None

    def op_rng_bit_generator(self, op, attrs, operands, rtypes, b, env, loc):
        # expressed with hlo's own ops (ir/decompositions.py)
        from jaxlib.mlir.dialects import stablehlo
        alg = stablehlo.RngAlgorithmAttr(attrs["rng_algorithm"]).value
        self._only_hints("stablehlo.rng_bit_generator",
                         {k: v for k, v in attrs.items() if k != "rng_algorithm"}, loc)
        try:
            return list(decompositions.rng_bit_generator(b, operands[0], alg, rtypes[1]))
        except ValueError as e:
            raise UnsupportedError("stablehlo.rng_bit_generator", str(e), loc) from None

    def op_while(self, op, attrs, operands, rtypes, b, env, loc):
        # a body that probes carries the probe records (probes.py)
        body = list(op.regions[1].blocks)
        probed = {} if self.probes is None or len(body) != 1 else {
            p.operation.attributes["probe_id"].value: tensor_from_mlir(p.operation.results[0].type, loc)
            for p in body[0].operations if p.operation.name == "interpreter.probe"}
        if not probed:
            return self._table_op(op, "while", attrs, operands, rtypes, b, env, loc)
        if b.region is not self.probes.top:
            raise UnsupportedError("interpreter.probe", "in a while loop that is not at the top of its function", loc)
        keys, vals = self.probes.carried(b, sorted(probed), probed)
        results = self._table_op(op, "while", attrs, operands, rtypes, b, env, loc, (keys, vals))
        self.probes.bind(keys, results[len(rtypes):], self.probes.top)
        return results[:len(rtypes)]

    def op_map(self, op, attrs, operands, rtypes, b, env, loc):
        # the scalar body applied to whole tensors: each of its elementwise ops once
        shape = rtypes[0].shape
        dims = opmap.read_ints(attrs["dimensions"])
        if tuple(dims) != tuple(range(len(shape))):
            raise UnsupportedError("stablehlo.map", f"dimensions {list(dims)} (not all of them, in order)", loc)
        self._only_hints("stablehlo.map", {k: v for k, v in attrs.items() if k != "dimensions"}, loc)
        body = self.region(op.regions[0], "computation", env)
        mapped = dict(zip(body.args, operands))

        def full(v):
            x = mapped.get(v, v)
            if x.type.rank == 0 and shape:
                x = b.value("broadcast_in_dim", [x], attrs={"broadcast_dimensions": ()},
                            result_types=[TensorType(shape, x.dtype)])
            return x

        for bop in body.ops:
            if bop.name == "constant":
                c = b.op("constant", [], dict(bop.attrs), result_types=bop.result_types)
                mapped[bop.results[0]] = c.results[0]
                continue
            if not op_table.OPS[bop.name].has(op_table.ELEMENTWISE) or bop.regions:
                raise UnsupportedError("stablehlo.map", f"a body with '{bop.name}' (not elementwise)", loc)
            new = b.op(bop.name, [full(v) for v in bop.operands], dict(bop.attrs),
                       result_types=[TensorType(shape, r.dtype) for r in bop.results])
            mapped.update(zip(bop.results, new.results))
        return [full(v) for v in body.outputs]

    def op_composite(self, op, attrs, operands, rtypes, b, env, loc):
        callee = attrs["decomposition"].value
        if callee not in self.names:
            raise StableHLOError(f"composite's decomposition @{callee} is not defined{_at(loc)}")
        return b.op("call", operands, {"callee": self.names[callee]}, result_types=rtypes).results

    def op_select_and_scatter(self, op, attrs, operands, rtypes, b, env, loc):
        """Decomposed as in XLA's SelectAndScatterExpander: a variadic reduce_window over
        (value, flat index) pairs picks each window's element with ``select`` (a left fold,
        padding never chosen), then a scatter combines the source values into ``init_value``
        with ``scatter`` at the chosen indices."""
        x, source, init = operands
        self._only_hints("stablehlo.select_and_scatter",
                         {k: v for k, v in attrs.items()
                          if k not in ("window_dimensions", "window_strides", "padding")}, loc)
        rank = x.type.rank
        wd = opmap.read_ints(attrs["window_dimensions"]) if "window_dimensions" in attrs else (1,) * rank
        ws = opmap.read_ints(attrs["window_strides"]) if "window_strides" in attrs else (1,) * rank
        pad = opmap.read_pairs(attrs["padding"]) if "padding" in attrs else ((0, 0),) * rank
        select_r = self.region(op.regions[0], "select", env)
        update_r = self.region(op.regions[1], "update", env)
        n, m = x.type.size, source.type.size
        it = s32 if not isinstance(n, DimExpr) and n < 2 ** 31 else s64  # symbolic: s64
        et = x.type.dtype
        flat = b.value("iota", attrs={"iota_dimension": 0}, result_types=[TensorType((max(n, 1),), it)])
        if n == 0:
            flat = b.value("slice", [flat], attrs={"start_indices": (0,), "limit_indices": (0,)})
        idx = b.value("reshape", [flat], result_types=[TensorType(x.type.shape, it)])
        none = b.value("constant", attrs={"value": np.array(-1, it.np_dtype)})
        body = Region([TensorType((), et), TensorType((), it), TensorType((), et), TensorType((), it)], "body")
        va, ia, vb, ib = body.args
        vmap = {select_r.args[0]: va, select_r.args[1]: vb}
        for sop in select_r.ops:
            body.append(clone_op(sop, vmap))
        picked = vmap.get(select_r.outputs[0], select_r.outputs[0])
        bb = Builder(body, loc)
        minus1 = bb.value("constant", attrs={"value": np.array(-1, it.np_dtype)})
        a_ok = bb.value("compare", [ia, minus1], attrs={"comparison_direction": "NE"})
        b_none = bb.value("compare", [ib, minus1], attrs={"comparison_direction": "EQ"})
        take_a = bb.value("and", [a_ok, bb.value("or", [b_none, picked])])
        body.outputs = [bb.value("select", [take_a, va, vb]), bb.value("select", [take_a, ia, ib])]
        rw_attrs = opmap.drop_defaults(op_table.OPS["reduce_window"], {
            "window_dimensions": wd, "window_strides": ws, "padding": pad})
        rw = b.op("reduce_window", [x, idx, init, none], rw_attrs, regions=[body])
        if self.dyn is not None:  # the source has the windows' shape
            self.dyn.unify_shapes(rw.results[0].type.shape, source.type.shape)
            n, m = self.dyn.resolve(x.type.size), self.dyn.resolve(source.type.size)
            rtypes = [t if t is not None else TensorType(x.type.shape, et) for t in rtypes]
        chosen = b.value("reshape", [rw.results[1]], result_types=[TensorType((m, 1), it)])
        updates = b.value("reshape", [source], result_types=[TensorType((m,), et)])
        base = b.value("broadcast_in_dim", [init], attrs={"broadcast_dimensions": ()},
                       result_types=[TensorType((n,), et)])
        sc = b.value("scatter", [base, chosen, updates], attrs={
            "inserted_window_dims": (0,), "scatter_dims_to_operand_dims": (0,), "index_vector_dim": 1},
            regions=[update_r])
        return b.op("reshape", [sc], result_types=rtypes).results

    def _only_hints(self, full, attrs, loc):
        for k in attrs:
            if not opmap.ignored_attr(k):
                raise UnsupportedError(f"attribute '{k}' of {full}", "hlo has no equivalent", loc)

    def _const_array(self, v: Value, user: str, loc) -> np.ndarray:
        if v.op is None or v.op.name != "constant":
            raise UnsupportedError(f"{user} with a non-constant shape operand",
                                   "hlo's shapes are static", loc)
        return np.asarray(v.op.attrs["value"])

    def _const_ints(self, v: Value, user: str, loc) -> Tuple[int, ...]:
        return tuple(int(x) for x in self._const_array(v, user, loc).reshape(-1))

    def _check_shape_operand(self, v: Value, result: TensorType, what: str, loc) -> None:
        if v.op is not None and v.op.name == "constant":
            shape = tuple(int(x) for x in np.asarray(v.op.attrs["value"]).reshape(-1))
            if shape != result.shape:
                raise StableHLOError(f"{what} {list(shape)} does not match the result type {result}{_at(loc)}")

    # -- checks and custom calls ----------------------------------------------------------
    def custom_call(self, op, attrs, region, env, top, loc):
        target = attrs["call_target_name"].value
        if target == "shape_assertion" and self.dyn is not None and op.operands:
            return self._shape_assertion(op, attrs, env, loc)
        if target.startswith("check."):
            return self.check_op(op, "custom_call @" + target, attrs, env, top, loc)
        if target in _SHARDING_CALLS and len(op.operands) == 1 and len(op.results) == 1:
            v = self.value(env, op.operands[0], "custom_call", loc)
            if tensor_from_mlir(op.results[0].type, loc).same_shape_dtype(v.type):
                env[op.results[0]] = v
                return
        raise UnsupportedError(f"stablehlo.custom_call @{target}", "custom calls are opaque to hlo", loc)

    def _shape_assertion(self, op, attrs, env, loc) -> None:
        """jax.export's ``custom_call @shape_assertion(%pred, ...)``: dropped when the sizes'
        bounds prove it (``b >= 1``), an error when they refute it; a condition they leave open
        (``mod(b, 2) == 0``) would need a check at the call, which is not built."""
        pred = self.value(env, op.operands[0], "custom_call @shape_assertion", loc)
        known = self.dyn.svals.get(pred)
        msg = attrs["error_message"].value if "error_message" in attrs else ""
        if known is not None and all(k is True for k in known):
            return
        if known is not None and any(k is False for k in known):
            raise StableHLOError(f"shape_assertion fails for every size{_at(loc)}: {shorten(msg, 300)}")
        raise UnsupportedError("stablehlo.custom_call @shape_assertion",
                               "a condition on sizes that hlo cannot decide when importing "
                               "(checking it at the call is not built yet)", loc)

    def check_op(self, op, name: str, attrs: Dict, env: Dict, top: bool, loc) -> None:
        if not self.collect:
            raise UnsupportedError(name, "a test assertion; hlo.conformance runs these", loc)
        if not top:
            raise UnsupportedError(name, "check op inside a region", loc)
        vals = [self.value(env, v, name, loc) for v in op.operands]
        n = len(self.fn_check_values)
        kind = name.split(".", 1)[1] if name.startswith("check.") else name.split("@check.", 1)[1]
        c = None
        if name.startswith("custom_call"):
            if len(vals) != 2:
                raise UnsupportedError(name, f"takes {len(vals)} operands, the checker knows 2", loc)
            if kind == "eq":
                et = vals[1].type.dtype
                c = Check("expect_eq" if et.is_integral else "expect_almost_eq", n, n + 1, tolerance=1e-4)
            elif kind == "expect_eq":
                c = Check("expect_eq", n, n + 1)
            elif kind == "expect_close":
                c = Check("expect_close", n, n + 1, min_ulp=0, max_ulp=3)
            elif kind == "expect_almost_eq":
                c = Check("expect_almost_eq", n, n + 1, tolerance=1e-3)
            for r in op.results:
                env[r] = _Poison(UnsupportedError(f"result of {name}", "a check's verdict is not a value", loc))
        else:
            tol = float(attrs["tolerance"].value) if "tolerance" in attrs else 1e-4
            if kind in ("expect_eq", "expect_almost_eq") and len(vals) == 2:
                c = Check(kind, n, n + 1, tolerance=tol)
            elif kind in ("expect_eq_const", "expect_almost_eq_const") and len(vals) == 1:
                value = array_from_attr(attrs["value"], vals[0].type)
                c = Check(kind[:-len("_const")], n, None, expected_value=value, tolerance=tol)
            elif kind == "expect_close" and len(vals) == 2:
                c = Check("expect_close", n, n + 1,
                          min_ulp=int(attrs["min_ulp_difference"].value) if "min_ulp_difference" in attrs else 0,
                          max_ulp=int(attrs["max_ulp_difference"].value) if "max_ulp_difference" in attrs else 1)
            elif kind == "expect_serialized_eq" and len(vals) == 1:
                pid = attrs["probe_id"].value
                it = int(attrs["iteration"].value) if "iteration" in attrs else 0
                record, exists = self.probes.lookup(Builder(self.probes.top, loc), pid, it, vals[0])
                vals = [record] + vals + [exists]
                c = Check("expect_eq", n, n + 1, present=n + 2,
                          absent=f"probe '{pid}' has no record at iteration {it}")
        if c is None:
            raise UnsupportedError(name, "unknown check", loc)
        c.op, c.loc = name, loc
        self.fn_checks.append(c)
        self.fn_check_values.extend(vals)


def _wanted_probes(block) -> Dict[str, Set[int]]:
    """The iterations of each probe id that the block's ``check.expect_serialized_eq`` read."""
    out: Dict[str, Set[int]] = {}
    for op in block.operations:
        if op.operation.name == "check.expect_serialized_eq":
            a = op.operation.attributes
            it = int(a["iteration"].value) if "iteration" in a else 0
            out.setdefault(a["probe_id"].value, set()).add(it)
    return out


def _global_constants(attrs) -> Dict[int, str]:
    """jax.export's ``jax.global_constant = "b"`` argument attributes: index -> name."""
    out: Dict[int, str] = {}
    if "arg_attrs" not in attrs:
        return out
    for i, d in enumerate(attrs["arg_attrs"]):
        try:
            if "jax.global_constant" in d:
                out[i] = str(d["jax.global_constant"].value)
        except (TypeError, AttributeError, ValueError):
            continue
    return out


def _dynamic_signature(f) -> bool:
    """Whether a func.func's type has a dynamic dimension."""
    ir = mb.mlir()
    ft = ir.FunctionType(f.operation.attributes["function_type"].value)
    return any(not _static_or_not_tensor(t) for t in list(ft.inputs) + list(ft.results))


def _static_or_not_tensor(t) -> bool:
    ir = mb.mlir()
    return not isinstance(t, ir.RankedTensorType) or t.has_static_shape


def _is_const(v: Value) -> bool:
    return v.op is not None and v.op.name == "constant"


def _at(loc: Optional[Location]) -> str:
    return f" at {loc}" if loc is not None else ""


def _attrs(op, loc: Optional[Location] = None) -> Dict[str, Any]:
    a = op.attributes
    out = {}
    for k in a:
        try:
            out[k] = a[k]
        except TypeError:  # jaxlib cannot downcast, e.g. a complex dense attribute: read its text
            text = _attr_text(op, k)
            if text is None:
                raise UnsupportedError(f"attribute '{k}' of {op.name}", "element type hlo cannot read", loc) from None
            out[k] = TextAttr(text)
    return out


def _attr_text(op, name: str) -> Optional[str]:
    """The printed ``dense<...> : tensor<...>`` of attribute ``name`` of ``op``, read from the
    op's generic form (jaxlib has no Python class for complex dense attributes, and touching
    one through the attribute API can abort the process)."""
    text = op.operation.get_asm(print_generic_op_form=True, large_elements_limit=None)
    i = text.find(f"{name} = dense<")
    if i < 0:
        return None
    i += len(name) + 3
    end = _matching_angle(text, i + len("dense"))
    return None if end is None else text[i:end + 1]


def _matching_angle(text: str, i: int) -> Optional[int]:
    """The index of the '>' closing the '<' at ``text[i]`` (quoted strings skipped)."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return i
        elif c == '"':
            i = text.index('"', i + 1)
        i += 1
    return None
