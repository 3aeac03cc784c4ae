"""The step tree of a CUDA executable as pre-built records, and the loop that runs them.

``build(steps, env)`` turns ``Launch`` / ``Copy`` / ``LibraryCall("cublaslt", "matmul")`` /
``While`` / ``Switch`` steps into records once per call slot (a slot owns an arena and the
launch parameter storage, so concurrent callers never share either). Arena and constant
addresses are resolved then; only input and output addresses change between calls, and a
record lists exactly those as patches ``(slot, which, index, offset)``: ``which`` 0 for
inputs, 1 for outputs. ``run(records, bufs)`` is a plain loop over the records: patch the
pointers, launch (the "step walk"; with graphs, the loop over the segments and control flow).

Records are tuples (cheapest to unpack):

- ``(LAUNCH, args, ptrs, patches, name, what)``: ``args`` the whole ``cuLaunchKernel`` argument
  tuple (function, grid, block, shared bytes, stream, the packed parameter array);
- ``(COPY, dst, src, nbytes)`` with ``dst`` / ``src`` addresses ``(static, which, index, offset)``;
- ``(MATMUL, cublaslt_call)``;
- ``(WHILE, cond_records, cond_address, body_records, trip_count)``: with a trip count (known
  before the loop: ``passes.trip_count``) the body's records run that many times, the condition
  never, so no step waits for the device;
- ``(SWITCH, selector_address, is_pred, [branch_records...])``;
- ``(GRAPH, segment)``: a run of the records above replayed as one CUDA graph (``graph.py``'s
  ``graphify`` puts them in after ``build``).

While (unless its trip count is known) and Switch read their predicate / selector back from
the device: the only synchronizations inside a call.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Optional, Sequence

from hlo.runtime.steps import BufRef, Copy, KernelCall, Launch, LibraryCall, Switch, While

from . import cublaslt, driver
from .errors import KernelLaunchError
from .matmul_params import MatmulParams

LAUNCH, COPY, MATMUL, WHILE, SWITCH, GRAPH, TIMED = range(7)  # TIMED: profile.py's wrapping
_WHICH = {"input": 0, "output": 1}


class Env:
    """What records are built against: the module, the stream, constant and arena addresses,
    the byte sizes of inputs / outputs (for bounds checks), cuBLASLt and its workspace, and a
    few pinned host bytes for reading predicates."""

    def __init__(self, module, stream, consts: Sequence[int], const_sizes: Sequence[int], arena: int,
                 arena_size: int, in_sizes: Sequence[int], out_sizes: Sequence[int],
                 lt: Optional["cublaslt.Lt"], workspace: int, host_scratch: int):
        self.module, self.stream = module, stream
        self.consts, self.const_sizes = list(consts), list(const_sizes)
        self.arena, self.arena_size = arena, arena_size
        self.sizes = (list(in_sizes), list(out_sizes))
        self.lt, self.workspace = lt, workspace
        self.host_scratch = host_scratch
        self.timer: Any = None  # a profiled executable's ``profile.EventTimer``


def _address(ref: BufRef, env: Env, what: str):
    """``(static_address, which, index, offset)``: static for arena / constants, else a patch."""
    end = ref.offset + ref.size
    if ref.kind == "arena":
        if end > env.arena_size:
            raise ValueError(f"{what}: {ref} is outside the arena of {env.arena_size} bytes")
        return (env.arena + ref.offset, 0, 0, 0)
    if ref.kind == "const":
        if ref.index >= len(env.consts):
            raise ValueError(f"{what}: constant {ref.index} does not exist ({len(env.consts)} constants)")
        if end > env.const_sizes[ref.index]:
            raise ValueError(f"{what}: {ref} is outside constant {ref.index} of "
                             f"{env.const_sizes[ref.index]} bytes")
        return (env.consts[ref.index] + ref.offset, 0, 0, 0)
    which = _WHICH[ref.kind]
    sizes = env.sizes[which]
    if ref.index >= len(sizes):
        raise ValueError(f"{what}: {ref} names {ref.kind} {ref.index}, but there are {len(sizes)}")
    if end > sizes[ref.index]:
        raise ValueError(f"{what}: {ref} is outside {ref.kind} {ref.index} of {sizes[ref.index]} bytes")
    return (None, which, ref.index, ref.offset)


def _resolve(a, bufs) -> int:
    s, w, i, off = a
    return s if s is not None else bufs[w][i] + off


def build(steps: list, env: Env) -> list:
    """The records of ``steps`` (see the module's docstring); malformed steps raise ValueError."""
    from .module import KernelParams
    out = []
    for st in steps:
        if isinstance(st, Launch):
            what = f"launch of {st.name}"
            func = env.module.function(st.name)
            if st.shared_bytes > 48 * 1024:
                env.module.set_max_dynamic_shared(st.name, st.shared_bytes)
            _check_params(func, st)
            kp = KernelParams(len(st.refs), st.scalars)
            patches = []
            for j, r in enumerate(st.refs):
                a = _address(r, env, what)
                if a[0] is not None:
                    kp.ptrs[j] = a[0]
                else:
                    patches.append((j, a[1], a[2], a[3]))
            args = (func, *map(int, st.grid), *map(int, st.block), int(st.shared_bytes),
                    env.stream.handle, kp.address, 0)
            out.append((LAUNCH, args, kp.ptrs, tuple(patches), st.name, st.what, kp))
        elif isinstance(st, Copy):
            what = f"copy {st.src} -> {st.dst}"
            if any(r.size and st.nbytes > r.size for r in (st.src, st.dst)):
                raise ValueError(f"{what}: {st.nbytes} bytes do not fit the buffers")
            out.append((COPY, _address(st.dst, env, what), _address(st.src, env, what), int(st.nbytes)))
        elif isinstance(st, LibraryCall):
            if (st.library, st.fn) != ("cublaslt", "matmul"):
                raise ValueError(f"library call {st.library}.{st.fn} is not supported by the CUDA "
                                 "runtime (it has cublaslt.matmul)")
            out.append((MATMUL, MatmulCall(st, env)))
        elif isinstance(st, While):
            out.append((WHILE, build(st.cond, env), _address(st.cond_ref, env, "while condition"),
                        build(st.body, env), st.trip_count))
        elif isinstance(st, Switch):
            if not st.branches:
                raise ValueError("a switch step has no branches")
            out.append((SWITCH, _address(st.selector, env, "switch selector"), bool(st.is_pred),
                        [build(b, env) for b in st.branches]))
        elif isinstance(st, KernelCall):
            raise ValueError(f"step {st.name}: a CPU kernel call in a CUDA executable")
        else:
            raise ValueError(f"not a step: {st!r}")
    return out


def _check_params(func, st: Launch) -> None:
    """The kernel takes exactly the launch's parameters (pointers: 8 bytes; scalars: their
    size), where the driver can say (cuFuncGetParamInfo, CUDA 12.4+)."""
    cu = driver.cu
    get = getattr(cu, "cuFuncGetParamInfo", None)
    if get is None:
        return
    want = [8] * len(st.refs) + [{"i32": 4, "i64": 8, "f32": 4}[t] for t, _ in st.scalars]
    have = []
    while True:
        try:
            ret = get(func, len(have))
        except Exception:
            return
        if ret[0] is not driver.OK and int(ret[0]) != 0:
            break
        have.append(int(ret[2]))
        if len(have) > len(want):
            break
    if have and have != want:
        raise ValueError(f"kernel {st.name} takes {len(have)} parameter(s) of sizes {have}; the launch "
                         f"passes {len(want)} of sizes {want} ({st.what})")


class MatmulCall:
    """A cuBLASLt matrix product: its operand addresses and the plans by pointer alignment."""

    __slots__ = ("lt", "params", "addrs", "plans", "workspace", "stream", "what", "patched")

    def __init__(self, st: LibraryCall, env: Env):
        p = MatmulParams.from_json(st.params)
        names = list(p.inputs)
        if len(st.refs) != len(names) + 1 or not {"a", "b"} <= set(names) \
                or not set(names) <= {"a", "b", "c", "bias"}:
            raise ValueError(f"cublaslt.matmul: refs {list(map(str, st.refs))} do not match params "
                             f"inputs {names} + the result")
        if env.lt is None:
            raise ValueError("cublaslt.matmul step without a cuBLASLt handle")
        what = st.what or "cublaslt.matmul"
        addr = {n: _address(r, env, what) for n, r in zip(names, st.refs)}
        addr["d"] = _address(st.refs[-1], env, what)
        self.addrs = (addr["a"], addr["b"], addr.get("c", addr["d"]), addr.get("bias"), addr["d"])
        self.patched = any(x is not None and x[0] is None for x in self.addrs)  # reads an argument / result
        self.lt, self.params, self.plans = env.lt, p, {}
        self.workspace, self.stream, self.what = env.workspace, env.stream, what
        if ("bias" in names) != p.has_bias:
            raise ValueError(f"{what}: epilogue {p.epilogue} and the refs disagree "
                             "on a bias operand")
        self.plan_for((256, 256, 256, 256, 256))  # the heuristic runs at load, not in a call

    def plan_for(self, align):
        p = self.plans.get(align)
        if p is None:
            p = self.plans[align] = self.lt.plan(self.params, align)
        return p

    def addresses(self, bufs) -> tuple:
        """``(a, b, c, bias, d)`` for this call (bias 0 when there is none)."""
        return tuple(_resolve(x, bufs) if x is not None else 0 for x in self.addrs)

    def plan_at(self, addrs: tuple):
        a, b, c, bias, d = addrs
        return self.plan_for(cublaslt.pointer_alignment(a, b, c, d, bias))

    def launch(self, plan, addrs: tuple, stream: int) -> None:
        """One ``cublasLtMatmul`` on ``stream`` (a raw handle)."""
        a, b, c, bias, d = addrs
        plan.run(a, b, c, bias, d, self.workspace, stream)

    def __call__(self, bufs) -> None:
        addrs = self.addresses(bufs)
        self.launch(self.plan_at(addrs), addrs, self.stream.ptr)


SYNC = os.environ.get("HLO_CUDA_SYNC", "") not in ("", "0")


def run(records: list, bufs, env: Env) -> None:
    """Queue ``records`` on the stream; ``bufs`` = (input addresses, output addresses)."""
    cu = driver.cu
    launch = cu.cuLaunchKernel
    ok = driver.OK
    for r in records:
        k = r[0]
        if k == LAUNCH:
            ptrs = r[2]
            for j, w, i, off in r[3]:
                ptrs[j] = bufs[w][i] + off
            res = launch(*r[1])[0]
            if res is not ok:
                _launch_failed(res, r)
            if SYNC:
                res = cu.cuStreamSynchronize(env.stream.handle)[0]
                if res is not ok:
                    _launch_failed(res, r)
        elif k == COPY:
            driver.memcpy_dtod(_resolve(r[1], bufs), _resolve(r[2], bufs), r[3], env.stream)
        elif k == GRAPH:
            r[1].launch(bufs)
        elif k == MATMUL:
            r[1](bufs)
        elif k == WHILE:
            cond, where, body, trips = r[1], r[2], r[3], r[4]
            if trips is not None:
                for _ in range(trips):
                    run(body, bufs, env)
                continue
            while True:
                run(cond, bufs, env)
                if not _read_scalar(where, bufs, env, 1):
                    break
                run(body, bufs, env)
        elif k == SWITCH:
            branches = r[3]
            if r[2]:
                idx = 0 if _read_scalar(r[1], bufs, env, 1) else 1
            else:
                idx = _read_scalar(r[1], bufs, env, 4)
                if not 0 <= idx < len(branches):
                    idx = len(branches) - 1
            run(branches[idx], bufs, env)
        elif k == TIMED:  # a profiled build: timing events around the step (``profile.py``)
            timer, h = env.timer, env.stream.handle
            e = timer.start(h)
            run((r[2],), bufs, env)
            timer.stop(r[1], e, h)


def _read_scalar(where, bufs, env: Env, nbytes: int) -> int:
    """A predicate (1 byte) or s32 selector read back from the device (waits for the stream)."""
    driver.memcpy_dtoh(env.host_scratch, _resolve(where, bufs), nbytes, env.stream)
    if nbytes == 1:
        return ctypes.c_uint8.from_address(env.host_scratch).value
    return ctypes.c_int32.from_address(env.host_scratch).value


def _launch_failed(res, rec) -> None:
    if int(res) == 0:
        return
    name, text = driver.result_name(res)
    raise KernelLaunchError(f"launching kernel {rec[4]}" + (f" ({rec[5]})" if rec[5] else "")
                            + f" failed: {name}" + (f" ({text})" if text else "")
                            + f"; grid {tuple(rec[1][1:4])}, block {tuple(rec[1][4:7])}, "
                            f"{rec[1][7]} bytes of shared memory", "cuLaunchKernel", name)

