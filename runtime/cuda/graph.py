"""Replaying runs of a CUDA executable's steps as CUDA graphs.

``graphify(records, env, min_records)`` (``launch.py``'s records, one call slot's) replaces
every maximal run of at least ``min_records`` consecutive graphable records -- kernel launches,
device copies, cuBLASLt products -- by one ``(GRAPH, Segment)`` record, at every depth (the
body of a While, the branches of a Switch). A call then costs one ``cuGraphLaunch`` per
segment instead of one driver call per step.

What stays a plain record: While and Switch themselves (they read a predicate back to the host
and choose what runs next, so they split a program into segments; their bodies become
segments of their own; a While with a known trip count and a graphable body is unrolled into
the segments instead, see ``UNROLL_NODES``), a copy whose two ends are both arguments /
results (its source and destination may be the same memory when a result aliases a donated
argument), and runs shorter than ``min_records`` (the executable's default, 1, graphs every
run: on an H100 a one-node graph launched from Python cost 9.4 us a call against 11-12 us for a
direct ``cuLaunchKernel``,
whose eleven arguments cost more to convert). A segment whose graph cannot be built or
instantiated (a launch the driver refuses, e.g. too many threads a block) runs its records
through the step walk instead, which names the failing kernel.

A segment is a chain of nodes in step order, built on its first launch (the addresses of that
call's arguments and results go in) and instantiated once. Each later launch patches only the
nodes whose argument / result addresses changed since the previous launch of that segment:

- kernel nodes: the launch record's pre-packed parameter array is rewritten in place and
  ``cuGraphExecKernelNodeSetParams`` copies it into the executable graph;
- copy nodes: ``cuGraphExecMemcpyNodeSetParams`` with the new addresses;
- cuBLASLt products: the call is recorded by stream capture into a child graph;
  when one of its addresses changes it is captured again for the new ones (kept, a few per
  node, so alternating buffers are captured once) and swapped in with
  ``cuGraphExecChildGraphNodeSetParams``. Where the new addresses' alignment makes cuBLASLt
  choose another algorithm (another graph shape), the segment is built again. A capture costs
  far more than a direct ``cublasLtMatmul`` call (about 70 us against 25 on an H100), so once a
  segment has captured its products for new addresses ``CAPTURES_BEFORE_SPLIT`` times (results
  kept by the caller land at new addresses every call), it splits for good: the products that
  were captured again (their addresses changed, in that call or before) run as direct calls
  between graphs of the rest. Products that only read arguments which stay put from call to
  call (weights) stay in the graphs: H200, an unrolled 16-step RNN cell whose last product
  wrote the result, 567 -> 340 us a call, where every product that read an argument had
  become a direct call. (On cuda, buffer assignment keeps products out of the call's result
  and argument buffers anyway: ``BufferAssignment(products_in_outputs=False)``.)

A parameter update only affects launches queued after it, so a call may patch a segment that
an earlier call's launch still uses on the GPU.
"""
from __future__ import annotations

import gc
from typing import List

from . import driver
from .errors import CudaError, KernelLaunchError
from .launch import COPY, GRAPH, LAUNCH, MATMUL, SWITCH, WHILE, run

_CHILD_GRAPHS_KEPT = 4  # captured products per node (by addresses)
CAPTURES_BEFORE_SPLIT = 8
# A While with a known trip count whose body is all graphable records is unrolled into the
# graphs: wholly, into the segment around it, while steps x records stay within UNROLL_NODES;
# else its body is repeated UNROLL_NODES // records times in a segment of its own, launched
# trip_count // that times, and the steps left over join the next segment. H200, a fori_loop of
# five tanh-and-scale steps on 16x64 (one kernel and a copy a step), a segment a step ->
# unrolled: 64 steps 442 -> 364 us, 1000 steps 5715 -> 4720 us (jax.jit: 553, 6423). Steps that
# keep the GPU busy gain nothing (2048x2048: 972 -> 951 us; a 16-step RNN cell: 403 -> 417).
UNROLL_NODES = 512


def _graphable(r) -> bool:
    k = r[0]
    return k == LAUNCH or k == MATMUL or (k == COPY and (r[1][0] is not None or r[2][0] is not None))


def graphify(records: list, env, min_records: int) -> list:
    """``records`` with runs of graphable records replaced by segments (see the docstring)."""
    out, pending = [], []

    def flush():
        if len(pending) >= max(min_records, 1):
            out.append((GRAPH, Segment(list(pending), env)))
        else:
            out.extend(pending)
        pending.clear()

    for r in records:
        k = r[0]
        if k == COPY and r[3] == 0:
            continue  # nothing to copy
        if _graphable(r):
            pending.append(r)
            continue
        if k == WHILE and r[4] is not None:
            body = [b for b in r[3] if not (b[0] == COPY and b[3] == 0)]
            if all(map(_graphable, body)):
                trips = r[4]
                if len(body) * trips <= UNROLL_NODES:
                    pending.extend(body * trips)
                    continue
                per = max(1, UNROLL_NODES // len(body))
                flush()
                out.append((WHILE, r[1], r[2], [(GRAPH, Segment(body * per, env))], trips // per))
                pending.extend(body * (trips % per))
                continue
        flush()
        if k == WHILE:
            out.append((WHILE, graphify(r[1], env, min_records), r[2], graphify(r[3], env, min_records), r[4]))
        elif k == SWITCH:
            out.append((SWITCH, r[1], r[2], [graphify(b, env, min_records) for b in r[3]]))
        else:
            out.append(r)
    flush()
    return out


def _resolve(a, bufs) -> int:
    s, w, i, off = a
    return s if s is not None else bufs[w][i] + off


class Segment:
    """A run of launch / copy / product records replayed as one CUDA graph."""

    def __init__(self, records: list, env):
        self.records = records
        self.env = env
        self.names = [r[4] if r[0] == LAUNCH else "a copy" if r[0] == COPY else r[1].what for r in records]
        self._graph = None
        self._exec = None
        self._kernels = []   # (node, CUDA_KERNEL_NODE_PARAMS, ptrs, patches)
        self._copies = []    # (node, CUDA_MEMCPY3D, dst address, src address, [last dst, last src])
        self._products = []  # (node, MatmulCall, {addresses: child graph}, [last addresses, captures again])
        self._capture_stream = None
        self._recaptures = 0
        self._parts = None  # once split: callables of bufs (sub-segments' launch, direct products)

    # -- building -------------------------------------------------------------------------------

    def _build(self, bufs) -> None:
        cu = driver.cu
        check = driver.check
        self._release()
        graph = check(cu.cuGraphCreate(0), "cuGraphCreate")
        self._graph = graph
        ctx = self.env.module.ctx
        prev: List = []
        for r in self.records:
            k = r[0]
            if k == LAUNCH:
                args, ptrs, patches = r[1], r[2], r[3]
                for j, w, i, off in patches:
                    ptrs[j] = bufs[w][i] + off
                p = cu.CUDA_KERNEL_NODE_PARAMS()
                p.func = args[0]
                p.gridDimX, p.gridDimY, p.gridDimZ = args[1], args[2], args[3]
                p.blockDimX, p.blockDimY, p.blockDimZ = args[4], args[5], args[6]
                p.sharedMemBytes = args[7]
                p.kernelParams = args[9]
                node = check(cu.cuGraphAddKernelNode(graph, prev, len(prev), p), "cuGraphAddKernelNode",
                             f"adding kernel {r[4]} to a CUDA graph")
                if patches:
                    self._kernels.append((node, p, ptrs, patches))
            elif k == COPY:
                dst, src = _resolve(r[1], bufs), _resolve(r[2], bufs)
                m = cu.CUDA_MEMCPY3D()
                m.srcMemoryType = m.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
                m.srcDevice, m.dstDevice = src, dst
                m.WidthInBytes, m.Height, m.Depth = r[3], 1, 1
                node = check(cu.cuGraphAddMemcpyNode(graph, prev, len(prev), m, ctx.handle),
                             "cuGraphAddMemcpyNode", "adding a copy to a CUDA graph")
                if r[1][0] is None or r[2][0] is None:
                    self._copies.append((node, m, r[1], r[2], [dst, src]))
            else:  # MATMUL
                mm = r[1]
                addrs = mm.addresses(bufs)
                child = self._capture(mm, addrs)
                node = check(cu.cuGraphAddChildGraphNode(graph, prev, len(prev), child),
                             "cuGraphAddChildGraphNode", "adding a cuBLASLt product to a CUDA graph")
                if mm.patched:
                    self._products.append((node, mm, {addrs: child}, [addrs, 0]))
                else:  # the node holds a copy of it
                    _destroy_graph(child)
            prev = [node]
        self._exec = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate",
                           f"instantiating a CUDA graph of {', '.join(self.names)}")

    def _capture(self, mm, addrs):
        """The cuBLASLt call for ``addrs`` recorded into a graph (stream capture)."""
        cu = driver.cu
        if self._capture_stream is None:
            self._capture_stream = driver.Stream(self.env.module.ctx)
        cs = self._capture_stream
        plan = mm.plan_at(addrs)  # the heuristic runs outside the capture
        # No garbage collection inside the capture: a collected executable or buffer frees and
        # synchronizes from this thread, which invalidates a thread-local capture (seen once on
        # the H200: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED while recording a product)
        collecting = gc.isenabled()
        gc.disable()
        try:
            driver.check(cu.cuStreamBeginCapture(cs.handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                         "cuStreamBeginCapture")
            try:
                mm.launch(plan, addrs, cs.ptr)
            finally:
                g = driver.check(cu.cuStreamEndCapture(cs.handle), "cuStreamEndCapture",
                                 f"recording {mm.what} into a CUDA graph")
        finally:
            if collecting:
                gc.enable()
        return g

    # -- launching ------------------------------------------------------------------------------

    def launch(self, bufs) -> None:
        """Patch the nodes whose addresses changed, then ``cuGraphLaunch`` on the env's stream."""
        parts = self._parts
        if parts is not None:
            for part in parts:
                part(bufs)
            return
        exe = self._exec
        if exe is None:
            try:
                self._build(bufs)
            except CudaError:
                self._release()
                self._parts = [self._walk]
                return self._walk(bufs)
            exe = self._exec
        else:
            try:
                split = self._patch(exe, bufs)
            except BaseException:
                self._invalidate()
                raise
            if split:
                self._split()
                return self.launch(bufs)
            exe = self._exec  # built again where a product's graph changed shape
        res = driver.cu.cuGraphLaunch(exe, self.env.stream.handle)[0]
        if res is not driver.OK:
            name, text = driver.result_name(res)
            raise KernelLaunchError(f"launching the CUDA graph of {', '.join(self.names)} failed: {name}"
                                    + (f" ({text})" if text else ""), "cuGraphLaunch", name)

    def _walk(self, bufs) -> None:
        run(self.records, bufs, self.env)

    def _split(self) -> None:
        """For good: the products captured again for new addresses become direct calls, the
        runs between them sub-segments."""
        moved = {id(mm) for _, mm, _, last in self._products if last[1]}
        self._release()
        parts, pending = [], []
        for r in self.records + [None]:
            if r is None or (r[0] == MATMUL and id(r[1]) in moved):
                if pending:
                    parts.append(Segment(pending, self.env).launch)
                    pending = []
                if r is not None:
                    parts.append(r[1])
            else:
                pending.append(r)
        self._parts = parts

    def _patch(self, exe, bufs) -> bool:
        """Bring ``exe`` to ``bufs``' addresses; True when the segment should split instead."""
        cu = driver.cu
        ok = driver.OK
        for node, p, ptrs, patches in self._kernels:
            changed = False
            for j, w, i, off in patches:
                v = bufs[w][i] + off
                if ptrs[j] != v:
                    ptrs[j] = v
                    changed = True
            if changed:
                res = cu.cuGraphExecKernelNodeSetParams(exe, node, p)[0]
                if res is not ok:
                    driver.fail(res, "cuGraphExecKernelNodeSetParams", "patching a kernel's addresses")
        for node, m, d, s, last in self._copies:
            dst, src = _resolve(d, bufs), _resolve(s, bufs)
            if dst != last[0] or src != last[1]:
                m.dstDevice, m.srcDevice = dst, src
                driver.check(cu.cuGraphExecMemcpyNodeSetParams(exe, node, m, self.env.module.ctx.handle),
                             "cuGraphExecMemcpyNodeSetParams", "patching a copy's addresses")
                last[0], last[1] = dst, src
        split = False
        for node, mm, kept, last in self._products:
            addrs = mm.addresses(bufs)
            if addrs == last[0]:
                continue
            child = kept.get(addrs)
            if child is None:
                self._recaptures += 1
                last[1] += 1
                if self._recaptures > CAPTURES_BEFORE_SPLIT:
                    split = True  # every product whose addresses changed this call is marked
                if split:
                    continue
                if len(kept) >= _CHILD_GRAPHS_KEPT:  # the oldest goes (the exec holds a copy)
                    _destroy_graph(kept.pop(next(iter(kept))))
                child = kept[addrs] = self._capture(mm, addrs)
            res = cu.cuGraphExecChildGraphNodeSetParams(exe, node, child)[0]
            if res is not ok:  # another algorithm (another graph shape) for these alignments
                self._build(bufs)
                return False
            last[0] = addrs
        return split

    def _invalidate(self) -> None:
        """After a failed patch: the next launch rewrites every patched address."""
        for _, _, ptrs, patches in self._kernels:
            for j, _, _, _ in patches:
                ptrs[j] = 0
        for *_, last in self._copies:
            last[0] = last[1] = 0
        for *_, last in self._products:
            last[0] = None

    # -- teardown -------------------------------------------------------------------------------

    def _release(self) -> None:
        cu = driver.cu
        if cu is None:
            return
        if self._exec is not None:
            cu.cuGraphExecDestroy(self._exec)  # freed once an in-flight launch completes
        for _, _, kept, _ in self._products:
            for g in kept.values():
                _destroy_graph(g)
        if self._graph is not None:
            cu.cuGraphDestroy(self._graph)
        self._exec = self._graph = None
        self._kernels, self._copies, self._products = [], [], []

    def __del__(self):
        try:
            self._release()
        except Exception:  # interpreter shutdown
            pass


def _destroy_graph(g) -> None:
    try:
        driver.cu.cuGraphDestroy(g)
    except Exception:
        pass


__all__ = ["GRAPH", "Segment", "graphify"]  # GRAPH: launch.py's record kind
