"""Collectives in the reference interpreter: a parallel run is one thread per process, and the
processes meet at each collective in a rendezvous (``ParallelRun.exchange``) where every member
of the process group leaves its operands and takes everyone's.

``hlo.ir.interpreter.run_parallel(module, args, num_replicas, num_partitions)`` runs ``@main``
as every process of a ``num_replicas x num_partitions`` grid (process order: replica-major, as StableHLO's
``interpreter.run_parallel``); the ``run_parallel`` op runs one program region per process.
A plain ``hlo.ir.interpreter.run`` is a run of one process (replica 0, partition 0).

The k-th collective a process executes with a given process group meets the k-th of every
other member (per group, in program order). A process that fails makes the others fail; a
process that ends, or waits at another collective, while its group waits for it is a deadlock,
reported as an ``InterpreterError`` naming the processes and ops, never a hang.

Process groups follow StableHLO's spec (``hlo.ir.collective_ops`` says which attributes pick
which); a reduction folds the group's values in group order, so every member computes the same
bits.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..verifier import describe
from .registry import InterpreterError, attr, handler

ProcessId = Tuple[int, int]  # (replica_id, partition_id)


class CollectiveError(InterpreterError):
    """A collective cannot complete: a bad group for the run's grid, processes that do not meet,
    a deadlock. (An ``InterpreterError``, also where a compiled program's collective raises it.)"""


class _Failed(CollectiveError):
    """Raised in a process whose partner failed (the partner's error is the one reported)."""


class ParallelRun:
    """What the processes of one run share: the rendezvous slots and who is still running."""

    def __init__(self, num_replicas: int, num_partitions: int):
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.cond = threading.Condition()
        self.slots: Dict[tuple, Dict[ProcessId, object]] = {}
        self.taken: Dict[tuple, int] = {}
        self.waiting: Dict[ProcessId, str] = {}  # process -> the op it waits at
        self.finished: set = set()
        self.failed = False
        self.running = num_replicas * num_partitions

    def exchange(self, key: tuple, group: Sequence[ProcessId], me: ProcessId, value, what: str):
        """Leave ``value`` at the rendezvous ``key`` of ``group`` and return every member's
        value, in group order."""
        with self.cond:
            slot = self.slots.setdefault(key, {})
            slot[me] = value
            if len(slot) == len(group):
                # the last to arrive releases the others: they run again from now on
                released = [p for p in group if p != me and self.waiting.pop(p, None) is not None]
                self.running += len(released)
                self.cond.notify_all()
            else:
                self.running -= 1
                self.waiting[me] = what
                try:
                    while len(slot) < len(group):
                        if self.failed:
                            raise _Failed()
                        gone = [p for p in group if p not in slot and p in self.finished]
                        if gone:
                            raise CollectiveError(
                                f"{what}: process {_name(gone[0])} ended without reaching this "
                                f"collective (process {_name(me)} waits for it)")
                        if self.running == 0:
                            raise CollectiveError(self._deadlock(group, slot, me, what))
                        self.cond.wait()
                except BaseException:
                    if self.waiting.pop(me, None) is not None:
                        self.running += 1
                    raise
            out = [slot[p] for p in group]
            n = self.taken.get(key, 0) + 1
            if n == len(group):
                del self.slots[key]
                self.taken.pop(key, None)
            else:
                self.taken[key] = n
            return out

    def _deadlock(self, group, slot, me, what) -> str:
        missing = [p for p in group if p not in slot]
        elsewhere = "; ".join(f"process {_name(p)} waits at {self.waiting[p]}"
                              for p in missing if p in self.waiting)
        return (f"{what}: deadlock: process {_name(me)} waits for "
                f"{', '.join(_name(p) for p in missing)}" + (f" ({elsewhere})" if elsewhere else "")
                + "; the processes do not run the same collectives in the same order")

    def finish(self, me: ProcessId, failed: bool) -> None:
        with self.cond:
            self.finished.add(me)
            self.running -= 1
            if failed:
                self.failed = True
            self.cond.notify_all()


class Process:
    """One process of a run: its ids and its per-group collective counters."""

    def __init__(self, run: Optional[ParallelRun], replica_id: int, partition_id: int):
        self.run = run
        self.replica_id = replica_id
        self.partition_id = partition_id
        self.counters: Dict[tuple, int] = {}

    @property
    def num_replicas(self) -> int:
        return self.run.num_replicas if self.run else 1

    @property
    def num_partitions(self) -> int:
        return self.run.num_partitions if self.run else 1

    @property
    def id(self) -> ProcessId:
        return (self.replica_id, self.partition_id)

    def exchange(self, group: Sequence[ProcessId], value, what: str) -> list:
        group = tuple(group)
        if group == (self.id,):
            return [value]
        k = self.counters.get(group, 0)
        self.counters[group] = k + 1
        assert self.run is not None  # a group of others exists only in a parallel run
        kind = what.split("'")[1] if "'" in what else what
        got = self.run.exchange((group, k), group, self.id, (kind, what, value), what)
        for p, (other, where, _) in zip(group, got):
            if other != kind:
                raise CollectiveError(
                    f"{what}: process {_name(p)} meets it at {where}: the processes of a group "
                    f"must run the same collectives in the same order")
        return [v for _, _, v in got]


_SINGLE = Process(None, 0, 0)


def _name(p: ProcessId) -> str:
    return f"(replica {p[0]}, partition {p[1]})"


def process_of(it) -> Process:
    return getattr(it, "process", None) or _SINGLE


# --------------------------------------------------------------------------------------------
# Process groups (StableHLO spec: cross_replica, cross_partition, cross_replica_and_partition,
# flattened_ids)
# --------------------------------------------------------------------------------------------

class OpView:
    """What the semantics read of a collective: its name, attributes (missing ones take the op
    table's defaults), result shapes and how errors name it. Made from an ``Operation`` by the
    interpreter, from a compiled program's record by the CPU runtime."""

    __slots__ = ("name", "attrs", "shapes", "what")

    def __init__(self, name: str, attrs: dict, shapes: Sequence[tuple], what: str):
        self.name, self.attrs, self.shapes, self.what = name, attrs, [tuple(s) for s in shapes], what

    @classmethod
    def of(cls, op) -> "OpView":
        return cls(op.name, op.attrs, [r.type.shape for r in op.results], describe(op))

    def attr(self, name):
        return attr(self, name)


def process_groups(op: OpView, proc: Process) -> List[List[ProcessId]]:
    """The process groups of a collective in a run of ``proc``'s grid."""
    nr, npart = proc.num_replicas, proc.num_partitions
    groups = op.attr("replica_groups")
    channel = op.attr("channel_id") or 0
    global_ids = bool(op.attrs.get("use_global_device_ids", False))
    by_partition = op.name in ("all_to_all", "collective_permute", "collective_broadcast")

    def check(ids, limit, kind):
        for i in ids:
            if i >= limit:
                raise CollectiveError(f"{op.what}: replica_groups names {kind} {i}, but the run "
                                       f"has {limit} {kind}s")

    if channel <= 0:
        mode = "cross_replica"
    elif by_partition:
        mode = "cross_partition"
    elif global_ids:
        mode = "flattened_ids"
    else:
        mode = "cross_replica_and_partition"
    if mode == "cross_replica":
        gs = groups or (tuple(range(nr)),)
        check([i for g in gs for i in g], nr, "replica")
        return [[(r, p) for r in g] for p in range(npart) for g in gs]
    if mode == "cross_partition":
        gs = groups or (tuple(range(npart)),)
        check([i for g in gs for i in g], npart, "partition")
        return [[(r, p) for p in g] for r in range(nr) for g in gs]
    if mode == "cross_replica_and_partition":
        gs = groups or (tuple(range(nr)),)
        check([i for g in gs for i in g], nr, "replica")
        return [[(r, p) for p in range(npart) for r in g] for g in gs]
    gs = groups or (tuple(range(nr * npart)),)
    check([i for g in gs for i in g], nr * npart, "process")
    return [[(i // npart, i % npart) for i in g] for g in gs]


def my_group(op: OpView, proc: Process, required: bool = True) -> Optional[List[ProcessId]]:
    for g in process_groups(op, proc):
        if proc.id in g:
            return g
    if required:
        raise CollectiveError(f"{op.what}: process {_name(proc.id)} is in no process group "
                               f"of replica_groups {[list(g) for g in op.attr('replica_groups')]}")
    return None


# --------------------------------------------------------------------------------------------
# The ops' semantics: ``collective(proc, op, ins, combine)``, where ``combine(values)`` folds one
# operand's values of the group members (in group order) with the op's computation. The
# interpreter evaluates the region; the CPU runtime applies the computation's numpy ufunc.
# --------------------------------------------------------------------------------------------

def all_reduce(proc: Process, op: OpView, ins, combine) -> list:
    group = my_group(op, proc)
    everyone = proc.exchange(group, list(ins), op.what)
    return [np.asarray(combine([vals[i] for vals in everyone])).astype(x.dtype, copy=False)
            for i, x in enumerate(ins)]


def all_gather(proc: Process, op: OpView, ins, combine=None) -> list:
    group = my_group(op, proc)
    d = op.attrs["all_gather_dim"]
    everyone = proc.exchange(group, list(ins), op.what)
    return _checked(op, [np.concatenate([vals[i] for vals in everyone], axis=d)
                         for i in range(len(ins))])


def reduce_scatter(proc: Process, op: OpView, ins, combine) -> list:
    group = my_group(op, proc)
    d = op.attrs["scatter_dimension"]
    everyone = proc.exchange(group, ins[0], op.what)
    total = np.asarray(combine(everyone)).astype(ins[0].dtype, copy=False)
    n = len(group)
    if total.shape[d] % n:
        raise CollectiveError(f"{op.what}: dimension {d} ({total.shape[d]}) does not split "
                               f"into {n} parts (the process group's size)")
    return _checked(op, [np.split(total, n, axis=d)[group.index(proc.id)]])


def all_to_all(proc: Process, op: OpView, ins, combine=None) -> list:
    group = my_group(op, proc)
    sd, cd, n = op.attrs["split_dimension"], op.attrs["concat_dimension"], op.attrs["split_count"]
    if len(group) != n:
        raise CollectiveError(f"{op.what}: the process group has {len(group)} processes, "
                               f"split_count is {n}")
    everyone = proc.exchange(group, list(ins), op.what)
    me = group.index(proc.id)
    return _checked(op, [np.concatenate([np.split(vals[i], n, axis=sd)[me] for vals in everyone],
                                        axis=cd) for i in range(len(ins))])


def collective_permute(proc: Process, op: OpView, ins, combine=None) -> list:
    pairs = op.attrs["source_target_pairs"]
    by_partition = (op.attr("channel_id") or 0) > 0
    mine = proc.partition_id if by_partition else proc.replica_id
    limit = proc.num_partitions if by_partition else proc.num_replicas
    for s, t in pairs:
        if s >= limit or t >= limit:
            raise CollectiveError(f"{op.what}: source_target_pairs names {max(s, t)}, but the "
                                   f"run has {limit} {'partitions' if by_partition else 'replicas'}")
    if by_partition:
        domain = [(proc.replica_id, p) for p in range(limit)]
    else:
        domain = [(r, proc.partition_id) for r in range(limit)]
    everyone = proc.exchange(domain, ins[0], op.what)
    source = [s for s, t in pairs if t == mine]
    if not source:
        return [np.zeros_like(ins[0])]
    return [np.array(everyone[source[0]], copy=True)]


def collective_broadcast(proc: Process, op: OpView, ins, combine=None) -> list:
    group = my_group(op, proc, required=False)
    if group is None:
        return [np.zeros_like(ins[0])]
    everyone = proc.exchange(group, ins[0], op.what)
    return [np.array(everyone[0], copy=True)]


def replica_id(proc: Process, op: OpView, ins, combine=None) -> list:
    return [np.array(proc.replica_id, dtype=np.uint32)]


def partition_id(proc: Process, op: OpView, ins, combine=None) -> list:
    return [np.array(proc.partition_id, dtype=np.uint32)]


SEMANTICS = {f.__name__: f for f in (all_reduce, all_gather, reduce_scatter, all_to_all,
                                      collective_permute, collective_broadcast, replica_id,
                                      partition_id)}


def _checked(op: OpView, outs):
    for shape, o in zip(op.shapes, outs):
        if o.shape != shape:
            raise CollectiveError(f"{op.what}: the process group gives {o.dtype}{list(o.shape)} "
                                   f"for a result of shape {list(shape)}")
    return outs


def _region_fold(it, op, env):
    """``combine`` of the interpreter: the op's computation region, folded in group order."""
    region = op.regions[0] if op.regions else None

    def combine(values: Sequence[np.ndarray]) -> np.ndarray:
        acc = values[0]
        for v in values[1:]:
            if it.batchable(region):
                acc = np.asarray(it.eval_region_batched(region, [acc, v], env)[0])
            else:
                out = np.empty(np.shape(acc), dtype=np.asarray(acc).dtype)
                for idx in np.ndindex(out.shape):
                    out[idx] = it.eval_region(region, [np.asarray(acc)[idx], np.asarray(v)[idx]], env)[0]
                acc = out
        return acc
    return combine


def _interpret(it, op, ins, env):
    return SEMANTICS[op.name](process_of(it), OpView.of(op), ins, _region_fold(it, op, env))


for _name_ in SEMANTICS:
    handler(_name_)(_interpret)


# --------------------------------------------------------------------------------------------
# Running processes
# --------------------------------------------------------------------------------------------

def run_processes(make_interpreter, programs: Sequence, args: Sequence[Sequence[np.ndarray]],
                  num_replicas: int, num_partitions: int) -> List[List[np.ndarray]]:
    """Run ``programs[i]`` (a Region or a Function) on ``args[i]`` as process ``i`` (replica
    ``i // num_partitions``, partition ``i % num_partitions``), all at once, each in an
    interpreter ``make_interpreter()`` of its own; the results per process. The first process
    to fail (in process order) is the error raised."""
    from ..core import Function
    n = num_replicas * num_partitions
    if len(programs) != n or len(args) != n:
        raise InterpreterError(f"a run of {num_replicas} x {num_partitions} processes needs {n} "
                               f"programs and argument lists, got {len(programs)} and {len(args)}")
    run = ParallelRun(num_replicas, num_partitions)
    results: List[Optional[list]] = [None] * n
    errors: List[Optional[BaseException]] = [None] * n

    def work(i: int) -> None:
        it = make_interpreter()
        it.process = Process(run, i // num_partitions, i % num_partitions)
        prog = programs[i]
        try:
            with np.errstate(all="ignore"):
                if isinstance(prog, Function):
                    results[i] = it.call(prog, args[i])
                else:
                    results[i] = it.eval_region(prog, args[i], None)
        except BaseException as e:  # reported below, in process order
            errors[i] = e
            run.finish(it.process.id, failed=True)
            return
        run.finish(it.process.id, failed=False)

    threads = [threading.Thread(target=work, args=(i,), name=f"hlo-process-{i}", daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [(i, e) for i, e in enumerate(errors) if e is not None and not isinstance(e, _Failed)]
    if real:
        i, e = real[0]
        if isinstance(e, InterpreterError):
            raise InterpreterError(f"process {_name((i // num_partitions, i % num_partitions))}: {e}") from e
        raise e
    return [list(r or ()) for r in results]


@handler("run_parallel")
def _run_parallel(it, op, ins, env):
    nr, npart = op.attrs["num_replicas"], op.attrs["num_partitions"]
    args, k = [], 0
    for r in op.regions:
        args.append(list(ins[k:k + len(r.args)]))
        k += len(r.args)
    outs = run_processes(lambda: type(it)(it.module), list(op.regions), args, nr, npart)
    return [o for per in outs for o in per]

