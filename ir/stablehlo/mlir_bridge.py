"""The MLIR side of the bridge: one jaxlib MLIR context per process, parsing, verification and
the chlo legalization pass.

jaxlib bundles the MLIR Python bindings with the func, stablehlo, chlo, sdy and mhlo dialects.
A bare ``ir.Context()`` knows only the builtin dialect; jax's own registry helper registers the
upstream ones (func, arith, quant, ...), and each StableHLO-family dialect registers itself.
Unregistered dialects are allowed so that the test suite's ``check`` ops (rewritten to generic
form) parse as opaque operations.
"""
from __future__ import annotations

import re
from typing import Optional

from .check_syntax import rewrite_check_ops
from .errors import StableHLOError, UnsupportedError, shorten
from .requires import require_jaxlib

_CTX = None
_PASSES_REGISTERED = False
# MLIR keeps every constant it has parsed alive as long as its context: start a fresh context
# once this much text has been parsed (no MLIR object outlives an import or export call).
_CONTEXT_TEXT_BUDGET = 256 << 20
_parsed_bytes = 0


def mlir():
    """The ``jaxlib.mlir.ir`` module (imported lazily: jaxlib is large, and optional)."""
    require_jaxlib("StableHLO parsing")
    from jaxlib.mlir import ir
    return ir


def context():
    """The process-wide MLIR context with every dialect the bridge reads."""
    global _CTX
    if _CTX is None:
        require_jaxlib("StableHLO parsing")
        from jaxlib.mlir import ir
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext
        from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo
        registry = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        ctx = ir.Context()
        ctx.append_dialect_registry(registry)
        ctx.load_all_available_dialects()
        stablehlo.register_dialect(ctx)
        chlo.register_dialect(ctx)
        sdy.register_dialect(ctx)
        mhlo.register_mhlo_dialect(ctx)
        stablehlo.register_interpreter_dialect(ctx)
        ctx.allow_unregistered_dialects = True
        _CTX = ctx
    return _CTX


_UNKNOWN_OP = re.compile(r"custom op '([\w.]+)' is unknown|unregistered operation '([\w.]+)'")


def parse(text: str, source_name: str = "<stablehlo>"):
    """Parse StableHLO text (check ops in custom form are accepted) into an MLIR module.

    Raises ``UnsupportedError`` when the text names an op that jaxlib's StableHLO does not
    know (newer ops such as collective_broadcast), and ``StableHLOError`` with MLIR's
    diagnostic, the file name put in place of MLIR's ``-``, for anything else."""
    global _CTX, _parsed_bytes
    ir = mlir()
    text = rewrite_check_ops(text)
    _parsed_bytes += len(text)
    if _parsed_bytes > _CONTEXT_TEXT_BUDGET:
        _CTX, _parsed_bytes = None, len(text)
    with context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            from . import newer_syntax as nc
            if nc.needs_rewrite(text):  # collective forms newer than jaxlib's StableHLO
                try:
                    return ir.Module.parse(nc.rewrite(text))
                except ir.MLIRError:
                    pass
            msg = _diagnostic(e, source_name)
            unsupported = _unsupported_parse_failure(msg, text)
            if unsupported is not None:
                raise unsupported from None
            raise StableHLOError(f"{source_name}: StableHLO text does not parse: {msg}") from None
    return module


_STABLEHLO_FAMILY = {"stablehlo", "chlo", "mhlo", "vhlo", "sdy", "interpreter"}
_OP_IN_ERROR = re.compile(r"'(stablehlo\.\w+)' op ")


def _unsupported_parse_failure(msg: str, text: str) -> Optional[UnsupportedError]:
    """An UnsupportedError when a parse failure comes from something hlo would not support
    anyway: an op jaxlib's (older) StableHLO does not know or rejects, or quantized types."""
    from .. import ops as op_table
    m = _UNKNOWN_OP.search(msg)
    if m and (m.group(1) or m.group(2)).split(".")[0] in _STABLEHLO_FAMILY:
        return UnsupportedError(m.group(1) or m.group(2), "op not known to jaxlib's StableHLO")
    if "!quant." in msg:
        return UnsupportedError("quantized type", "quantized element type; jaxlib's parser rejects "
                                "this program: " + msg[:200])
    m = _OP_IN_ERROR.search(msg)
    # (collectives hlo has may still come in newer forms jaxlib's StableHLO rejects: a variadic
    # collective_broadcast, a dynamic root)
    if m and (m.group(1)[len("stablehlo."):] not in op_table.OPS
              or op_table.OPS[m.group(1)[len("stablehlo."):]].has(op_table.COLLECTIVE)):
        return UnsupportedError(m.group(1), "jaxlib's StableHLO (" + _jaxlib_stablehlo_version()
                                + ") rejects this form of it: " + msg[:200])
    return None


def _jaxlib_stablehlo_version() -> str:
    try:
        from jaxlib.mlir.dialects import stablehlo
        return "StableHLO " + stablehlo.get_current_version()
    except Exception:  # pragma: no cover - version query is informational only
        return "an older StableHLO"


def _diagnostic(e, source_name: str) -> str:
    msg = str(e).replace('"-":', f'"{source_name}":').replace("Unable to parse module assembly:", "")
    return " ".join(shorten(word, 200) for word in msg.split())


def verify(module, source_name: str = "<stablehlo>") -> None:
    """Run MLIR's verifier; raise ``StableHLOError`` with its diagnostic on failure."""
    ir = mlir()
    with context():
        try:
            ok = module.operation.verify()
        except ir.MLIRError as e:
            raise StableHLOError(f"{source_name}: StableHLO does not verify: {_diagnostic(e, source_name)}") from None
    if not ok:
        raise StableHLOError(f"{source_name}: StableHLO does not verify")


def legalize_chlo(module, source_name: str = "<stablehlo>") -> None:
    """Rewrite chlo ops (erf, tan, lgamma, top_k, ...) into StableHLO in place, with jaxlib's
    ``chlo-legalize-to-stablehlo`` pass."""
    global _PASSES_REGISTERED
    ir = mlir()
    from jaxlib.mlir import passmanager
    from jaxlib.mlir.dialects import stablehlo
    with context():
        associative_scans_to_windows(module)
        _refuse_misread_chlo(module, source_name)
        if not _PASSES_REGISTERED:
            stablehlo.register_stablehlo_passes()
            _PASSES_REGISTERED = True
        pm = passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))")
        try:
            pm.run(module.operation)
        except ir.MLIRError as e:
            raise StableHLOError(f"{source_name}: chlo legalization failed: {_diagnostic(e, source_name)}") from None


# chlo.scan bodies that are one associative op of the slice and the carry; the init must be the
# op's identity for the scan to equal a reduce_window over the prefix (``_identity``)
_SCAN_BODIES = {"stablehlo.add": "add", "stablehlo.multiply": "multiply", "stablehlo.maximum": "maximum",
                "stablehlo.minimum": "minimum", "stablehlo.and": "and", "stablehlo.or": "or"}


def _identity(kind: str, dt):
    import numpy as np
    if dt.kind == "b":
        return {"and": True, "or": False, "maximum": False, "minimum": True}.get(kind)
    if kind in ("add", "or"):
        return 0
    if kind in ("multiply",):
        return 1
    if kind == "and":
        return -1 if dt.kind == "i" else np.iinfo(dt).max if dt.kind == "u" else None
    if dt.kind == "f":
        return -np.inf if kind == "maximum" else np.inf
    return np.iinfo(dt).min if kind == "maximum" else np.iinfo(dt).max


def associative_scans_to_windows(module) -> int:
    """Rewrite each ``chlo.scan`` marked ``is_associative`` whose body is one op of ``_SCAN_BODIES``
    on its slice and carry (returned as both), with one input, an init that is a broadcast
    scalar constant equal to the op's identity and an unused final carry, into the
    ``stablehlo.reduce_window`` over the prefix (padding (n-1, 0), or (0, n-1) reversed) that
    older jax emits for ``cumsum`` & co.: the ``window-scan`` pass then makes it an associative
    scan. jax 0.11 writes ``jnp.cumsum`` as such a chlo.scan, which jaxlib's legalization makes a
    ``while`` loop of one slice a step (cumsum along the rows of 4096x4096 on an H200: 300 ms).
    Other scans are left to the legalization. Returns how many were rewritten."""
    ir = mlir()
    import numpy as np
    from jaxlib.mlir.dialects import stablehlo
    found = []

    def visit(op):
        if op.name == "chlo.scan":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    done = 0
    for op in found:
        a = op.attributes
        if "is_associative" not in a or not bool(a["is_associative"].value) or len(op.operands) != 2 \
                or len(op.results) != 2 or len(list(op.results[1].uses)) or len(op.regions) != 1:
            continue
        blocks = list(op.regions[0].blocks)
        if len(blocks) != 1:
            continue
        body = list(blocks[0].operations)
        args = list(blocks[0].arguments)
        if len(body) != 2 or body[0].name not in _SCAN_BODIES or body[1].name != "stablehlo.return":
            continue
        r = body[0].results[0]
        if set(map(str, body[1].operands)) != {str(r)} or len(body[1].operands) != 2 \
                or sorted(map(str, body[0].operands)) != sorted(map(str, args)):
            continue
        kind = _SCAN_BODIES[body[0].name]
        init = op.operands[1].owner
        if not hasattr(init, "name") or init.name != "stablehlo.broadcast_in_dim":
            continue
        const = init.operands[0].owner
        if not hasattr(const, "name") or const.name != "stablehlo.constant":
            continue
        value = np.array(const.attributes["value"])
        if value.shape != () or value.dtype.kind not in "fiub" or value != _identity(kind, value.dtype):
            continue
        x = op.operands[0]
        xt = ir.RankedTensorType(x.type)
        dim = int(a["dimension"].value)
        n = xt.shape[dim]
        reverse = "is_reverse" in a and bool(a["is_reverse"].value)
        wd = [n if d == dim else 1 for d in range(xt.rank)]
        pads = [([0, n - 1] if reverse else [n - 1, 0]) if d == dim else [0, 0] for d in range(xt.rank)]
        with op.location, ir.InsertionPoint(op):
            scalar = ir.RankedTensorType.get([], xt.element_type)
            rw = stablehlo.ReduceWindowOp([op.results[0].type], [x], [const.results[0]], wd,
                                          padding=ir.DenseIntElementsAttr.get(np.array(pads, np.int64)))
            block = rw.body.blocks.append(scalar, scalar)
            with ir.InsertionPoint(block):
                c = ir.Operation.create(body[0].name, results=[scalar], operands=list(block.arguments))
                stablehlo.ReturnOp([c.results[0]])
        op.results[0].replace_all_uses_with(rw.results[0])
        op.erase()
        done += 1
    return done


def _refuse_misread_chlo(module, source_name: str) -> None:
    """jaxlib's legalization of ``chlo.scan`` ignores ``is_reverse`` (it scans forwards);
    refuse such scans rather than compute the wrong result."""
    ir = mlir()
    found = []

    def visit(op):
        if op.name == "chlo.scan" and "is_reverse" in op.attributes:
            if bool(op.attributes["is_reverse"].value):
                found.append(location_of(op.location, source_name))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if found:
        from ..core import Location
        where = Location(*found[0]) if found[0] else None
        raise UnsupportedError("chlo.scan with is_reverse = true",
                               "jaxlib's chlo-legalize-to-stablehlo ignores is_reverse", where)


def print_module(module, debug_info: bool = True, generic: bool = False) -> str:
    """The module's text, with locations when ``debug_info``, in generic op form when
    ``generic``."""
    with context():
        return module.operation.get_asm(enable_debug_info=debug_info, print_generic_op_form=generic)


def parse_and_verify(text: str, source_name: str = "<stablehlo>"):
    """Parse and verify; the exporter's acceptance test for its own output."""
    module = parse(text, source_name)
    verify(module, source_name)
    return module


def location_of(loc, default_file: Optional[str] = None):
    """(file, line) of an MLIR location: the first file position inside name, call-site and
    fused locations; None for unknown locations. ``-`` (text parsed from a string) becomes
    ``default_file``, or None when that is not given."""
    s = str(loc)
    m = re.search(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)', s)
    if m is None:
        return None
    f = m.group(1).replace('\\"', '"').replace("\\\\", "\\")
    if f == "-":
        if default_file is None:
            return None
        f = default_file
    return f, int(m.group(2))
