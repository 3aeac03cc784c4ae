"""Shape-polymorphic conformance tests (StableHLO ``testdata/dynamic``): run at a size, checked
against jax's shape refinement and XLA.

Those files have no expectations: an ``@main`` takes dimension arguments and ``tensor<?x...>``
arguments. hlo imports it with symbolic dimensions (``hlo.ir.stablehlo.dynamic``), and a test
is then run as:

1. sizes: the dimension arguments' symbols ``d0, d1, ...`` are 3, 4, ...; a ``?`` that no op
   tied to one of them (a placeholder) is 3; the arguments' concrete shapes are their symbolic
   types evaluated there;
2. inputs: deterministic pseudo-random values per element type (floats normal, signed integers
   in [-4, 5), unsigned in [0, 8), pred random), the dimension arguments their sizes;
3. hlo: the module is specialized to the sizes bound from the inputs
   (``hlo.ir.specialize``: checked against the symbolic types) and compiled for the target;
4. reference: the original text, its ``@main`` renamed and called from a static ``@main`` with
   the sizes as constants, refined by jaxlib (``refine_polymorphic_shapes``, what jax.export
   does before compiling) and run by XLA on the CPU with the same inputs;
5. the results must agree: integers and pred exactly, floats within a relative 1e-5 (f64
   1e-12, narrower floats 1e-2) of the larger magnitude, NaNs where the reference has NaNs.

A reference that jaxlib cannot refine or XLA cannot compile makes the test unsupported (the
reason names it), never passed.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

import numpy as np

SIZES = (3, 4, 5, 6)
PLACEHOLDER_SIZE = 3


def sizes_for(fn) -> dict:
    from hlo.ir.dim_expr import shape_symbols
    env = {}
    for k, (i, sym) in enumerate(sorted(fn.dim_args.items())):
        env[sym] = SIZES[k % len(SIZES)]
    for t in fn.arg_types:
        for s in shape_symbols(t.shape):
            env.setdefault(s, PLACEHOLDER_SIZE)
    return env


def inputs_for(fn, env, seed: int = 0) -> List[np.ndarray]:
    from hlo.ir.dim_expr import evaluate_shape
    rng = np.random.default_rng(seed)
    out = []
    for i, t in enumerate(fn.arg_types):
        if i in fn.dim_args:
            out.append(np.array(env[fn.dim_args[i]], dtype=t.np_dtype))
            continue
        shape = evaluate_shape(t.shape, env)
        et = t.dtype
        if et.is_pred:
            a = rng.random(shape) < 0.5
        elif et.is_signed:
            a = rng.integers(-4, 5, size=shape)
        elif et.is_unsigned:
            a = rng.integers(0, 8, size=shape)
        elif et.is_complex:
            a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        else:
            a = rng.standard_normal(shape)
        out.append(np.asarray(a).astype(t.np_dtype))
    return out


_MAIN = re.compile(r"func\.func public @main\((.*?)\) -> (.*?) \{[ \t]*\n", re.S)
_ARG = re.compile(r"%([\w.$-]+): (?=tensor<)")


def _tensor_types(text: str) -> List[str]:
    """The ``tensor<...>`` types of ``text`` in order (nested ``<>`` as in ``complex<f32>``)."""
    out, i = [], 0
    while True:
        i = text.find("tensor<", i)
        if i < 0:
            return out
        depth, j = 0, i + len("tensor")
        while j < len(text):
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        out.append(text[i:j])
        i = j


def _params(sig: str) -> List[Tuple[str, str]]:
    return [(m.group(1), _tensor_types(sig[m.end():])[0]) for m in _ARG.finditer(sig)]


def _mlir_type(shape, mlir_elem: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + mlir_elem + ">"


def reference_text(text: str, fn, args: List[np.ndarray]) -> str:
    """The module with its ``@main`` called from a static ``@main`` (sizes as constants)."""
    m = _MAIN.search(text)
    if m is None:
        raise ValueError("no 'func.func public @main(...) -> ... {' line")
    params = _params(m.group(1))
    res_types = _tensor_types(m.group(2))
    header = m.group(0)
    new_header = header.replace("func.func public @main(", "func.func private @_hlo_dynamic_main(", 1)
    for i, sym in fn.dim_args.items():
        name, ty = params[i]
        new_header = new_header.replace(f"%{name}: {ty}", f"%{name}: {ty} {{jax.global_constant = \"{sym}\"}}", 1)
    body = text.replace(header, new_header, 1)
    lines, static, operands = [], [], []
    for i, (name, ty) in enumerate(params):
        elem = re.sub(r"^(?:[?0-9]+x)*", "", ty[len("tensor<"):-1])
        if i in fn.dim_args:
            lines.append(f"    %d{i} = stablehlo.constant dense<{int(args[i])}> : {ty}")
            operands.append(f"%d{i}")
            continue
        st = _mlir_type(args[i].shape, elem)
        static.append(f"%x{i}: {st}")
        if st == ty:
            operands.append(f"%x{i}")
        else:
            lines.append(f"    %c{i} = stablehlo.convert %x{i} : ({st}) -> {ty}")
            operands.append(f"%c{i}")
    n = len(res_types)
    lines.append(f"    %r:{n} = call @_hlo_dynamic_main({', '.join(operands)}) : "
                 f"({', '.join(t for _, t in params)}) -> ({', '.join(res_types)})")
    lines.append("    return " + ", ".join(f"%r#{k}" for k in range(n)) + " : " + ", ".join(res_types))
    main = (f"  func.func public @main({', '.join(static)}) -> ({', '.join(res_types)}) {{\n"
            + "\n".join(lines) + "\n  }\n")
    end = body.rstrip().rfind("}")
    return body[:end] + main + "}\n"


def reference_run(text: str, fn, args: List[np.ndarray]) -> List[np.ndarray]:
    """jaxlib's shape refinement and XLA's CPU compiler on the sizes of ``args``."""
    import jax
    from jax._src import compiler
    from jax._src.interpreters import mlir as jm
    from jax._src.lib.mlir import ir
    full = reference_text(text, fn, args)
    with jm.make_ir_context():
        mod = ir.Module.parse(full)
        refined = jm.refine_polymorphic_shapes(mod)
        code = jm.module_to_bytecode(refined)
    devs = jax.devices("cpu")[:1]
    exe = devs[0].client.compile_and_load(code, devs, compiler.get_compile_options(num_replicas=1, num_partitions=1))
    with jax.enable_x64(True):  # buffers as they are (without x64 jax narrows 64-bit ints)
        data = [jax.device_put(a, devs[0]) for i, a in enumerate(args) if i not in fn.dim_args]
        return [np.asarray(o) for o in exe.execute(data)]


def compare(got: List[np.ndarray], want: List[np.ndarray]) -> Optional[str]:
    if len(got) != len(want):
        return f"{len(got)} results, the reference has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"result #{k}: shape {g.shape}, the reference's {w.shape}"
        if g.dtype.kind in "biu" or g.dtype == np.bool_:
            if not np.array_equal(g, w.astype(g.dtype)):
                bad = np.argwhere(g != w.astype(g.dtype))[0]
                return f"result #{k} at {tuple(bad)}: {g[tuple(bad)]}, the reference {w[tuple(bad)]}"
            continue
        tol = 1e-12 if g.dtype in (np.float64, np.complex128) else 1e-5 if g.dtype in (np.float32, np.complex64) else 1e-2
        gd = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
        wd = w.astype(np.complex128 if w.dtype.kind == "c" else np.float64)
        nan_g, nan_w = np.isnan(gd), np.isnan(wd)
        scale = np.maximum(np.maximum(np.abs(gd), np.abs(wd)), np.finfo(np.float64).tiny)
        with np.errstate(invalid="ignore"):
            close = (gd == wd) | (np.abs(gd - wd) <= tol * scale) | (np.abs(gd - wd) <= tol)
        ok = np.where(nan_w | nan_g, nan_w & nan_g, close)
        if not ok.all():
            bad = tuple(np.argwhere(~ok)[0])
            return f"result #{k} at {bad}: {g[bad]}, the reference {w[bad]}"
    return None


def check_export(module) -> str:
    """"ok" when the symbolic ``module`` exports to StableHLO that jaxlib verifies and
    re-imports to the same program: compared after dead code elimination on both sides, since
    the export computes sizes with ops (``get_dimension_size``, arithmetic) that the re-import
    reads into its types and leaves unused."""
    from hlo.ir import print_module
    from hlo.ir.clone import clone_module
    from hlo.ir.stablehlo import export_module, import_module
    from hlo.passes.dce import dce_region

    def live(m) -> list:
        m = clone_module(m)
        for fn in m.functions.values():
            dce_region(fn.body)
        return print_module(m).split("\n")
    try:
        text = export_module(module)
    except Exception as e:
        return "export: " + _first_line(e)
    try:
        again = import_module(text)
    except Exception as e:
        return "re-import: " + _first_line(e)
    a, b = live(module), live(again)
    if a == b:
        return "ok"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"re-import differs at line {i + 1}: {x.strip()!r} became {y.strip()!r}"
    return f"re-import differs: {len(a)} lines became {len(b)}"


def _first_line(e: BaseException) -> str:
    s = str(e).strip().split("\n")[0]
    return f"{type(e).__name__}: {s}" if not s.startswith(type(e).__name__) else s


def run_dynamic(text: str, module, entry: str, target: str) -> Tuple[str, str]:
    """("passed" | "failed" | "unsupported", message) for one shape-polymorphic test."""
    from hlo.ir.specialize import bind_symbols, dim_arg_values, specialize_module
    from hlo.staging.stages import Lowered
    fn = module[entry]
    env = sizes_for(fn)
    args = inputs_for(fn, env)
    try:
        want = reference_run(text, fn, args)
    except Exception as e:
        return "unsupported", "reference (jaxlib refinement, XLA): " + _first_line(e)
    try:
        given, where = dim_arg_values(fn, args)
        bound = bind_symbols(fn.arg_types, [a.shape for a in args], env=given, env_from=where)
        static = specialize_module(module, bound)
    except Exception as e:
        return "failed", "specialize: " + _first_line(e)
    try:
        compiled = Lowered(static).compile(target=target)
    except Exception as e:
        return "failed", "compile: " + _first_line(e)
    try:
        got = compiled(*args)
    except Exception as e:
        return "failed", "run: " + _first_line(e)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    msg = compare([np.asarray(g) for g in got], want)
    return ("failed", msg) if msg else ("passed", "")
