"""Ahead-of-time compilation: save a ``Compiled`` as an ``.hlox`` file, load it anywhere.

    compiled = hlo.aot.compile(f, hlo.ShapeDtypeStruct((4, 8), "float32"), target="cpu")
    compiled.save("f.hlox")                 # or hlo.aot.save(compiled, path) / dumps(compiled)
    exe = hlo.load("f.hlox")                # in any process: no tracing, passes or codegen
    exe(x)                                  # same pytrees in and out as f's non-static args

The file format and ``LoadedExecutable`` live in ``hlo.staging.saved`` (below the compiler,
so ``Compiled.save`` and the compilation cache use it without this module). This module imports
the tracer only inside ``compile``; ``load``/``loads`` import neither the tracer, the passes nor
a code generator.
"""
from __future__ import annotations

import os
from typing import Optional

from hlo.runtime import hlox

# hlo.aot's public names for the saved form (defined where the format is).
from .staging.saved import LoadedExecutable as LoadedExecutable
from .staging.saved import dumps as dumps
from .staging.saved import save as save
from .staging.saved import to_payload as to_payload

# --------------------------------------------------------------------------------------------
# Compiling
# --------------------------------------------------------------------------------------------

def compile(fun, *arg_specs, target: Optional[str] = None, static_argnums=(), static_argnames=(),
            donate_argnums=(), **kwarg_specs):
    """Trace ``fun`` for ``arg_specs`` (``hlo.ShapeDtypeStruct``s or arrays; pytrees of them;
    values of static arguments), optimize and build it for ``target``; returns a ``Compiled``
    (``.save(path)`` writes it). ``fun`` may be an ``hlo.jit`` function (its static and donated
    arguments and target are used) or a plain function."""
    from .staging.jit import JitFunction, jit
    if isinstance(fun, JitFunction):
        if static_argnums or static_argnames or donate_argnums:
            raise TypeError("hlo.aot.compile: pass static_argnums/static_argnames/donate_argnums to "
                            "hlo.jit when fun is already a jit function")
        jf = fun
    else:
        jf = jit(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                 donate_argnums=donate_argnums)
    return jf.lower(*arg_specs, **kwarg_specs).compile(target if target is not None else jf.target)


def loads(data: bytes, *, what: str = "the executable", recompile: bool = False) -> LoadedExecutable:
    """Load an executable from ``.hlox`` bytes (see ``load``)."""
    return LoadedExecutable(hlox.loads(data, what=what), what,
                            recompile=_compile_ir if recompile else None)


def load(path, *, recompile: bool = False) -> LoadedExecutable:
    """Load the executable saved at ``path``. Raises a ``hlo.LoadError`` subclass (never
    anything else for bad files) when the file is corrupt (``CorruptFileError``), from a newer
    format (``FormatVersionError``) or for another target or CPU (``TargetMismatchError``).

    A saved executable is native code that runs in this process: load files only from sources
    you trust, as with pickle. ``recompile=True`` is the way to run a file you do not trust: the
    manifest and the optimized IR section are checked and the IR is compiled for this machine;
    the stored native code is never read (it also runs a file on a machine its code was not
    built for)."""
    p = os.fspath(path)
    return LoadedExecutable(hlox.read(p), p, recompile=_compile_ir if recompile else None)


def load_sharded(path):
    """Load an SPMD program saved by ``hlo.shard_map(...).save(path, *args)``: call it with
    global arrays; it runs on as many CPU devices as its mesh has (a ``LoadError`` where
    ``HLO_CPU_DEVICES`` gives fewer). As ``load``: native code, load only files you trust."""
    from .staging.shard_map import load_sharded as _load
    return _load(path)


def describe(path) -> LoadedExecutable:
    """The description of the executable saved at ``path`` (signature, target, kernels,
    analyses, buffer plan, the optimized IR: what ``hlo inspect`` prints), read from its
    manifest and IR section, which are checked as ``load`` checks them. Nothing in the file
    runs: no library is loaded and the native code is neither linked nor compiled, so a file
    from anywhere, or built for another machine, can be described. Calling the result raises
    ``LoadError``."""
    p = os.fspath(path)
    return LoadedExecutable(hlox.read(p), p, describe_only=True)


def _compile_ir(ir: str, where: str):
    """``recompile=True``: parse and verify a file's IR section, check its ``@main`` against the
    header the manifest was checked with, and compile it for this machine (a ``Compiled``)."""
    from hlo.ir import parse_module
    from hlo.runtime.hlox import CorruptFileError, LoadError
    from hlo.runtime.manifest_schema import ir_main_types

    from .staging.stages import Lowered
    try:
        module = parse_module(ir, f"{where} (IR section)")
    except Exception as e:  # ParseError, VerifierError: any failure of untrusted text
        raise CorruptFileError(f"{where}: the IR section is not a valid program: "
                               f"{type(e).__name__}: {str(e)[:500]}") from None
    main = module.functions.get("main")
    got = None if main is None else (
        [(t.dtype.name, tuple(t.shape)) for t in main.arg_types],
        [(t.dtype.name, tuple(t.shape)) for t in main.result_types])
    if got != ir_main_types(ir):
        raise CorruptFileError(f"{where}: the IR section's @main differs from its header line")
    try:
        return Lowered(module).compile(target="cpu")
    except Exception as e:
        raise LoadError(f"{where}: the IR section does not compile here: "
                        f"{type(e).__name__}: {str(e)[:500]}") from None
