"""Donation at call time: whether a donated argument's memory may be written in place.

A program compiled with donated arguments (``donate_argnums``) writes some of its inputs
(``steps.written_inputs``: the buffer plan reuses them for an output or as scratch); an output
the plan wrote into a donated input is that input's memory (the manifest's ``aliases``), so no
copy follows. That is safe only for memory the caller gave up and nothing else reads during
the call. So, on every call, each written input must be:

- writable (not ``writeable=False``),
- memory numpy owns (the array or the array it views owns its data; hlo's recycled outputs,
  ``output_pool._Block``, count as owned), not a ``numpy.memmap`` (a file: a read-only one
  faults when written) nor a view of another object's buffer (``numpy.frombuffer`` over
  ``bytes`` or a ``bytearray``, ctypes memory, a foreign library's array): hlo cannot know who
  else reads it, or whether it may be written at all,
- disjoint from every other argument (the byte ranges they span do not overlap: the same
  array twice, overlapping slices, a reversed view are all caught; ``numpy.may_share_memory``).

Otherwise the donation is *declined*: the call runs on a private copy of that argument (which
its aliased output then is), and a ``DonationWarning`` names the argument and says why (once per
call site and reason, Python's default warning filter). Results are the same either way.

The checks cost two attribute reads a donated argument plus ~0.7 us a pair for the overlap
test on the Python paths (``Executable.run_unchecked`` makes them inline); the native entry (``backends/cpu/entry.py`` ``emit_call_entry``) makes the same
checks in its code (flags, owner, address ranges) and hands a call that fails one to the Python
path, which declines with the warning. ``DonationStats`` counts what happened, per executable.
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Optional, Sequence, Tuple

import numpy as np

from hlo.ir.errors import DonationWarning

from .output_pool import _Block

__all__ = ["DonationWarning", "DonationStats", "unusable", "prepare_host", "declined_ranges", "warn_declined"]


def unusable(a: np.ndarray) -> Optional[str]:
    """Why the memory of numpy array ``a`` may not be written in place, or None where it may."""
    if not a.flags.writeable:
        return "it is read-only (writeable=False)"
    b = a
    while True:
        if isinstance(b, np.memmap):
            return "it is a numpy.memmap (a memory-mapped file)"
        base = b.base
        if base is None:
            if b.flags.owndata:
                return None
            return "its memory is not numpy's own (an array made over a raw pointer)"
        if type(base) is _Block:  # hlo's recycled output memory
            return None
        if not isinstance(base, np.ndarray):
            if type(base) is memoryview:  # numpy.frombuffer: name what it views
                base = base.obj
            kind = type(base).__name__
            if kind == "mmap":
                return "it views a memory-mapped file (mmap)"
            return (f"it views the buffer of a {kind} object (numpy.frombuffer or a foreign "
                    "array), not memory numpy owns")
        b = base


class DonationStats:
    """What donation did on an executable's calls: ``used`` (arguments written in place),
    ``declined`` (arguments copied instead), ``aliased_bytes`` (bytes of results that were the
    donated memory itself), ``last_declined`` (argument name -> reason, of the last call that
    declined one). Updated without a lock: counts are approximate under concurrent calls."""

    __slots__ = ("used", "declined", "aliased_bytes", "last_declined")

    def __init__(self):
        self.used = 0
        self.declined = 0
        self.aliased_bytes = 0
        self.last_declined: dict = {}

    def as_dict(self) -> dict:
        return {"used": self.used, "declined": self.declined, "aliased_bytes": self.aliased_bytes,
                "last_declined": dict(self.last_declined)}

    def __repr__(self):
        return (f"DonationStats(used={self.used}, declined={self.declined}, "
                f"aliased_bytes={self.aliased_bytes})")


def _name(names: Optional[Sequence[str]], k: int) -> str:
    if names is not None and k < len(names):
        return str(names[k])
    return str(k)


def prepare_host(ins: tuple, written: Sequence[int], names: Optional[Sequence[str]],
                 stats: Optional[DonationStats], types: Optional[Sequence[str]] = None,
                 copied: Sequence[int] = ()) -> tuple:
    """``ins`` (C-contiguous numpy arrays, what the native code receives) with every written
    input that may not be written in place replaced by a private copy (with a warning); the
    others are used as they are. ``copied``: inputs already private copies (made by the
    caller's normalization: a strided view, another layout), declined with that reason."""
    out = None
    for k in written:
        a = ins[k] if out is None else out[k]
        if k in copied:
            why = ("it is not C-contiguous, or the program takes it in another layout (the call "
                   "converts it into a new array first)")
        else:
            why = unusable(a)
            if why is None:
                cur = ins if out is None else out
                for j, other in enumerate(cur):
                    if j != k and np.may_share_memory(a, other):
                        why = f"it shares memory with argument {_name(names, j)}"
                        break
        if why is None:
            if stats is not None:
                stats.used += 1
            continue
        if k not in copied:
            if out is None:
                out = list(ins)
            out[k] = np.array(a, order="C", copy=True)
        if stats is not None:
            stats.declined += 1
            stats.last_declined = {_name(names, k): why}
        warn_declined(_name(names, k), None if types is None else types[k], why)
    return ins if out is None else tuple(out)


def declined_ranges(ranges: Sequence[Optional[Tuple[int, int]]], written: Sequence[int],
                    owned: Sequence[bool], names: Optional[Sequence[str]] = None) -> dict:
    """For a runtime that sees arguments as address ranges (the CUDA runtime's device
    pointers): ``ranges[i]`` is input i's ``(address, bytes)`` or None (a private copy the
    runtime made), ``owned[i]`` whether its memory is the runtime's own. Returns
    ``{input: reason}`` for the written inputs that may not be written in place (the caller
    copies them); inputs declined earlier in ``written``'s order no longer count as overlapping
    (their copy is private)."""
    out = {}
    live = list(ranges)
    for k in written:
        r = live[k]
        if r is None:
            continue
        if not owned[k]:
            out[k] = "its memory belongs to another library (a foreign GPU array)"
        else:
            p, n = r
            for j, o in enumerate(live):
                if j != k and o is not None and n and o[1] and p < o[0] + o[1] and o[0] < p + n:
                    out[k] = f"it shares memory with argument {_name(names, j)}"
                    break
        if k in out:
            live[k] = None
    return out


_HLO_DIRS: Optional[Tuple[str, ...]] = None
_dirs_lock = threading.Lock()


def _hlo_dirs() -> Tuple[str, ...]:
    global _HLO_DIRS
    if _HLO_DIRS is None:
        with _dirs_lock:
            dirs = set()
            for name in ("hlo", "hlo.runtime", "hlo.passes", "hlo.backends", "hlo.ir"):
                m = sys.modules.get(name)
                for p in getattr(m, "__path__", ()) or ():
                    dirs.add(os.path.join(p, ""))
                    dirs.add(os.path.join(os.path.realpath(p), ""))
            _HLO_DIRS = tuple(sorted(dirs))
    return _HLO_DIRS


def _user_stacklevel() -> int:
    """The ``stacklevel`` of ``warnings.warn`` called from ``warn_declined`` that points at the
    first frame outside hlo (the user's call)."""
    dirs = _hlo_dirs()
    f = sys._getframe(2)
    level = 2
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(dirs) and not fn.startswith("<frozen"):
            return level
        f = f.f_back
        level += 1
    return 2


def warn_declined(name: str, type_str: Optional[str], why: str, stacklevel: Optional[int] = None) -> None:
    if name.startswith("argument "):  # a flat signature's "argument 3"
        name = name[len("argument "):]
    what = f"{name} ({type_str})" if type_str else name
    msg = (f"donated argument {what} is not used in place: {why}; the call works on a copy "
           "of it and the result does not reuse its memory")
    warnings.warn(msg, DonationWarning, stacklevel=stacklevel or _user_stacklevel())
