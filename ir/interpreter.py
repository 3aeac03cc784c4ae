"""The reference interpreter: runs a Module on numpy arrays with StableHLO's semantics.

    from hlo.ir.interpreter import run
    outputs = run(module, [x, y])            # runs @main; returns a list of numpy arrays

``run`` checks the arguments against the function's signature, verifies the module, then
evaluates it op by op. Each op's semantics live in ``hlo.ir.interp`` (one module per op family;
``hlo.ir.interp.numerics`` documents the numeric choices: integer division by zero, rounding of
f16/bf16 arithmetic, conversions). Ops are vectorized with numpy; region bodies (reduce, sort,
scatter, reduce_window) are evaluated on whole batches of scalars at once when every op in them
is elementwise, and element by element only otherwise.

Values are immutable: a result may be a read-only view of an operand (a broadcast, a slice); the
arrays that ``run`` returns are fresh, writable and C-contiguous.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from .callbacks import OP_NAME as HOST_CALLBACK
from .core import Function, Module, Operation, Region, Value
from .interp import ELEMENTWISE, HANDLERS, InterpreterError
from .interp.numerics import bitcast_convert
from .verifier import describe, verify_module

__all__ = ["run", "run_parallel", "InterpreterError", "Interpreter"]

_FROM_HOST = "_hlo_raised_by_host_callback"


def _mark_from_host(e: BaseException) -> None:
    """Mark an exception a host callback raised, so that the ops around the callback (a while,
    a case) let it through unwrapped."""
    try:
        setattr(e, _FROM_HOST, True)
    except (AttributeError, TypeError):  # an exception type that takes no attributes
        pass

_MISSING = object()


def run(module: Module, args: Sequence[np.ndarray], function: str = "main",
        verify: bool = True) -> List[np.ndarray]:
    """Run ``function`` of ``module`` on ``args`` and return its results as numpy arrays.

    Raises InterpreterError for a missing function, wrong argument count, shapes or dtypes, an
    op the interpreter does not implement, or a failure while running an op; and VerifyError if
    the module does not verify (pass ``verify=False`` to skip that check)."""
    if function not in module:
        raise InterpreterError(f"module @{module.name} has no function @{function} "
                               f"(functions: {', '.join('@' + n for n in module.functions) or 'none'})")
    fn = module[function]
    if fn.dim_args or any(not t.is_static for t in fn.arg_types):  # symbolic dimensions
        module, fn = _specialized(module, fn, args, function)
    args = _check_args(fn, args)
    if verify:
        verify_module(module)
    interp = Interpreter(module)
    with np.errstate(all="ignore"):
        outs = interp.call(fn, args)
    return [np.array(o, copy=True, order="C") for o in outs]


def run_parallel(module: Module, args: Sequence[Sequence[np.ndarray]], num_replicas: int = 1,
                 num_partitions: int = 1, function: str = "main",
                 verify: bool = True) -> List[List[np.ndarray]]:
    """Run ``function`` as each process of a ``num_replicas x num_partitions`` grid (a thread
    each, meeting at its collectives; ``hlo.ir.interp.collectives``): ``args[i]`` are process
    ``i``'s arguments (replica-major), and the result is each process's outputs."""
    from .interp.collectives import run_processes
    if function not in module:
        raise InterpreterError(f"module @{module.name} has no function @{function}")
    if num_replicas < 1 or num_partitions < 1:
        raise InterpreterError(f"a run needs at least one replica and one partition, got "
                               f"{num_replicas} x {num_partitions}")
    fn = module[function]
    n = num_replicas * num_partitions
    if len(args) != n:
        raise InterpreterError(f"{num_replicas} x {num_partitions} processes need {n} argument "
                               f"lists, got {len(args)}")
    checked = [_check_args(fn, a) for a in args]
    if verify:
        verify_module(module)
    outs = run_processes(lambda: Interpreter(module), [fn] * n, checked, num_replicas, num_partitions)
    return [[np.array(o, copy=True, order="C") for o in per] for per in outs]


def _specialized(module: Module, fn: Function, args, function: str):
    """The module specialized to the sizes its symbols have in ``args`` (ir/specialize.py)."""
    from .specialize import DimBindingError, bind_symbols, dim_arg_values, specialize_module
    if isinstance(args, (list, tuple)) and len(args) == len(fn.arg_types):
        shapes = [np.shape(a) for a in args]
        for i, (t, s) in enumerate(zip(fn.arg_types, shapes)):
            if len(s) != t.rank:
                raise InterpreterError(f"@{fn.name} argument #{i} must be {t.without_layout()} "
                                       f"(rank {t.rank}), got shape {s}")
        try:
            given, where = dim_arg_values(fn, args)
            env = bind_symbols(fn.arg_types, shapes, env=given, env_from=where)
        except DimBindingError as e:
            raise InterpreterError(f"@{fn.name}: {e}") from None
        module = specialize_module(module, env)
        fn = module[function]
    return module, fn


def _check_args(fn: Function, args) -> List[np.ndarray]:
    if isinstance(args, np.ndarray) or not isinstance(args, (list, tuple)):
        raise InterpreterError(f"@{fn.name}: arguments must be a list or tuple of arrays, "
                               f"got {type(args).__name__}")
    want = fn.arg_types
    if len(args) != len(want):
        raise InterpreterError(f"@{fn.name} takes {len(want)} argument(s) "
                               f"({', '.join(map(str, want)) or 'none'}), got {len(args)}")
    out = []
    for i, (a, t) in enumerate(zip(args, want)):
        if not isinstance(a, (np.ndarray, np.generic)):
            raise InterpreterError(f"@{fn.name} argument #{i} must be a numpy array of type {t}, "
                                   f"got {type(a).__name__}")
        a = np.asarray(a)
        if a.dtype != t.np_dtype or a.shape != t.shape:
            raise InterpreterError(
                f"@{fn.name} argument #{i} must be {t.without_layout()} "
                f"(numpy {t.np_dtype} of shape {t.shape}), got {a.dtype} of shape {a.shape}")
        out.append(a)
    return out


class Env:
    """The values of one region evaluation; lookups fall back to the enclosing scopes."""

    __slots__ = ("vals", "parent")

    def __init__(self, parent: Optional["Env"] = None):
        self.vals: Dict[Value, np.ndarray] = {}
        self.parent = parent

    def get(self, v: Value) -> np.ndarray:
        e = self
        while e is not None:
            r = e.vals.get(v, _MISSING)
            if r is not _MISSING:
                return r
            e = e.parent
        where = f"argument #{v.index}" if v.is_arg else f"result #{v.index} of '{v.owner.name}'"
        raise InterpreterError(f"value {where} ({v.type}) is used but was never computed")


# Ops that, on scalar (rank-0) values, are elementwise although their handlers look at shapes.
_BATCH_OVERRIDES = {
    "broadcast_in_dim": lambda op, ins: [ins[0]],
    "reshape": lambda op, ins: [ins[0]],
    "bitcast_convert": lambda op, ins: [bitcast_convert(
        ins[0], op.results[0].type.np_dtype, np.shape(ins[0]))],
}


class Interpreter:
    """Evaluates functions and regions of one module. Caches per-region analyses (liveness,
    batchability) for the duration of one ``run``."""

    def __init__(self, module: Module):
        self.module = module
        self._drops: Dict[int, list] = {}
        self._batchable: Dict[int, bool] = {}
        self._regions: Dict[int, Region] = {}  # keeps cached regions alive (ids stay unique)

    # -- functions and regions ----------------------------------------------------------------
    def call(self, fn: Function, args: Sequence[np.ndarray]) -> List[np.ndarray]:
        return self.eval_region(fn.body, args, None)

    def call_by_name(self, name: str, args: Sequence[np.ndarray]) -> List[np.ndarray]:
        if name not in self.module:
            raise InterpreterError(f"call of unknown function @{name}")
        return self.call(self.module[name], args)

    def eval_region(self, region: Region, args: Sequence[np.ndarray],
                    parent: Optional[Env]) -> List[np.ndarray]:
        """Run a region on ``args``; it may read values of ``parent`` and its enclosing scopes."""
        env = Env(parent)
        vals = env.vals
        for a, x in zip(region.args, args):
            vals[a] = x
        drops = self._drop_plan(region)
        for op, drop in zip(region.ops, drops):
            ins = [env.get(v) for v in op.operands]
            outs = self.eval_op(op, ins, env)
            for r, o in zip(op.results, outs):
                vals[r] = o
            for v in drop:
                vals.pop(v, None)
        return [env.get(v) for v in region.outputs]

    def eval_op(self, op: Operation, ins: List[np.ndarray], env: Env) -> List[np.ndarray]:
        h = HANDLERS.get(op.name)
        if h is None:
            raise InterpreterError(f"{describe(op)}: the interpreter does not implement '{op.name}'")
        try:
            outs = h(self, op, ins, env)
        except InterpreterError:
            raise
        except Exception as e:  # a failure inside numpy: name the op that caused it
            if op.name == HOST_CALLBACK or getattr(e, _FROM_HOST, False):
                # the host's own exception (or its result check), as it was raised, also
                # through the loops and branches that hold the callback (as on cpu)
                _mark_from_host(e)
                raise
            raise InterpreterError(f"{describe(op)}: {type(e).__name__}: {e}") from e
        if len(outs) != len(op.results):
            raise InterpreterError(f"{describe(op)}: produced {len(outs)} values for "
                                   f"{len(op.results)} results (interpreter bug)")
        checked = []
        for r, o in zip(op.results, outs):
            o = np.asarray(o)
            t = r.type
            if o.shape != t.shape or o.dtype != t.np_dtype:
                raise InterpreterError(f"{describe(op)}: computed {o.dtype}{list(o.shape)} for a "
                                       f"result of type {t} (interpreter bug)")
            checked.append(o)
        return checked

    def _drop_plan(self, region: Region) -> list:
        """For each op of ``region``, the values (defined in the region) last used by it."""
        key = id(region)
        plan = self._drops.get(key)
        if plan is not None:
            return plan
        last: Dict[Value, int] = {}
        for i, op in enumerate(region.ops):
            for v in op.operands:
                last[v] = i
            for r in op.regions:
                for inner in r.walk():
                    for v in inner.operands:
                        last[v] = i
                for rr in _nested_regions(r):
                    for v in rr.outputs:
                        last[v] = i
        keep = set(region.outputs)
        plan = [[] for _ in region.ops]
        local = set(region.args)
        for op in region.ops:
            local.update(op.results)
        for v, i in last.items():
            if v in local and v not in keep:
                plan[i].append(v)
        self._drops[key] = plan
        self._regions[key] = region
        return plan

    # -- regions on batches of scalars --------------------------------------------------------
    def batchable(self, region: Region) -> bool:
        """True when every value of ``region`` is a scalar and every op is elementwise, so the
        region can run on arrays of scalars at once (numpy broadcasting does the rest)."""
        key = id(region)
        ok = self._batchable.get(key)
        if ok is None:
            ok = self._check_batchable(region, set())
            self._batchable[key] = ok
            self._regions[key] = region
        return ok

    def _check_batchable(self, region: Region, visiting: set) -> bool:
        if any(a.type.rank for a in region.args):
            return False
        for op in region.ops:
            if any(r.type.rank for r in op.results) or any(v.type.rank for v in op.operands):
                return False
            if op.regions:
                return False
            if op.name == "call":
                callee = op.attrs.get("callee")
                if callee not in self.module or callee in visiting:
                    return False
                if not self._check_batchable(self.module[callee].body, visiting | {callee}):
                    return False
                continue
            if op.name not in ELEMENTWISE and op.name not in _BATCH_OVERRIDES:
                return False
        return True

    def eval_region_batched(self, region: Region, args: Sequence[np.ndarray],
                            parent: Optional[Env], shape=None, extra=()) -> List[np.ndarray]:
        """Run a batchable region on arrays of scalars (all broadcastable to one shape); the
        results (and the values of ``extra``, values of the region) are broadcast to that
        shape."""
        env = Env(parent)
        vals = env.vals
        for a, x in zip(region.args, args):
            vals[a] = x
        for op in region.ops:
            ins = [env.get(v) for v in op.operands]
            if op.name == "call":
                outs = self.eval_region_batched(self.module[op.attrs["callee"]].body, ins, None)
            elif op.name in _BATCH_OVERRIDES:
                outs = _BATCH_OVERRIDES[op.name](op, ins)
            else:
                try:
                    outs = HANDLERS[op.name](self, op, ins, env)
                except InterpreterError:
                    raise
                except Exception as e:
                    if op.name == HOST_CALLBACK or getattr(e, _FROM_HOST, False):
                        _mark_from_host(e)
                        raise
                    raise InterpreterError(f"{describe(op)}: {type(e).__name__}: {e}") from e
            for r, o in zip(op.results, outs):
                vals[r] = o
        outs = [env.get(v) for v in list(region.outputs) + list(extra)]
        if shape is None:
            shape = np.broadcast_shapes(*(np.shape(a) for a in args)) if args else ()
        return [np.broadcast_to(np.asarray(o), shape) for o in outs]

    def eval_scalar_region(self, region: Region, args: Sequence[np.ndarray],
                           parent: Optional[Env]) -> List[np.ndarray]:
        """Run a region whose arguments are scalars, batched when possible."""
        if self.batchable(region):
            return self.eval_region_batched(region, args, parent, ())
        return self.eval_region(region, args, parent)


def _nested_regions(r: Region):
    yield r
    for op in r.walk():
        yield from op.regions
