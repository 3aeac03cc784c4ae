"""Non-temporal (streaming) stores for large outputs.

A kernel that writes a buffer larger than the last-level cache with ordinary stores first reads
every cache line it writes (read-for-ownership): a streaming elementwise kernel then moves 3
bytes for every 2 it means to. x86 non-temporal stores (``vmovntps``) write whole lines without
reading them; on the 2-core Zen 3 host a 64 MiB negate took 4.1 ms of CPU instead of 7.7 ms.

LLVM's loop vectorizer refuses a scalar store marked ``!nontemporal`` (a vector non-temporal
store must be aligned to the vector size, which a scalar store's alignment cannot promise), so
the kernels mark the stores of a streaming output differently:

1. The kernel tests the output pointers' alignment at run time and runs a twin of the inner
   loop for the aligned case, in which ``llvm.assume`` states the alignment and every store to
   the output carries the TBAA tag ``hlo.stream`` (a type no other access has: it changes no
   alias answer, and the vectorizer keeps TBAA tags on the vector stores it makes).
2. After LLVM's optimization pipeline, ``add_nontemporal_hints`` adds ``!nontemporal`` to the
   tagged *vector* stores whose alignment LLVM itself proved to be at least their size (the
   vectorized main loop; the scalar remainder keeps ordinary stores), and the module is parsed
   again for code generation. Nothing else changes, and a store whose alignment LLVM could not
   prove stays an ordinary store.
"""
from __future__ import annotations

import re

import llvmlite.ir as ir

STREAM_TYPE = "hlo.stream"

# Program outputs at least this large are written with streaming stores (well past the L2
# caches and half the 32 MiB L3 of the host: the caller gets them back after the whole program).
NT_MIN_BYTES = 16 << 20
# Arena temporaries are read again by a later kernel of the same call, maybe from the L3: they
# stream only when they could not stay there anyway.
NT_MIN_TEMP_BYTES = 64 << 20


def stream_tag(module: ir.Module) -> ir.values.MDValue:
    """The module's TBAA access tag marking stores to streaming outputs (made once per module:
    ``add_metadata`` returns the existing nodes for the same operands)."""
    root = module.add_metadata([ir.MetaDataString(module, "hlo tbaa root")])
    ty = module.add_metadata([ir.MetaDataString(module, STREAM_TYPE), root, ir.Constant(ir.IntType(64), 0)])
    return module.add_metadata([ty, ty, ir.Constant(ir.IntType(64), 0)])


def sfence(b: ir.IRBuilder) -> None:
    """Order the non-temporal stores before anything the caller does next (they bypass the
    cache's ordering; the next kernel may run on another thread)."""
    f = b.module.globals.get("llvm.x86.sse.sfence")
    if f is None:
        f = ir.Function(b.module, ir.FunctionType(ir.VoidType(), []), name="llvm.x86.sse.sfence")
    b.call(f, [])


_VEC_STORE = re.compile(
    r"^(\s*store <(\d+) x (float|double|i8|i16|i32|i64|half)> [^\n]*?, align (\d+)), !tbaa (![0-9]+)(.*)$",
    re.M)
_BITS = {"float": 32, "double": 64, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "half": 16}


def add_nontemporal_hints(text: str):
    """Optimized module text -> the same text with ``!nontemporal`` on the tagged, aligned vector
    stores (see the module docstring), or None when there is no such store."""
    if STREAM_TYPE not in text:
        return None
    m = re.search(r"^(![0-9]+) = !\{!\"" + re.escape(STREAM_TYPE) + r"\"", text, re.M)
    if m is None:
        return None
    type_id = m.group(1)
    tags = set(re.findall(r"^(![0-9]+) = !\{" + re.escape(type_id) + r", " + re.escape(type_id)
                          + r", i64 0\}", text, re.M))
    if not tags:
        return None
    ids = [int(x) for x in re.findall(r"^!([0-9]+) = ", text, re.M)]
    nt = f"!{max(ids) + 1}"
    hits = 0

    def fix(mo):
        nonlocal hits
        lanes, ety, align, tag = int(mo.group(2)), mo.group(3), int(mo.group(4)), mo.group(5)
        size = lanes * _BITS[ety] // 8
        if tag not in tags or size < 16 or align < size or "!nontemporal" in mo.group(6):
            return mo.group(0)
        hits += 1
        return f"{mo.group(1)}, !tbaa {tag}, !nontemporal {nt}{mo.group(6)}"

    out = _VEC_STORE.sub(fix, text)
    if not hits:
        return None
    return out + f"\n{nt} = !{{i32 1}}\n"
