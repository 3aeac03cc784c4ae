"""``interpreter.probe`` records of one test function, as values of the function itself.

StableHLO's reference interpreter runs ``%y = interpreter.probe %x, probe_id = "p"`` as the
identity and serializes ``%x`` each time the op runs; ``check.expect_serialized_eq %e,
probe_id = "p", iter = N`` later reads the N-th record back and compares it with ``%e`` as
``expect_eq`` does (after comparing the two types). hlo computes the records instead of
writing them: before a function is imported the importer collects which (probe id, iteration)
pairs its checks read (``wanted``), and ``Probes`` keeps, per probe id, the number of records so
far (``count``) and one slot per wanted iteration holding that record. A probe at the top of
the function fills its slots directly (the count is known there); a probe in the body of a
top-level ``while`` gets the count and the slots as extra loop-carried values and fills a slot
with ``select(count == N, value, slot)``. The check then compares the slot with its operand and
requires ``count > N`` (the record exists): both become results of the function, so they are
computed by the target under test, like every other checked value.

The reference numbers records across all probe ids of a run (``index.csv``, one line per
record); hlo numbers them per probe id. The two agree whenever a function probes under one id,
as every test of the suite does.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple, Union

import numpy as np

from ..builder import Builder
from ..core import Region, Value
from ..types import TensorType, pred, s64
from .errors import UnsupportedError

Key = Tuple[str, Optional[int]]  # (probe id, None) is its count; (probe id, N) its N-th record


class Probes:
    def __init__(self, top: Region, wanted: Dict[str, Set[int]]):
        self.top = top  # the function's body
        self.region = top  # the region whose values ``count`` and ``slots`` are
        self.wanted = wanted
        self.count: Dict[str, Union[int, Value]] = {}
        self.slots: Dict[Key, Value] = {}
        self.types: Dict[str, TensorType] = {}

    @property
    def any(self) -> bool:
        return bool(self.count)

    def record(self, b: Builder, region: Region, probe_id: str, v: Value, loc) -> None:
        """One run of ``interpreter.probe`` on ``v``, built with ``b`` in ``region``."""
        if region is not self.region:
            raise UnsupportedError("interpreter.probe", "inside a region other than the function's "
                                   "body or the body of a while loop at its top", loc)
        t = self.types.setdefault(probe_id, v.type)
        if t != v.type:
            raise UnsupportedError("interpreter.probe", f"probe '{probe_id}' records both {t} and {v.type}", loc)
        count = self.count.get(probe_id, 0)
        for n in sorted(self.wanted.get(probe_id, ())):
            if isinstance(count, int):
                if count == n:
                    self.slots[(probe_id, n)] = v
                continue
            hit = b.value("compare", [count, _scalar(b, n, s64)], attrs={"comparison_direction": "EQ"})
            hit = b.value("broadcast_in_dim", [hit], attrs={"broadcast_dimensions": ()},
                          result_types=[TensorType(t.shape, pred)])
            self.slots[(probe_id, n)] = b.value("select", [hit, v, self._slot(b, probe_id, n)])
        self.count[probe_id] = count + 1 if isinstance(count, int) else \
            b.value("add", [count, _scalar(b, 1, s64)])

    def _slot(self, b: Builder, probe_id: str, n: int) -> Value:
        v = self.slots.get((probe_id, n))
        if v is None:
            t = self.types[probe_id]
            v = b.value("constant", [], attrs={"value": np.zeros(t.shape, t.dtype.np_dtype)})
        return v

    # -- while loops ----------------------------------------------------------------------
    def carried(self, b: Builder, probe_ids: List[str], types: Dict[str, TensorType]) -> Tuple[List[Key], List[Value]]:
        """The keys and the values (built with ``b``) a while loop whose body probes under
        ``probe_ids`` carries: each id's count, then its wanted records."""
        keys: List[Key] = []
        vals: List[Value] = []
        for pid in probe_ids:
            self.types.setdefault(pid, types[pid])
            count = self.count.get(pid, 0)
            keys.append((pid, None))
            vals.append(_scalar(b, count, s64) if isinstance(count, int) else count)
            for n in sorted(self.wanted.get(pid, ())):
                keys.append((pid, n))
                vals.append(self._slot(b, pid, n))
        return keys, vals

    def bind(self, keys: List[Key], vals: List[Value], region: Region) -> None:
        """From now on the records are ``vals`` (of ``region``): a loop body's arguments on
        entry, the loop's results after it."""
        for k, v in zip(keys, vals):
            if k[1] is None:
                self.count[k[0]] = v
            else:
                self.slots[k] = v
        self.region = region

    def values(self, keys: List[Key]) -> List[Value]:
        return [self.count[k[0]] if k[1] is None else self.slots[k] for k in keys]

    # -- checks ---------------------------------------------------------------------------
    def lookup(self, b: Builder, probe_id: str, n: int, like: Value) -> Tuple[Value, Value]:
        """The N-th record of ``probe_id`` and a pred scalar saying whether it exists (when
        it cannot, ``like`` stands in for the record)."""
        count = self.count.get(probe_id, 0)
        if isinstance(count, int):
            exists = count > n
            return (self.slots[(probe_id, n)] if exists else like), _scalar(b, exists, pred)
        exists = b.value("compare", [count, _scalar(b, n, s64)], attrs={"comparison_direction": "GT"})
        return self.slots[(probe_id, n)], exists


def _scalar(b: Builder, value, et) -> Value:
    return b.value("constant", [], attrs={"value": np.array(value, dtype=et.np_dtype)})
