"""jax.lax's small types and identities that hlo.lax's functions take or are (issue 34):
``Precision`` / ``PrecisionLike`` (accepted by dot_general, dot and the convolutions, which
compute every product at the operands' full precision whichever is asked: jax's HIGHEST),
``GatherScatterMode`` (gather and the scatters read its member names: CLIP, FILL_OR_DROP,
PROMISE_IN_BOUNDS; ONE_HOT is refused there with the modes hlo has), ``DotDimensionNumbers``
(the tuple type of dot_general's dimension_numbers), ``stage`` (lifts a value into the active
trace) and ``composite`` (a function whose meaning is its decomposition: hlo inlines it, there
is no composite op in hlo's IR)."""
from __future__ import annotations

import enum
import functools
from typing import Callable, Sequence, Tuple, Union

import numpy as np

from ..tracing.tracer import is_tracing
from .common import as_tracer


class Precision(enum.Enum):
    """dot_general's precision= values (jax's names). hlo computes at full precision for all."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    def __str__(self) -> str:
        return self.name


PrecisionLike = Union[None, str, Precision, Tuple[str, str], Tuple[Precision, Precision]]
DotDimensionNumbers = Tuple[Tuple[Sequence[int], Sequence[int]], Tuple[Sequence[int], Sequence[int]]]


class GatherScatterMode(enum.Enum):
    """How gather and scatter treat out-of-bounds indices (jax's names; hlo.lax.gather and the
    scatters take a member or its name)."""
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s) -> "GatherScatterMode":
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f"lax.GatherScatterMode: unknown gather mode {s!r}")


def stage(x, /):
    """``x`` lifted into the active trace (a traced value there; outside any trace, an array)."""
    return as_tracer(x, what="lax.stage") if is_tracing() else np.asarray(x)


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """``decomposition`` under a composite's name: its results are the decomposition's (hlo
    inlines it; the name and version are checked and kept on the function only)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"lax.composite: name must be a non-empty string, got {name!r}")
    if not isinstance(version, int) or version < 0:
        raise TypeError(f"lax.composite: version must be a non-negative int, got {version!r}")

    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)
    call.composite_name, call.composite_version = name, version  # type: ignore[attr-defined]
    return call
