"""The schema of a saved executable's manifest, checked whole before anything in it is used.

A manifest is JSON that anyone can write (the container's sha256 catches accidents, not edits),
so ``check_manifest`` checks every field the loader reads: its type, its range, and that the
parts agree: the signature's arrays are the runtime's, leaf for leaf; the pytree descriptions
have as many leaves; the arena the runtime allocates is the buffer plan's; the optimized IR's
``@main`` takes and returns those same arrays (``check_ir_signature``, from the IR's header
line, without parsing the module). Shared libraries are named from a fixed list (``blas``), never
by path. Every failure is a ``CorruptFileError`` naming the field; nothing else escapes.

This checks that a file is well formed, not that its native code is harmless: a saved executable
(and a compilation-cache entry) is native code that runs in the loading process, to be loaded
only from trusted sources, as a pickle is. ``hlo.load(path, recompile=True)`` uses only the IR.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .hlox import CorruptFileError

LIBRARIES = ("blas",)  # the shared libraries a manifest may name (resolved by the runtime)
MAX_DIM = 1 << 40
MAX_ARRAY_BYTES = 1 << 48
MAX_ARENA_BYTES = 1 << 48
MAX_RANK = 64
MAX_TEXT = 1 << 16  # one string field
MAX_ITEMS = 1 << 20  # one list field
_SYMBOL = re.compile(r"^[A-Za-z_.$][A-Za-z0-9_.$]{0,255}$")
_CORE_SYMBOL = re.compile(r"^hlo\.gemm_core\.[a-z0-9]{1,8}\.[a-z0-9.]{1,32}\.[0-9a-f]{16}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_FEATURE = re.compile(r"^[+-][A-Za-z0-9._-]{1,64}$")
_KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                 "alias_size_in_bytes", "constant_size_in_bytes")


class _Bad(Exception):
    pass


def _fail(path: str, what: str):
    raise _Bad(f"{path}: {what}")


def _obj(v: Any, path: str, required: Sequence[str] = ()) -> dict:
    if not isinstance(v, dict):
        _fail(path, f"expected an object, got {type(v).__name__}")
    for k in required:
        if k not in v:
            _fail(path, f"missing field {k!r}")
    return v


def _int(v: Any, path: str, lo: int = 0, hi: int = 1 << 62) -> int:
    if type(v) is not int or not lo <= v <= hi:
        _fail(path, f"expected an integer in [{lo}, {hi}], got {_show(v)}")
    return v


def _bool(v: Any, path: str) -> bool:
    if type(v) is not bool:
        _fail(path, f"expected true or false, got {_show(v)}")
    return v


def _str(v: Any, path: str, pattern: Optional[re.Pattern] = None) -> str:
    if not isinstance(v, str) or len(v) > MAX_TEXT:
        _fail(path, f"expected a string (at most {MAX_TEXT} characters), got {_show(v)}")
    if pattern is not None and not pattern.match(v):
        _fail(path, f"{_show(v)} is not allowed here")
    return v


def _list(v: Any, path: str, item: Callable[[Any, str], Any], max_items: int = MAX_ITEMS) -> list:
    if not isinstance(v, list) or len(v) > max_items:
        _fail(path, f"expected a list (at most {max_items} items), got {_show(v)}")
    for i, x in enumerate(v):
        item(x, f"{path}[{i}]")
    return v


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:60] + "..."


def _dtype(v: Any, path: str) -> int:
    """The item size of a dtype name."""
    from hlo.ir.types import BY_NAME
    if not isinstance(v, str) or v not in BY_NAME:
        _fail(path, f"unknown element type {_show(v)}")
    return BY_NAME[v].np_dtype.itemsize


def _array(d: Any, path: str, runtime: bool) -> Tuple[str, Tuple[int, ...]]:
    _obj(d, path, ("dtype", "shape"))
    size = _dtype(d["dtype"], f"{path}.dtype")
    shape = _list(d["shape"], f"{path}.shape", lambda x, p: _int(x, p, 0, MAX_DIM), MAX_RANK)
    if math.prod(shape) * size > MAX_ARRAY_BYTES:
        _fail(f"{path}.shape", f"{shape} is more than {MAX_ARRAY_BYTES} bytes")
    if runtime and d.get("layout") is not None:
        lay = _list(d["layout"], f"{path}.layout", _int, MAX_RANK)
        if sorted(lay) != list(range(len(shape))):
            _fail(f"{path}.layout", f"{lay} is not a permutation of the {len(shape)} dimensions")
    if not runtime and "weak_type" in d:
        _bool(d["weak_type"], f"{path}.weak_type")
    return d["dtype"], tuple(shape)


def _target(t: Any, path: str, kind: bool) -> None:
    _obj(t, path, ("triple", "features") + (("kind",) if kind else ()))
    if kind:
        _str(t["kind"], f"{path}.kind", _KIND)
    _str(t["triple"], f"{path}.triple", re.compile(r"^[A-Za-z0-9_.-]{1,128}$"))
    if t.get("cpu") is not None:
        _str(t["cpu"], f"{path}.cpu", re.compile(r"^[A-Za-z0-9_.-]{1,128}$"))
    features = _str(t["features"], f"{path}.features")
    for i, f in enumerate(features.split(",") if features else []):
        if not _FEATURE.match(f):
            _fail(f"{path}.features", f"feature {i} {_show(f)} is not +name or -name")


def _number(v: Any, path: str) -> None:
    if isinstance(v, str):
        _str(v, path)
    elif type(v) not in (int, float) or (type(v) is float and not math.isfinite(v)):
        _fail(path, f"expected a finite number or a string, got {_show(v)}")


def _leaves(tree: Any, path: str) -> Optional[int]:
    """The leaf count of a pytree description (``hlo.aot.tree_to_json``); None for no tree."""
    if tree is None:
        return None
    if isinstance(tree, dict) and len(tree) == 1 and "nodes" in tree:
        # the flat form of a deep structure: nodes in prefix order
        nodes = _list(tree["nodes"], f"{path}.nodes", lambda x, p: None)
        count, open_children = 0, 1
        for i, node in enumerate(nodes):
            if open_children == 0:
                _fail(f"{path}.nodes[{i}]", "a node after the root's last")
            open_children -= 1
            if node == "leaf":
                count += 1
            elif node == "none":
                pass
            elif (isinstance(node, list) and len(node) == 2 and node[0] in ("tuple", "list")
                  and type(node[1]) is int and 0 <= node[1] <= len(nodes)):
                open_children += node[1]
            elif (isinstance(node, list) and len(node) == 2 and node[0] in ("dict", "odict")
                  and isinstance(node[1], list) and all(type(k) in (str, int) for k in node[1])):
                open_children += len(node[1])
            else:
                _fail(f"{path}.nodes[{i}]", f"malformed tree node {_show(node)}")
        if open_children:
            _fail(f"{path}.nodes", f"the nodes end with {open_children} children missing")
        return count
    count, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > 100 or not isinstance(node, dict) or len(node) != 1:
            _fail(path, f"malformed tree node {_show(node)}")
        (kind, body), = node.items()
        if kind == "leaf":
            count += 1
        elif kind in ("tuple", "list"):
            _list(body, f"{path}.{kind}", lambda x, p: None)
            stack.extend((c, depth + 1) for c in body)
        elif kind in ("dict", "odict"):
            _list(body, f"{path}.{kind}", lambda x, p: None)
            for pair in body:
                if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) in (str, int)):
                    _fail(path, f"malformed {kind} entry {_show(pair)}")
                stack.append((pair[1], depth + 1))
        elif kind != "none":
            _fail(path, f"unknown tree node kind {_show(kind)}")
    return count


def check_manifest(m: Any, where: str) -> None:
    """Check the whole manifest; raise ``CorruptFileError`` naming the first bad field."""
    try:
        _check(m)
    except _Bad as e:
        raise CorruptFileError(f"{where}: malformed manifest: {e}") from None
    except RecursionError:  # pragma: no cover - json nests at most ~1000 deep; checks are iterative
        raise CorruptFileError(f"{where}: malformed manifest: nested too deeply") from None


def _check(m: Any) -> None:
    _obj(m, "manifest", ("format_version", "target", "signature", "runtime", "analyses"))
    _int(m["format_version"], "format_version", 1, 1 << 31)
    if "hlo_version" in m:
        _str(m["hlo_version"], "hlo_version")
    _target(m["target"], "target", kind=True)

    sig = _obj(m["signature"], "signature", ("name", "arg_names", "inputs", "outputs",
                                             "in_tree", "out_tree"))
    _str(sig["name"], "signature.name")
    ins = [_array(d, f"signature.inputs[{i}]", False)
           for i, d in enumerate(_list(sig["inputs"], "signature.inputs", lambda x, p: None))]
    outs = [_array(d, f"signature.outputs[{i}]", False)
            for i, d in enumerate(_list(sig["outputs"], "signature.outputs", lambda x, p: None))]
    names = _list(sig["arg_names"], "signature.arg_names", _str)
    if len(names) != len(ins):
        _fail("signature.arg_names", f"{len(names)} names for {len(ins)} inputs")
    donated = _list(sig.get("donated", []), "signature.donated",
                    lambda x, p: _int(x, p, 0, max(len(ins) - 1, 0)))
    if donated and not ins or len(set(donated)) != len(donated):
        _fail("signature.donated", f"{donated} are not distinct inputs")
    for key, n in (("in_tree", len(ins)), ("out_tree", len(outs))):
        leaves = _leaves(sig[key], f"signature.{key}")
        if leaves is not None and leaves != n:
            _fail(f"signature.{key}", f"{leaves} leaves for {n} arrays")

    rt = _obj(m["runtime"], "runtime", ("format", "entry", "arena_size", "inputs", "outputs"))
    _int(rt["format"], "runtime.format", 0, 1 << 31)
    _str(rt["entry"], "runtime.entry", _SYMBOL)
    for key in ("py_entry", "call_entry"):
        if rt.get(key) is not None:
            _str(rt[key], f"runtime.{key}", _SYMBOL)
    arena = _int(rt["arena_size"], "runtime.arena_size", 0, MAX_ARENA_BYTES)
    _list(rt.get("kernels", []), "runtime.kernels", _str)
    cores = _list(rt.get("cores", []), "runtime.cores", lambda x, p: _obj(x, p, ("symbol", "sha256")))
    for i, c in enumerate(cores):  # library code the object calls (one code section each)
        _str(c["symbol"], f"runtime.cores[{i}].symbol", _CORE_SYMBOL)
        _str(c["sha256"], f"runtime.cores[{i}].sha256", _SHA256)
    if len({c["symbol"] for c in cores}) != len(cores):
        _fail("runtime.cores", "lists one symbol twice")
    libs = _list(rt.get("libraries", []), "runtime.libraries", _str)
    for i, lib in enumerate(libs):
        if lib not in LIBRARIES:
            _fail(f"runtime.libraries[{i}]", f"{_show(lib)} is not one of the libraries hlo "
                  f"links ({', '.join(LIBRARIES)}); a manifest never names a library by path")
    if rt.get("target") is not None:
        _target(rt["target"], "runtime.target", kind=False)
    if rt.get("profile") is not None and "kernels" in rt["profile"]:
        # a profiled cuda build (events at run time): each kernel's op, value and line
        kern = _obj(rt["profile"]["kernels"], "runtime.profile.kernels")
        if len(kern) > MAX_ITEMS:
            _fail("runtime.profile.kernels", f"more than {MAX_ITEMS} kernels")
        for name, info in kern.items():
            _str(name, "runtime.profile.kernels (a name)", _SYMBOL)
            for k in ("op", "value", "loc"):
                _str(_obj(info, f"runtime.profile.kernels[{name}]").get(k, ""),
                     f"runtime.profile.kernels[{name}].{k}")
    elif rt.get("profile") is not None:  # a profiled cpu build: its counters' symbol, a record a step
        prof = _obj(rt["profile"], "runtime.profile", ("symbol", "steps"))
        _str(prof["symbol"], "runtime.profile.symbol", _SYMBOL)
        for i, r in enumerate(_list(prof["steps"], "runtime.profile.steps",
                                    lambda x, p: _obj(x, p, ("name", "op", "what", "flops")))):
            for k in ("name", "op", "what", "where", "value", "loc"):
                _str(r.get(k, ""), f"runtime.profile.steps[{i}].{k}")
            _int(r["flops"], f"runtime.profile.steps[{i}].flops")
            if r.get("gemm") is not None:  # a product kernel's [B, M, K, N] and operand type
                _list(r["gemm"], f"runtime.profile.steps[{i}].gemm",
                      lambda x, p: _int(x, p, 0, MAX_DIM), max_items=4)
                if len(r["gemm"]) != 4:
                    _fail(f"runtime.profile.steps[{i}].gemm", "expected [B, M, K, N]")
                _dtype(r.get("dtype"), f"runtime.profile.steps[{i}].dtype")
    for part, sig_arrays in (("inputs", ins), ("outputs", outs)):
        arrays = [_array(d, f"runtime.{part}[{i}]", True)
                  for i, d in enumerate(_list(rt[part], f"runtime.{part}", lambda x, p: None))]
        if arrays != sig_arrays:
            _fail(f"runtime.{part}", f"{_types(arrays)} differ from the signature's {_types(sig_arrays)}")
    # donation: the inputs the code writes, and the outputs that are a donated input's memory
    nin, nout = len(ins), len(outs)
    if rt.get("inputs_written") is not None:
        written = _list(rt["inputs_written"], "runtime.inputs_written",
                        lambda x, p: _int(x, p, 0, max(nin - 1, 0)))
        if len(set(written)) != len(written) or (written and not nin):
            _fail("runtime.inputs_written", f"{_show(written)} are not distinct inputs")
    seen_in, seen_out = set(), set()
    for i, pair in enumerate(_list(rt.get("aliases", []), "runtime.aliases", lambda x, p: None)):
        path = f"runtime.aliases[{i}]"
        if not isinstance(pair, list) or len(pair) != 2 or not nin or not nout:
            _fail(path, f"expected [output, input], got {_show(pair)}")
        o = _int(pair[0], f"{path}[0]", 0, nout - 1)
        k = _int(pair[1], f"{path}[1]", 0, nin - 1)
        if o in seen_out or k in seen_in:
            _fail(path, "an output or input aliased twice")
        seen_out.add(o)
        seen_in.add(k)
        (od, osh), (idt, ish) = outs[o], ins[k]
        if math.prod(osh) * _dtype(od, path) != math.prod(ish) * _dtype(idt, path):
            _fail(path, f"output {o} and input {k} differ in size")
        if rt.get("inputs_written") is not None and k not in rt["inputs_written"]:
            _fail(path, f"input {k} is not in runtime.inputs_written")

    plan = m.get("buffer_plan")
    if plan is not None:
        _obj(plan, "buffer_plan", ("arena_size",))
        if _int(plan["arena_size"], "buffer_plan.arena_size", 0, MAX_ARENA_BYTES) != arena:
            _fail("buffer_plan.arena_size", f"{plan['arena_size']} differs from the runtime's {arena}")
        _list(plan.get("text", []), "buffer_plan.text", _str)
    _list(m.get("call_sequence", []), "call_sequence", _str)
    if m.get("imports") is not None:
        _list(m["imports"], "imports", lambda x, p: _str(x, p, _SYMBOL))
    sections = m.get("sections", {})
    _obj(sections, "sections")
    for k, v in sections.items():
        _str(v, f"sections[{_show(k)}]")

    an = _obj(m["analyses"], "analyses", ("cost", "memory"))
    cost = _obj(an["cost"], "analyses.cost")
    for k, v in cost.items():
        _number(v, f"analyses.cost[{_show(k)}]")
    mem = _obj(an["memory"], "analyses.memory", MEMORY_FIELDS)
    for k in mem:
        if k not in MEMORY_FIELDS:
            _fail("analyses.memory", f"unknown field {_show(k)}")
        _int(mem[k], f"analyses.memory.{k}")
    if mem["temp_size_in_bytes"] > arena:  # the arena holds the plan's temps and more scratch
        _fail("runtime.arena_size", f"{arena} is less than the {mem['temp_size_in_bytes']} "
              "temp bytes of the memory analysis")


def _types(arrays: List[Tuple[str, Tuple[int, ...]]]) -> str:
    return "(" + ", ".join(f"{d}[{','.join(map(str, s))}]" for d, s in arrays) + ")"


_IR_TYPE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\](?:\{[0-9,]*\})?")


def ir_main_types(ir_text: str) -> Optional[Tuple[list, list]]:
    """(inputs, outputs) of ``@main`` as (dtype, shape) pairs, read from its header line in
    hlo IR text; None when there is no such line."""
    for line in ir_text.splitlines():
        if line.startswith("func @main(") and ") -> (" in line:
            args, rest = line[len("func @main("):].split(") -> (", 1)
            results = rest.split(")", 1)[0]
            return ([(d, _shape(s)) for d, s in _IR_TYPE.findall(args)],
                    [(d, _shape(s)) for d, s in _IR_TYPE.findall(results)])
    return None


def _shape(s: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in s.split(",")) if s else ()


def check_ir_signature(ir_text: str, runtime: Dict[str, Any], where: str) -> None:
    """The IR section's ``@main`` must take and return the runtime's arrays (checked after
    ``check_manifest``)."""
    types = ir_main_types(ir_text)
    if types is None:
        raise CorruptFileError(f"{where}: the IR section has no @main function")
    for part, got in zip(("inputs", "outputs"), types):
        want = [(d["dtype"], tuple(d["shape"])) for d in runtime[part]]
        if got != want:
            raise CorruptFileError(f"{where}: the IR section's @main {part} {_types(got)} differ "
                                   f"from the manifest's {_types(want)}")
